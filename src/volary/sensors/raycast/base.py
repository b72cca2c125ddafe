"""The ray-casting interface every backend implements, and the backend registry.

A caster is built once for a batch of scenes (one :class:`~volary.worlds.SceneSpec` per env,
tiled like :meth:`volary.worlds.Scene.stack`) and then answers batched ray queries in the world
frame (z up, metres). Sensors (cameras, LiDAR, ToF, rangefinder, IR-beacon occlusion) only ever
talk to this interface, so a backend can be swapped without touching them.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor

from volary.device import resolve as resolve_device
from volary.worlds.primitives import SceneSpec


@dataclass(frozen=True)
class RayHits:
    """First hit along each ray, batched like the query (leading dims ``(N, R)``).

    distance: (N, R) m along the unit direction; ``+inf`` where nothing is hit within max_range.
    object_id: (N, R) int64 object id of the hit primitive; ``-1`` where nothing is hit.
    normal: (N, R, 3) unit surface normal in the world frame, facing the ray origin
        (``dot(normal, direction) <= 0``); zeros where nothing is hit.
    """

    distance: Tensor
    object_id: Tensor
    normal: Tensor

    @property
    def hit(self) -> Tensor:
        return torch.isfinite(self.distance)


@runtime_checkable
class RayCaster(Protocol):
    """A backend: ``cast(origins (N, R, 3), directions (N, R, 3) unit, max_range) -> RayHits``.

    Env ``i`` of the query is tested against scene ``i`` only. Results are on the caster's
    device and dtype, whatever the backend computes in internally.
    """

    name: str
    n_envs: int
    device: torch.device
    dtype: torch.dtype

    def cast(self, origins: Tensor, directions: Tensor, max_range: float) -> RayHits: ...


CasterFactory = Callable[..., RayCaster]


def as_spec_list(specs: SceneSpec | Sequence[SceneSpec], n_envs: int | None) -> list[SceneSpec]:
    """One spec per env: a single spec or a shorter list is tiled to ``n_envs``."""
    from volary.errors import ConfigError

    items = [specs] if isinstance(specs, SceneSpec) else list(specs)
    if not items or not all(isinstance(s, SceneSpec) for s in items):
        raise ConfigError("specs: expected a SceneSpec or a non-empty sequence of SceneSpec")
    n = len(items) if n_envs is None else int(n_envs)
    if n < 1:
        raise ConfigError(f"n_envs: expected >= 1, got {n}")
    return [items[i % len(items)] for i in range(n)]


class SceneCaster:
    """What every backend's constructor shares: one spec per env (:func:`as_spec_list`), the
    device and dtype of the results, the tessellation ``segments`` of curved primitives; a
    backend builds its structures in :meth:`_build` from the per-env specs, with the floor
    (id ``FLOOR_ID``) when ``ground``."""

    name = ""

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
        self._load()
        per = as_spec_list(specs, n_envs)
        self.n_envs = len(per)
        self.device = self._device(device)
        self.dtype = dtype
        self.segments = segments
        self._build(per, ground)

    def _load(self) -> None:
        """Import the backend's library (a MissingDependencyError before anything else)."""

    def _device(self, device: torch.device | str) -> torch.device:
        return resolve_device(device)

    def _build(self, per: list[SceneSpec], ground: bool) -> None:
        raise NotImplementedError

    def cast(self, origins: Tensor, directions: Tensor, max_range: float) -> RayHits:
        raise NotImplementedError


FLOOR_ID = 0  # object id of the floor added by ``ground=True``; obstacles use ids >= 1


def _same_device(actual: torch.device, expected: torch.device) -> bool:
    if actual.type != expected.type:
        return False
    return expected.index is None or actual.index in (None, expected.index)


def check_rays(caster: RayCaster, origins: Tensor, directions: Tensor, max_range: float) -> None:
    """The public-boundary checks every backend's ``cast`` runs first (raises ConfigError).

    origins and directions: tensors of shape ``(n_envs, R, 3)`` on the caster's device and
    dtype; max_range: a finite number > 0 (m). Values are not checked: a ray with a non-finite
    origin or direction is a miss, not an error.
    """
    from volary.errors import ConfigError

    for name, x in (("origins", origins), ("directions", directions)):
        if not isinstance(x, Tensor):
            raise ConfigError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
        if x.ndim != 3 or x.shape[0] != caster.n_envs or x.shape[2] != 3:
            raise ConfigError(
                f"{name}: expected shape ({caster.n_envs}, R, 3), got {tuple(x.shape)}"
            )
        if not _same_device(x.device, caster.device):
            raise ConfigError(f"{name}: expected device {caster.device}, got {x.device}")
        if x.dtype != caster.dtype:
            raise ConfigError(f"{name}: expected dtype {caster.dtype}, got {x.dtype}")
    if directions.shape != origins.shape:
        raise ConfigError(
            f"directions: expected the shape of origins {tuple(origins.shape)}, "
            f"got {tuple(directions.shape)}"
        )
    if isinstance(max_range, bool) or not isinstance(max_range, numbers.Real):
        raise ConfigError(f"max_range: expected a number (m), got {type(max_range).__name__}")
    if not (math.isfinite(float(max_range)) and max_range > 0):
        raise ConfigError(f"max_range: expected a finite value > 0 m, got {max_range}")


