"""Helpers shared by the scenario generators: start/goal placement, keep-out tests and the
solvability guarantee (grid search, then a deterministic corridor clearing when it fails)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

from volary.errors import ConfigError
from volary.worlds.grid import find_path, point_distance
from volary.worlds.primitives import Primitive, SceneSpec, Vec3


def vec(*v: float) -> Vec3:
    """A plain-float 3-tuple (numpy scalars would leak into exports and meta)."""
    return (float(v[0]), float(v[1]), float(v[2]))


def config_index(seed: int) -> int:
    """Configuration index 0-9 used by the types whose difficulty rises with the index."""
    return int(seed) % 10


def clear_of(prim: Primitive, points: list[Vec3], clearance: float) -> bool:
    """True when the primitive is more than ``clearance`` (m) from every point."""
    d = point_distance(prim, np.asarray(points, dtype=float))
    return bool(np.all(d > clearance))


def _segment_distance(prim: Primitive, a: np.ndarray, b: np.ndarray, step: float) -> float:
    n = max(2, int(np.ceil(np.linalg.norm(b - a) / step)) + 1)
    pts = a[None] + np.linspace(0.0, 1.0, n)[:, None] * (b - a)[None]
    return float(point_distance(prim, pts).min())


def line_clearance(
    obstacles: list[Primitive], start: Vec3, goal: Vec3, step: float = 0.05
) -> float:
    """Minimum signed distance (m) from the straight start-goal segment (sampled every
    ``step`` m) to the obstacles; inf without obstacles, <= 0 when the segment meets one."""
    a, b = np.asarray(start, dtype=float), np.asarray(goal, dtype=float)
    return min((_segment_distance(o, a, b, step) for o in obstacles), default=float("inf"))


def line_meets(obstacles: list[Primitive], start: Vec3, goal: Vec3, step: float = 0.05) -> bool:
    """True when the straight start-goal segment touches or enters an obstacle."""
    return line_clearance(obstacles, start, goal, step) <= 0.0


def point_on_line(rng: np.random.Generator, start: Vec3, goal: Vec3) -> np.ndarray:
    """A point drawn uniformly on the middle 40 % (30-70 %) of the start-goal segment: where
    the cluttered types put an obstacle "along" the reference line (FLYINGTRUST Sec. V-A)."""
    a, b = np.asarray(start, dtype=float), np.asarray(goal, dtype=float)
    return a + rng.uniform(0.3, 0.7) * (b - a)


def _with(spec: SceneSpec, obstacles: tuple[Primitive, ...], meta: dict) -> SceneSpec:
    return SceneSpec(
        spec.name,
        spec.bounds_min,
        spec.bounds_max,
        obstacles,
        spec.gates,
        spec.start,
        spec.start_yaw,
        spec.goal,
        spec.ceiling,
        meta,
    )


def ensure_solvable(spec: SceneSpec, radius: float, resolution: float) -> SceneSpec:
    """Return ``spec`` if a grid path exists for a sphere of ``radius``; otherwise drop the
    obstacles that come within ``radius + 2 * resolution + 0.2`` m of the straight start-goal
    line (deterministic: depends only on the geometry) and record how many in ``meta``."""
    meta = dict(spec.meta, check_radius=radius, check_resolution=resolution)
    res = find_path(spec, radius, resolution)
    if res.solvable:
        return _with(spec, spec.obstacles, dict(meta, solvable=True, cleared_obstacles=0))
    a, b = np.asarray(spec.start, dtype=float), np.asarray(spec.goal, dtype=float)
    margin = radius + 2 * resolution + 0.2
    kept = tuple(o for o in spec.obstacles if _segment_distance(o, a, b, 0.05) > margin)
    cleared = _with(
        spec,
        kept,
        dict(
            meta,
            solvable=True,
            cleared_obstacles=len(spec.obstacles) - len(kept),
            first_check=res.reason,
        ),
    )
    if not find_path(cleared, radius, resolution).solvable:
        raise ConfigError(
            f"{spec.name}: no collision-free path even after clearing the "
            f"start-goal corridor ({res.reason})"
        )
    return cleared


def finish(
    kind: str,
    seed: int,
    params: Any,
    *,
    bounds: tuple[Vec3, Vec3],
    obstacles: list[Primitive],
    start: Vec3,
    goal: Vec3,
    ceiling: float,
    **meta: Any,
) -> SceneSpec:
    """Assemble the SceneSpec of a generated scenario and guarantee it is solvable."""
    full_meta = dict(
        type=kind, seed=int(seed), params=asdict(params), reference_path=(start, goal), **meta
    )
    yaw = float(np.arctan2(goal[1] - start[1], goal[0] - start[0]))
    spec = SceneSpec(
        f"{kind}-{seed}",
        bounds[0],
        bounds[1],
        tuple(obstacles),
        (),
        start,
        yaw,
        goal,
        float(ceiling),
        full_meta,
    )
    return ensure_solvable(spec, params.vehicle_radius, params.check_resolution)


def start_goal(
    rng: np.random.Generator, length: float, width: float, height: float, margin: float
) -> tuple[Vec3, Vec3]:
    """Start near x = 0 and goal near x = length (opposite sides), y in the middle half."""
    ys = rng.uniform(0.25 * width, 0.75 * width, size=2)
    return vec(margin, ys[0], height), vec(length - margin, ys[1], height)
