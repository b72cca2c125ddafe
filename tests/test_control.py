"""Controllers at every level fly real airframes: settling times, hover drift, pose, circle.

Closed-loop checks drive the physics directly: control at 240 Hz, physics at 960 Hz (4
substeps, RK4, deterministic; the rigid body through the numba stepper, the thrust-rate model
through the eager reference stepper). Two batched flights are shared by most tests (module
fixtures): one 10 s rigid-body flight holding every scenario in one mixed batch, one 3 s
thrust-rate flight. The settling times measured here are recorded in
``src/volary/control/DESIGN.md``.
"""

from __future__ import annotations

import math

import pytest
import torch

from _airframes import crazyflie, heavy_quad, hexa, quad_x, tilted_hexa
from volary.control import CONTROL_MODES, Gains, make_controller
from volary.control.geometric import attitude_error, flat_body_rates, rotation_from_thrust_yaw
from volary.control.rate import lowpass_step
from volary.dynamics import (
    Disturbance,
    DynamicsConfig,
    MultirotorState,
    VehicleParams,
    hover_speeds,
)
from volary.dynamics.compiled import make_stepper
from volary.dynamics.models import rotor_wrench
from volary.errors import ConfigError, UnknownNameError
from volary.math.quaternion import quat_from_euler, quat_rotate, quat_to_euler, quat_to_rotmat

G = 9.81
CTRL_DT, SUBSTEPS = 1.0 / 240.0, 4
FRAMES = (quad_x, hexa, tilted_hexa)
Z0 = 10.0  # m, start height of the hover/tracking envs
Z_FREE = 1000.0  # m, start height of envs whose step makes them fall or drift (no ground)


# ---- harness ---------------------------------------------------------------------------------
def fly(params, groups, t_end, state, model="rigid_body"):
    """Fly ``groups`` [(env index, controller, setpoint(t))] for ``t_end`` s; returns the state
    log stacked per field, shape (T+1, N, ...), sampled at the control rate."""
    cfg = DynamicsConfig(model=model, stochastic=False, ground=False)
    dist, keys = Disturbance.create(params.n_envs), torch.arange(params.n_envs)
    width = 4 if model == "thrust_rate" else params.n_rotors
    # the rigid body's SUBSTEPS in one numba call (tests/test_compiled.py: parity with physics_step)
    step = make_stepper(cfg, SUBSTEPS, compile="numba" if model == "rigid_body" else False)
    log = [state]
    for k in range(round(t_end / CTRL_DT)):
        cmd = torch.zeros(params.n_envs, width)
        for idx, ctrl, setpoint in groups:
            cmd[idx] = ctrl(state.index(idx), setpoint(k * CTRL_DT), CTRL_DT)
        state = step(params, state, cmd, dist, keys)
        log.append(state)
    names = ("pos", "vel", "quat", "omega", "rotor_speed")
    out = {n: torch.stack([getattr(s, n) for s in log]) for n in names}
    out["t"] = torch.arange(len(log)) * CTRL_DT
    return out


def settling_time(err, band):
    """(N,) s: the time after which ``err`` (T, N) stays within ``band`` (the 'settled' time)."""
    idx = torch.arange(err.shape[0])[:, None].expand_as(err)
    last = torch.where(err > band, idx, torch.full_like(idx, -1)).amax(0)
    return (last + 1).double() * CTRL_DT


def geodesic(q, R_d):
    """Rotation angle (rad) between the attitudes ``q`` (..., 4) and ``R_d`` (3, 3)."""
    c = ((R_d.T @ quat_to_rotmat(q)).diagonal(dim1=-2, dim2=-1).sum(-1) - 1.0) / 2.0
    return torch.arccos(c.clamp(-1.0, 1.0))


def circle(t, radius=1.0, speed=2.0):
    """Position, velocity, acceleration, jerk of a horizontal circle at height Z0."""
    w = speed / radius
    c, s = math.cos(w * t), math.sin(w * t)
    return (
        [radius * c, radius * s, Z0],
        [-speed * s, speed * c, 0.0],
        [-speed * w * c, -speed * w * s, 0.0],
        [speed * w * w * s, -speed * w * w * c, 0.0],
    )