def finite_rays(origins: Tensor, directions: Tensor) -> Tensor:
    """(N, R) bool: the ray's origin and direction are finite (others are reported as misses)."""
    return torch.isfinite(origins).all(-1) & torch.isfinite(directions).all(-1)


def spec_groups(specs: Sequence[SceneSpec]) -> list[tuple[SceneSpec, list[int]]]:
    """Envs grouped by scene: the same spec object, or equal specs (``meta`` ignored), share
    one group, in order of first appearance: ``[(spec, [env indices])]``."""
    by_id: dict[int, int] = {}
    by_value: dict[SceneSpec, int] = {}
    groups: list[tuple[SceneSpec, list[int]]] = []
    for env, spec in enumerate(specs):
        g = by_id.get(id(spec))
        if g is None:
            try:
                g = by_value.get(spec)
            except TypeError:  # unhashable field values: fall back to equality
                g = next((k for k, (s, _) in enumerate(groups) if s == spec), None)
            if g is None:
                g = len(groups)
                groups.append((spec, []))
                try:
                    by_value[spec] = g
                except TypeError:
                    pass
            by_id[id(spec)] = g
        groups[g][1].append(env)
    return groups


def floor_quad(spec: SceneSpec) -> np.ndarray:
    """(2, 3, 3) triangles of the floor: z = bounds_min z over the bounds' x-y rectangle,
    counter-clockwise seen from above (normal +z)."""
    (x0, y0, z0), (x1, y1, _) = spec.bounds_min, spec.bounds_max
    a, b, c, d = (x0, y0, z0), (x1, y0, z0), (x1, y1, z0), (x0, y1, z0)
    return np.asarray([[a, b, c], [a, c, d]], dtype=np.float64)


def world_triangles(spec: SceneSpec, segments: int, ground: bool) -> tuple[np.ndarray, np.ndarray]:
    """The tessellated world every mesh backend casts against: ``scene_mesh(spec, segments)``
    plus, with ``ground``, the floor quad (:data:`FLOOR_ID`). Returns triangles (T, 3, 3)
    float32 m and their object ids (T,) int64."""
    from volary.worlds.io import scene_mesh

    mesh = scene_mesh(spec, segments)
    tris = mesh.vertices[mesh.triangles].reshape(-1, 3, 3)
    ids = (np.zeros(len(tris), np.int64) if mesh.object_ids is None else mesh.object_ids).astype(
        np.int64
    )
    if ground:
        tris = np.concatenate([tris, floor_quad(spec)])
        ids = np.concatenate([ids, np.full(2, FLOOR_ID, np.int64)])
    return np.ascontiguousarray(tris, dtype=np.float32), ids


def miss_hits(shape: tuple[int, int], device: torch.device, dtype: torch.dtype) -> RayHits:
    """All-miss result of the given (N, R) shape."""
    return RayHits(
        torch.full(shape, math.inf, device=device, dtype=dtype),
        torch.full(shape, -1, device=device, dtype=torch.int64),
        torch.zeros((*shape, 3), device=device, dtype=dtype),
    )


def tessellation_tolerance(spec: SceneSpec, segments: int) -> float:
    """Largest distance (m) by which a mesh backend's hit may lie beyond the analytic one on the
    same object, for rays starting outside it.

    ``scene_mesh`` inscribes polygons in cylinders (``segments`` sides) and a UV mesh in spheres
    (vertices on the sphere), so the mesh solid lies inside the true one and the mesh hit is
    never nearer. The extra length is a segment inside the sliver between a facet and the true
    surface, at most that sliver's longest chord: ``2 r sin(pi / segments)`` for a cylinder side
    (the facet's edge), ``2 r sin(2 pi / segments)`` for a sphere (its facets span at most
    ``2 pi / segments`` in latitude and longitude). Boxes, planes and caps are exact (0).
    At normal incidence on a cylinder the error is only ``r (1 - cos(pi / segments))``.
    """
    from volary.worlds.primitives import Cylinder, Sphere

    bound = 0.0
    for o in spec.obstacles:
        if isinstance(o, Cylinder):
            bound = max(bound, 2 * o.radius * math.sin(math.pi / segments))
        elif isinstance(o, Sphere):
            bound = max(bound, 2 * o.radius * math.sin(2 * math.pi / segments))
    return bound
