"""The fused numba closed loop (the CPU default) against the eager torch Simulator.

Every built-in control mode, float32 and float64, a mixed batch (4-, 6- and 8-rotor frames, one
fully actuated) with the IMU, noise, wind and the ground: same trajectories to float rounding.
"""

from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import pytest
import torch

from volary.control.rate import RateLoopState
from volary.dynamics import hover_speeds
from volary.dynamics.state import field_numpy
from volary.errors import ConfigError
from volary.sim import Simulator

pytest.importorskip("numba")

PLATFORMS = ["crazyflie", "hexa", "tilted_hexa", "octo"]


def _setpoint(mode: str, sim: Simulator) -> torch.Tensor:
    p = sim.params
    mg = (p.mass * 9.81)[:, None]
    n = sim.n_envs
    rows = {
        "rotor_speeds": hover_speeds(p) * 1.01,
        "rotor_thrusts": (mg / 4) * (p.k_f > 0) * 4 / (p.k_f > 0).sum(-1, keepdim=True) * 1.02,
        "wrench": torch.cat(
            (
                torch.zeros(n, 2, dtype=p.dtype),
                mg * 1.02,
                torch.tensor([[1e-4, -1e-4, 1e-5]], dtype=p.dtype).expand(n, 3) * mg,
            ),
            1,
        ),
        "ctbr": torch.cat((mg * 1.01, torch.tensor([[0.3, -0.2, 0.1]]).expand(n, 3)), 1),
        "attitude": torch.cat((mg, torch.tensor([[0.05, -0.05, 0.2]]).expand(n, 3)), 1),
        "acceleration": torch.tensor([[0.2, -0.1, 0.1, 0.3]]).expand(n, 4),
        "velocity": torch.tensor([[0.3, -0.2, 0.1, 0.2]]).expand(n, 4),
        "position": torch.tensor([[0.5, 0.2, 1.5, 0.3]]).expand(n, 4),
        "pose": torch.tensor([[0.5, 0.2, 1.5, 0.05, -0.04, 0.3]]).expand(n, 6),
        "mellinger": torch.tensor(
            [[0.5, 0.2, 1.5, 0.2, 0.1, 0, 0.1, 0, 0, 0.1, 0, 0, 0.3, 0.1]]
        ).expand(n, 14),
    }
    return rows[mode].to(p.dtype)


def _pair(mode: str, dtype: torch.dtype, n_envs: int = 8, **kw) -> tuple[Simulator, Simulator]:
    args = dict(n_envs=n_envs, control=mode, dtype=dtype, imu="bmi085", seed=3, **kw)
    fused, eager = Simulator(PLATFORMS, **args), Simulator(PLATFORMS, compile=False, **args)
    for s in (fused, eager):
        s.set_wind([0.5, -0.3, 0.0], gust_std=0.3, gust_tau=0.5)
    assert fused._fused is not None and eager._fused is None
    return fused, eager


def _close(a, b, tol: float) -> None:
    for f in ("pos", "vel", "quat", "omega", "rotor_speed", "gust", "time"):
        x, y = getattr(a, f), getattr(b, f)
        scale = max(1.0, float(y.abs().max()))
        assert torch.allclose(x, y, rtol=0, atol=tol * scale), (f, float((x - y).abs().max()))
    for f in ("tick", "landed", "crashed", "diverged"):
        assert torch.equal(getattr(a, f), getattr(b, f)), f


