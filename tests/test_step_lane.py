"""The fused loop's fast step (issue 62): what a one-vehicle ``sim.step(sp).pos`` loop relies on.

The fast step skips numba's dispatch, keeps the setpoint array of a tensor passed again, and
checks the parameters, gains, disturbance and noise keys by version counter (one read per
counter: a few-env Simulator builds them as views of one buffer per dtype). Each test here
fails if the fast step skipped a check it needs: an in-place edit, a replaced object, an edited
setpoint or state, or an old state written by a later step.
"""

from __future__ import annotations

import pytest
import torch

from volary.control import make_controller
from volary.sim import Simulator

pytest.importorskip("numba")

SP = [0.6, -0.3, 1.4, 0.2]


def _sims(n: int = 1, **kw) -> tuple[Simulator, Simulator]:
    """A fused (numba) and an eager Simulator of the same vehicles, float64."""
    args = dict(n_envs=n, dtype=torch.float64, seed=5, **kw)
    fused, eager = Simulator("crazyflie", **args), Simulator("crazyflie", compile=False, **args)
    assert fused.fused_loop is not None and eager.fused_loop is None
    return fused, eager


def _fly(sims: tuple[Simulator, ...], sp: torch.Tensor, steps: int) -> None:
    for _ in range(steps):
        for s in sims:
            _ = s.step(sp).pos  # a user's loop reads the state each step


def _same(a: Simulator, b: Simulator, tol: float = 1e-10) -> None:
    for f in ("pos", "vel", "quat", "omega", "rotor_speed"):
        x, y = getattr(a.state, f), getattr(b.state, f)
        assert torch.allclose(x, y, rtol=0, atol=tol), (f, float((x - y).abs().max()))


# every in-place edit a user can make between fast steps: (object, field, edit)
EDITS = [
    ("params", "mass", lambda t: t.mul_(1.3)),
    ("params", "max_thrust", lambda t: t.mul_(0.3)),  # read only by the controller buffer
    ("params", "alloc_pinv", lambda t: t.mul_(0.9)),
    ("params", "drag_lin", lambda t: t.add_(0.2)),
    ("gains", "k_x", lambda t: t.mul_(0.4)),
    ("disturbance", "force", lambda t: t[:, 0].add_(0.05)),
]


def _target(sim: Simulator, obj: str) -> object:
    return sim.controller.gains if obj == "gains" else getattr(sim, obj)


@pytest.mark.parametrize("n", [1, 20])  # built as views of one buffer (few envs), or not
@pytest.mark.parametrize(("obj", "field", "edit"), EDITS, ids=[f"{o}.{f}" for o, f, _ in EDITS])
def test_an_in_place_edit_between_fast_steps_acts_as_in_eager(n, obj, field, edit):
    """An in-place edit of one tensor of ``sim.params``, the controller's gains or
    ``sim.disturbance`` after fast steps changes the next step as it does the eager
    Simulator's (a missed edit is off by centimetres, the tolerance is 1e-10)."""
    fused, eager = _sims(n)
    sp = torch.tensor(SP, dtype=torch.float64)
    _fly((fused, eager), sp, 20)
    for s in (fused, eager):
        edit(getattr(_target(s, obj), field))
    _fly((fused, eager), sp, 40)
    _same(fused, eager)
    moved = Simulator("crazyflie", n_envs=n, dtype=torch.float64, seed=5)  # no edit
    _fly((moved,), sp, 60)
    assert not torch.allclose(moved.state.pos, fused.state.pos, atol=1e-6), "edit without effect"


def test_replaced_parameters_gains_disturbance_and_keys_are_flown():
    """Objects replaced between fast steps (wind, parameters, gains, noise keys) are what the
    next step flies, as in eager."""
    fused, eager = _sims(1)
    sp = torch.tensor(SP, dtype=torch.float64)
    changes = [
        lambda s: s.set_wind([0.8, 0.0, 0.0], gust_std=0.2, gust_tau=0.4),
        lambda s: setattr(s, "params", s.params.replace(mass=s.params.mass * 1.2)),
        lambda s: setattr(s.controller, "gains", s.controller.gains.override(k_v=2.0)),
        lambda s: setattr(s, "keys", s.keys + 7),
        lambda s: s.keys.add_(3),  # the keys written in place
    ]
    for change in changes:
        _fly((fused, eager), sp, 15)
        for s in (fused, eager):
            change(s)
    _fly((fused, eager), sp, 15)
    _same(fused, eager)