def const(x):
    return lambda t: x


# ---- the shared rigid-body flight -------------------------------------------------------------
STEP_LEVELS = ("ctbr", "attitude", "velocity", "position", "wrench", "acceleration")
RATE_STEP = (0.3, 0.0, 1.0)  # rad/s
ATT_STEP = (0.3, -0.2, 0.5)  # rad roll, pitch, yaw
VEL_STEP = (1.0, 0.5, 0.3)  # m/s
POS_STEP = (1.0, 0.5, 0.3)  # m
ACC_STEP = (1.0, -0.5, 0.5)  # m/s^2
POSE_ROLL = math.radians(20.0)
SCALE_STEP = (0.5, -0.3, 0.4)  # m, Crazyflie and 5 kg quad


def _layout():
    """Env slices of the shared flight, in order."""
    names = [f"{lv}" for lv in STEP_LEVELS] + ["hover", "mellinger"]
    sl = {n: slice(3 * i, 3 * i + 3) for i, n in enumerate(names)}
    base = 3 * len(names)
    sl["pose"] = slice(base, base + 1)  # tilted hexa
    sl["scale"] = slice(base + 1, base + 3)  # crazyflie, 5 kg quad
    return sl, base + 3


def _step_setpoint(level, p):
    """(target setpoint, step size used for the settling band) of a step level, 3 envs."""
    mg = p.mass * G
    z = torch.zeros_like(mg)
    if level == "ctbr":
        return torch.cat((mg[:, None], torch.tensor([RATE_STEP]).expand(3, 3)), -1), None
    if level == "attitude":
        return torch.cat((mg[:, None], torch.tensor([ATT_STEP]).expand(3, 3)), -1), None
    if level == "wrench":  # the tilted hexa also gets a lateral force (fully actuated)
        fx = torch.tensor([0.0, 0.0, 0.1]) * mg
        return torch.stack((fx, z, 1.2 * mg, z, z, z + 0.01), -1), None
    vec = {"velocity": VEL_STEP, "position": POS_STEP, "acceleration": ACC_STEP}[level]
    sp = torch.tensor([[*vec, 0.0]]).expand(3, 4).clone()
    if level == "position":
        sp[:, 2] += Z0
    return sp, None


@pytest.fixture(scope="module")
def flight():
    sl, n = _layout()
    per_env = [None] * n
    for name in list(STEP_LEVELS) + ["hover", "mellinger"]:
        per_env[sl[name]] = [f() for f in FRAMES]
    per_env[sl["pose"]] = [tilted_hexa()]
    per_env[sl["scale"]] = [crazyflie(), heavy_quad()]
    params = VehicleParams.from_airframes(per_env)
    pos = torch.tensor([[0.0, 0.0, Z0]]).repeat(n, 1)
    vel = torch.zeros(n, 3)
    for name in ("ctbr", "attitude"):
        pos[sl[name], 2] = Z_FREE
    p_c, v_c, _, _ = circle(0.0)
    pos[sl["mellinger"]], vel[sl["mellinger"]] = torch.tensor(p_c), torch.tensor(v_c)
    yaw0 = torch.zeros(n)
    yaw0[sl["mellinger"].start] = math.pi / 2  # the quad flies the circle facing along it
    quat = quat_from_euler(torch.zeros(n), torch.zeros(n), yaw0)
    state = MultirotorState.create(n, params.n_rotors).replace(
        pos=pos, vel=vel, quat=quat, rotor_speed=hover_speeds(params)
    )

    groups, targets = [], {}
    for level in STEP_LEVELS:
        idx = torch.arange(n)[sl[level]]
        p = params.index(idx)
        targets[level], _ = _step_setpoint(level, p)
        groups.append((idx, make_controller(level, p), const(targets[level])))
    hover_sp = torch.tensor([[0.0, 0.0, Z0, 0.0]]).repeat(3, 1)
    groups.append(
        (
            torch.arange(n)[sl["hover"]],
            make_controller("position", params.index(sl["hover"])),
            const(hover_sp),
        )
    )
    pose_sp = torch.tensor([[0.0, 0.0, Z0, POSE_ROLL, 0.0, 0.0]])
    groups.append(
        (
            torch.arange(n)[sl["pose"]],
            make_controller("pose", params.index(sl["pose"])),
            const(pose_sp),
        )
    )
    scale_sp = torch.tensor([[*SCALE_STEP, 0.3]]).repeat(2, 1)
    scale_sp[:, 2] += Z0
    groups.append(
        (
            torch.arange(n)[sl["scale"]],
            make_controller("position", params.index(sl["scale"])),
            const(scale_sp),
        )
    )

    def mellinger_sp(t):
        p_, v_, a_, j_ = circle(t)
        sp = torch.tensor([[*p_, *v_, *a_, *j_, 0.0, 0.0]]).repeat(3, 1)
        sp[0, 12], sp[0, 13] = 2.0 * t + math.pi / 2, 2.0  # quad: yaw along the tangent
        return sp

    groups.append(
        (
            torch.arange(n)[sl["mellinger"]],
            make_controller("mellinger", params.index(sl["mellinger"])),
            mellinger_sp,
        )
    )
    log = fly(params, groups, 10.0, state)
    return dict(log=log, params=params, sl=sl, targets=targets)


