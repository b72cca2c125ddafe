"""The analytic reference caster: batched rays against every padded primitive of a Scene.

Each primitive kind has one function ``_t_<kind>(o, d, ...) -> t`` giving the ray parameter of
the first surface crossing at ``t > 0`` (``+inf`` if none), for broadcasting shapes
``o, d: (N, R, 1, 3)`` against primitives ``(N, 1, K, ...)``, and one ``_n_<kind>`` giving the
outward normal at a hit point. Rays are not solid-tested: a ray starting inside an obstacle
reports the first surface it crosses (the obstacle's own exit surface unless another surface is
nearer), exactly like the mesh backends with back faces enabled. Works on any device and dtype;
float64 gives closed-form references.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from volary.sensors.raycast.base import (
    FLOOR_ID,
    RayHits,
    SceneCaster,
    check_rays,
    finite_rays,
    miss_hits,
)
from volary.worlds.primitives import Scene, SceneSpec, retilt, untilt

INF = float("inf")
# bound on N * R_chunk * K of the (N, R, K) temporaries. CPU, one torch thread: cache-sized
# (forest, 16 envs x 4096 rays: 146 k rays/s vs 85 k at 2^21); several threads need big
# chunks, or thread syncs per small op dominate (2 threads: 228 k rays/s at 2^21, 17 k at 2^16);
# a GPU wants big chunks too (fewer launches).
CHUNK_SINGLE_THREAD = 1 << 16
CHUNK_PARALLEL = 1 << 21
CHUNK_CUDA = 1 << 24


def _chunk_elements(device: torch.device) -> int:
    if device.type == "cuda":
        return CHUNK_CUDA
    return CHUNK_SINGLE_THREAD if torch.get_num_threads() == 1 else CHUNK_PARALLEL


def _dot(a: Tensor, b: Tensor) -> Tensor:
    return (a * b).sum(-1)


def _first_positive(t0: Tensor, t1: Tensor) -> Tensor:
    """The smaller of two crossings that is > 0, else +inf (NaN counts as no crossing)."""
    t0 = torch.where(t0 > 0, t0, INF)
    t1 = torch.where(t1 > 0, t1, INF)
    return torch.minimum(t0, t1)


def _circle_roots(p: Tensor, d: Tensor, radius: Tensor) -> tuple[Tensor, Tensor]:
    """Both t with |p + t d| = r, in the form of Haines et al., "Precision Improvements for
    Ray/Sphere Intersection" (Ray Tracing Gems, 2019, Ch. 7): from the closest approach
    t_c = -p.d / d.d and q = p + t_c d, t = t_c -+ sqrt((r^2 - |q|^2) / d.d). Computing
    r^2 - |q|^2 with |q| <= r avoids the cancellation of |p|^2 - r^2 for distant objects.
    NaN where the ray misses (or d = 0)."""
    dd = _dot(d, d)
    tc = -_dot(p, d) / dd
    q = p + tc[..., None] * d
    h = (radius**2 - _dot(q, q)) / dd
    s = torch.sqrt(torch.where(h >= 0, h, torch.nan))
    return tc - s, tc + s


def _opt(f: Any, x: Tensor | None) -> Tensor | None:
    """``f(x)``, or None for None (an optional per-box tensor)."""
    return None if x is None else f(x)


def _yaw_frame(v: Tensor, yaw: Tensor) -> Tensor:
    """World vector -> box frame (rotation by -yaw about z)."""
    c, s = torch.cos(yaw), torch.sin(yaw)
    x, y = v[..., 0], v[..., 1]
    return torch.stack([c * x + s * y, -s * x + c * y, v[..., 2]], -1)


def _yaw_world(v: Tensor, yaw: Tensor) -> Tensor:
    c, s = torch.cos(yaw), torch.sin(yaw)
    x, y = v[..., 0], v[..., 1]
    return torch.stack([c * x - s * y, s * x + c * y, v[..., 2]], -1)


def _t_box(o: Tensor, d: Tensor, center: Tensor, half: Tensor, yaw: Tensor,
           tilt: Tensor | None = None) -> Tensor:  # fmt: skip
    """Slab method (Kay & Kajiya, SIGGRAPH 1986) in the box frame: the ray is inside slab k for
    t in [(-h_k - o_k) / d_k, (h_k - o_k) / d_k]; the box is the intersection of the three.
    ``tilt`` (..., 3, 3): the box's turn before its yaw (``Scene.box_tilt``; None: level)."""
    rel = o - center
    ol = untilt(_yaw_frame(rel, yaw), tilt)
    dl = untilt(_yaw_frame(d.expand_as(rel), yaw), tilt)
    t1, t2 = (-half - ol) / dl, (half - ol) / dl
    parallel = dl == 0
    inside = ol.abs() <= half
    lo = torch.where(parallel, torch.where(inside, -INF, INF), torch.minimum(t1, t2))
    hi = torch.where(parallel, torch.where(inside, INF, -INF), torch.maximum(t1, t2))
    t_near, t_far = lo.amax(-1), hi.amin(-1)
    t = torch.where(t_near > 0, t_near, t_far)
    return torch.where((t_near <= t_far) & (t > 0), t, INF)


