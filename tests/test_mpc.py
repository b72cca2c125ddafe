"""The SOUS VIDE MPC expert (eq. 2): CasADi NMPC and batched torch iLQR on the thrust-rate model.

Figure-eight tracking (3 m, 2 m/s mean, one lap), model parity (CasADi vs torch vs the
simulator's thrust-rate physics), NMPC vs iLQR parity, failure fallbacks, config errors.
"""

from __future__ import annotations

import math
import sys
import warnings

import pytest
import torch

from volary.control import make_controller
from volary.control.mpc import (
    BatchedMpcController,
    GaussNewtonSqp,
    MpcConfig,
    MpcPlant,
    MpcStatus,
    NmpcController,
    model_step,
    state_vector,
)
from volary.control.references import FigureEight, figure_eight
from volary.dynamics import DynamicsConfig, MultirotorState, VehicleParams
from volary.dynamics.step import Disturbance, physics_step
from volary.errors import ConfigError, MissingDependencyError
from volary.math import random as vrandom
from volary.planning import flat_to_state, min_snap
from volary.sim import Simulator
from volary.types import Controller

PLATFORMS = ["crazyflie", "hexa", "fpv_racer_250", "sous_vide"]
REF = figure_eight(3.0, 2.0)
needs_casadi = pytest.mark.skipif(
    __import__("importlib").util.find_spec("casadi") is None, reason="casadi not installed"
)
CONTROLLERS = [pytest.param(NmpcController, marks=needs_casadi), BatchedMpcController]


def _sim(platforms, hz: float, physics_hz: float = 240.0) -> Simulator:
    return Simulator(
        platforms,
        model="thrust_rate",
        control="ctbr",
        control_hz=hz,
        physics_hz=physics_hz,
        stochastic=False,
    )


def _fly(sim: Simulator, ctrl, ref: FigureEight, laps: float = 1.0, offset=(0.0, 0.0, 0.0)):
    """Start on the reference (plus ``offset`` m), fly ``laps`` laps; position errors (K, N)."""
    sim.controller = ctrl  # (Simulator(controller=factory) builds one; here the test owns it)
    t0 = torch.zeros(sim.n_envs, 1, dtype=torch.float64)
    fs = flat_to_state(ref.evaluate(t0), sim.params.to(dtype=torch.float64))
    pos = fs.pos[:, 0] + torch.tensor(offset, dtype=torch.float64)
    sim.reset(pos=pos.float(), vel=fs.vel[:, 0].float(), quat=fs.quat[:, 0].float())
    errors, status = [], []
    for k in range(int(round(laps * ref.period / sim.dt))):
        sim.step(torch.full((sim.n_envs, 1), k * sim.dt))
        p_ref = ref.evaluate(torch.tensor((k + 1) * sim.dt, dtype=torch.float64)).pos
        errors.append((sim.state.pos.double() - p_ref).norm(dim=-1))
        status.append(ctrl.last_status.clone())
    return torch.stack(errors), torch.stack(status)


def _rms(err):
    return err.pow(2).mean(0).sqrt()


# ---- reference ---------------------------------------------------------------------------------
def test_figure_eight_is_3m_at_mean_speed_with_consistent_derivatives():
    ref = figure_eight(3.0, 2.0, height=1.5)
    t = torch.linspace(0.0, ref.period, 4001, dtype=torch.float64)
    f = ref.evaluate(t)
    assert f.pos[:, 0].max() - f.pos[:, 0].min() == pytest.approx(3.0, abs=1e-5)
    assert f.pos[:, 2].eq(1.5).all() and f.yaw.eq(0.0).all()
    seg = (f.pos[1:] - f.pos[:-1]).norm(dim=-1).sum()
    assert float(seg) / ref.period == pytest.approx(2.0, rel=1e-5)
    assert f.vel.norm(dim=-1).max() == pytest.approx(ref.peak_speed, rel=1e-6)
    h = 1e-5
    for lo, hi in (("pos", "vel"), ("vel", "acc"), ("acc", "jerk"), ("jerk", "snap")):
        num = (getattr(ref.evaluate(t + h), lo) - getattr(ref.evaluate(t - h), lo)) / (2 * h)
        torch.testing.assert_close(num, getattr(f, hi), rtol=1e-6, atol=1e-5)
    with pytest.raises(ConfigError, match="speed"):
        FigureEight(speed=0.0)


