"""The ray sensors' per-call rotation (``volary.sensors.rays.rotate_rows``) against
``torch.matmul``, the product it replaces on the CPU, side by side in one run.

Each case rotates a 64 x 64 camera's rays (or a 270 x 480 one's) by N body rotations, as
``RayBundle.world`` does every frame. The two are interleaved, ``--rounds`` times; each round
takes the median of calls lasting about ``--repeat-s``. Reported: the median over rounds (us per
call) and the ratio. torch runs on one thread (``--threads``).

    .venv/bin/python benchmarks/ray_rotation.py      # -> results/ray_rotation-cpu.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch
from _timing import cpu_model, machine, summarize
from _timing import measure as timed

HERE = Path(__file__).resolve().parent
CASES = ((1, 4096), (8, 4096), (64, 4096), (256, 4096), (1, 129_600), (8, 129_600))


def _median_call_us(f: Any, repeat_s: float) -> float:
    """One warm-up call, then calls for about ``repeat_s`` (at least 5): their median in us."""
    return timed(f, warmup=1, repeats=5, min_time=repeat_s, quiet=True).median * 1e6


def measure(n: int, r: int, dtype: torch.dtype, rounds: int, repeat_s: float) -> dict:
    from volary.math.quaternion import quat_normalize, quat_to_rotmat
    from volary.sensors.rays import rotate_rows

    g = torch.Generator().manual_seed(0)
    dirs = torch.nn.functional.normalize(torch.randn(r, 3, generator=g, dtype=dtype), dim=-1)
    rot = quat_to_rotmat(quat_normalize(torch.randn(n, 4, generator=g, dtype=dtype)))
    m = rot.transpose(-1, -2)  # as RayBundle.world: d_W = d_B R_WB^T
    peers = {
        "torch.matmul": lambda: torch.matmul(dirs, m),
        "rotate_rows": lambda: rotate_rows(dirs, m),
    }
    us: dict[str, list[float]] = {k: [] for k in peers}
    for _ in range(rounds):
        for k, f in peers.items():
            us[k].append(_median_call_us(f, repeat_s))
    label = f"N={n} rays={r} {str(dtype).removeprefix('torch.')}"
    over_rounds = {k: summarize(v, label=f"{k} {label}") for k, v in us.items()}
    med = {k: t.median for k, t in over_rounds.items()}
    speedup = med["torch.matmul"] / med["rotate_rows"]
    return {"n": n, "rays": r, "dtype": str(dtype).removeprefix("torch."),
            "us": med, "rounds_us": us, "speedup": speedup,
            "over_rounds": {k: t.to_json(unit="us") for k, t in over_rounds.items()}}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat-s", type=float, default=0.2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "ray_rotation-cpu.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    host = machine()
    rows = [measure(n, r, dt, args.rounds, args.repeat_s)
            for dt in (torch.float32, torch.float64) for n, r in CASES]  # fmt: skip
    print(f"\n{'dtype':8s} {'N':>4s} {'rays':>7s} {'torch.matmul us':>16s} {'rotate_rows us':>15s} "
          f"{'ratio':>6s}")  # fmt: skip
    for x in rows:
        print(f"{x['dtype']:8s} {x['n']:>4d} {x['rays']:>7d} {x['us']['torch.matmul']:>16.0f} "
              f"{x['us']['rotate_rows']:>15.0f} {x['speedup']:>5.1f}x")  # fmt: skip
    meta = {"machine": cpu_model(), "python": platform.python_version(),
            "torch": torch.__version__, "threads": args.threads,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "host": host}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
