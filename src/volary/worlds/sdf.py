"""Batched analytic signed distance to scene primitives (negative inside the solid).

Each primitive has one function ``sdf_<kind>(points, ...) -> (distance, closest)`` written for
arbitrary leading dims that broadcast between the query points ``(..., 3)`` and the primitive
parameters; ``closest`` is the nearest point on the primitive's surface (world frame, m).
:func:`scene_sdf` evaluates every padded primitive of a batched :class:`Scene` for query points
``(N, P, 3)`` and keeps the minimum over the valid ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from volary.errors import ConfigError
from volary.worlds.primitives import Scene


@dataclass(frozen=True)
class SceneDistance:
    """Signed distance from P query points per env to the nearest valid primitive."""

    distance: Tensor  # (N, P) m, negative inside a solid; +inf when the env has no primitive
    object_id: Tensor  # (N, P) int64 object id of the nearest primitive; -1 when none
    closest: Tensor  # (N, P, 3) m nearest surface point; NaN when the env has no primitive


def _rotate_z(v: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate vectors ``(..., 3)`` about world z by the angle with the given cos/sin."""
    x, y, z = v.unbind(-1)
    return torch.stack((cos * x - sin * y, sin * x + cos * y, z), dim=-1)


def _any_perpendicular(axis: Tensor) -> Tensor:
    """A unit vector perpendicular to each unit ``axis (..., 3)`` (fallback direction)."""
    e = torch.zeros_like(axis)
    idx = axis.abs().argmin(dim=-1, keepdim=True)
    e = e.scatter(-1, idx, 1.0)
    p = torch.linalg.cross(axis, e, dim=-1)
    return p / p.norm(dim=-1, keepdim=True)


def _unit_or(v: Tensor, fallback: Tensor) -> Tensor:
    """``v / |v|``, or ``fallback`` where ``|v|`` is (numerically) zero."""
    n = v.norm(dim=-1, keepdim=True)
    tiny = torch.finfo(v.dtype).tiny ** 0.5
    return torch.where(n > tiny, v / n.clamp_min(tiny), fallback)


def sdf_sphere(points: Tensor, center: Tensor, radius: Tensor) -> tuple[Tensor, Tensor]:
    """Sphere: ``|p - c| - r`` (m); centre (..., 3), radius (...)."""
    d = points - center
    up = torch.zeros_like(d)
    up[..., 2] = 1.0
    u = _unit_or(d, up)
    return d.norm(dim=-1) - radius, center + radius[..., None] * u


def sdf_plane(points: Tensor, point: Tensor, normal: Tensor) -> tuple[Tensor, Tensor]:
    """Half-space: ``n . (p - point)`` (m), solid where negative; normal (..., 3) unit."""
    dist = ((points - point) * normal).sum(-1)
    return dist, points - dist[..., None] * normal


def sdf_box(points: Tensor, center: Tensor, half: Tensor, yaw: Tensor) -> tuple[Tensor, Tensor]:
    """Box yawed about world z: half extents (..., 3) along its own axes, yaw (...) rad.

    Outside: length of the excess over the half extents; inside: minus the distance to the
    nearest face. Closest point: the clamp of the local point (outside) or the projection onto
    the nearest face (inside)."""
    c, s = torch.cos(yaw), torch.sin(yaw)
    local = _rotate_z(points - center, c, -s)
    q = local.abs() - half
    outside = q.clamp_min(0.0).norm(dim=-1)
    inside = q.max(dim=-1).values.clamp_max(0.0)
    face = q.argmax(dim=-1, keepdim=True)
    on_face = local.scatter(-1, face, (torch.where(local >= 0, half, -half)).gather(-1, face))
    clamped = torch.maximum(torch.minimum(local, half), -half)
    is_in = (q <= 0).all(dim=-1, keepdim=True)
    closest = torch.where(is_in, on_face, clamped)
    return outside + inside, center + _rotate_z(closest, c, s)


