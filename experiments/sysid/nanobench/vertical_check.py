"""Where volary's vertical prediction loses (issue 61).

published_baseline.py finds volary's open-loop height and climb-rate errors above both
NanoBench's linear regression and no model at all (zero vertical acceleration). This diagnostic
splits volary's one-step vertical error (its a_z + g at the logged state against NanoBench's
Savitzky-Golay truth, published_baseline.az_volary / az_truth) into a per-flight mean (a thrust
level the commands put wrong for the whole flight) and the spread about it, beside the
regression's, and tries the two physical explanations of a wrong level within volary's thrust
law on the open-loop vertical error:

- the battery: the effective command e = u (V / V_ref)^alpha with alpha from 0 to 3 (volary's
  law is alpha = 1, a brushed motor's speed proportional to its mean voltage), the command
  scale refitted to the training flights' hover balance (fit.fit_scale) for each;
- the motor lag: 10 ms (the fitted one) to 200 ms.

and, on the split it is run on, the two ways a thrust level could be *adapted* to a flight
without seeing what is predicted (``adapt``):

- the dataset's own protocol: the level fitted on the first 70 % of each test flight (one
  thrust scale, k_f x s, least squares on the one-step a_z + g; NanoBench's regression fits its
  six coefficients on the same rows), scored open loop on the windows starting in the last
  30 %, beside the regression fitted that way, fitted on the training flights, and no model;
- a causal level observer: each window's prediction plus a constant vertical acceleration, the
  mean one-step residual of the N rows before it (the Savitzky-Golay truth ends 8 rows before
  the start, so no row at or after the start is used), for volary, the regression and no model.

Every model keeps the refined model's angular terms (results[/dev]/platform-refined.toml).

    .venv/bin/python experiments/sysid/nanobench/vertical_check.py PATH [--split dev]

Writes results[/dev]/vertical-check.json (about two minutes on the development split, one
thread). The grids were run on the development split (test B8) only.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import published_baseline as PB
from run import HERE, load

from volary.sysid import fit as F
from volary.sysid import predict as P

ALPHAS = (0.0, 0.5, 1.0, 1.5, 2.0)
OBSERVER_ROWS = (0, 50, 100, 400)  # 0: no observer
FIRST = 0.7  # NanoBench's split of a flight: fit on the first 70 %, score on the rest
TAUS = (0.01, 0.05, 0.1, 0.2)  # s


def with_voltage_exponent(logs: list, alpha: float) -> list:
    """The logs with V replaced by V_ref (V / V_ref)^alpha, so that e = u (V / V_ref)^alpha."""
    return [replace(g, vbat=P.V_REF * (g.vbat / P.V_REF) ** alpha) for g in logs]


def per_flight(logs: list, model: P.SysidModel, w: np.ndarray) -> list[dict]:
    """Each flight's one-step a_z + g error mean and spread, volary's and the regression's."""
    rows = []
    for g in logs:
        truth = PB.az_truth(g)
        e, r = PB.az_volary(g, model) - truth, PB.features(g) @ w - truth
        rows.append({"flight": g.name, "vbat_mean_V": float(np.nanmean(g.vbat)),
                     "volary_mean": float(e.mean()), "volary_std": float(e.std()),
                     "regression_mean": float(r.mean()), "regression_std": float(r.std()),
                     "truth_std": float(truth.std())})  # fmt: skip
    return rows


def open_loop(logs: list, predict, after: float = 0.0, per_horizon: bool = False) -> dict:
    """Vertical position and velocity RMSE at 0.01 / 0.1 / 0.5 s (every 5th start, those in the
    last 1 - ``after`` of each flight), and with ``per_horizon`` every horizon's."""
    per_h = PB.vertical_rmse(logs, predict, after)
    out = {"pos_z_m": [per_h["pos_z"][h] for h in (0, 9, 49)],
           "vel_z_m_s": [per_h["vel_z"][h] for h in (0, 9, 49)]}  # fmt: skip
    return {**out, "per_horizon": per_h} if per_horizon else out


