"""Before/after speed of the World + rollout refactor (issue 16): the three benchmarks the issue
names, run against two source trees in one session, interleaved (old, new, old, new, ...).

- ``physics.py``: env-steps/s of volary's physics step (eager and numba) at N = 1, 1,024, 16,384;
- ``envs.py``: env-steps/s of the RL envs (hover and navigate, eager and numba);
- ``bench_throughput.py``: navigation-benchmark trials/s (straight over a fraction of the
  protocol, one worker).

Each figure is the median over ``--rounds`` runs per tree; the table quotes new / old. One
figure again, over more rounds (the eager N = 16,384 rate is bimodal on the shared machine,
about 1.0 M or 0.72 M env-steps/s, on either tree):

    .venv/bin/python benchmarks/world_speed.py --old /path/to/old/src --new src --rounds 3
    .venv/bin/python benchmarks/world_speed.py --old OLD --only physics --physics-impls \
        volary-eager --physics-ns 16384 --rounds 8
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import machine, summarize

HERE = Path(__file__).resolve().parent
ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _run(src: str, args: list[str], out: Path, written: Path | None = None) -> dict:
    env = {**os.environ, **ENV, "PYTHONPATH": str(Path(src).resolve())}
    cmd = [sys.executable, *args, "--out", str(out)]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, cwd=HERE.parent)
    return json.loads((written or out).read_text())


PHYSICS = {"impls": "volary-eager,volary-numba", "ns": "1,1024,16384"}


def physics(src: str, out: Path) -> dict[str, float]:
    args = [str(HERE / "physics.py"), "--impls", PHYSICS["impls"], "--ns", PHYSICS["ns"],
            "--repeat-seconds", "0.5"]  # fmt: skip
    d = _run(src, args, out, out / "physics.json")  # physics.py writes into a folder
    return {f"physics {r['impl']} N={r['n']}": r["steps_per_s"] for r in d["results"]}


def envs(src: str, out: Path) -> dict[str, float]:
    d = _run(src, [str(HERE / "envs.py"), "--threads", "1", "--repeats", "3"], out)
    return {f"envs {r['task']} N={r['n_envs']} {r['compile']}": r["env_steps_per_s"]
            for r in d["rows"]}  # fmt: skip


def nav(src: str, out: Path) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as db:
        args = [str(HERE / "bench_throughput.py"), "--algos", "straight", "--fraction", "0.3",
                "--workers", "1", "--db-dir", db]  # fmt: skip
        d = _run(src, args, out)
    return {"nav straight trials/s": d["runs"]["straight"]["trials_per_s"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="src folder of the old tree")
    ap.add_argument("--new", default="src", help="src folder of the new tree")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="physics,envs,nav")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "world_speed.json")
    ap.add_argument("--physics-impls", default=PHYSICS["impls"], help="physics.py --impls")
    ap.add_argument("--physics-ns", default=PHYSICS["ns"], help="physics.py --ns")
    args = ap.parse_args()
    PHYSICS.update(impls=args.physics_impls, ns=args.physics_ns)
    benches = {"physics": physics, "envs": envs, "nav": nav}
    host = machine()
    figures: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name in args.only.split(","):
                for side in ("old", "new"):
                    src = args.old if side == "old" else args.new
                    got = benches[name](src, Path(tmp) / f"{name}-{side}-{r}.json")
                    for k, v in got.items():
                        figures[side].setdefault(k, []).append(v)
                    print(f"round {r} {name} {side} done", flush=True)
    rows = []
    for key in figures["new"]:
        t = {side: summarize(figures[side][key], label=f"{key} {side}") for side in ("old", "new")}
        old, new = t["old"].median, t["new"].median
        rows.append({"figure": key, "old": old, "new": new, "ratio": new / old,
                     "old_runs": figures["old"][key], "new_runs": figures["new"][key],
                     "old_over_rounds": t["old"].to_json("rate"),
                     "new_over_rounds": t["new"].to_json("rate")})  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"rounds": args.rounds, "machine": host, "rows": rows}
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"\n{'figure':<40} {'old':>12} {'new':>12} {'new/old':>8}")
    for r in rows:
        print(f"{r['figure']:<40} {r['old']:>12.1f} {r['new']:>12.1f} {r['ratio']:>8.3f}")


if __name__ == "__main__":
    main()
