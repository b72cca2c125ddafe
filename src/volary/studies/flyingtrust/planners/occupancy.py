"""Occupancy grid with an incrementally stamped, truncated Euclidean distance field.

Used by the ``mapper`` planner (:mod:`volary.studies.flyingtrust.planners.mapper`). The grid
covers the flight volume ``[bounds_min, bounds_max]`` with cubic voxels of edge ``resolution``
(m); voxel (i, j, k) has its centre at ``bounds_min + (i + 1/2, j + 1/2, k + 1/2) resolution``.

- ``occupied`` (uint8): 1 where a depth return has fallen. Unknown space counts as free
  (optimistic planning, as EGO-Planner and Fast-Planner do); nothing is ever carved free.
- ``dist_cm`` (uint8): the distance (cm) from the voxel centre to the nearest occupied voxel
  centre, truncated at ``truncation`` m (<= 2.5 m, 255 = "far"). Each newly occupied voxel
  stamps min(dist, |offset|) over a precomputed ball of offsets, so the field is the exact
  Euclidean distance transform of the occupied centres within the truncation radius, kept up
  to date at a cost proportional to the number of *new* voxels (no full transform per frame;
  ``scipy.ndimage.distance_transform_edt`` of the same grid is the reference in the tests).
- The floor, the ceiling and the lateral bounds are not stored: :func:`clearance_cm` adds them
  analytically (distance of the voxel centre to each face of the volume).

Depth fusion back-projects the pixels of a z-depth image through the pinhole of
:class:`~volary.planning.navigation.DepthCameraInfo` (pixel centres u = j + 1/2, the convention
of ``volary.sensors.rays.pinhole_rays``): p_C = z ((u - c_x)/f_x, (v - c_y)/f_y, 1), then
p_W = p + R_WB (t_BC + R_BC p_C).
"""

from __future__ import annotations

import copy
import math

import numba
import numpy as np

from volary.errors import ConfigError
from volary.planning.navigation import DepthCameraInfo

FAR_CM = 255  # dist_cm value meaning "no occupied voxel within the truncation radius"


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """(3, 3) rotation of a unit quaternion [w, x, y, z] (Hamilton, body-to-world)."""
    w, x, y, z = (float(v) for v in np.asarray(q, dtype=np.float64) / np.linalg.norm(q))
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def ball_offsets(radius_vox: float) -> tuple[np.ndarray, np.ndarray]:
    """Integer offsets (M, 3) within ``radius_vox`` voxels and their lengths (M,) in voxels."""
    r = int(math.floor(radius_vox))
    ax = np.arange(-r, r + 1)
    off = np.stack(np.meshgrid(ax, ax, ax, indexing="ij"), -1).reshape(-1, 3)
    length = np.sqrt((off.astype(np.float64) ** 2).sum(-1))
    keep = length <= radius_vox + 1e-9
    return off[keep].astype(np.int64), length[keep]


@numba.njit(cache=True, nogil=True)
def _stamp(dist, cells, offsets, off_cm):  # pragma: no cover - compiled
    nx, ny, nz = dist.shape
    for c in range(cells.shape[0]):
        ci, cj, ck = cells[c, 0], cells[c, 1], cells[c, 2]
        for m in range(offsets.shape[0]):
            i = ci + offsets[m, 0]
            j = cj + offsets[m, 1]
            k = ck + offsets[m, 2]
            if i < 0 or j < 0 or k < 0 or i >= nx or j >= ny or k >= nz:
                continue
            if off_cm[m] < dist[i, j, k]:
                dist[i, j, k] = off_cm[m]


@numba.njit(cache=True, nogil=True)
def _block(dist, cells, offsets):  # pragma: no cover - compiled
    nx, ny, nz = dist.shape
    for c in range(cells.shape[0]):
        for m in range(offsets.shape[0]):
            i = cells[c, 0] + offsets[m, 0]
            j = cells[c, 1] + offsets[m, 1]
            k = cells[c, 2] + offsets[m, 2]
            if 0 <= i < nx and 0 <= j < ny and 0 <= k < nz:
                dist[i, j, k] = 0


@numba.njit(cache=True, nogil=True)
def _insert(occ, dist, pts, lo, res, offsets, off_cm):  # pragma: no cover - compiled
    """Occupy the voxels (floor((p - lo) / res), inside the grid) of points (P, 3) and stamp
    each newly occupied one into the field; returns how many were new. The field is a minimum
    over the occupied voxels, so the order of the stamps does not change it."""
    nx, ny, nz = occ.shape
    cell = np.empty((1, 3), np.int64)
    new = 0
    for m in range(pts.shape[0]):
        vi = (pts[m, 0] - lo[0]) / res
        vj = (pts[m, 1] - lo[1]) / res
        vk = (pts[m, 2] - lo[2]) / res
        if not (0.0 <= vi < nx and 0.0 <= vj < ny and 0.0 <= vk < nz):
            continue
        i, j, k = np.int64(np.floor(vi)), np.int64(np.floor(vj)), np.int64(np.floor(vk))
        if occ[i, j, k]:
            continue
        occ[i, j, k] = 1
        new += 1
        cell[0, 0], cell[0, 1], cell[0, 2] = i, j, k
        _stamp(dist, cell, offsets, off_cm)
    return new


