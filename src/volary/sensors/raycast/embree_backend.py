"""CPU fast path: Intel Embree through ``embreex``, one BVH per distinct scene.

Each distinct scene (the same spec object, or equal specs) is tessellated once by
:func:`~volary.sensors.raycast.base.world_triangles` (``worlds.io.scene_mesh`` plus the floor)
and built into one Embree scene; the rays of all envs that share it go into one ``run`` call.
Embree intersects both triangle faces (no culling) in float32 and keeps the nearest hit in
``[0, max_range]``; the geometric normal ``Ng`` is normalized and turned to face the origin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from volary.errors import MissingDependencyError
from volary.sensors.raycast.base import (
    RayHits,
    SceneCaster,
    check_rays,
    miss_hits,
    spec_groups,
    world_triangles,
)
from volary.worlds.primitives import SceneSpec


def _embree() -> tuple[Any, Any]:
    try:
        from embreex.mesh_construction import TriangleMesh
        from embreex.rtcore_scene import EmbreeScene
    except ImportError as e:
        raise MissingDependencyError("embreex", "sensors") from e
    return EmbreeScene, TriangleMesh


def _as_numpy(x: Tensor) -> np.ndarray:
    """(N, R, 3) tensor -> contiguous (N * R, 3) float32 array (no copy when already so)."""
    return x.detach().to("cpu", torch.float32).contiguous().numpy().reshape(-1, 3)


def _post_numpy(
    res: dict[str, np.ndarray],
    ids: np.ndarray,
    normals: np.ndarray,
    d: np.ndarray,
    out: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    """Numpy version of ``_embree_post.post_hits`` (used when numba is missing)."""
    hit = res["geomID"] != -1
    prim = np.where(hit, res["primID"], 0)
    n = normals[prim]
    n *= np.where(np.einsum("ij,ij->i", n, d) > 0, -1.0, 1.0).astype(np.float32)[:, None]
    out[0][:] = np.where(hit, res["tfar"], np.float32(np.inf))
    out[1][:] = np.where(hit, ids[prim], -1)
    out[2][:] = np.where(hit[:, None], n, np.float32(0.0))


def _post_fn() -> Callable[..., None]:
    """The one-pass numba kernel when numba is installed, else the numpy version."""
    try:
        from volary.sensors.raycast._embree_post import post_hits
    except ImportError:
        return lambda res, ids, normals, d, out: _post_numpy(res, ids, normals, d, out)
    return lambda res, ids, normals, d, out: post_hits(
        res["geomID"], res["primID"], res["tfar"], d, ids, normals, *out
    )


def _unit_normals(tris: np.ndarray) -> np.ndarray:
    """(T, 3) float32 unit normals of (T, 3, 3) triangles (zero for degenerate ones)."""
    n = np.cross(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0]).astype(np.float64)
    norm = np.linalg.norm(n, axis=1, keepdims=True)
    return (n / np.where(norm > 0, norm, 1.0)).astype(np.float32)


class EmbreeCaster(SceneCaster):
    """:class:`~volary.sensors.raycast.base.RayCaster` on Embree BVHs (CPU, float32 inside).

    Tessellation error against the analytic reference: cylinders and spheres are polygons
    inscribed with ``segments`` sides, so a distance may be longer by up to
    ``r (1 - cos(pi / segments))`` across the surface, more at grazing incidence (see DESIGN.md).
    """

    name = "embree"

    def _load(self) -> None:
        self._api = _embree()

    def _build(self, per: list[SceneSpec], ground: bool) -> None:
        embree_scene, triangle_mesh = self._api
        self._post = _post_fn()
        self._groups: list[tuple[Any, np.ndarray, np.ndarray, np.ndarray]] = []
        for spec, envs in spec_groups(per):
            tris, ids = world_triangles(spec, self.segments, ground)
            if len(tris) == 0:
                continue  # nothing to hit: these envs always miss
            scene = embree_scene()
            triangle_mesh(scene, tris)
            envs_a = np.asarray(envs, dtype=np.int64)
            self._groups.append((scene, ids, _unit_normals(tris), envs_a))

    def cast(self, origins: Tensor, directions: Tensor, max_range: float) -> RayHits:
        check_rays(self, origins, directions, max_range)
        n, r = origins.shape[:2]
        if not self._groups or r == 0:
            return miss_hits((n, r), self.device, self.dtype)
        o, d = _as_numpy(origins), _as_numpy(directions)
        dist = torch.empty(n * r, dtype=torch.float32)
        oid = torch.empty(n * r, dtype=torch.int64)
        normal = torch.empty(n * r, 3, dtype=torch.float32)
        out = (dist.numpy(), oid.numpy(), normal.numpy())
        if len(self._groups) == 1 and len(self._groups[0][3]) == n:  # one scene for all envs
            scene, ids, normals, _ = self._groups[0]
            self._post(scene.run(o, d, dists=float(max_range), output=1), ids, normals, d, out)
        else:
            self._cast_groups(o.reshape(n, r, 3), d.reshape(n, r, 3), max_range, out)
        return RayHits(
            dist.reshape(n, r).to(self.device, self.dtype),
            oid.reshape(n, r).to(self.device),
            normal.reshape(n, r, 3).to(self.device, self.dtype),
        )

    def _cast_groups(
        self,
        o: np.ndarray,
        d: np.ndarray,
        max_range: float,
        out: tuple[np.ndarray, np.ndarray, np.ndarray],
    ) -> None:
        """Envs with different scenes: one ``run`` per distinct scene, results scattered back.
        Envs of no group (nothing to hit) miss."""
        n, r = o.shape[:2]
        dist, oid, normal = out[0].reshape(n, r), out[1].reshape(n, r), out[2].reshape(n, r, 3)
        dist.fill(np.inf)
        oid.fill(-1)
        normal.fill(0.0)
        for scene, ids, normals, envs in self._groups:
            og, dg = o[envs].reshape(-1, 3), d[envs].reshape(-1, 3)
            part = (
                np.empty(len(og), np.float32),
                np.empty(len(og), np.int64),
                np.empty((len(og), 3), np.float32),
            )
            self._post(scene.run(og, dg, dists=float(max_range), output=1), ids, normals, dg, part)
            dist[envs], oid[envs] = part[0].reshape(-1, r), part[1].reshape(-1, r)
            normal[envs] = part[2].reshape(-1, r, 3)
