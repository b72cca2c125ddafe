"""How fast could the reference racer's own planner fly each report course if it knew the course?

For every course of a generator setting: the minimum-time plan (``planning.mintime.min_time``)
through the *true* gates, with what the racer plans with (its limits: 85 % thrust; gates crossed
level; the same yaw and overshoot), warm-started from the nominal course's solution like the
oracle. Score bound = 10 x 11 gates - the plan's time at the final gate; the leaderboard bound is
the mean of the five best. Beside it, the racer's committed laps on the same courses (median
over the noise seeds of the finished pairs, from ``results/imu-ir-ranger-SETTING``).

    .venv/bin/python experiments/alphapilot/robust-racer/plan_bound.py --settings volary,moved
    .venv/bin/python experiments/alphapilot/robust-racer/plan_bound.py --settings resized,replaced

about 200 s per setting on one thread; -> results/plan-bound-SETTING.json, a printed table.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from volary.bench.gate_race import RACE_PLATFORM
from volary.planning.mintime import MinTimeResult, min_time
from volary.sim import World
from volary.studies.alphapilot.race import BEST_OF
from volary.studies.alphapilot.racers import course_gates
from volary.studies.alphapilot.sensor_racer import SensorRacer
from volary.worlds import SceneSpec, unperturbed
from volary.worlds.tracks import alphapilot_2019_courses

RESULTS = Path(__file__).resolve().parent / "results"
GATES = 11


def solve(racer: SensorRacer, spec: SceneSpec, iters: int, warm: MinTimeResult | None = None
          ) -> MinTimeResult:  # fmt: skip
    """The racer's minimum-time problem (``SensorRacer._solve_nominal``) on ``spec``'s gates."""
    c, n = (torch.as_tensor(x) for x in course_gates(spec))
    n = n.clone()
    n[:, 2] = 0.0  # crossed level (level_normals)
    n = n / n.norm(dim=-1, keepdim=True)
    start = torch.tensor(spec.start, dtype=torch.float64)
    wp, dirs = racer._waypoints(start[None], c[None], n[None])
    der = torch.full((*wp.shape[:2], 3, 4), math.nan, dtype=torch.float64)
    der[:, 0] = 0.0  # from rest
    weights = torch.ones(wp.shape[1] - 1, dtype=torch.float64)
    weights[-1] = racer.tail_weight
    return min_time(
        wp, racer.params, racer.plan_limits, yaw=racer._yaws(wp, dirs), derivatives=der,
        directions=dirs, weights=weights, iters=iters, samples=racer.samples,
        durations=None if warm is None else warm.durations,
        speeds=None if warm is None else warm.speeds,
    )  # fmt: skip


def racer_laps(setting: str) -> list[float] | None:
    """Median lap (s) per course over the finished pairs of the committed report run."""
    path = RESULTS / f"imu-ir-ranger-{setting}" / "challenge.json"
    if not path.exists():
        return None
    laps: dict[int, list[float]] = {}
    for r in json.loads(path.read_text())["courses_detail"]:
        i = int(r["course"].rsplit("_", 1)[1])
        laps.setdefault(i, []).append(r["gate_times_s"][-1] if r["finished"] else math.nan)
    return [float(np.nanmedian(laps[i])) if np.isfinite(laps[i]).any() else math.nan
            for i in sorted(laps)]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--settings", default="volary,moved,resized,replaced")
    ap.add_argument("--seed", type=int, default=0, help="course seed (the report's: 0)")
    ap.add_argument("--iters", type=int, default=300, help="descent steps per course (warm)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    for setting in a.settings.split(","):
        t0 = time.perf_counter()
        courses = alphapilot_2019_courses(25, a.seed, generator=setting)
        racer = SensorRacer()
        racer.params = World([RACE_PLATFORM], courses[:1], control="ctbr").params.to(
            dtype=torch.float64
        )
        racer.plan_limits, racer.yaw = racer.limits, float(courses[0].start_yaw)
        nominal = solve(racer, unperturbed(courses[0]), racer.iters)
        times = [float(solve(racer, s, a.iters, nominal).durations[0, :-1].sum()) for s in courses]
        bound = float(np.mean(sorted(10 * GATES - t for t in times)[::-1][:BEST_OF]))
        laps = racer_laps(setting) if a.seed == 0 else None
        gap = None if laps is None else float(np.nanmedian(np.subtract(laps, times)))
        doc = {"setting": setting, "course_seed": a.seed, "iters": a.iters,
               "plan_times_s": times, "leaderboard_bound": bound, "racer_laps_s": laps,
               "median_racer_minus_plan_s": gap, "wall_s": time.perf_counter() - t0}  # fmt: skip
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"plan-bound-{setting}.json").write_text(json.dumps(doc, indent=1) + "\n")
        print(f"{setting:9} leaderboard bound {bound:6.2f}  median plan {np.median(times):5.2f} s"
              f"  racer - plan (median) {'-' if gap is None else f'{gap:+.2f} s'}"
              f"  ({doc['wall_s']:.0f} s)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
