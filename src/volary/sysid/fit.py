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
5. **Rotor aerodynamics** (:func:`fit_aero`, :func:`select_aero`; ``volary.dynamics.aero``
   A3, A5, A6): rotor drag ``k_d``, blade flapping ``k_flap``, axial inflow ``k_ax`` and
   translational lift ``k_tl``. At the logged state and the modelled rotor speeds each is linear
   in its coefficient, so :func:`aero_regressors` evaluates ``aero.rotor_aero`` itself with a
   unit coefficient to get each one's body wrench, and the force and torque the rotors leave
   unexplained are regressed on them jointly with the linear drag and the torque bias (which
   steps 2 and 3 then become). Coefficients are kept >= 0 (a negative one is reported and
   dropped). Which effects the model keeps is decided on validation flights (training flights
   held out of the coefficient fit), never on test flights.

6. **Output-error refinement** (:func:`fit_refine`): steps 1b-5 fit each parameter to one
   sample's residual (equation error), which biases what noisy, closed-loop logs say about the
   angular dynamics and the thrust. This step starts from them and adjusts the moment gains,
   the torque bias, a rate damping (``drag_moment``, m_a = -|W| C_a W) and, when asked
   (``thrust=True``), the thrust's command map (its scale and a thrust curve,
   :class:`~volary.sysid.predict.CommandMap`) to
   minimize the open-loop multi-step error itself on the training windows
   (:func:`refine_score`: the errors relative to the constant-rates baseline at horizons
   1-50, with a penalty on any horizon where the model is not better than it), by Powell's
   derivative-free method within bounds. A standard output-error identification (Ljung,
   System Identification, 2nd ed., Sec. 4.2 and 7.3, the output-error model structure). The
   rotor-aerodynamics coefficients keep their least-squares values: they are physical
   coefficients other vehicles take over by similarity (experiments/aero), and the output
   error would make them absorb what the closed loop does.

Each step can be switched off (``steps``) so a report can show what each one buys.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from volary.dynamics import Airframe, aero
from volary.dynamics.models import GRAVITY
from volary.errors import ConfigError
from volary.platforms.schema import FIELDS
from volary.sysid.logs import FlightLog, rotmat
from volary.sysid.predict import CommandMap, SysidModel, evaluate, rotor_history, windows

# fit_refine's search box, in units of the start value (gains: log of the factor) or of
# the vehicle's inertia times 1 rad/s^2 (torque bias, N m) and per (rad/s)^2 (rate damping)
REFINE_LOG_GAIN = (-4.0, 1.0)  # moment gains from e^-4 (1.8 %) to e times the start's
REFINE_BIAS = 5.0  # +-5 rad/s^2 of angular acceleration around the start's bias
REFINE_LOG_DAMPING = (-8.0, 4.0)  # C_a / J from e^-8 (off) to e^4 (1/s^2 per rad/s)
# the thrust's command map (``thrust=True``): log of the command scale's factor, and the curve
# (c1, c0) of CommandMap (thrust k_f scale^2 (e^2 + c1 e + c0); (0, 0) is the start's)
REFINE_LOG_SCALE, REFINE_CURVE = (-0.5, 0.5), ((-2.0, 2.0), (-0.5, 1.0))
# fit_refine's objective: a hinge on every horizon where the prediction is not REFINE_MARGIN
# better than the constant-rates baseline (position, velocity: every horizon; body rates: up to
# REFINE_RATES_S), REFINE_PENALTY times its excess, on top of the mean error ratio
REFINE_MARGIN, REFINE_PENALTY, REFINE_RATES_S = 0.005, 10.0, 0.1

