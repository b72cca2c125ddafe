"""Gaussian-splat rendering throughput (frames/s) per backend, resolution, env count and scene size.

Run: ``.venv/bin/python benchmarks/splat.py`` (CPU, numba path) or
``python benchmarks/splat.py --device cuda --backend all`` (the torch pair path and, when it
imports, gsplat); writes ``benchmarks/results/splat-<device>.json`` and prints a table.

Scene: the forest scenario (seed ``--seed``) dressed by :func:`volary.sensors.splat.synth.
synthesize` with ``max_gaussians`` = 100k and 1M from fine spacings (0.02 m, floor 0.05 m), so
the budget sets the count (about 0.98 of it; the JSON has the exact one); floor on. Frames:
square, 90 deg horizontal FOV, the forward camera at the start pose, env i moved 5 i / N m
along x with a seeded yaw jitter of +-0.2 rad (every env renders a different view). The timed
call is the public ``render(...)`` (input checks, projection, sorting, compositing, RGB +
expected depth + alpha, outputs on the device); frames/s = N / median call time. Warm-up
(numba compile, per-scene table, CUDA init) is excluded. ``--max-case-s`` caps each case: when
one call of N envs would take longer (estimated from a 1-env call) only as many envs as fit
are rendered per call and the row says ``limited``; a case whose single frame exceeds the cap
is ``skipped``.
Torch (and numba) threads are set explicitly (``--threads``, default 1: the dev machine is
shared; ``--threads 2`` writes ``splat-cpu-2threads.json``); on the CPU the CPU time of the
process (all threads) gives frames per CPU-second too, a figure less sensitive to other
processes than wall time. Each case is timed ``--min-repeats`` (3) to 7 times.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
SIZES = (64, 96, 224)
NS = (1, 16, 256)
GAUSSIANS = (100_000, 1_000_000)
FOV_DEG = 90.0


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def poses(spec, n: int, seed: int, device: str) -> torch.Tensor:
    """T_WC (n, 4, 4) of the forward camera at the start pose, spread along x with yaw jitter."""
    from volary.math.quaternion import quat_from_euler
    from volary.sensors.splat import camera_poses

    gen = torch.Generator().manual_seed(seed)
    pos = torch.tensor(spec.start, dtype=torch.float32).repeat(n, 1)
    pos[:, 0] += torch.arange(n, dtype=torch.float32) * (5.0 / max(n, 1))
    yaw = spec.start_yaw + 0.4 * (torch.rand(n, generator=gen) - 0.5)
    q = quat_from_euler(torch.zeros(n), torch.zeros(n), yaw)
    return camera_poses(pos, q).to(device)


def intrinsics(size: int) -> tuple[float, float, float, float]:
    f = (size / 2) / math.tan(math.radians(FOV_DEG) / 2)
    return (f, f, size / 2, size / 2)


def time_calls(fn, device: str, budget_s: float, label: str, max_repeats: int = 7,
               min_repeats: int = 1):  # fmt: skip
    """Repeat (no warm-up here) while another call fits in ``budget_s`` (at least
    ``min_repeats`` times, at most ``max_repeats``): wall and CPU seconds (``_timing.Timing``)."""
    from _timing import measure

    def call() -> None:
        fn()
        _sync(device)

    return measure(call, warmup=0, repeats=min_repeats, max_time=budget_s,
                   max_repeats=max_repeats, cpu_clock=time.process_time, label=label)  # fmt: skip


def bench_case(splats, spec, backend: str, device: str, size: int, n: int, args) -> dict:
    from volary.sensors.splat import render

    k = intrinsics(size)
    t_all = poses(spec, n, args.seed, device)

    def call(m: int):
        return render(splats, k, t_all[:m], size, size, backend=backend)

    call(1)  # warm-up: compile, per-scene table, CUDA kernels
    _sync(device)
    t0 = time.perf_counter()
    call(1)
    _sync(device)
    one = time.perf_counter() - t0
    if one > args.max_case_s:
        return {"status": "skipped", "reason": f"one frame took {one:.1f} s > --max-case-s"}
    m = n
    if one * n > args.max_case_s / 2:  # leave room for a second repeat
        m = max(1, int(args.max_case_s / 2 / one))
    timing = time_calls(lambda: call(m), device, min(args.budget_s, args.max_case_s),
                        f"{backend} {size}px N={n}", min_repeats=args.min_repeats)  # fmt: skip
    times, cpu, med = timing.samples, timing.cpu_samples, timing.median
    out = {
        "status": "ok" if m == n else "limited",
        "envs_per_call": m,
        "frames_per_s": m / med,
        "best_frames_per_s": m / min(times),
        "median_s": med,
        "iqr_s": timing.iqr,
        "repeats": len(times),
        "call_s": timing.to_json(),
    }
    if device == "cpu":
        out["frames_per_cpu_s"] = m / statistics.median(cpu)
    return out


def backends(device: str, choice: str) -> list[str]:
    """Render backends to time: torch = the sparse-pair torch path (any device), reference =
    the every-pixel-against-every-Gaussian torch reference, fast = numba (CPU), gsplat (CUDA)."""
    have_gsplat = device.startswith("cuda") and importlib.util.find_spec("gsplat") is not None
    if choice == "all":
        out = ["fast", "torch"] if device == "cpu" else ["torch"]
        return out + (["gsplat"] if have_gsplat else [])
    if choice == "gsplat" and not have_gsplat:
        raise SystemExit("--backend gsplat: needs --device cuda and an importable gsplat")
    if choice == "fast" and device != "cpu":
        raise SystemExit("--backend fast: CPU only (numba); use torch or gsplat on CUDA")
    if choice == "auto":
        return ["fast"] if device == "cpu" else (["gsplat"] if have_gsplat else ["torch"])
    return [choice]


def machine(device: str) -> dict:
    from _timing import machine as host

    info = {
        **host(),
        "cuda": torch.cuda.get_device_name() if device.startswith("cuda") else None,
    }
    for mod in ("numba", "numpy", "gsplat"):
        try:
            info[mod] = __import__(mod).__version__
        except (ImportError, AttributeError):
            info[mod] = None
    return info


def table(results: dict, sizes, ns) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="splat rendering, frames/s (median; * limited, - skipped)")
    t.add_column("backend")
    t.add_column("Gaussians", justify="right")
    t.add_column("px", justify="right")
    for n in ns:
        t.add_column(f"N={n}", justify="right")
    rows: dict[tuple[str, str, int], dict[int, str]] = {}
    for key, r in results.items():
        be, g, px, n = key.split("/")
        cell = "-" if r["status"] == "skipped" else f"{r['frames_per_s']:.1f}"
        cell += "*" if r["status"] == "limited" else ""
        rows.setdefault((be, g, int(px)), {})[int(n[2:])] = cell
    for (be, g, px), cells in rows.items():
        t.add_row(be, g, f"{px}x{px}", *(cells.get(n, "") for n in ns))
    Console().print(t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", help="cpu or cuda[:i]")
    ap.add_argument(
        "--backend",
        default="auto",
        choices=("auto", "all", "fast", "torch", "reference", "gsplat"),
        help="auto: fast on CPU, gsplat (else torch) on CUDA; all: every one available but "
        "the slow reference",
    )
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--envs", type=int, nargs="+", default=list(NS))
    ap.add_argument("--gaussians", type=int, nargs="+", default=list(GAUSSIANS))
    ap.add_argument("--max-case-s", type=float, default=20.0, help="cap per case (s)")
    ap.add_argument("--budget-s", type=float, default=3.0, help="timing budget per case (s)")
    ap.add_argument(
        "--min-repeats", type=int, default=3, help="timed calls per case at least (median)"
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (the fast path splits envs, or rows when N < threads, over them); "
        "the default output name gets -<T>threads when T > 1",
    )
    ap.add_argument("--scenario", default="forest")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    import numba

    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("--device cuda: CUDA is not available")
    from volary.sensors.splat.synth import synthesize_scenario

    load0 = os.getloadavg()  # the dev machine is shared: say how busy it was
    machine_info = machine(args.device)
    results: dict[str, dict] = {}
    scenes = {}
    for g in args.gaussians:
        t0 = time.perf_counter()
        spec, splats = synthesize_scenario(
            args.scenario, args.seed, max_gaussians=g, spacing=0.02, floor_spacing=0.05
        )  # fine spacings: the budget, not the spacing, sets the count (~0.98 g)
        scenes[g] = {"count": splats.count, "synth_s": time.perf_counter() - t0}
        splats = splats.to(args.device)
        label = f"{g // 1000}k" if g < 1_000_000 else f"{g / 1e6:g}M"
        for be in backends(args.device, args.backend):
            for size in args.sizes:
                for n in args.envs:
                    r = bench_case(splats, spec, be, args.device, size, n, args)
                    results[f"{be}/{label}/{size}/N={n}"] = r
                    msg = r.get("reason") or (
                        f"{r['frames_per_s']:8.1f} frames/s ({r['envs_per_call']} envs/call, "
                        f"{r['repeats']} repeats)"
                    )
                    print(
                        f"{be:>9} {label:>5} {size:>3}px N={n:<4} {r['status']:>7} {msg}",
                        flush=True,
                    )
        del splats
    doc = {
        "benchmark": "splat",
        "scenario": f"{args.scenario} seed {args.seed}, synthesized, floor on",
        "scenes": scenes,
        "frame": f"square, {FOV_DEG:.0f} deg horizontal FOV, forward camera at the start pose, "
        "env i shifted 5 i / N m along x, yaw jitter +-0.2 rad (seeded)",
        "timed_call": "volary.sensors.splat.render (RGB + expected depth + alpha)",
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "machine": machine_info,
        "load_average_1_5_15_min": {"start": load0, "end": os.getloadavg()},
        "results": results,
    }
    kind = "cuda" if args.device.startswith("cuda") else "cpu"
    suffix = f"-{args.threads}threads" if args.threads > 1 else ""
    out = args.out or HERE / "results" / f"splat-{kind}{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    table(results, args.sizes, args.envs)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
