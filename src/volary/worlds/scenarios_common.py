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
    obstacles: list[Primitive],
    start: Vec3,
    goal: Vec3,
    *,
    size: Vec3 | None = None,
    ceiling: float | None = None,
    **meta: Any,
) -> SceneSpec:
    """Assemble the SceneSpec of a generated scenario and guarantee it is solvable. The flight
    volume spans the origin to ``size`` (default: ``params``' length, width and ceiling), the
    ceiling is ``params.ceiling`` unless given."""
    lx, ly, lz = size if size is not None else (params.length, params.width, params.ceiling)
    bounds = ((0.0, 0.0, 0.0), (lx, ly, lz))
    ceiling = params.ceiling if ceiling is None else ceiling
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


def stratified_seeds(clearance: np.ndarray | list[float], k: int = 10) -> tuple[int, ...]:
    """``k`` generator seeds at the clearance quantiles (i + 1/2) / k, i = 0..k-1.

    ``clearance[s]`` is :func:`line_clearance` of seed ``s`` for the candidate seeds
    ``0..N-1`` (N a multiple of ``k``). The seeds are ordered by clearance (ties by seed) and
    cut into ``k`` strata of ``m = N / k`` consecutive seeds; from each stratum the seed at its
    midpoint rank (m - 1) / 2 is taken (for even m the two middle seeds tie and the lower seed,
    the one the generator drew first, wins). Returns the ``k`` seeds in ascending order. The
    empirical clearance distribution of the ``k`` configurations is then within 1 / (2k) of
    the candidates' (Kolmogorov distance), the least any ``k`` points can be: the fixed
    configurations represent how open their generator's straight line is, instead of whatever
    the first ``k`` seeds happen to give.
    """
    c = np.asarray(clearance, dtype=float)
    if c.ndim != 1 or k < 1 or c.size < k or c.size % k:
        raise ConfigError(
            f"clearance: expected a 1-D array whose length is a multiple of k = {k}, "
            f"got shape {c.shape}"
        )
    if np.any(np.isnan(c)) or np.any(c == -np.inf):
        raise ConfigError("clearance: expected finite values (or +inf for an empty scene)")
    order = np.lexsort((np.arange(c.size), c))  # by clearance, then by seed
    m = c.size // k
    out = []
    for stratum in order.reshape(k, m):
        middle = stratum[(m - 1) // 2 : m // 2 + 1]  # one seed (odd m) or the two middle ones
        out.append(int(middle.min()))
    return tuple(sorted(out))