MEASURED: dict[str, list[float]] = {}


def _record(name, values):
    MEASURED[name] = [round(float(v), 3) for v in values]
    print(f"settling {name}: {MEASURED[name]} s (quad X, hexa, tilted hexa)")


# ---- every level settles on every frame -------------------------------------------------------
def test_rate_loop_settles(flight):
    log, sl = flight["log"], flight["sl"]["ctbr"]
    step = torch.tensor(RATE_STEP)
    err = (log["omega"][:, sl] - step).norm(dim=-1) / step.norm()
    t5, t2 = settling_time(err, 0.05), settling_time(err, 0.02)
    _record("ctbr 5%", t5)
    _record("ctbr 2%", t2)
    assert (t5 < 0.5).all()  # FlightGoggles' PID (P 9, I 3, D 0.3): fast rise ...
    assert (t2 < 4.0).all()  # ... then a ~4% overshoot that its integrator removes slowly
    assert (err[-1] < 0.01).all()


def test_attitude_settles(flight):
    log, sl = flight["log"], flight["sl"]["attitude"]
    R_d = quat_to_rotmat(quat_from_euler(*torch.tensor(ATT_STEP)))
    ang = geodesic(log["quat"][:, sl], R_d)
    ts = settling_time(ang / ang[0], 0.02)
    _record("attitude 2%", ts)
    assert (ts < 1.2).all()
    assert (ang[-1] < 1e-3).all()


def test_velocity_settles(flight):
    log, sl = flight["log"], flight["sl"]["velocity"]
    step = torch.tensor(VEL_STEP)
    err = (log["vel"][:, sl] - step).norm(dim=-1) / step.norm()
    ts = settling_time(err, 0.02)
    _record("velocity 2%", ts)
    assert (ts < 1.2).all()
    assert (err[-1] < 1e-3).all()


def test_position_settles(flight):
    log, sl = flight["log"], flight["sl"]["position"]
    target = torch.tensor([POS_STEP[0], POS_STEP[1], Z0 + POS_STEP[2]])
    err = (log["pos"][:, sl] - target).norm(dim=-1)
    ts = settling_time(err / torch.tensor(POS_STEP).norm(), 0.02)
    _record("position 2%", ts)
    _record("position 5 cm", settling_time(err, 0.05))
    assert (ts < 2.5).all()
    assert (err[-1] < 1e-3).all()


