"""Occupancy grid of a SceneSpec for a spherical vehicle, and a 3-D grid search for solvability.

The grid has nodes at ``bounds_min + i * resolution`` (metres, world frame, z up) up to the
flight ceiling. A node is occupied when a sphere of the vehicle radius centred on it touches an
obstacle (distance <= radius), the floor/bounds (closer than radius) or the ceiling. Meshes are
rasterized by blocks of nodes against the triangles near them (unsigned distance <= radius)
plus, for closed meshes, the nodes inside (parity of triangle crossings above each node). The search
is a breadth-first wavefront over 6-connected free nodes (numpy, one frontier at a time), so a
found path is a chain of axis-aligned steps of one resolution between free nodes. Bounds outside
the world extent and grids of more than ``volary.inputs.LIMITS["grid_cells"]`` nodes are
refused before anything is allocated (:func:`grid_shape`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from volary.errors import ConfigError
from volary.inputs import LIMITS
from volary.worlds.io import check_extent
from volary.worlds.meshgeom import face_normals
from volary.worlds.primitives import (
    Box,
    Cylinder,
    Mesh,
    Plane,
    Primitive,
    SceneSpec,
    Sphere,
    gate_boxes,
    tilt_matrix,
)


def _box_distance(b: Box, p: np.ndarray) -> np.ndarray:
    """Signed distance (m) from points ``p (..., 3)`` to an oriented box."""
    c, s = np.cos(b.yaw), np.sin(b.yaw)
    d = p - np.asarray(b.center)
    local = np.stack(
        [c * d[..., 0] + s * d[..., 1], -s * d[..., 0] + c * d[..., 1], d[..., 2]], axis=-1
    )
    if b.tilt != (0.0, 0.0):
        local = local @ tilt_matrix(b.tilt)  # (tilt^T local) per point
    q = np.abs(local) - np.asarray(b.size) / 2
    outside = np.linalg.norm(np.maximum(q, 0.0), axis=-1)
    return outside + np.minimum(q.max(axis=-1), 0.0)


def _cylinder_distance(cy: Cylinder, p: np.ndarray) -> np.ndarray:
    """Signed distance (m) from points to a finite cylinder with any axis."""
    a = np.asarray(cy.axis)
    d = p - np.asarray(cy.center)
    t = d @ a
    radial = np.linalg.norm(d - t[..., None] * a, axis=-1)
    q = np.stack([radial - cy.radius, np.abs(t) - cy.length / 2], axis=-1)
    outside = np.linalg.norm(np.maximum(q, 0.0), axis=-1)
    return outside + np.minimum(q.max(axis=-1), 0.0)


def _mesh_distance(m: Mesh, p: np.ndarray, signed: bool = True) -> np.ndarray:
    """Distance (m) from points ``(..., 3)`` to a mesh: the batched torch mesh SDF in float64
    (brute force over triangles, chunked); unsigned when ``signed`` is False."""
    import torch

    from volary.worlds.sdf import mesh_sdf

    flat = torch.as_tensor(p.reshape(1, -1, 3), dtype=torch.float64)
    corners = torch.tensor(m.corners, dtype=torch.float64)[None]
    normals = torch.tensor(
        m.pseudo_normals if signed else np.zeros((len(m.triangles), 7, 3)), dtype=torch.float64
    )[None]
    valid = torch.ones(corners.shape[:2], dtype=torch.bool)
    d, _, _ = mesh_sdf(flat, corners, normals, valid, torch.zeros_like(valid, dtype=torch.int64))
    return d[0].numpy().reshape(p.shape[:-1])


def point_distance(prim: Primitive, points: np.ndarray) -> np.ndarray:
    """Signed distance (m) from points ``(..., 3)`` to one primitive (negative inside)."""
    p = np.asarray(points, dtype=float)
    if isinstance(prim, Box):
        return _box_distance(prim, p)
    if isinstance(prim, Cylinder):
        return _cylinder_distance(prim, p)
    if isinstance(prim, Sphere):
        return np.linalg.norm(p - np.asarray(prim.center), axis=-1) - prim.radius
    if isinstance(prim, Plane):
        return (p - np.asarray(prim.point)) @ np.asarray(prim.normal)
    if isinstance(prim, Mesh):
        return _mesh_distance(prim, p)
    raise ConfigError(f"point_distance: unsupported primitive {type(prim).__name__}")


def aabb(prim: Primitive) -> tuple[np.ndarray, np.ndarray] | None:
    """Axis-aligned bounds (m) of a primitive; None for an unbounded plane."""
    if isinstance(prim, Box):
        hx, hy, hz = (v / 2 for v in prim.size)
        if prim.tilt != (0.0, 0.0):
            ext = np.abs(prim.axes) @ np.array([hx, hy, hz])
        else:  # level: as before tilted boxes existed, to the last bit
            c, s = abs(np.cos(prim.yaw)), abs(np.sin(prim.yaw))
            ext = np.array([c * hx + s * hy, s * hx + c * hy, hz])
    elif isinstance(prim, Cylinder):
        a = np.asarray(prim.axis)
        ext = np.abs(a) * prim.length / 2 + prim.radius * np.sqrt(np.clip(1 - a * a, 0, 1))
    elif isinstance(prim, Sphere):
        ext = np.full(3, prim.radius)
    elif isinstance(prim, Mesh):
        return prim.bounds
    else:
        return None
    center = np.asarray(prim.center, dtype=float)
    return center - ext, center + ext


def solid_primitives(spec: SceneSpec) -> list[Primitive]:
    """Every obstacle of a spec, with gate frames expanded into their four bars."""
    return list(spec.obstacles) + [b for g in spec.gates for b in gate_boxes(g)]


def scene_distance(spec: SceneSpec, points: np.ndarray) -> np.ndarray:
    """Signed distance (m) from points to the nearest obstacle (``inf`` with none)."""
    p = np.asarray(points, dtype=float)
    out = np.full(p.shape[:-1], np.inf)
    for prim in solid_primitives(spec):
        out = np.minimum(out, point_distance(prim, p))
    return out


@dataclass(frozen=True)
class OccupancyGrid:
    """Boolean node grid; node (i, j, k) sits at ``origin + (i, j, k) * resolution``."""

    origin: np.ndarray  # (3,) m, world position of node (0, 0, 0)
    resolution: float  # m, node spacing on every axis
    occupied: np.ndarray  # (nx, ny, nz) bool, True where the vehicle sphere would collide
    radius: float  # m, vehicle radius the obstacles were inflated by

    def node(self, p: Iterable[float]) -> tuple[int, int, int]:
        """Index of the node nearest to a point, clipped into the grid."""
        idx = np.rint((np.asarray(p, dtype=float) - self.origin) / self.resolution)
        idx = np.clip(idx, 0, np.asarray(self.occupied.shape) - 1).astype(int)
        return int(idx[0]), int(idx[1]), int(idx[2])

    def position(self, idx: np.ndarray) -> np.ndarray:
        """World positions (m) of node indices ``(..., 3)``."""
        return self.origin + np.asarray(idx, dtype=float) * self.resolution

    @property
    def free_fraction(self) -> float:
        return float(1.0 - self.occupied.mean())


def _real(x: object) -> bool:
    """A finite real number (not a bool)."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)


