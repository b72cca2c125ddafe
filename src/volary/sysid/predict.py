"""Open-loop multi-step prediction on a flight log: volary's dynamics against the baselines.

The protocol (IDSIA nano-drone benchmark, Busetto et al. 2025; NanoBench Task 1): from every
start row k of a test flight, take the logged state x_k, feed the logged motor commands
u_k .. u_{k+H-1} open loop, and compare the predicted states at k+1 .. k+H with the log. The
error at horizon h is the root mean square over windows of the Euclidean error of position
(m), velocity (m/s) and body rates (rad/s), and the mean attitude error (deg). Windows that
would cross a dropped sample are not used.

Baselines: ``constant``: position moves on at the start velocity, velocity and body rates stay
(the "constant velocity / constant rates" predictor every model must beat at short horizons).

The model is a :class:`SysidModel`: an airframe, a command map (normalized motor command and
battery voltage -> rotor speed command), an input delay in samples and a constant body torque
bias. It is flown with volary's own rigid-body step (float64, noise and ground off),
``substeps`` physics steps per log sample, every window of a flight in one batch: by default
its numba kernel (``backend="numba"``, about 3 times the eager step's speed at 4,000 windows;
``tests/test_sysid.py`` checks it against the eager reference, :func:`volary.dynamics.physics_step`,
to 1e-9 relative).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from volary.dynamics import Airframe, DynamicsConfig, MultirotorState, VehicleParams
from volary.dynamics.compiled import make_stepper
from volary.dynamics.models import gravity_vector, rotor_thrusts
from volary.dynamics.step import Disturbance
from volary.errors import ConfigError, not_one_of
from volary.math.quaternion import (
    quat_integrate,
    quat_normalize,
    quat_rotate,
    quat_rotate_inverse,
)
from volary.sysid.logs import FlightLog

BACKENDS = ("numba", "eager")  # make_stepper backends a prediction can fly on (float64, CPU)
V_REF = 4.2  # V, a full single-cell LiPo: the voltage the command map is referred to


@dataclass(frozen=True)
class CommandMap:
    """Rotor speed command (rad/s) of a normalized motor command u in [0, 1] at battery voltage
    V: w_cmd = scale * e, e = u * (V / V_REF) (a brushed DC motor's no-load speed is proportional
    to its mean voltage, u * V); ``use_voltage`` False drops the voltage factor.

    ``curve`` = (c1, c0) makes the thrust a polynomial in e rather than its square:
    w_cmd = scale * sqrt(max(e^2 + c1 e + c0, 0)), so k_f w_cmd^2 = k_f scale^2 (e^2 + c1 e + c0),
    the form of the Crazyflie's thrust-stand curve (Forster 2015, System Identification of the
    Crazyflie 2.0 Nano Quadrocopter, ETH: thrust a second-order polynomial in the PWM command).
    (0, 0), the default, is w_cmd = scale * e. Fitted by output error (``fit.fit_refine``) on
    closed-loop logs it need not be monotonic (experiments/sysid/nanobench/README.md)."""

    scale: float  # rad/s at full command and V_REF
    use_voltage: bool = True
    curve: tuple[float, float] = (0.0, 0.0)

    def effective(self, log: FlightLog) -> np.ndarray:
        """(T, R) u * V / V_REF (u where the log has no voltage or ``use_voltage`` is off)."""
        if not self.use_voltage or np.isnan(log.vbat).all():
            return log.cmd
        v = np.where(np.isnan(log.vbat), V_REF, log.vbat)
        return log.cmd * (v / V_REF)[:, None]

    def rotor_speed(self, log: FlightLog) -> np.ndarray:
        e = self.effective(log)
        if self.curve == (0.0, 0.0):
            return self.scale * e
        c1, c0 = self.curve
        return self.scale * np.sqrt(np.maximum(e * e + c1 * e + c0, 0.0))


@dataclass(frozen=True)
class SysidModel:
    """What an open-loop prediction flies."""

    airframe: Airframe
    command: CommandMap
    delay: int = 0  # samples between a logged command and the rotor responding to it
    torque_bias: tuple[float, float, float] = (0.0, 0.0, 0.0)  # N m, body frame
    substeps: int = 4
    notes: dict[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.delay < 0 or self.substeps < 1:
            raise ConfigError(
                f"delay, substeps: expected delay >= 0 and substeps >= 1, got {self.delay}, "
                f"{self.substeps}"
            )


@dataclass(frozen=True)
class Prediction:
    """Predicted (or logged) states of W windows over H steps."""

    pos: np.ndarray  # (W, H, 3)
    vel: np.ndarray  # (W, H, 3)
    quat: np.ndarray  # (W, H, 4)
    omega: np.ndarray  # (W, H, 3)


def window_starts(log: FlightLog, horizon: int, stride: int = 1) -> np.ndarray:
    """Start rows whose next ``horizon`` rows follow without a gap, every ``stride``-th."""
    if horizon < 1 or stride < 1:
        raise ConfigError(f"horizon, stride: expected >= 1, got {horizon}, {stride}")
    ok = np.flatnonzero(log.contiguous >= horizon)
    return ok[::stride]


def logged(log: FlightLog, starts: np.ndarray, horizon: int) -> Prediction:
    """The log's own states at k+1 .. k+H: what predictions are scored against."""
    idx = starts[:, None] + np.arange(1, horizon + 1)[None, :]
    return Prediction(log.pos[idx], log.vel[idx], log.quat[idx], log.omega[idx])