STEPS = ("moment", "drag", "bias", "timing", "aero", "refine")
# what fit() runs unless told: the refinement is asked for (it makes a better open-loop
# predictor of closed-loop logs, not a vehicle to fly under another controller: see fit_refine)
DEFAULT_STEPS = STEPS[:-1]
# the rotor-aerodynamics effects the fit knows, each with its Airframe fields (aero.COEFFS order)
AERO_EFFECTS: dict[str, tuple[str, ...]] = {
    "rotor_drag": ("rotor_drag_inplane",),
    "flapping": ("flapping",),
    "inflow": ("inflow_axial", "translational_lift"),
}
# Airframe field -> aero.rotor_aero keyword. rotor_drag_axial (k_z) is not fitted: its force,
# -k_z |w| u_a n, is the inflow thrust's -k_ax |w| u_a n exactly (the two differ only in the
# rotor's reaction torque), so the logs cannot tell them apart; k_ax carries both.
AERO_KEYS = {"rotor_drag_inplane": "k_d", "flapping": "k_flap", "inflow_axial": "k_ax",
             "translational_lift": "k_tl"}  # fmt: skip


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


def aero_regressors(log: FlightLog, model: SysidModel, fields: Sequence[str]) -> np.ndarray:
    """(T, 6, K) the body wrench [f; m] each of ``fields`` (Airframe rotor-aerodynamics fields)
    adds per unit coefficient at the logged velocity and rates and the modelled rotor speeds:
    ``aero.rotor_aero`` evaluated with that coefficient 1 and the others 0, its thrust through the
    allocation plus its H-force and moments (A3, A5, A6 are linear in each coefficient; no
    ground: the prediction flies without one)."""
    af = model.airframe
    w = rotor_history(log, model)  # (T, R)
    v = np.einsum("tji,tj->ti", rotmat(log.quat), log.vel)  # body-frame velocity
    o = log.omega
    r, n = np.asarray(af.rotor_positions), np.asarray(af.rotor_axes)
    alloc = af.allocation_matrix()  # (6, R)
    zero = np.zeros_like(w)
    cols = []
    for name in fields:
        unit = dict.fromkeys(aero.COEFFS, 0.0)
        unit[AERO_KEYS[name]] = 1.0
        thrust, *extra = aero.rotor_aero(
            w, zero, *(v[:, None, i] for i in range(3)), *(o[:, None, i] for i in range(3)),
            *(r[None, :, i] for i in range(3)), *(n[None, :, i] for i in range(3)),
            aero.H_MAX, *(unit[k] for k in aero.COEFFS),
        )  # fmt: skip
        wrench = thrust @ alloc.T + np.stack(extra, axis=-1).sum(axis=1)
        cols.append(wrench)
    return np.stack(cols, axis=-1) if cols else np.zeros((len(log), 6, 0))


