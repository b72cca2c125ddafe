"""A factory hall around a gate course: walls, roof, pillars and machines (issue 57).

The AlphaPilot 2019 course was raced inside an abandoned factory (paper 001 Sec. V-C): the
camera saw walls, pillars and machines, not only gates. The factory's geometry was not
published, so this one is generic and deterministic:

- **walls and roof**: 0.5 m slabs just inside the arena's bounds (the flight volume is the
  same; touching one is a collision, as leaving the bounds already was);
- **pillars**: 0.6 m square, floor to roof, on a :data:`PILLAR_SPACING_M` grid centred on the
  arena (a factory's bay spacing is ~8-12 m);
- **machines and crates**: :data:`CLUTTER_COUNT` candidate boxes 1-3 m on each side, standing
  on the floor at a random yaw, drawn from a generator with the fixed seed
  :data:`FACTORY_SEED` (the same hall every time).

A pillar or machine is left out where it would enter a keep-out sphere: around the racing line
(sampled densely, each sample's radius :data:`LINE_CLEARANCE_M` plus how far the line can move
there, :func:`volary.worlds.tracks.keep_out`) and around every gate (its bounding sphere plus
its reach under perturbation, plus :data:`GATE_CLEARANCE_M`), so no course drawn from the
nominal one by any generator setting meets the hall's structure. Object ids start at
:data:`FACTORY_ID` (the gates' ids are their numbers).
"""

from __future__ import annotations

import numpy as np

from volary.worlds.primitives import Box

FACTORY_SEED = 2019  # the clutter's generator seed (fixed: one hall)
FACTORY_ID = 1000  # object id of the first wall; the rest follow
WALL_M = 0.5  # m, wall and roof thickness (inside the bounds)
PILLAR_SPACING_M = 10.0  # m between pillar centres along x and y
PILLAR_SIDE_M = 0.6  # m, square pillar section
CLUTTER_COUNT = 60  # machine/crate candidates drawn (those clear of the course are kept)
CLUTTER_SIZE_M = (1.0, 3.0)  # m, each side of a machine or crate
LINE_CLEARANCE_M = 3.0  # m from the widened racing line to any pillar or machine
GATE_CLEARANCE_M = 1.0  # m from any gate's reach to any pillar or machine


def factory_obstacles(
    bounds_min: tuple[float, float, float],
    bounds_max: tuple[float, float, float],
    keep_out: tuple[np.ndarray, np.ndarray],
) -> tuple[Box, ...]:
    """The hall's boxes (module docstring) for an arena ``bounds_min``..``bounds_max`` (m).
    ``keep_out``: spheres (centres (K, 3) m, radii (K,) m) no pillar or machine may enter (the
    widened racing line sampled densely, the gates' reach)."""
    lo, hi = np.asarray(bounds_min, dtype=float), np.asarray(bounds_max, dtype=float)
    boxes = _walls(lo, hi)
    top = hi[2] - WALL_M
    for x, y in _grid(lo, hi):
        b = Box((x, y, (lo[2] + top) / 2), (PILLAR_SIDE_M, PILLAR_SIDE_M, top - lo[2]))
        if _clear(b, keep_out):
            boxes.append(b)
    g = np.random.default_rng(FACTORY_SEED)
    for _ in range(CLUTTER_COUNT):
        size = g.uniform(*CLUTTER_SIZE_M, size=3)
        xy = g.uniform(lo[:2] + WALL_M + 2.0, hi[:2] - WALL_M - 2.0)
        yaw = float(g.uniform(-np.pi, np.pi))
        b = Box((float(xy[0]), float(xy[1]), lo[2] + size[2] / 2), _v(size), yaw)
        if _clear(b, keep_out):
            boxes.append(b)
    return tuple(
        Box(b.center, b.size, b.yaw, object_id=FACTORY_ID + i) for i, b in enumerate(boxes)
    )


def _v(x: np.ndarray) -> tuple[float, float, float]:
    return (float(x[0]), float(x[1]), float(x[2]))


def _walls(lo: np.ndarray, hi: np.ndarray) -> list[Box]:
    """Four walls and the roof, each WALL_M thick, just inside the bounds."""
    size, mid, t = hi - lo, (lo + hi) / 2, WALL_M
    out = []
    for axis in (0, 1):
        for side in (lo[axis] + t / 2, hi[axis] - t / 2):
            c, s = mid.copy(), size.copy()
            c[axis], s[axis] = side, t
            out.append(Box(_v(c), _v(s)))
    c, s = mid.copy(), size.copy()
    c[2], s[2] = hi[2] - t / 2, t
    out.append(Box(_v(c), _v(s)))
    return out


def _grid(lo: np.ndarray, hi: np.ndarray) -> list[tuple[float, float]]:
    """Pillar positions: a PILLAR_SPACING_M grid centred on the arena, off the walls."""
    axes = []
    for a in (0, 1):
        mid, reach = (lo[a] + hi[a]) / 2, (hi[a] - lo[a]) / 2 - WALL_M - PILLAR_SIDE_M
        k = int(np.floor(reach / PILLAR_SPACING_M))
        axes.append(mid + PILLAR_SPACING_M * np.arange(-k, k + 1))
    return [(float(x), float(y)) for x in axes[0] for y in axes[1]]


def _clear(box: Box, keep_out: tuple[np.ndarray, np.ndarray]) -> bool:
    """The box, bounded by the vertical cylinder around it (its horizontal circumradius, its
    height), enters none of the ``keep_out`` spheres."""
    ctr, radius = keep_out
    c, s = np.asarray(box.center), np.asarray(box.size)
    r_h = float(np.hypot(s[0], s[1])) / 2
    z0, z1 = c[2] - s[2] / 2, c[2] + s[2] / 2
    horizontal = np.maximum(np.linalg.norm(ctr[:, :2] - c[:2], axis=-1) - r_h, 0.0)
    vertical = np.maximum(np.maximum(z0 - ctr[:, 2], ctr[:, 2] - z1), 0.0)
    return bool((np.hypot(horizontal, vertical) >= radius).all())


__all__ = ["FACTORY_ID", "FACTORY_SEED", "factory_obstacles"]
