"""volary's rigid-body dynamics on real Crazyflie flights (NanoBench), open loop, horizons
1-50 samples (0.01-0.5 s): the constant-velocity/constant-rates baseline, volary's preset
Crazyflie, and what each fitted step adds or costs.

    .venv/bin/python experiments/sysid/nanobench/run.py PATH/TO/nanobench/datasets/dataset

PATH is NanoBench's `datasets/dataset` folder (github.com/syediu/nanobench-iros2026, BSD-3);
nothing is downloaded. Split (by trajectory type, so no test flight shares a path with a
training flight): train on circle, figure-eight, helix, linear ramp, oval and star flights (B2-
B8), test on trefoil and lissajous flights (B9, B10). Development used another split (test:
the star flights, B8). Byte-identical files (the dataset repeats some flights under two names)
are kept once. The rotor-aerodynamics effects (rotor drag, blade flapping, inflow thrust) are
fitted on the training flights; which of them the identified platform keeps is decided on the
star flights (B8) as validation (coefficients fitted on B2-B7, scored on B8), never on the test
flights. The identified model is then refined by output error (``fit.fit_refine``: moment
gains, torque bias and rate damping against the open-loop error of the training windows).
Writes results/nanobench.json, results/platform.toml (the identified vehicle, the catalogue's
``crazyflie_nanobench``), results/platform-refined.toml (the refined predictor) and
results/horizons.png.

``--split dev`` runs the same on the development split (train B2-B7, choose the effects on B7,
test on the star flights B8) into results/dev/.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import replace
from itertools import product
from pathlib import Path

import numpy as np

from volary.errors import FileFormatError
from volary.platforms import get
from volary.sysid import fit as F
from volary.sysid import predict as P
from volary.sysid.logs import read_log
from volary.sysid.report import platform_table, plot, write_platform

HERE = Path(__file__).parent
# (train, test, validation: the training flights the aerodynamic effects are chosen on)
SPLITS = {
    "report": (("B2_", "B3_", "B5_", "B6_", "B7_", "B8_"), ("B9_", "B10_"), ("B8_",)),
    "dev": (("B2_", "B3_", "B5_", "B6_", "B7_"), ("B8_",), ("B7_",)),  # the development split
}
EFFECT_ROWS = {"fitted + rotor drag": ("rotor_drag",), "fitted + flapping": ("flapping",),
               "fitted + inflow thrust": ("inflow",),
               "fitted + all effects": ("rotor_drag", "flapping", "inflow")}  # fmt: skip
IDENTIFIED = "identified: fitted + the effects validation kept"
REFINED = "identified + output-error refinement"
NO_TORQUE = "diagnostic: refined, command torques x 0.001"
CONST_RATES = "constant rates (IDSIA physics baseline, fitted thrust and drag)"
# the same baseline given the refined model's command map (its output-error thrust): the peer
# that has the refinement's thrust too
CONST_RATES_REFINED = "constant rates with the refined thrust"
RMSE = ("pos", "vel", "omega")  # pooled as root mean squares; the rest are means


def load(folder: Path, split: str = "report") -> tuple[list, list, dict]:
    train_at, test_at, _ = SPLITS[split]
    seen, notes = {}, {"duplicates": [], "skipped": []}
    train, test = [], []
    for f in sorted(folder.glob("*.csv")):
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        if digest in seen:
            notes["duplicates"].append([f.name, seen[digest]])
            continue
        seen[digest] = f.name
        group = (
            train if f.name.startswith(train_at) else test if f.name.startswith(test_at) else None
        )
        if group is None:
            continue
        try:
            group.append(read_log(f, out_of_range="cut"))
        except FileFormatError as err:
            notes["skipped"].append(str(err))
    return train, test, notes


def pack(err: dict, dt: float) -> dict:
    return {
        "summary": P.summary(err, dt),
        "per_horizon": {k: v.tolist() for k, v in err.items() if k != "windows"},
    }


def show(name: str, row: dict) -> None:
    s = row["summary"]
    cells = (f"{t} pos {s[t]['pos']:.4f} vel {s[t]['vel']:.3f} W {s[t]['omega']:.3f}"
             for t in ("0.1s", "0.5s"))  # fmt: skip
    print(f"{name[:40]:>40}: " + "  ".join(cells), flush=True)


def per_flight_bias(test: list, full, stride: int) -> dict:
    """Diagnostic, not a model: the fitted model with a torque bias fitted on each *test*
    flight itself (an oracle no predictor has). How much of the remaining rate error a
    constant per-flight torque would explain."""
    sq: dict = {}
    n = 0
    for log in test:
        model = replace(full, torque_bias=F.fit_bias([log], full))
        err = P.evaluate([log], model, 50, stride)
        w = int(err["windows"])
        for k, v in err.items():
            if k != "windows":
                sq[k] = sq.get(k, 0.0) + (v**2 if k in RMSE else v) * w
        n += w
    err = {k: (np.sqrt(v / n) if k in RMSE else v / n) for k, v in sq.items()}
    err["windows"] = np.asarray(n)
    name = "diagnostic: fitted + per-test-flight torque bias (oracle)"
    return {
        name: {
            "summary": P.summary(err, test[0].dt),
            "per_horizon": {k: v.tolist() for k, v in err.items() if k != "windows"},
        }
    }


def _first(model: list, ref: list, dt: float) -> float | None:
    """The first horizon (s) where ``model``'s error is not below ``ref``'s (None: never)."""
    bad = [h for h in range(len(model)) if model[h] >= ref[h]]
    return round((bad[0] + 1) * dt, 4) if bad else None


def ground_effect(logs: list, rho: float) -> dict:
    """How near the ground the flights are: hub height over the floor (the Vicon z the
    vehicle rests at before take-off, about 5.4 cm, taken as the floor) and the ground-effect
    factor 1 / (1 - (rho / 4h)^2) (aero.py A4) it would give, over the training rows."""
    z = np.concatenate([log.pos[:, 2] for log in logs])
    floor = float(np.median([log.pos[0, 2] for log in logs]))
    h = np.maximum(z - floor, rho / 2)
    factor = 1 / (1 - (rho / (4 * h)) ** 2)
    return {
        "rows": int(len(z)),
        "floor_z_m": floor,
        "rotor_radius_m": rho,
        "height_percentiles_m": dict(zip(("1", "5", "50"),
                                         np.percentile(h, [1, 5, 50]).tolist(), strict=True)),
        "share_below_2_radii": float((h < 2 * rho).mean()),
        "share_below_10cm": float((h < 0.1).mean()),
        "share_factor_above_1.01": float((factor > 1.01).mean()),
        "mean_factor": float(factor.mean()),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", type=Path, help="NanoBench's datasets/dataset folder")
    ap.add_argument("--stride", type=int, default=5, help="score every stride-th window start")
    ap.add_argument("--out", type=Path, default=None, help="default results/ (dev: results/dev)")
    ap.add_argument(
        "--split",
        choices=tuple(SPLITS),
        default="report",
        help="report: test on B9, B10; dev: the development split, test on B8",
    )
    ap.add_argument(
        "--refine-thrust",
        action="store_true",
        help="the refinement fits the thrust's command map too (fit_refine(thrust=True); "
        "default out results[/dev]/refine-thrust)",
    )
    args = ap.parse_args()
    t0 = time.perf_counter()
    args.out = args.out or HERE / ("results" if args.split == "report" else "results/dev")
    if args.refine_thrust and args.out == HERE / (
        "results" if args.split == "report" else "results/dev"
    ):
        args.out = args.out / "refine-thrust"
    train, test, notes = load(args.dataset, args.split)
    print(
        f"train {len(train)} flights ({sum(map(len, train))} rows), test {len(test)} "
        f"({sum(map(len, test))} rows); {len(notes['duplicates'])} duplicates dropped"
    )
    base = get("crazyflie")
    no_aero = tuple(s for s in F.STEPS if s not in ("aero", "refine"))
    full, fitted = F.fit(train, base, steps=no_aero, progress=lambda line: print(line, flush=True))
    val = [log for log in train if log.name.startswith(SPLITS[args.split][2])]
    identified, fitted["aero"] = F.select_aero(train, full, validation=val)
    print(f"aero: validation scores {fitted['aero']['scores']}, kept {fitted['aero']['chosen']}")
    refined, fitted["refine"] = F.fit_refine(
        train,
        identified,
        progress=print,
        moment_gain=fitted["moment_gain"],
        thrust=args.refine_thrust,
    )
    print(f"refine: {fitted['refine']}")
    effects = {name: F.fit_aero(train, full, eff) for name, eff in EFFECT_ROWS.items()}
    # diagnostic: each effect fitted beside the linear drag it would replace (nearly collinear)
    joint = {e: F.fit_aero(train, full, (e,), replace_drag=False)[1] for e in F.AERO_EFFECTS}
    scale = fitted["command_scale_rad_s"]
    preset = P.SysidModel(base.replace(max_rotor_speed=(scale * 1.1,)), P.CommandMap(scale))
    variants = {"constant": None, "preset (command scale only)": preset}
    variants["fitted"] = full
    # drag and bias are fitted after the timing grid, so dropping one keeps the grid's result
    variants["fitted without drag"] = replace(
        full, airframe=full.airframe.replace(drag_linear=base.drag_linear)
    )
    variants["fitted without bias"] = replace(full, torque_bias=(0.0, 0.0, 0.0))
    for drop in ("moment", "timing"):
        steps = tuple(s for s in no_aero if s != drop)
        variants[f"fitted without {drop}"] = F.fit(train, base, steps=steps)[0]
    for name, (model, _) in effects.items():
        variants[name] = model
    variants[IDENTIFIED] = identified
    variants[REFINED] = refined
    # what the refined model owes to the logged commands' torques: nearly none of them
    variants[NO_TORQUE] = replace(
        refined, airframe=refined.airframe.with_moment_gain((1e-3, 1e-3, 1e-3))
    )
    rows = {}
    for name, model in variants.items():
        err = P.evaluate(test, model, 50, args.stride)
        rows[name] = pack(err, test[0].dt)
        show(name, rows[name])
    name = CONST_RATES
    rows[name] = pack(
        P.evaluate(test, full, 50, args.stride, baseline="constant_rates"), test[0].dt
    )
    show(name, rows[name])
    if args.refine_thrust:  # the peer with the refined thrust (else it is the row above)
        name = CONST_RATES_REFINED
        rows[name] = pack(
            P.evaluate(test, refined, 50, args.stride, baseline="constant_rates"), test[0].dt
        )
        show(name, rows[name])
    rows.update(per_flight_bias(test, full, args.stride))
    checks = {}
    short = {"constant": "constant", CONST_RATES: "constant_rates",
             CONST_RATES_REFINED: "constant_rates_refined_thrust"}  # fmt: skip
    pairs = [*product(("fitted", "fitted + all effects", IDENTIFIED, REFINED),
                      ("constant", CONST_RATES))]  # fmt: skip
    pairs += [(REFINED, CONST_RATES_REFINED)] if args.refine_thrust else []
    for model_row, ref in pairs:
        f, c = rows[model_row]["per_horizon"], rows[ref]["per_horizon"]
        key = f"{model_row} vs {short[ref]}"
        checks[key] = {
            "rates_le_baseline_to_0.1s": bool(
                all(f["omega"][h] <= c["omega"][h] for h in range(10))
            ),
            "rates_within_1.5x_to_0.5s": bool(
                all(f["omega"][h] <= 1.5 * c["omega"][h] for h in range(50))
            ),
            "worst_rate_ratio_to_0.1s": max(f["omega"][h] / c["omega"][h] for h in range(10)),
            "worst_rate_ratio_to_0.5s": max(f["omega"][h] / c["omega"][h] for h in range(50)),
            "pos_below_at_every_horizon": bool(all(f["pos"][h] < c["pos"][h] for h in range(50))),
            "vel_below_at_every_horizon": bool(all(f["vel"][h] < c["vel"][h] for h in range(50))),
            "mae_rates_le_baseline_to_0.1s": bool(
                all(f["mae_omega"][h] <= c["mae_omega"][h] for h in range(10))
            ),
            "mae_rates_within_1.5x_to_0.5s": bool(
                all(f["mae_omega"][h] <= 1.5 * c["mae_omega"][h] for h in range(50))
            ),
            "worst_mae_rate_ratio_to_0.1s": max(
                f["mae_omega"][h] / c["mae_omega"][h] for h in range(10)
            ),
            "worst_mae_rate_ratio_to_0.5s": max(
                f["mae_omega"][h] / c["mae_omega"][h] for h in range(50)
            ),
            "first_horizon_s_pos_not_below": _first(f["pos"], c["pos"], test[0].dt),
            "first_horizon_s_vel_not_below": _first(f["vel"], c["vel"], test[0].dt),
        }
    doc = {
        "train": [x.name for x in train],
        "test": [x.name for x in test],
        "notes": notes,
        "fitted": {k: v for k, v in fitted.items() if k != "timing_scores"},
        "timing_scores": fitted.get("timing_scores"),
        "aero_effect_fits": {name: rep for name, (_, rep) in effects.items()},
        "aero_joint_with_linear_drag": joint,
        "ground_effect": ground_effect(train, base.prop_radius),
        "stride": args.stride,
        "rows": rows,
        "checks": checks,
        "wall_s": time.perf_counter() - t0,
        "command": " ".join(["experiments/sysid/nanobench/run.py", *sys.argv[1:]]),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "nanobench.json").write_text(json.dumps(doc, indent=1))
    source = "NanoBench (Ullah and Baca 2026) flights B2-B8, experiments/sysid/nanobench"
    physical = {k: v for k, v in fitted.items() if k != "refine"}
    write_platform(args.out / "platform.toml", "crazyflie_nanobench",
                   platform_table("crazyflie", identified, physical, source))  # fmt: skip
    gain = np.asarray(fitted["moment_gain"]) * fitted["refine"]["moment_gain_factor"]
    write_platform(args.out / "platform-refined.toml", "crazyflie_nanobench_predictor",
                   platform_table("crazyflie", refined, {**fitted, "moment_gain": gain.tolist()},
                                  source + " (output-error refinement)"))  # fmt: skip
    plot(
        args.out / "horizons.png",
        {
            k: rows[k]
            for k in (
                "constant",
                "preset (command scale only)",
                "fitted",
                "fitted + all effects",
                IDENTIFIED,
                REFINED,
                CONST_RATES,
                *((CONST_RATES_REFINED,) if args.refine_thrust else ()),
            )
        },
        test[0].dt,
    )
    print(json.dumps(checks), f"wall {doc['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
