"""FLYINGTRUST classic scenarios (Sec. III-B1): forest, urban and random-angle cylinders.

Sizes, ceilings and densities are the published ones; what the paper leaves open (trunk radii,
building sizes, cylinder lengths) is a documented default in each params dataclass. The flight
direction is +x (length), the width is along y, the floor is z = 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

import numpy as np

from volary.errors import ConfigError
from volary.inputs import Limit
from volary.worlds.primitives import Box, Cylinder, Primitive, SceneSpec, Vec3
from volary.worlds.scenarios_common import (
    CEILING,
    CLEARANCE,
    EXTENT,
    FLIGHT_HEIGHT,
    LENGTH,
    MARGIN,
    PER_AXIS,
    RESOLUTION,
    VEHICLE_RADIUS,
    WIDTH,
    Span,
    attempts,
    clear_of,
    finish,
    line_meets,
    placement_failed,
    point_on_line,
    require,
    require_count,
    require_layout,
    start_goal,
    vec,
)

_BLOCKS = Limit("city blocks along x and y", "1", 1, 2**14, integer=True)
_HEIGHT = Limit("building or wall height", "m", 0.01, EXTENT)


@dataclass(frozen=True)
class ForestParams:
    """Forest (FLYINGTRUST III-B1): 40 m x 60 m, ceiling 3 m, tree density 1/49 per m^2.
    Each field declares its range and unit (checked by ``scenario_params``); :meth:`check_rules`
    adds the rules between fields."""

    length: Annotated[float, LENGTH] = 60.0  # m along x (flight direction)
    width: Annotated[float, WIDTH] = 40.0  # m along y
    ceiling: Annotated[float, CEILING] = 3.0  # m
    density: Annotated[float, Limit("trees per m^2 of ground", "1/m^2", 0.0, 10.0)] = 1.0 / 49.0
    # m, uniform (not published)
    trunk_radius: Annotated[Span, Limit("trunk radius", "m", 0.01, 100.0)] = (0.15, 0.4)
    # m, uniform (not published)
    tree_height: Annotated[Span, Limit("tree height", "m", 0.1, EXTENT)] = (6.0, 12.0)
    # m between neighbouring trunk surfaces
    min_gap: Annotated[float, Limit("gap between trunk surfaces", "m", 0.0, EXTENT)] = 1.0
    flight_height: Annotated[float, FLIGHT_HEIGHT] = 1.5  # m, start and goal altitude
    margin: Annotated[float, MARGIN] = 2.0  # m from the x ends to start and goal
    clearance: Annotated[float, CLEARANCE] = 2.0  # m kept free around start and goal
    vehicle_radius: Annotated[float, VEHICLE_RADIUS] = 0.3  # m, for the solvability check
    check_resolution: Annotated[float, RESOLUTION] = 0.25  # m

    def check_rules(self, kind: str = "forest") -> None:
        """Layout and grid (:func:`require_layout`), the tree count, and a density the trunks
        can fit at all: discs of radius ``r + min_gap / 2`` around the trunks never overlap,
        so their total area is at most the (grown) floor's."""
        require_layout(kind, self, self.length, self.width, self.ceiling)
        n = round(self.density * self.length * self.width)
        require_count(kind, "density", n, "trees = round(density x length x width)")
        disc = math.pi * (self.trunk_radius[0] + self.min_gap / 2) ** 2
        grow = 2 * self.trunk_radius[1] + self.min_gap
        fit = (self.length + grow) * (self.width + grow) / disc
        require(
            n <= fit, kind, "density",
            f"at most {math.floor(fit)} trees (trunk radius >= {self.trunk_radius[0]:g} m, "
            f"min_gap {self.min_gap:g} m) to fit in {self.length:g} m x {self.width:g} m",
            f"{n} trees ({self.density:g} per m^2); lower density or min_gap",
        )  # fmt: skip