def test_wrench_settles(flight):
    log, sl, params = flight["log"], flight["sl"]["wrench"], flight["params"]
    p = params.index(sl)
    target = flight["targets"]["wrench"]
    hover = torch.zeros_like(target)
    hover[:, 2] = p.mass * G
    realised = rotor_wrench(p, log["rotor_speed"][:, sl])
    err = (realised - target).norm(dim=-1) / (target - hover).norm(dim=-1)
    ts = settling_time(err, 0.02)
    _record("wrench 2%", ts)
    assert (ts < 0.2).all()  # four motor time constants
    assert (err[-1] < 1e-3).all()


def test_acceleration_settles(flight):
    log, sl, params = flight["log"], flight["sl"]["acceleration"], flight["params"]
    p = params.index(sl)
    f_body = rotor_wrench(p, log["rotor_speed"][:, sl])[..., :3]
    acc = quat_rotate(log["quat"][:, sl], f_body) / p.mass[:, None] + torch.tensor([0, 0, -G])
    step = torch.tensor(ACC_STEP)
    err = (acc - step).norm(dim=-1) / step.norm()
    ts = settling_time(err, 0.02)
    _record("acceleration 2%", ts)
    assert (ts < 0.6).all()
    assert (err[-1] < 1e-3).all()


# ---- hover, pose, tracking, gain scaling -----------------------------------------------------
def test_position_hover_drift_below_1cm_over_10s(flight):
    log, sl = flight["log"], flight["sl"]["hover"]
    drift = (log["pos"][:, sl] - torch.tensor([0.0, 0.0, Z0])).norm(dim=-1).amax(0)
    assert (drift < 0.01).all(), drift


def test_tilted_hexa_holds_roll_while_hovering_in_place(flight):
    log, sl = flight["log"], flight["sl"]["pose"]
    t = log["t"]
    late = t >= 2.0
    pos_err = (log["pos"][late, sl] - torch.tensor([0.0, 0.0, Z0])).norm(dim=-1)
    rpy = quat_to_euler(log["quat"][late, sl])
    roll_err = (rpy[..., 0] - POSE_ROLL).abs()
    assert pos_err.max() < 0.01, pos_err.max()
    assert roll_err.max() < math.radians(1.0), roll_err.max()
    assert rpy[..., 1:].abs().max() < math.radians(1.0)
    roll_all = quat_to_euler(log["quat"][:, sl])[..., 0]
    _record("pose roll 2%", settling_time((roll_all - POSE_ROLL).abs() / POSE_ROLL, 0.02)[0:1])


def test_mellinger_tracks_circle(flight):
    log, sl = flight["log"], flight["sl"]["mellinger"]
    t = log["t"]
    ref = torch.tensor([circle(float(tt))[0] for tt in t])
    err = (log["pos"][:, sl] - ref[:, None]).norm(dim=-1)
    late = t >= 2.0  # after the start-up transient (starts level on the circle)
    rms = err[late].pow(2).mean(0).sqrt()
    MEASURED["circle rms"] = rms.tolist()
    print(f"circle r=1 m, 2 m/s: RMS error after 2 s {rms.tolist()} m (quad, hexa, tilted)")
    assert (rms < 0.01).all(), rms
    assert (err[late].amax(0) < 0.02).all()


def test_default_gains_scale_from_crazyflie_to_5kg(flight):
    log, sl = flight["log"], flight["sl"]["scale"]
    target = torch.tensor([SCALE_STEP[0], SCALE_STEP[1], Z0 + SCALE_STEP[2]])
    err = (log["pos"][:, sl] - target).norm(dim=-1)
    ts = settling_time(err / torch.tensor(SCALE_STEP).norm(), 0.02)
    MEASURED["scale position 2%"] = ts.tolist()
    print(f"settling position 2% (Crazyflie 27 g, 5 kg quad): {ts.tolist()} s")
    assert (err[-1] < 0.005).all(), err[-1]
    assert (ts < 4.0).all()
    tilt = torch.arccos(quat_to_rotmat(log["quat"][:, sl])[..., 2, 2].clamp(-1, 1))
    assert tilt.max() < math.radians(46.0)


