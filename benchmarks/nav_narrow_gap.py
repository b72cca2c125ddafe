"""Narrow gap by platform size: the collision sphere against the box that fits the frame
(issue 21, "a collider that fits the frame").

FLYINGTRUST's narrow-gap scenes (0.85-0.9 m slots, gap count rising with the configuration)
flown by the 36 Table I platforms with ``settings.collider = "sphere"`` (the protocol's default)
and ``"box"`` (``volary.worlds.collider``: the rotor span and frame height, turning with the
vehicle, offered to the planners as ``NavLimits.plan_radius``), every other setting the
protocol's. Same seed, configurations and trials for both, so each row has a paired twin.

    .venv/bin/python benchmarks/nav_narrow_gap.py --algos straight,mapper --configs 3

Writes ``benchmarks/results/nav-narrow-gap/`` (the two run databases' rows as CSV, a JSON
summary, ``narrow-gap.png``: success against the platform's half width) and prints a table.
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
OUT = HERE / "results" / "nav-narrow-gap"
COLLIDERS = ("sphere", "box")


def fly(algos: list[str], configs: int, workers: int, work: Path) -> dict[str, list]:
    from volary.bench.nav.protocol import Suite, flyingtrust_platforms
    from volary.bench.nav.runner import load_results, run_suite
    from volary.bench.nav.schema import ProtocolSettings

    rows, walls = {}, {}
    for collider in COLLIDERS:
        suite = Suite(f"narrow-gap-{collider}", flyingtrust_platforms(), ("narrow_gap",),
                      f"fixed:{configs}", settings=ProtocolSettings(collider=collider))  # fmt: skip
        db = work / f"{collider}.sqlite"
        if db.exists():
            db.unlink()
        t0 = time.perf_counter()
        run_suite(suite, algos, db, workers=workers, progress=False)
        walls[collider] = time.perf_counter() - t0
        rows[collider] = load_results(db)
        print(f"{collider}: {len(rows[collider])} trials in {walls[collider]:.0f} s", flush=True)
    return {"rows": rows, "walls": walls}


def summarize(rows: dict[str, list], algos: list[str]) -> dict:
    from scipy.stats import binomtest

    from volary.platforms import get

    half = {p: max(get(p).collider_half_extents[:2]) for p in {r.platform for r in rows["box"]}}
    radius = {p: get(p).radius for p in half}
    out: dict = {"platform_half_width": half, "platform_radius": radius, "algos": {}}
    for algo in algos:
        cell: dict = {}
        for collider in COLLIDERS:
            for r in rows[collider]:
                if r.algo == algo:
                    cell.setdefault((r.platform, r.config, r.trial), {})[collider] = r
        by_platform: dict = {}
        for (plat, _, _), pair in cell.items():
            d = by_platform.setdefault(plat, {"sphere": [], "box": [], "causes_box": []})
            d["sphere"].append(bool(pair["sphere"].success))
            d["box"].append(bool(pair["box"].success))
            d["causes_box"].append(pair["box"].cause)
        both = list(cell.values())
        s_only = sum(1 for p in both if p["sphere"].success and not p["box"].success)
        b_only = sum(1 for p in both if p["box"].success and not p["sphere"].success)
        test = binomtest(b_only, s_only + b_only) if s_only + b_only else None
        out["algos"][algo] = {
            "trials": len(cell),
            "success_sphere": sum(p["sphere"].success for p in both) / len(both),
            "success_box": sum(p["box"].success for p in both) / len(both),
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
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    algos = args.algos.split(",")
    args.out.mkdir(parents=True, exist_ok=True)
    flown = fly(algos, args.configs, args.workers, args.out)
    for collider, rows in flown["rows"].items():
        with (args.out / f"trials-{collider}.csv").open("w", newline="") as f:
            names = [k for k in rows[0].to_row() if k != "track"]  # the 40 Hz track: in the db
            w = csv.DictWriter(f, fieldnames=names, extrasaction="ignore")
            w.writeheader()
            w.writerows(r.to_row() for r in rows)
        (args.out / f"{collider}.sqlite").unlink()
    summary = summarize(flown["rows"], algos)
    summary.update(configs=args.configs, walls_s=flown["walls"], workers=args.workers)
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
