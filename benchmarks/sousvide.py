"""SOUS VIDE expert data generation rate (Algorithm 1, volary.studies.sousvide.generate).

Run: ``.venv/bin/python benchmarks/sousvide.py`` (``--device cuda`` on a GPU; ``--quick`` for a
smoke run). Writes ``benchmarks/results/sousvide-<device>.json`` (or ``--out``) and prints a table.

Measured: one fresh dataset per case in a temporary directory, ``generate`` with the default
randomization (theta and delta_x of ``GenerateConfig``), 64 x 64 images, the batched iLQR MPC
expert (2 iterations per step) and the splat renderer's ``auto`` backend (numba on the CPU).
Samples/s counts valid rows (control steps with an image, a state and an expert action) per
wall second of the whole call, file writes included; the split (render, MPC, physics +
collision checks, write) comes from the generator's own timers. A warm-up call first compiles
the numba kernels. Torch and numba threads are set explicitly (``--threads``, default 1: the
development machine is a shared 2-core VM); the load average is recorded at start and end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
CASES = [(16, 20), (64, 20)]  # (envs, units) per case; steps per unit from --t-smp


def run_case(envs: int, units: int, t_smp: float, size: int, device: str) -> dict:
    from volary.studies.sousvide.generate import GenerateConfig, generate
    from volary.studies.sousvide.scene import make_scene

    n_des = max(60, -(-units // 10))  # enough units for the case
    cfg = GenerateConfig(n_des=n_des, n_smp=10, t_smp=t_smp, envs=envs, width=size, height=size,
                         device=device)  # fmt: skip
    scene = make_scene(width=size, height=size)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        s = generate(Path(d) / "bench.h5", cfg, scene=scene, max_units=max(units, envs))
        wall = time.perf_counter() - t0
    return {
        "envs": envs,
        "units": s.units_flown,
        "steps_per_unit": cfg.steps,
        "image_px": size,
        "valid_rows": s.valid_rows,
        "rows": s.rows,
        "wall_s": wall,
        "samples_per_s": s.valid_rows / wall,
        "split_s": s.timings,
        "per_sample_ms": {k: 1e3 * v / max(s.rows, 1) for k, v in s.timings.items()},
        "expert_tracking_error_m": s.tracking_error,
        "early_ends": s.crashed_units,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--threads", type=int, default=1, help="torch and numba threads")
    ap.add_argument("--t-smp", type=float, default=2.0, help="seconds per rollout")
    ap.add_argument("--size", type=int, default=64, help="image px (square)")
    ap.add_argument("--quick", action="store_true", help="one small case")
    ap.add_argument(
        "--cases",
        default=None,
        help="ENVSxUNITS,... (default 16x20,64x20; e.g. 256x256,1024x1024 on a GPU)",
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    import numba

    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    sys.path.insert(0, str(HERE))
    from _timing import cpu_model, machine

    out = args.out or HERE / "results" / f"sousvide-{args.device}.json"
    load0 = os.getloadavg()  # the dev machine is shared: say how busy it was
    host = machine()
    run_case(2, 2, 0.2, args.size, args.device)  # warm-up: numba compile, first allocations
    cases = [(8, 8)] if args.quick else CASES
    if args.cases:
        try:
            cases = [tuple(int(v) for v in c.split("x")) for c in args.cases.split(",")]
            assert all(len(c) == 2 and min(c) > 0 for c in cases)
        except (ValueError, AssertionError):
            raise SystemExit(f"--cases: expected ENVSxUNITS,... got {args.cases!r}") from None
    rows = [run_case(e, u, args.t_smp, args.size, args.device) for e, u in cases]
    doc = {
        "benchmark": "sousvide_generate",
        "device": args.device,
        "cpu": cpu_model(),
        "cuda": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "numba_threads": numba.get_num_threads(),
        "load_average_1_5_15_min": {"start": load0, "end": os.getloadavg()},
        "host": host,
        "cases": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(
        "| envs | units x steps | samples/s | render ms | mpc ms | physics ms | write ms | err m |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        p = r["per_sample_ms"]
        print(f"| {r['envs']} | {r['units']} x {r['steps_per_unit']} | {r['samples_per_s']:.1f} | "
              f"{p['render']:.2f} | {p['mpc']:.2f} | {p['physics']:.2f} | {p['write']:.2f} | "
              f"{r['expert_tracking_error_m']:.3f} |")  # fmt: skip
    print(f"(per-sample ms: wall time of the stage / rows; load {load0} -> {os.getloadavg()})")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
