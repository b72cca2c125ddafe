"""RL env throughput: env-steps/s of volary.envs tasks, eager vs the numba physics kernel.

What one step is: ``hover`` / ``reach``: one policy step = one control step at 60 Hz = the
controller (ctbr rate loop) + 4 RK4 physics substeps at 240 Hz + observation + reward +
same-step autoreset. ``navigate``: one decision at 15 Hz = 4 control steps of the Lee velocity
controller (16 substeps) + one 24 x 32 depth render (Embree) + SDF collision query +
observation. Same machine, same run, variants side by side; medians of ``--repeats`` timings of
``--steps`` steps after a warm-up (the numba build is excluded). No peer is measured: Aerial
Gym needs Isaac Gym (a GPU and a source install), which this machine cannot run.

    .venv/bin/python benchmarks/envs.py --threads 1           # -> results/envs-cpu.json

Writes JSON (``--out``) and prints a table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from _timing import cpu_model, machine
from _timing import measure as timed
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
CASES = {
    "hover": (64, 512, 4096),
    "navigate": (16, 64, 256),
}


def measure(task: str, n: int, compile_: bool | str, steps: int, repeats: int) -> dict:
    from volary.envs import make_env

    env = make_env(task, n_envs=n, seed=0, compile=compile_)
    env.reset(seed=0)
    gen = torch.Generator().manual_seed(0)
    act = torch.rand(n, env.act_dim, generator=gen) * 0.2 - 0.1
    if task != "navigate":
        act[:, 0] = 2 * env.sim.params.mass * 9.81 / env.sim.params.max_thrust - 1  # near hover
    for _ in range(3):  # warm-up (and the numba build)
        env.step(act)

    def block() -> None:  # one timed sample: ``steps`` steps
        for _ in range(steps):
            env.step(act)

    timing = timed(block, warmup=0, repeats=repeats, label=f"{task} N={n} compile={compile_}")
    med = timing.median
    return {"task": task, "n_envs": n, "compile": str(compile_), "steps": steps,
            "median_s": med, "env_steps_per_s": n * steps / med,
            "block_s": timing.to_json()}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tasks", default=",".join(CASES))
    ap.add_argument("--out", type=Path, default=HERE / "results" / "envs-cpu.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    machine_info = machine()
    rows = []
    for task in args.tasks.split(","):
        for n in CASES[task]:
            for comp in (False, "numba"):
                r = measure(task, n, comp, args.steps, args.repeats)
                rows.append(r)
                rate = r["env_steps_per_s"]
                print(f"{task} N={n} compile={comp}: {rate:,.0f} steps/s", flush=True)
    table = Table(title=f"volary.envs throughput, {args.threads} torch thread(s), env-steps/s")
    for col in ("task", "envs", "eager", "numba", "numba / eager"):
        table.add_column(col, justify="right")
    rate = {(r["task"], r["n_envs"], r["compile"]): r["env_steps_per_s"] for r in rows}
    for task in args.tasks.split(","):
        for n in CASES[task]:
            e, nb = rate[(task, n, "False")], rate[(task, n, "numba")]
            table.add_row(task, str(n), f"{e:,.0f}", f"{nb:,.0f}", f"{nb / e:.1f}x")
    Console().print(table)
    doc = {"benchmark": "envs", "cpu": cpu_model(), "threads": args.threads,
           "torch": torch.__version__, "machine": machine_info, "rows": rows}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
