"""Differential flatness: exact derivatives, agreement with the rigid-body model, open-loop
replay of the flatness rotor speeds, feasibility reports, time allocation, bad input."""

from __future__ import annotations

import math

import pytest
import torch

import volary.platforms as platforms
from volary.control.geometric import rotation_from_thrust_yaw
from volary.dynamics import (
    Disturbance,
    DynamicsConfig,
    MultirotorState,
    VehicleParams,
    hover_speeds,
    physics_step,
)
from volary.dynamics.models import rigid_body_derivative
from volary.errors import ConfigError, UnknownNameError
from volary.math import quat_conj, quat_mul, quat_to_rotmat, vee
from volary.math.random import env_keys
from volary.planning import (
    FlatOutputs,
    Limits,
    PolyTrajectory,
    fastest_feasible,
    feasible,
    flat_to_state,
    min_snap,
    optimize_times,
    plan,
    proportional_times,
    rotor_speed_command,
)

F64 = torch.float64
OPEN_LOOP_TOL = 1e-3  # m, position error after 2 s open loop at 960 Hz (measured 1.9e-4 m)
OPEN_LOOP_ATT_TOL = 1e-3  # rad, attitude error after 2 s open loop


def _traj() -> PolyTrajectory:
    wp = torch.tensor([[0, 0, 1], [0.6, 0.3, 1.3], [1.0, -0.2, 1.1], [1.4, 0.2, 1.4]], dtype=F64)
    yaw = torch.tensor([0.0, 0.5, -0.3, 0.2], dtype=F64)
    return min_snap(wp, torch.full((3,), 0.8, dtype=F64), yaw=yaw)


def _airframes():
    """Crazyflie (linear body drag), hexa (quadratic drag), tilted hexa (fully actuated)."""
    return [platforms.get(n) for n in ("crazyflie", "hexa", "tilted_hexa")]


def test_rates_and_angular_acceleration_are_exact_derivatives():
    traj = _traj()
    t = torch.linspace(0.05, 2.35, 47, dtype=F64)
    h = 1e-6
    cf = _airframes()[0]
    s0, lo, hi = (flat_to_state(traj.evaluate(x), cf) for x in (t, t - h, t + h))
    r0 = quat_to_rotmat(s0.quat)
    r_dot = (quat_to_rotmat(hi.quat) - quat_to_rotmat(lo.quat)) / (2 * h)
    torch.testing.assert_close(vee(r0.transpose(-1, -2) @ r_dot), s0.omega, rtol=0, atol=1e-7)
    fd = (hi.omega - lo.omega) / (2 * h)
    torch.testing.assert_close(fd, s0.omega_dot, rtol=0, atol=1e-6)


def test_state_satisfies_the_rigid_body_model():
    """Plugging the flat state and rotor speeds into the model's derivative returns the
    trajectory's acceleration and the flatness angular acceleration (every airframe)."""
    afs = _airframes()
    params = VehicleParams.from_airframes(afs, dtype=F64)
    t = torch.linspace(0.0, 2.4, 25, dtype=F64).expand(len(afs), 25)
    flat = _traj().evaluate(t)  # (3, 25, ...)
    st = flat_to_state(flat, params)
    rep = lambda x: x.reshape(-1, *x.shape[2:])  # noqa: E731
    per = params.index(torch.arange(len(afs)).repeat_interleave(25))
    x = (rep(st.pos), rep(st.vel), rep(st.quat), rep(st.omega), rep(st.rotor_speed))
    z3 = torch.zeros(x[0].shape[0], 3, dtype=F64)
    d = rigid_body_derivative(per, x, x[4], z3, z3, z3)
    torch.testing.assert_close(d[1], rep(flat.acc), rtol=0, atol=1e-9)
    torch.testing.assert_close(d[3], rep(st.omega_dot), rtol=0, atol=1e-7)


def test_drag_compensation_matters_and_vanishes_without_drag():
    cf = _airframes()[0]
    flat = _traj().evaluate(torch.linspace(0, 2.4, 13, dtype=F64))
    with_drag, without = flat_to_state(flat, cf), flat_to_state(flat, cf, drag=False)
    assert float((with_drag.thrust - without.thrust).abs().max()) > 1e-4  # N, of ~0.26 N
    zero = (0.0, 0.0, 0.0)
    clean = cf.replace(drag_linear=zero, drag_quadratic=zero)
    torch.testing.assert_close(flat_to_state(flat, clean).rotor_speed, without.rotor_speed)