class OccupancyGrid:
    """Voxel occupancy over the flight volume plus its truncated distance field (see module)."""

    def __init__(
        self,
        bounds_min: np.ndarray,
        bounds_max: np.ndarray,
        resolution: float = 0.2,
        truncation: float = 2.0,
    ) -> None:
        lo = np.asarray(bounds_min, dtype=np.float64).reshape(-1)
        hi = np.asarray(bounds_max, dtype=np.float64).reshape(-1)
        if lo.shape != (3,) or hi.shape != (3,) or not np.all(np.isfinite(np.r_[lo, hi])):
            raise ConfigError(f"bounds: expected two finite (3,) vectors, got {lo} and {hi}")
        if not np.all(hi > lo):
            raise ConfigError(f"bounds: expected bounds_max > bounds_min, got {lo} and {hi}")
        if not (math.isfinite(resolution) and resolution > 0):
            raise ConfigError(f"resolution: expected a voxel edge > 0 m, got {resolution}")
        if not (resolution <= truncation <= 2.5):
            raise ConfigError(f"truncation: expected resolution..2.5 m, got {truncation}")
        shape = np.ceil((hi - lo) / resolution - 1e-9).astype(np.int64)
        if int(np.prod(shape)) > 2**26:
            raise ConfigError(
                f"resolution: {resolution} m gives {tuple(shape)} voxels (> 2^26); "
                "use a coarser grid"
            )
        self.lo, self.hi, self.res = lo, hi, float(resolution)
        self.shape = tuple(int(s) for s in shape)
        self.occupied = np.zeros(self.shape, dtype=np.uint8)
        self.dist_cm = np.full(self.shape, FAR_CM, dtype=np.uint8)
        off, length = ball_offsets(truncation / resolution)
        self._offsets = off
        self._off_cm = np.minimum(np.round(length * resolution * 100.0), FAR_CM - 1).astype(
            np.uint8
        )
        self.n_occupied = 0
        # bumped whenever dist_cm changes: a search of an unchanged map is a pure function of
        # its arguments, so its result can be reused (search.search's cache)
        self.version = 0
        self.search_cache: dict = {}

    def scratch(self) -> OccupancyGrid:
        """A copy whose distance field may be edited (:meth:`block`) without touching this
        grid or its search results."""
        out = copy.copy(self)
        out.occupied, out.dist_cm = self.occupied.copy(), self.dist_cm.copy()
        out.search_cache = {}
        return out

    def block(self, cells: np.ndarray, offsets: np.ndarray | None = None) -> None:
        """Mark voxels (P, 3) as obstacles in the distance field only (a search barrier);
        with ``offsets`` (M, 3), every voxel cell + offset inside the grid instead (a tube of
        balls without the (P M, 3) array)."""
        cells = _rows3(cells, "cells", np.int64)
        if offsets is None:
            offsets = np.zeros((1, 3), np.int64)
        _block(self.dist_cm, cells, _rows3(offsets, "offsets", np.int64))
        self.version += 1

    def clear(self) -> None:
        self.occupied.fill(0)
        self.dist_cm.fill(FAR_CM)
        self.n_occupied = 0
        self.version += 1

    def index(self, points: np.ndarray) -> np.ndarray:
        """(P, 3) int64 voxel indices of world points (not clamped)."""
        return np.floor((np.asarray(points) - self.lo) / self.res).astype(np.int64)

    def center(self, idx: np.ndarray) -> np.ndarray:
        """World centres (P, 3) of voxel indices (P, 3)."""
        return self.lo + (np.asarray(idx, dtype=np.float64) + 0.5) * self.res

    def inside(self, idx: np.ndarray) -> np.ndarray:
        return np.all((idx >= 0) & (idx < np.asarray(self.shape)), axis=-1)

    def clamp(self, idx: np.ndarray) -> np.ndarray:
        return np.clip(idx, 0, np.asarray(self.shape) - 1)

    def insert_points(self, points: np.ndarray) -> int:
        """Mark the voxels of world points (P, 3) occupied; returns how many were new.
        Compiled (:func:`_insert`); :meth:`insert_points_reference` is the numpy version."""
        p = _rows3(points, "points", np.float64)
        new = int(_insert(self.occupied, self.dist_cm, p, self.lo, self.res, self._offsets,
                          self._off_cm))  # fmt: skip
        if new:
            self.n_occupied += new
            self.version += 1
        return new

    def insert_points_reference(self, points: np.ndarray) -> int:
        """:meth:`insert_points` in numpy (the slow reference of the parity test)."""
        idx = self.index(points)
        idx = idx[self.inside(idx)]
        if idx.size == 0:
            return 0
        flat = np.unique(np.ravel_multi_index(idx.T, self.shape))
        occ = self.occupied.reshape(-1)
        flat = flat[occ[flat] == 0]
        if flat.size == 0:
            return 0
        occ[flat] = 1
        cells = np.stack(np.unravel_index(flat, self.shape), -1).astype(np.int64)
        _stamp(self.dist_cm, cells, self._offsets, self._off_cm)
        self.n_occupied += int(flat.size)
        self.version += 1
        return int(flat.size)

    def clearance(self, points: np.ndarray) -> np.ndarray:
        """(P,) m: distance to the nearest occupied voxel centre or face of the volume
        (the floor, the ceiling and the lateral bounds); points outside the volume get <= 0,
        NaN points NaN. Compiled (:func:`_clearance`: planners query it tens of thousands of
        times per trial, mostly for a few points, where numpy's per-call overhead dominated);
        :meth:`clearance_reference` is the numpy version it is tested against."""
        p = _rows3(points, "points", np.float64)
        return _clearance(p, self.lo, self.hi, self.res, self.dist_cm)

    def clearance_reference(self, points: np.ndarray) -> np.ndarray:
        """:meth:`clearance` in numpy (the slow reference of the parity test)."""
        p = np.atleast_2d(np.asarray(points, dtype=np.float64))
        idx = self.index(p)
        ok = self.inside(idx)
        d = np.full(p.shape[0], FAR_CM / 100.0)
        if ok.any():
            i = idx[ok]
            d[ok] = self.dist_cm[i[:, 0], i[:, 1], i[:, 2]] / 100.0
        faces = np.minimum((p - self.lo).min(-1), (self.hi - p).min(-1))
        return np.minimum(d, faces)


