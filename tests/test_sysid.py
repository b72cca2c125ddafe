"""volary.sysid on synthetic flight logs flown by volary's own dynamics: the reader's checks,
open-loop prediction that reproduces a log exactly with the true model, and a fit that
recovers the parameters the log was flown with (issue 61)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from volary.dynamics import DynamicsConfig, MultirotorState, VehicleParams
from volary.dynamics.step import Disturbance, physics_step
from volary.errors import ConfigError, FileFormatError
from volary.platforms import get, load_file
from volary.sysid import fit as F
from volary.sysid import predict as P
from volary.sysid.logs import FlightLog, read_log

DT, SUBSTEPS = 0.01, 4
TRUE_GAIN, TRUE_DELAY, TRUE_TAU, SCALE = (0.05, 0.04, 0.3), 2, 0.02, 2400.0


def true_model() -> P.SysidModel:
    af = get("crazyflie").with_moment_gain(TRUE_GAIN)
    af = af.replace(motor_tau_up=(TRUE_TAU,), motor_tau_down=(TRUE_TAU,),
                    max_rotor_speed=(SCALE * 1.1,), drag_linear=(0.01, 0.01, 0.004))  # fmt: skip
    return P.SysidModel(af, P.CommandMap(SCALE, use_voltage=False), delay=TRUE_DELAY)


def commands(rng: np.random.Generator, rows: int, hover_u: float) -> np.ndarray:
    """Smooth per-motor command wiggles around hover (a slow random walk, low-passed)."""
    steps = rng.normal(0, 0.01, (rows, 4)).cumsum(axis=0)
    steps -= steps.mean(axis=1, keepdims=True) * 0.5
    return np.clip(hover_u + 0.02 * np.tanh(steps), 0, 1)


def fly_log(
    model: P.SysidModel, seed: int, rows: int = 200, commands_override: np.ndarray | None = None
) -> FlightLog:
    """A log flown by physics_step itself (a loop of its own, not predict.fly), commands held
    per row after ``delay`` rows, rotors starting at the first command's steady speed."""
    rng = np.random.default_rng(seed)
    af = model.airframe
    (c1, c0), r = model.command.curve, af.hover_rotor_speed / model.command.scale
    hover = (-c1 + np.sqrt(c1 * c1 - 4.0 * (c0 - r * r))) / 2.0  # e^2 + c1 e + c0 = r^2
    u = commands(rng, rows, hover) if commands_override is None else commands_override
    w_cmd = model.command.scale * np.sqrt(np.maximum(u * u + c1 * u + c0, 0.0))
    w_cmd = np.clip(w_cmd, 0, af.max_rotor_speed[0])
    w_cmd = np.concatenate([np.repeat(w_cmd[:1], model.delay, 0), w_cmd[: rows - model.delay]])
    params = VehicleParams.from_airframes(af, 1, dtype=torch.float64)
    s = MultirotorState.create(1, 4, dtype=torch.float64, pos=[0.0, 0.0, 1.0],
                               rotor_speed=torch.as_tensor(w_cmd[0]))  # fmt: skip
    cfg = DynamicsConfig(dt=DT / SUBSTEPS, stochastic=False, ground=False)
    dist = Disturbance.create(1, dtype=torch.float64)
    keys = torch.zeros(1, dtype=torch.int64)
    rec = {k: [] for k in ("pos", "vel", "quat", "omega")}
    for i in range(rows):
        for k in rec:
            rec[k].append(getattr(s, k)[0].numpy().copy())
        for _ in range(SUBSTEPS):
            s = physics_step(params, s, torch.as_tensor(w_cmd[i : i + 1]), dist, keys, cfg)
    arr = {k: np.array(v) for k, v in rec.items()}
    return FlightLog(f"synthetic{seed}", np.arange(rows) * DT, arr["pos"], arr["quat"],
                     arr["vel"], arr["omega"], u, np.full(rows, np.nan))  # fmt: skip


