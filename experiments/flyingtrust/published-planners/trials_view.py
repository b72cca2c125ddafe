"""One trial flown by a published ROS 1 planner and by volary's version of its family, side by
side (issue 56: where they differ beyond the interval, look at trials and say why).

For each trial key (``platform|scenario|config|trial``) this writes, into ``--out``:

- ``<key>.npz``: a viewer recording with both tracks in the trial's scene (``volary view
  <key>.npz``: 3-D, time slider);
- ``<key>.png``: top view (x-y) and side view (x-z, the scene's floor and ceiling drawn) of both
  tracks, the obstacle the published planner hit outlined in red;
- ``<key>.json``: what the tracks say: where each ended, the published track's height profile
  against the flight volume, and its closest approach to the obstacle it hit.

    .venv/bin/python experiments/flyingtrust/published-planners/trials_view.py \\
        --published experiments/flyingtrust/published-planners/results/ego/run.sqlite \\
        --algo ros1:ego \\
        --ours out/bench/ego-quick/run.sqlite --ours-algo ego \\
        --out experiments/flyingtrust/published-planners/results/trials \\
        "0.895kg-DJI|forest|7|1" "1.00kg-SunnySky|sudden_drop|0|0"
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

import numpy as np


def _row(db: Path, algo: str, key: str):  # noqa: ANN202
    from volary.studies.flyingtrust.db import RunDB

    with RunDB.open(db, readonly=True) as d:
        found = d.results(f"{algo}|{key}")
    if not found:
        raise SystemExit(f"{db}: no trial {algo}|{key}")
    return found[0]


def _track(row) -> np.ndarray:  # noqa: ANN001
    a = np.asarray(json.loads(row.track), float) if row.track else np.zeros((0, 4))
    if not len(a):
        raise SystemExit(f"{row.key}: no recorded track")
    return a


def _hit(row, spec):  # noqa: ANN001, ANN202
    m = re.search(r"obstacle (\d+)", row.error or "")
    if m is None:
        return None
    return next((o for o in spec.obstacles if getattr(o, "object_id", None) == int(m[1])), None)


def _clearance(track: np.ndarray, obstacle, radius: float) -> float:  # noqa: ANN001
    """Least distance from the track's centre positions to the obstacle's surface, less the
    vehicle's collision radius (negative: inside)."""
    from volary.worlds import Box, Cylinder, Sphere

    p = track[:, 1:4]
    if isinstance(obstacle, Box):
        c, h = np.asarray(obstacle.center), 0.5 * np.asarray(obstacle.size)
        cy, sy = math.cos(obstacle.yaw), math.sin(obstacle.yaw)
        rel = p - c
        local = np.stack([cy * rel[:, 0] + sy * rel[:, 1], -sy * rel[:, 0] + cy * rel[:, 1],
                          rel[:, 2]], axis=1)  # fmt: skip
        q = np.abs(local) - h
        d = np.linalg.norm(np.maximum(q, 0.0), axis=1) + np.minimum(q.max(axis=1), 0.0)
    elif isinstance(obstacle, Cylinder):
        c, ax = np.asarray(obstacle.center), np.asarray(obstacle.axis, float)
        ax = ax / np.linalg.norm(ax)
        along = (p - c) @ ax
        radial = np.linalg.norm((p - c) - along[:, None] * ax, axis=1) - obstacle.radius
        axial = np.abs(along) - 0.5 * obstacle.length
        d = np.hypot(np.maximum(radial, 0), np.maximum(axial, 0)) + np.minimum(
            np.maximum(radial, axial), 0
        )
    elif isinstance(obstacle, Sphere):
        d = np.linalg.norm(p - np.asarray(obstacle.center), axis=1) - obstacle.radius
    else:
        return math.nan
    return float(d.min() - radius)