def grid_box(spec: SceneSpec) -> tuple[np.ndarray, np.ndarray]:
    """The box an occupancy grid of ``spec`` covers: its bounds, cut at the flight ceiling.
    Refuses (ConfigError naming the scene and the coordinate) bounds or a ceiling outside the
    world extent (``LIMITS["coordinate"]``), a NaN ceiling and one at or below the floor."""
    lo = np.asarray(spec.bounds_min, dtype=float)
    hi = np.asarray(spec.bounds_max, dtype=float)
    check_extent(spec.name, lo, "bounds_min", ConfigError)
    check_extent(spec.name, hi, "bounds_max", ConfigError)
    ceiling = float(spec.flight_ceiling)
    if math.isnan(ceiling):
        raise ConfigError(f"{spec.name}: ceiling: expected a number of metres, got nan")
    hi[2] = min(hi[2], ceiling)
    if hi[2] <= lo[2]:
        raise ConfigError(f"{spec.name}: flight ceiling {ceiling} m is below the floor")
    return lo, hi


def grid_shape(spec: SceneSpec, resolution: float) -> tuple[int, int, int]:
    """Nodes along x, y, z of the occupancy grid of ``spec`` at ``resolution`` (m); refuses,
    before anything is allocated, a grid of more than ``LIMITS["grid_cells"]`` nodes with a
    ConfigError naming the resolution, the extent and the finest resolution that fits."""
    if not (_real(resolution) and resolution > 0):
        raise ConfigError(f"resolution: expected a finite number > 0 m, got {resolution!r}")
    lo, hi = grid_box(spec)
    size = hi - lo
    n = _nodes(size, resolution)
    cells, cap = float(np.prod(n)), LIMITS["grid_cells"]
    if not cells <= cap.hi:
        fits = _finest(size, cap.hi)
        raise ConfigError(
            f"{spec.name}: resolution {resolution:g} m over the extent "
            f"{size[0]:g} x {size[1]:g} x {size[2]:g} m needs {cells:.3g} grid nodes; expected "
            f"at most {cap.hi:.0f} ({cap.quantity}): use a resolution >= {fits:.2g} m or "
            f"smaller bounds"
        )
    return int(n[0]), int(n[1]), int(n[2])


