"""Padding one SceneSpec per env into the tensors of a batched Scene."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from volary.errors import ConfigError
from volary.worlds.primitives import Box, Cylinder, Gate, Mesh, Plane, Scene, SceneSpec, Sphere


def gate_boxes(g: Gate) -> list[Box]:
    """The four frame bars around a gate's opening, as boxes (yaw from the gate's plane)."""
    c = np.asarray(g.corners, dtype=float)
    center = c.mean(axis=0)
    across = c[1] - c[0]  # along the top bar
    width = float(np.linalg.norm(across))
    height = float(np.linalg.norm(c[2] - c[1]))
    yaw = math.atan2(across[1], across[0])
    b, d = g.border, g.depth
    u = across / max(width, 1e-12)
    up = np.array([0.0, 0.0, 1.0])
    bars = [
        (center + up * (height + b) / 2, (width + 2 * b, d, b)),
        (center - up * (height + b) / 2, (width + 2 * b, d, b)),
        (center + u * (width + b) / 2, (b, d, height)),
        (center - u * (width + b) / 2, (b, d, height)),
    ]
    return [Box((float(p[0]), float(p[1]), float(p[2])), s, yaw, g.object_id) for p, s in bars]


def _has_mesh(spec: SceneSpec) -> bool:
    return any(isinstance(o, Mesh) for o in spec.obstacles)


def _mesh_rows(spec: SceneSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Corners (T, 3, 3), object ids (T,) and pseudo-normals (T, 7, 3) of a spec's meshes."""
    meshes = [o for o in spec.obstacles if isinstance(o, Mesh)]
    if not meshes:
        return np.zeros((0, 3, 3)), np.zeros(0, np.int64), np.zeros((0, 7, 3))
    return (
        np.concatenate([m.corners for m in meshes]),
        np.concatenate([np.full(len(m.triangles), m.object_id, np.int64) for m in meshes]),
        np.concatenate([m.pseudo_normals for m in meshes]),
    )


def _pad_meshes(items: list[SceneSpec], n: int, device, dtype) -> tuple[torch.Tensor, ...]:
    """Triangle tensors of env i from spec ``items[i % len(items)]``, padded to the longest
    (at least one all-zero invalid row); built once per given spec, converted, then tiled on
    the device (no N-sized float64 copy on the host)."""
    rows = [_mesh_rows(s) for s in items]
    k = max(1, max(len(r[1]) for r in rows))
    m = len(items)
    corners, normals = np.zeros((m, k, 3, 3)), np.zeros((m, k, 7, 3))
    ids, valid = np.full((m, k), -1, np.int64), np.zeros((m, k), bool)
    for i, (c, o, nrm) in enumerate(rows):
        corners[i, : len(o)], ids[i, : len(o)], normals[i, : len(o)] = c, o, nrm
        valid[i, : len(o)] = True
    tile = torch.arange(n, device=device) % m
    f = lambda a: torch.as_tensor(a, dtype=dtype, device=device)[tile]  # noqa: E731
    return (
        f(corners),
        torch.as_tensor(valid, device=device)[tile],
        torch.as_tensor(ids, device=device)[tile],
        f(normals),
    )


def stack_specs(
    specs: SceneSpec | Sequence[SceneSpec], n_envs: int | None, *, device, dtype
) -> Scene:
    items = [specs] if isinstance(specs, SceneSpec) else list(specs)
    if not items:
        raise ConfigError("specs: expected at least one SceneSpec")
    n = len(items) if n_envs is None else int(n_envs)
    per = [items[i % len(items)] for i in range(n)]
    boxes = [
        [o for o in s.obstacles if isinstance(o, Box)] + [b for g in s.gates for b in gate_boxes(g)]
        for s in per
    ]
    cyls = [[o for o in s.obstacles if isinstance(o, Cylinder)] for s in per]
    sphs = [[o for o in s.obstacles if isinstance(o, Sphere)] for s in per]
    planes = [[o for o in s.obstacles if isinstance(o, Plane)] for s in per]
    gates = [list(s.gates) for s in per]

    def pad(rows, fn, width, fill):
        k = max(1, max(len(r) for r in rows))
        out = np.full((n, k, *width), fill, dtype=float)
        valid = np.zeros((n, k), dtype=bool)
        for i, r in enumerate(rows):
            for j, o in enumerate(r):
                out[i, j] = fn(o)
                valid[i, j] = True
        return out, valid

    t = lambda a: torch.as_tensor(a, device=device, dtype=dtype)  # noqa: E731
    ti = lambda a: torch.as_tensor(a, device=device, dtype=torch.int64)  # noqa: E731
    bt = lambda a: torch.as_tensor(a, device=device, dtype=torch.bool)  # noqa: E731
    bc, bv = pad(boxes, lambda o: o.center, (3,), 0.0)
    bh, _ = pad(boxes, lambda o: [s / 2 for s in o.size], (3,), 1.0)
    by, _ = pad(boxes, lambda o: [o.yaw], (1,), 0.0)
    bi, _ = pad(boxes, lambda o: [o.object_id], (1,), -1)
    cc, cv = pad(cyls, lambda o: o.center, (3,), 0.0)
    ca, _ = pad(cyls, lambda o: o.axis, (3,), 0.0)
    cr, _ = pad(cyls, lambda o: [o.radius, o.length / 2, o.object_id], (3,), 1.0)
    sc, sv = pad(sphs, lambda o: o.center, (3,), 0.0)
    sr, _ = pad(sphs, lambda o: [o.radius, o.object_id], (2,), 1.0)
    pp, pv = pad(planes, lambda o: o.point, (3,), 0.0)
    pn, _ = pad(planes, lambda o: o.normal, (3,), 0.0)
    pi, _ = pad(planes, lambda o: [o.object_id], (1,), -1)
    gc, gv = pad(gates, lambda o: np.asarray(o.corners), (4, 3), 0.0)
    tv, tvalid, tid, tn = _pad_meshes(items, n, device, dtype)
    arr = lambda name: np.asarray([getattr(s, name) for s in per], dtype=float)  # noqa: E731
    return Scene(
        box_center=t(bc),
        box_half=t(bh),
        box_yaw=t(by[..., 0]),
        box_valid=bt(bv),
        box_id=ti(bi[..., 0]),
        cyl_center=t(cc),
        cyl_axis=t(ca),
        cyl_radius=t(cr[..., 0]),
        cyl_half_length=t(cr[..., 1]),
        cyl_valid=bt(cv),
        cyl_id=ti(cr[..., 2]),
        sph_center=t(sc),
        sph_radius=t(sr[..., 0]),
        sph_valid=bt(sv),
        sph_id=ti(sr[..., 1]),
        plane_point=t(pp),
        plane_normal=t(pn),
        plane_valid=bt(pv),
        plane_id=ti(pi[..., 0]),
        tri_vertices=tv,
        tri_valid=tvalid,
        tri_id=tid,
        tri_normals=tn,
        gate_corners=t(gc),
        gate_valid=bt(gv),
        bounds_min=t(arr("bounds_min")),
        bounds_max=t(arr("bounds_max")),
        ceiling=t([s.flight_ceiling for s in per]),
        start=t(arr("start")),
        goal=t(arr("goal")),
        has_triangles=any(_has_mesh(s) for s in items),
    )