def fit_aero(
    logs: Sequence[FlightLog],
    model: SysidModel,
    effects: Sequence[str] = tuple(AERO_EFFECTS),
    drag: bool = True,
    bias: bool = True,
    replace_drag: bool = True,
) -> tuple[SysidModel, dict]:
    """Step 5: the coefficients of ``effects`` (keys of :data:`AERO_EFFECTS`), jointly with the
    linear body drag (``drag``) and the torque bias (``bias``), by least squares on the training
    rows: the body force the rotors' ideal thrust leaves, m R^T (a + g e_z) - F_rotor, on the
    per-axis body velocity and the effects' force columns; then the torque left after the
    rotors and the force effects' own moments, on a constant per axis and the flapping column.
    With no effect this is steps 2 and 3 exactly. A coefficient the data want negative is
    reported (``raw``, ``negative``) and fixed at 0 and the rest refitted (linear drag too).

    ``replace_drag``: rotor drag stands in for the linear drag in body x and y, the inflow
    thrust for the one in z (their columns are the linear drag's times the rotor speeds, which
    vary a few per cent: fitted side by side the two are nearly collinear). False fits both."""
    unknown = sorted(set(effects) - set(AERO_EFFECTS))
    if unknown:
        raise ConfigError(f"effects: expected some of {', '.join(AERO_EFFECTS)}, got {unknown}")
    fields = [f for e in AERO_EFFECTS if e in effects for f in AERO_EFFECTS[e]]
    af0 = model.airframe.replace(**dict.fromkeys(AERO_KEYS, 0.0), rotor_drag_axial=0.0)
    model = replace(model, airframe=af0)
    inertia = np.asarray(af0.inertia)
    force_fields = [f for f in fields if f != "flapping"]
    free_drag = [j for j in range(3) if drag and not (replace_drag and (
        (j < 2 and "rotor_drag" in effects) or (j == 2 and "inflow" in effects)))]  # fmt: skip
    xs_f, ys_f, xs_t, ys_t = [], [], [], []
    for log, rows in zip(logs, _rows(logs), strict=True):
        force, torque = rotor_force_torque(log, model)
        reg = aero_regressors(log, model, fields)
        v_b = np.einsum("tji,tj->ti", rotmat(log.quat), log.vel)
        y = (body_force(log, af0.mass) - force)[rows]  # (n, 3)
        if not drag:  # the model's own drag stays: take it out of the residual
            y = y + np.asarray(af0.drag_linear) * v_b[rows]
        x = np.zeros((len(y), 3, 3 + len(force_fields)))
        for j in free_drag:
            x[:, j, j] = -v_b[rows, j]
        for k, f in enumerate(force_fields):
            x[:, :, 3 + k] = reg[rows, :3, fields.index(f)]
        xs_f.append(x)
        ys_f.append(y)
        yt = (body_torque(log, inertia) - interval_mean(torque))[rows]
        if not bias:
            yt = yt - np.asarray(model.torque_bias)
        xt = np.zeros((len(yt), 3, 3 + len(fields)))
        if bias:
            xt[:, [0, 1, 2], [0, 1, 2]] = 1.0
        xt[:, :, 3:] = interval_mean(reg[:, 3:].reshape(len(log), -1)).reshape(
            len(log), 3, -1)[rows]  # fmt: skip
        xs_t.append(xt)
        ys_t.append(yt)
    xf, yf = np.concatenate(xs_f).reshape(-1, 3 + len(force_fields)), np.concatenate(ys_f).ravel()
    xt, yt = np.concatenate(xs_t).reshape(-1, 3 + len(fields)), np.concatenate(ys_t).ravel()
    report: dict = {"effects": [e for e in AERO_EFFECTS if e in effects], "raw": {}, "negative": []}

    def solve(x: np.ndarray, y: np.ndarray, names: list[str], free: list[bool]) -> np.ndarray:
        """Least squares with the named coefficients >= 0 (a negative one fixed at 0, refit)."""
        keep = list(free)
        while True:
            coef = np.zeros(x.shape[1])
            idx = [i for i, k in enumerate(keep) if k]
            if idx:
                coef[idx] = np.linalg.lstsq(x[:, idx], y, rcond=None)[0]
            for i, name in enumerate(names):
                if name and keep[i] and name not in report["raw"]:
                    report["raw"][name] = float(coef[i])
            neg = [i for i, name in enumerate(names) if name and keep[i] and coef[i] < 0]
            if not neg:
                return coef
            for i in neg:
                keep[i] = False
                report["negative"].append(names[i])

    names_f = [f"drag_linear_{a}" for a in "xyz"] + force_fields
    cf = solve(xf, yf, names_f, [j in free_drag for j in range(3)] + [True] * len(force_fields))
    d = tuple(float(c) for c in cf[:3])  # 0 on an axis an effect replaces
    coef = dict(zip(force_fields, (float(c) for c in cf[3:]), strict=True))
    # the torque the force effects make (arms, reaction) is theirs, not the bias's
    yt = yt - xt[:, [3 + fields.index(f) for f in force_fields]] @ cf[3:]
    t_cols = [0, 1, 2] + ([3 + fields.index("flapping")] if "flapping" in fields else [])
    ct = solve(xt[:, t_cols], yt, ["", "", "", *(["flapping"] if "flapping" in fields else [])],
               [bias] * 3 + [True] * (len(t_cols) - 3))  # fmt: skip
    if "flapping" in fields:
        coef["flapping"] = float(ct[3])
    af = af0.replace(drag_linear=d if drag else af0.drag_linear, **coef)
    torque_bias = tuple(float(c) for c in ct[:3]) if bias else model.torque_bias
    report.update(coef)
    report["drag_linear"] = list(af.drag_linear)
    report["torque_bias_Nm"] = list(torque_bias)
    return replace(model, airframe=af, torque_bias=torque_bias), report


