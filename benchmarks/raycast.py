"""Ray-casting throughput (rays/s) of every available backend on the forest scenario.

Run: ``.venv/bin/python benchmarks/raycast.py`` (writes ``benchmarks/results/raycast-cpu.json``,
or ``raycast-cuda.json`` when CUDA is present, and prints a table).

Every env casts the same 64 x 64 depth frame: a pinhole fan with a 90 deg horizontal field of
view from the scenario's start pose (yaw ``start_yaw``), max range 20 m, the floor on. The timed
call is the whole public ``cast`` (input checks, torch <-> numpy conversion, normals and ids
post-processing), outputs on the caster's device. Median and IQR of repeats after one warm-up
call; torch threads are set explicitly. For Embree, the CPU time of the process during the
timed calls gives rays per CPU-second (rays/s per core), and the bare ``EmbreeScene.run`` on the
same rays (no conversion or post-processing) shows the wrapper's overhead.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
NS = (1, 64, 256)
W = H = 64
FOV_DEG = 90.0
MAX_RANGE = 20.0
TORCH_THREADS = 2  # default of --torch-threads


def frame_rays(spec, n: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, W*H, 3) origins and unit directions of a forward pinhole camera at the start pose."""
    f = (W / 2) / math.tan(math.radians(FOV_DEG) / 2)
    v, u = torch.meshgrid(torch.arange(H) + 0.5, torch.arange(W) + 0.5, indexing="ij")
    right, down = (u - W / 2) / f, (v - H / 2) / f  # camera x right, y down, z forward
    c, s = math.cos(spec.start_yaw), math.sin(spec.start_yaw)
    fwd, left = torch.tensor([c, s, 0.0]), torch.tensor([-s, c, 0.0])
    d = fwd - right[..., None] * left - down[..., None] * torch.tensor([0.0, 0.0, 1.0])
    d = torch.nn.functional.normalize(d.reshape(-1, 3), dim=-1)
    o = torch.tensor(spec.start, dtype=torch.float32).expand_as(d)
    return (
        o.expand(n, -1, -1).contiguous().to(device),
        d.expand(n, -1, -1).contiguous().to(device),
    )


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_calls(fn, device: str, budget_s: float, label: str, min_repeats: int = 3,
               max_repeats: int = 9):  # fmt: skip
    """Warm up once, then repeat until ``budget_s`` (min_repeats to max_repeats calls, each
    synchronized): the wall and CPU seconds per call (``_timing.Timing``)."""
    from _timing import measure

    def call() -> None:
        fn()
        _sync(device)

    return measure(call, warmup=1, repeats=min_repeats, min_time=budget_s,
                   max_repeats=max_repeats, cpu_clock=time.process_time, label=label)  # fmt: skip


def _stats(rays: int, timing) -> dict:
    med = timing.median
    return {
        "rays_per_s": rays / med,
        "best_rays_per_s": rays / timing.min,
        "frames_per_s": rays / med / (W * H),
        "median_s": med,
        "iqr_s": timing.iqr,
        "repeats": timing.n,
        "cast_s": timing.to_json(),
    }


def bench_case(backend: str, device: str, n: int, spec, budget_s: float) -> dict:
    from volary.sensors.raycast import make_raycaster

    t0 = time.perf_counter()
    caster = make_raycaster(spec, n, backend=backend, device=device)
    o, d = frame_rays(spec, n, device)
    caster.cast(o, d, MAX_RANGE)  # builds (and for warp compiles) before timing
    setup = time.perf_counter() - t0
    label = f"{backend} {device} N={n}"
    timing = time_calls(lambda: caster.cast(o, d, MAX_RANGE), device, budget_s, label)
    out = _stats(n * W * H, timing) | {"setup_s": setup}
    if backend == "embree":
        out["rays_per_cpu_s"] = n * W * H / statistics.median(timing.cpu_samples)
        scene = caster._groups[0][0]  # type: ignore[attr-defined]
        on, dn = o.reshape(-1, 3).numpy(), d.reshape(-1, 3).numpy()
        raw = time_calls(lambda: scene.run(on, dn, dists=MAX_RANGE, output=1), device, budget_s,
                         f"{label} bare run")  # fmt: skip
        out["bare_run_rays_per_s"] = n * W * H / raw.median
        out["bare_run_s"] = raw.to_json()
    return out


def cases() -> list[tuple[str, str, str]]:
    import importlib.util

    out = [("torch", "torch", "cpu")]
    if importlib.util.find_spec("embreex"):
        out.append(("embree", "embree", "cpu"))
    if importlib.util.find_spec("warp"):
        out.append(("warp-cpu", "warp", "cpu"))
    if torch.cuda.is_available():
        out.append(("torch-cuda", "torch", "cuda"))
        if importlib.util.find_spec("warp"):
            out.append(("warp-cuda", "warp", "cuda"))
    return out


def machine() -> dict:
    from _timing import machine as host

    info = {
        **host(),
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }
    for mod in ("embreex", "warp", "numpy"):
        try:
            info[mod] = __import__(mod).__version__
        except (ImportError, AttributeError):
            info[mod] = None
    return info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--budget-s", type=float, default=1.0, help="timing budget per case")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--torch-threads", type=int, default=TORCH_THREADS)
    args = ap.parse_args()
    torch.set_num_threads(args.torch_threads)
    from volary.worlds import make_scenario

    spec = make_scenario("forest", args.seed)
    results: dict[str, dict] = {}
    load0 = os.getloadavg()  # the dev machine is shared: say how busy it was
    machine_info = machine()
    for label, backend, device in cases():
        for n in NS:
            r = bench_case(backend, device, n, spec, args.budget_s)
            results[f"{label}/N={n}"] = r
            extra = (
                f"  per CPU-s {r['rays_per_cpu_s'] / 1e6:.2f} M" if "rays_per_cpu_s" in r else ""
            )
            print(
                f"{label:>10} N={n:<4} median {r['rays_per_s'] / 1e6:6.2f} M rays/s "
                f"({r['frames_per_s']:7.1f} frames/s), best {r['best_rays_per_s'] / 1e6:6.2f} M"
                f"{extra}",
                flush=True,
            )
    doc = {
        "benchmark": "raycast",
        "scenario": f"forest seed {args.seed}: {len(spec.obstacles)} trunks, floor on",
        "frame": f"{W}x{H} pinhole, {FOV_DEG:.0f} deg horizontal FOV, start pose, max range "
        f"{MAX_RANGE} m, same frame in every env",
        "segments": 64,
        "machine": machine_info,
        "load_average_1_5_15_min": {"start": load0, "end": os.getloadavg()},
        "results": results,
    }
    kind = "cuda" if torch.cuda.is_available() else "cpu"
    out = args.out or HERE / "results" / f"raycast-{kind}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