def constant(log: FlightLog, starts: np.ndarray, horizon: int) -> Prediction:
    """Constant velocity and body rates from the start row (attitude held)."""
    h = np.arange(1, horizon + 1)[None, :, None] * log.dt
    p0, v0 = log.pos[starts][:, None], log.vel[starts][:, None]
    rep = (1, horizon, 1)
    return Prediction(
        p0 + v0 * h, np.tile(v0, rep), np.tile(log.quat[starts][:, None], rep),
        np.tile(log.omega[starts][:, None], rep),
    )  # fmt: skip


def constant_rates(
    log: FlightLog, model: SysidModel, starts: np.ndarray, horizon: int
) -> Prediction:
    """The physics baseline of the IDSIA nano-drone benchmark (its "Physics" model sets the
    angular acceleration to zero): body rates held at the start's, attitude turning at them,
    and the translation driven by ``model``'s collective thrust (its command map, delay and
    motor lag), linear drag and gravity, ``substeps`` semi-implicit Euler steps per sample."""
    af, h = model.airframe, log.dt / model.substeps
    init, cmds = _inputs(log, model, starts, horizon)
    pos, vel, quat, omega, w = (torch.as_tensor(np.ascontiguousarray(a)) for a in init)
    u = torch.as_tensor(cmds)
    k_f, drag = torch.tensor(af.k_f, dtype=torch.float64), torch.tensor(af.drag_linear)
    decay = torch.exp(-h / torch.tensor(af.motor_tau_up, dtype=torch.float64))
    out = {k: np.empty((len(starts), horizon, d)) for k, d in (("pos", 3), ("vel", 3), ("quat", 4))}
    for j in range(horizon):
        for _ in range(model.substeps):
            w = u[:, j] + (w - u[:, j]) * decay
            f_b = -drag * quat_rotate_inverse(quat, vel)
            f_b[:, 2] += rotor_thrusts(k_f, w).sum(dim=1)
            vel = vel + h * (quat_rotate(quat, f_b) / af.mass + gravity_vector(vel))
            pos = pos + h * vel
            quat = quat_normalize(quat_integrate(quat, omega, h))
        for k, v in (("pos", pos), ("vel", vel), ("quat", quat)):
            out[k][:, j] = v.numpy()
    rates = np.repeat(omega.numpy()[:, None], horizon, axis=1)
    return Prediction(out["pos"], out["vel"], out["quat"], rates)


def rotor_history(log: FlightLog, model: SysidModel) -> np.ndarray:
    """(T, R) the rotor speeds the motor lag gives the delayed commands, filtered from the
    log's first row (inputs only): the rotor speeds a window starts from. Row i's speed comes
    from the command held over the step before it, w_i = c_{i-1} + (w_{i-1} - c_{i-1})
    exp(-dt / tau) (the lag's exact solution under a held command); w_0 is the log's measured
    rotor speed where it has one (``volary fly``'s), else c_0 (the rotors settled)."""
    from scipy.signal import lfilter

    cmd = delayed_commands(log, model)
    decay = np.broadcast_to(np.exp(-log.dt / np.asarray(model.airframe.motor_tau_up)), cmd[0].shape)
    w = np.empty_like(cmd)
    w[0] = cmd[0] if log.rotor is None else log.rotor[0]
    for r, d in enumerate(decay):  # w_i = d w_{i-1} + (1 - d) c_{i-1}: a first-order IIR filter
        w[1:, r] = lfilter([1.0 - d], [1.0, -d], cmd[:-1, r], zi=[d * w[0, r]])[0]
    return w