def test_hover_gives_the_hover_rotor_speeds_and_level_attitude():
    afs = _airframes()
    params = VehicleParams.from_airframes(afs, dtype=F64)
    z = torch.zeros(3, 3, dtype=F64)
    yaw = torch.zeros(3, dtype=F64)
    flat = FlatOutputs(z + 1.0, z, z, z, z, yaw, yaw, yaw)
    st = flat_to_state(flat, params)
    torch.testing.assert_close(st.rotor_speed, hover_speeds(params), rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(st.thrust, params.mass * 9.81)
    torch.testing.assert_close(st.quat, torch.tensor([[1.0, 0, 0, 0]], dtype=F64).expand(3, 4))


def test_attitude_matches_the_controllers_construction(device):
    traj = _traj().to(device=device)
    flat = traj.evaluate(torch.linspace(0, 2.4, 31, dtype=F64, device=device))
    st = flat_to_state(flat, _airframes()[0], drag=False)  # the controller has no drag term
    thrust_dir = flat.acc + torch.tensor([0.0, 0, 9.81], dtype=F64, device=device)
    r_ctrl = rotation_from_thrust_yaw(thrust_dir, flat.yaw)
    torch.testing.assert_close(quat_to_rotmat(st.quat), r_ctrl, rtol=0, atol=1e-10)
    assert st.rotor_speed.device.type == torch.device(device).type


def _open_loop(params: VehicleParams, traj: PolyTrajectory, dt: float, seconds: float):
    """Fly the flatness rotor speeds open loop: the command over [t, t + dt] is the lead-
    compensated speed (rotor_speed_command: w + tau dw/dt, inverting the first-order motor lag)
    at the interval's midpoint. Returns (position, attitude) errors at the end, (N,) each."""
    n_env, steps = params.n_envs, int(round(seconds / dt))
    cfg = DynamicsConfig(stochastic=False, ground=False, dt=dt)
    tk = ((torch.arange(steps, dtype=F64) + 0.5) * dt).expand(n_env, steps)
    cmd = rotor_speed_command(traj, tk, params)
    s0 = flat_to_state(traj.evaluate(torch.zeros(n_env, 1, dtype=F64)), params)
    st = MultirotorState.create(n_env, params.n_rotors, dtype=F64)
    st = st.replace(
        pos=s0.pos[:, 0], vel=s0.vel[:, 0], quat=s0.quat[:, 0], omega=s0.omega[:, 0]
    ).replace(rotor_speed=s0.rotor_speed[:, 0])
    dist, keys = Disturbance.create(n_env, dtype=F64), env_keys(0, torch.arange(n_env))
    for k in range(steps):
        st = physics_step(params, st, cmd[:, k], dist, keys, cfg)
    end = flat_to_state(traj.evaluate(torch.full((n_env, 1), steps * dt, dtype=F64)), params)
    pos_err = (st.pos - end.pos[:, 0]).norm(dim=-1)
    dq = quat_mul(quat_conj(end.quat[:, 0]), st.quat)
    att_err = 2 * torch.asin(dq[:, 1:].norm(dim=-1).clamp(max=1.0))
    return pos_err, att_err


def test_open_loop_rotor_speeds_reproduce_the_trajectory():
    """Acceptance: flatness rotor speeds fed open loop (float64, RK4 at 960 Hz, motor lag and
    body drag on, no noise/wind/ground) reproduce the trajectory over 2 s within OPEN_LOOP_TOL."""
    afs = [_airframes()[i] for i in (0, 2)]  # crazyflie (drag), tilted hexa: 4 and 6 rotors
    params = VehicleParams.from_airframes(afs, dtype=F64)
    pos_err, att_err = _open_loop(params, _traj(), 1 / 960, 2.0)
    assert float(pos_err.max()) < OPEN_LOOP_TOL, pos_err
    assert float(att_err.max()) < OPEN_LOOP_ATT_TOL, att_err


@pytest.mark.slow
def test_every_catalogue_airframe_flies_its_flatness_commands_open_loop():
    """Contract: every airframe in the catalogue, on the test path at its fastest feasible
    timing (rotor_margin 0.95; no faster than 2 s, so the run stays inside the trajectory,
    whose snap jumps to zero at the end) and slowed further until the lead-compensated
    commands stay inside the rotor range, follows the path open loop for 2 s within
    OPEN_LOOP_TOL."""
    afs = [platforms.get(n) for n in platforms.names()]
    params = VehicleParams.from_airframes(afs, dtype=F64)
    base = _traj()
    n = len(afs)
    batch = PolyTrajectory(base.coeffs.expand(n, *base.coeffs.shape), base.durations.expand(n, 3))
    traj = fastest_feasible(batch, params, Limits(rotor_margin=0.95))
    traj = traj.scaled((2.0 / traj.duration).clamp_min(1.0))  # fly inside [0, T]: 2 s at least
    tk = torch.linspace(0, 1, 400, dtype=F64) * traj.duration[:, None]
    for _ in range(20):
        cmd = rotor_speed_command(traj, tk, params)
        lo, hi = params.w_min[:, None], params.w_max[:, None]
        clamped = ((cmd > hi) | (cmd < lo)).flatten(1).any(-1)
        if not bool(clamped.any()):
            break
        traj = traj.scaled(torch.where(clamped, 1.1, 1.0).to(F64))
    pos_err, att_err = _open_loop(params, traj, 1 / 960, 2.0)
    worst = int(pos_err.argmax())
    assert float(pos_err.max()) < OPEN_LOOP_TOL, (afs[worst].name, float(pos_err.max()))
    assert float(att_err.max()) < OPEN_LOOP_ATT_TOL


@pytest.mark.slow
def test_setpoint_feeds_the_mellinger_controller():
    """Interface: FlatOutputs.setpoint() is the mellinger mode's [p, v, a, jerk, yaw, yaw_rate];
    closed loop (float32, 960 Hz, drag-free crazyflie, controller default gains) on the test path
    flown 2x slower (4.8 s) stays within 3 cm (measured 1.0 cm; 3.0 cm with the crazyflie's drag,
    which the controller does not feed forward; at full speed 11.9 cm: the controller has no
    angular-acceleration or motor-lag feed-forward)."""
    from volary.control import make_controller

    zero = (0.0, 0.0, 0.0)
    params = VehicleParams.from_airframes(_airframes()[0].replace(drag_linear=zero))
    ctrl = make_controller("mellinger", params)
    traj = _traj().scaled(2.0).to(dtype=torch.float32)
    cfg = DynamicsConfig(stochastic=False, ground=False)
    steps = int(float(traj.duration) / cfg.dt)
    times = torch.arange(steps + 1) * cfg.dt
    ref = traj.evaluate(times)
    s0 = flat_to_state(traj.evaluate(times[:1]), params)
    st = MultirotorState.create(1, params.n_rotors, pos=s0.pos, rotor_speed=s0.rotor_speed)
    dist, keys = Disturbance.create(1), env_keys(0, torch.arange(1))
    setpoints = ref.setpoint()
    worst = 0.0
    for k in range(steps):
        st = physics_step(params, st, ctrl(st, setpoints[k : k + 1], cfg.dt), dist, keys, cfg)
        worst = max(worst, float((st.pos[0] - ref.pos[k + 1]).norm()))
    assert worst < 0.03


# ---- feasibility and time allocation ----------------------------------------------------------


def test_feasible_reports_each_limit():
    cf = _airframes()[0]
    traj = _traj()
    assert bool(feasible(traj, cf).ok)
    fast = traj.scaled(0.3)  # 3.3x faster: rotors saturate
    rep = feasible(fast, cf)
    assert not bool(rep.ok) and float(rep.max_rotor_ratio) > 1.0
    assert any("max_rotor_ratio" in v for v in rep.violations)
    hexa = feasible(traj, _airframes()[1])  # weak yaw authority: a rotor must spin backwards
    assert not bool(hexa.ok) and float(hexa.min_rotor_margin) < 0
    tight = feasible(traj, cf, Limits(max_speed=0.5, max_body_rate=0.5))
    names = " ".join(tight.violations)
    assert "max_speed" in names and "max_body_rate" in names and "infeasible" in str(tight)


def test_free_fall_is_reported_singular():
    coeffs = torch.zeros(1, 4, 8, dtype=F64)
    coeffs[0, 2, 0], coeffs[0, 2, 2] = 10.0, -9.81 / 2  # z = 10 - g t^2 / 2: no thrust at all
    rep = feasible(PolyTrajectory(coeffs, torch.ones(1, dtype=F64)), _airframes()[0])
    assert bool(rep.singular) and not bool(rep.ok)
    assert any("flatness singular" in v for v in rep.violations)


def test_fastest_feasible_sits_on_the_limit_for_a_batch():
    cf = _airframes()[0]
    lim = Limits(max_speed=2.0, max_body_rate=6.0)
    g = torch.Generator().manual_seed(3)
    wp = torch.cumsum(torch.rand(3, 5, 3, generator=g, dtype=F64) - 0.5, dim=1)
    traj = min_snap(wp, proportional_times(wp, 1.0))
    best = fastest_feasible(traj, cf, lim)
    assert bool(feasible(best, cf, lim).ok.all())
    assert not bool(feasible(best.scaled(0.99), cf, lim).ok.any())
    ratio = best.durations / traj.durations  # one uniform factor per trajectory
    torch.testing.assert_close(ratio, ratio[:, :1].expand_as(ratio))


def test_a_trajectorys_timing_does_not_depend_on_its_batch_mates():
    """Each trajectory is sampled at its own count: adding a much longer trajectory to the
    batch leaves the feasibility peaks and the fastest scaling of the others unchanged."""
    cf = _airframes()[0]
    lim = Limits(max_speed=2.0, max_body_rate=6.0)
    g = torch.Generator().manual_seed(5)
    wp = torch.cumsum(torch.rand(2, 5, 3, generator=g, dtype=F64) - 0.5, dim=1)
    wp[1] *= 40.0  # a far longer course
    traj = min_snap(wp, proportional_times(wp, 1.0))
    alone = min_snap(wp[:1], proportional_times(wp[:1], 1.0))
    both, one = feasible(traj, cf, lim), feasible(alone, cf, lim)
    for name in ("max_speed", "max_acc", "max_body_rate", "max_thrust_ratio"):
        torch.testing.assert_close(getattr(both, name)[:1], getattr(one, name), rtol=1e-12, atol=0)
    torch.testing.assert_close(
        fastest_feasible(traj, cf, lim).durations[:1],
        fastest_feasible(alone, cf, lim).durations,
        rtol=1e-12,
        atol=0,
    )


def test_optimize_times_lowers_cost_and_meets_limits():
    cf = _airframes()[0]
    lim = Limits(max_speed=3.0, max_acc=8.0, max_body_rate=10.0, thrust_margin=0.9)
    g = torch.Generator().manual_seed(4)
    wp = torch.cumsum(torch.rand(7, 3, generator=g, dtype=F64) * 2 - 1, dim=0)
    opt = optimize_times(wp, cf, lim)
    assert bool(feasible(opt, cf, lim).ok)
    prop = fastest_feasible(min_snap(wp, proportional_times(wp)), cf, lim)
    assert float(opt.duration) <= float(prop.duration) * 1.001


def test_plan_picks_the_allocation_by_name():
    wp = torch.tensor([[0.0, 0, 1], [1, 0, 1], [1, 2, 1]], dtype=F64)
    torch.testing.assert_close(
        plan(wp, "proportional", speed=2.0).durations, torch.tensor([0.5, 1.0], dtype=F64)
    )
    given = plan(wp, torch.tensor([1.0, 2.0]))
    torch.testing.assert_close(given.durations, torch.tensor([1.0, 2.0], dtype=F64))
    assert bool(feasible(plan(wp, "optimized", vehicle=_airframes()[0]), _airframes()[0]).ok)
    with pytest.raises(UnknownNameError, match="valid names: given, optimized, proportional"):
        plan(wp, "fastest")
    with pytest.raises(ConfigError, match="vehicle"):
        plan(wp, "optimized")


def test_infeasible_limits_raise_clear_errors():
    cf = _airframes()[0]
    wp = torch.tensor([[0.0, 0, 1], [1, 0, 1]], dtype=F64)
    traj = min_snap(wp, torch.ones(1, dtype=F64))
    twr = cf.max_thrust / (cf.mass * 9.81)
    with pytest.raises(ConfigError, match="thrust-to-weight ratio > 1.*cannot hover"):
        fastest_feasible(traj, cf, Limits(thrust_margin=0.9 / twr))
    hover_ratio = cf.hover_rotor_speed / cf.max_rotor_speed[0]
    with pytest.raises(ConfigError, match="limits: no time scaling.*max_rotor_ratio"):
        fastest_feasible(traj, cf, Limits(rotor_margin=0.9 * hover_ratio))
    with pytest.raises(ConfigError, match=r"limits.max_speed: expected a value > 0, got -1"):
        Limits(max_speed=-1.0)
    with pytest.raises(ConfigError, match=r"limits.rotor_margin: expected a fraction"):
        Limits(rotor_margin=1.5)
    with pytest.raises(ConfigError, match="dt: expected"):
        feasible(traj, cf, dt=0.0)


def test_bad_timing_and_vehicle_input():
    wp = torch.tensor([[0.0, 0, 1], [0.0, 0, 1], [1, 0, 1]], dtype=F64)
    with pytest.raises(ConfigError, match="waypoints 0 and 1 at the same position"):
        proportional_times(wp)
    with pytest.raises(ConfigError, match="speed: expected"):
        proportional_times(wp[1:], speed=0.0)
    with pytest.raises(ConfigError, match="NaN"):
        proportional_times(torch.tensor([[0.0, 0, 1], [math.nan, 0, 1]]))
    flat = _traj().evaluate(torch.linspace(0, 1, 5, dtype=F64))
    two = VehicleParams.from_airframes(_airframes()[:2], dtype=F64)
    with pytest.raises(ConfigError, match="vehicle: expected 1 env"):
        flat_to_state(flat, two)  # 2 envs vs 5 samples in the leading dim
    with pytest.raises(ConfigError, match="vehicle: expected an Airframe"):
        flat_to_state(flat, "crazyflie")  # type: ignore[arg-type]


def test_docstring_example_runs():
    import volary.planning

    code = volary.planning.__doc__.split("::", 1)[1]
    lines = [ln[4:] for ln in code.splitlines() if ln.startswith("    ") or not ln.strip()]
    exec("\n".join(lines), {})
