"""CPU fast path: Intel Embree through ``embreex``, one BVH per distinct scene.

Each distinct scene (the same spec object, or equal specs) is tessellated once by
:func:`~volary.sensors.raycast.base.world_triangles` (``worlds.io.scene_mesh`` plus the floor)
and built into one Embree scene; the rays of all envs that share it go into one ``run`` call.
Embree intersects both triangle faces (no culling) in float32 and keeps the nearest hit in
``[0, max_range]``; the geometric normal ``Ng`` is normalized and turned to face the origin.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from volary.errors import MissingDependencyError
from volary.sensors.raycast.base import (
    RayHits,
    as_spec_list,
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


def _post(
    res: dict[str, np.ndarray], ids: np.ndarray, d: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Embree's output -> distance (inf on a miss), object id (-1), unit normal facing the
    origin (0)."""
    hit = res["geomID"] != -1
    dist = np.where(hit, res["tfar"], np.float32(np.inf))
    oid = np.where(hit, ids[res["primID"]], -1)
    ng = res["Ng"]
    norm = np.sqrt(np.einsum("ij,ij->i", ng, ng))
    facing = np.einsum("ij,ij->i", ng, d)
    ok = hit & (norm > 0)
    scale = np.where(ok, np.where(facing > 0, -1.0, 1.0) / np.where(ok, norm, 1.0), 0.0)
    return dist, oid, ng * scale.astype(np.float32)[:, None]


class EmbreeCaster:
    """:class:`~volary.sensors.raycast.base.RayCaster` on Embree BVHs (CPU, float32 inside).

    Tessellation error against the analytic reference: cylinders and spheres are polygons
    inscribed with ``segments`` sides, so a distance may be longer by up to
    ``r (1 - cos(pi / segments))`` across the surface, more at grazing incidence (see DESIGN.md).
    """

    name = "embree"

    def __init__(
        self,
        specs: SceneSpec | Sequence[SceneSpec],
        n_envs: int | None = None,
        *,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
        ground: bool = True,
        segments: int = 64,
    ) -> None:
        embree_scene, triangle_mesh = _embree()
        per = as_spec_list(specs, n_envs)
        self.n_envs = len(per)
        self.device = torch.device(device)
        self.dtype = dtype
        self.segments = segments
        self._groups: list[tuple[Any, np.ndarray, np.ndarray]] = []
        for spec, envs in spec_groups(per):
            tris, ids = world_triangles(spec, segments, ground)
            if len(tris) == 0:
                continue  # nothing to hit: these envs always miss
            scene = embree_scene()
            triangle_mesh(scene, tris)
            self._groups.append((scene, ids, np.asarray(envs, dtype=np.int64)))

    def cast(self, origins: Tensor, directions: Tensor, max_range: float) -> RayHits:
        check_rays(self, origins, directions, max_range)
        n, r = origins.shape[:2]
        if not self._groups or r == 0:
            return miss_hits((n, r), self.device, self.dtype)
        o, d = _as_numpy(origins), _as_numpy(directions)
        if len(self._groups) == 1 and len(self._groups[0][2]) == n:
            scene, ids, _ = self._groups[0]
            dist, oid, normal = _post(scene.run(o, d, dists=float(max_range), output=1), ids, d)
        else:
            dist, oid, normal = self._cast_groups(o.reshape(n, r, 3), d.reshape(n, r, 3), max_range)
        return RayHits(
            torch.from_numpy(dist).reshape(n, r).to(self.device, self.dtype),
            torch.from_numpy(oid).reshape(n, r).to(self.device),
            torch.from_numpy(normal).reshape(n, r, 3).to(self.device, self.dtype),
        )

    def _cast_groups(
        self, o: np.ndarray, d: np.ndarray, max_range: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Envs with different scenes: one ``run`` per distinct scene, results scattered back."""
        n, r = o.shape[:2]
        dist = np.full((n, r), np.inf, np.float32)
        oid = np.full((n, r), -1, np.int64)
        normal = np.zeros((n, r, 3), np.float32)
        for scene, ids, envs in self._groups:
            og, dg = o[envs].reshape(-1, 3), d[envs].reshape(-1, 3)
            res = _post(scene.run(og, dg, dists=float(max_range), output=1), ids, dg)
            dist[envs], oid[envs] = res[0].reshape(-1, r), res[1].reshape(-1, r)
            normal[envs] = res[2].reshape(-1, r, 3)
        return dist.reshape(-1), oid.reshape(-1), normal.reshape(-1, 3)
