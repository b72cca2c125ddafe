"""Fit a :class:`~volary.sysid.predict.SysidModel` to training flights only.

Steps, each a closed-form least-squares fit on the training rows or a small grid search on
the training windows (nothing here ever sees a test flight):

1. **Command scale** (rotor speed at full command): the collective thrust k_f sum_i w_i^2 must
   carry the measured body-z force m (a + g) . z_B on average; with w_i = s e_i that is
   s^2 = sum(F S) / sum(S^2), S = sum_i k_f,i e_i^2 (hover balance, FlightGoggles Sec. IV).
2. **Body drag**: the horizontal and vertical body-frame force left over,
   f = m R^T (a + g e_z) - T e_z, regressed on the body velocity per axis:
   f_j = -D_j v_j (``drag_linear``, N/(m/s)).
1b. **Moment effectiveness and input delay** (:func:`fit_moment`): per axis, the gain that
   turns the rotor model's roll, pitch and yaw moments into the ones the logged rates imply.
3. **Torque bias**: the mean body torque J dW/dt + W x J W the rotor model does not explain,
   a property of the vehicle (centre-of-mass offset, motor and propeller mismatch).
4. **Input delay and motor lag**: the pair (delay in samples, tau) whose open-loop predictions
   on the training windows have the smallest error relative to the constant baseline.

Each step can be switched off (``steps``) so a report can show what each one buys.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from volary.dynamics import Airframe
from volary.dynamics.models import GRAVITY
from volary.errors import ConfigError
from volary.sysid.logs import FlightLog, rotmat
from volary.sysid.predict import CommandMap, SysidModel, evaluate, rotor_history

STEPS = ("moment", "drag", "bias", "timing")


def body_force(log: FlightLog, mass: float) -> np.ndarray:
    """(T, 3) total non-gravity force in the body frame, m R^T (dv/dt + g e_z) (N), from the
    logged world velocity (central differences)."""
    acc = np.gradient(log.vel, log.dt, axis=0) + np.array([0.0, 0.0, GRAVITY])
    return mass * np.einsum("tji,tj->ti", rotmat(log.quat), acc)


def body_torque(log: FlightLog, inertia: np.ndarray) -> np.ndarray:
    """(T, 3) J dW/dt + W x (J W) (N m): the torque the logged body rates imply over each
    sample interval, [i, i+1] (forward differences, the rates at the interval's middle;
    the last row repeats the one before)."""
    w = log.omega
    mid = 0.5 * (w[1:] + w[:-1])
    tau = np.diff(w, axis=0) / log.dt @ inertia.T + np.cross(mid, mid @ inertia.T)
    return np.concatenate([tau, tau[-1:]])


def interval_mean(x: np.ndarray) -> np.ndarray:
    """(T, k) the mean of rows i and i+1: a per-row quantity over the interval [i, i+1]."""
    return np.concatenate([0.5 * (x[1:] + x[:-1]), x[-1:]])


def _smooth(a: np.ndarray, k: int = 5) -> np.ndarray:
    """Moving average over ``k`` samples, per column (differentiated rates are noisy)."""
    kernel = np.ones(k) / k
    return np.stack([np.convolve(a[:, j], kernel, "same") for j in range(a.shape[1])], 1)


def _rows(logs: Sequence[FlightLog], trim: int = 5):
    """Drop the first and last rows of each flight (one-sided differences there)."""
    return [slice(trim, len(log) - trim) for log in logs]


def fit_scale(logs: Sequence[FlightLog], airframe: Airframe, use_voltage: bool = True) -> float:
    """Step 1: rotor speed at full command (rad/s) from the hover balance."""
    k_f = np.asarray(airframe.k_f)
    num = den = 0.0
    for log, rows in zip(logs, _rows(logs), strict=True):
        e = CommandMap(1.0, use_voltage).effective(log)[rows]
        s = (k_f * e**2).sum(axis=1)
        f = body_force(log, airframe.mass)[rows, 2]
        num, den = num + float((f * s).sum()), den + float((s * s).sum())
    if den <= 0:
        raise ConfigError("logs: every motor command is zero; nothing to fit the thrust to")
    return float(np.sqrt(num / den))


def rotor_force_torque(log: FlightLog, model: SysidModel) -> tuple[np.ndarray, np.ndarray]:
    """(T, 3) body force and torque of the rotors at the modelled rotor speeds."""
    w = rotor_history(log, model)
    alloc = model.airframe.allocation_matrix()  # (6, R)
    thrust = np.asarray(model.airframe.k_f) * w * np.abs(w)
    wrench = thrust @ alloc.T
    return wrench[:, :3], wrench[:, 3:]


def fit_drag(logs: Sequence[FlightLog], model: SysidModel) -> tuple[float, float, float]:
    """Step 2: linear body drag per axis (N/(m/s)), clipped at 0."""
    num, den = np.zeros(3), np.zeros(3)
    for log, rows in zip(logs, _rows(logs), strict=True):
        force, _ = rotor_force_torque(log, model)
        resid = body_force(log, model.airframe.mass) - force
        v_b = np.einsum("tji,tj->ti", rotmat(log.quat), log.vel)
        num += -(resid[rows] * v_b[rows]).sum(axis=0)
        den += (v_b[rows] ** 2).sum(axis=0)
    d = np.where(den > 0, num / np.maximum(den, 1e-12), 0.0).clip(min=0.0)
    return (float(d[0]), float(d[1]), float(d[2]))


def fit_moment(
    logs: Sequence[FlightLog], model: SysidModel, delays: Sequence[int] = range(9)
) -> tuple[SysidModel, dict]:
    """Step 1b: per-axis moment effectiveness and input delay. For each delay, regress the
    body torque the logged rates imply on the modelled rotor torque, axis by axis
    (tau_j = g_j tau_model,j + b_j, smoothed over 5 samples: the rates are differentiated);
    keep the delay with the largest summed R^2. Gains are clipped to [0.01, 2]."""
    inertia = np.asarray(model.airframe.inertia)
    rows = _rows(logs, 10)
    # the measured torque does not depend on the delay: smoothed once
    pairs = list(zip(logs, rows, strict=True))
    y = np.concatenate([_smooth(body_torque(log, inertia))[r] for log, r in pairs])
    best: tuple[float, int, np.ndarray, np.ndarray] = (-np.inf, 0, np.ones(3), np.zeros(3))
    r2_by_delay = {}
    for d in delays:
        cand = replace(model, delay=int(d))
        x = np.concatenate([
            _smooth(interval_mean(rotor_force_torque(log, cand)[1]))[r]
            for log, r in pairs
        ])  # fmt: skip
        g, b, r2 = np.zeros(3), np.zeros(3), np.zeros(3)
        for j in range(3):
            a = np.c_[x[:, j], np.ones(len(x))]
            (g[j], b[j]), *_ = np.linalg.lstsq(a, y[:, j], rcond=None)
            r2[j] = 1 - np.var(y[:, j] - a @ (g[j], b[j])) / max(np.var(y[:, j]), 1e-30)
        r2_by_delay[int(d)] = [float(v) for v in r2]
        if r2.sum() > best[0]:
            best = (float(r2.sum()), int(d), g, b)
    _, d, g, b = best
    g = g.clip(0.01, 2.0)
    fitted = replace(model, airframe=model.airframe.with_moment_gain(g), delay=d)
    return fitted, {"moment_gain": g.tolist(), "delay_samples": d, "r2_by_delay": r2_by_delay}


def fit_bias(logs: Sequence[FlightLog], model: SysidModel) -> tuple[float, float, float]:
    """Step 3: mean unexplained body torque (N m) over the training rows."""
    inertia = np.asarray(model.airframe.inertia)
    total, n = np.zeros(3), 0
    for log, rows in zip(logs, _rows(logs), strict=True):
        torque = interval_mean(rotor_force_torque(log, model)[1])
        total += (body_torque(log, inertia) - torque)[rows].sum(axis=0)
        n += rows.stop - rows.start
    b = total / max(n, 1)
    return (float(b[0]), float(b[1]), float(b[2]))


def timing_score(
    logs: Sequence[FlightLog], model: SysidModel, horizon: int, stride: int, base: dict
) -> float:
    """Mean over horizons of the position, velocity and rate errors, each relative to the
    constant baseline's ``base`` (1.0: as good as the baseline)."""
    err = evaluate(list(logs), model, horizon, stride)
    return float(np.mean([np.mean(err[k] / base[k]) for k in ("pos", "vel", "omega")]))