def write_csv(path, log: FlightLog, extra: str = "") -> None:
    head = "t,px,py,pz,qw,qx,qy,qz,vx,vy,vz,wx,wy,wz,u1,u2,u3,u4" + extra
    data = np.column_stack([log.t, log.pos, log.quat, log.vel, log.omega, log.cmd])
    np.savetxt(path, data, delimiter=",", header=head, comments="", fmt="%.17g")


def test_prediction_with_the_true_model_reproduces_the_log():
    model = true_model()
    log = fly_log(model, seed=0)
    starts = P.window_starts(log, 50, stride=7)
    err = P.horizon_errors(P.fly(log, model, starts, 50), P.logged(log, starts, 50))
    assert err["pos"].max() < 1e-8 and err["omega"].max() < 1e-7
    # the baseline is not exact on the same log: the check above can fail
    base = P.horizon_errors(P.constant(log, starts, 50), P.logged(log, starts, 50))
    assert base["omega"][-1] > 1e-3


def test_a_wrong_delay_or_lag_is_seen_in_the_errors():
    from dataclasses import replace

    model = true_model()
    log = fly_log(model, seed=1)
    starts = P.window_starts(log, 30, stride=5)
    truth = P.logged(log, starts, 30)
    for wrong in (replace(model, delay=0), replace(model, airframe=model.airframe.replace(
            motor_tau_up=(0.06,), motor_tau_down=(0.06,)))):  # fmt: skip
        err = P.horizon_errors(P.fly(log, wrong, starts, 30), truth)
        assert err["omega"].max() > 1e-3


def test_fit_recovers_the_command_scale_moment_gains_delay_and_lag():
    model = true_model()
    logs = [fly_log(model, seed=s, rows=150) for s in range(4)]
    fitted, report = F.fit(logs, get("crazyflie"), steps=("moment", "timing"), use_voltage=False)
    assert report["command_scale_rad_s"] == pytest.approx(SCALE, rel=0.02)
    assert (report["delay_samples"], report["motor_tau_s"]) == (TRUE_DELAY, TRUE_TAU)
    np.testing.assert_allclose(report["moment_gain"], TRUE_GAIN, rtol=0.15)
    # and the fitted model predicts the logs far better than the preset does
    base = get("crazyflie").replace(max_rotor_speed=(SCALE * 1.1,))
    preset = P.SysidModel(base, P.CommandMap(report["command_scale_rad_s"], use_voltage=False))
    e_fit, e_pre = (P.evaluate(logs, m, 30, 5)["omega"][-1] for m in (fitted, preset))
    assert e_fit < 0.2 * e_pre


def test_cli_writes_a_platform_file_the_catalogue_loads_and_fly_flies(tmp_path):
    from typer.testing import CliRunner

    from volary.cli.main import app

    model = true_model()
    (tmp_path / "train").mkdir()
    (tmp_path / "test").mkdir()
    for s in range(3):
        write_csv(tmp_path / "train" / f"f{s}.csv", fly_log(model, seed=s, rows=120))
    write_csv(tmp_path / "test" / "g.csv", fly_log(model, seed=9, rows=120))
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["sysid", str(tmp_path / "train"), "--test",
                                   str(tmp_path / "test"), "--out", str(out), "--horizon", "20",
                                   "--stride", "5", "--no-voltage",
                                   "--refine-evaluations", "60"])  # fmt: skip
    assert res.exit_code == 0, res.output
    entry = next(iter(load_file(out / "platform.toml").values()))
    assert entry.category == "identified"
    doc = json.loads((out / "sysid.json").read_text())
    assert doc["delay_samples"] == TRUE_DELAY
    # the output-error refinement ran within its budget; its damping is in the platform file
    assert 0 < doc["fitted"]["refine"]["evaluations"] <= 80
    np.testing.assert_allclose(entry.airframe.drag_moment, doc["fitted"]["refine"]["drag_moment"])
    assert set(doc["test"]) == {"constant", "model"}
    assert (out / "horizons.png").stat().st_size > 0
    # the identified airframe flies by its file name, as a catalogue name would
    res = CliRunner().invoke(app, ["fly", "--platform", str(out / "platform.toml"), "--to",
                                   "0", "0", "1", "--duration", "3",
                                   "--out", str(tmp_path / "fly")])  # fmt: skip
    assert res.exit_code == 0, res.output
    final = res.output.split("final position [m]: [", 1)[1].split("]", 1)[0]
    np.testing.assert_allclose([float(v) for v in final.split(",")], [0, 0, 1], atol=0.05)