MODES = [
    "rotor_speeds",
    "rotor_thrusts",
    "wrench",
    "ctbr",
    "attitude",
    "acceleration",
    "velocity",
    "position",
    "pose",
    "mellinger",
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("mode", MODES)
def test_fused_step_matches_eager(mode, dtype):
    """60 control steps (0.25 s at 240 Hz over 960 Hz physics) through step(): states, IMU
    readings and the controller's rate-loop state agree to float rounding."""
    fused, eager = _pair(mode, dtype)
    sp = _setpoint(mode, eager)
    tol = 2e-4 if dtype == torch.float32 else 1e-10
    for _ in range(60):
        a, b = fused.step(sp), eager.step(sp)
    _close(a, b, tol)
    ra, rb = fused.imu_reading, eager.imu_reading
    assert torch.allclose(ra.accel, rb.accel, atol=tol * 100)
    assert torch.allclose(ra.gyro, rb.gyro, atol=tol * 10)
    for f in ("rate", "rate_dot", "integral"):
        x, y = getattr(fused.controller.rate_state, f), getattr(eager.controller.rate_state, f)
        assert torch.allclose(x, y, atol=tol * max(1.0, float(y.abs().max())))


def test_the_rate_loop_state_after_a_fused_step_reads_copies_and_pickles_as_a_plain_one():
    """The fused loop publishes the rate-loop state as views made on first read: the same
    values as eager's, normal tensors even when first read in inference mode, and copies and
    pickles as a plain RateLoopState."""
    fused, eager = _pair("ctbr", torch.float64)
    sp = _setpoint("ctbr", eager)
    for _ in range(5):
        fused.step(sp), eager.step(sp)
    state = fused.controller.rate_state
    with torch.inference_mode():
        assert not state.rate.is_inference()
    want = eager.controller.rate_state
    copies = (copy.deepcopy(state), pickle.loads(pickle.dumps(state)))
    assert all(type(c) is RateLoopState for c in copies)
    for s in (state, *copies):
        for f in ("rate", "rate_dot", "integral"):
            torch.testing.assert_close(getattr(s, f), getattr(want, f), rtol=0, atol=1e-10)
        assert torch.equal(s.fresh, want.fresh)
    fused.controller.reset(torch.tensor([True] + [False] * 7))  # reads it, then a plain one
    assert fused.controller.rate_state.fresh[0] and not fused.controller.rate_state.fresh[1]


@pytest.mark.parametrize("mode", ["ctbr", "position"])
def test_fused_padded_buffers_match_eager(mode):
    """From PAD_MIN bytes a row the kernel buffers are padded (numba_step.padded); 260 envs of
    float32 are, on one thread and on two: the same flight as the eager Simulator."""
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            fused, eager = _pair(mode, torch.float32, n_envs=260)
            sp = _setpoint(mode, eager)
            for _ in range(20):
                a, b = fused.step(sp), eager.step(sp)
            _close(a, b, 2e-4)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("mode", ["position", "ctbr", "mellinger"])
def test_fused_run_is_one_call_and_matches_eager(mode):
    """run() with a held setpoint: the recorded Trajectory equals eager's, and a reset between
    runs (controller and IMU state replaced in torch) is picked up by the next fused call."""
    fused, eager = _pair(mode, torch.float64)
    sp = _setpoint(mode, eager)
    for _ in range(2):
        ta, tb = fused.run(sp, 0.2), eager.run(sp, 0.2)
        for f in ("time", "pos", "quat", "omega", "rotor_speed", "setpoint", "command"):
            x, y = getattr(ta, f), getattr(tb, f)
            assert x.shape == y.shape, f
            assert torch.allclose(x.double(), y.double(), atol=1e-9), f
        assert torch.equal(ta.crashed, tb.crashed)
        mask = torch.tensor([True, False] * 4)
        fused.reset(mask, pos=[0.0, 0.0, 2.0])
        eager.reset(mask, pos=[0.0, 0.0, 2.0])


def test_schedule_runs_a_trajectory_in_one_call():
    """A (T, N, S) schedule gives what stepping through it does, on both paths."""
    fused, eager = _pair("mellinger", torch.float64)
    steps = 48
    t = torch.arange(steps, dtype=torch.float64) / 240.0
    sched = torch.zeros(steps, 1, 14, dtype=torch.float64)
    sched[:, 0, 0], sched[:, 0, 2], sched[:, 0, 3] = 0.5 * t, 1.0, 0.5
    ta, tb = fused.run(sched, steps / 240.0), eager.run(sched, steps / 240.0)
    assert torch.allclose(ta.pos, tb.pos, atol=1e-10)
    assert torch.equal(ta.setpoint, tb.setpoint)
    with pytest.raises(ConfigError, match="schedule"):
        fused.run(sched[:10], steps / 240.0)


def test_divergence_reset_inside_a_fused_run():
    """A NaN setpoint for one step in the middle of a schedule: that env diverges, is reset
    by the Simulator between kernel calls, and the run goes on; the same as eager; both say
    the setpoint was the cause."""
    fused, eager = _pair("position", torch.float64)
    steps = 30
    sched = _setpoint("position", eager)[None].repeat(steps, 1, 1)
    sched[10, 2] = float("nan")
    with pytest.warns(RuntimeWarning, match=r"non-finite values .* env\(s\) 2;") as told:
        ta, tb = fused.run(sched, steps / 240.0), eager.run(sched, steps / 240.0)
    assert len(told) == 2  # once per Simulator, at the caller's line
    assert all(w.filename == __file__ for w in told)
    assert bool(ta.diverged[10, 2]) and bool(tb.diverged[10, 2])
    assert torch.allclose(ta.pos, tb.pos, atol=1e-9)
    _close(fused.state, eager.state, 1e-9)


def test_fused_is_independent_of_batch_size_and_threads():
    """Env 0's flight alone equals env 0's flight in a batch of 300 (the parallel kernel)."""
    sp = torch.tensor([0.5, 0.2, 1.5, 0.3])
    one = Simulator("crazyflie", n_envs=1, seed=5).run(sp, 0.1)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        many = Simulator("crazyflie", n_envs=300, seed=5).run(sp, 0.1)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one.pos[:, 0], many.pos[:, 0])