def _n_box(p: Tensor, center: Tensor, half: Tensor, yaw: Tensor,
           tilt: Tensor | None = None) -> Tensor:  # fmt: skip
    """Outward normal of the face the point lies on (largest |p_k| / h_k in the box frame)."""
    pl = untilt(_yaw_frame(p - center, yaw), tilt)
    k = (pl.abs() / half).argmax(-1, keepdim=True)
    n = torch.zeros_like(pl).scatter_(-1, k, torch.sign(pl.gather(-1, k)))
    return _yaw_world(retilt(n, tilt), yaw)


def _t_sphere(o: Tensor, d: Tensor, center: Tensor, radius: Tensor) -> Tensor:
    """|o + t d - c| = r (see :func:`_circle_roots`)."""
    t0, t1 = _circle_roots(o - center, d, radius)
    return _first_positive(t0, t1)


def _n_sphere(p: Tensor, center: Tensor) -> Tensor:
    return torch.nn.functional.normalize(p - center, dim=-1)


def _t_cylinder(
    o: Tensor, d: Tensor, center: Tensor, axis: Tensor, radius: Tensor, half_length: Tensor
) -> Tensor:
    """Finite capped cylinder with any axis a: the side is the circle equation
    |o_perp + t d_perp| = r (perp: component normal to a) with |o_a + t d_a| <= h; the caps
    are the planes o_a + t d_a = +-h with |p_perp + t d_perp| <= r."""
    oc = o - center
    oa, da = _dot(oc, axis), _dot(d, axis)
    op, dp = oc - oa[..., None] * axis, d - da[..., None] * axis
    s0, s1 = _circle_roots(op, dp, radius)
    s0 = torch.where((oa + s0 * da).abs() <= half_length, s0, INF)
    s1 = torch.where((oa + s1 * da).abs() <= half_length, s1, INF)
    caps = []
    for side in (-1.0, 1.0):
        t = (side * half_length - oa) / da
        q = op + t[..., None] * dp
        caps.append(torch.where(_dot(q, q) <= radius**2, t, INF))
    return torch.minimum(_first_positive(s0, s1), _first_positive(*caps))


def _n_cylinder(
    p: Tensor, center: Tensor, axis: Tensor, radius: Tensor, half_length: Tensor
) -> Tensor:
    """Cap normal +-a where the point is nearer the cap plane than the side, else radial."""
    rel = p - center
    pa = _dot(rel, axis)
    pp = rel - pa[..., None] * axis
    radial = pp.norm(dim=-1)
    on_cap = (half_length - pa.abs()).abs() < (radius - radial).abs()
    side = pp / radial.clamp_min(torch.finfo(p.dtype).tiny)[..., None]
    return torch.where(on_cap[..., None], torch.sign(pa)[..., None] * axis, side)


def _t_plane(o: Tensor, d: Tensor, point: Tensor, normal: Tensor, lo: Tensor, hi: Tensor) -> Tensor:
    """Plane n.(x - p0) = 0 crossed at t = n.(p0 - o) / n.d, kept where the crossing lies in the
    env's bounds box [lo, hi] (the part of the plane the mesh backends tessellate)."""
    t = _dot(normal, point - o) / _dot(normal, d)
    x = o + t[..., None] * d
    tol = 64 * torch.finfo(o.dtype).eps * (1 + torch.maximum(lo.abs(), hi.abs()))
    inside = ((x >= lo - tol) & (x <= hi + tol)).all(-1)
    return torch.where(inside & (t > 0), t, INF)


