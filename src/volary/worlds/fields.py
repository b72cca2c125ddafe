"""Height fields and voxel grids: plain-data constructors that turn into ordinary primitives.

They are not primitives of their own. A :class:`HeightField` becomes one closed :class:`Mesh`
(top surface, a skirt down to ``floor`` and a flat bottom grid) and a :class:`VoxelGrid` becomes
axis-aligned :class:`Box` obstacles (runs of occupied voxels merged greedily). Every query
(signed distance, collisions, occupancy grid, export, ray casting) therefore sees them through
code that is already tested, and the SDF stays exact: closed-mesh distance for the terrain and
the analytic box distance for voxels (exact outside; inside, the depth to the nearest merged
box face, which may underestimate the depth to the surface of the union).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from volary.errors import ConfigError
from volary.worlds.primitives import Box, Mesh

MAX_VOXELS = 1 << 26  # cells of a dense voxel grid (64 Mi, 64 MiB of bools)


def _array(who: str, name: str, value: object, ndim: int, dtype: type) -> np.ndarray:
    try:
        a: np.ndarray = np.array(value, dtype=dtype)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{who}.{name}: expected a numeric array ({e})") from e
    if a.ndim != ndim:
        raise ConfigError(f"{who}.{name}: expected {ndim} dims, got shape {a.shape}")
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class HeightField:
    """Terrain heights (m) on a regular x-y grid: ``heights[i, j]`` is the surface height at
    ``(origin[0] + i * spacing[0], origin[1] + j * spacing[1])``; linear over the two triangles
    of each cell. ``floor`` (m, below every height; default ``min(heights) - 1``) closes the
    solid underneath."""

    origin: tuple[float, float]  # m, x-y of heights[0, 0]
    spacing: tuple[float, float]  # m, grid step along x and y
    heights: np.ndarray  # (nx, ny) m, nx, ny >= 2
    floor: float | None = None
    object_id: int = 0
    name: str = ""

    def __post_init__(self) -> None:
        h = _array("HeightField", "heights", self.heights, 2, float)
        if min(h.shape) < 2 or not np.all(np.isfinite(h)):
            raise ConfigError(
                f"HeightField.heights: expected a finite (nx, ny) grid with "
                f"nx, ny >= 2, got shape {h.shape}"
            )
        sp = tuple(float(s) for s in np.broadcast_to(self.spacing, (2,)))
        if not all(np.isfinite(s) and s > 0 for s in sp):
            raise ConfigError(f"HeightField.spacing: expected two values > 0 m, got {sp}")
        org = tuple(float(o) for o in self.origin)
        if len(org) != 2 or not np.all(np.isfinite(org)):
            raise ConfigError(f"HeightField.origin: expected finite (x, y), got {self.origin}")
        fl = float(h.min() - 1.0) if self.floor is None else float(self.floor)
        if not fl < h.min():
            raise ConfigError(
                f"HeightField.floor: expected below the lowest height {h.min()} m, got {fl}"
            )
        for k, v in (("heights", h), ("spacing", sp), ("origin", org), ("floor", fl)):
            object.__setattr__(self, k, v)

    def to_mesh(self) -> Mesh:
        """The closed terrain solid: 2 top triangles per cell (counter-clockwise from above),
        2 skirt triangles per boundary cell edge and the same grid, flat at ``floor`` and
        facing down, as the bottom (small triangles keep the grid rasterization cheap)."""
        h = self.heights
        nx, ny = h.shape
        xs = self.origin[0] + self.spacing[0] * np.arange(nx)
        ys = self.origin[1] + self.spacing[1] * np.arange(ny)
        gx, gy = np.meshgrid(xs, ys, indexing="ij")
        top = np.stack([gx.ravel(), gy.ravel(), h.ravel()], axis=1)  # index i * ny + j
        idx = np.arange(nx * ny).reshape(nx, ny)
        a, b, c, d = idx[:-1, :-1], idx[1:, :-1], idx[1:, 1:], idx[:-1, 1:]
        tris = [np.stack([a, b, c], -1).reshape(-1, 3), np.stack([a, c, d], -1).reshape(-1, 3)]
        loop = np.concatenate([idx[:, 0], idx[-1, 1:], idx[-2::-1, -1], idx[0, -2:0:-1]])
        n = len(top)
        u, w = loop, np.roll(loop, -1)  # counter-clockwise boundary edges u -> w (from above)
        u2, w2 = u + n, w + n  # the same edges on the floor copy of the grid
        tris += [
            np.stack([u2, w2, w], 1),  # skirt, facing out of the boundary
            np.stack([u2, w, u], 1),
            np.stack([a, c, b], -1).reshape(-1, 3) + n,  # bottom, facing down
            np.stack([a, d, c], -1).reshape(-1, 3) + n,
        ]
        bottom = top * [1.0, 1.0, 0.0] + [0.0, 0.0, self.floor]
        return Mesh(np.vstack([top, bottom]), np.vstack(tris), self.object_id, self.name)

    def height_at(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Surface height (m) at points inside the grid, interpolated on the same triangles as
        :meth:`to_mesh` (split along the cell diagonal from (i, j) to (i + 1, j + 1))."""
        fx = (np.asarray(x, float) - self.origin[0]) / self.spacing[0]
        fy = (np.asarray(y, float) - self.origin[1]) / self.spacing[1]
        nx, ny = self.heights.shape
        i = np.clip(np.floor(fx).astype(int), 0, nx - 2)
        j = np.clip(np.floor(fy).astype(int), 0, ny - 2)
        u, v = fx - i, fy - j
        h = self.heights
        h00, h10, h11, h01 = h[i, j], h[i + 1, j], h[i + 1, j + 1], h[i, j + 1]
        lower = h00 + u * (h10 - h00) + v * (h11 - h10)  # triangle (i,j) (i+1,j) (i+1,j+1)
        upper = h00 + v * (h01 - h00) + u * (h11 - h01)  # triangle (i,j) (i+1,j+1) (i,j+1)
        return np.where(u >= v, lower, upper)


