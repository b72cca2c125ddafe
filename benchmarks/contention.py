"""What users run, quiet and beside busy processes: walls side by side (issue 62).

Workloads (each a whole command, as a user types it, in its own process):

- ``hover-fast``: ``volary rl train --recipe hover-fast`` (512 envs on the fused numba loop,
  rsl_rl's PPO on the recipe's two torch threads); its own figure: the training seconds it prints;
- ``hover-fast-off``: the same with ``VOLARY_CPU_SHARE=0`` (volary.cpu off: OpenMP's default
  spinning waits and the fixed thread counts volary had before issue 62), for comparison;
- ``bench-quick``: ``volary bench run --suite quick --algo straight --workers 2`` (84 trials in
  a 2-process pool); its own figure: the run's seconds;
- ``serve``: ``benchmarks/serve.py --cases state --clients 1`` (``volary serve`` and one client
  process, 2,000 lock-step round trips); its own figures: p50 and p99 round trip.

Each workload runs ``--repeats`` times quiet and as often beside ``--contention`` busy processes
(single-threaded Python loops started before the command and killed after), interleaved
(quiet, busy, quiet, busy, ...) so that drift in the machine hits both alike. Reported: median
wall of the command and of its own figure, and busy / quiet.

    .venv/bin/python benchmarks/contention.py            # -> results/contention.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import Timing, machine, timed_call
from _timing import summarize as summarize_samples

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VOLARY = [sys.executable, "-c", "from volary.cli.main import main; main()"]
BUSY = "while True: pass"
# the same command with volary.cpu switched off: no measured thread counts, no passive waits
# chosen at start (what volary did before issue 62), for a before/after in one run
OFF = {"hover-fast-off": {"VOLARY_CPU_SHARE": "0"}}


def _commands(tmp: Path) -> dict[str, list[str]]:
    return {
        "hover-fast": [*VOLARY, "rl", "train", "--recipe", "hover-fast", "--out", str(tmp)],
        "hover-fast-off": [*VOLARY, "rl", "train", "--recipe", "hover-fast", "--out", str(tmp)],
        "bench-quick": [
            *VOLARY,
            *"bench run --suite quick --algo straight --workers 2".split(),
            "--quiet",
            "--out",
            str(tmp),
        ],  # fmt: skip
        "serve": [
            sys.executable,
            str(HERE / "serve.py"),
            *"--cases state --clients 1".split(),
            "--out",
            str(tmp / "serve.json"),
        ],  # fmt: skip
    }


def _own_figures(name: str, out: str) -> dict[str, float]:
    """The workload's own timing figures from its output."""
    if name.startswith("hover-fast"):
        m = re.search(r"samples in ([\d.]+) s", out)
        return {"train_s": float(m.group(1))} if m else {}
    if name == "bench-quick":
        m = re.search(r"units in ([\d.]+) s", out)
        return {"run_s": float(m.group(1))} if m else {}
    m = re.search(r"^state\s+1\s+([\d.]+)\s+([\d.]+)", out, re.M)
    return {"p50_ms": float(m.group(1)), "p99_ms": float(m.group(2))} if m else {}


def run_once(name: str, busy: int, timeout: float) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix=f"contention-{name}-"))
    procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(busy)]
    try:
        if procs:
            time.sleep(0.5)
        env = {**os.environ, "PYTHONWARNINGS": "ignore", **OFF.get(name, {})}
        wall, p = timed_call(lambda: subprocess.run(_commands(tmp)[name], capture_output=True,
                             text=True, cwd=ROOT, timeout=timeout, env=env))  # fmt: skip
    finally:
        for b in procs:
            b.kill()
            b.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    row = {"workload": name, "busy": busy, "wall_s": wall, "rc": p.returncode}
    row.update(_own_figures(name, p.stdout + p.stderr))
    if p.returncode != 0:
        row["error"] = " | ".join((p.stderr or p.stdout).strip().splitlines()[-3:])
    return row


def _timing(rows: list[dict], key: str, label: str) -> Timing | None:
    """The repeats' ``key`` of the commands that succeeded (median, IQR, spread), or None."""
    vals = [r[key] for r in rows if key in r and r.get("rc") == 0]
    return summarize_samples(vals, label=label) if vals else None


def summarize(rows: list[dict], names: list[str], busy: int) -> dict:
    out: dict = {}
    print(f"\nmedians over repeats; busy = beside {busy} busy process(es)")
    print(f"{'workload':<16}{'figure':<10}{'quiet':>10}{'busy':>10}{'busy/quiet':>12}")
    for name in names:
        mine = [r for r in rows if r["workload"] == name]
        keys = ["wall_s"] + sorted({k for r in mine for k in r} - {"workload", "busy", "wall_s",
                                                                  "rc", "error"})  # fmt: skip
        for key in keys:
            tq = _timing([r for r in mine if r["busy"] == 0], key, f"{name} {key} quiet")
            tb = _timing([r for r in mine if r["busy"] == busy], key, f"{name} {key} busy")
            q, b = (t.median if t is not None else None for t in (tq, tb))
            ratio = b / q if q and b is not None else None
            out[f"{name}: {key}"] = {"quiet": q, "busy": b, "ratio": ratio,
                                     "quiet_timing": tq.to_json() if tq else None,
                                     "busy_timing": tb.to_json() if tb else None}  # fmt: skip
            cells = [f"{v:.3f}" if v is not None else "-" for v in (q, b)]
            rs = f"{ratio:.2f}x" if ratio is not None else "-"
            print(f"{name:<16}{key:<10}{cells[0]:>10}{cells[1]:>10}{rs:>12}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="hover-fast,hover-fast-off,bench-quick,serve")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--contention", type=int, default=1, help="busy processes (default 1)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per command")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "contention.json")
    args = ap.parse_args()
    names = args.workloads.split(",")
    unknown = set(names) - set(_commands(Path(".")))
    if unknown:
        ap.error(f"--workloads: unknown {sorted(unknown)}; expected {sorted(_commands(Path('.')))}")
    if args.repeats < 1 or args.contention < 1:
        ap.error("--repeats and --contention: expected integers >= 1")
    host = machine()
    rows = []
    for _ in range(args.repeats):
        for name in names:
            for busy in (0, args.contention):
                row = run_once(name, busy, args.timeout)
                print(json.dumps(row), flush=True)
                rows.append(row)
    summary = summarize(rows, names, args.contention)
    info = {"machine": {**host, "affinity": len(os.sched_getaffinity(0))},
            "doc": __doc__, "contention": args.contention, "results": rows,
            "summary": summary}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(info, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