def _nodes(size: np.ndarray, resolution: float) -> np.ndarray:
    """Nodes per axis as floats (no integer overflow before the limit is checked)."""
    return np.floor(size / resolution + 1e-9) + 1


def _finest(size: np.ndarray, cells: float) -> float:
    """The finest resolution (m), rounded up to two significant digits, whose grid over
    ``size`` has at most ``cells`` nodes."""
    r = float(np.prod(size) / cells) ** (1 / 3)
    while True:
        step = 10 ** (math.floor(math.log10(r)) - 1)
        r = math.ceil(r / step * (1 - 1e-12)) * step
        if float(np.prod(_nodes(size, r))) <= cells:
            return r
        r *= 1.01


def _axes(spec: SceneSpec, resolution: float) -> list[np.ndarray]:
    n = grid_shape(spec, resolution)
    lo = np.asarray(spec.bounds_min, dtype=float)
    return [lo[i] + np.arange(n[i]) * resolution for i in range(3)]


_SLAB = 1 << 22  # nodes whose distance is computed at once when marking a primitive


def _mark(occ: np.ndarray, axes: list[np.ndarray], prim: Primitive, radius: float) -> None:
    """Mark the nodes within ``radius`` of a primitive: those in its inflated bounds (all of
    them for a plane), by slabs of about :data:`_SLAB` nodes (a few tens of MB at a time)."""
    box = aabb(prim)
    sl = []
    for i, ax in enumerate(axes):
        if box is None:
            sl.append(slice(0, len(ax)))
            continue
        i0 = int(np.searchsorted(ax, box[0][i] - radius - 1e-9, side="left"))
        i1 = int(np.searchsorted(ax, box[1][i] + radius + 1e-9, side="right"))
        if i1 <= i0:
            return
        sl.append(slice(i0, i1))
    ys, zs = axes[1][sl[1]], axes[2][sl[2]]
    step = max(1, _SLAB // max(1, len(ys) * len(zs)))
    for x0 in range(sl[0].start, sl[0].stop, step):
        x1 = min(x0 + step, sl[0].stop)
        pts = np.stack(np.meshgrid(axes[0][x0:x1], ys, zs, indexing="ij"), axis=-1)
        occ[x0:x1, sl[1], sl[2]] |= point_distance(prim, pts) <= radius


_BLOCK = 8  # nodes per block edge when rasterizing meshes


def _column_parity(m: Mesh, xs: np.ndarray, ys: np.ndarray, zs: np.ndarray) -> np.ndarray:
    """(len(xs), len(ys), len(zs)) bool: an odd number of the mesh's triangles cross the
    vertical line through the node above it (inside a closed mesh). Triangles are oriented
    counter-clockwise in x-y and a column on a shared edge is counted by one triangle only (the
    top-left rule of rasterizers), so edges and vertices are not counted twice."""
    c = m.corners
    area = (c[:, 1, 0] - c[:, 0, 0]) * (c[:, 2, 1] - c[:, 0, 1]) - (c[:, 2, 0] - c[:, 0, 0]) * (
        c[:, 1, 1] - c[:, 0, 1]
    )
    c = np.where((area < 0)[:, None, None], c[:, [0, 2, 1]], c)[area != 0]
    out = np.zeros((len(xs), len(ys), len(zs)), dtype=bool)
    lo, hi = c.min(axis=1), c.max(axis=1)
    for i0 in range(0, len(xs), _BLOCK):
        for j0 in range(0, len(ys), _BLOCK):
            bx, by = xs[i0 : i0 + _BLOCK], ys[j0 : j0 + _BLOCK]
            sel = (
                (lo[:, 0] <= bx[-1])
                & (hi[:, 0] >= bx[0])
                & (lo[:, 1] <= by[-1])
                & (hi[:, 1] >= by[0])
            )
            if not sel.any():
                continue
            px, py = np.meshgrid(bx, by, indexing="ij")
            zc, hit = _vertical_hits(c[sel], px.ravel(), py.ravel())  # (C, K)
            above = (hit[..., None] & (zc[..., None] > zs)).sum(axis=1) % 2 == 1
            out[i0 : i0 + _BLOCK, j0 : j0 + _BLOCK] = above.reshape(len(bx), len(by), len(zs))
    return out


def _vertical_hits(c: np.ndarray, px: np.ndarray, py: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Heights (C, K) where the vertical lines through (px, py) (C,) cross the counter-clockwise
    (in x-y) triangles ``c (K, 3, 3)``, and whether they do (top-left rule on edges)."""
    inside = np.ones((len(px), len(c)), dtype=bool)
    w = []
    for k in range(3):
        a, b = c[:, k], c[:, (k + 1) % 3]
        dx, dy = b[:, 0] - a[:, 0], b[:, 1] - a[:, 1]
        e = dx * (py[:, None] - a[:, 1]) - dy * (px[:, None] - a[:, 0])
        top_left = (dy < 0) | ((dy == 0) & (dx < 0))
        inside &= (e > 0) | ((e == 0) & top_left)
        w.append(e)
    # barycentric weight of vertex k is the edge function of the opposite edge
    tot = w[0] + w[1] + w[2]
    tot = np.where(tot == 0, 1.0, tot)
    z = (w[1] * c[:, 0, 2] + w[2] * c[:, 1, 2] + w[0] * c[:, 2, 2]) / tot
    return z, inside


_PAIRS = 1 << 22  # (node, triangle) pairs tested at once when rasterizing a mesh


def _node_ranges(
    axes: list[np.ndarray], lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """First node index (T, 3) and node count (T, 3) of each box [lo, hi] on the grid axes."""
    first = np.stack([np.searchsorted(a, lo[:, i], "left") for i, a in enumerate(axes)], 1)
    last = np.stack([np.searchsorted(a, hi[:, i], "right") for i, a in enumerate(axes)], 1)
    return first, np.maximum(last - first, 0)


def _mark_band(occ: np.ndarray, axes: list[np.ndarray], corners: np.ndarray, radius: float) -> None:
    """Mark nodes within ``radius`` of any triangle: every (node, triangle) pair with the node
    in the triangle's bounds inflated by ``radius``, tested in chunks of :data:`_PAIRS`."""
    import torch

    from volary.worlds.sdf import closest_on_triangle

    first, count = _node_ranges(
        axes, corners.min(axis=1) - radius - 1e-9, corners.max(axis=1) + radius + 1e-9
    )
    per = count.prod(axis=1)
    tri = np.flatnonzero(per)
    normal, _ = face_normals(corners)  # zero for degenerate triangles: no plane filter
    ends = np.cumsum(per[tri])
    start = 0
    while start < len(tri):
        base = ends[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, base + _PAIRS, "right")))
        ts = tri[start:stop]
        rep = np.repeat(ts, per[ts])
        k = np.arange(len(rep)) - np.repeat(np.cumsum(per[ts]) - per[ts], per[ts])
        ny, nz = count[rep, 1], count[rep, 2]
        idx = first[rep] + np.stack([k // (ny * nz), (k // nz) % ny, k % nz], axis=1)
        pts = np.stack([axes[i][idx[:, i]] for i in range(3)], axis=1)
        keep = np.abs(np.einsum("ij,ij->i", pts - corners[rep, 0], normal[rep])) <= radius
        rep, idx, pts = rep[keep], idx[keep], pts[keep]  # off the plane by more than radius
        t = torch.as_tensor(corners[rep])
        q, _ = closest_on_triangle(torch.as_tensor(pts), t[:, 0], t[:, 1], t[:, 2])
        near = (torch.as_tensor(pts) - q).norm(dim=-1).numpy() <= radius
        occ[tuple(idx[near].T)] = True
        start = stop


def _mark_mesh(occ: np.ndarray, axes: list[np.ndarray], m: Mesh, radius: float) -> None:
    """Nodes within ``radius`` of the surface (each triangle against the nodes in its inflated
    bounds), plus, for a closed mesh, the nodes inside it (column parity)."""
    _mark_band(occ, axes, m.corners, radius)
    if m.closed:
        blo, bhi = m.bounds
        sl = [
            slice(int(np.searchsorted(a, blo[i], "left")), int(np.searchsorted(a, bhi[i], "right")))
            for i, a in enumerate(axes)
        ]
        if all(s.stop > s.start for s in sl):
            occ[sl[0], sl[1], sl[2]] |= _column_parity(
                m, axes[0][sl[0]], axes[1][sl[1]], axes[2][sl[2]]
            )


def occupancy_grid(spec: SceneSpec, radius: float, resolution: float = 0.25) -> OccupancyGrid:
    """Rasterize a spec for a sphere of ``radius`` (m) at node spacing ``resolution`` (m)."""
    if not (_real(radius) and radius >= 0):
        raise ConfigError(f"radius: expected a finite number >= 0 m, got {radius!r}")
    axes = _axes(spec, resolution)
    occ = np.zeros([len(a) for a in axes], dtype=bool)
    lo, hi = grid_box(spec)
    for i, ax in enumerate(axes):  # bounds, floor and ceiling: keep the sphere inside
        bad = (ax < lo[i] + radius - 1e-9) | (ax > hi[i] - radius + 1e-9)
        occ[(slice(None),) * i + (bad,)] = True
    for prim in solid_primitives(spec):
        if isinstance(prim, Mesh):
            _mark_mesh(occ, axes, prim, radius)
        else:
            _mark(occ, axes, prim, radius)
    return OccupancyGrid(lo, float(resolution), occ, float(radius))


_STEPS = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]])