def delayed_commands(log: FlightLog, model: SysidModel) -> np.ndarray:
    cmd = model.command.rotor_speed(log)
    if model.delay:
        cmd = np.concatenate([np.repeat(cmd[:1], model.delay, axis=0), cmd[: -model.delay]])
    return np.clip(cmd, 0.0, np.asarray(model.airframe.max_rotor_speed))


def _inputs(log: FlightLog, model: SysidModel, starts: np.ndarray, horizon: int):
    """Each window's start state (pos, vel, quat, omega, rotor speed) and its (H, R) rotor
    speed commands."""
    idx = starts[:, None] + np.arange(horizon)[None, :]
    init = (log.pos[starts], log.vel[starts], log.quat[starts], log.omega[starts],
            rotor_history(log, model)[starts])  # fmt: skip
    return init, delayed_commands(log, model)[idx]


def fly_windows(
    model: SysidModel, init: tuple, cmds: np.ndarray, dt: float, backend: str = "numba"
) -> Prediction:
    """Volary's dynamics flown open loop from W start states with (W, H, R) held commands, on
    ``backend`` (one of :data:`BACKENDS`)."""
    if backend not in BACKENDS:
        raise not_one_of("backend", backend, BACKENDS)
    n, horizon, f64 = cmds.shape[0], cmds.shape[1], torch.float64
    params = VehicleParams.from_airframes(model.airframe, n, dtype=f64)
    pos, vel, quat, omega, w = (torch.as_tensor(np.ascontiguousarray(a)) for a in init)
    state = MultirotorState.create(n, model.airframe.n_rotors, dtype=f64).replace(
        pos=pos, vel=vel, quat=quat, omega=omega, rotor_speed=w
    )
    cfg = DynamicsConfig(dt=dt / model.substeps, stochastic=False, ground=False)
    step = make_stepper(cfg, model.substeps, compile=backend)
    bias = torch.tensor(model.torque_bias, dtype=f64).expand(n, 3).clone()
    dist = replace(Disturbance.create(n, dtype=f64), moment=bias)
    keys = torch.zeros(n, dtype=torch.int64)
    u_all = torch.as_tensor(np.ascontiguousarray(cmds))
    shapes = (("pos", 3), ("vel", 3), ("quat", 4), ("omega", 3))
    out = {k: np.empty((n, horizon, d)) for k, d in shapes}
    for j in range(horizon):
        state = step(params, state, u_all[:, j], dist, keys)
        for k in out:
            out[k][:, j] = getattr(state, k).numpy()
    return Prediction(**out)


def fly(
    log: FlightLog, model: SysidModel, starts: np.ndarray, horizon: int, backend: str = "numba"
) -> Prediction:
    """Volary's dynamics flown open loop from each start row for ``horizon`` samples."""
    init, cmds = _inputs(log, model, starts, horizon)
    return fly_windows(model, init, cmds, log.dt, backend)


def _cat(parts: list[Prediction]) -> Prediction:
    return Prediction(*(np.concatenate([getattr(p, k) for p in parts])
                        for k in ("pos", "vel", "quat", "omega")))  # fmt: skip


def attitude_error_deg(q: np.ndarray, q_ref: np.ndarray) -> np.ndarray:
    """Rotation angle between unit quaternions (deg), elementwise over leading axes."""
    dot = np.abs((q * q_ref).sum(-1)).clip(0.0, 1.0)
    return np.degrees(2 * np.arccos(dot))