def forest(seed: int, p: ForestParams) -> SceneSpec:
    """Upright cylinder trunks placed uniformly at the published density, none overlapping.
    Gives up with a ConfigError after :func:`attempts` draws (a density the floor cannot
    take)."""
    rng = np.random.default_rng(seed)
    start, goal = start_goal(rng, p.length, p.width, p.flight_height, p.margin)
    n = int(round(p.density * p.length * p.width))
    trees: list[Cylinder] = []
    xy = np.empty((n, 2))  # the placed trunks' centres and radii: rows [:len(trees)]
    radii = np.empty(n)
    limit = attempts(n)
    for _ in range(limit):
        if len(trees) == n:
            break
        x, y = rng.uniform(0, p.length), rng.uniform(0, p.width)
        r, h = rng.uniform(*p.trunk_radius), rng.uniform(*p.tree_height)
        k = len(trees)
        if k and np.any(np.hypot(*(xy[:k] - [x, y]).T) < radii[:k] + r + p.min_gap):
            continue
        tree = Cylinder(vec(x, y, h / 2), float(r), float(h), object_id=k + 1)
        if not clear_of(tree, [start, goal], p.clearance):
            continue
        trees.append(tree)
        xy[k], radii[k] = (x, y), r
    if len(trees) < n:
        placed, what = len(trees), f"trees with min_gap {p.min_gap:g} m in {p.width:g} m x "
        what += f"{p.length:g} m (clearance {p.clearance:g} m around start and goal)"
        placement_failed("forest", what, placed, n, limit, "lower density or min_gap")
    return finish("forest", seed, p, list(trees), start, goal)


@dataclass(frozen=True)
class RandomCylindersParams:
    """Random-angle cylinders (III-B1): 40 m x 60 m, ceiling 3 m, density 1/36 per m^2,
    radii 0.25-0.5 m, tilt from vertical 0-180 deg. Ranges declared per field."""

    length: Annotated[float, LENGTH] = 60.0  # m along x
    width: Annotated[float, WIDTH] = 40.0  # m along y
    ceiling: Annotated[float, CEILING] = 3.0  # m
    density: Annotated[float, Limit("cylinders per m^2 of ground", "1/m^2", 0.0, 10.0)] = 1.0 / 36.0
    radius: Annotated[Span, Limit("cylinder radius", "m", 0.01, 100.0)] = (0.25, 0.5)
    # deg, axis angle from +z
    tilt_deg: Annotated[Span, Limit("axis angle from +z", "deg", 0.0, 180.0)] = (0.0, 180.0)
    # m (not published)
    cyl_length: Annotated[Span, Limit("cylinder length", "m", 0.01, EXTENT)] = (4.0, 8.0)
    flight_height: Annotated[float, FLIGHT_HEIGHT] = 1.5  # m
    margin: Annotated[float, MARGIN] = 2.0  # m
    clearance: Annotated[float, CLEARANCE] = 2.0  # m
    vehicle_radius: Annotated[float, VEHICLE_RADIUS] = 0.3  # m
    check_resolution: Annotated[float, RESOLUTION] = 0.25  # m
    block_line: bool = True  # an obstacle always meets the reference line (Sec. V-A)

    def check_rules(self, kind: str = "random_cylinders") -> None:
        """Layout and grid (:func:`require_layout`) and the cylinder count."""
        require_layout(kind, self, self.length, self.width, self.ceiling)
        n = round(self.density * self.length * self.width)
        require_count(kind, "density", n, "cylinders = round(density x length x width)")


def _random_cylinder(
    rng: np.random.Generator, p: RandomCylindersParams, center: np.ndarray, object_id: int
) -> Cylinder:
    tilt = math.radians(rng.uniform(*p.tilt_deg))
    az = rng.uniform(0, 2 * math.pi)
    r, ln = rng.uniform(*p.radius), rng.uniform(*p.cyl_length)
    axis = vec(math.sin(tilt) * math.cos(az), math.sin(tilt) * math.sin(az), math.cos(tilt))
    return Cylinder(vec(*center), float(r), float(ln), axis, object_id=object_id)


def random_cylinders(seed: int, p: RandomCylindersParams) -> SceneSpec:
    """Cylinders with uniform centres (z within the flight band), radii, tilts and azimuths;
    gives up with a ConfigError after :func:`attempts` draws (start and goal's clearance
    leaves no room)."""
    rng = np.random.default_rng(seed)
    start, goal = start_goal(rng, p.length, p.width, p.flight_height, p.margin)
    n = int(round(p.density * p.length * p.width))
    cyls: list[Primitive] = []
    limit = attempts(n)
    for _ in range(limit):
        if len(cyls) == n:
            break
        c = rng.uniform([0, 0, 0], [p.length, p.width, p.ceiling])
        cyl = _random_cylinder(rng, p, c, len(cyls) + 1)
        if clear_of(cyl, [start, goal], p.clearance):
            cyls.append(cyl)
    if len(cyls) < n:
        what = f"cylinders {p.clearance:g} m clear of start and goal"
        placement_failed("random_cylinders", what, len(cyls), n, limit, "lower clearance")
    if p.block_line and cyls and not line_meets(cyls, start, goal):
        # the paper places obstacles along the straight reference line: when the uniform draw
        # left it clear, the last cylinder is redrawn centred on it (count and laws unchanged)
        cyls[-1] = _random_cylinder(rng, p, point_on_line(rng, start, goal), len(cyls))
    return finish("random_cylinders", seed, p, cyls, start, goal)