def select_aero(
    logs: Sequence[FlightLog],
    model: SysidModel,
    validation: Sequence[FlightLog] | None = None,
    drag: bool = True,
    bias: bool = True,
    horizon: int = 25,
    stride: int = 10,
    min_gain: float = 0.002,
) -> tuple[SysidModel, dict]:
    """Step 5 with the choice of effects: coefficients fitted on the training logs that are not
    ``validation`` (default: every 4th training log, at least one), each effect scored alone on
    the validation windows (:func:`timing_score`, relative to the constant baseline) against
    none; the effects that lower the score by more than ``min_gain`` (0.2 % of the baseline's
    error: an effect that changes nothing measurable stays out of the platform) are kept and
    refitted on all ``logs``."""
    if validation is None:
        validation = list(logs[3::4]) or list(logs[-1:])
    held = {id(log) for log in validation}
    rest = [log for log in logs if id(log) not in held]
    report: dict = {"validation": [log.name for log in validation], "scores": {}}
    if not rest or not validation:
        chosen = list(AERO_EFFECTS)
        report["note"] = "no validation flights: every effect kept"
    else:
        base = evaluate(list(validation), None, horizon, stride)
        for name in ("none", *AERO_EFFECTS):
            cand, _ = fit_aero(rest, model, () if name == "none" else (name,), drag, bias)
            report["scores"][name] = timing_score(validation, cand, horizon, stride, base)
        none = report["scores"]["none"]
        chosen = [e for e in AERO_EFFECTS if report["scores"][e] < none - min_gain]
    final, more = fit_aero(logs, model, chosen, drag, bias)
    report["chosen"] = chosen
    report.update(more)
    return final, report


def _refined(model: SysidModel, x: np.ndarray) -> SysidModel:
    """``model`` with the refinement vector ``x`` applied (see :func:`fit_refine`)."""
    af = model.airframe
    j = np.diag(np.asarray(af.inertia))
    af = af.with_moment_gain(np.exp(x[:3]))
    damping = np.asarray(af.drag_moment) + j * np.exp(x[6:9])
    af = af.replace(drag_moment=tuple(float(c) for c in damping))
    bias = np.asarray(model.torque_bias) + j * x[3:6]
    command = model.command
    if len(x) > 9:  # the thrust's command map
        c1, c0 = float(x[10]), float(x[11])
        scale = command.scale * float(np.exp(x[9]))
        command = replace(command, scale=scale, curve=(c1, c0))
        top = scale * np.sqrt(max(1.0 + c1 + c0, 0.0)) * 1.1  # full command, at V_REF
        af = af.replace(max_rotor_speed=(max(top, *af.max_rotor_speed),))
    return replace(model, airframe=af, command=command, torque_bias=tuple(float(b) for b in bias))