def test_custom_controller_and_thrust_rate_take_the_general_path():
    """A user's controller still works on the default backend (physics in numba, control in
    torch); the thrust-rate model has no numba kernel and runs eager."""
    from volary.control import make_controller

    class Hover:  # a user's controller: the built-in one, scaled
        mode, setpoint_size = "position", 4

        def __init__(self, params):
            self.inner = make_controller("position", params)

        def __call__(self, state, setpoint, dt):
            return self.inner(state, setpoint, dt) * 1.0

        def reset(self, mask=None):
            self.inner.reset(mask)

    sim = Simulator("crazyflie", controller=Hover)
    assert sim._fused is None and sim.backend == "numba"
    for _ in range(48):
        s = sim.step([0.0, 0.0, 1.2, 0.0])
    assert 1.0 < float(s.pos[0, 2]) < 1.3
    tr = Simulator("crazyflie", model="thrust_rate", control="ctbr")
    assert tr.backend == "eager"


def _randomized(sim: Simulator, rebuild: bool) -> None:
    """Heavier, stiffer vehicles (per env), as domain randomization sets them; ``rebuild``:
    a controller built for the true parameters (BoundaryPredictor's flights do this)."""
    from volary.control import make_controller

    p = sim.params
    scale = torch.linspace(0.8, 1.25, sim.n_envs, dtype=p.dtype)
    sim.params = p.replace(mass=p.mass * scale, inertia=p.inertia * scale[:, None, None])
    if rebuild:
        sim.controller = make_controller(sim.controller.mode, sim.params)


@pytest.mark.parametrize("rebuild", [False, True], ids=["nominal-controller", "rebuilt"])
@pytest.mark.parametrize("mode", ["position", "mellinger", "ctbr"])
def test_fused_loop_flies_the_controllers_own_model_and_a_replaced_controller(mode, rebuild):
    """The controller flies with its own model of the vehicle (the torch controller's params),
    not the Simulator's: with randomized params and the nominal controller, and after
    ``sim.controller`` is replaced by one built for the true params. The fused loop once read
    mass and inertia from the Simulator's params and kept the controller it was built with,
    so BoundaryPredictor's CPU flights differed from its CUDA (eager) ones."""
    fused, eager = _pair(mode, torch.float64, n_envs=6)
    for s in (fused, eager):
        _randomized(s, rebuild)
    assert fused._fused is not None and fused._fused.ctrl is fused.controller
    sp = _setpoint(mode, eager)
    for _ in range(60):
        a, b = fused.step(sp), eager.step(sp)
    _close(a, b, 1e-9)


