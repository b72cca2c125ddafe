"""Collision events: each vehicle is a sphere of radius r (``VehicleParams.radius``), or with
``box=`` the oriented box that fits its frame (``VehicleParams.collider_half``, turning with
its attitude; :mod:`volary.worlds.collider`), tested against its env's scene, flight ceiling
and bounds.

* collided: signed distance from the vehicle centre to the scene < r (box: no separating
  direction found between the box and an obstacle).
* above_ceiling: the collider reaches above the flight ceiling (``z + r > ceiling``; box: its
  highest corner).
* out_of_bounds: the vehicle centre left the axis-aligned flight volume.

:func:`collision_events` is stateless; :class:`CollisionMonitor` keeps the first event time per
env while a simulation runs (call it once per control step with the state).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from volary.errors import ConfigError
from volary.worlds.primitives import Scene
from volary.worlds.sdf import check_points, scene_sdf


@dataclass(frozen=True)
class Events:
    """Collision, ceiling and bounds events of N vehicles at one instant."""

    collided: Tensor  # (N,) bool, the vehicle sphere penetrates an obstacle
    object_id: Tensor  # (N,) int64 nearest obstacle's id (-1 when the scene is empty)
    contact_point: Tensor  # (N, 3) m nearest obstacle surface point; NaN when not collided
    clearance: Tensor  # (N,) m signed distance of the sphere surface to the scene (sdf - r)
    out_of_bounds: Tensor  # (N,) bool, centre outside [bounds_min, bounds_max]
    above_ceiling: Tensor  # (N,) bool, z + r above the flight ceiling
    bound_clearance: Tensor | None = None  # (N,) m clearance of the collider's bounding sphere
    # (attitude-free, <= clearance; None: the sphere collider, where it is clearance itself)

    @property
    def sphere_clearance(self) -> Tensor:
        """(N,) m clearance of the collider's bounding sphere: a lower bound of ``clearance``
        that no rotation can use up (what a query schedule may rely on)."""
        return self.clearance if self.bound_clearance is None else self.bound_clearance

    @property
    def any(self) -> Tensor:
        """(N,) bool: any of the three events."""
        return self.collided | self.out_of_bounds | self.above_ceiling


def _radius(scene: Scene, radius: Any) -> Tensor:
    ref = scene.bounds_min
    r = torch.as_tensor(radius, device=ref.device, dtype=ref.dtype)
    if r.dim() == 0:
        r = r.expand(scene.n_envs)
    if r.shape != (scene.n_envs,):
        raise ConfigError(
            f"radius: expected a scalar or shape ({scene.n_envs},), got {tuple(r.shape)}"
        )
    if not bool((r >= 0).all()):
        raise ConfigError("radius: expected radii >= 0 m")
    return r


def collision_events(
    scene: Scene, pos: Tensor, radius: Any, *, quat: Tensor | None = None, box: Any = None
) -> Events:
    """Events for vehicle centres ``pos (N, 3)`` (m, world) and radii ``radius`` (N,) or scalar;
    with ``box`` (half extents (N, 3) or (3,), m) and ``quat`` (N, 4) the oriented box instead
    of the sphere (``radius`` is then unused)."""
    if not isinstance(pos, Tensor) or pos.shape != (scene.n_envs, 3):
        shape = tuple(pos.shape) if isinstance(pos, Tensor) else type(pos).__name__
        raise ConfigError(f"pos: expected a tensor of shape ({scene.n_envs}, 3), got {shape}")
    if box is not None:
        return _box_events(scene, pos, quat, box)
    r = _radius(scene, radius)
    near = scene_sdf(scene, check_points(scene, pos[:, None, :], "pos"))
    dist = near.distance[:, 0]
    hit = dist < r
    contact = torch.where(hit[:, None], near.closest[:, 0], torch.nan)
    oob = ((pos < scene.bounds_min) | (pos > scene.bounds_max)).any(dim=-1)
    return Events(
        collided=hit,
        object_id=near.object_id[:, 0],
        contact_point=contact,
        clearance=dist - r,
        out_of_bounds=oob,
        above_ceiling=pos[:, 2] + r > scene.ceiling,
    )


def _box_events(scene: Scene, pos: Tensor, quat: Any, box: Any) -> Events:
    from volary.worlds.collider import box_query, check_boxes, top_of

    if quat is None:
        raise ConfigError("quat: the box collider needs the vehicles' attitudes (N, 4)")
    rot, half = check_boxes(scene, pos, quat, box)
    clear, obj, point, bound = box_query(scene, pos, rot, half)
    hit = clear < 0
    oob = ((pos < scene.bounds_min) | (pos > scene.bounds_max)).any(dim=-1)
    return Events(
        collided=hit,
        object_id=obj,
        contact_point=torch.where(hit[:, None], point, torch.nan),
        clearance=clear,
        out_of_bounds=oob,
        above_ceiling=top_of(pos, rot, half) > scene.ceiling,
        bound_clearance=bound,
    )


class CollisionMonitor:
    """First collision (and ceiling/bounds violation) per env while a simulation runs.

    >>> mon = CollisionMonitor(scene, sim.params.radius)
    >>> for _ in range(steps):
    ...     mon.update(sim.step(setpoint))
    >>> mon.collided, mon.time, mon.object_id
    """

    def __init__(self, scene: Scene, radius: Any) -> None:
        self.scene = scene
        self.radius = _radius(scene, radius)
        n, ref = scene.n_envs, scene.bounds_min
        self.time = torch.full((n,), torch.nan, device=ref.device, dtype=ref.dtype)
        """(N,) s state.time of the first collision; NaN until one happens."""
        self.object_id = torch.full((n,), -1, device=ref.device, dtype=torch.int64)
        self.contact_point = torch.full((n, 3), torch.nan, device=ref.device, dtype=ref.dtype)
        self.violation_time = torch.full((n,), torch.nan, device=ref.device, dtype=ref.dtype)
        """(N,) s first time out of bounds or above the ceiling; NaN until then."""

    @property
    def collided(self) -> Tensor:
        """(N,) bool: the env has collided since its last reset."""
        return ~torch.isnan(self.time)

    def update(self, state: Any) -> Events:
        """Record events of ``state`` (anything with ``pos (N, 3)`` and ``time (N,)``)."""
        ev = collision_events(self.scene, state.pos, self.radius)
        first = ev.collided & ~self.collided
        self.time = torch.where(first, state.time.to(self.time.dtype), self.time)
        self.object_id = torch.where(first, ev.object_id, self.object_id)
        self.contact_point = torch.where(first[:, None], ev.contact_point, self.contact_point)
        bad = (ev.out_of_bounds | ev.above_ceiling) & torch.isnan(self.violation_time)
        self.violation_time = torch.where(bad, state.time.to(self.time.dtype), self.violation_time)
        return ev

    def reset(self, mask: Tensor | None = None) -> None:
        """Forget the records of the masked envs (all when None), e.g. after a sim reset."""
        m = (
            torch.ones_like(self.collided)
            if mask is None
            else torch.as_tensor(mask, device=self.time.device)
        )
        if m.shape != self.collided.shape or m.dtype != torch.bool:
            raise ConfigError(
                f"mask: expected a bool tensor of shape {tuple(self.time.shape)}, "
                f"got {m.dtype} {tuple(m.shape)}"
            )
        self.time = torch.where(m, torch.nan, self.time)
        self.violation_time = torch.where(m, torch.nan, self.violation_time)
        self.object_id = torch.where(m, -1, self.object_id)
        self.contact_point = torch.where(m[:, None], torch.nan, self.contact_point)
