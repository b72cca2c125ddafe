"""Per-call planning time of the navigation planners (issue 21: "per-call planning time
(median, p99) of each planner in the report").

Every planner flies the same work units through the benchmark's own episode
(``volary.studies.flyingtrust.episode.run_unit``: the protocol's vehicles, controller, depth camera,
10 Hz planning), in-process and one thread (as the run's workers do), wrapped so that every
``plan`` call is timed with ``time.perf_counter``. The units: configuration 0 of each of the
seven scenario types, a spread of platforms (every ``--stride``-th of the 36 Table I
platforms, from the smallest to the largest); the planners take turns per unit (interleaved,
so machine noise falls on all of them alike). Each planner first flies one untimed warm-up
trial (numba compiles its kernels on first use).

    .venv/bin/python benchmarks/nav_planner_calls.py --algos mapper,kinodynamic,ego,topo

Writes ``benchmarks/results/nav-planner-calls.json`` and prints a table: per planner the
number of calls, median, p90, p99 and max in ms, and the success of the flown trials (a
sanity figure; the protocol's rates are in the full runs). The unit of the timing is the call;
calls of one trial are not independent, so the p99 says how slow the slow calls are, not a
confidence statement.
"""

from __future__ import annotations

import argparse
import json
import os
import platform as _platform
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402
from _timing import machine, summarize  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "nav-planner-calls.json"
CALLS: dict[str, list[float]] = {}
SCENARIOS = ("forest", "urban", "random_cylinders", "narrow_gap", "sudden_drop", "maze", "perlin")


class TimedPlanner:
    """Wraps the planner ``inner`` and records each ``plan`` call's wall time in CALLS."""

    def __init__(self, inner: str, **options: object) -> None:
        from volary.studies.flyingtrust.planners import get_planner

        self.inner = get_planner(inner, **options)
        self.name, self.needs = self.inner.name, self.inner.needs
        self._times = CALLS.setdefault(inner, [])

    def reset(self, task: object) -> None:
        self.inner.reset(task)

    def plan(self, obs: object) -> object:
        t0 = time.perf_counter()
        out = self.inner.plan(obs)
        self._times.append(time.perf_counter() - t0)
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--algos", default="mapper,kinodynamic,ego,topo")
    ap.add_argument("--stride", type=int, default=6, help="every n-th of the 36 platforms")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    host = machine()
    from volary.studies.flyingtrust.episode import run_unit
    from volary.studies.flyingtrust.protocol import flyingtrust_platforms
    from volary.studies.flyingtrust.schema import WorkUnit

    plats = tuple(flyingtrust_platforms())[:: a.stride]
    algos = a.algos.split(",")
    for algo in algos:  # compile (numba) and warm every planner before timing
        run_unit(WorkUnit("__main__:TimedPlanner", "forest", 0, 0, plats[:1], 0,
                          algo_options=(("inner", algo),)))  # fmt: skip
    CALLS.clear()
    success: dict[str, list[bool]] = {k: [] for k in algos}
    walls: dict[str, float] = dict.fromkeys(algos, 0.0)
    for scen in a.scenarios.split(","):
        for algo in algos:
            unit = WorkUnit("__main__:TimedPlanner", scen, 0, 0, plats, 0,
                            algo_options=(("inner", algo),))  # fmt: skip
            t0 = time.perf_counter()
            rows = run_unit(unit)
            walls[algo] += time.perf_counter() - t0
            errors = [r.error for r in rows if r.cause == "error"]
            if errors:
                raise SystemExit(f"{algo} {scen}: {errors[0][:500]}")
            success[algo] += [bool(r.success) for r in rows]
            print(f"{scen:17s} {algo:12s} {sum(r.success for r in rows)}/{len(rows)} "
                  f"{time.perf_counter() - t0:6.1f} s", flush=True)  # fmt: skip
    table = {}
    for algo in algos:
        ms = np.asarray(CALLS[algo]) * 1e3
        table[algo] = {
            "calls": int(ms.size),
            "median_ms": float(np.median(ms)),
            "p90_ms": float(np.percentile(ms, 90)),
            "p99_ms": float(np.percentile(ms, 99)),
            "max_ms": float(ms.max()),
            "mean_ms": float(ms.mean()),
            "trials": len(success[algo]),
            "success": float(np.mean(success[algo])),
            "unit_wall_s": walls[algo],
            "call_ms": summarize(CALLS[algo], label=f"{algo} plan call").to_json("ms", 1e3),
        }
    meta = {
        "platforms": list(plats),
        "scenarios": a.scenarios.split(","),
        "config": 0,
        "threads": 1,
        "machine": f"{_platform.machine()} {os.cpu_count()} cpus",
        "host": host,
        "command": "benchmarks/nav_planner_calls.py " + " ".join(f"--{k} {v}" for k, v in
                                                               vars(a).items() if k != "out"),
    }  # fmt: skip
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"meta": meta, "planners": table}, indent=2) + "\n")
    print(f"\n{'planner':12s} {'calls':>6s} {'median':>8s} {'p90':>8s} {'p99':>8s} {'max':>8s}"
          f"  success  (ms per plan call; {len(plats)} platforms x {len(meta['scenarios'])} "
          "scenes)")  # fmt: skip
    base = table[algos[0]]["median_ms"]
    for algo, r in table.items():
        print(f"{algo:12s} {r['calls']:6d} {r['median_ms']:8.2f} {r['p90_ms']:8.2f} "
              f"{r['p99_ms']:8.2f} {r['max_ms']:8.1f}  {100 * r['success']:5.1f} %  "
              f"(median x{r['median_ms'] / base:.2f} of {algos[0]})")  # fmt: skip
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