def test_reader_checks_columns_rates_and_commands(tmp_path):
    log = fly_log(true_model(), seed=3, rows=60)
    good = tmp_path / "good.csv"
    write_csv(good, log)
    back = read_log(good)
    np.testing.assert_allclose(back.pos, log.pos)
    assert back.cmd.shape == (60, 4)
    # a missing column is named
    bad = tmp_path / "nocol.csv"
    bad.write_text(good.read_text().replace("wz,", "wq,", 1))
    with pytest.raises(FileFormatError, match="wz"):
        read_log(bad)
    # a command above full power is refused, or the flight cut there when asked
    rows = good.read_text().splitlines()
    cells = rows[41].split(",")
    cells[-1] = "1.5"
    rows[41] = ",".join(cells)
    over = tmp_path / "over.csv"
    over.write_text("\n".join(rows) + "\n")
    with pytest.raises(FileFormatError, match="motor commands"):
        read_log(over)
    assert len(read_log(over, out_of_range="cut")) == 40
    # a dropped sample is allowed and no window crosses it; an irregular clock is not
    gap = tmp_path / "gap.csv"
    gap.write_text("\n".join(rows[:30] + rows[31:41]) + "\n")
    g = read_log(gap)
    assert g.contiguous[0] == 28 and P.window_starts(g, 30).size == 0
    jitter = tmp_path / "jitter.csv"
    cells = rows[10].split(",")
    cells[0] = str(float(cells[0]) + 0.004)
    jitter.write_text("\n".join(rows[:10] + [",".join(cells)] + rows[11:]) + "\n")
    with pytest.raises(FileFormatError, match="fixed sample rate"):
        read_log(jitter)
    with pytest.raises(ConfigError, match="format"):
        read_log(good, format="px4")


def test_nanobench_columns_map_to_volary_conventions(tmp_path):
    """Scalar-last quaternions, world-frame Vicon rates and PWM in the firmware's motor order
    (M1 front-right .. M4 front-left) become [w,x,y,z], body rates and quad_x order."""
    cols = ["t", "px", "py", "pz", "qx", "qy", "qz", "qw", "vx", "vy", "vz", "wx_vicon",
            "wy_vicon", "wz_vicon", "motor_motor_m1", "motor_motor_m2", "motor_motor_m3",
            "motor_motor_m4", "pwr_pm_vbat"]  # fmt: skip
    yaw = np.pi / 2  # body x along world y: a world-x rate is a body -y rate
    q = [0.0, 0.0, np.sin(yaw / 2), np.cos(yaw / 2)]
    rows = [[i * 0.01, 0, 0, 1, *q, 0, 0, 0, 1.0, 0, 0, 100, 200, 300, 400, 4.0] for i in range(30)]
    path = tmp_path / "nb.csv"
    path.write_text(",".join(cols) + "\n" + "\n".join(",".join(map(str, r)) for r in rows))
    log = read_log(path)
    np.testing.assert_allclose(log.quat[0], [np.cos(yaw / 2), 0, 0, np.sin(yaw / 2)])
    np.testing.assert_allclose(log.omega[0], [0, -1, 0], atol=1e-12)
    np.testing.assert_allclose(log.cmd[0] * 65535, [400, 300, 200, 100])
    assert log.vbat[0] == 4.0