def _bfs_distance(
    free: np.ndarray, start: tuple[int, int, int], goal: tuple[int, int, int]
) -> np.ndarray:
    """Hop count from start over 6-connected free nodes (-1: unreached), stopping at goal."""
    padded = np.zeros(np.asarray(free.shape) + 2, dtype=bool)
    padded[1:-1, 1:-1, 1:-1] = free
    shape = padded.shape
    flat_free = padded.ravel()
    dist = np.full(flat_free.size, -1, dtype=np.int32)
    strides = np.array([shape[1] * shape[2], shape[2], 1])
    offsets = _STEPS @ strides
    s = int(np.dot(np.asarray(start) + 1, strides))
    g = int(np.dot(np.asarray(goal) + 1, strides))
    dist[s] = 0
    frontier = np.array([s])
    claim = np.empty(flat_free.size, dtype=np.int64)  # which entry of nb a node kept
    d = 0
    while frontier.size and dist[g] < 0:
        d += 1
        nb = (frontier[:, None] + offsets[None, :]).ravel()
        nb = nb[flat_free[nb] & (dist[nb] < 0)]
        dist[nb] = d
        # each node once in the next frontier (np.unique sorts: 3x slower; the order of a
        # frontier does not change any distance)
        idx = np.arange(nb.size)
        claim[nb] = idx
        frontier = nb[claim[nb] == idx]
    return dist.reshape(shape)[1:-1, 1:-1, 1:-1]


