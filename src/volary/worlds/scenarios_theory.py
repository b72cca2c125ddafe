"""FLYINGTRUST theoretical scenarios (Sec. III-B2): narrow gap, sudden drop, maze, Perlin noise.

Flight direction +x, width along y, floor z = 0. Where a count rises "from Scenario 1 to
Scenario 10" it is ``first + step * (seed % 10)`` unless given explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import numpy as np

from volary.errors import ConfigError
from volary.inputs import LIMITS, Limit
from volary.worlds.primitives import Box, Primitive, SceneSpec
from volary.worlds.scenarios_common import (
    ATTEMPTS_BASE,
    CEILING,
    CLEARANCE,
    EXTENT,
    FLIGHT_HEIGHT,
    LENGTH,
    MARGIN,
    RESOLUTION,
    VEHICLE_RADIUS,
    WIDTH,
    Span,
    attempts,
    clear_of,
    config_index,
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
from volary.worlds.scenarios_noise import fbm3, merge_voxels

_COUNT = Limit("obstacle count", "1", 0, 2**14, integer=True)
_STEP = Limit("count added per configuration index", "1", 0, 2**14, integer=True)
_THICKNESS = Limit("wall thickness", "m", 0.01, 100.0)
_SIDES = 6.0  # m: narrow-gap centres are drawn 3 m from either side wall


def _rising(kind: str, field: str, fixed: int | None, first: int, step: int, per: int) -> None:
    """A count given (``fixed``) or rising ``first + step * (seed % 10)``: ``per`` obstacles
    each at its largest within ``LIMITS["scene_objects"]``."""
    n = per * (fixed if fixed is not None else first + 9 * step)
    what = f"{per} x " if per > 1 else ""
    require_count(kind, field, n, f"{what}{field} (largest over the ten configurations)")


def _lattice(kind: str, field: str, sizes: dict[str, float], pitch: float) -> tuple[int, ...]:
    """Cells per axis of a lattice of ``pitch`` m over ``sizes``: each at least one, their
    product within ``LIMITS["lattice_cells"]``."""
    n = {axis: int(round(size / pitch)) for axis, size in sizes.items()}
    for axis, cells in n.items():
        require(
            cells >= 1, kind, field, f"at most 2 x {axis} = {2 * sizes[axis]:g} m (one cell)",
            f"{pitch:g} m",
        )  # fmt: skip
    cap, total = LIMITS["lattice_cells"], float(np.prod([float(c) for c in n.values()]))
    dims = " x ".join(str(c) for c in n.values())
    require(
        total <= cap.hi, kind, field, f"at most {cap.hi:.0f} {cap.quantity}",
        f"{pitch:g} m ({dims} = {total:.3g} cells)",
    )  # fmt: skip
    return tuple(n.values())


@dataclass(frozen=True)
class NarrowGapParams:
    """Narrow gap (III-B2): 50 m x 50 m, ceiling 4 m, gap widths 0.85-0.9 m, gap count rising
    with the configuration index. Each gap is a full-height slot in a wall across the path."""

    length: Annotated[float, LENGTH] = 50.0  # m along x
    width: Annotated[float, WIDTH] = 50.0  # m along y
    # m; walls reach it, so every wall must be passed through its gap
    ceiling: Annotated[float, CEILING] = 4.0
    gap_width: Annotated[Span, Limit("gap width", "m", 0.1, 4.0)] = (0.85, 0.9)
    # None: gaps_first + gaps_step * (seed % 10)
    gaps: Annotated[int | None, Limit("walls, one gap each", "1", 1, 2**13, integer=True)] = None
    gaps_first: Annotated[int, Limit("walls of configuration 0", "1", 1, 2**13, integer=True)] = 1
    gaps_step: Annotated[int, _STEP] = 1
    wall_thickness: Annotated[float, _THICKNESS] = 0.3  # m
    # m, x of the first and (mirrored) last wall from the ends
    first_wall: Annotated[float, Limit("first wall's x from the ends", "m", 0.0, EXTENT)] = 8.0
    # m, lateral shift between consecutive gaps (forces yaw/lateral)
    min_offset: Annotated[float, Limit("shift between gaps", "m", 0.0, EXTENT)] = 4.0
    # m, gap centres on this lattice from y = 0 (grid-aligned check)
    gap_snap: Annotated[float, Limit("lattice of gap centres", "m", 0.05, 1.0)] = 0.5
    flight_height: Annotated[float, FLIGHT_HEIGHT] = 1.5  # m
    margin: Annotated[float, MARGIN] = 2.0  # m
    vehicle_radius: Annotated[float, VEHICLE_RADIUS] = 0.3  # m
    check_resolution: Annotated[float, RESOLUTION] = 0.25  # m

    def check_rules(self, kind: str = "narrow_gap") -> None:
        """Layout and grid; the start before the first wall, the walls' x inside the length;
        room for the gaps: width > 6 m, and ``min_offset`` and ``gap_snap`` at most an eighth
        of what is left (then a draw keeps the offset with probability >= 1/4)."""
        require_layout(kind, self, self.length, self.width, self.ceiling)
        _rising(kind, "gaps", self.gaps, self.gaps_first, self.gaps_step, 2)
        lo = self.margin + self.wall_thickness / 2
        require(
            lo < self.first_wall < self.length / 2,
            kind, "first_wall",
            f"in (margin + wall_thickness / 2, length / 2) = ({lo:g}, {self.length / 2:g}) m",
            f"{self.first_wall:g} m",
        )  # fmt: skip
        require(
            self.width > _SIDES, kind, "width", f"> {_SIDES:g} m (gaps 3 m from the sides)",
            f"{self.width:g} m",
        )  # fmt: skip
        room = (self.width - _SIDES) / 8
        for field in ("min_offset", "gap_snap"):
            value = getattr(self, field)
            require(
                value <= room, kind, field, f"<= (width - 6 m) / 8 = {room:g} m", f"{value:g} m"
            )


def narrow_gap(seed: int, p: NarrowGapParams) -> SceneSpec:
    """Walls across x, each split into two boxes around one narrow slot."""
    rng = np.random.default_rng(seed)
    start, goal = start_goal(rng, p.length, p.width, p.flight_height, p.margin)
    n = p.gaps if p.gaps is not None else p.gaps_first + p.gaps_step * config_index(seed)
    xs = np.linspace(p.first_wall, p.length - p.first_wall, n) if n > 1 else [p.length / 2]
    obstacles: list[Primitive] = []
    gaps = []
    prev = None
    for x in xs:
        for _ in range(ATTEMPTS_BASE):
            yc = round(rng.uniform(3.0, p.width - 3.0) / p.gap_snap) * p.gap_snap
            if prev is None or abs(yc - prev) >= p.min_offset:
                break
        else:
            raise ConfigError(
                f"narrow_gap: could not draw a gap {p.min_offset:g} m from the previous one in "
                f"{p.width:g} m after {ATTEMPTS_BASE} attempts; lower min_offset"
            )
        w = float(rng.uniform(*p.gap_width))
        lo, hi = yc - w / 2, yc + w / 2
        for a, b in ((0.0, lo), (hi, p.width)):
            obstacles.append(
                Box(
                    vec(x, (a + b) / 2, p.ceiling / 2),
                    vec(p.wall_thickness, b - a, p.ceiling),
                    object_id=len(obstacles) + 1,
                )
            )
        gaps.append((float(x), float(yc), w))
        prev = yc
    return finish("narrow_gap", seed, p, obstacles, start, goal, gaps=tuple(gaps))


@dataclass(frozen=True)
class SuddenDropParams:
    """Sudden drop (III-B2): 50 x 50 x 14 m, lowest obstacle point 1.5 m, start at 2.5 m,
    ceiling 4 m, obstacle count rising with the index. Obstacles hang from the top of the
    volume down to 1.5 m, so the vehicle must drop below them."""

    length: Annotated[float, LENGTH] = 50.0  # m along x
    width: Annotated[float, WIDTH] = 50.0  # m along y
    # m, top of the volume (obstacles hang from it)
    height: Annotated[float, Limit("top of the volume", "m", 0.5, EXTENT)] = 14.0
    ceiling: Annotated[float, CEILING] = 4.0  # m
    # m, lowest obstacle point
    bottom: Annotated[float, Limit("lowest obstacle point", "m", 0.0, EXTENT)] = 1.5
    start_height: Annotated[float, FLIGHT_HEIGHT] = 2.5  # m
    # None: obstacles_first + obstacles_step * (seed % 10)
    obstacles: Annotated[int | None, _COUNT] = None
    obstacles_first: Annotated[int, _COUNT] = 2
    obstacles_step: Annotated[int, _STEP] = 2
    # m along x (not published)
    depth: Annotated[Span, Limit("slab depth along x", "m", 0.01, EXTENT)] = (2.0, 6.0)
    # m along y (not published)
    span: Annotated[Span, Limit("slab span along y", "m", 0.01, EXTENT)] = (10.0, 50.0)
    margin: Annotated[float, MARGIN] = 2.0  # m
    clearance: Annotated[float, CLEARANCE] = 3.0  # m kept free around start and goal
    vehicle_radius: Annotated[float, VEHICLE_RADIUS] = 0.3  # m
    check_resolution: Annotated[float, RESOLUTION] = 0.25  # m
    block_line: bool = True  # a slab always hangs across the reference line (Sec. V-A)

    def check_rules(self, kind: str = "sudden_drop") -> None:
        """Layout and grid (up to the lower of ``height`` and ``ceiling``), slabs of positive
        height (``bottom`` < ``height``), the start below the ceiling, the slab count."""
        top = min(self.height, self.ceiling)
        require_layout(kind, self, self.length, self.width, top)
        require(
            self.start_height < top, kind, "start_height",
            f"< min(height, ceiling) = {top:g} m", f"{self.start_height:g} m",
        )  # fmt: skip
        require(
            self.bottom < self.height, kind, "bottom", f"< height = {self.height:g} m",
            f"{self.bottom:g} m",
        )  # fmt: skip
        _rising(kind, "obstacles", self.obstacles, self.obstacles_first, self.obstacles_step, 1)


def _slab(
    rng: np.random.Generator, p: SuddenDropParams, oid: int, at: np.ndarray | None = None
) -> Box:
    """A slab of drawn depth (x) and span (y) hanging from the top of the volume to
    ``p.bottom``, centred on a uniform (x, y) or on ``at``, clipped to the width (the span
    always covers the centre's y)."""
    d, s = rng.uniform(*p.depth), rng.uniform(*p.span)
    if at is None:
        x, y = rng.uniform(0, p.length), rng.uniform(0, p.width)
    else:
        x, y = float(at[0]), float(at[1])
    y0, y1 = np.clip(y + np.array([-s, s]) / 2, 0, p.width)
    h = p.height - p.bottom
    return Box(vec(x, (y0 + y1) / 2, p.bottom + h / 2), vec(d, y1 - y0, h), object_id=oid)


def sudden_drop(seed: int, p: SuddenDropParams) -> SceneSpec:
    """Overhanging slabs from z = bottom to the top of the volume, clipped to the width."""
    rng = np.random.default_rng(seed)
    start, goal = start_goal(rng, p.length, p.width, p.start_height, p.margin)
    n = (
        p.obstacles
        if p.obstacles is not None
        else (p.obstacles_first + p.obstacles_step * config_index(seed))
    )
    out: list[Primitive] = []
    limit = attempts(n)
    for _ in range(limit):
        if len(out) == n:
            break
        slab = _slab(rng, p, len(out) + 1)
        if clear_of(slab, [start, goal], p.clearance):
            out.append(slab)
    if len(out) < n:
        what = f"slabs {p.clearance:g} m clear of start and goal"
        placement_failed("sudden_drop", what, len(out), n, limit, "lower clearance")
    if p.block_line and out and not line_meets(out, start, goal):
        # obstacles stand along the straight reference line in the paper: when the uniform
        # draw left it clear, the last slab is redrawn hanging across it (count unchanged)
        out[-1] = _slab(rng, p, len(out), at=point_on_line(rng, start, goal))
    return finish("sudden_drop", seed, p, out, start, goal, size=(p.length, p.width, p.height))


@dataclass(frozen=True)
class MazeParams:
    """Maze (III-B2): 25 m x 40 m labyrinth, flight height limited to 2 m, random layouts
    (depth-first backtracker on square cells, a few extra walls removed to make loops)."""

    length: Annotated[float, LENGTH] = 40.0  # m along x
    width: Annotated[float, WIDTH] = 25.0  # m along y
    height: Annotated[float, CEILING] = 2.0  # m, wall height and ceiling
    cell: Annotated[float, Limit("corridor pitch", "m", 0.1, EXTENT)] = 2.5  # m
    wall_thickness: Annotated[float, _THICKNESS] = 0.2  # m
    # share of the remaining inner walls removed
    loop_fraction: Annotated[float, Limit("share of inner walls removed", "1", 0.0, 1.0)] = 0.05
    flight_height: Annotated[float, FLIGHT_HEIGHT] = 1.0  # m
    vehicle_radius: Annotated[float, VEHICLE_RADIUS] = 0.3  # m
    check_resolution: Annotated[float, RESOLUTION] = 0.25  # m

    def check_rules(self, kind: str = "maze") -> None:
        """At least one cell along x and y and at most ``LIMITS["lattice_cells"]`` in all, at
        most ``LIMITS["scene_objects"]`` cell sides (each wall box is a run of them), walls
        thinner than the cell, then layout and grid over the maze's extent."""
        nx, ny = _lattice(kind, "cell", {"length": self.length, "width": self.width}, self.cell)
        sides = (nx + 1) * ny + nx * (ny + 1)
        require_count(kind, "cell", sides, f"wall sides of {nx} x {ny} cells")
        require(
            self.wall_thickness < self.cell, kind, "wall_thickness",
            f"< cell = {self.cell:g} m", f"{self.wall_thickness:g} m",
        )  # fmt: skip
        require_layout(kind, self, nx * self.cell, ny * self.cell, self.height)


def _carve(rng: np.random.Generator, nx: int, ny: int) -> tuple[np.ndarray, np.ndarray]:
    """Iterative depth-first backtracker. Returns ``vert (nx+1, ny)`` (walls at x = i * cell)
    and ``horiz (nx, ny+1)`` (walls at y = j * cell), True where a wall stands."""
    vert, horiz = np.ones((nx + 1, ny), bool), np.ones((nx, ny + 1), bool)
    seen = np.zeros((nx, ny), bool)
    stack = [(int(rng.integers(nx)), int(rng.integers(ny)))]
    seen[stack[0]] = True
    while stack:
        i, j = stack[-1]
        nbs = [
            (i + di, j + dj)
            for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1))
            if 0 <= i + di < nx and 0 <= j + dj < ny and not seen[i + di, j + dj]
        ]
        if not nbs:
            stack.pop()
            continue
        a, b = nbs[int(rng.integers(len(nbs)))]
        if a != i:
            vert[max(a, i), j] = False
        else:
            horiz[i, max(b, j)] = False
        seen[a, b] = True
        stack.append((a, b))
    return vert, horiz