def sdf_cylinder(points: Tensor, center: Tensor, axis: Tensor, radius: Tensor,
                 half_length: Tensor) -> tuple[Tensor, Tensor]:
    """Finite solid cylinder with any unit axis (..., 3), radius and half length (...) in m.

    In the (radial, axial) half plane it is a rectangle, so the 2-D box formula applies."""
    d = points - center
    a = (d * axis).sum(-1)
    radial = d - a[..., None] * axis
    rho = radial.norm(dim=-1)
    u = _unit_or(radial, _any_perpendicular(axis).expand_as(radial))
    q = torch.stack((rho - radius, a.abs() - half_length), dim=-1)
    dist = q.clamp_min(0.0).norm(dim=-1) + q.max(dim=-1).values.clamp_max(0.0)
    inside = (q <= 0).all(dim=-1)
    side_first = q[..., 0] >= q[..., 1]
    rho_c = torch.where(inside & side_first, radius, torch.minimum(rho, radius))
    cap = torch.where(a >= 0, half_length, -half_length)
    a_c = torch.where(inside & ~side_first, cap, torch.maximum(torch.minimum(a, half_length),
                                                                -half_length))
    return dist, center + a_c[..., None] * axis + rho_c[..., None] * u


def _per_kind(scene: Scene, p: Tensor) -> list[tuple[Tensor, Tensor, Tensor, Tensor]]:
    """(distance (N,P,K), closest (N,P,K,3), id (N,K), valid (N,K)) for each primitive kind."""
    q = p[:, :, None, :]
    e = lambda t: t[:, None]  # noqa: E731  (N, K, ...) -> (N, 1, K, ...)
    out = []
    d, c = sdf_box(q, e(scene.box_center), e(scene.box_half), e(scene.box_yaw))
    out.append((d, c, scene.box_id, scene.box_valid))
    d, c = sdf_cylinder(q, e(scene.cyl_center), e(scene.cyl_axis), e(scene.cyl_radius),
                        e(scene.cyl_half_length))
    out.append((d, c, scene.cyl_id, scene.cyl_valid))
    d, c = sdf_sphere(q, e(scene.sph_center), e(scene.sph_radius))
    out.append((d, c, scene.sph_id, scene.sph_valid))
    d, c = sdf_plane(q, e(scene.plane_point), e(scene.plane_normal))
    out.append((d, c, scene.plane_id, scene.plane_valid))
    return out


def check_points(scene: Scene, points: Tensor, name: str = "points") -> Tensor:
    """Validate query points ``(N, P, 3)`` against the scene's env count, device and dtype."""
    if not isinstance(points, Tensor):
        raise ConfigError(f"{name}: expected a torch.Tensor, got {type(points).__name__}")
    n = scene.n_envs
    if points.dim() != 3 or points.shape[0] != n or points.shape[2] != 3:
        raise ConfigError(f"{name}: expected shape ({n}, P, 3), got {tuple(points.shape)}")
    if points.device != scene.bounds_min.device:
        raise ConfigError(f"{name}: expected device {scene.bounds_min.device}, "
                          f"got {points.device}")
    if points.dtype != scene.bounds_min.dtype:
        raise ConfigError(f"{name}: expected dtype {scene.bounds_min.dtype}, got {points.dtype}")
    return points


def scene_sdf(scene: Scene, points: Tensor) -> SceneDistance:
    """Signed distance from ``points (N, P, 3)`` (m, world) to the scene of each env: the
    minimum over its valid boxes (gate frames included), cylinders, spheres and planes."""
    p = check_points(scene, points)
    parts = _per_kind(scene, p)
    dist = torch.cat([torch.where(v[:, None], d, torch.inf) for d, _, _, v in parts], dim=-1)
    closest = torch.cat([c for _, c, _, _ in parts], dim=-2)
    ids = torch.cat([i for _, _, i, _ in parts], dim=-1)
    best, k = dist.min(dim=-1)
    none = torch.isinf(best) & (best > 0)
    obj = torch.where(none, -1, ids.gather(-1, k))
    pt = closest.gather(-2, k[..., None, None].expand(*k.shape, 1, 3))[..., 0, :]
    pt = torch.where(none[..., None], torch.nan, pt)
    return SceneDistance(distance=best, object_id=obj, closest=pt)
