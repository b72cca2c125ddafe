"""Depth-camera throughput: frames/s of volary's ray-cast camera in the forest scenario.

For each backend (torch reference, embree, warp on CPU; torch/warp on CUDA with --device cuda),
camera (64x64 Aerial-Gym-like, 270x480 D455-like, depth only) and env count, the camera renders
from the scenario's start pose (all envs the same scene and pose; about half the rays hit).
Reported: median frames/s over repeats (IQR), the raw ``caster.cast``
rate of the same rays (so the sensor's own overhead shows), and rays/s per core (divided by all
the machine's cores: Embree's TBB pool uses them whatever torch's setting). torch runs with
``torch.set_num_threads(--threads)``; a configuration whose estimated run time exceeds
``--max-case-s`` (from the previous, smaller one) is skipped and listed as skipped.

    .venv/bin/python benchmarks/sensors.py --threads 2 1 --out benchmarks/results/sensors-cpu.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import time
from pathlib import Path

import torch

CAMERAS = {"64x64": "aerial_gym_64", "270x480": "d455"}


def _machine() -> dict:
    from _timing import machine

    return {
        **machine(),
        "platform": platform.platform(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _time(fn, device: str, repeats: int, min_s: float, label: str):
    """Seconds per call (``_timing.Timing``): ``repeats`` samples, each looping ``fn`` (each
    call synchronized) for at least ``min_s``."""
    from _timing import measure

    def call() -> None:
        fn()
        _sync(device)

    return measure(call, warmup=0, repeats=repeats, min_sample_time=min_s, label=label)


def measure(backend: str, camera: str, n: int, device: str, args) -> dict:
    from volary.math.quaternion import quat_from_euler
    from volary.sensors import DepthCamera, camera_config
    from volary.sensors.raycast import make_raycaster
    from volary.worlds import make_scenario

    spec = make_scenario("forest", 0)
    t0 = time.perf_counter()
    caster = make_raycaster(spec, n, backend=backend, device=device)
    cfg = camera_config(CAMERAS[camera], segmentation=False, normals=False, noise_quadratic=0.0)
    cam = DepthCamera(cfg, caster)
    pos = torch.tensor(spec.start, device=device).expand(n, 3).contiguous()
    z = torch.zeros(n, device=device)
    quat = quat_from_euler(z, z, z + spec.start_yaw)
    t1 = time.perf_counter()
    cam(pos, quat)  # warm-up (Embree scene build / Warp module load)
    _sync(device)
    setup_s, call_s = time.perf_counter() - t0, time.perf_counter() - t1
    repeats = args.repeats if call_s * (2 * args.repeats + 2) < args.max_case_s else 3
    if call_s * (2 * repeats + 2) > args.max_case_s:
        return {
            "backend": backend,
            "device": device,
            "camera": camera,
            "n_envs": n,
            "threads": args.n_threads,
            "skipped": True,
            "warmup_call_s": call_s,
        }
    origin, dirs, _ = cam.bundle.world(pos, quat)
    origins = origin[:, None, :].expand_as(dirs)
    label = f"{backend} {camera} N={n} threads={args.n_threads}"
    cam_timing = _time(lambda: cam(pos, quat), device, repeats, args.repeat_s, label)
    raw_timing = _time(lambda: caster.cast(origins, dirs, cfg.max_range), device, repeats,
                       args.repeat_s, f"{label} raw cast")  # fmt: skip
    cam_t, raw_t = cam_timing.samples, raw_timing.samples
    rays = cfg.width * cfg.height
    fps = [n / t for t in cam_t]
    med = statistics.median(fps)
    q = statistics.quantiles(fps, n=4) if len(fps) > 1 else [med, med, med]
    raw = statistics.median(n / t for t in raw_t)
    hit = float(
        torch.isfinite(caster.cast(origins, dirs, cfg.max_range).distance[0]).float().mean()
    )
    return {
        "backend": backend,
        "device": device,
        "camera": camera,
        "n_envs": n,
        "frames_per_s": med,
        "iqr": q[2] - q[0],
        "raw_cast_frames_per_s": raw,
        "sensor_overhead": raw / med - 1.0,
        "rays_per_s": med * rays,
        "threads": args.n_threads,
        # Embree (TBB) and Warp use every core whatever torch's thread count: divide by all
        "rays_per_s_per_core": med * rays / ((os.cpu_count() or 1) if device == "cpu" else 1),
        "s_per_call": statistics.median(cam_t),
        "repeats": len(cam_t),
        "call_s": cam_timing.to_json(),
        "raw_cast_s": raw_timing.to_json(),
        "setup_s": setup_s,
        "hit_fraction": hit,
        "rays_per_frame": rays,
    }


def _available(device: str) -> list[str]:
    out = ["torch"]
    try:
        import embreex  # noqa: F401

        if device == "cpu":
            out.append("embree")
    except ImportError:
        pass
    try:
        import warp  # noqa: F401

        out.append("warp")
    except ImportError:
        pass
    return out


def _table(rows: list[dict], skipped: list[dict], envs: list[int]) -> None:
    print("\ndepth frames/s (median; raw cast in brackets), forest scenario, start pose")
    print("| backend | camera | " + " | ".join(f"N={n}" for n in envs) + " |")
    print("|---|---|" + "---:|" * len(envs))
    keys = sorted({(r["backend"], r["camera"]) for r in rows + skipped})
    for b, c in keys:
        cells = []
        for n in envs:
            r = next(
                (r for r in rows if (r["backend"], r["camera"], r["n_envs"]) == (b, c, n)), None
            )
            cells.append(
                f"{r['frames_per_s']:.0f} ({r['raw_cast_frames_per_s']:.0f})" if r else "skipped"
            )
        print(f"| {b} | {c} | " + " | ".join(cells) + " |")
    best = max(rows, key=lambda r: r["rays_per_s_per_core"]) if rows else None
    if best:
        print(
            f"\nbest: {best['rays_per_s_per_core'] / 1e6:.2f} M rays/s per core "
            f"({best['backend']}, {best['camera']}, N={best['n_envs']})"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/sensors-cpu.json"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--backends", nargs="*", default=None)
    ap.add_argument("--cameras", nargs="*", default=list(CAMERAS))
    ap.add_argument("--envs", nargs="*", type=int, default=[1, 64, 256, 1024])
    ap.add_argument("--threads", type=int, nargs="*", default=[2])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--repeat-s", type=float, default=0.3)
    ap.add_argument("--max-case-s", type=float, default=60.0)
    args = ap.parse_args()
    backends = args.backends or _available(args.device)
    machine_info = _machine()
    rows: list[dict] = []
    skipped: list[dict] = []
    for threads in args.threads:
        torch.set_num_threads(threads)
        args.n_threads = threads
        _run(backends, args, rows, skipped)
    for threads in args.threads:
        print(f"\n### torch threads = {threads}")
        _table(
            [r for r in rows if r["threads"] == threads],
            [r for r in skipped if r["threads"] == threads],
            args.envs,
        )
    info = {
        "machine": machine_info,
        "threads": args.threads,
        "scenario": "forest seed 0",
        "pose": "scenario start pose, all envs",
        "repeats": args.repeats,
        "repeat_s": args.repeat_s,
        "results": rows,
        "skipped": skipped,
        "target": "64x64, 256 envs, >= 2000 frames/s on the 2-core CPU",
        "anchor": "Aerial Gym Table II: 26023 fps (64x64) / 2750 fps (270x480), "
        "2048 envs, RTX 3090",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(info, indent=2, default=lambda x: None if math.isnan(x) else x))
    print(f"wrote {args.out}")


def _run(backends: list[str], args, rows: list[dict], skipped: list[dict]) -> None:
    for backend in backends:
        for camera in args.cameras:
            per_env_s = 0.0  # seconds per env-frame seen at the previous N
            for n in args.envs:
                est = per_env_s * n * 8  # warm-up, hit count, 3 camera + 3 raw repeats
                if per_env_s and est > args.max_case_s:
                    skipped.append(
                        {
                            "backend": backend,
                            "camera": camera,
                            "n_envs": n,
                            "threads": args.n_threads,
                            "estimated_s": est,
                        }
                    )
                    print(f"skip {backend} {camera} N={n}: estimated {est:.0f} s", flush=True)
                    continue
                row = measure(backend, camera, n, args.device, args)
                if row.get("skipped"):
                    skipped.append(row)
                    print(
                        f"skip {backend} {camera} N={n}: one call took "
                        f"{row['warmup_call_s']:.1f} s",
                        flush=True,
                    )
                    per_env_s = row["warmup_call_s"] / n
                    continue
                per_env_s = row["s_per_call"] / n
                rows.append(row)
                print(
                    json.dumps(
                        {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}
                    ),
                    flush=True,
                )


if __name__ == "__main__":
    main()