# ---- thrust-rate model ------------------------------------------------------------------------
def test_thrust_rate_model_position_hovers_and_steps():
    params = VehicleParams.from_airframes([f() for f in FRAMES] * 2)
    n = params.n_envs
    state = MultirotorState.create(n, params.n_rotors, pos=[0.0, 0.0, Z0])
    ctrl = make_controller("position", params, model="thrust_rate")
    sp = torch.tensor([[0.0, 0.0, Z0, 0.0]]).repeat(n, 1)
    sp[3:, :3] += torch.tensor(POS_STEP)
    log = fly(params, [(torch.arange(n), ctrl, const(sp))], 3.0, state, model="thrust_rate")
    err = (log["pos"] - sp[:, :3]).norm(dim=-1)
    assert (err[:, :3].amax(0) < 0.01).all(), err[:, :3].amax(0)
    ts = settling_time(err[:, 3:] / torch.tensor(POS_STEP).norm(), 0.02)
    MEASURED["thrust_rate position 2%"] = ts.tolist()
    print(f"settling thrust_rate position 2%: {ts.tolist()} s")
    assert (ts < 2.5).all()
    assert (err[-1] < 0.005).all()


def test_thrust_rate_ctbr_passes_rates_through(device):
    params = VehicleParams.from_airframes([quad_x(), hexa()], device=device)
    state = MultirotorState.create(2, params.n_rotors, device=device)
    ctrl = make_controller("ctbr", params, model="thrust_rate")
    sp = torch.tensor([[5.0, 0.1, -0.2, 0.3], [100.0, 0.0, 0.0, 1.0]], device=device)
    cmd = ctrl(state, sp, CTRL_DT)
    torch.testing.assert_close(cmd[:, 1:], sp[:, 1:])
    torch.testing.assert_close(
        cmd[:, 0], torch.stack((5.0 / params.max_thrust[0], torch.ones((), device=device)))
    )


# ---- contract, errors, batching, reset --------------------------------------------------------
def _mixed(device="cpu"):
    return VehicleParams.from_airframes([quad_x(), hexa(), tilted_hexa()], device=device)


def _setpoint(mode, params):
    n, r = params.n_envs, params.n_rotors
    hover = hover_speeds(params)
    mg = params.mass * G
    dev = params.device
    return {
        "rotor_speeds": hover,
        "rotor_thrusts": params.k_f * hover * hover,
        "wrench": torch.stack((0 * mg, 0 * mg, mg, 0 * mg + 0.01, 0 * mg, 0 * mg), -1),
        "ctbr": torch.stack((mg, 0 * mg + 0.2, 0 * mg, 0 * mg - 0.1), -1),
        "attitude": torch.stack((mg, 0 * mg + 0.1, 0 * mg - 0.1, 0 * mg + 0.2), -1),
        "acceleration": torch.tensor([[0.5, 0.0, 0.2, 0.1]], device=dev).repeat(n, 1),
        "velocity": torch.tensor([[0.5, 0.0, 0.2, 0.1]], device=dev).repeat(n, 1),
        "position": torch.tensor([[0.5, 0.2, 1.2, 0.1]], device=dev).repeat(n, 1),
        "pose": torch.tensor([[0.5, 0.2, 1.2, 0.1, 0.0, 0.1]], device=dev).repeat(n, 1),
        "mellinger": torch.linspace(0.0, 1.3, 14, device=dev).repeat(n, 1),
    }[mode][:, : (r if mode.startswith("rotor") else None)]


def _state(params, device="cpu"):
    s = MultirotorState.create(params.n_envs, params.n_rotors, device=device, pos=[0.1, 0, 1.0])
    return s.replace(
        omega=torch.tensor([[0.1, -0.2, 0.05]], device=device).repeat(params.n_envs, 1),
        quat=quat_from_euler(*torch.tensor([[0.05], [-0.02], [0.1]], device=device))
        .expand(params.n_envs, 4)
        .contiguous(),
    )