# ---- model parity ------------------------------------------------------------------------------
def _random_xu(n: int, gen: torch.Generator):
    q = torch.randn(n, 4, generator=gen, dtype=torch.float64)
    x = torch.cat(
        (torch.randn(n, 6, generator=gen, dtype=torch.float64), q / q.norm(dim=-1, keepdim=True)),
        -1,
    )
    u = torch.cat(
        (
            torch.rand(n, 1, generator=gen, dtype=torch.float64),
            torch.randn(n, 3, generator=gen, dtype=torch.float64),
        ),
        -1,
    )
    return x, u


def _params(names, dtype=torch.float64, device="cpu") -> VehicleParams:
    import volary.platforms

    return VehicleParams.from_airframes(
        [volary.platforms.get(n) for n in names], dtype=dtype, device=device
    )


@needs_casadi
def test_casadi_model_matches_torch_model():
    params = _params(PLATFORMS)
    plant = MpcPlant.from_params(params)
    x, u = _random_xu(4, torch.Generator().manual_seed(0))
    sqp = GaussNewtonSqp(MpcConfig(horizon=2))
    theta = plant.theta()
    want = model_step(plant, x, u, 0.05)
    for i in range(4):
        got = torch.as_tensor(sqp.step(x[i].numpy(), u[i].numpy(), theta[i]).full()[:, 0])
        torch.testing.assert_close(got, want[i], rtol=1e-12, atol=1e-12)


def test_torch_model_matches_simulator_thrust_rate_physics():
    """f_d of eq. 2 against volary.dynamics' thrust-rate step (RK4 at the same dt, no ground)."""
    params = _params(PLATFORMS)
    x, u = _random_xu(4, torch.Generator().manual_seed(1))
    state = MultirotorState.create(4, params.n_rotors, dtype=torch.float64)
    state = state.replace(pos=x[:, :3], vel=x[:, 3:6], quat=x[:, 6:])
    cfg = DynamicsConfig(model="thrust_rate", dt=0.01, stochastic=False, ground=False)
    dist = Disturbance.create(4, dtype=torch.float64)
    keys = vrandom.env_keys(0, torch.arange(4))
    nxt = physics_step(params, state, u, dist, keys, cfg)
    got = model_step(MpcPlant.from_params(params), x, u, 0.01)
    torch.testing.assert_close(got[:, :6], torch.cat((nxt.pos, nxt.vel), -1), rtol=0, atol=1e-9)
    q = got[:, 6:] / got[:, 6:].norm(dim=-1, keepdim=True)
    torch.testing.assert_close(q, nxt.quat, rtol=0, atol=1e-9)


def test_analytic_step_jacobians_match_finite_differences():
    from volary.control import ilqr
    from volary.control.mpc import model_step_jacobians

    plant = MpcPlant.from_params(_params(PLATFORMS))
    x, u = _random_xu(4, torch.Generator().manual_seed(2))
    x[:, 3:6] *= 3.0  # a few m/s, so the drag terms matter
    a, b = model_step_jacobians(plant, x, u, 0.05)
    a_fd, b_fd = ilqr.linearize(lambda xx, uu: model_step(plant, xx, uu, 0.05), x, u)
    torch.testing.assert_close(a, a_fd, rtol=0, atol=1e-6)
    torch.testing.assert_close(b, b_fd, rtol=0, atol=1e-6)


# ---- tracking ----------------------------------------------------------------------------------
@needs_casadi
def test_nmpc_tracks_figure_eight_within_5cm():
    sim = _sim("crazyflie", 20.0)
    err, status = _fly(sim, NmpcController(sim.params, REF), REF)
    rms = _rms(err)
    print(f"NMPC figure-eight 3 m 2 m/s, 20 Hz: RMS {rms.tolist()} m, max {err.max():.2e} m")
    assert (rms < 0.05).all(), rms
    assert (status <= MpcStatus.ITER_LIMIT).all()


@pytest.mark.slow  # 10-30 s on 2 cores; make test-slow
def test_batched_mpc_tracks_figure_eight_on_four_platforms():
    sim = _sim(PLATFORMS, 20.0)
    ctrl = BatchedMpcController(sim.params, REF, MpcConfig(max_iter=2))
    err, status = _fly(sim, ctrl, REF)
    rms = _rms(err)
    print(f"batched iLQR figure-eight, 4 platforms, 20 Hz: RMS {rms.tolist()} m")
    assert (rms < 0.05).all(), rms
    assert (status <= MpcStatus.ITER_LIMIT).all()


