"""What keeping the first gate in the beacon camera's view would cost the reference stack
(issue 57; the question `first_gate.py` left open).

`first_gate.py` found that gate 1's beacons leave the view 0.3-0.4 s after the start, because
the vehicle pitches past the camera's half field of view to accelerate, and that the gate's
range, set from the pad, is then wrong on `moved` courses. This script measures, on the nominal
2019 course (every generator setting's racer starts from the plan for it, so this is every
course's first segment):

1. the racer's initial plan as if flown exactly: the thrust tilt along the first segment, and
   when each of gate 1's nominal corners first leaves the beacon camera's image (the vehicle's
   attitude from the setpoint's thrust direction and yaw, differential flatness);
2. the camera's pitch budget at the start: the half vertical field of view less the highest
   corner's elevation above the horizon;
3. a lower bound on the first segment's time within that budget: from rest, accelerate
   horizontally at a constant a to the plan's speed at gate 1, then cruise (an ideal profile:
   instantaneous jerk, no drag, no climb), for a over a grid, against the plan's time.

    .venv/bin/python experiments/alphapilot/robust-racer/view_cost.py \\
        --out experiments/alphapilot/robust-racer/results/first-gate/view-cost.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import torch

from volary.control.geometric import rotation_from_thrust_yaw
from volary.sensors.camera import camera_config
from volary.sensors.rays import pinhole_intrinsics
from volary.studies.alphapilot.challenge import run_challenge_seeds
from volary.studies.alphapilot.sensor_racer import SensorRacer
from volary.worlds.tracks import alphapilot_2019

G = 9.81


def corners_in_view(pos: torch.Tensor, rot: torch.Tensor, corners: torch.Tensor) -> torch.Tensor:
    """(T, 4) bool: each corner inside the FlightGoggles camera's image (body-mounted, looking
    along +x_B; OpenCV camera axes x = -y_B, y = -z_B, z = x_B)."""
    cfg = camera_config("flightgoggles")
    fx, fy, cx, cy = pinhole_intrinsics(cfg.width, cfg.height, cfg.hfov, cfg.vfov).tolist()
    rel = corners[None] - pos[:, None]  # (T, 4, 3) world
    body = torch.einsum("tji,tkj->tki", rot, rel)  # R^T (c - p)
    cam = torch.stack((-body[..., 1], -body[..., 2], body[..., 0]), -1)
    z = cam[..., 2].clamp_min(1e-9)
    u = fx * cam[..., 0] / z + cx
    v = fy * cam[..., 1] / z + cy
    return (cam[..., 2] > 0) & (u >= 0) & (u < cfg.width) & (v >= 0) & (v < cfg.height)


def first_segment(racer: SensorRacer) -> dict:
    """Part 1 (module docstring) from the racer's initial setpoint table."""
    t1 = float(racer.knots[0, 1])
    steps = int(t1 / racer.dt) + 1
    sp = racer.table[0, :steps]  # (T, 14): p, v, a (drag-aware), jerk, yaw, yaw rate
    thrust = sp[:, 6:9] + torch.tensor([0.0, 0.0, G], dtype=sp.dtype)
    tilt = torch.atan2(thrust[:, :2].norm(dim=-1), thrust[:, 2])
    rot = rotation_from_thrust_yaw(thrust, sp[:, 12])
    spec = racer.brief.course
    gate = spec.gates[spec.meta["order_index"][0]]
    seen = corners_in_view(sp[:, :3], rot, torch.as_tensor(np.asarray(gate.corners)).double())
    t = torch.arange(steps, dtype=torch.float64) * racer.dt
    lost = [round(float(t[~s][0]), 3) if bool((~s).any()) else None for s in seen.T]
    drag = sp[:, 6:9] - racer.flat[0, :steps, 6:9]  # the setpoint's drag term (acc of the flat
    drag_tilt = torch.atan2(drag[:, :2].norm(dim=-1), G + drag[:, 2])  # outputs taken out)
    speed = sp[:, 3:6].norm(dim=-1)
    return {
        "gate1_time_s": round(t1, 3),
        "gate1_speed_mps": round(float(racer.speeds[0, 0]), 2),
        "peak_tilt_deg": round(math.degrees(float(tilt.max())), 1),
        "tilt_deg_every_0.25s": [
            round(math.degrees(float(x)), 1) for x in tilt[:: int(round(0.25 / racer.dt))]
        ],  # fmt: skip
        "corner_first_lost_s": lost,
        "all_corners_in_view_until_s": round(float(t[~seen.all(1)][0]), 3),
        "drag_tilt_deg_by_speed": [
            [round(float(v), 2), round(math.degrees(float(d)), 1)]
            for v, d in zip(
                speed[:: int(round(0.25 / racer.dt))],
                drag_tilt[:: int(round(0.25 / racer.dt))],
                strict=True,
            )
        ],  # fmt: skip
    }


def view_speed(seg: dict, budget_deg: float) -> float:
    """The speed (m/s) at which the drag alone tilts the vehicle by ``budget_deg``: above it a
    vehicle holding its speed (no acceleration) no longer sees the gate (interpolated over the
    plan's own samples, speed rising along the first segment)."""
    v, d = np.array(seg["drag_tilt_deg_by_speed"]).T
    return round(float(np.interp(budget_deg, d, v)), 2)


def pitch_budget(racer: SensorRacer) -> dict:
    """Part 2: the half vertical FOV less the highest corner's elevation from the start."""
    spec = racer.brief.course
    c = np.asarray(spec.gates[spec.meta["order_index"][0]].corners)
    start = np.asarray(spec.start)
    elev = np.degrees(np.arctan2(c[:, 2] - start[2], np.hypot(*(c[:, :2] - start[:2]).T)))
    half = math.degrees(camera_config("flightgoggles").vfov) / 2
    return {"half_vfov_deg": round(half, 1), "corner_elevation_deg": elev.round(2).tolist(),
            "pitch_budget_deg": round(half - float(elev.max()), 2),
            "distance_m": round(float(np.linalg.norm(c.mean(0) - start)), 2)}  # fmt: skip


def ideal_times(distance: float, v1: float, plan_s: float, accels: list[float]) -> list[dict]:
    """Part 3: accelerate at a to v1, then cruise, over ``distance``."""
    rows = []
    for a in accels:
        tau = v1 / a
        x = 0.5 * a * tau * tau
        t = tau + (distance - x) / v1 if x <= distance else math.sqrt(2 * distance / a)
        rows.append({"accel_mps2": a, "tilt_deg": round(math.degrees(math.atan(a / G)), 1),
                     "gate1_time_s": round(t, 3), "vs_plan_s": round(t - plan_s, 3)})  # fmt: skip
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    racer = SensorRacer()
    run_challenge_seeds([alphapilot_2019(arena="factory")], racer, [0], time_limit_s=0.02)
    seg, budget = first_segment(racer), pitch_budget(racer)
    accels = [round(G * math.tan(math.radians(d)), 2) for d in (25, 27.5, 30, 32.5, 35, 40)]
    doc = {"course": "alphapilot_2019 (nominal), factory arena", "first_segment": seg,
           "camera": budget,
           "ideal": ideal_times(budget["distance_m"], seg["gate1_speed_mps"],
                                seg["gate1_time_s"], accels),
           "cruise_speed_in_view_mps": view_speed(seg, budget["pitch_budget_deg"])}  # fmt: skip
    print(json.dumps(doc, indent=1))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