def thrust_scaled(model: P.SysidModel, s: float) -> P.SysidModel:
    """The model with every rotor's k_f multiplied by s (its thrust level)."""
    return replace(
        model, airframe=model.airframe.replace(k_f=tuple(s * k for k in model.airframe.k_f))
    )


def thrust_level(log, model: P.SysidModel, rows: slice) -> float:
    """The thrust scale s (k_f x s) that best fits the one-step a_z + g on ``rows``."""
    az = PB.az_volary(log, model)
    thrust = (PB.az_volary(log, thrust_scaled(model, 2.0)) - az)[rows]  # linear in k_f
    rest = PB.az_truth(log)[rows] - (az[rows] - thrust)
    return float(thrust @ rest / (thrust @ thrust))


def worst_ratios(table: dict, base: str) -> None:
    """Adds each row's worst ratio (over horizons 1-50) to the row ``base``."""
    b = table[base]["per_horizon"]
    for row in table.values():
        h = row["per_horizon"]
        row["worst_ratio_to_" + base.split(",")[0].replace(" ", "_")] = {
            q: float(np.max(np.divide(h[q], b[q]))) for q in ("pos_z", "vel_z")
        }


def dataset_protocol(test: list, model: P.SysidModel, w_train: np.ndarray) -> dict:
    """Open loop on the last 30 % of each test flight, every predictor adapted (or not) on the
    first 70 %: the regression's six coefficients, volary's one thrust level."""
    first = {g.name: slice(None, int(FIRST * len(g))) for g in test}
    levels = {g.name: thrust_level(g, model, first[g.name]) for g in test}

    def own_regression(g, starts):
        return PB.linear(PB.fit_linear([g], [first[g.name]]))(g, starts)

    def own_level(g, starts):
        return PB.flown(thrust_scaled(model, levels[g.name]))(g, starts)

    table = {
        key: open_loop(test, predict, after=FIRST, per_horizon=True)
        for key, predict in (
            ("linear regression, first 70 % of the flight (NanoBench's)", own_regression),
            ("linear regression, training flights", PB.linear(w_train)),
            (PB.ZERO, PB.linear(PB.ZERO_W)),
            ("volary refined", PB.flown(model)),
            ("volary refined, thrust level fitted on the first 70 %", own_level),
        )
    }
    worst_ratios(table, next(iter(table)))
    s = list(levels.values())
    return {"rows": table, "thrust_levels": {"min": min(s), "median": float(np.median(s)),
                                             "max": max(s)}}  # fmt: skip