def _t_triangle(o: Tensor, d: Tensor, v: Tensor) -> Tensor:
    """Moller & Trumbore, "Fast, minimum storage ray-triangle intersection" (JGT 1997), both
    sides: e1 = v1 - v0, e2 = v2 - v0, P = d x e2, det = e1.P, u = (o - v0).P / det,
    Q = (o - v0) x e1, v = d.Q / det, t = e2.Q / det; hit where u, v >= 0, u + v <= 1."""
    v0, e1, e2 = v[..., 0, :], v[..., 1, :] - v[..., 0, :], v[..., 2, :] - v[..., 0, :]
    pv = torch.linalg.cross(d, e2)
    det = _dot(e1, pv)
    inv = 1.0 / det
    tv = o - v0
    u = _dot(tv, pv) * inv
    qv = torch.linalg.cross(tv, e1)
    w = _dot(d, qv) * inv
    t = _dot(e2, qv) * inv
    ok = (u >= 0) & (w >= 0) & (u + w <= 1) & (t > 0) & (det != 0)
    return torch.where(ok, t, INF)


def _n_triangle(v: Tensor) -> Tensor:
    e1, e2 = v[..., 1, :] - v[..., 0, :], v[..., 2, :] - v[..., 0, :]
    return torch.nn.functional.normalize(torch.linalg.cross(e1, e2), dim=-1)


def _take(x: Tensor, idx: Tensor) -> Tensor:
    """x (N, K, ...) gathered at idx (N, R) -> (N, R, ...)."""
    flat = idx.reshape(idx.shape[0], -1)
    extra = x.shape[2:]
    g = flat.reshape(*flat.shape, *([1] * len(extra))).expand(*flat.shape, *extra)
    return x.gather(1, g)


