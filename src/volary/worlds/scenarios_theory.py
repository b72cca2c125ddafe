"""FLYINGTRUST theoretical scenarios (Sec. III-B2): narrow gap, sudden drop, maze, Perlin noise.

Flight direction +x, width along y, floor z = 0. Where a count rises "from Scenario 1 to
Scenario 10" it is ``first + step * (seed % 10)`` unless given explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from volary.worlds.primitives import Box, Primitive, SceneSpec
from volary.worlds.scenarios_common import (
    clear_of,
    config_index,
    finish,
    line_meets,
    point_on_line,
    start_goal,
    vec,
)
from volary.worlds.scenarios_noise import fbm3, merge_voxels


@dataclass(frozen=True)
class NarrowGapParams:
    """Narrow gap (III-B2): 50 m x 50 m, ceiling 4 m, gap widths 0.85-0.9 m, gap count rising
    with the configuration index. Each gap is a full-height slot in a wall across the path."""

    length: float = 50.0  # m along x
    width: float = 50.0  # m along y
    ceiling: float = 4.0  # m; walls reach it, so every wall must be passed through its gap
    gap_width: tuple[float, float] = (0.85, 0.9)  # m
    gaps: int | None = None  # None: gaps_first + gaps_step * (seed % 10)
    gaps_first: int = 1
    gaps_step: int = 1
    wall_thickness: float = 0.3  # m
    first_wall: float = 8.0  # m, x of the first and (mirrored) last wall from the ends
    min_offset: float = 4.0  # m, lateral shift between consecutive gaps (forces yaw/lateral)
    gap_snap: float = 0.5  # m, gap centres on this lattice from y = 0 (grid-aligned check)
    flight_height: float = 1.5  # m
    margin: float = 2.0  # m
    vehicle_radius: float = 0.3  # m
    check_resolution: float = 0.25  # m


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
        while True:
            yc = round(rng.uniform(3.0, p.width - 3.0) / p.gap_snap) * p.gap_snap
            if prev is None or abs(yc - prev) >= p.min_offset:
                break
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

    length: float = 50.0  # m along x
    width: float = 50.0  # m along y
    height: float = 14.0  # m, top of the volume (obstacles hang from it)
    ceiling: float = 4.0  # m
    bottom: float = 1.5  # m, lowest obstacle point
    start_height: float = 2.5  # m
    obstacles: int | None = None  # None: obstacles_first + obstacles_step * (seed % 10)
    obstacles_first: int = 2
    obstacles_step: int = 2
    depth: tuple[float, float] = (2.0, 6.0)  # m along x (not published)
    span: tuple[float, float] = (10.0, 50.0)  # m along y (not published)
    margin: float = 2.0  # m
    clearance: float = 3.0  # m kept free around start and goal
    vehicle_radius: float = 0.3  # m
    check_resolution: float = 0.25  # m
    block_line: bool = True  # a slab always hangs across the reference line (Sec. V-A)


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
    while len(out) < n:
        slab = _slab(rng, p, len(out) + 1)
        if clear_of(slab, [start, goal], p.clearance):
            out.append(slab)
    if p.block_line and out and not line_meets(out, start, goal):
        # obstacles stand along the straight reference line in the paper: when the uniform
        # draw left it clear, the last slab is redrawn hanging across it (count unchanged)
        out[-1] = _slab(rng, p, len(out), at=point_on_line(rng, start, goal))
    return finish("sudden_drop", seed, p, out, start, goal, size=(p.length, p.width, p.height))


@dataclass(frozen=True)
class MazeParams:
    """Maze (III-B2): 25 m x 40 m labyrinth, flight height limited to 2 m, random layouts
    (depth-first backtracker on square cells, a few extra walls removed to make loops)."""

    length: float = 40.0  # m along x
    width: float = 25.0  # m along y
    height: float = 2.0  # m, wall height and ceiling
    cell: float = 2.5  # m, corridor pitch
    wall_thickness: float = 0.2  # m
    loop_fraction: float = 0.05  # share of the remaining inner walls removed
    flight_height: float = 1.0  # m
    vehicle_radius: float = 0.3  # m
    check_resolution: float = 0.25  # m


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

    length: float = 50.0  # m along x
    width: float = 40.0  # m along y
    ceiling: float = 4.0  # m
    frequency: float = 0.05  # cycles per voxel index of the base octave
    fill: float = 0.03  # share of voxels (below the ceiling) that are solid
    voxel: float = 0.5  # m, voxel edge
    octaves: int = 4  # fractal octaves (lacunarity 2, gain 0.5)
    flight_height: float = 1.5  # m
    margin: float = 2.0  # m
    clearance: float = 2.0  # m, voxels kept empty around start and goal
    vehicle_radius: float = 0.3  # m
    check_resolution: float = 0.25  # m
    block_line: bool = True  # a noise blob always meets the reference line (Sec. V-A)
    blob_radius: float = 0.75  # m, voxels forced solid around the point on the line


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