@dataclass(frozen=True)
class UrbanParams:
    """Urban (III-B1): 60 m x 60 m, ceiling 10 m; buildings on a street grid plus free walls.
    Ranges declared per field."""

    length: Annotated[float, LENGTH] = 60.0  # m along x
    width: Annotated[float, WIDTH] = 60.0  # m along y
    ceiling: Annotated[float, CEILING] = 10.0  # m
    # city blocks along x, y
    blocks: Annotated[tuple[int, int], _BLOCKS, PER_AXIS] = (4, 4)
    # m, street width (also around the perimeter)
    street: Annotated[float, Limit("street width", "m", 0.0, EXTENT)] = 4.0
    # fraction of blocks holding a building
    building_fraction: Annotated[float, Limit("share of blocks built on", "1", 0.0, 1.0)] = 0.75
    # m, building side, uniform
    footprint: Annotated[Span, Limit("building side", "m", 0.1, EXTENT)] = (6.0, 10.0)
    building_height: Annotated[Span, _HEIGHT] = (6.0, 30.0)  # m
    # free-standing walls in the streets
    walls: Annotated[int, Limit("free-standing walls", "1", 0, 2**14, integer=True)] = 8
    wall_length: Annotated[Span, Limit("wall length", "m", 0.01, EXTENT)] = (3.0, 8.0)
    wall_height: Annotated[Span, _HEIGHT] = (2.0, 6.0)  # m
    wall_thickness: Annotated[float, Limit("wall thickness", "m", 0.01, 100.0)] = 0.3  # m
    flight_height: Annotated[float, FLIGHT_HEIGHT] = 2.0  # m
    margin: Annotated[float, MARGIN] = 2.0  # m
    # m (start/goal stand in the perimeter street, 2 m from blocks)
    clearance: Annotated[float, CLEARANCE] = 1.5
    vehicle_radius: Annotated[float, VEHICLE_RADIUS] = 0.3  # m
    # m (60 x 60 x 10 m at 0.25 m is 2.4 M nodes)
    check_resolution: Annotated[float, RESOLUTION] = 0.5
    # start and goal look down a cross street: their y is a street centre line in the middle
    # half (not published; False draws y uniformly in the middle half as the other types do)
    street_start_goal: bool = True

    def check_rules(self, kind: str = "urban") -> None:
        """Layout and grid, blocks of positive size between the streets, the obstacle count and
        (with ``street_start_goal``) a cross street in the middle half of the width."""
        require_layout(kind, self, self.length, self.width, self.ceiling)
        for axis, side, n in (
            ("x", self.length, self.blocks[0]),
            ("y", self.width, self.blocks[1]),
        ):
            require(
                (n + 1) * self.street < side, kind, "street",
                f"(blocks along {axis} + 1) x street < {side:g} m (blocks of positive size)",
                f"{n + 1} x {self.street:g} m",
            )  # fmt: skip
        n = round(self.building_fraction * self.blocks[0] * self.blocks[1]) + self.walls
        require_count(kind, "blocks", n, "buildings + walls")
        if self.street_start_goal:
            require(
                street_centres(self).size > 0, kind, "street_start_goal",
                "a street centre line in the middle half of the width (or false)",
                f"none for blocks {self.blocks} and street {self.street:g} m",
            )  # fmt: skip


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
    limit = attempts(p.walls)
    for _ in range(limit):
        if len(obstacles) == n_build + p.walls:
            break
        ln, h = rng.uniform(*p.wall_length), rng.uniform(*p.wall_height)
        yaw = float(rng.integers(2)) * math.pi / 2
        c = rng.uniform([0, 0], [p.length, p.width])
        wall = Box(
            vec(c[0], c[1], h / 2), vec(ln, p.wall_thickness, h), yaw, object_id=len(obstacles) + 1
        )
        if clear_of(wall, [start, goal], p.clearance):
            obstacles.append(wall)
    if len(obstacles) < n_build + p.walls:
        what = f"walls {p.clearance:g} m clear of start and goal"
        placement_failed("urban", what, len(obstacles) - n_build, p.walls, limit, "lower clearance")
    return finish("urban", seed, p, obstacles, start, goal, buildings=n_build, walls=p.walls)
