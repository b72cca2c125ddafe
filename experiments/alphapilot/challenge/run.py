"""The AlphaPilot challenge from sensors (issue 20): the reference contestant on the 25
perturbed courses of a seed, its ablations and robustness runs, beside the paper's Table IV.

Each configuration is one ``run_challenge`` of the 25 courses (one env per course, one thread);
configurations run in a process pool (``--jobs``, default 2, one per core). The unit of
replication is the course: completion rate and mean +- std are over the 25 courses, the
leaderboard is the mean of the best five (the challenge's rule).

    .venv/bin/python experiments/alphapilot/challenge/run.py      # seed 0, every configuration
    .venv/bin/python experiments/alphapilot/challenge/run.py --configs default --seed 1

Writes ``results/ablations-seed<SEED>.json`` beside this script (figures, per-course rows, wall
times, machine) and ``results/ablations-seed<SEED>_estimation.png`` (the default
configuration's estimation error along the course), and prints the table. The oracle racer
(true gates and state) is ``volary race --mode oracle``: an upper bound, not a challenge score.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

RESULTS = Path(__file__).resolve().parent / "results"  # experiments/alphapilot/challenge/results
# name -> (sensor set, faults): the default stack, the ablations (IMU + IR; the stereo camera
# instead of the IR beacons), the robustness runs
CONFIGS = {
    "default": ("imu+ir+ranger", "none"),
    "imu+ir": ("imu+ir", "none"),
    "imu+camera+ranger": ("imu+camera+ranger", "none"),
    "dropout30": ("imu+ir+ranger", "dropout30"),
    "false10": ("imu+ir+ranger", "false10"),
    "bias3x": ("imu+ir+ranger", "bias3x"),
}


def run_one(name: str, seed: int, plot: Path | None) -> dict:
    import torch

    torch.set_num_threads(1)
    from volary.studies.alphapilot.challenge import (
        FAULTS,
        SENSOR_SETS,
        challenge_summary,
        plot_estimation,
        run_challenge,
    )
    from volary.worlds import alphapilot_2019_courses

    sensors, faults = CONFIGS[name]
    cfg = replace(SENSOR_SETS[sensors], **FAULTS[faults])
    t0 = time.perf_counter()
    res = run_challenge(alphapilot_2019_courses(25, seed), "reference", seed, sensors=cfg)
    out = {"config": name, "faults": faults, **challenge_summary(res)}
    out["wall_s"] = time.perf_counter() - t0
    out["per_course"] = res.race.to_dict()["courses"]
    if plot is not None and res.pos_err.numel():
        plot_estimation(res, plot)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="default results/ablations-seedN.json")
    args = ap.parse_args()
    if args.out is None:
        args.out = RESULTS / f"ablations-seed{args.seed}.json"
    names = [c for c in args.configs.split(",") if c]
    unknown = [c for c in names if c not in CONFIGS]
    if unknown:
        ap.error(f"--configs: unknown {unknown}; expected some of {list(CONFIGS)}")
    plot = args.out.with_name(args.out.stem + "_estimation.png")
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futs = {n: pool.submit(run_one, n, args.seed, plot if n == "default" else None)
                for n in names}  # fmt: skip
        rows = [futs[n].result() for n in names]
    total = time.perf_counter() - t0
    from volary.studies.alphapilot.challenge import TABLE_IV

    doc = {
        "seed": args.seed,
        "courses": 25,
        "unit_of_replication": "course (25 perturbed courses of the seed)",
        "jobs": args.jobs,
        "total_wall_s": total,
        "machine": {"cpus": os.cpu_count(), "threads_per_run": 1},
        "table_iv": {
            k: dict(zip(("teams", "completed_pct", "mean_score", "std_score"), v, strict=True))
            for k, v in TABLE_IV.items()
        },  # fmt: skip
        "runs": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2, default=lambda x: None))
    _print(doc)


def _print(doc: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table("run", "sensors", "faults", "leaderboard", "completed %", "mean +- std",
              "pos err med/p95 m", "gate err at pass med/p95 m", "wall s",
              title=f"AlphaPilot challenge from sensors, seed {doc['seed']}")  # fmt: skip
    for r in doc["runs"]:
        e = r.get("estimation", {})
        pe, ge = e.get("position_m", {}), e.get("gate_at_passage_m", {})
        t.add_row(r["config"], r["sensors"], r["faults"], f"{r['leaderboard']:.2f}",
                  f"{r['completed_pct']:.0f}", f"{r['mean_score']:.1f} +- {r['std_score']:.1f}",
                  f"{pe.get('median', float('nan')):.3f} / {pe.get('p95', float('nan')):.2f}",
                  f"{ge.get('median', float('nan')):.3f} / {ge.get('p95', float('nan')):.2f}",
                  f"{r['wall_s']:.0f}")  # fmt: skip
    for name, row in doc["table_iv"].items():
        t.add_row(f"2019 ({row['teams']} teams)", name, "-", "-", f"{row['completed_pct']:.0f}",
                  f"{row['mean_score']:.1f} +- {row['std_score']:.1f}", "-", "-", "-")  # fmt: skip
    Console().print(t)
    print(f"top 2019 leaderboard: 91.39; total wall {doc['total_wall_s']:.0f} s")


if __name__ == "__main__":
    main()
