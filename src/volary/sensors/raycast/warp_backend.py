"""NVIDIA Warp caster: one ``wp.Mesh`` BVH per distinct scene, one kernel launch per cast.

Runs on a CUDA device (the fast GPU path) and on Warp's CPU device (so it is testable against
Embree without a GPU). Same tessellated world as the Embree caster
(:func:`~volary.sensors.raycast.base.world_triangles`). Warp and the kernel module are loaded on
first use; ``wp.init()`` runs then, once.
"""

from __future__ import annotations

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


def _warp() -> tuple[Any, Any]:
    """(warp module, kernel module), initialized once."""
    try:
        import warp as wp
    except ImportError as e:
        raise MissingDependencyError("warp-lang", "warp") from e
    wp.init()
    import volary.sensors.raycast._warp_kernels as _warp_kernels

    return wp, _warp_kernels


def _full_device(device: torch.device | str) -> torch.device:
    """``cuda`` -> ``cuda:<current>``, so the meshes and the rays are on the same GPU."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def _warp_device(device: torch.device) -> str:
    return "cpu" if device.type == "cpu" else f"cuda:{device.index}"


class WarpCaster(SceneCaster):
    """:class:`~volary.sensors.raycast.base.RayCaster` on Warp meshes (float32 inside)."""

    name = "warp"

    def _load(self) -> None:
        self._wp, self._kernels = _warp()

    def _device(self, device: torch.device | str) -> torch.device:
        return _full_device(device)

    def _build(self, per: list[SceneSpec], ground: bool) -> None:
        wp = self._wp
        self._wdev = _warp_device(self.device)
        self._meshes: list[Any] = []  # keep the BVHs alive
        mesh_of_env = np.zeros(self.n_envs, np.uint64)
        offset = np.zeros(self.n_envs, np.int32)
        face_ids: list[np.ndarray] = []
        base = 0
        for spec, envs in spec_groups(per):
            tris, ids = world_triangles(spec, self.segments, ground)
            if len(tris) == 0:
                continue  # mesh id 0: these envs always miss
            mesh = wp.Mesh(
                points=wp.array(tris.reshape(-1, 3), dtype=wp.vec3, device=self._wdev),
                indices=wp.array(
                    np.arange(tris.shape[0] * 3, dtype=np.int32), dtype=wp.int32, device=self._wdev
                ),
            )
            self._meshes.append(mesh)
            mesh_of_env[envs] = mesh.id
            offset[envs] = base
            face_ids.append(ids)
            base += len(ids)
        ids_all = np.concatenate(face_ids) if face_ids else np.zeros(1, np.int64)
        self._mesh_of_env = wp.array(mesh_of_env, dtype=wp.uint64, device=self._wdev)
        self._offset = wp.array(offset, dtype=wp.int32, device=self._wdev)
        self._face_ids = wp.array(ids_all, dtype=wp.int64, device=self._wdev)

    def cast(self, origins: Tensor, directions: Tensor, max_range: float) -> RayHits:
        check_rays(self, origins, directions, max_range)
        wp = self._wp
        n, r = origins.shape[:2]
        if not self._meshes or r == 0:
            return miss_hits((n, r), self.device, self.dtype)
        o = origins.detach().to(torch.float32).contiguous().reshape(-1, 3)
        d = directions.detach().to(torch.float32).contiguous().reshape(-1, 3)
        dist = torch.empty(n * r, device=o.device, dtype=torch.float32)
        oid = torch.empty(n * r, device=o.device, dtype=torch.int64)
        normal = torch.empty(n * r, 3, device=o.device, dtype=torch.float32)
        args = [
            self._mesh_of_env,
            self._offset,
            self._face_ids,
            wp.from_torch(o, dtype=wp.vec3),
            wp.from_torch(d, dtype=wp.vec3),
            r,
            float(max_range),
            wp.from_torch(dist),
            wp.from_torch(oid),
            wp.from_torch(normal, dtype=wp.vec3),
        ]
        if self.device.type == "cuda":
            with wp.ScopedStream(wp.stream_from_torch(o.device)):
                wp.launch(self._kernels.cast_rays, dim=n * r, inputs=args, device=self._wdev)
        else:
            wp.launch(self._kernels.cast_rays, dim=n * r, inputs=args, device=self._wdev)
        return RayHits(
            dist.reshape(n, r).to(self.dtype),
            oid.reshape(n, r),
            normal.reshape(n, r, 3).to(self.dtype),
        )