def horizon_errors(pred: Prediction, truth: Prediction) -> dict[str, np.ndarray]:
    """Per horizon h = 1..H: RMSE over windows of |dp| (m), |dv| (m/s), |dW| (rad/s), the same
    errors' means (``mae_*``) and the mean attitude error (deg)."""

    def norms(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.sqrt(np.square(a - b).sum(-1))

    out = {}
    for k in ("pos", "vel", "omega"):
        e = norms(getattr(pred, k), getattr(truth, k))
        out[k] = np.sqrt((e**2).mean(0))
        out[f"mae_{k}"] = e.mean(0)  # the IDSIA benchmark's metric: mean of the norms
    out["att_deg"] = attitude_error_deg(pred.quat, truth.quat).mean(0)
    return out


def _check_logs(logs: list[FlightLog], truth: list, horizon: int) -> None:
    if not truth:
        raise ConfigError(f"logs: no window of {horizon} samples without a gap")
    dts = [log.dt for log in logs]
    if max(dts) > 1.01 * min(dts):
        raise ConfigError(
            f"logs: expected one sample rate across the logs, got steps of "
            f"{min(dts) * 1e3:.3f}-{max(dts) * 1e3:.3f} ms"
        )


@dataclass(frozen=True)
class Windows:
    """Every window of some logs, ready to fly: the logged truth and each window's start state
    and (W, H, R) commands, which depend on a model's command map, delay and motor lag only
    (a model that differs in nothing else flies the same windows: ``fit_refine``)."""

    truth: Prediction
    init: tuple
    cmds: np.ndarray
    dt: float

    def errors(self, model: SysidModel, backend: str = "numba") -> dict[str, np.ndarray]:
        """:func:`horizon_errors` of ``model`` flown over the windows, plus ``windows``."""
        pred = fly_windows(model, self.init, self.cmds, self.dt, backend)
        out = horizon_errors(pred, self.truth)
        out["windows"] = np.asarray(len(self.cmds))
        return out


def windows(logs: list[FlightLog], model: SysidModel, horizon: int, stride: int = 1) -> Windows:
    """The :class:`Windows` of every log (every ``stride``-th start, ``horizon`` samples)."""
    truth, inits, cmds = [], [], []
    for log in logs:
        starts = window_starts(log, horizon, stride)
        if not len(starts):
            continue
        truth.append(logged(log, starts, horizon))
        init, c = _inputs(log, model, starts, horizon)
        inits.append(init)
        cmds.append(c)
    _check_logs(logs, truth, horizon)
    init = tuple(np.concatenate([i[k] for i in inits]) for k in range(5))
    return Windows(_cat(truth), init, np.concatenate(cmds), logs[0].dt)


def evaluate(
    logs: list[FlightLog],
    model: SysidModel | None,
    horizon: int = 50,
    stride: int = 1,
    baseline: str | None = None,
    backend: str = "numba",
) -> dict[str, np.ndarray]:
    """Horizon errors pooled over the windows of every log, all windows flown as one batch:
    volary's dynamics with ``model``; with ``model`` None the constant baseline; with
    ``baseline="constant_rates"`` the IDSIA physics baseline (:func:`constant_rates`) using
    ``model``'s thrust. ``backend``: what volary's dynamics fly on (:data:`BACKENDS`). Returns
    the :func:`horizon_errors` keys plus ``windows``."""
    if baseline not in (None, "constant_rates") or (baseline and model is None):
        raise ConfigError(f"baseline: expected None or constant_rates with a model, got {baseline}")
    if model is not None and baseline is None:
        return windows(logs, model, horizon, stride).errors(model, backend)
    truth, preds = [], []
    for log in logs:
        starts = window_starts(log, horizon, stride)
        if not len(starts):
            continue
        truth.append(logged(log, starts, horizon))
        if model is None:
            preds.append(constant(log, starts, horizon))
        else:
            preds.append(constant_rates(log, model, starts, horizon))
    _check_logs(logs, truth, horizon)
    out = horizon_errors(_cat(preds), _cat(truth))
    out["windows"] = np.asarray(sum(len(t.pos) for t in truth))
    return out


def summary(errors: dict[str, np.ndarray], dt: float, at_s=(0.01, 0.1, 0.25, 0.5)) -> dict:
    """The horizon errors at a few horizons (s), rounded for a report."""
    out: dict = {"windows": int(errors["windows"])}
    for t in at_s:
        h = max(1, math.floor(t / dt + 0.5))
        if h <= len(errors["pos"]):
            out[f"{t:g}s"] = {k: float(v[h - 1]) for k, v in errors.items() if k != "windows"}
    return out