def test_replacing_the_controller_switches_the_loop():
    """Another built-in mode gets a new fused loop; a user's controller steps eagerly (control
    in torch); a built-in controller again brings the fused loop back."""
    from volary.control import make_controller

    sim = Simulator("crazyflie", control="position")
    first = sim._fused
    sim.controller = make_controller("velocity", sim.params)
    assert sim._fused is not None and sim._fused is not first and sim._fused.mode != first.mode
    calls = []

    class Logged:
        mode, setpoint_size = "position", 4

        def __init__(self, params):
            self.inner = make_controller("position", params)

        def __call__(self, state, setpoint, dt):
            calls.append(1)
            return self.inner(state, setpoint, dt)

        def reset(self, mask=None):
            self.inner.reset(mask)

    sim.controller = Logged(sim.params)
    assert sim._fused is None
    sim.step([0.0, 0.0, 1.0, 0.0])
    assert calls == [1]
    sim.controller = make_controller("position", sim.params)
    assert sim._fused is not None
    other = Simulator("crazyflie", n_envs=3, control="position")
    with pytest.raises(ConfigError, match="controller: expected one built for 1 envs"):
        sim.controller = other.controller


def test_auto_backend_by_device_batch_and_model():
    """compile='auto': numba below 1,024 envs on the CPU, inductor from there, eager for the
    thrust-rate model and off the CPU; explicit choices pass through."""
    from volary.sim.simulator import resolve_backend

    assert resolve_backend("auto", "cpu", "rigid_body", 1) == "numba"
    assert resolve_backend("auto", "cpu", "rigid_body", 1023) == "numba"
    assert resolve_backend("auto", "cpu", "rigid_body", 1024) == "inductor"
    assert resolve_backend("auto", "cpu", "thrust_rate", 4096) == "eager"
    assert resolve_backend("auto", "cuda", "rigid_body", 8) == "warp"  # warp-lang installed
    assert resolve_backend("auto", "cuda", "thrust_rate", 8) == "eager"
    assert resolve_backend(False, "cpu", "rigid_body", 8) == "eager"
    assert resolve_backend(True, "cpu", "rigid_body", 8) == "inductor"
    assert resolve_backend("numba", "cpu", "rigid_body", 4096) == "numba"


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("mode", MODES)
def test_compiled_loop_matches_eager(mode, dtype):
    """The inductor closed loop (the default from 1,024 envs), every mode, both dtypes, on the
    mixed batch with IMU, wind and noise: 30 control steps agree with eager to float rounding.
    (One compile per case, tens of seconds each: slow.)"""
    args = dict(n_envs=8, control=mode, dtype=dtype, imu="bmi085", seed=3)
    comp = Simulator(PLATFORMS, compile=True, **args)
    eager = Simulator(PLATFORMS, compile=False, **args)
    assert comp._compiled is not None
    for s in (comp, eager):
        s.set_wind([0.5, -0.3, 0.0], gust_std=0.3, gust_tau=0.5)
    sp = _setpoint(mode, eager)
    tol = 2e-4 if dtype == torch.float32 else 1e-10
    for _ in range(30):
        a, b = comp.step(sp), eager.step(sp)
    _close(a, b, tol)
    assert torch.allclose(comp.imu_reading.accel, eager.imu_reading.accel, atol=tol * 100)
    for f in ("rate", "integral"):
        x, y = getattr(comp.controller.rate_state, f), getattr(eager.controller.rate_state, f)
        assert torch.allclose(x, y, atol=tol * max(1.0, float(y.abs().max())))


@pytest.mark.slow
def test_compiled_loop_sees_new_and_edited_gains_and_resets():
    """The compiled graph takes the controller's tensors as inputs: a replaced gains object, a
    gain edited in place and a reset (new rate-loop and IMU state) act as they do in eager."""
    args = dict(n_envs=6, control="ctbr", imu="bmi085", seed=5)
    comp = Simulator(PLATFORMS[:3], compile=True, **args)
    eager = Simulator(PLATFORMS[:3], compile=False, **args)
    sp = _setpoint("ctbr", eager)
    for k in range(24):
        if k == 6:
            for s in (comp, eager):
                s.controller.gains = s.controller.gains.override(
                    rate_p=2.0 * s.controller.gains.rate_p
                )
        if k == 12:
            for s in (comp, eager):
                s.controller.gains.rate_d.mul_(0.5)
        if k == 18:
            mask = torch.tensor([True, False, True, False, False, True])
            for s in (comp, eager):
                s.reset(mask)
        a, b = comp.step(sp), eager.step(sp)
    _close(a, b, 2e-4)
    for f in ("rate", "integral"):
        x, y = getattr(comp.controller.rate_state, f), getattr(eager.controller.rate_state, f)
        assert torch.allclose(x, y, atol=2e-4 * max(1.0, float(y.abs().max())))


