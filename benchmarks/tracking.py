"""Tracking acceptance table (a result table, not a timing benchmark): every catalogue quad flies
the 3 m figure-eight at 2 m/s average speed (1.5 m height, yaw 0) with the Mellinger mode and
trajectory feed-forward, all in one mixed batch; RMS and peak position error over one lap after a
one-lap lead-in (protocol: ``volary.bench.tracking``). Also flown: the same without the drag
feed-forward (plain trajectory acceleration and jerk).

Run: ``.venv/bin/python benchmarks/tracking.py`` -> ``benchmarks/results/tracking.json`` and
``tracking.md`` beside it (or ``--out DIR``).
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

import torch

from volary.bench.tracking import TRACKING_REFERENCE, track_figure_eight
from volary.dynamics import VehicleParams
from volary.platforms import get, names

HERE = Path(__file__).resolve().parent
LIMIT_M = 0.05


def _rows(quads: list[str]) -> list[dict]:
    ff = track_figure_eight(quads)
    plain = track_figure_eight(quads, drag_feedforward=False)
    p = VehicleParams.from_airframes([get(q) for q in quads], len(quads))
    tau = torch.maximum(p.tau_up, p.tau_down).amax(-1)
    return [
        {
            "platform": q,
            "mass_kg": round(float(p.mass[i]), 3),
            "motor_tau_ms": round(float(tau[i]) * 1e3, 1),
            "rms_cm": round(float(ff.rms[i]) * 100, 2),
            "peak_cm": round(float(ff.peak[i]) * 100, 2),
            "rms_no_drag_ff_cm": round(float(plain.rms[i]) * 100, 2),
            "pass": bool(ff.rms[i] < LIMIT_M) and not bool(ff.crashed[i]),
        }
        for i, q in enumerate(quads)
    ]


def _markdown(doc: dict) -> str:
    lines = [
        "# Figure-eight tracking acceptance",
        "",
        doc["protocol"],
        "",
        "| platform | mass [kg] | motor tau [ms] | RMS [cm] | peak [cm] | RMS, no drag ff [cm] "
        "| < 5 cm |",
        "|---|---:|---:|---:|---:|---:|:-:|",
    ]
    for r in doc["rows"]:
        lines.append(
            f"| {r['platform']} | {r['mass_kg']} | {r['motor_tau_ms']} | {r['rms_cm']} | "
            f"{r['peak_cm']} | {r['rms_no_drag_ff_cm']} | {'yes' if r['pass'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    torch.set_num_threads(1)
    ref = TRACKING_REFERENCE
    quads = [n for n in names() if get(n).n_rotors == 4]
    rows = _rows(quads)
    doc = {
        "protocol": (
            f"1:2 Lissajous figure-eight, {ref.size} m x {ref.size / 2} m at {ref.height} m, "
            f"average speed {ref.speed} m/s (lap {ref.path_length:.3f} m, {ref.period:.3f} s), "
            "yaw 0; mellinger mode with drag-aware feed-forward, default gains; 960 Hz RK4 "
            "physics, 240 Hz control, deterministic; start on the reference at the crossing "
            "point with its velocity; one lap lead-in, errors over the next lap."
        ),
        "limit_cm": LIMIT_M * 100,
        "n_platforms": len(rows),
        "all_pass": all(r["pass"] for r in rows),
        "worst": max(rows, key=lambda r: r["rms_cm"]),
        "machine": platform.machine(),
        "torch": torch.__version__,
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tracking.json").write_text(json.dumps(doc, indent=2) + "\n")
    (args.out / "tracking.md").write_text(_markdown(doc))
    print(_markdown(doc))


if __name__ == "__main__":
    main()
