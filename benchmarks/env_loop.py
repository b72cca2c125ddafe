"""The RL loop on one device: env-steps/s of the hover env with a policy network in the loop.

What one env-step is: the policy (an MLP 22 -> 64 -> 64 -> 4, tanh, as PPO's default actor)
maps the observation to an action; the env maps it to a CTBR setpoint, runs the controller and
4 RK4 physics substeps at 240 Hz (60 Hz control), the end conditions, the reward and the
same-step autoreset of ended envs, and observes. Nothing is read back on the host per step
(``volary.device``; on CUDA the run is checked with ``torch.cuda.set_sync_debug_mode("error")``).

Variants, side by side in one run, per env count: ``eager`` (the torch physics step) and
``warp`` (the fused Warp kernel, ``compile="warp"``). Medians of ``--repeats`` timings of
``--steps`` steps after a warm-up; peak GPU memory per env from torch's allocator.

    python3 benchmarks/env_loop.py --device cuda --out benchmarks/results/env_loop-cuda.json
    .venv/bin/python benchmarks/env_loop.py --device cpu --ns 1024 --variants eager,warp

Writes JSON and prints a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import torch
from _timing import machine
from _timing import measure as timed

HERE = Path(__file__).resolve().parent
VARIANTS = ("eager", "warp")


def _policy(obs_dim: int, act_dim: int, device: str) -> torch.nn.Module:
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(obs_dim, 64),
        torch.nn.Tanh(),
        torch.nn.Linear(64, 64),
        torch.nn.Tanh(),
        torch.nn.Linear(64, act_dim),
        torch.nn.Tanh(),
    )
    return net.to(device)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure(variant: str, n: int, device: str, steps: int, repeats: int) -> dict:
    from volary.envs import make_env

    compile_ = "eager" if variant == "eager" else "warp"
    env = make_env("hover", n_envs=n, seed=0, device=device, compile=compile_)
    policy = _policy(env.single_observation_space.shape[0], env.act_dim, device)
    obs, _ = env.reset(seed=0)
    state = {"obs": obs}

    @torch.no_grad()
    def step() -> None:
        o, _, _, _, _ = env.step(policy(state["obs"]))
        state["obs"].copy_(o)

    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    for _ in range(3):  # warm-up: kernel builds, allocator
        step()
    _sync(device)
    syncs = "not checked (CPU)"
    if device.startswith("cuda"):
        torch.cuda.set_sync_debug_mode("error")
        try:
            step()
            syncs = "0 (set_sync_debug_mode('error') raised nothing)"
        except RuntimeError as e:
            syncs = f"synchronizes: {e}"
        finally:
            torch.cuda.set_sync_debug_mode("default")

    def block() -> None:  # one timed sample: ``steps`` steps, the device drained either side
        _sync(device)
        for _ in range(steps):
            step()
        _sync(device)

    timing = timed(block, warmup=0, repeats=repeats, label=f"{variant} N={n} on {device}")
    med = timing.median
    row = {
        "variant": variant,
        "n_envs": n,
        "device": device,
        "steps": steps,
        "repeats": repeats,
        "median_s": med,
        "env_steps_per_s": n * steps / med,
        "block_s": timing.to_json(),
        "host_syncs_per_step": syncs,
    }
    if device.startswith("cuda"):
        peak = torch.cuda.max_memory_allocated()
        row.update(gpu_peak_bytes=peak, gpu_bytes_per_env=peak / n)
    return row


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console
    from rich.table import Table

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--ns", default="65536,1048576,4194304")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "env_loop-cuda.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    machine_info = machine()
    rows = []
    variants = args.variants.split(",")
    for n in (int(x) for x in args.ns.split(",")):
        for v in variants:  # the variants interleaved per N
            try:
                r = measure(v, n, args.device, args.steps, args.repeats)
            except Exception as e:  # noqa: BLE001 - one failed case is reported, the rest run
                r = {"variant": v, "n_envs": n, "error": f"{type(e).__name__}: {e}"}
            rows.append(r)
            print(json.dumps(r), flush=True)
            if args.device.startswith("cuda"):
                torch.cuda.empty_cache()
    table = Table(title=f"hover env + MLP policy on {args.device}, env-steps/s (median)")
    table.add_column("envs", justify="right")
    for v in variants:
        table.add_column(v, justify="right")
    by = {(r["n_envs"], r["variant"]): r for r in rows}
    for n in sorted({r["n_envs"] for r in rows}):
        cells = []
        for v in variants:
            r = by.get((n, v), {})
            cells.append(f"{r['env_steps_per_s'] / 1e6:.1f}M" if "env_steps_per_s" in r else "err")
        table.add_row(str(n), *cells)
    Console(width=140).print(table)
    doc = {
        "benchmark": "env_loop",
        "command": "python3 " + " ".join(sys.argv),
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": machine_info,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