@pytest.mark.parametrize("backend", ["numba", "warp"])
def test_an_identified_platform_flies_the_same_on_the_fused_backends(backend):
    """Moment effectiveness lives in the airframe's geometry and k_m, which every backend
    reads: the identified Crazyflie steps the same on the fused kernels as on the eager one."""
    import importlib.util

    from volary.dynamics import rollout
    from volary.dynamics.compiled import make_stepper

    if backend == "warp" and importlib.util.find_spec("warp") is None:
        pytest.skip("warp-lang is not installed")
    n, f64 = 6, torch.float64
    af = get("crazyflie_nanobench")
    p = VehicleParams.from_airframes(af, n, dtype=f64)
    g = torch.Generator().manual_seed(0)
    w = af.hover_rotor_speed * (1 + 0.05 * torch.randn(n, 4, generator=g, dtype=f64))
    s = MultirotorState.create(n, 4, dtype=f64, pos=[0.0, 0.0, 1.0]).replace(rotor_speed=w)
    d = Disturbance.create(n, dtype=f64)
    k = torch.zeros(n, dtype=torch.int64)
    cfg = DynamicsConfig(stochastic=False)
    fast = make_stepper(cfg, substeps=40, compile=backend)(p, s, w, d, k)
    ref = rollout(p, s, w, d, k, cfg, 40)
    for field in ("pos", "vel", "quat", "omega"):
        a, b = getattr(fast, field), getattr(ref, field)
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    assert ref.omega.abs().max() > 1e-3  # the commands do turn it: the comparison is not trivial


def test_constant_rates_baseline_is_the_translational_physics_with_rates_held():
    """IDSIA's physics baseline: with equal commands on every motor (no torque, rates 0) it
    flies the log's translation (semi-implicit Euler against RK4: mm over 0.5 s); with
    torques its rates are the start rates, as the constant baseline's."""
    model = true_model()
    log = fly_log(model, seed=5, rows=120)
    even = np.repeat(log.cmd.mean(axis=1, keepdims=True), 4, axis=1)
    even *= 1 + 0.05 * np.sin(np.arange(120) / 9.0)[:, None]  # climb and sink
    calm = fly_log(model, seed=5, rows=120, commands_override=even)
    starts = P.window_starts(calm, 50, stride=10)
    truth = P.logged(calm, starts, 50)
    err = P.horizon_errors(P.constant_rates(calm, model, starts, 50), truth)
    base = P.horizon_errors(P.constant(calm, starts, 50), truth)
    assert err["pos"].max() < 2e-3 and err["vel"].max() < 1e-2 < base["vel"].max()
    starts = P.window_starts(log, 50, stride=10)
    rates = P.constant_rates(log, model, starts, 50).omega
    np.testing.assert_array_equal(rates, P.constant(log, starts, 50).omega)


TRUE_K_D, TRUE_K_FLAP = 2e-6, 2e-8  # N/((rad/s)(m/s)), N m/((rad/s)(m/s))


def aero_model() -> P.SysidModel:
    """The true model with rotor drag (standing in for the linear drag in x, y) and blade
    flapping on."""
    model = true_model()
    af = model.airframe.replace(rotor_drag_inplane=TRUE_K_D, flapping=TRUE_K_FLAP,
                                drag_linear=(0.0, 0.0, 0.004))  # fmt: skip
    return replace(model, airframe=af)


