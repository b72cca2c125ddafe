"""FLYINGTRUST classic scenarios (Sec. III-B1): forest, urban and random-angle cylinders.

Sizes, ceilings and densities are the published ones; what the paper leaves open (trunk radii,
building sizes, cylinder lengths) is a documented default in each params dataclass. The flight
direction is +x (length), the width is along y, the floor is z = 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from volary.errors import ConfigError
from volary.worlds.primitives import Box, Cylinder, Primitive, SceneSpec, Vec3
from volary.worlds.scenarios_common import (
    clear_of,
    finish,
    line_meets,
    point_on_line,
    start_goal,
    vec,
)


@dataclass(frozen=True)
class ForestParams:
    """Forest (FLYINGTRUST III-B1): 40 m x 60 m, ceiling 3 m, tree density 1/49 per m^2."""

    length: float = 60.0  # m along x (flight direction)
    width: float = 40.0  # m along y
    ceiling: float = 3.0  # m
    density: float = 1.0 / 49.0  # trees per m^2 of ground
    trunk_radius: tuple[float, float] = (0.15, 0.4)  # m, uniform (not published)
    tree_height: tuple[float, float] = (6.0, 12.0)  # m, uniform (not published)
    min_gap: float = 1.0  # m between neighbouring trunk surfaces
    flight_height: float = 1.5  # m, start and goal altitude
    margin: float = 2.0  # m from the x ends to start and goal
    clearance: float = 2.0  # m kept free around start and goal
    vehicle_radius: float = 0.3  # m, for the solvability check
    check_resolution: float = 0.25  # m


def forest(seed: int, p: ForestParams) -> SceneSpec:
    """Upright cylinder trunks placed uniformly at the published density, none overlapping."""
    rng = np.random.default_rng(seed)
    start, goal = start_goal(rng, p.length, p.width, p.flight_height, p.margin)
    n = int(round(p.density * p.length * p.width))
    trees: list[Cylinder] = []
    xy = np.empty((0, 2))
    radii = np.empty(0)
    while len(trees) < n:
        x, y = rng.uniform(0, p.length), rng.uniform(0, p.width)
        r, h = rng.uniform(*p.trunk_radius), rng.uniform(*p.tree_height)
        if xy.size and np.any(np.hypot(*(xy - [x, y]).T) < radii + r + p.min_gap):
            continue
        tree = Cylinder(vec(x, y, h / 2), float(r), float(h), object_id=len(trees) + 1)
        if not clear_of(tree, [start, goal], p.clearance):
            continue
        trees.append(tree)
        xy, radii = np.vstack([xy, [x, y]]), np.append(radii, r)
    return finish("forest", seed, p, list(trees), start, goal)


@dataclass(frozen=True)
class RandomCylindersParams:
    """Random-angle cylinders (III-B1): 40 m x 60 m, ceiling 3 m, density 1/36 per m^2,
    radii 0.25-0.5 m, tilt from vertical 0-180 deg."""

    length: float = 60.0  # m along x
    width: float = 40.0  # m along y
    ceiling: float = 3.0  # m
    density: float = 1.0 / 36.0  # cylinders per m^2
    radius: tuple[float, float] = (0.25, 0.5)  # m
    tilt_deg: tuple[float, float] = (0.0, 180.0)  # deg, axis angle from +z
    cyl_length: tuple[float, float] = (4.0, 8.0)  # m (not published)
    flight_height: float = 1.5  # m
    margin: float = 2.0  # m
    clearance: float = 2.0  # m
    vehicle_radius: float = 0.3  # m
    check_resolution: float = 0.25  # m
    block_line: bool = True  # an obstacle always meets the reference line (Sec. V-A)


def _random_cylinder(
    rng: np.random.Generator, p: RandomCylindersParams, center: np.ndarray, object_id: int
) -> Cylinder:
    tilt = math.radians(rng.uniform(*p.tilt_deg))
    az = rng.uniform(0, 2 * math.pi)
    r, ln = rng.uniform(*p.radius), rng.uniform(*p.cyl_length)
    axis = vec(math.sin(tilt) * math.cos(az), math.sin(tilt) * math.sin(az), math.cos(tilt))
    return Cylinder(vec(*center), float(r), float(ln), axis, object_id=object_id)


def random_cylinders(seed: int, p: RandomCylindersParams) -> SceneSpec:
    """Cylinders with uniform centres (z within the flight band), radii, tilts and azimuths."""
    rng = np.random.default_rng(seed)
    start, goal = start_goal(rng, p.length, p.width, p.flight_height, p.margin)
    n = int(round(p.density * p.length * p.width))
    cyls: list[Primitive] = []
    while len(cyls) < n:
        c = rng.uniform([0, 0, 0], [p.length, p.width, p.ceiling])
        cyl = _random_cylinder(rng, p, c, len(cyls) + 1)
        if clear_of(cyl, [start, goal], p.clearance):
            cyls.append(cyl)
    if p.block_line and cyls and not line_meets(cyls, start, goal):
        # the paper places obstacles along the straight reference line: when the uniform draw
        # left it clear, the last cylinder is redrawn centred on it (count and laws unchanged)
        cyls[-1] = _random_cylinder(rng, p, point_on_line(rng, start, goal), len(cyls))
    return finish("random_cylinders", seed, p, cyls, start, goal)


@dataclass(frozen=True)
class UrbanParams:
    """Urban (III-B1): 60 m x 60 m, ceiling 10 m; buildings on a street grid plus free walls."""

    length: float = 60.0  # m along x
    width: float = 60.0  # m along y
    ceiling: float = 10.0  # m
    blocks: tuple[int, int] = (4, 4)  # city blocks along x, y
    street: float = 4.0  # m, street width (also around the perimeter)
    building_fraction: float = 0.75  # fraction of blocks holding a building
    footprint: tuple[float, float] = (6.0, 10.0)  # m, building side, uniform
    building_height: tuple[float, float] = (6.0, 30.0)  # m
    walls: int = 8  # free-standing walls in the streets
    wall_length: tuple[float, float] = (3.0, 8.0)  # m
    wall_height: tuple[float, float] = (2.0, 6.0)  # m
    wall_thickness: float = 0.3  # m
    flight_height: float = 2.0  # m
    margin: float = 2.0  # m
    clearance: float = 1.5  # m (start/goal stand in the perimeter street, 2 m from blocks)
    vehicle_radius: float = 0.3  # m
    check_resolution: float = 0.5  # m (60 x 60 x 10 m at 0.25 m is 2.4 M nodes)
    # start and goal look down a cross street: their y is a street centre line in the middle
    # half (not published; False draws y uniformly in the middle half as the other types do)
    street_start_goal: bool = True


def street_centres(p: UrbanParams) -> np.ndarray:
    """y (m) of the centre lines of the streets along x that lie in the middle half of the
    width: where :func:`urban` puts start and goal."""
    nby = p.blocks[1]
    by = (p.width - (nby + 1) * p.street) / nby
    ys = p.street / 2 + np.arange(nby + 1) * (by + p.street)
    return ys[(ys >= 0.25 * p.width) & (ys <= 0.75 * p.width)]


def _urban_start_goal(rng: np.random.Generator, p: UrbanParams) -> tuple[Vec3, Vec3]:
    """Start in the x = 0 perimeter street, goal in the x = length one, each on a cross-street
    centre line drawn independently (the same street: the straight line runs down it)."""
    if not p.street_start_goal:
        return start_goal(rng, p.length, p.width, p.flight_height, p.margin)
    centres = street_centres(p)
    if centres.size == 0:
        raise ConfigError("urban: no street centre line in the middle half of the width")
    ys = rng.choice(centres, size=2)
    return (
        vec(p.margin, ys[0], p.flight_height),
        vec(p.length - p.margin, ys[1], p.flight_height),
    )


def _buildings(rng: np.random.Generator, p: UrbanParams) -> list[Primitive]:
    nbx, nby = p.blocks
    bx = (p.length - (nbx + 1) * p.street) / nbx
    by = (p.width - (nby + 1) * p.street) / nby
    n = int(round(p.building_fraction * nbx * nby))
    chosen = np.sort(rng.choice(nbx * nby, size=n, replace=False))
    out: list[Primitive] = []
    for k in chosen:
        i, j = divmod(int(k), nby)
        sx = min(rng.uniform(*p.footprint), bx)
        sy = min(rng.uniform(*p.footprint), by)
        h = rng.uniform(*p.building_height)
        x0 = p.street + i * (bx + p.street) + rng.uniform(0, bx - sx)
        y0 = p.street + j * (by + p.street) + rng.uniform(0, by - sy)
        out.append(
            Box(vec(x0 + sx / 2, y0 + sy / 2, h / 2), vec(sx, sy, h), object_id=len(out) + 1)
        )
    return out


def urban(seed: int, p: UrbanParams) -> SceneSpec:
    """Axis-aligned buildings in city blocks and thin walls across or along the streets; start
    and goal in the perimeter streets at the ends of cross streets."""
    rng = np.random.default_rng(seed)
    start, goal = _urban_start_goal(rng, p)
    obstacles = [b for b in _buildings(rng, p) if clear_of(b, [start, goal], p.clearance)]
    n_build = len(obstacles)
    while len(obstacles) < n_build + p.walls:
        ln, h = rng.uniform(*p.wall_length), rng.uniform(*p.wall_height)
        yaw = float(rng.integers(2)) * math.pi / 2
        c = rng.uniform([0, 0], [p.length, p.width])
        wall = Box(
            vec(c[0], c[1], h / 2), vec(ln, p.wall_thickness, h), yaw, object_id=len(obstacles) + 1
        )
        if clear_of(wall, [start, goal], p.clearance):
            obstacles.append(wall)
    return finish("urban", seed, p, obstacles, start, goal, buildings=n_build, walls=p.walls)