def _backtrack(dist: np.ndarray, goal: tuple[int, int, int]) -> np.ndarray:
    path = [np.asarray(goal)]
    cur = np.asarray(goal)
    for d in range(int(dist[goal]) - 1, -1, -1):
        for step in _STEPS:
            nb = cur + step
            if np.all(nb >= 0) and np.all(nb < dist.shape) and dist[tuple(nb)] == d:
                cur = nb
                break
        path.append(cur)
    return np.asarray(path[::-1])


@dataclass(frozen=True)
class SearchResult:
    """Outcome of a solvability search."""

    solvable: bool
    path: np.ndarray | None  # (K, 3) m, start, grid nodes, goal; None when unsolvable
    grid: OccupancyGrid
    reason: str = ""  # why it failed, empty when solvable


def _free_node(grid: OccupancyGrid, p: np.ndarray) -> tuple[int, int, int] | None:
    """A free node next to a point: the nearest node or one of its 26 neighbours."""
    base = np.rint((p - grid.origin) / grid.resolution).astype(int)
    best, best_d = None, np.inf
    for off in np.ndindex(3, 3, 3):
        idx = base + np.asarray(off) - 1
        if np.any(idx < 0) or np.any(idx >= grid.occupied.shape) or grid.occupied[tuple(idx)]:
            continue
        d = float(np.linalg.norm(grid.position(idx) - p))
        if d < best_d:
            best, best_d = (int(idx[0]), int(idx[1]), int(idx[2])), d
    return best