def test_fit_aero_recovers_rotor_drag_and_flapping_from_a_flight_with_them_on():
    """A log flown by volary with rotor drag and flapping on (rolling and pitching commands
    that make it fly edgewise at up to ~0.4 m/s); given the true command map, gains and timing,
    the joint least squares recovers k_d, k_flap and the z drag within 5 % (0.3 %, 0.01 % and
    2.4 % here), and
    the model it gives predicts the rates far better than an effect-free fit."""
    truth = aero_model()
    rows = 120
    t = np.arange(rows)[:, None]
    hover = truth.airframe.hover_rotor_speed / truth.command.scale
    tilt = 0.02 * np.sin(2 * np.pi * t / 80.0) * np.array([[1, -1, -1, 1]])  # pitch
    roll = 0.02 * np.sin(2 * np.pi * t / 55.0) * np.array([[-1, -1, 1, 1]])
    logs = [fly_log(truth, 0, rows, commands_override=hover + tilt + roll)]
    assert np.abs(logs[0].vel[:, :2]).max() > 0.3  # it does fly edgewise
    start = replace(truth, airframe=truth.airframe.replace(rotor_drag_inplane=0.0, flapping=0.0))
    fitted, rep = F.fit_aero(logs, start, ("rotor_drag", "flapping"))
    assert rep["rotor_drag_inplane"] == pytest.approx(TRUE_K_D, rel=0.05)
    assert rep["flapping"] == pytest.approx(TRUE_K_FLAP, rel=0.05)
    assert rep["drag_linear"][2] == pytest.approx(0.004, rel=0.05)
    assert rep["drag_linear"][:2] == [0.0, 0.0]  # rotor drag stands in for it
    assert fitted.airframe.flapping == rep["flapping"]
    # the fitted model predicts the logs better than one without the effects
    e_fit, e_none = (P.evaluate(logs, m, 20, 10) for m in (fitted, F.fit_aero(logs, start, ())[0]))
    assert e_fit["omega"][-1] < 0.5 * e_none["omega"][-1]


def test_a_platform_file_with_rotor_aerodynamics_round_trips_through_the_catalogue(tmp_path):
    from volary.sysid.report import platform_table, write_platform

    model = aero_model()
    af = model.airframe.replace(inflow_axial=3e-7, translational_lift=1e-8)
    model = replace(model, airframe=af)
    fitted = {"moment_gain": list(TRUE_GAIN), "aero": {"chosen": list(F.AERO_EFFECTS)}}
    write_platform(tmp_path / "p.toml", "cf_aero", platform_table("crazyflie", model, fitted, "t"))
    back = load_file(tmp_path / "p.toml")["cf_aero"].airframe
    for f in ("rotor_drag_inplane", "flapping", "inflow_axial", "translational_lift"):
        assert getattr(back, f) == getattr(af, f), f
    assert back.rotor_drag_axial == 0.0 and back.ground_effect_radius == 0.0
    np.testing.assert_allclose(back.rotor_positions, af.rotor_positions, rtol=1e-12)
    # an effect validation did not keep is not written
    fitted["aero"]["chosen"] = ["flapping"]
    write_platform(tmp_path / "q.toml", "cf_q", platform_table("crazyflie", model, fitted, "t"))
    back = load_file(tmp_path / "q.toml")["cf_q"].airframe
    assert back.flapping == af.flapping and back.rotor_drag_inplane == 0.0


def test_predictions_on_the_numba_kernel_match_the_eager_reference():
    """``evaluate`` flies on numba by default for speed; the eager step is the reference."""
    model = aero_model()
    model = replace(model, torque_bias=(2e-6, -1e-6, 3e-7))
    logs = [fly_log(model, seed=s, rows=100) for s in (2, 3)]
    wrong = replace(model, airframe=model.airframe.with_moment_gain((0.5, 1.5, 0.8)))
    fast, ref = (P.evaluate(logs, wrong, 30, 4, backend=b) for b in ("numba", "eager"))
    assert ref["omega"][-1] > 1e-2  # a model that does not fit: errors to compare
    for k in ("pos", "vel", "omega", "att_deg"):
        np.testing.assert_allclose(fast[k], ref[k], rtol=1e-9, atol=1e-12)
    with pytest.raises(ConfigError, match="backend"):
        P.evaluate(logs, model, 30, 4, backend="inductor")


