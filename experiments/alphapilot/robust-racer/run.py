"""Issue 57's report runs: the reference contestant on seed 0's courses of every course
generator setting (``volary``: the development generator, other seed; ``moved``, ``resized``,
``replaced``: settings it was not developed on), sensors-only over 10 noise seeds and camera-only
over the first noise seed, each a ``volary race`` command; then one table of them all.

    .venv/bin/python experiments/alphapilot/robust-racer/run.py            # ~1 h on 2 cores
    .venv/bin/python experiments/alphapilot/robust-racer/run.py --summarize  # table only
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SETTINGS = ("volary", "moved", "resized", "replaced")
RUNS = {  # name: (sensors, noise seeds, workers)
    "imu-ir-ranger": ("imu+ir+ranger", 10, 2),
    "imu-camera-ranger": ("imu+camera+ranger", 1, 1),
}


def fly(name: str, setting: str) -> None:
    sensors, seeds, workers = RUNS[name]
    out = RESULTS / f"{name}-{setting}"
    volary = str(Path(sys.executable).with_name("volary"))  # the venv's command
    cmd = [volary, "race", "--seed", "0", "--courses-from", setting,
           "--noise-seeds", str(seeds), "--sensors", sensors, "--workers", str(workers),
           "--out", str(out)]  # fmt: skip
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    print(f"{name} {setting}: {time.perf_counter() - t0:.0f} s wall", flush=True)


def summarize() -> dict:
    rows = []
    for name in RUNS:
        for setting in SETTINGS:
            path = RESULTS / f"{name}-{setting}" / "challenge.json"
            if not path.exists():
                continue
            d = json.loads(path.read_text())
            lb, done = d["leaderboard"], d["completed_pct"]
            rows.append({
                "run": name, "courses_from": setting, "developed_on": setting == "volary",
                "pairs": d["pairs"], "noise_seeds": d["noise_seeds"],
                "leaderboard_median": lb["median"], "leaderboard_interval": lb["interval"],
                "leaderboard_seeds": [lb["min"], lb["max"]],
                "completed_median_pct": done["median"], "completed_interval": done["interval"],
                "pooled": d["pooled"], "wall_s": d["wall_s"],
            })  # fmt: skip
    doc = {"top_2019_score": 91.39, "course_seed": 0, "rows": rows}
    (RESULTS / "summary.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{'run':18} {'courses':9} {'pairs':>5} {'leaderboard [90 % int.]':>27} "
          f"{'completed [90 % int.]':>24} {'wall':>6}")  # fmt: skip
    for r in rows:
        lo, hi = r["leaderboard_interval"] or (float("nan"),) * 2
        clo, chi = r["completed_interval"] or (float("nan"),) * 2
        print(
            f"{r['run']:18} {r['courses_from']:9} {r['pairs']:5d} "
            f"{r['leaderboard_median']:8.2f} [{lo:6.2f}, {hi:6.2f}]      "
            f"{r['completed_median_pct']:5.1f} [{clo:4.0f}, {chi:4.0f}] {r['wall_s']:6.0f}"
        )
    return doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--summarize", action="store_true", help="only the table of the results")
    a = ap.parse_args()
    if not a.summarize:
        for name in RUNS:
            for setting in SETTINGS:
                fly(name, setting)
    summarize()


if __name__ == "__main__":
    main()