def test_a_new_controller_between_fast_steps_is_flown():
    fused, eager = _sims(1)
    sp = torch.tensor(SP, dtype=torch.float64)
    _fly((fused, eager), sp, 10)
    for s in (fused, eager):
        p = s.params.replace(mass=s.params.mass * 1.1)
        s.controller = make_controller("position", p)
    _fly((fused, eager), sp, 30)
    _same(fused, eager)


def test_the_setpoint_tensor_edited_in_place_or_its_data_replaced_is_seen():
    """The fast step keeps the array of a setpoint tensor passed again; writing the tensor in
    place, or giving it new data (``.data =``), is seen by the next step."""
    fused, eager = _sims(1)
    unchanged = Simulator("crazyflie", n_envs=1, dtype=torch.float64, seed=5)
    sp = torch.tensor(SP, dtype=torch.float64)
    kept = sp.clone()  # the in-place edits only
    for k in range(60):
        if k % 10 == 5:
            sp[0] += 0.1  # in place
            kept[0] += 0.1
        if k == 33:
            sp.data = torch.tensor([0.0, 0.4, 1.0, 0.0], dtype=torch.float64)
        for s in (fused, eager):
            s.step(sp)
        unchanged.step(kept)
    _same(fused, eager)
    assert float(fused.state.vel[0, 1]) > float(unchanged.state.vel[0, 1]) + 0.1  # to y = 0.4


def test_a_converted_setpoint_edited_in_place_is_seen():
    """A float32 setpoint for a float64 Simulator is converted (a copy the fast step keeps);
    writing the tensor in place makes it convert again."""
    fused, eager = _sims(1)
    sp = torch.tensor(SP, dtype=torch.float32)
    for k in range(40):
        if k == 10:
            sp[1] = 0.5
        for s in (fused, eager):
            s.step(sp)
    _same(fused, eager)


def test_float32_setpoint_and_other_setpoint_forms_fly_alike():
    """A float32 tensor for a float64 Simulator (converted, then kept), a list and a new tensor
    every step fly the same steps bit for bit."""
    sims = [Simulator("crazyflie", n_envs=1, dtype=torch.float64, seed=2) for _ in range(3)]
    held = torch.tensor(SP, dtype=torch.float32)
    for _ in range(30):
        sims[0].step(held)
        sims[1].step([float(v) for v in held])
        sims[2].step(held.clone())
    for s in sims[1:]:
        assert torch.equal(s.state.pos, sims[0].state.pos)
        assert torch.equal(s.state.vel, sims[0].state.vel)


def test_states_returned_earlier_never_change():
    """A user's list of states (and tensors read from them) keeps every step's values."""
    sim = Simulator("crazyflie", n_envs=1)
    sp = torch.tensor(SP)
    states, first = [], []
    for _ in range(50):
        st = sim.step(sp)
        states.append(st)
        first.append(st.pos.clone())
    later = [(s.pos.clone(), s.vel.clone()) for s in states[::7]]
    for _ in range(50):
        sim.step(sp)
    for st, pos in zip(states, first, strict=True):
        assert torch.equal(st.pos, pos)
    for st, (pos, vel) in zip(states[::7], later, strict=True):
        assert torch.equal(st.pos, pos) and torch.equal(st.vel, vel)
    assert len({float(p[0, 0]) for p in first}) > 40  # the vehicle moved


def test_a_state_field_written_in_place_is_flown_from():
    """Writing the returned state's tensors in place (a teleport) is what the next step flies
    from, as in eager; a write to an older state is not."""
    fused, eager = _sims(1)
    sp = torch.tensor(SP, dtype=torch.float64)
    _fly((fused, eager), sp, 10)
    old = fused.state
    _fly((fused, eager), sp, 5)
    old.pos[0, 2] = 9.0  # an old state: not the Simulator's
    for s in (fused, eager):
        s.state.vel[0, 0] = 1.5
    _fly((fused, eager), sp, 20)
    _same(fused, eager)