def refine_score(err: dict, base: dict, dt: float) -> float:
    """What :func:`fit_refine` minimizes: the mean over horizons of the position, velocity and
    rate errors relative to the constant-rates baseline's (``base``), plus ``REFINE_PENALTY``
    times each horizon's excess over ``1 - REFINE_MARGIN`` (rates: up to ``REFINE_RATES_S``).
    Without the hinge the refinement trades the first samples for the last (on NanoBench's
    development split its rate error at 0.01 s came out 1.8 times the baseline's)."""
    ratio = {k: err[k] / base[k] for k in ("pos", "vel", "omega")}
    mean = float(np.mean([np.mean(r) for r in ratio.values()]))
    short = int(round(REFINE_RATES_S / dt))
    excess = [ratio["pos"], ratio["vel"], ratio["omega"][:short]]
    hinge = sum(float(np.maximum(r - (1 - REFINE_MARGIN), 0.0).sum()) for r in excess)
    return mean + REFINE_PENALTY * hinge


def fit_refine(
    logs: Sequence[FlightLog],
    model: SysidModel,
    horizon: int = 50,
    stride: int = 40,
    max_evaluations: int = 300,
    progress: Callable[[str], None] | None = None,
    thrust: bool = False,
    moment_gain: Sequence[float] | None = None,
) -> tuple[SysidModel, dict]:
    """Step 6: output-error refinement on the training windows (every ``stride``-th start,
    ``horizon`` samples): x = [log gain factors (3), torque-bias change (3, in J rad/s^2), log
    rate damping C_a / J (3)] and, with ``thrust`` (off by default: on NanoBench it traded the
    long horizons for the short ones, experiments/sysid/nanobench/README.md), the thrust's
    command map [log command-scale
    factor, curve c1, c0] (:class:`~volary.sysid.predict.CommandMap`), minimizing
    :func:`refine_score` with Powell's method in the box ``REFINE_*`` from x0 = [0, 0, -8 (no
    damping), 0, 0, 0], at most ``max_evaluations`` predictions of the windows (the start is
    kept if nothing beats it). ``moment_gain``: the start's gains (:func:`fit_moment`); the
    refined ones are clipped to the platform schema's range (1 each when None).

    What it gives is an open-loop predictor of the logged, closed-loop flights within volary's
    model, which need not be a vehicle to fly under another controller: on NanoBench the roll
    gain falls to 5 % of the least-squares one, the same model with every command torque
    scaled by 0.001 predicts as well, and the rate damping stands in for the Crazyflie's own
    attitude loop (experiments/sysid/nanobench/README.md)."""
    lo = [REFINE_LOG_GAIN[0]] * 3 + [-REFINE_BIAS] * 3 + [REFINE_LOG_DAMPING[0]] * 3
    hi = [REFINE_LOG_GAIN[1]] * 3 + [REFINE_BIAS] * 3 + [REFINE_LOG_DAMPING[1]] * 3
    x0 = np.array([0.0] * 6 + [REFINE_LOG_DAMPING[0]] * 3)
    if thrust:
        (c1_lo, c1_hi), (c0_lo, c0_hi) = REFINE_CURVE
        lo, hi = lo + [REFINE_LOG_SCALE[0], c1_lo, c0_lo], hi + [REFINE_LOG_SCALE[1], c1_hi, c0_hi]
        x0 = np.append(x0, [0.0, 0.0, 0.0])
    base = evaluate(list(logs), model, horizon, stride, baseline="constant_rates")
    # the windows' commands depend on the command map only: built again when it changes
    cache: dict = {}
    trace: list[float] = []

    def flown(m: SysidModel):
        if cache.get("command") != (m.command, m.airframe.max_rotor_speed):
            cache["command"] = (m.command, m.airframe.max_rotor_speed)
            cache["windows"] = windows(list(logs), m, horizon, stride)
        return cache["windows"]

    def score(x: np.ndarray) -> float:
        m = _refined(model, x)
        win = flown(m)
        s = refine_score(win.errors(m), base, win.dt)
        trace.append(s)
        if progress is not None and len(trace) % 10 == 0:
            progress(f"refine: {len(trace)} predictions, best score {min(trace):.4f} "
                     f"(start {trace[0]:.4f})")  # fmt: skip
        return s if np.isfinite(s) else 1e6

    from scipy.optimize import Bounds, minimize

    options = {"maxfev": max_evaluations, "xtol": 1e-2, "ftol": 1e-4}
    if thrust:  # the collective thrust first: the angular terms would otherwise tilt to mend it
        options["direc"] = np.eye(len(x0))[[9, 10, 11, *range(9)]]
    res = minimize(score, x0, method="Powell", bounds=Bounds(lo, hi), options=options)
    x = res.x if res.fun <= trace[0] else x0
    # the gains end within what a platform file accepts (schema FIELDS["moment_gain"]): a gain
    # the search drove below it is one the logs do not use (the command torque ignored)
    spec, gain = FIELDS["moment_gain"], np.asarray(moment_gain or (1.0, 1.0, 1.0), dtype=float)
    clipped = np.clip(x[:3], np.log(spec.lo / gain) + 1e-9, np.log(spec.hi / gain) - 1e-9)
    x = np.concatenate([clipped, x[3:]]) if np.any(clipped != x[:3]) else x
    out = _refined(model, x)
    af = out.airframe
    report = {
        "score_start": trace[0], "score": float(min(res.fun, trace[0])),
        "evaluations": len(trace), "horizon": horizon, "stride": stride, "x": x.tolist(),
        "moment_gain_factor": np.exp(x[:3]).tolist(), "drag_moment": list(af.drag_moment),
        "torque_bias_Nm": list(out.torque_bias), "command_scale_rad_s": out.command.scale,
        "command_curve": list(out.command.curve), "max_rotor_speed": list(af.max_rotor_speed),
    }  # fmt: skip
    return out, report


