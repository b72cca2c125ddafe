"""Wall time of the full FLYINGTRUST protocol (2,520 trials per algorithm) through the runner.

For each algorithm: fly the ``flyingtrust`` suite (or every k-th work unit of it with
``--fraction``) in a process pool into a fresh run database, and report wall time, trials/s and
simulated seconds per wall second. With a fraction below 1 the full-protocol wall time is a
projection (wall x 2,520 / trials flown), labelled ``projected``; at 1 it is ``measured``.
Results are merged per algorithm into ``benchmarks/results/bench_throughput.json``.

    .venv/bin/python benchmarks/bench_throughput.py --algos straight --fraction 1
    .venv/bin/python benchmarks/bench_throughput.py --algos mapper --fraction 0.1

Targets (issue 5): straight under 15 minutes, mapper under 2 hours on this 2-core machine;
Gazebo runs near real time (about 60 h of flight per algorithm).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import time
from dataclasses import asdict
from pathlib import Path

from _timing import machine, timed_call
from rich.console import Console
from rich.table import Table

from volary.studies.flyingtrust.db import RunDB
from volary.studies.flyingtrust.protocol import get_suite
from volary.studies.flyingtrust.run import run_units

RESULTS = Path(__file__).resolve().parent / "results" / "bench_throughput.json"
TARGET_S = {"straight": 15 * 60.0, "mapper": 2 * 3600.0}


def pick_units(units: list, fraction: float) -> list:
    """Every k-th unit, k = round(1 / fraction), starting at k // 2 (spreads the types and
    configurations: units are ordered type, configuration, trial)."""
    k = max(1, round(1.0 / fraction))
    return units[k // 2 :: k] if k > 1 else list(units)


def measure(algo: str, fraction: float, workers: int, seed: int, db_dir: Path) -> dict:
    suite = get_suite("flyingtrust")
    all_units = suite.units([algo], seed)
    units = pick_units(all_units, fraction)
    db = db_dir / f"{algo}-f{fraction:g}-s{seed}.sqlite"
    db.unlink(missing_ok=True)
    meta = {
        "suite": json.loads(json.dumps(asdict(suite))),
        "algos": [algo],
        "algo_options": {},
        "seed": seed,
        "fraction": fraction,
    }
    RunDB.create(db, meta, units).close()
    load0 = os.getloadavg()
    wall, summary = timed_call(lambda: run_units(db, workers, progress=True))
    con = sqlite3.connect(db)
    sim, ok = con.execute("SELECT COALESCE(SUM(sim_time), 0), SUM(success) FROM trials").fetchone()
    causes = dict(con.execute("SELECT cause, COUNT(*) FROM trials GROUP BY cause").fetchall())
    con.close()
    full = suite.n_trials(1)
    projected = wall * full / summary.done
    return {
        "algo": algo,
        "fraction": summary.done / full,
        "units": len(units),
        "trials": summary.done,
        "full_protocol_trials": full,
        "wall_s": wall,
        "trials_per_s": summary.done / wall,
        "sim_s": sim,
        "sim_s_per_wall_s": sim / wall,
        "full_protocol_wall_s": projected,
        "full_protocol_label": "measured" if summary.done == full else "projected",
        "target_s": TARGET_S.get(algo),
        "success_rate": (ok or 0) / summary.done,
        "causes": causes,
        "workers": workers,
        "loadavg_1min_before_after": [load0[0], os.getloadavg()[0]],
        "db": str(db),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--algos", default="straight,mapper")
    ap.add_argument("--fraction", type=float, default=1.0, help="share of the units, (0, 1]")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--db-dir", type=Path, default=Path("out/bench/throughput"))
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    if not 0 < args.fraction <= 1:
        ap.error(f"--fraction: expected a number in (0, 1], got {args.fraction}")
    doc = json.loads(args.out.read_text()) if args.out.exists() else {"runs": {}}
    doc["machine"] = {
        **machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
    }
    for algo in [a.strip() for a in args.algos.split(",") if a.strip()]:
        doc["runs"][algo] = measure(algo, args.fraction, args.workers, args.seed, args.db_dir)
        doc["runs"][algo]["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print_table(doc)
    Console().print(f"wrote {args.out}")


def print_table(doc: dict) -> None:
    t = Table(
        "algo", "trials", "wall", "trials/s", "sim s / wall s", "full protocol", "", "target",
        "success", title="navigation benchmark throughput (flyingtrust protocol)",
    )  # fmt: skip
    for r in doc["runs"].values():
        target = r.get("target_s")
        t.add_row(
            r["algo"],
            f"{r['trials']} ({100 * r['fraction']:.0f}%)",
            f"{r['wall_s']:.0f} s",
            f"{r['trials_per_s']:.3f}",
            f"{r['sim_s_per_wall_s']:.1f}",
            f"{r['full_protocol_wall_s'] / 60:.1f} min",
            r["full_protocol_label"],
            f"{target / 60:.0f} min" if target else "-",
            f"{100 * r['success_rate']:.0f}%",
        )
    Console().print(t)


if __name__ == "__main__":
    main()