class TorchCaster(SceneCaster):
    """Reference :class:`~volary.sensors.raycast.base.RayCaster` on ``Scene.stack(specs)``.

    Exact for the analytic primitives (box with yaw, capped cylinder with any axis, sphere,
    plane clipped to the bounds box, triangles when the Scene carries them) plus, with
    ``ground``, the floor z = bounds_min z over the bounds' x-y rectangle (id ``FLOOR_ID``).
    """

    name = "torch"

    def _build(self, per: list[SceneSpec], ground: bool) -> None:
        # ``segments`` is unused: the reference is exact
        self.scene = Scene.stack(per, device=self.device, dtype=self.dtype)
        self._planes = self._with_floor(self.scene, ground)
        sc = self.scene
        tri_valid = getattr(sc, "tri_valid", None)
        self._present = {  # kinds with at least one real entry in some env (others are skipped)
            "box": bool(sc.box_valid.any()),
            "cyl": bool(sc.cyl_valid.any()),
            "sph": bool(sc.sph_valid.any()),
            "plane": bool(self._planes[2].any()),
            "tri": tri_valid is not None and bool(tri_valid.any()),
        }

    @staticmethod
    def _with_floor(s: Scene, ground: bool) -> tuple[Tensor, ...]:
        point, normal, valid, ids = s.plane_point, s.plane_normal, s.plane_valid, s.plane_id
        if ground:
            up = torch.zeros_like(s.bounds_min)
            up[:, 2] = 1.0
            point = torch.cat([point, s.bounds_min[:, None]], 1)
            normal = torch.cat([normal, up[:, None]], 1)
            valid = torch.cat([valid, torch.ones_like(valid[:, :1])], 1)
            ids = torch.cat([ids, torch.full_like(ids[:, :1], FLOOR_ID)], 1)
        return point, normal, valid, ids

    def cast(self, origins: Tensor, directions: Tensor, max_range: float) -> RayHits:
        check_rays(self, origins, directions, max_range)
        n, r = origins.shape[:2]
        if r == 0:
            return miss_hits((n, 0), self.device, self.dtype)
        k_max = max(self._sizes())
        step = max(1, _chunk_elements(self.device) // max(1, n * k_max))
        parts = [
            self._cast_chunk(origins[:, i : i + step], directions[:, i : i + step], max_range)
            for i in range(0, r, step)
        ]
        if len(parts) == 1:
            return parts[0]
        return RayHits(
            *(
                torch.cat([getattr(p, f) for p in parts], 1)
                for f in ("distance", "object_id", "normal")
            )
        )

    def _sizes(self) -> list[int]:
        """Padded entry counts K of the kinds that are cast (for the chunk size)."""
        s = self.scene
        valid = {
            "box": s.box_valid,
            "cyl": s.cyl_valid,
            "sph": s.sph_valid,
            "plane": self._planes[2],
            "tri": getattr(s, "tri_valid", None),
        }
        return [
            int(v.shape[1]) for k, v in valid.items() if v is not None and self._present[k]
        ] or [1]

    def _kinds(self, o: Tensor, d: Tensor) -> list[tuple[Tensor, Tensor, Any]]:
        """Per primitive kind: (t (N, R, K) with invalid entries +inf, ids (N, K), normal fn)."""
        s, e = self.scene, lambda x: x[:, None]  # (N, K, ...) -> (N, 1, K, ...)
        pp, pn, pv, pid = self._planes
        has = self._present
        out = []
        if has["box"]:
            out.append(
                (
                    _t_box(o, d, e(s.box_center), e(s.box_half), e(s.box_yaw), _opt(e, s.box_tilt)),
                    s.box_valid,
                    s.box_id,
                    lambda p, g: _n_box(
                        p, g(s.box_center), g(s.box_half), g(s.box_yaw), _opt(g, s.box_tilt)
                    ),
                )
            )
        if has["cyl"]:
            out.append(
                (
                    _t_cylinder(
                        o, d, e(s.cyl_center), e(s.cyl_axis), e(s.cyl_radius), e(s.cyl_half_length)
                    ),
                    s.cyl_valid,
                    s.cyl_id,
                    lambda p, g: _n_cylinder(
                        p, g(s.cyl_center), g(s.cyl_axis), g(s.cyl_radius), g(s.cyl_half_length)
                    ),
                )
            )
        if has["sph"]:
            out.append(
                (
                    _t_sphere(o, d, e(s.sph_center), e(s.sph_radius)),
                    s.sph_valid,
                    s.sph_id,
                    lambda p, g: _n_sphere(p, g(s.sph_center)),
                )
            )
        if has["plane"]:
            lo, hi = s.bounds_min[:, None, None], s.bounds_max[:, None, None]
            out.append((_t_plane(o, d, e(pp), e(pn), lo, hi), pv, pid, lambda p, g: g(pn)))
        if has["tri"]:
            tri = getattr(s, "tri_vertices").to(o.dtype)  # noqa: B009 (Scene may predate it)
            out.append(
                (
                    _t_triangle(o, d, e(tri)),
                    getattr(s, "tri_valid"),  # noqa: B009
                    getattr(s, "tri_id"),  # noqa: B009
                    lambda p, g: _n_triangle(g(tri)),
                )
            )
        return [(torch.where(valid[:, None], t, INF), ids, fn) for t, valid, ids, fn in out]

    def _cast_chunk(self, origins: Tensor, directions: Tensor, max_range: float) -> RayHits:
        ok = finite_rays(origins, directions)
        o = torch.where(ok[..., None], origins, 0.0)
        d = torch.where(ok[..., None], directions, 0.0)
        best = torch.full(o.shape[:2], INF, device=o.device, dtype=o.dtype)
        oid = torch.full(o.shape[:2], -1, device=o.device, dtype=torch.int64)
        normal = torch.zeros_like(o)
        for t, ids, normal_fn in self._kinds(o[:, :, None], d[:, :, None]):
            t_min, k = t.min(-1)
            closer = t_min < best
            if not bool(closer.any()):
                continue
            p = o + t_min.nan_to_num(posinf=0.0)[..., None] * d
            n_k = normal_fn(p, lambda x, k=k: _take(x, k))
            best = torch.where(closer, t_min, best)
            oid = torch.where(closer, _take(ids, k), oid)
            normal = torch.where(closer[..., None], n_k, normal)
        hit = ok & (best <= max_range)
        flip = torch.where(_dot(normal, d) > 0, -1.0, 1.0)
        return RayHits(
            torch.where(hit, best, INF),
            torch.where(hit, oid, -1),
            torch.where(hit[..., None], normal * flip[..., None], 0.0),
        )
