"""Numba kernel that turns Embree's per-ray output into RayHits arrays in one pass.

Imported only by the Embree caster, on first use (it imports numba). Compiled once, cached on
disk by numba.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def post_hits(
    geom_id: np.ndarray,  # (M,) int32, -1 on a miss
    prim_id: np.ndarray,  # (M,) int32 triangle index
    tfar: np.ndarray,  # (M,) float32 m
    directions: np.ndarray,  # (M, 3) float32
    tri_ids: np.ndarray,  # (T,) int64 object id per triangle
    tri_normals: np.ndarray,  # (T, 3) float32 unit normal per triangle
    distance: np.ndarray,  # (M,) float32 out: inf on a miss
    object_id: np.ndarray,  # (M,) int64 out: -1 on a miss
    normal: np.ndarray,  # (M, 3) float32 out: facing the origin, 0 on a miss
) -> None:
    for i in range(geom_id.shape[0]):
        if geom_id[i] == -1:
            distance[i] = np.inf
            object_id[i] = -1
            normal[i, 0] = normal[i, 1] = normal[i, 2] = 0.0
            continue
        p = prim_id[i]
        nx, ny, nz = tri_normals[p, 0], tri_normals[p, 1], tri_normals[p, 2]
        if nx * directions[i, 0] + ny * directions[i, 1] + nz * directions[i, 2] > 0:
            nx, ny, nz = -nx, -ny, -nz
        distance[i] = tfar[i]
        object_id[i] = tri_ids[p]
        normal[i, 0], normal[i, 1], normal[i, 2] = nx, ny, nz