@numba.njit(cache=True, nogil=True)
def _clearance(p, lo, hi, res, dist):  # pragma: no cover - compiled
    """OccupancyGrid.clearance for points (P, 3): the same float operations as the numpy
    reference (voxel floor((p - lo) / res), field / 100, faces), so the same bits."""
    nx, ny, nz = dist.shape
    out = np.empty(p.shape[0])
    for m in range(p.shape[0]):
        x, y, z = p[m, 0], p[m, 1], p[m, 2]
        if x != x or y != y or z != z:
            out[m] = np.nan
            continue
        faces = min(x - lo[0], y - lo[1], z - lo[2], hi[0] - x, hi[1] - y, hi[2] - z)
        vi, vj, vk = (x - lo[0]) / res, (y - lo[1]) / res, (z - lo[2]) / res
        d = FAR_CM / 100.0
        if 0.0 <= vi < nx and 0.0 <= vj < ny and 0.0 <= vk < nz:
            d = dist[np.int64(np.floor(vi)), np.int64(np.floor(vj)), np.int64(np.floor(vk))] / 100.0
        out[m] = min(d, faces)
    return out


def _rows3(a: np.ndarray, name: str, dtype: type) -> np.ndarray:
    """``a`` as a C-contiguous (P, 3) array of ``dtype`` ((3,) is one row), for the kernels."""
    out: np.ndarray = np.asarray(a, dtype=dtype)
    if out.ndim == 1:
        out = out[None]
    if out.ndim != 2 or out.shape[1] != 3:
        raise ConfigError(f"{name}: expected (P, 3) or (3,), got shape {np.shape(a)}")
    return np.ascontiguousarray(out)


class DepthProjector:
    """Back-projects (strided) z-depth pixels into world points (see the module docstring)."""

    def __init__(self, info: DepthCameraInfo, stride: int = 2) -> None:
        if stride < 1:
            raise ConfigError(f"pixel_stride: expected an integer >= 1, got {stride}")
        self.info, self.stride = info, int(stride)
        u = (np.arange(0, info.width, stride) + 0.5 - info.cx) / info.fx
        v = (np.arange(0, info.height, stride) + 0.5 - info.cy) / info.fy
        vv, uu = np.meshgrid(v, u, indexing="ij")
        self.rays = np.stack((uu, vv, np.ones_like(uu)), -1).reshape(-1, 3)  # (P, 3), z = 1
        self.r_bc = quat_to_matrix(info.q_body_cam)
        self.t_bc = np.asarray(info.t_body_cam, dtype=np.float64).reshape(3)

    def points(self, depth: np.ndarray, position: np.ndarray, quat: np.ndarray) -> np.ndarray:
        """World points (P, 3) of the valid returns: finite, > 0 and short of ``max_range``."""
        info = self.info
        if depth.shape != (info.height, info.width):
            raise ConfigError(
                f"obs.depth: expected shape ({info.height}, {info.width}), got {depth.shape}"
            )
        z = np.asarray(depth[:: self.stride, :: self.stride], dtype=np.float64).reshape(-1)
        valid = np.isfinite(z) & (z > 0) & (z < info.max_range * 0.999)
        p_c = self.rays[valid] * z[valid, None]
        r_wb = quat_to_matrix(quat)
        p_b = p_c @ self.r_bc.T + self.t_bc
        return p_b @ r_wb.T + np.asarray(position, dtype=np.float64)