@pytest.mark.parametrize("mode", CONTROL_MODES)
def test_every_mode_returns_finite_rotor_speeds_in_limits(mode, device):
    params = _mixed(device)
    ctrl = make_controller(mode, params)
    assert ctrl.mode == mode
    sp = _setpoint(mode, params)
    assert sp.shape == (params.n_envs, ctrl.setpoint_size)
    cmd = ctrl(_state(params, device), sp, CTRL_DT)
    assert cmd.shape == (params.n_envs, params.n_rotors)
    assert torch.isfinite(cmd).all()
    assert (cmd >= params.w_min - 1e-3).all() and (cmd <= params.w_max + 1e-3).all()


@pytest.mark.parametrize("mode", CONTROL_MODES)
def test_mixed_batch_matches_separate_batches(mode):
    quad_p = VehicleParams.from_airframes(quad_x())
    hexa_p = VehicleParams.from_airframes(hexa())
    mixed = VehicleParams.from_airframes([quad_x(), hexa()])
    sp = _setpoint(mode, mixed)
    out = make_controller(mode, mixed)(_state(mixed), sp, CTRL_DT)
    sq = sp[:1, :4] if mode.startswith("rotor") else sp[:1]
    want_q = make_controller(mode, quad_p)(_state(quad_p), sq, CTRL_DT)
    want_h = make_controller(mode, hexa_p)(_state(hexa_p), sp[1:], CTRL_DT)
    torch.testing.assert_close(out[:1, :4], want_q, rtol=1e-4, atol=1e-2)
    torch.testing.assert_close(out[:1, 4:], torch.zeros(1, 2))  # padded rotors stay still
    torch.testing.assert_close(out[1:], want_h, rtol=1e-4, atol=1e-2)


def test_unknown_mode_lists_valid_ones():
    with pytest.raises(UnknownNameError) as e:
        make_controller("acro", _mixed())
    assert all(m in str(e.value) for m in CONTROL_MODES)


@pytest.mark.parametrize("mode", ["rotor_speeds", "rotor_thrusts", "wrench"])
def test_rotor_level_modes_reject_thrust_rate_model(mode):
    with pytest.raises(ConfigError, match=f"{mode}.*thrust_rate"):
        make_controller(mode, _mixed(), model="thrust_rate")


def test_bad_setpoint_shape_and_gains_rejected():
    params = _mixed()
    ctrl = make_controller("position", params)
    with pytest.raises(ConfigError, match=r"expects shape \(3, 4\), got \(3, 3\)"):
        ctrl(_state(params), torch.zeros(3, 3), CTRL_DT)
    with pytest.raises(ConfigError, match="3 envs"):
        make_controller("position", params, gains=Gains.default(params.index(slice(0, 2))))
    with pytest.raises(ConfigError, match="unknown gain"):
        Gains.default(params).override(k_p=1.0)


def test_rotor_modes_clamp_and_invert_thrust():
    params = _mixed()
    state = _state(params)
    speeds = make_controller("rotor_speeds", params)(state, torch.full((3, 6), 5000.0), CTRL_DT)
    torch.testing.assert_close(speeds, params.w_max)
    thrust = torch.full((3, 6), 2.0)
    w = make_controller("rotor_thrusts", params)(state, thrust, CTRL_DT)
    torch.testing.assert_close(params.k_f * w * w, thrust * (params.k_f > 0), rtol=1e-5, atol=1e-5)


def test_per_env_gain_override_changes_only_that_env():
    params = _mixed()
    state, sp = _state(params), _setpoint("position", params)
    base = make_controller("position", params)(state, sp, CTRL_DT)
    g = Gains.default(params)
    k_x = g.k_x.clone()
    k_x[1] *= 2.0
    out = make_controller("position", params, gains=g.override(k_x=k_x))(state, sp, CTRL_DT)
    assert torch.equal(out[[0, 2]], base[[0, 2]])
    assert not torch.allclose(out[1], base[1])