@pytest.mark.slow
@needs_casadi
@pytest.mark.parametrize("kind", ["nmpc", "batched"])
def test_mpc_tracks_figure_eight_at_60hz_from_an_offset_start(kind):
    """Control at 60 Hz with 50 ms stages (plans re-solved mid-stage), physics 960 Hz, starting
    0.35 m off the reference."""
    sim = _sim(PLATFORMS if kind == "batched" else "crazyflie", 60.0, physics_hz=960.0)
    cls = BatchedMpcController if kind == "batched" else NmpcController
    err, _ = _fly(sim, cls(sim.params, REF), REF, offset=(0.2, -0.2, 0.2))
    late = _rms(err[60:])
    print(f"{kind} 60 Hz, offset start: RMS {_rms(err).tolist()} m, after 1 s {late.tolist()} m")
    assert (_rms(err) < 0.1).all() and (late < 0.01).all(), (_rms(err), late)


@needs_casadi
def test_batched_ilqr_agrees_with_casadi_nmpc():
    """The fast path (batched iLQR) against the reference (CasADi SQP) on one step from an
    offset state: same first command within 1e-3 (limits inactive)."""
    params = _params(["crazyflie", "hexa"], dtype=torch.float32)
    cfg = MpcConfig(max_iter=30, tol=1e-10)
    state = MultirotorState.create(2, params.n_rotors)
    fs = flat_to_state(
        REF.evaluate(torch.zeros(2, 1, dtype=torch.float64)), params.to(dtype=torch.float64)
    )
    state = state.replace(
        pos=fs.pos[:, 0].float() + torch.tensor([0.1, -0.05, 0.05]),
        vel=fs.vel[:, 0].float(),
        quat=fs.quat[:, 0].float(),
    )
    t = torch.zeros(2, 1)
    a = NmpcController(params, REF, cfg)(state, t, 0.05)
    b = BatchedMpcController(params, REF, cfg)(state, t, 0.05)
    torch.testing.assert_close(a, b, rtol=0, atol=1e-3)


def test_batched_mpc_runs_on_device_with_a_polytrajectory(device):
    wp = torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.5, 1.2], [2.0, 0.0, 1.0]], dtype=torch.float64)
    traj = min_snap(wp, torch.tensor([1.5, 1.5], dtype=torch.float64))
    params = _params(["crazyflie", "hexa"], dtype=torch.float32, device=device)
    ctrl = BatchedMpcController(params, traj, MpcConfig(max_iter=2))
    state = MultirotorState.create(2, params.n_rotors, device=device, pos=[0.0, 0.0, 1.0])
    u = ctrl(state, torch.zeros(2, 1, device=device), 0.05)
    assert u.shape == (2, 4) and u.device.type == torch.device(device).type
    assert torch.isfinite(u).all() and (u[:, 0] > 0).all()
    assert isinstance(ctrl, Controller) and ctrl.mode == "mpc_batched"


def test_batched_mpc_same_commands_with_analytic_and_difference_jacobians():
    """32 envs x 20 stages use analytic Jacobians, 2 envs forward differences: same commands."""
    params, state = _two_envs()
    off = state.replace(pos=state.pos + torch.tensor([0.1, -0.1, 0.05]))
    big = BatchedMpcController(_params(["crazyflie"] * 32, dtype=torch.float32), REF)
    small = BatchedMpcController(params, REF)
    assert big._analytic and not small._analytic
    states = MultirotorState.create(32, params.n_rotors).where(
        torch.ones(32, dtype=torch.bool), off.index(torch.zeros(32, dtype=torch.long))
    )
    u_big = big(states, torch.zeros(32, 1), 0.05)
    u_small = small(off, torch.zeros(2, 1), 0.05)
    torch.testing.assert_close(u_big[:2], u_small, rtol=0, atol=1e-5)