def test_divergence_reset_and_reset_between_fast_steps():
    """``sim.reset`` and a divergence reset between fast steps act as in eager."""
    fused, eager = _sims(1)
    sp = torch.tensor(SP, dtype=torch.float64)
    _fly((fused, eager), sp, 10)
    for s in (fused, eager):
        s.reset(pos=[0.5, 0.5, 2.0])
    _fly((fused, eager), sp, 10)
    for s in (fused, eager):
        s.state.vel[0, 2] = float("nan")  # diverges in the next step: reset to home
    _fly((fused, eager), sp, 1)
    assert bool(fused.last_reset.all()) and bool(eager.last_reset.all())
    _fly((fused, eager), sp, 10)
    _same(fused, eager)


@pytest.mark.parametrize("mode", ["mellinger", "ctbr", "pose"])
def test_other_modes_and_the_imu_on_fast_steps_match_eager(mode):
    sp = {
        "mellinger": [0.5, 0.2, 1.5, 0.2, 0.1, 0, 0.1, 0, 0, 0.1, 0, 0, 0.3, 0.1],
        "ctbr": [0.3, 0.3, -0.2, 0.1],
        "pose": [0.5, 0.2, 1.5, 0.05, -0.04, 0.3],
    }[mode]
    fused, eager = _sims(1, control=mode, imu="bmi085")
    t = torch.tensor(sp, dtype=torch.float64)
    _fly((fused, eager), t, 20)
    for s in (fused, eager):
        s.imu.keys = s.imu.keys + 1  # new IMU noise keys: new draws
    _fly((fused, eager), t, 20)
    _same(fused, eager, 1e-9)
    assert torch.allclose(fused.imu_reading.gyro, eager.imu_reading.gyro, atol=1e-8)


def test_run_record_and_steps_interleave_bit_for_bit():
    """Fast steps, a recorded ``run`` and steps again give the same states as a Simulator that
    only steps (the run's call types the next step anew)."""
    a, b = (Simulator("crazyflie", n_envs=1, seed=4) for _ in range(2))
    sp = torch.tensor(SP)
    _fly((a, b), sp, 10)
    traj = a.run(sp, 0.1)
    for k in range(traj.pos.shape[0]):
        b.step(sp)
        assert torch.equal(b.state.pos, traj.pos[k]), k
    _fly((a, b), sp, 10)
    assert torch.equal(a.state.pos, b.state.pos) and torch.equal(a.state.quat, b.state.quat)


def test_few_env_objects_share_a_counter_and_keep_their_values():
    """A few-env numba Simulator builds its parameters, gains, disturbance and noise keys as
    views of one buffer (one version counter): the same values as ``from_airframes`` and the
    defaults give."""
    from dataclasses import fields

    few, many = Simulator("crazyflie", n_envs=2), Simulator("crazyflie", n_envs=2, compile=False)
    for a, b in ((few.params, many.params), (few.controller.gains, many.controller.gains),
                 (few.disturbance, many.disturbance)):  # fmt: skip
        for f in fields(a):
            x, y = getattr(a, f.name), getattr(b, f.name)
            assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y), f.name
            assert x.is_contiguous()
    assert torch.equal(few.keys, many.keys) and few.keys.dtype == many.keys.dtype
    for sim, shared in ((few, True), (many, False)):  # one version counter for all, or not
        before = [t._version for t in (sim.disturbance.force, sim.controller.gains.k_x, sim.keys)]
        sim.params.mass.add_(0.0)
        after = [t._version for t in (sim.disturbance.force, sim.controller.gains.k_x, sim.keys)]
        assert after == ([v + 1 for v in before] if shared else before)


@pytest.mark.parametrize("n", [1, 300])
def test_setpoints_made_in_inference_mode_fly_as_normal_ones(n):
    """A learner's rollout steps under torch.inference_mode, its actions inference tensors
    (which have no version counter): the flight equals the one with normal tensors, each
    setpoint passed twice (the second time the same tensor object)."""
    sps = [torch.tensor([0.3 * k, 0.1, 1.2, 0.0]) for k in range(6)]
    ref = Simulator("crazyflie", n_envs=n, seed=2)
    want = []
    for sp in sps:
        want += [ref.step(sp).pos.clone(), ref.step(sp).pos.clone()]
    sim = Simulator("crazyflie", n_envs=n, seed=2)
    got = []
    with torch.inference_mode():
        for sp in sps:
            isp = sp.clone()
            got += [sim.step(isp).pos.clone(), sim.step(isp).pos.clone()]
    assert torch.equal(torch.stack(want), torch.stack(got))
