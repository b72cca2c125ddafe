"""Triangle-mesh bookkeeping in numpy (float64): closedness, orientation and the angle-weighted
pseudo-normals that sign the mesh distance (Baerentzen & Aanaes, "Signed distance computation
using the angle weighted pseudonormal", IEEE TVCG 11(3), 2005).

A mesh is *closed* when every directed edge (i, j) of a triangle appears exactly once and its
reverse (j, i) exactly once: a watertight, consistently wound 2-manifold. Only closed meshes
have an inside; open meshes (and non-manifold ones) are thin shells whose distance is unsigned.
"""

from __future__ import annotations

import numpy as np

# Order of the seven features of a triangle, shared with ``sdf.sdf_triangles``:
# 0 face, 1 edge v0-v1, 2 edge v1-v2, 3 edge v2-v0, 4 vertex v0, 5 vertex v1, 6 vertex v2.
N_FEATURES = 7
_EDGES = ((0, 1), (1, 2), (2, 0))


def is_closed(triangles: np.ndarray, n_vertices: int) -> bool:
    """True when every directed edge occurs once and its reverse once (watertight, oriented)."""
    t = np.asarray(triangles, dtype=np.int64)
    d = np.concatenate([t[:, [i, j]] for i, j in _EDGES])  # (3T, 2) directed edges
    key = d[:, 0] * n_vertices + d[:, 1]
    rev = d[:, 1] * n_vertices + d[:, 0]
    uniq, counts = np.unique(key, return_counts=True)
    if np.any(counts != 1) or np.any(d[:, 0] == d[:, 1]):
        return False
    return bool(np.all(np.isin(rev, uniq, assume_unique=False)))


def face_normals(corners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit normals ``(T, 3)`` from the winding (zero for degenerate triangles) and areas."""
    cr = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    n2 = np.linalg.norm(cr, axis=1)
    unit = np.where(n2[:, None] > 0, cr / np.maximum(n2, 1e-300)[:, None], 0.0)
    return unit, 0.5 * n2


def signed_volume(vertices: np.ndarray, triangles: np.ndarray) -> float:
    """Signed volume (m^3) enclosed by a closed mesh; positive for outward winding."""
    c = np.asarray(vertices, dtype=float)[triangles]
    return float(np.einsum("ij,ij->i", c[:, 0], np.cross(c[:, 1], c[:, 2])).sum() / 6.0)


def _corner_angles(corners: np.ndarray) -> np.ndarray:
    """Interior angle (rad) at each corner of each triangle, ``(T, 3)``; 0 when degenerate."""
    out = np.zeros(corners.shape[:2])
    for k in range(3):
        u = corners[:, (k + 1) % 3] - corners[:, k]
        v = corners[:, (k + 2) % 3] - corners[:, k]
        nu, nv = np.linalg.norm(u, axis=1), np.linalg.norm(v, axis=1)
        ok = (nu > 0) & (nv > 0)
        cos = np.einsum("ij,ij->i", u, v) / np.where(ok, nu * nv, 1.0)
        out[:, k] = np.where(ok, np.arccos(np.clip(cos, -1.0, 1.0)), 0.0)
    return out


def _unit_rows(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return np.where(n > 0, v / np.maximum(n, 1e-300), 0.0)


def pseudo_normals(vertices: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Per-triangle pseudo-normals ``(T, 7, 3)`` in the feature order of :data:`N_FEATURES`:
    the face normal, the three edge normals (sum of the two adjacent face normals) and the three
    vertex normals (incident face normals weighted by the incident angle), all unit length.

    Closed meshes are oriented by their signed volume, so an inward-wound file still has its
    solid inside. Open or non-manifold meshes get all-zero normals: the distance is unsigned."""
    v = np.asarray(vertices, dtype=float)
    t = np.asarray(triangles, dtype=np.int64)
    out = np.zeros((len(t), N_FEATURES, 3))
    if not is_closed(t, len(v)):
        return out
    corners = v[t]
    fn, _ = face_normals(corners)
    if signed_volume(v, t) < 0:
        fn = -fn
    vert = np.zeros_like(v)
    np.add.at(vert, t.ravel(), (_corner_angles(corners)[..., None] * fn[:, None]).reshape(-1, 3))
    lo = np.concatenate([np.minimum(t[:, i], t[:, j]) for i, j in _EDGES])
    hi = np.concatenate([np.maximum(t[:, i], t[:, j]) for i, j in _EDGES])
    _, edge_idx = np.unique(lo * len(v) + hi, return_inverse=True)
    edge = np.zeros((int(edge_idx.max()) + 1, 3))
    np.add.at(edge, edge_idx, np.tile(fn, (3, 1)))
    out[:, 0] = fn
    out[:, 1:4] = _unit_rows(edge[edge_idx.reshape(3, -1).T])
    out[:, 4:7] = _unit_rows(vert[t])
    return out


__all__ = ["N_FEATURES", "face_normals", "is_closed", "pseudo_normals", "signed_volume"]