def fit_timing(
    logs: Sequence[FlightLog],
    model: SysidModel,
    delays: Sequence[int] = (0, 1, 2, 3, 4, 5, 6),
    taus: Sequence[float] = (0.01, 0.02, 0.03, 0.05, 0.08),
    horizon: int = 25,
    stride: int = 20,
    progress: Callable[[str], None] | None = None,
) -> tuple[SysidModel, dict[str, float]]:
    """Step 4: the (delay, motor tau) pair with the lowest :func:`timing_score`."""
    scores: dict[str, float] = {}
    best = (np.inf, model)
    base = evaluate(list(logs), None, horizon, stride)
    for tau in taus:
        af = model.airframe.replace(motor_tau_up=(tau,), motor_tau_down=(tau,))
        for d in delays:
            cand = replace(model, airframe=af, delay=int(d))
            s = timing_score(logs, cand, horizon, stride, base)
            scores[f"delay={d},tau={tau:g}"] = s
            if progress is not None:
                progress(f"timing grid {len(scores)}/{len(taus) * len(delays)}: delay {d}, "
                         f"tau {tau:g} s -> {s:.3f}")  # fmt: skip
            if s < best[0]:
                best = (s, cand)
    return best[1], scores


def fit(
    logs: Sequence[FlightLog],
    airframe: Airframe,
    steps: Sequence[str] = STEPS,
    use_voltage: bool = True,
    substeps: int = 4,
    progress: Callable[[str], None] | None = None,
) -> tuple[SysidModel, dict]:
    """Fit a model on ``logs`` (training flights only), starting from ``airframe``. Returns
    the model and a report of every fitted value and the timing grid's scores; ``progress``
    gets a line per timing-grid candidate (the slow step)."""
    unknown = sorted(set(steps) - set(STEPS))
    if unknown or not logs:
        raise ConfigError(
            f"steps, logs: expected steps from {', '.join(STEPS)} and at least one log, got "
            f"{', '.join(unknown) or 'no logs'}"
        )
    n = {log.cmd.shape[1] for log in logs}
    if n != {airframe.n_rotors}:
        raise ConfigError(
            f"logs: {sorted(n)} motor columns; expected {airframe.n_rotors} for {airframe.name}"
        )
    scale = fit_scale(logs, airframe, use_voltage)
    af = airframe.replace(max_rotor_speed=(max(scale * 1.1, *airframe.max_rotor_speed),))
    model = SysidModel(af, CommandMap(scale, use_voltage), substeps=substeps)
    report: dict = {"command_scale_rad_s": scale, "steps": list(steps)}
    if "moment" in steps:
        model, more = fit_moment(logs, model)
        report.update(more)
    if "timing" in steps:
        model, report["timing_scores"] = fit_timing(logs, model, progress=progress)
        report["delay_samples"] = model.delay
        report["motor_tau_s"] = model.airframe.motor_tau_up[0]
    if "drag" in steps:
        drag = fit_drag(logs, model)
        model = replace(model, airframe=model.airframe.replace(drag_linear=drag))
        report["drag_linear"] = list(drag)
    if "bias" in steps:
        model = replace(model, torque_bias=fit_bias(logs, model))
        report["torque_bias_Nm"] = list(model.torque_bias)
    return model, report