def with_level_observer(predict, one_step, n: int, dt: float):
    """``predict`` plus a constant vertical acceleration: the mean one-step residual
    (``one_step(log)`` against the truth) of the ``n`` rows before each start (0: none), its
    climb rate integrated over the horizons' times at step ``dt`` (the first flight's)."""

    def observed(g, starts):
        h, v = predict(g, starts)
        if not n:
            return h, v
        summed = np.concatenate([[0.0], np.cumsum(PB.az_truth(g) - one_step(g))])
        hi = np.clip(starts - PB.SG_WINDOW // 2, 1, None)  # the truth's filter looks ahead
        lo = np.clip(hi - n, 0, None)
        b = ((summed[hi] - summed[lo]) / (hi - lo))[:, None]
        t = np.arange(1, PB.HORIZON + 1) * dt
        return h + b * np.cumsum(t) * g.dt, v + b * t

    return observed


def observer(test: list, model: P.SysidModel, w_train: np.ndarray) -> dict:
    """Every window's prediction plus the mean one-step residual of the N rows before it."""
    table = {
        f"{name}, observer {n} rows": open_loop(
            test, with_level_observer(predict, one_step, n, test[0].dt), per_horizon=True
        )
        for name, one_step, predict in (
            ("volary refined", lambda g: PB.az_volary(g, model), PB.flown(model)),
            ("linear regression, training flights", lambda g: PB.features(g) @ w_train,
             PB.linear(w_train)),
            (PB.ZERO, lambda g: np.full(len(g), PB.GRAVITY), PB.linear(PB.ZERO_W)),
        )
        for n in OBSERVER_ROWS
    }  # fmt: skip
    worst_ratios(table, "linear regression, training flights, observer 0 rows")
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", type=Path, help="NanoBench's datasets/dataset folder")
    ap.add_argument("--split", choices=("report", "dev"), default="dev")
    ap.add_argument("--no-grids", action="store_true", help="the per-flight table only")
    args = ap.parse_args()
    train, test, _ = load(args.dataset, args.split)
    res = HERE / "results" / ("dev" if args.split == "dev" else "")
    fitted = json.loads((res / "nanobench.json").read_text())["fitted"]
    refined = PB.models(fitted, res)["volary refined"]
    flights = per_flight(test, refined, PB.fit_linear(train))
    doc: dict = {"test_flights": flights, "split": args.split}
    for who in ("volary", "regression"):
        means = np.array([f[f"{who}_mean"] for f in flights])
        doc[f"{who}_flight_means"] = {"min": float(means.min()), "max": float(means.max()),
                                      "rms": float(np.sqrt(np.mean(means**2)))}  # fmt: skip
    print(f"{args.split} test flights, one-step a_z + g error per flight (m/s^2):")
    for who in ("volary", "regression"):
        m = doc[f"{who}_flight_means"]
        print(f"  {who}: flight means {m['min']:+.3f} .. {m['max']:+.3f} (rms {m['rms']:.3f})")
    w_train = PB.fit_linear(train)
    doc["adapt"] = {"dataset_protocol": dataset_protocol(test, refined, w_train),
                    "observer": observer(test, refined, w_train)}  # fmt: skip
    adapt = doc["adapt"]
    for part, table in (("dataset's protocol (last 30 %)", adapt["dataset_protocol"]["rows"]),
                        ("level observer", adapt["observer"])):  # fmt: skip
        print(f"  {part}: height (cm) / climb rate (m/s) at 0.1 / 0.5 s; worst ratio")
        for k, r in table.items():
            p, v = r["pos_z_m"], r["vel_z_m_s"]
            ratio = next(x for name, x in r.items() if name.startswith("worst_ratio"))
            print(f"    {k}: {p[1] * 100:.2f} / {p[2] * 100:.2f}, {v[1]:.3f} / {v[2]:.3f}; "
                  f"{ratio['pos_z']:.3f}, {ratio['vel_z']:.3f}")  # fmt: skip
    if not args.no_grids:
        grid = {}
        for alpha in ALPHAS:
            tr = with_voltage_exponent(train, alpha)
            for tau in TAUS:
                af = refined.airframe.replace(motor_tau_up=(tau,), motor_tau_down=(tau,))
                scale = F.fit_scale(tr, af)
                model = replace(refined, command=P.CommandMap(scale),
                                airframe=af.replace(max_rotor_speed=(1.5 * scale,)))  # fmt: skip
                key = f"alpha {alpha:g}, tau {tau * 1e3:g} ms"
                grid[key] = open_loop(with_voltage_exponent(test, alpha), PB.flown(model))
                grid[key]["command_scale_rad_s"] = scale
                p, v = grid[key]["pos_z_m"], grid[key]["vel_z_m_s"]
                print(f"  {key}: pos {p[1] * 100:.2f} / {p[2] * 100:.2f} cm, vel {v[1]:.3f} / "
                      f"{v[2]:.3f} m/s at 0.1 / 0.5 s", flush=True)  # fmt: skip
        doc["open_loop_grid"] = grid
        for name, w in (("linear regression", PB.fit_linear(train)), (PB.ZERO, PB.ZERO_W)):
            doc.setdefault("references", {})[name] = open_loop(test, PB.linear(w))
            r = doc["references"][name]
            print(f"  {name}: pos {r['pos_z_m'][1] * 100:.2f} / {r['pos_z_m'][2] * 100:.2f} cm, "
                  f"vel {r['vel_z_m_s'][1]:.3f} / {r['vel_z_m_s'][2]:.3f} m/s")  # fmt: skip
    (res / "vertical-check.json").write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