def _figure(spec, rows, tracks, colors, hit, path: Path) -> None:  # noqa: ANN001
    from volary.studies.flyingtrust import figures

    plt = figures._plt()
    fig, (top, side) = plt.subplots(2, 1, figsize=(10, 7.5), gridspec_kw={"height_ratios": (2, 1)})
    figures.draw_scene(top, spec)
    if hit is not None:
        outline = figures._hit_obstacle(rows[0], spec)
        if outline is not None:
            top.add_patch(plt.Polygon(outline, closed=True, fill=False, ec="red", lw=1.5))
    for r, t, c in zip(rows, tracks, colors, strict=True):
        lab = f"{r.algo}: {r.cause}, {t[-1, 0]:.1f} s"
        top.plot(t[:, 1], t[:, 2], "-", color=c, lw=1.6, label=lab)
        top.plot(t[-1, 1], t[-1, 2], "X", color=c, ms=8)
        side.plot(t[:, 1], t[:, 3], "-", color=c, lw=1.6)
        side.plot(t[-1, 1], t[-1, 3], "X", color=c, ms=8)
    s, g = np.asarray(spec.start), np.asarray(spec.goal)
    top.plot(*s[:2], "g^", ms=9)
    top.plot(*g[:2], "r*", ms=12)
    top.set_aspect("equal")
    top.set(xlabel="x [m]", ylabel="y [m]")
    top.legend(loc="upper left", fontsize=8)
    top.set_title(f"{rows[0].platform} | {rows[0].scenario} config {rows[0].config}", fontsize=10)
    lo, hi = spec.bounds_min, spec.bounds_max
    side.axhline(spec.ceiling, color="0.3", ls="--", lw=0.8, label="scene ceiling")
    side.axhline(lo[2], color="0.3", lw=0.8, label="floor")
    if hit is not None:
        c, h = _extent(hit)
        side.axvspan(c[0] - h[0], c[0] + h[0], color="red", alpha=0.12, label="hit obstacle's x")
    side.set(xlabel="x [m]", ylabel="z [m]", xlim=(lo[0] - 1, hi[0] + 1))
    side.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _extent(o) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    """Centre and half extents of an obstacle's axis-aligned bounds (a box's yaw ignored)."""
    c = np.asarray(o.center, float)
    if hasattr(o, "size"):
        return c, 0.5 * np.asarray(o.size, float)
    r = float(getattr(o, "radius", 0.0))
    half_len = 0.5 * float(getattr(o, "length", 2 * r))
    return c, np.array([r, r, half_len])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--published", type=Path, required=True, help="run.sqlite of the ROS planner")
    ap.add_argument("--algo", required=True, help="its algorithm name, e.g. ros1:ego")
    ap.add_argument("--ours", type=Path, required=True, help="run.sqlite of volary's planner")
    ap.add_argument("--ours-algo", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("keys", nargs="+", help="platform|scenario|config|trial")
    a = ap.parse_args()
    from volary.platforms import get
    from volary.view.recording import Track, recording_from_spec, scene_from_ref

    for key in a.keys:
        rows = [_row(a.published, a.algo, key), _row(a.ours, a.ours_algo, key)]
        tracks = [_track(r) for r in rows]
        spec = scene_from_ref(f"{rows[0].scenario}:{rows[0].config}")
        radius = float(get(rows[0].platform).radius)
        hit = _hit(rows[0], spec)
        safe = key.replace("|", "_")
        ref = np.array([spec.start, spec.goal], float)
        rec = recording_from_spec(
            spec,
            [Track(r.algo, t[:, 0], t[:, 1:4], None, radius, ref, r.cause)
             for r, t in zip(rows, tracks, strict=True)],
            f"{key}: {rows[0].algo} {rows[0].cause}, {rows[1].algo} {rows[1].cause}",
            f"{rows[0].scenario}:{rows[0].config}",
        )  # fmt: skip
        a.out.mkdir(parents=True, exist_ok=True)
        rec.save(a.out / f"{safe}.npz")
        _figure(spec, rows, tracks, ("#d62728", "#1f77b4"), hit, a.out / f"{safe}.png")
        facts = {
            "key": key,
            "radius_m": radius,
            "scene_ceiling_m": float(spec.ceiling),
            "floor_m": float(spec.bounds_min[2]),
        }
        for r, t in zip(rows, tracks, strict=True):
            facts[r.algo] = {
                "cause": r.cause,
                "error": r.error,
                "flight_time_s": round(float(t[-1, 0]), 2),
                "end_xyz": [round(float(v), 2) for v in t[-1, 1:4]],
                "z_min_max": [round(float(t[:, 3].min()), 2), round(float(t[:, 3].max()), 2)],
                "max_speed": round(float(r.max_speed), 2),
                "path_length": round(float(r.path_length), 1),
            }
        if hit is not None:
            c, h = _extent(hit)
            facts["hit_obstacle"] = {
                "id": int(hit.object_id),
                "kind": type(hit).__name__,
                "center": [round(float(v), 2) for v in c],
                "half_extents_or_radius": [round(float(v), 2) for v in h],
                f"{a.algo}_clearance_m": round(_clearance(tracks[0], hit, radius), 3),
                f"{a.ours_algo}_clearance_m": round(_clearance(tracks[1], hit, radius), 3),
            }
        (a.out / f"{safe}.json").write_text(json.dumps(facts, indent=1) + "\n")
        print(json.dumps(facts, indent=1))


if __name__ == "__main__":
    main()