@dataclass(frozen=True, eq=False)
class VoxelGrid:
    """Occupied voxels: cell (i, j, k) is the cube ``origin + [i, i+1] x [j, j+1] x [k, k+1]
    * voxel`` (m)."""

    origin: tuple[float, float, float]  # m, min corner of cell (0, 0, 0)
    voxel: float  # m, cube edge
    occupied: np.ndarray  # (nx, ny, nz) bool
    object_id: int = 0
    name: str = ""

    def __post_init__(self) -> None:
        occ = _array("VoxelGrid", "occupied", self.occupied, 3, bool)
        org = tuple(float(o) for o in self.origin)
        if len(org) != 3 or not np.all(np.isfinite(org)):
            raise ConfigError(f"VoxelGrid.origin: expected finite (x, y, z), got {self.origin}")
        if not (np.isfinite(self.voxel) and self.voxel > 0):
            raise ConfigError(f"VoxelGrid.voxel: expected > 0 m, got {self.voxel}")
        object.__setattr__(self, "occupied", occ)
        object.__setattr__(self, "origin", org)
        object.__setattr__(self, "voxel", float(self.voxel))

    @staticmethod
    def from_points(
        points: np.ndarray, voxel: float, object_id: int = 0, name: str = ""
    ) -> VoxelGrid:
        """The cells that hold at least one of ``points (P, 3)`` (finite, within the world
        extent, P >= 1), on a grid aligned to multiples of ``voxel`` (m). Refuses grids above
        :data:`MAX_VOXELS` cells before allocating them."""
        from volary.worlds.io import check_extent

        p = np.asarray(points, dtype=float)
        if p.ndim != 2 or p.shape[1] != 3 or len(p) == 0 or not np.all(np.isfinite(p)):
            raise ConfigError(f"points: expected finite (P, 3) with P >= 1, got {p.shape}")
        check_extent("points", p, "point", ConfigError)
        if not (np.isfinite(voxel) and voxel > 0):
            raise ConfigError(f"voxel: expected > 0 m, got {voxel}")
        cell = np.floor(p / voxel)  # float until the size is known: no int64 overflow
        lo = cell.min(axis=0)
        shape = cell.max(axis=0) - lo + 1
        if not float(np.prod(shape)) <= MAX_VOXELS:
            raise ConfigError(
                f"voxel: {voxel:g} m gives a {' x '.join(f'{s:.3g}' for s in shape)} grid "
                f"(more than {MAX_VOXELS} cells); use a larger voxel"
            )
        if not np.abs(cell).max() < 2**52:  # cell indices exact in float64
            raise ConfigError(f"voxel: {voxel:g} m is too small for coordinates of the points")
        occ = np.zeros(tuple(shape.astype(np.int64)), dtype=bool)
        occ[tuple((cell - lo).astype(np.int64).T)] = True
        org = lo * voxel
        return VoxelGrid((float(org[0]), float(org[1]), float(org[2])), voxel, occ, object_id, name)

    def to_boxes(self) -> tuple[Box, ...]:
        """Occupied voxels merged into axis-aligned boxes (runs along x, then y, then z), each
        with this grid's object id; empty when no voxel is occupied."""
        from volary.worlds.scenarios_noise import merge_voxels

        out = []
        for b in merge_voxels(self.occupied, self.voxel):
            assert isinstance(b, Box)  # merge_voxels only makes boxes (internal invariant)
            c = np.asarray(b.center) + self.origin
            out.append(
                replace(b, center=(float(c[0]), float(c[1]), float(c[2])), object_id=self.object_id)
            )
        return tuple(out)


__all__ = ["MAX_VOXELS", "HeightField", "VoxelGrid"]
