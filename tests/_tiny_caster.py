"""A tiny analytic ray caster for the sensor tests, written against the RayCaster protocol so
the sensors are tested without the backends: planes (not clipped to the bounds), yawed boxes,
cylinders, spheres, gate frames and the floor z = bounds_min z (like the real backends).

Intersections are closed-form (slab method for boxes, quadratic for cylinders/spheres), so a
sensor test can ask for exact ranges. Each env may hold a different SceneSpec.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

try:
    from volary.sensors.raycast.base import RayHits
except ImportError:  # the raycast package is being built beside these sensors

    @dataclass(frozen=True)
    class RayHits:  # type: ignore[no-redef]
        distance: Tensor
        object_id: Tensor
        normal: Tensor


from volary.worlds import Box, Cylinder, Plane, SceneSpec, Sphere
from volary.worlds.primitives import gate_boxes

_INF = math.inf


class TinyCaster:
    name = "tiny"

    def __init__(
        self,
        specs: SceneSpec | Sequence[SceneSpec],
        n_envs: int | None = None,
        *,
        ground: bool = True,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        items = [specs] if isinstance(specs, SceneSpec) else list(specs)
        self.n_envs = len(items) if n_envs is None else n_envs
        self.specs = [items[i % len(items)] for i in range(self.n_envs)]
        self.ground, self.device, self.dtype = ground, torch.device("cpu"), dtype
        self.calls = 0

    def cast(self, origins: Tensor, directions: Tensor, max_range: float) -> RayHits:
        self.calls += 1
        o, d = origins.double(), directions.double()
        n, r = o.shape[:2]
        best = torch.full((n, r), _INF, dtype=torch.float64)
        oid = torch.full((n, r), -1, dtype=torch.int64)
        nrm = torch.zeros(n, r, 3, dtype=torch.float64)
        for i, spec in enumerate(self.specs):
            prims = list(spec.obstacles) + [b for g in spec.gates for b in gate_boxes(g)]
            if self.ground:
                prims.append(Plane((0.0, 0.0, spec.bounds_min[2]), (0.0, 0.0, 1.0), 0))
            for p in prims:
                t, nn = _intersect(p, o[i], d[i])
                better = t < best[i]
                best[i] = torch.where(better, t, best[i])
                oid[i] = torch.where(better, torch.full_like(oid[i], p.object_id), oid[i])
                nrm[i] = torch.where(better[:, None], nn, nrm[i])
        best = torch.where(best <= max_range, best, torch.full_like(best, _INF))
        hit = torch.isfinite(best)
        face = torch.where((nrm * d).sum(-1, keepdim=True) > 0, -nrm, nrm)
        return RayHits(
            best.to(self.dtype),
            torch.where(hit, oid, -1),
            torch.where(hit[:, :, None], face, 0.0).to(self.dtype),
        )


def _first(ts: list[Tensor], ns: list[Tensor]) -> tuple[Tensor, Tensor]:
    t = torch.stack(ts, -1)
    t = torch.where(t >= 0, t, _INF)
    k = t.argmin(-1)
    nn = torch.stack(ns, -2).expand(*t.shape, 3) if ns[0].dim() == 1 else torch.stack(ns, -2)
    return t.gather(-1, k[:, None])[:, 0], nn.gather(-2, k[:, None, None].expand(-1, 1, 3))[:, 0]


def _intersect(p, o: Tensor, d: Tensor) -> tuple[Tensor, Tensor]:
    if isinstance(p, Plane):
        n = torch.tensor(p.normal, dtype=torch.float64)
        den = d @ n
        t = ((torch.tensor(p.point, dtype=torch.float64) - o) @ n) / den
        t = torch.where((den.abs() > 1e-12) & (t >= 0), t, _INF)
        return t, n.expand_as(o)
    if isinstance(p, Sphere):
        w = o - torch.tensor(p.center, dtype=torch.float64)
        b = (w * d).sum(-1)
        disc = b * b - ((w * w).sum(-1) - p.radius**2)
        s = disc.clamp_min(0).sqrt()
        t0, t1 = -b - s, -b + s
        t = torch.where(t0 >= 0, t0, t1)
        t = torch.where((disc >= 0) & (t >= 0), t, _INF)
        hitp = w + t.clamp(max=1e9)[:, None] * d
        return t, hitp / hitp.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    if isinstance(p, Box):
        cy, sy = math.cos(p.yaw), math.sin(p.yaw)
        rot = torch.tensor([[cy, -sy, 0.0], [sy, cy, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
        ol = (o - torch.tensor(p.center, dtype=torch.float64)) @ rot
        dl = d @ rot
        h = torch.tensor(p.size, dtype=torch.float64) / 2
        inv = 1.0 / torch.where(dl.abs() > 1e-15, dl, torch.full_like(dl, 1e-15))
        ta, tb = (-h - ol) * inv, (h - ol) * inv
        tmin, tmax = torch.minimum(ta, tb), torch.maximum(ta, tb)
        tn, ax_n = tmin.max(-1)
        tf, ax_f = tmax.min(-1)
        ok = (tn <= tf) & (tf >= 0)
        inside = tn < 0
        t = torch.where(ok, torch.where(inside, tf, tn), _INF)
        ax = torch.where(inside, ax_f, ax_n)
        nl = torch.nn.functional.one_hot(ax, 3).double()
        return t, nl @ rot.T
    if isinstance(p, Cylinder):
        a = torch.tensor(p.axis, dtype=torch.float64)
        w = o - torch.tensor(p.center, dtype=torch.float64)
        hl = p.length / 2
        da, wa = d @ a, w @ a
        dp, wp = d - da[:, None] * a, w - wa[:, None] * a
        qa, qb, qc = (dp * dp).sum(-1), (dp * wp).sum(-1), (wp * wp).sum(-1) - p.radius**2
        disc = qb * qb - qa * qc
        s = disc.clamp_min(0).sqrt()
        qa_s = qa.clamp_min(1e-15)
        cand, norms = [], []
        for sign in (-1.0, 1.0):
            t = (-qb + sign * s) / qa_s
            ok = (disc >= 0) & (qa > 1e-15) & ((wa + t * da).abs() <= hl)
            t = torch.where(ok, t, _INF)
            rp = wp + t.clamp(max=1e9)[:, None] * dp
            cand.append(t)
            norms.append(rp / rp.norm(dim=-1, keepdim=True).clamp_min(1e-12))
        for cap in (-hl, hl):
            t = (cap - wa) / torch.where(da.abs() > 1e-15, da, torch.full_like(da, 1e-15))
            rp = wp + t.clamp(-1e9, 1e9)[:, None] * dp
            ok = (da.abs() > 1e-15) & ((rp * rp).sum(-1) <= p.radius**2)
            cand.append(torch.where(ok, t, _INF))
            norms.append((a * math.copysign(1.0, cap)).expand_as(o))
        return _first(cand, norms)
    raise TypeError(type(p))


def room(half: float = 5.0, height: float = 4.0, thickness: float = 0.5) -> SceneSpec:
    """A closed box room [-half, half]^2 x [0, height] built from six Box walls (ids 1..6)."""
    h, t = half, thickness
    walls = (
        Box((h + t / 2, 0, height / 2), (t, 2 * h + 2 * t, height + 2 * t), 0.0, 1),
        Box((-h - t / 2, 0, height / 2), (t, 2 * h + 2 * t, height + 2 * t), 0.0, 2),
        Box((0, h + t / 2, height / 2), (2 * h + 2 * t, t, height + 2 * t), 0.0, 3),
        Box((0, -h - t / 2, height / 2), (2 * h + 2 * t, t, height + 2 * t), 0.0, 4),
        Box((0, 0, height + t / 2), (2 * h + 2 * t, 2 * h + 2 * t, t), 0.0, 5),
        Box((0, 0, -t / 2), (2 * h + 2 * t, 2 * h + 2 * t, t), 0.0, 6),
    )
    return SceneSpec("room", (-h - 1, -h - 1, -1), (h + 1, h + 1, height + 1), walls)


def exact_casters() -> list[tuple[str, object]]:
    """(name, make(spec, n_envs)) for the casters whose results are exact on boxes and planes:
    this tiny one, the torch reference and Embree (the latter two when importable)."""
    out: list[tuple[str, object]] = [("tiny", lambda s, n: TinyCaster(s, n, dtype=torch.float32))]
    try:
        from volary.sensors.raycast import make_raycaster
    except ImportError:
        return out
    out.append(("torch", lambda s, n: make_raycaster(s, n, backend="torch")))
    try:
        import embreex  # noqa: F401

        out.append(("embree", lambda s, n: make_raycaster(s, n, backend="embree")))
    except ImportError:
        pass
    return out