def test_default_gains_scale_with_mass_and_inertia():
    light = VehicleParams.from_airframes(crazyflie())
    heavy = VehicleParams.from_airframes(quad_x().replace(mass=2.0, inertia=(0.01, 0.01, 0.018)))
    base = VehicleParams.from_airframes(quad_x())
    g0, g1, gl = Gains.default(base), Gains.default(heavy), Gains.default(light)
    torch.testing.assert_close(g1.k_x, 2.0 * g0.k_x)
    torch.testing.assert_close(g1.k_R, 2.0 * g0.k_R)
    assert (gl.k_R < 1e-2 * g0.k_R).all()
    torch.testing.assert_close(gl.rate_p, g0.rate_p)  # FlightGoggles' PID outputs alpha


def test_reset_mask_clears_only_masked_envs(device):
    params = _mixed(device)
    ctrl = make_controller("ctbr", params)
    state, sp = _state(params, device), _setpoint("ctbr", params)
    for _ in range(5):
        ctrl(state, sp, CTRL_DT)
    before = ctrl.rate_state
    assert (before.integral.abs() > 0).all(dim=-1).any()
    mask = torch.tensor([True, False, True], device=device)
    ctrl.reset(mask)
    after = ctrl.rate_state
    assert (after.integral[mask] == 0).all() and (after.rate_dot[mask] == 0).all()
    assert torch.equal(after.integral[~mask], before.integral[~mask])
    assert torch.equal(after.rate[~mask], before.rate[~mask])
    assert after.fresh.tolist() == [True, False, True]
    ctrl.reset()
    assert (ctrl.rate_state.integral == 0).all() and ctrl.rate_state.fresh.all()


def test_rate_filter_is_stable_at_slow_control_rates():
    """Backward Euler keeps FlightGoggles' 30 Hz filter stable where forward Euler diverges."""
    k_s, k_d = torch.tensor(35530.5758439217), torch.tensor(266.572976289502)
    u = torch.ones(3)
    for dt in (1 / 960, 1 / 240, 1 / 100, 1 / 50):
        y, y_dot = torch.zeros(3), torch.zeros(3)
        for _ in range(round(1.0 / dt)):
            y, y_dot = lowpass_step(y, y_dot, u, k_s, k_d, dt)
        torch.testing.assert_close(y, u, rtol=0, atol=1e-4)


def test_geometric_building_blocks():
    R_d = rotation_from_thrust_yaw(torch.tensor([[0.0, 0.0, 2.0]]), torch.tensor([0.4]))
    torch.testing.assert_close(
        R_d, quat_to_rotmat(quat_from_euler(*torch.tensor([[0.0], [0.0], [0.4]])))
    )
    small = quat_to_rotmat(quat_from_euler(*torch.tensor([[0.01], [0.0], [0.0]])))
    torch.testing.assert_close(
        attitude_error(small, torch.eye(3)[None]),
        torch.tensor([[0.01, 0.0, 0.0]]),
        rtol=1e-3,
        atol=1e-6,
    )
    # circle at tangent yaw: constant body rates p = 0, q = -w sin(tilt), r = w cos(tilt)
    w, a = 2.0, 4.0
    F = torch.tensor([[-a, 0.0, G]])  # at angle 0: centripetal acceleration towards -x
    R_d = rotation_from_thrust_yaw(F, torch.tensor([math.pi / 2]))
    rates = flat_body_rates(
        R_d, F.norm(dim=-1), torch.ones(1), torch.tensor([[0.0, -a * w, 0.0]]), torch.tensor([w])
    )
    tilt = math.atan2(a, G)
    torch.testing.assert_close(
        rates, torch.tensor([[0.0, -w * math.sin(tilt), w * math.cos(tilt)]]), atol=1e-5, rtol=1e-4
    )


@pytest.mark.slow
def test_controllers_compile_fullgraph():
    params = _mixed()
    state = _state(params)
    for mode in ("ctbr", "position", "pose", "mellinger"):
        ctrl = make_controller(mode, params)
        sp = _setpoint(mode, params)
        ref = ctrl(state, sp, CTRL_DT)
        ctrl.reset()
        out = torch.compile(lambda s, x, c=ctrl: c(s, x, CTRL_DT), fullgraph=True)(state, sp)
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-2)
