"""Narrow gap by platform size: the collision sphere against the box that fits the frame
(issue 21, "a collider that fits the frame").

FLYINGTRUST's narrow-gap scenes (0.85-0.9 m slots, gap count rising with the configuration)
flown by the 36 Table I platforms with ``settings.collider = "sphere"`` (the protocol's default)
and ``"box"`` (``volary.worlds.collider``: the rotor span and frame height, turning with the
vehicle, offered to the planners as ``NavLimits.plan_radius``), every other setting the
protocol's. Same seed, configurations and trials for both, so each row has a paired twin.

    .venv/bin/python experiments/flyingtrust/narrow-gap-collider/run.py \
        --algos straight,mapper --configs 3
    .venv/bin/python experiments/flyingtrust/narrow-gap-collider/run.py \
        --algos ego --colliders box \
        --sphere-rows out/bench/ft-ego/report/trials.csv

Writes ``results/`` (the rows as ``trials-{sphere,box}.csv``, a JSON
summary, ``narrow-gap.png``: success against the platform's half width) and prints a table.
Rows of planners not flown in this call are kept, so planners can be added one call at a time;
the summary covers every planner with rows for both colliders.

``--sphere-rows``: a full-protocol ``trials.csv`` (``volary bench report``) supplies the sphere
rows instead of flying them again. The protocol's default collider is the sphere and a trial's
seed depends on (base seed, algo, scenario, configuration, trial, platform), not on the suite,
so these are the same trials: the 216 straight and mapper rows of configurations 0-2 flown by
this script and by the full protocol are identical in outcome, cause, flight time and path
length. The script refuses rows flown with another base seed, and missing rows.

Unit of replication: the scene configuration (each flown once per platform); with few
configurations the per-platform rates are coarse, the pooled comparison is the claim.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "results"
WORK = HERE.parents[2] / "out" / "nav-narrow-gap"  # run databases (ignored by git)
COLLIDERS = ("sphere", "box")


def suite(collider: str, configs: int):
    from volary.studies.flyingtrust.protocol import Suite, flyingtrust_platforms
    from volary.studies.flyingtrust.schema import ProtocolSettings

    return Suite(f"narrow-gap-{collider}", flyingtrust_platforms(), ("narrow_gap",),
                 f"fixed:{configs}", settings=ProtocolSettings(collider=collider))  # fmt: skip


def fly(algos: list[str], configs: int, workers: int, work: Path, colliders: list[str]) -> dict:
    from volary.studies.flyingtrust.run import load_results, run_suite

    rows, walls = {}, {}
    for collider in colliders:
        db = work / f"{collider}.sqlite"
        if db.exists():
            db.unlink()
        t0 = time.perf_counter()
        run_suite(suite(collider, configs), algos, db, workers=workers, progress=False)
        walls[collider] = time.perf_counter() - t0
        rows[collider] = [_csv_row(r.to_row()) for r in load_results(db)]
        db.unlink()
        print(f"{collider}: {len(rows[collider])} trials in {walls[collider]:.0f} s", flush=True)
    return {"rows": rows, "walls": walls}


def _csv_row(row: dict) -> dict[str, str]:
    """A result row as the CSV holds it (strings; the 40 Hz track stays in the database)."""
    return {k: str(v) for k, v in row.items() if k != "track"}


def protocol_sphere_rows(paths: list[Path], algos: list[str], configs: int) -> list[dict[str, str]]:
    """The narrow-gap rows of configurations 0..configs-1 from full protocols' trials.csv
    files, checked to be the trials this script's sphere suite would fly (same keys, base seed
    0, each once)."""
    want = {(t.algo, t.platform, str(t.config), str(t.trial))
            for u in suite("sphere", configs).units(algos, 0) for t in u.trials()}  # fmt: skip
    rows, seen = [], set()
    for path in paths:
        with path.open(newline="") as f:
            for r in csv.DictReader(f):
                key = (r["algo"], r["platform"], r["config"], r["trial"])
                if r["scenario"] != "narrow_gap" or key not in want:
                    continue
                if r["seed"] != "0":
                    where = f"{path}: row {r['algo']}/{r['platform']}/config {r['config']}"
                    raise SystemExit(f"{where} was flown with base seed {r['seed']}; this flies "
                                     "seed 0")  # fmt: skip
                if key in seen:
                    raise SystemExit(f"{path}: row {'/'.join(key)} given twice")
                seen.add(key)
                rows.append(r)
    if len(rows) != len(want):
        where = ", ".join(str(p) for p in paths)
        raise SystemExit(f"{where}: {len(rows)} of the {len(want)} narrow-gap rows wanted "
                         f"({', '.join(algos)}, configurations 0-{configs - 1})")  # fmt: skip
    return rows


def merge(path: Path, new: list[dict[str, str]], algos: list[str]) -> list[dict[str, str]]:
    """Rows of ``path`` for other planners, then ``new``; written back to ``path``."""
    old = []
    if path.exists():
        with path.open(newline="") as f:
            old = [r for r in csv.DictReader(f) if r["algo"] not in algos]
    rows = old + new
    if rows:
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]), extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
    return rows


def summarize(rows: dict[str, list[dict[str, str]]]) -> dict:
    from scipy.stats import binomtest

    from volary.platforms import get

    plats = {r["platform"] for r in rows["box"]}
    half = {p: max(get(p).collider_half_extents[:2]) for p in plats}
    radius = {p: get(p).radius for p in plats}
    out: dict = {"platform_half_width": half, "platform_radius": radius, "algos": {}}
    algos = list(dict.fromkeys(r["algo"] for r in rows["box"]))
    for algo in algos:
        cell: dict = {}
        for collider in COLLIDERS:
            for r in rows[collider]:
                if r["algo"] == algo:
                    cell.setdefault((r["platform"], r["config"], r["trial"]), {})[collider] = r
        cell = {k: v for k, v in cell.items() if len(v) == 2}  # paired trials only
        if not cell:
            continue
        ok = {k: {c: v[c]["success"] == "True" for c in COLLIDERS} for k, v in cell.items()}
        by_platform: dict = {}
        for (plat, _, _), pair in cell.items():
            d = by_platform.setdefault(plat, {"sphere": [], "box": [], "causes_box": []})
            for c in COLLIDERS:
                d[c].append(pair[c]["success"] == "True")
            d["causes_box"].append(pair["box"]["cause"])
        both = list(ok.values())
        s_only = sum(1 for p in both if p["sphere"] and not p["box"])
        b_only = sum(1 for p in both if p["box"] and not p["sphere"])
        test = binomtest(b_only, s_only + b_only) if s_only + b_only else None
        out["algos"][algo] = {
            "trials": len(cell),
            "success_sphere": sum(p["sphere"] for p in both) / len(both),
            "success_box": sum(p["box"] for p in both) / len(both),
            "discordant_box_only": b_only, "discordant_sphere_only": s_only,
            "mcnemar_exact_p": None if test is None else float(test.pvalue),
            "per_platform": {p: {"sphere": sum(v["sphere"]) / len(v["sphere"]),
                                 "box": sum(v["box"]) / len(v["box"]),
                                 "causes_box": v["causes_box"]}
                             for p, v in sorted(by_platform.items(), key=lambda kv: half[kv[0]])},
        }  # fmt: skip
    return out


def plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    algos = list(summary["algos"])
    fig, axes = plt.subplots(1, len(algos), figsize=(5 * len(algos), 3.8), squeeze=False)
    half, radius = summary["platform_half_width"], summary["platform_radius"]
    for ax, algo in zip(axes[0], algos, strict=True):
        per = summary["algos"][algo]["per_platform"]
        names = list(per)
        ax.scatter([2 * radius[n] for n in names], [per[n]["sphere"] for n in names],
                   label="sphere (x: its diameter)", marker="o", alpha=0.7)  # fmt: skip
        ax.scatter([2 * half[n] for n in names], [per[n]["box"] for n in names],
                   label="box (x: its width across the arms)", marker="s", alpha=0.7)  # fmt: skip
        ax.axvspan(0.85, 0.9, color="0.85", label="gap widths")
        ax.set_xlabel("collider width (m)")
        ax.set_ylabel("success over the configurations")
        ax.set_title(algo)
        ax.set_ylim(-0.05, 1.05)
        ax.legend(fontsize=7)
    fig.suptitle("FLYINGTRUST narrow gap, 36 platforms: collision sphere vs fitted box")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--algos", default="straight,mapper")
    ap.add_argument("--configs", type=int, default=3, help="the first N fixed configurations")
    ap.add_argument("--colliders", default="sphere,box", help="the colliders to fly")
    ap.add_argument("--sphere-rows", type=Path, action="append", default=None,
                    help="a full protocol trials.csv: its sphere rows (repeatable)")  # fmt: skip
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    algos = args.algos.split(",")
    colliders = args.colliders.split(",")
    if set(colliders) - set(COLLIDERS):
        ap.error(f"--colliders: expected some of {', '.join(COLLIDERS)}, got {args.colliders}")
    if args.sphere_rows is not None and "sphere" in colliders:
        ap.error("--sphere-rows supplies the sphere rows: fly --colliders box only")
    args.out.mkdir(parents=True, exist_ok=True)
    WORK.mkdir(parents=True, exist_ok=True)
    flown = fly(algos, args.configs, args.workers, WORK, colliders)
    if args.sphere_rows is not None:
        flown["rows"]["sphere"] = protocol_sphere_rows(args.sphere_rows, algos, args.configs)
    rows = {
        c: merge(
            args.out / f"trials-{c}.csv",
            flown["rows"].get(c, []),
            algos if c in flown["rows"] else [],
        )  # fmt: skip
        for c in COLLIDERS
    }
    summary = summarize(rows)
    previous = {}
    if (args.out / "narrow-gap.json").exists():
        before = json.loads((args.out / "narrow-gap.json").read_text())
        previous = before.get("runs") or {  # written before "runs" existed: one joint call
            a: {k: before.get(k) for k in ("configs", "workers", "walls_s")} | {"sphere_rows": None}
            for a in before.get("algos", {})
        }
    given = [str(p) for p in args.sphere_rows] if args.sphere_rows else None
    for algo in algos:  # how each planner's rows were made
        previous[algo] = {"configs": args.configs, "workers": args.workers,
                          "walls_s": flown["walls"], "sphere_rows": given}  # fmt: skip
    summary.update(configs=args.configs, runs=previous)
    (args.out / "narrow-gap.json").write_text(json.dumps(summary, indent=1) + "\n")
    plot(summary, args.out / "narrow-gap.png")
    print("| algo | trials | success, sphere | success, box | box-only / sphere-only wins | "
          "McNemar exact p |\n| --- | --- | --- | --- | --- | --- |")  # fmt: skip
    for algo, s in summary["algos"].items():
        p = "-" if s["mcnemar_exact_p"] is None else f"{s['mcnemar_exact_p']:.3g}"
        print(f"| {algo} | {s['trials']} | {s['success_sphere']:.1%} | {s['success_box']:.1%} | "
              f"{s['discordant_box_only']} / {s['discordant_sphere_only']} | {p} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