@pytest.mark.parametrize("cls", CONTROLLERS)
def test_commands_respect_the_limits(cls):
    """Limits tighter than the figure-eight needs: every command stays inside them."""
    params, state = _two_envs()
    cfg = MpcConfig(thrust_limits=(0.1, 0.45), max_body_rate=(0.3, 0.3, 0.2), max_iter=3)
    ctrl = cls(params, REF, cfg)
    for k in range(3):
        u = ctrl(state, torch.full((2, 1), 0.05 * k), 0.05)
        assert (u[:, 0] >= 0.1 - 1e-6).all() and (u[:, 0] <= 0.45 + 1e-6).all()
        assert (u[:, 1:].abs() <= torch.tensor([0.3, 0.3, 0.2]) + 1e-6).all()


# ---- failures ----------------------------------------------------------------------------------
def _two_envs():
    params = _params(["crazyflie", "crazyflie"], dtype=torch.float32)
    fs = flat_to_state(
        REF.evaluate(torch.zeros(2, 1, dtype=torch.float64)), params.to(dtype=torch.float64)
    )
    state = MultirotorState.create(2, params.n_rotors).replace(
        pos=fs.pos[:, 0].float(), vel=fs.vel[:, 0].float(), quat=fs.quat[:, 0].float()
    )
    return params, state


def _nan_env0(state: MultirotorState) -> MultirotorState:
    pos = state.pos.clone()
    pos[0] = math.nan
    return state.replace(pos=pos)


@pytest.mark.parametrize("cls", CONTROLLERS)
def test_failed_solve_falls_back_reports_and_warns_once(cls):
    params, state = _two_envs()
    ctrl = cls(params, REF)
    dt = 0.05
    ctrl(state, torch.zeros(2, 1), dt)  # a plan to fall back on
    assert (ctrl.last_status <= MpcStatus.ITER_LIMIT).all()
    with pytest.warns(RuntimeWarning, match=r"env\(s\) \[0\].*FALLBACK_PLAN"):
        u = ctrl(_nan_env0(state), torch.full((2, 1), dt), dt)
    assert torch.isfinite(u).all()
    assert ctrl.last_status[0] == MpcStatus.FALLBACK_PLAN and ctrl.last_status[1] <= 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once: later failures are silent
        ctrl.reset(torch.tensor([True, False]))  # forget env 0's plan
        u = ctrl(_nan_env0(state), torch.full((2, 1), 2 * dt), dt)
    assert ctrl.last_status[0] == MpcStatus.FALLBACK_REFERENCE and torch.isfinite(u).all()
    assert ctrl.failures.tolist() == [2, 0]


@pytest.mark.parametrize("cls", CONTROLLERS)
def test_non_finite_state_without_plan_falls_back_to_the_reference(cls):
    params, state = _two_envs()
    fb = make_controller("mellinger", params, model="thrust_rate")
    ctrl = cls(params, REF, fallback=fb)
    bad = state.replace(vel=torch.tensor([[math.inf, 0.0, 0.0], [2.0, 2.0, 0.0]]))
    with pytest.warns(RuntimeWarning, match="FALLBACK"):
        u = ctrl(bad, torch.zeros(2, 1), 0.05)
    assert torch.isfinite(u).all()
    # the fallback controller sees the infinite velocity too, so the reference feed-forward flies
    assert ctrl.last_status[0] == MpcStatus.FALLBACK_REFERENCE
    assert ctrl.last_status[1] <= MpcStatus.ITER_LIMIT


def _far_off(state: MultirotorState) -> MultirotorState:
    upside_down = torch.tensor([[0.0, 1.0, 0.0, 0.0]] * state.n_envs)
    return state.replace(pos=state.pos + torch.tensor([5.0, 0.0, 0.0]), quat=upside_down)


def _nan_after(t_bad: float):
    """The figure-eight, but NaN from ``t_bad`` s on (a broken reference further ahead)."""

    def ref(t):
        f = REF.evaluate(t)
        bad = t >= t_bad
        out = []
        for k in f.__dataclass_fields__:
            v = getattr(f, k)
            out.append(torch.where(bad if v.dim() == bad.dim() else bad[..., None], math.nan, v))
        return type(f)(*out)

    return ref