def test_output_error_refinement_recovers_rate_damping_and_gains_a_one_step_fit_misses():
    """A log flown with rate damping (``drag_moment``); the refinement starts from the true
    model with the damping off and the moment gains halved, and brings the open-loop error
    and the parameters back near the truth within its evaluation budget."""
    truth = true_model()
    j = np.diag(np.asarray(truth.airframe.inertia))
    truth = replace(truth, airframe=truth.airframe.replace(drag_moment=tuple(2.0 * j)))
    logs = [fly_log(truth, seed=s, rows=150) for s in range(3)]
    start = replace(truth, airframe=truth.airframe.replace(drag_moment=(0.0, 0.0, 0.0))
                    .with_moment_gain((0.5, 0.5, 0.5)))  # fmt: skip
    refined, rep = F.fit_refine(logs, start, horizon=30, stride=10, max_evaluations=400,
                                thrust=False)  # fmt: skip
    assert rep["score"] < 0.2 * rep["score_start"]
    np.testing.assert_allclose(rep["moment_gain_factor"], 2.0, rtol=0.25)
    np.testing.assert_allclose(refined.airframe.drag_moment, 2.0 * j, rtol=0.5)
    e_ref, e_start = (P.evaluate(logs, m, 30, 10)["omega"][-1] for m in (refined, start))
    assert e_ref < 0.2 * e_start


def test_command_map_curve_off_is_the_linear_map_and_on_is_the_thrust_polynomial():
    log = fly_log(true_model(), seed=0, rows=20)
    plain = P.CommandMap(SCALE, use_voltage=False)
    assert np.array_equal(plain.rotor_speed(log), SCALE * log.cmd)  # bit for bit
    curved = P.CommandMap(SCALE, use_voltage=False, curve=(0.3, -0.01))
    w2 = (curved.rotor_speed(log) / SCALE) ** 2
    np.testing.assert_allclose(w2, log.cmd**2 + 0.3 * log.cmd - 0.01, rtol=1e-12)


@pytest.mark.slow  # an option off by default; about 8 s
def test_output_error_refinement_recovers_a_thrust_curve_a_square_law_misses():
    """A log flown with a thrust curve (thrust k_f s^2 (e^2 + c1 e + c0)); the refinement starts
    from the square law with the command scale that holds hover, and brings the open-loop
    position error down and the thrust and its slope at hover back to the truth's (what small
    command wiggles around hover can tell; c1, c0 and s one by one they cannot)."""
    truth = true_model()
    truth = replace(truth, command=replace(truth.command, curve=(0.4, 0.02)))
    r = truth.airframe.hover_rotor_speed / SCALE
    hover_u = (-0.4 + np.sqrt(0.16 - 4.0 * (0.02 - r * r))) / 2.0

    def climbs(seed: int) -> np.ndarray:  # collective steps of +-15 % around hover
        rng = np.random.default_rng(seed)
        level = hover_u * (1.0 + 0.15 * np.repeat(rng.choice([-1.0, 1.0], 6), 25))
        return level[:, None] + commands(rng, 150, 0.5) - 0.5  # and wiggles

    logs = [fly_log(truth, seed=s, rows=150, commands_override=climbs(s)) for s in range(3)]
    level = truth.command.scale**2 * (hover_u**2 + 0.4 * hover_u + 0.02)
    start = replace(truth, command=P.CommandMap(float(np.sqrt(level) / hover_u), use_voltage=False))
    refined, rep = F.fit_refine(logs, start, horizon=30, stride=10, max_evaluations=400,
                                thrust=True)  # fmt: skip
    e_ref, e_start = (P.evaluate(logs, m, 30, 10)["pos"][-1] for m in (refined, start))
    assert e_ref < 0.3 * e_start

    def thrust_and_slope(c: P.CommandMap) -> np.ndarray:
        c1, c0 = c.curve
        return c.scale**2 * np.array([hover_u**2 + c1 * hover_u + c0, 2 * hover_u + c1])

    np.testing.assert_allclose(thrust_and_slope(refined.command),
                               thrust_and_slope(truth.command), rtol=0.1)  # fmt: skip


def test_refined_moment_gains_end_within_the_platform_schema():
    """A gain the search leaves below the catalogue's 0.001 would write a platform file that
    does not load: the refinement clips it (here the start's roll gain is already 0.0005)."""
    model = true_model()
    logs = [fly_log(model, seed=0, rows=80)]
    _, rep = F.fit_refine(logs, model, horizon=20, stride=10, max_evaluations=20,
                          moment_gain=(0.0005, 0.05, 0.3))  # fmt: skip
    gains = np.array(rep["moment_gain_factor"]) * (0.0005, 0.05, 0.3)
    assert gains.min() >= 1e-3 and gains.max() <= 100.0