def fit(
    logs: Sequence[FlightLog],
    airframe: Airframe,
    steps: Sequence[str] = DEFAULT_STEPS,
    use_voltage: bool = True,
    substeps: int = 4,
    progress: Callable[[str], None] | None = None,
    validation: Sequence[FlightLog] | None = None,
    refine: dict | None = None,
) -> tuple[SysidModel, dict]:
    """Fit a model on ``logs`` (training flights only), starting from ``airframe``. Returns
    the model and a report of every fitted value and the timing grid's scores; ``progress``
    gets a line per timing-grid candidate and every 10 refinement predictions (the slow steps).
    ``validation``: the training logs the rotor-aerodynamics effects are chosen on
    (:func:`select_aero`; default every 4th). ``refine``: keywords of :func:`fit_refine`."""
    unknown = sorted(set(steps) - set(STEPS))
    if unknown or not logs:
        raise ConfigError(
            f"steps, logs: expected steps from {', '.join(STEPS)} and at least one log, got "
            f"{', '.join(unknown) or 'no logs'}"
        )
    n = {log.cmd.shape[1] for log in logs}
    if n != {airframe.n_rotors}:
        counts = " or ".join(map(str, sorted(n)))
        raise ConfigError(
            f"logs: {counts} motor columns; expected {airframe.n_rotors} for {airframe.name}, "
            "the airframe the fit starts from (volary sysid --platform: give one with as many "
            "rotors as the logs)"
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
    if "aero" in steps:
        model, report["aero"] = select_aero(logs, model, validation, "drag" in steps,
                                            "bias" in steps)  # fmt: skip
        report["drag_linear"] = list(model.airframe.drag_linear)
        report["torque_bias_Nm"] = list(model.torque_bias)
    if "refine" in steps:
        model, report["refine"] = fit_refine(logs, model, progress=progress,
                                             moment_gain=report.get("moment_gain"),
                                             **(refine or {}))  # fmt: skip
        gain = np.asarray(report.get("moment_gain", (1.0, 1.0, 1.0)))
        report["moment_gain"] = (gain * report["refine"]["moment_gain_factor"]).tolist()
        report["drag_moment"] = list(model.airframe.drag_moment)
        report["torque_bias_Nm"] = list(model.torque_bias)
    return model, report