@pytest.mark.slow
def test_compiled_loop_flies_a_replaced_controller():
    """inductor's closed loop takes the controller's tensors as inputs: a controller built for
    randomized params replaces the old one without a new graph, and flies as in eager."""
    comp, eager = (
        Simulator(PLATFORMS[:3], n_envs=6, control="mellinger", compile=c, dtype=torch.float64)
        for c in (True, False)
    )
    assert comp._compiled is not None
    sp = _setpoint("mellinger", eager)
    comp.step(sp), eager.step(sp)
    fn = comp._compiled.fn
    for s in (comp, eager):
        _randomized(s, rebuild=True)
    for _ in range(30):
        a, b = comp.step(sp), eager.step(sp)
    assert comp._compiled.fn is fn and comp._compiled.ctrl is comp.controller
    _close(a, b, 1e-9)


@pytest.mark.slow
def test_compiled_run_records_like_eager():
    """run() on the inductor loop (recorded by reference, stacked once) gives eager's
    Trajectory, through a divergence reset in the middle of the schedule."""
    args = dict(n_envs=6, control="position", dtype=torch.float64, imu="bmi085", seed=2)
    comp = Simulator(PLATFORMS[:3], compile=True, **args)
    eager = Simulator(PLATFORMS[:3], compile=False, **args)
    steps = 30
    sched = _setpoint("position", eager)[None].repeat(steps, 1, 1)
    sched[10, 2] = float("nan")
    ta, tb = comp.run(sched, steps / 240.0), eager.run(sched, steps / 240.0)
    assert bool(ta.diverged[10, 2]) and bool(tb.diverged[10, 2])
    for f in ("time", "pos", "vel", "quat", "omega", "rotor_speed", "command"):
        x, y = getattr(ta, f), getattr(tb, f)
        assert x.shape == y.shape, f
        assert torch.allclose(x, y, atol=1e-9, equal_nan=True), f
    assert torch.equal(ta.setpoint.isnan(), tb.setpoint.isnan())
    assert torch.equal(ta.crashed, tb.crashed)


def test_field_numpy_reads_a_lazy_state_without_making_tensors_and_any_state_alike():
    """``field_numpy`` (what the server sends): the values of the state's tensors, from the
    fused loop's buffers before any tensor is made, and from the tensors of a plain state or
    of fields already made (written in place too)."""
    fused, eager = _pair("ctbr", torch.float32)
    sp = _setpoint("ctbr", eager)
    for _ in range(3):
        fused.step(sp), eager.step(sp)
    lazy = fused.state
    names = ("pos", "vel", "quat", "omega", "rotor_speed", "gust", "time", "tick", "crashed")
    got = {n: field_numpy(lazy, n).copy() for n in names}
    assert lazy.__dict__["_made"] == []  # no tensor was made
    for n in names:
        assert np.array_equal(got[n], getattr(lazy, n).numpy()), n
    lazy.pos[0, 2] = 7.0  # a made field written in place is what field_numpy reads
    assert field_numpy(lazy, "pos")[0, 2] == 7.0
    plain = eager.state
    assert np.array_equal(field_numpy(plain, "vel"), plain.vel.numpy())


def test_a_disturbance_replaced_every_step_is_flown_and_keeps_the_fast_dispatch():
    """A World replaces the disturbance every control period (wake, surface): the fused loop
    writes the new values into the array its kernel reads and keeps calling the compiled
    overload directly; the flight matches eager's."""
    fused, eager = _pair("position", torch.float64, n_envs=4)
    sp = _setpoint("position", eager)
    for k in range(40):
        for s in (fused, eager):
            s.set_wind([0.5 * math.sin(0.3 * k), -0.3, 0.2 * math.cos(0.2 * k)])
        a, b = fused.step(sp), eager.step(sp)
        if k > 2:
            assert fused._fused._known and fused._fused._entry is not None
    _close(a, b, 1e-10)