def _flown_log(tmp_path, stochastic: bool):
    """A crazyflie flown by the Simulator (position control, a 1.2 m step), written by
    ``Trajectory.to_csv`` as ``volary fly`` writes it."""
    from volary.sim import Simulator

    sim = Simulator("crazyflie", n_envs=1, control="position", seed=0, stochastic=stochastic)
    return sim.run([1.0, 0.5, 1.5, 0.0], 2.0).to_csv(tmp_path / "fly.csv")


def test_a_volary_fly_log_is_reproduced_by_its_platform_from_the_first_row(tmp_path):
    """The ``fly`` columns: each row's command is the one that led to it (moved a row up), the
    commands are fractions of the rotor speed given, and the motor lag starts from the logged
    rotor speeds. Read that way the true platform flies the log again open loop (to the CSV's
    six digits); read without the move it does not."""
    path = _flown_log(tmp_path, stochastic=False)
    with pytest.raises(ConfigError, match="rotor_full"):
        read_log(path)
    log = read_log(path, rotor_full=2500.0)
    rows = np.loadtxt(path, delimiter=",", skiprows=1)
    assert len(log) == len(rows) - 1
    np.testing.assert_allclose(log.cmd[:3] * 2500.0, rows[1:4, -4:])
    np.testing.assert_allclose(log.rotor[0], rows[0, 17:21])
    true = P.SysidModel(get("crazyflie"), P.CommandMap(2500.0, use_voltage=False))
    starts = P.window_starts(log, 50, stride=5)
    truth = P.logged(log, starts, 50)
    err = P.horizon_errors(P.fly(log, true, starts, 50), truth)
    assert err["omega"].max() < 2e-3 and err["pos"].max() < 2e-4
    unmoved = replace(log, cmd=rows[:-1, -4:] / 2500.0)
    late = P.horizon_errors(P.fly(unmoved, true, starts, 50), truth)
    assert late["omega"].max() > 10 * err["omega"].max()


def test_volary_sysid_identifies_a_volary_fly_log_back_to_its_platform(tmp_path):
    """`volary fly` then `volary sysid` on its log (noise on, as `volary fly` flies): the fit
    returns the crazyflie's command scale, moment gains and motor lag (docs/sysid.md)."""
    from typer.testing import CliRunner

    from volary.cli.main import app

    fly = CliRunner().invoke(app, ["fly", "--platform", "crazyflie", "--to", "1", "0.5", "1.5",
                                   "--duration", "3", "--out", str(tmp_path / "fly")])  # fmt: skip
    assert fly.exit_code == 0, fly.output
    out = tmp_path / "sysid"
    res = CliRunner().invoke(app, ["sysid", str(tmp_path / "fly" / "fly.csv"), "--platform",
                                   "crazyflie", "--out", str(out), "--horizon", "20"])  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "sysid.json").read_text())
    cf = get("crazyflie")
    assert doc["command_map"]["scale_rad_s"] == pytest.approx(cf.max_rotor_speed[0], rel=0.005)
    np.testing.assert_allclose(doc["fitted"]["moment_gain"], 1.0, atol=0.01)
    assert doc["delay_samples"] == 0
    assert doc["fitted"]["motor_tau_s"] == pytest.approx(cf.motor_tau_up[0])
    # a start airframe that cannot have flown the log is named, with the option that picks it
    res = CliRunner().invoke(app, ["sysid", str(tmp_path / "fly" / "fly.csv"), "--platform",
                                   "hexa", "--out", str(out)])  # fmt: skip
    assert res.exit_code == 2 and "above the 1100 rad/s of full command given" in res.output
    assert "--platform" in res.output
    log = read_log(tmp_path / "fly" / "fly.csv", rotor_full=5000.0)
    with pytest.raises(ConfigError, match=r"4 motor columns; expected 6 for hexa.*--platform"):
        F.fit([log], get("hexa"))
