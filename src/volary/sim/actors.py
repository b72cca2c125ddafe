"""Dynamic actors: rigid objects whose poses come from outside (a person tracked by motion
capture, a moving obstacle, another stack's vehicle), seen by every ray-cast sensor and
collided with like the scene.

An actor is one primitive of :mod:`volary.worlds.primitives` (``Box``, ``Cylinder``, ``Sphere``
or ``Mesh``) given in the actor's own frame, and a pose per env set with :meth:`Actors.place`.
Ray casting and distances are done in the actor's frame: a ray ``o + t d`` becomes
``R^T (o - p) + t R^T d`` (a rigid motion keeps ``t``), is cast against a one-object caster of
the shape, and the hit normal is rotated back by ``R``; a vehicle's distance to the actor is the
shape's signed distance at ``R^T (x - p)`` (:func:`volary.worlds.sdf.scene_sdf`). An actor that
has not been placed in an env is absent there. Object ids: ``ACTOR_ID + k``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from volary.device import resolve as resolve_device
from volary.errors import ConfigError
from volary.math.quaternion import quat_rotate, quat_rotate_inverse
from volary.worlds.primitives import Box, Cylinder, Mesh, Scene, SceneSpec, Sphere

ACTOR_ID = 2_000_000  # object id of actor k in ray hits and collision events: ACTOR_ID + k
SHAPES = (Box, Cylinder, Sphere, Mesh)
_FAR = 1e4  # m, the bounds of an actor's own one-object scene


class Actors:
    """K actors in each of ``n_envs`` envs (module docstring). ``shapes``: one primitive per
    actor in its own frame; ``backend``: the ray-cast backend of their casters."""

    def __init__(
        self,
        shapes: Sequence[Any],
        n_envs: int,
        *,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
        backend: str = "auto",
    ) -> None:
        from volary.sensors.raycast.registry import make_raycaster

        shapes = list(shapes)
        for k, s in enumerate(shapes):
            if not isinstance(s, SHAPES):
                raise ConfigError(
                    f"actors[{k}]: expected a Box, Cylinder, Sphere or Mesh, got {type(s).__name__}"
                )
        self.k, self.n, self.device, self.dtype = len(shapes), n_envs, resolve_device(device), dtype
        self.shapes = [dataclasses.replace(s, object_id=ACTOR_ID + k) for k, s in enumerate(shapes)]
        specs = [
            SceneSpec(f"actor{k}", (-_FAR,) * 3, (_FAR,) * 3, obstacles=(s,))
            for k, s in enumerate(self.shapes)
        ]
        self.casters = [
            make_raycaster(s, 1, backend=backend, device=device, dtype=dtype, ground=False)
            for s in specs
        ]
        self.scenes = [Scene.stack(s, 1, device=device, dtype=dtype) for s in specs]
        self.pos = torch.zeros(n_envs, self.k, 3, device=device, dtype=dtype)
        self.quat = torch.zeros(n_envs, self.k, 4, device=device, dtype=dtype)
        self.quat[..., 0] = 1.0
        self.present = torch.zeros(n_envs, self.k, dtype=torch.bool, device=device)

    def place(self, k: int, pos: Any, quat: Any, env: Any = None) -> None:
        """Actor ``k`` at ``pos`` (3,) or (N, 3) m and ``quat`` [w, x, y, z] (4,) or (N, 4) in
        the envs ``env`` (an index, a bool mask (N,) or None: all); it is present there from
        now on."""
        if not (isinstance(k, int) and 0 <= k < self.k):
            raise ConfigError(f"actor: expected an index in 0..{self.k - 1}, got {k!r}")
        m = self._envs(env)
        p = torch.as_tensor(pos, device=self.device, dtype=self.dtype).expand(self.n, 3)
        q = torch.as_tensor(quat, device=self.device, dtype=self.dtype).expand(self.n, 4)
        q = q / q.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        self.pos[:, k] = torch.where(m[:, None], p, self.pos[:, k])
        self.quat[:, k] = torch.where(m[:, None], q, self.quat[:, k])
        self.present[:, k] |= m

    def remove(self, k: int, env: Any = None) -> None:
        """Actor ``k`` leaves the envs ``env`` (None: all)."""
        self.present[:, k] &= ~self._envs(env)

    def _envs(self, env: Any) -> Tensor:
        if env is None:
            return torch.ones(self.n, dtype=torch.bool, device=self.device)
        e = torch.as_tensor(env, device=self.device)
        if e.dtype == torch.bool:
            if e.shape != (self.n,):
                raise ConfigError(f"env: expected a bool mask of shape ({self.n},)")
            return e
        m = torch.zeros(self.n, dtype=torch.bool, device=self.device)
        m[e] = True
        return m

    # ---- queries ------------------------------------------------------------------------------
    def cast(
        self, origins: Tensor, directions: Tensor, max_range: float, env_of: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """First actor hit of rays ``(B, R, 3)`` from vehicles in envs ``env_of`` (B,):
        distance (B, R) (+inf: none), object id (-1: none), world normal (B, R, 3)."""
        b, r = origins.shape[:2]
        best = torch.full((b, r), torch.inf, device=origins.device, dtype=origins.dtype)
        oid = torch.full((b, r), -1, dtype=torch.int64, device=origins.device)
        nrm = torch.zeros(b, r, 3, device=origins.device, dtype=origins.dtype)
        for k, caster in enumerate(self.casters):
            here = self.present[env_of, k]  # (B,)
            if not bool(here.any()):
                continue
            p = self.pos[env_of, k][:, None, :].to(origins.dtype)
            q = self.quat[env_of, k][:, None, :].expand(b, r, 4).to(origins.dtype)
            o_local = quat_rotate_inverse(q, origins - p)
            d_local = quat_rotate_inverse(q, directions)
            hits = caster.cast(o_local.reshape(1, b * r, 3), d_local.reshape(1, b * r, 3),
                               max_range)  # fmt: skip
            d = hits.distance.reshape(b, r)
            closer = (d < best) & here[:, None]
            best = torch.where(closer, d, best)
            oid = torch.where(closer, ACTOR_ID + k, oid)
            n_world = quat_rotate(q, hits.normal.reshape(b, r, 3).to(origins.dtype))
            nrm = torch.where(closer[..., None], n_world, nrm)
        return best, oid, nrm

    def distance(self, points: Tensor, env_of: Tensor) -> tuple[Tensor, Tensor]:
        """Signed distance (B,) from points (B, 3) in envs ``env_of`` to the nearest present
        actor (+inf: none) and its object id (-1: none)."""
        from volary.worlds.sdf import scene_sdf

        b = points.shape[0]
        best = torch.full((b,), torch.inf, device=points.device, dtype=points.dtype)
        oid = torch.full((b,), -1, dtype=torch.int64, device=points.device)
        for k, scene in enumerate(self.scenes):
            here = self.present[env_of, k]
            if not bool(here.any()):
                continue
            local = quat_rotate_inverse(self.quat[env_of, k].to(points.dtype),
                                        points - self.pos[env_of, k].to(points.dtype))  # fmt: skip
            d = scene_sdf(scene, local.reshape(1, b, 3).to(self.dtype)).distance[0]
            d = d.to(points.dtype)
            closer = (d < best) & here
            best = torch.where(closer, d, best)
            oid = torch.where(closer, ACTOR_ID + k, oid)
        return best, oid