def find_path(spec: SceneSpec, radius: float, resolution: float = 0.25) -> SearchResult:
    """Grid search from ``spec.start`` to ``spec.goal`` for a sphere of ``radius`` (m)."""
    grid = occupancy_grid(spec, radius, resolution)
    for name in ("start", "goal"):
        p = np.asarray(getattr(spec, name), dtype=float)
        if float(scene_distance(spec, p[None])[0]) <= radius:
            return SearchResult(
                False, None, grid, f"{name} {tuple(p)} is within {radius} m of an obstacle"
            )
    start, goal = (_free_node(grid, np.asarray(p, dtype=float)) for p in (spec.start, spec.goal))
    if start is None or goal is None:
        return SearchResult(False, None, grid, "no free grid node next to start or goal")
    dist = _bfs_distance(~grid.occupied, start, goal)
    if dist[goal] < 0:
        return SearchResult(False, None, grid, "goal not reachable on the grid")
    nodes = grid.position(_backtrack(dist, goal))
    path = np.vstack([np.asarray(spec.start)[None], nodes, np.asarray(spec.goal)[None]])
    return SearchResult(True, path, grid)


def is_solvable(spec: SceneSpec, radius: float, resolution: float = 0.25) -> bool:
    """True when a collision-free grid path exists for a sphere of ``radius`` (m)."""
    return find_path(spec, radius, resolution).solvable
