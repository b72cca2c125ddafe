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
from volary.worlds.primitives import Scene, retilt, untilt


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


def sdf_box(
    points: Tensor, center: Tensor, half: Tensor, yaw: Tensor, tilt: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Box yawed about world z: half extents (..., 3) along its own axes, yaw (...) rad, and
    tilted by ``tilt`` (..., 3, 3) before the yaw (:attr:`Scene.box_tilt`; None: level).

    Outside: length of the excess over the half extents; inside: minus the distance to the
    nearest face. Closest point: the clamp of the local point (outside) or the projection onto
    the nearest face (inside)."""
    c, s = torch.cos(yaw), torch.sin(yaw)
    local = untilt(_rotate_z(points - center, c, -s), tilt)
    q = local.abs() - half
    outside = q.clamp_min(0.0).norm(dim=-1)
    inside = q.max(dim=-1).values.clamp_max(0.0)
    face = q.argmax(dim=-1, keepdim=True)
    on_face = local.scatter(-1, face, (torch.where(local >= 0, half, -half)).gather(-1, face))
    clamped = torch.maximum(torch.minimum(local, half), -half)
    is_in = (q <= 0).all(dim=-1, keepdim=True)
    closest = torch.where(is_in, on_face, clamped)
    return outside + inside, center + _rotate_z(retilt(closest, tilt), c, s)


def sdf_cylinder(
    points: Tensor, center: Tensor, axis: Tensor, radius: Tensor, half_length: Tensor
) -> tuple[Tensor, Tensor]:
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
    a_c = torch.where(
        inside & ~side_first, cap, torch.maximum(torch.minimum(a, half_length), -half_length)
    )
    return dist, center + a_c[..., None] * axis + rho_c[..., None] * u


def _dot(a: Tensor, b: Tensor) -> Tensor:
    return (a * b).sum(-1)


def _ratio(num: Tensor, den: Tensor) -> Tensor:
    """``num / den`` clamped to [0, 1], 0 where ``den`` is 0 (degenerate triangles)."""
    ok = den != 0
    return torch.where(ok, num / torch.where(ok, den, torch.ones_like(den)), 0.0).clamp(0.0, 1.0)


def closest_on_triangle(points: Tensor, a: Tensor, b: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    """Closest point on triangle (a, b, c) to ``points``, all ``(..., 3)`` broadcasting, and the
    feature it lies on (int64: 0 face, 1-3 edges ab/bc/ca, 4-6 vertices a/b/c).

    Ericson, *Real-Time Collision Detection* (2005), Sec. 5.1.5: Voronoi regions of the
    vertices, then of the edges, tested with dot products; otherwise the barycentric projection
    onto the face. Regions are evaluated for all points and merged with ``where``, lowest
    priority first. Degenerate triangles fall into a vertex or edge region (no division by 0)."""
    ab, ac, ap = b - a, c - a, points - a
    d1, d2 = _dot(ab, ap), _dot(ac, ap)
    bp, cp = points - b, points - c
    d3, d4 = _dot(ab, bp), _dot(ac, bp)
    d5, d6 = _dot(ab, cp), _dot(ac, cp)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    den = va + vb + vc
    ok = den != 0
    inv = torch.where(ok, 1.0 / torch.where(ok, den, torch.ones_like(den)), 0.0)
    v, w = vb * inv, vc * inv
    out = a + v[..., None] * ab + w[..., None] * ac
    feat = torch.zeros(out.shape[:-1], dtype=torch.int64, device=out.device)
    e_bc = (va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0)
    t_bc = _ratio(d4 - d3, (d4 - d3) + (d5 - d6))
    cases = [
        (e_bc, b + t_bc[..., None] * (c - b), 2),
        ((vb <= 0) & (d2 >= 0) & (d6 <= 0), a + _ratio(d2, d2 - d6)[..., None] * ac, 3),
        ((d6 >= 0) & (d5 <= d6), c.expand_as(out), 6),
        ((vc <= 0) & (d1 >= 0) & (d3 <= 0), a + _ratio(d1, d1 - d3)[..., None] * ab, 1),
        ((d3 >= 0) & (d4 <= d3), b.expand_as(out), 5),
        ((d1 <= 0) & (d2 <= 0), a.expand_as(out), 4),
    ]
    for mask, point, code in cases:
        out = torch.where(mask[..., None], point, out)
        feat = torch.where(mask, code, feat)
    return out, feat


def sdf_triangles(points: Tensor, corners: Tensor, normals: Tensor) -> tuple[Tensor, Tensor]:
    """Distance to individual triangles: points (..., 3), corners (..., 3, 3), pseudo-normals
    (..., 7, 3) (face, edges ab/bc/ca, vertices a/b/c; see ``meshgeom.pseudo_normals``).

    Unsigned distance to the closest point, signed by the pseudo-normal of the feature it lies
    on (Baerentzen & Aanaes 2005): for a closed mesh the triangle nearest to a point gives the
    correct inside/outside sign. Zero normals (open meshes) give the unsigned distance."""
    a, b, c = corners.unbind(-2)
    q, feat = closest_on_triangle(points, a, b, c)
    diff = points - q
    dist = diff.norm(dim=-1)
    n = normals.expand(*feat.shape, 7, 3).gather(
        -2, feat[..., None, None].expand(*feat.shape, 1, 3)
    )[..., 0, :]
    sign = torch.where(_dot(diff, n) < 0, -1.0, 1.0).to(dist.dtype)
    return sign * dist, q


MESH_CHUNK = 1 << 19  # (point, triangle) pairs per step of mesh_sdf: ~120 MB float32 peak


def mesh_sdf(
    points: Tensor,
    corners: Tensor,
    normals: Tensor,
    valid: Tensor,
    ids: Tensor,
    chunk: int = MESH_CHUNK,
) -> tuple[Tensor, Tensor, Tensor]:
    """Nearest valid triangle per point: points (N, P, 3), corners (N, T, 3, 3), normals
    (N, T, 7, 3), valid/ids (N, T) -> signed distance (N, P), closest point (N, P, 3), id
    (N, P) (+inf, NaN, -1 where an env has no valid triangle).

    Brute force over triangles, in chunks of about ``chunk`` (point, triangle) pairs per env
    batch, so the (N, P, T) temporaries stay bounded (about 60 floats per pair at the peak)."""
    n, p, t = points.shape[0], points.shape[1], corners.shape[1]
    best = torch.full((n, p), torch.inf, dtype=points.dtype, device=points.device)
    best_q = torch.full((n, p, 3), torch.nan, dtype=points.dtype, device=points.device)
    best_id = torch.full((n, p), -1, dtype=torch.int64, device=points.device)
    tc = max(1, min(t, chunk // max(1, n * p)))
    pc = max(1, min(p, chunk // max(1, n * tc)))
    for p0 in range(0, p, pc):
        q = points[:, p0 : p0 + pc, None, :]
        for t0 in range(0, t, tc):
            sl = slice(t0, t0 + tc)
            d, cp = sdf_triangles(q, corners[:, None, sl], normals[:, None, sl])
            d = torch.where(valid[:, None, sl], d, torch.inf)
            k = d.abs().argmin(dim=-1, keepdim=True)
            dk = d.gather(-1, k)[..., 0]
            better = dk.abs() < best[:, p0 : p0 + pc].abs()
            qk = cp.gather(-2, k[..., None].expand(*k.shape, 3))[..., 0, :]
            best[:, p0 : p0 + pc] = torch.where(better, dk, best[:, p0 : p0 + pc])
            best_q[:, p0 : p0 + pc] = torch.where(better[..., None], qk, best_q[:, p0 : p0 + pc])
            idk = ids[:, sl].gather(-1, k[..., 0])
            best_id[:, p0 : p0 + pc] = torch.where(better, idk, best_id[:, p0 : p0 + pc])
    return best, best_q, best_id


def _per_kind(scene: Scene, p: Tensor) -> list[tuple[Tensor, Tensor, Tensor, Tensor]]:
    """(distance (N,P,K), closest (N,P,K,3), id (N,K), valid (N,K)) for each primitive kind
    that some env holds (boxes always, so the list is never empty): a kind with no valid entry
    would only add +inf distances."""
    q = p[:, :, None, :]
    e = lambda t: t[:, None]  # noqa: E731  (N, K, ...) -> (N, 1, K, ...)
    _, cyl, sph, plane = scene.kinds_present  # boxes: always
    out = []
    tilt = None if scene.box_tilt is None else e(scene.box_tilt)
    d, c = sdf_box(q, e(scene.box_center), e(scene.box_half), e(scene.box_yaw), tilt)
    out.append((d, c, scene.box_id, scene.box_valid))
    if cyl:
        d, c = sdf_cylinder(
            q, e(scene.cyl_center), e(scene.cyl_axis), e(scene.cyl_radius),
            e(scene.cyl_half_length),
        )  # fmt: skip
        out.append((d, c, scene.cyl_id, scene.cyl_valid))
    if sph:
        d, c = sdf_sphere(q, e(scene.sph_center), e(scene.sph_radius))
        out.append((d, c, scene.sph_id, scene.sph_valid))
    if plane:
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
        raise ConfigError(f"{name}: expected device {scene.bounds_min.device}, got {points.device}")
    if points.dtype != scene.bounds_min.dtype:
        raise ConfigError(f"{name}: expected dtype {scene.bounds_min.dtype}, got {points.dtype}")
    return points


def scene_sdf(scene: Scene, points: Tensor) -> SceneDistance:
    """Signed distance from ``points (N, P, 3)`` (m, world) to the scene of each env: the
    minimum over its valid boxes (gate frames included), cylinders, spheres, planes and mesh
    triangles (closed meshes signed, open ones unsigned; see :func:`mesh_sdf`)."""
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
    if not scene.has_triangles:
        return SceneDistance(distance=best, object_id=obj, closest=pt)
    md, mq, mid = mesh_sdf(p, scene.tri_vertices, scene.tri_normals, scene.tri_valid, scene.tri_id)
    use = md < best
    return SceneDistance(
        distance=torch.where(use, md, best),
        object_id=torch.where(use, mid, obj),
        closest=torch.where(use[..., None], mq, pt),
    )
