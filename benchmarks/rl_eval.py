"""A deterministic policy evaluation in one numba call against the same evaluation stepped
through the env: ``evaluate_policy(env, policy, N)`` with and without ``kernel`` (every env's
first episode; volary.envs.fused_position), in turn, on a trained hover policy.

What it serves: an early-stopped ``volary rl train`` validates on 64 episodes every few
iterations (``--recipe hover-fast``), and ``volary rl eval`` flies 1,024. Both are timed at
those sizes, one and two threads, ``--repeats`` interleaved pairs; the medians, their ratio
and both runs' success rates (which should agree: the parity test is
``tests/test_fused_eval.py``).

    .venv/bin/python benchmarks/rl_eval.py [--policy FILE] [--repeats 5]

Writes ``benchmarks/results/rl/eval-kernel.json`` (or ``--out``) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
from functools import partial
from pathlib import Path

HERE = Path(__file__).resolve().parent
POLICY = HERE / "results" / "rl" / "hover-fast-kernel-volary" / "seed1" / "policy.pt"


def _env(meta: dict, n: int):
    from volary.envs import make_env

    opts = {k: tuple(v) if isinstance(v, list) else v for k, v in meta["env_options"].items()}
    return make_env(meta["task"], n_envs=n, seed=7, device="cpu", **opts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", type=Path, default=POLICY)
    ap.add_argument("--sizes", default="64,1024", help="envs = episodes per evaluation")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "rl" / "eval-kernel.json")
    args = ap.parse_args(argv)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"  # torch's intra-op threads are set per row below
    import torch
    from _timing import cpu_model, machine, summarize, timed_call

    from volary.studies.rl.ppo import evaluate_policy, load_policy

    host = machine()
    policy, _, meta = load_policy(args.policy)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        env = _env(meta, n)
        for threads in (int(s) for s in args.threads.split(",")):
            torch.set_num_threads(threads)
            walls: dict[str, list[float]] = {"kernel": [], "stepped": []}
            success: dict[str, float] = {}
            for kernel in (True, False):  # warm-up (the kernels' first load from the cache)
                evaluate_policy(env, policy, n, seed=11, kernel=kernel)
            for _ in range(args.repeats):
                for name, kernel in (("kernel", True), ("stepped", False)):
                    run = partial(evaluate_policy, env, policy, n, seed=11, kernel=kernel)
                    wall, res = timed_call(run)
                    walls[name].append(wall)
                    success[name] = res["success_rate"]
            t = {k: summarize(v, label=f"{k} N={n} threads={threads}") for k, v in walls.items()}
            med = {k: v.median for k, v in t.items()}
            rows.append({
                "episodes": n, "threads": threads, "kernel_s": walls["kernel"],
                "stepped_s": walls["stepped"], "median_kernel_s": med["kernel"],
                "median_stepped_s": med["stepped"], "speedup": med["stepped"] / med["kernel"],
                "success_kernel": success["kernel"], "success_stepped": success["stepped"],
                "timing_s": {k: v.to_json() for k, v in t.items()},
            })  # fmt: skip
    doc = {
        "benchmark": "rl_eval", "policy": str(args.policy.relative_to(HERE.parent))
        if args.policy.is_relative_to(HERE.parent) else str(args.policy),
        "task": meta["task"], "env_options": meta["env_options"], "machine": cpu_model(),
        "host": host, "repeats": args.repeats, "order": "kernel and stepped in turn, per repeat",
        "rows": rows,
    }  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2))
    print(f"evaluate_policy on {meta['task']} ({args.policy.name}), {args.repeats} pairs each")
    print("| episodes | threads | one call (s) | stepped (s) | ratio | success (one call, step) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['episodes']} | {r['threads']} | {r['median_kernel_s']:.3f} | "
              f"{r['median_stepped_s']:.3f} | {r['speedup']:.1f}x | "
              f"{r['success_kernel']:.1%} / {r['success_stepped']:.1%} |")  # fmt: skip
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
