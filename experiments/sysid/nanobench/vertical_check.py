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


def open_loop(logs: list, predict) -> dict:
    """Vertical position and velocity RMSE at 0.01 / 0.1 / 0.5 s (every 5th start)."""
    per_h = PB.vertical_rmse(logs, predict)
    return {"pos_z_m": [per_h["pos_z"][h] for h in (0, 9, 49)],
            "vel_z_m_s": [per_h["vel_z"][h] for h in (0, 9, 49)]}  # fmt: skip


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