@pytest.mark.parametrize("cls", CONTROLLERS)
def test_fallback_controller_flies_when_the_window_is_broken(cls):
    """A reference window with NaN ahead makes every solve fail: the fallback controller (fed
    the reference at the current time) flies, the failure is reported, nothing is raised."""
    params, state = _two_envs()
    fb = make_controller("mellinger", params, model="thrust_rate")
    ctrl = cls(params, _nan_after(0.5), fallback=fb)
    with pytest.warns(RuntimeWarning, match="FALLBACK_CONTROLLER"):
        u = ctrl(state, torch.zeros(2, 1), 0.05)
    assert torch.isfinite(u).all()
    assert ctrl.last_status.tolist() == [MpcStatus.FALLBACK_CONTROLLER] * 2
    want = fb(state, REF.evaluate(torch.zeros(2, 1)).setpoint()[:, 0].float(), 0.05)
    torch.testing.assert_close(u, want)


@needs_casadi
def test_nmpc_that_does_not_converge_reports_it():
    """One SQP iteration from far off the reference (upside down, 5 m away) does not converge:
    ITER_LIMIT is reported and the (dynamically feasible) iterate is applied."""
    params, state = _two_envs()
    ctrl = NmpcController(params, REF, MpcConfig(max_iter=1))
    u = ctrl(_far_off(state), torch.zeros(2, 1), 0.05)
    assert torch.isfinite(u).all()
    assert ctrl.last_status.tolist() == [MpcStatus.ITER_LIMIT] * 2


def test_batched_mpc_at_iteration_limit_reports_it():
    params, state = _two_envs()
    ctrl = BatchedMpcController(params, REF, MpcConfig(max_iter=1))
    u = ctrl(_far_off(state), torch.zeros(2, 1), 0.05)
    assert torch.isfinite(u).all()
    assert ctrl.last_status.tolist() == [MpcStatus.ITER_LIMIT] * 2


# ---- configuration errors ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("horizon", 0),
        ("horizon", 2.5),
        ("dt", -0.01),
        ("dt", math.nan),
        ("q_pos", (1.0, 2.0)),
        ("q_vel", (1.0, -1.0, 1.0)),
        ("q_att", -1.0),
        ("r_thrust", 0.0),
        ("r_rate", (0.0, 1.0, 1.0)),
        ("terminal_factor", math.inf),
        ("thrust_limits", (0.6, 0.2)),
        ("thrust_limits", (0.0, 1.5)),
        ("max_body_rate", (10.0, 10.0)),
        ("max_iter", 0),
        ("tol", 0.0),
        ("qp_solver", "acados"),
    ],
)
def test_bad_config_raises_config_error_naming_the_field(field, value):
    with pytest.raises(ConfigError, match=f"^{field}:"):
        MpcConfig(**{field: value})


def test_bad_arguments_raise_config_errors():
    params, state = _two_envs()
    with pytest.raises(ConfigError, match="reference"):
        BatchedMpcController(params, 42)
    with pytest.raises(ConfigError, match="config"):
        BatchedMpcController(params, REF, {"horizon": 10})
    with pytest.raises(ConfigError, match="fallback"):
        BatchedMpcController(
            params, REF, fallback=make_controller("ctbr", params, model="thrust_rate")
        )
    ctrl = BatchedMpcController(params, REF)
    with pytest.raises(ConfigError, match=r"setpoint: .*\(2, 1\)"):
        ctrl(state, torch.zeros(2, 14), 0.05)
    with pytest.raises(ConfigError, match="dt"):
        ctrl(state, torch.zeros(2, 1), 0.0)
    wrong = BatchedMpcController(params, lambda t: REF.evaluate(t[:, :1]))
    with pytest.raises(ConfigError, match="reference: expected FlatOutputs"):
        wrong(state, torch.zeros(2, 1), 0.05)


def test_missing_casadi_raises_missing_dependency(monkeypatch):
    params, _ = _two_envs()
    monkeypatch.setitem(sys.modules, "casadi", None)  # import casadi -> ImportError
    with pytest.raises(MissingDependencyError, match=r"volary\[mpc\]"):
        NmpcController(params, REF)


def test_reset_forgets_the_warm_start_plan():
    params, state = _two_envs()
    ctrl = BatchedMpcController(params, REF, MpcConfig(max_iter=1))
    ctrl(state, torch.zeros(2, 1), 0.05)
    assert torch.isfinite(ctrl._plan_time).all()
    ctrl.reset(torch.tensor([False, True]))
    assert torch.isfinite(ctrl._plan_time[0]) and torch.isnan(ctrl._plan_time[1])
    assert state_vector(state).dtype == torch.float64
