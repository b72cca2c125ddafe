"""volary against NanoBench's own best published Task 1 baseline (issue 61).

NanoBench's Task 1 (system identification) publishes four one-step models of the vertical
specific force a_z + g (the Vicon height differentiated twice by a Savitzky-Golay filter,
window 15, order 3, plus g) from the motor commands: constant gain, time-indexed gain, linear
regression on [m1, m2, m3, m4, Vbat], voltage-conditioned gain. The best in the repository's
table (benchmarks/results/tables/task1_model_comparison_table.csv) is the linear regression,
2.171 m/s^2 RMSE. It models the vertical axis only.

This script re-implements that baseline from its description (ordinary least squares with an
intercept; the commands normalized to [0, 1], which a linear model does not notice) and scores
it against volary's identified and refined models (results/platform*.toml, fitted on B2-B8 by
run.py) two ways, on the test flights (B9, B10) of run.py's split:

1. **NanoBench's protocol**: one-step a_z + g RMSE. The baseline is fitted the dataset's way
   (first 70 % of each test flight, scored on its last 30 %) and, as a second row, on the
   training flights; volary's models never see a test flight. volary's a_z + g is the world
   z of its modelled body force (rotor thrust at the lagged rotor speeds, linear drag) over the
   mass, at the logged attitude and velocity.
2. **Open-loop multi-step** (the issue's horizons 1-50, every 5th start): the baseline's a_z
   integrated from the start's height and climb rate (semi-implicit Euler, its own prediction
   per logged row: it needs no state), against volary's predictions; vertical position and
   velocity RMSE per horizon.

Both get a third reference, **no model**: a_z + g = g (zero vertical acceleration; open loop,
the constant-velocity prediction of the height), and each one-step row its R^2 against the
truth's variance over the same rows (NanoBench publishes R^2 beside its RMSE).

    .venv/bin/python experiments/sysid/nanobench/published_baseline.py PATH/nanobench/datasets/dataset

Writes results/published-baseline.json (``--split dev``: results/dev/; about two minutes, one
thread).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from run import HERE, load
from scipy.signal import savgol_filter

from volary.dynamics.models import GRAVITY
from volary.platforms import load_file
from volary.sysid import predict as P
from volary.sysid.fit import rotor_force_torque
from volary.sysid.logs import rotmat

HORIZON, STRIDE, SG_WINDOW, SG_ORDER = 50, 5, 15, 3
ZERO = "no model (zero vertical acceleration)"
ZERO_W = np.array([0.0] * 5 + [GRAVITY])  # the regression's form with a_z + g = g


def az_truth(log) -> np.ndarray:
    """NanoBench's ground truth: d^2 pz / dt^2 (Savitzky-Golay) + g."""
    return savgol_filter(log.pos[:, 2], SG_WINDOW, SG_ORDER, deriv=2, delta=log.dt) + GRAVITY


def features(log) -> np.ndarray:
    """[m1..m4, Vbat, 1]: the linear regression's inputs (and its intercept)."""
    v = np.where(np.isnan(log.vbat), np.nanmean(log.vbat), log.vbat)
    return np.column_stack([log.cmd, v, np.ones(len(log))])


def fit_linear(logs, rows=None) -> np.ndarray:
    rows = rows or [slice(None)] * len(logs)
    x = np.concatenate([features(g)[r] for g, r in zip(logs, rows, strict=True)])
    y = np.concatenate([az_truth(g)[r] for g, r in zip(logs, rows, strict=True)])
    return np.linalg.lstsq(x, y, rcond=None)[0]


def az_volary(log, model: P.SysidModel) -> np.ndarray:
    """World z of volary's modelled body force over the mass (a_z + g), at the logged state."""
    force, _ = rotor_force_torque(log, model)
    r = rotmat(log.quat)
    v_b = np.einsum("tji,tj->ti", r, log.vel)
    force = force - np.asarray(model.airframe.drag_linear) * v_b
    return np.einsum("tij,tj->ti", r, force)[:, 2] / model.airframe.mass