def _open_loops(
    rng: np.random.Generator, vert: np.ndarray, horiz: np.ndarray, fraction: float
) -> None:
    inner = [
        ("v", i, j) for i in range(1, vert.shape[0] - 1) for j in range(vert.shape[1]) if vert[i, j]
    ] + [
        ("h", i, j)
        for i in range(horiz.shape[0])
        for j in range(1, horiz.shape[1] - 1)
        if horiz[i, j]
    ]
    k = int(round(fraction * len(inner)))
    for idx in rng.choice(len(inner), size=k, replace=False) if k else []:
        kind, i, j = inner[int(idx)]
        (vert if kind == "v" else horiz)[i, j] = False


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) index of every run of True in a 1-D mask."""
    d = np.diff(np.concatenate([[0], mask.astype(int), [0]]))
    return list(zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1) - 1, strict=True))


def _wall_boxes(vert: np.ndarray, horiz: np.ndarray, p: MazeParams) -> list[Primitive]:
    c, t, h = p.cell, p.wall_thickness, p.height
    out: list[Primitive] = []
    for i in range(vert.shape[0]):
        for a, b in _runs(vert[i]):
            out.append(
                Box(
                    vec(i * c, (a + b + 1) * c / 2, h / 2),
                    vec(t, (b - a + 1) * c + t, h),
                    object_id=len(out) + 1,
                )
            )
    for j in range(horiz.shape[1]):
        for a, b in _runs(horiz[:, j]):
            out.append(
                Box(
                    vec((a + b + 1) * c / 2, j * c, h / 2),
                    vec((b - a + 1) * c + t, t, h),
                    object_id=len(out) + 1,
                )
            )
    return out


def maze(seed: int, p: MazeParams) -> SceneSpec:
    """A random perfect maze (plus a few loops), start in the first column, goal in the last."""
    rng = np.random.default_rng(seed)
    nx, ny = int(round(p.length / p.cell)), int(round(p.width / p.cell))
    vert, horiz = _carve(rng, nx, ny)
    _open_loops(rng, vert, horiz, p.loop_fraction)
    js = rng.integers(ny, size=2)
    start = vec(p.cell / 2, (js[0] + 0.5) * p.cell, p.flight_height)
    goal = vec((nx - 0.5) * p.cell, (js[1] + 0.5) * p.cell, p.flight_height)
    length, width = nx * p.cell, ny * p.cell
    walls = _wall_boxes(vert, horiz, p)
    size = (length, width, p.height)
    return finish("maze", seed, p, walls, start, goal, size=size, ceiling=p.height, cells=(nx, ny))


@dataclass(frozen=True)
class PerlinParams:
    """Random Perlin noise (III-B2): 40 m x 50 m, ceiling 4 m, noise frequency 0.05, voxel
    fill rate 0.03. Voxels whose fractal noise is in the top ``fill`` share become boxes."""

    length: Annotated[float, LENGTH] = 50.0  # m along x
    width: Annotated[float, WIDTH] = 40.0  # m along y
    ceiling: Annotated[float, CEILING] = 4.0  # m
    # cycles per voxel index of the base octave
    frequency: Annotated[float, Limit("base octave's cycles", "1/voxel", 0.0, 10.0)] = 0.05
    # share of voxels (below the ceiling) that are solid
    fill: Annotated[float, Limit("share of solid voxels", "1", 0.0, 1.0)] = 0.03
    voxel: Annotated[float, Limit("voxel edge", "m", 0.05, EXTENT)] = 0.5  # m
    # fractal octaves (lacunarity 2, gain 0.5)
    octaves: Annotated[int, Limit("fractal octaves", "1", 1, 16, integer=True)] = 4
    flight_height: Annotated[float, FLIGHT_HEIGHT] = 1.5  # m
    margin: Annotated[float, MARGIN] = 2.0  # m
    # m, voxels kept empty around start and goal
    clearance: Annotated[float, CLEARANCE] = 2.0
    vehicle_radius: Annotated[float, VEHICLE_RADIUS] = 0.3  # m
    check_resolution: Annotated[float, RESOLUTION] = 0.25  # m
    block_line: bool = True  # a noise blob always meets the reference line (Sec. V-A)
    # m, voxels forced solid around the point on the line
    blob_radius: Annotated[float, Limit("radius of the blob on the line", "m", 0.0, EXTENT)] = 0.75

    def check_rules(self, kind: str = "perlin") -> None:
        """Layout and grid, and a voxel lattice of at least one voxel per axis and at most
        ``LIMITS["lattice_cells"]`` voxels."""
        require_layout(kind, self, self.length, self.width, self.ceiling)
        sizes = {"length": self.length, "width": self.width, "ceiling": self.ceiling}
        _lattice(kind, "voxel", sizes, self.voxel)


def _top_voxels(noise: np.ndarray, k: int) -> np.ndarray:
    """Boolean grid of the ``k`` voxels with the highest noise (ties broken by index)."""
    solid = np.zeros(noise.size, bool)
    solid[np.argsort(-noise.ravel(), kind="stable")[:k]] = True
    return solid.reshape(noise.shape)


def perlin(seed: int, p: PerlinParams) -> SceneSpec:
    """Threshold seeded fractal Perlin noise at the fill quantile; merge voxel runs into boxes."""
    rng = np.random.default_rng(seed)
    start, goal = start_goal(rng, p.length, p.width, p.flight_height, p.margin)
    shape = tuple(int(round(s / p.voxel)) for s in (p.length, p.width, p.ceiling))
    idx = np.stack(np.meshgrid(*[np.arange(n) for n in shape], indexing="ij"), axis=-1)
    noise = fbm3(rng, idx * p.frequency, p.octaves)
    centers = (idx + 0.5) * p.voxel
    for q in (start, goal):  # keep-out: the voxel cube must stay beyond the clearance
        near = np.linalg.norm(centers - np.asarray(q), axis=-1) < p.clearance + p.voxel
        noise[near] = -np.inf
    k = int(round(p.fill * noise.size))
    boxes = merge_voxels(_top_voxels(noise, k), p.voxel)
    if p.block_line and not line_meets(boxes, start, goal):
        # the paper's obstacles stand along the straight reference line: when the noise left
        # it clear, the voxels around a point on it join the fill (the fill rate is unchanged:
        # they displace the weakest of the k selected voxels)
        blob = np.linalg.norm(centers - point_on_line(rng, start, goal), axis=-1)
        noise[blob < p.blob_radius] = np.inf
        boxes = merge_voxels(_top_voxels(noise, k), p.voxel)
    return finish("perlin", seed, p, boxes, start, goal, voxels=k, voxel_total=int(noise.size))


__all__ = [
    "MazeParams",
    "NarrowGapParams",
    "PerlinParams",
    "SuddenDropParams",
    "maze",
    "narrow_gap",
    "perlin",
    "sudden_drop",
]