def rollout_linear(log, w: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(W, H) height and climb rate of the baseline's a_z integrated open loop."""
    acc = features(log) @ w - GRAVITY
    idx = starts[:, None] + np.arange(HORIZON)[None, :]
    vz = log.vel[starts, 2][:, None] + np.cumsum(acc[idx], axis=1) * log.dt
    pz = log.pos[starts, 2][:, None] + np.cumsum(vz, axis=1) * log.dt
    return pz, vz


def linear(w: np.ndarray):
    """The regression (or any a_z + g = features . w) as a predictor for :func:`vertical_rmse`."""
    return lambda log, starts: rollout_linear(log, w, starts)


def flown(model: P.SysidModel):
    """A volary model, flown open loop from each start, as a predictor for :func:`vertical_rmse`."""

    def predict(log, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pred = P.fly(log, model, starts, HORIZON)
        return pred.pos[..., 2], pred.vel[..., 2]

    return predict


def vertical_rmse(logs, predict, after: float = 0.0) -> dict[str, list[float]]:
    """Open-loop height and climb-rate RMSE per horizon 1..HORIZON over every STRIDE-th start
    of ``logs`` (those in the last 1 - ``after`` of each flight); ``predict(log, starts)`` gives
    the (W, H) height and climb rate."""
    pz, vz = [], []
    for g in logs:
        starts = P.window_starts(g, HORIZON, STRIDE)
        starts = starts[starts >= int(after * len(g))]
        true = P.logged(g, starts, HORIZON)
        h, v = predict(g, starts)
        pz.append(h - true.pos[..., 2])
        vz.append(v - true.vel[..., 2])
    return {q: np.sqrt(np.mean(np.concatenate(e) ** 2, axis=0)).tolist()
            for q, e in (("pos_z", pz), ("vel_z", vz))}  # fmt: skip


def rmse(a: np.ndarray) -> float:
    return float(np.sqrt(np.mean(a**2)))


def models(fitted: dict, res: Path) -> dict[str, P.SysidModel]:
    """The identified and refined models run.py fitted (their platform files and fit report)."""
    ref, out = fitted["refine"], {}
    plain = P.CommandMap(fitted["command_scale_rad_s"])
    refined = P.CommandMap(  # a refinement without the thrust keeps the fitted command map
        ref.get("command_scale_rad_s", fitted["command_scale_rad_s"]),
        curve=tuple(ref.get("command_curve", (0.0, 0.0))),
    )
    for name, file, command, bias in (
        ("volary identified", "platform.toml", plain, fitted["torque_bias_Nm"]),
        ("volary refined", "platform-refined.toml", refined, ref["torque_bias_Nm"]),
    ):
        af = next(iter(load_file(res / file).values())).airframe
        out[name] = P.SysidModel(af, command, fitted["delay_samples"], tuple(bias))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", type=Path, help="NanoBench's datasets/dataset folder")
    ap.add_argument(
        "--split",
        choices=("report", "dev"),
        default="report",
        help="run.py's split (dev: its results/dev/ models, test B8)",
    )
    ap.add_argument(
        "--results",
        type=Path,
        default=None,
        help="run.py's output folder (default results/ or results/dev/)",
    )
    args = ap.parse_args()
    train, test, _ = load(args.dataset, args.split)
    res = args.results or HERE / "results" / ("dev" if args.split == "dev" else "")
    fitted = json.loads((res / "nanobench.json").read_text())["fitted"]
    vol = models(fitted, res)
    w_train = fit_linear(train)
    cut = [int(0.7 * len(g)) for g in test]
    one = {
        "linear regression, NanoBench's split (first 70 % of each test flight)": [],
        "linear regression, fitted on the training flights": [],
    }
    one.update({name: [] for name in vol})
    one[ZERO] = []
    truths = []
    for g, c in zip(test, cut, strict=True):
        truth = az_truth(g)[c:]
        truths.append(truth)
        w_own = fit_linear([g], [slice(None, c)])
        preds = [features(g)[c:] @ w_own, features(g)[c:] @ w_train]
        preds += [az_volary(g, m)[c:] for m in vol.values()]
        preds += [np.full_like(truth, GRAVITY)]
        for key, p in zip(one, preds, strict=True):
            one[key].append(p - truth)
    one_step = {k: rmse(np.concatenate(v)) for k, v in one.items()}
    spread = float(np.var(np.concatenate(truths)))
    r2 = {k: 1.0 - one_step[k] ** 2 / spread for k in one}

    lr = "linear regression (training flights)"
    predictors = {lr: linear(w_train), **{k: flown(m) for k, m in vol.items()}}
    predictors[ZERO] = linear(ZERO_W)
    per_h = {k: vertical_rmse(test, f) for k, f in predictors.items()}
    base = per_h["linear regression (training flights)"]
    ratios = {k: {q: float(np.max(np.divide(v[q], base[q]))) for q in v} for k, v in per_h.items()}
    doc = {
        "published": {
            "source": "NanoBench benchmarks/results/tables/task1_model_comparison_table.csv",
            "linear_regression_rmse_m_s2": 2.171,
        },
        "one_step_az_rmse_m_s2": one_step,
        "one_step_az_r2": r2,
        "multi_step_rmse_per_horizon": per_h,
        "worst_ratio_to_linear_regression": ratios,
        "horizon_s": [round(0.01 * h, 2) for h in range(1, HORIZON + 1)],
        "test_flights": [g.name for g in test],
    }
    (res / "published-baseline.json").write_text(json.dumps(doc, indent=1))
    print("one-step a_z + g RMSE (m/s^2), last 30 % of each test flight:")
    for k, v in one_step.items():
        print(f"  {k}: {v:.3f} (R^2 {r2[k]:.2f})")
    print("open-loop vertical RMSE at 0.01 / 0.1 / 0.5 s (cm, m/s); worst ratio to the baseline")
    for k, v in per_h.items():
        p, q = np.asarray(v["pos_z"]) * 100, np.asarray(v["vel_z"])
        print(
            f"  {k}: pos {p[0]:.3f} / {p[9]:.2f} / {p[49]:.2f}, vel {q[0]:.4f} / {q[9]:.3f} / "
            f"{q[49]:.3f}; worst ratio pos {ratios[k]['pos_z']:.3f}, vel {ratios[k]['vel_z']:.3f}"
        )


if __name__ == "__main__":
    main()
