"""Scene primitives (one env's description, plain data) and their batched form.

A :class:`SceneSpec` lists primitives in the world frame (z up, metres). :meth:`Scene.stack`
turns one spec per env into padded tensors ``(N, K, ...)`` with a ``valid`` mask, so every env
may hold a different scene and all queries stay batched. Gate frames are kept as gates (for the
passage rule) and also expanded into four boxes (for collisions and ray casting).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch
from torch import Tensor

from volary.errors import ConfigError

Vec3 = tuple[float, float, float]


def _finite(name: str, values: Sequence[float]) -> None:
    if not all(math.isfinite(v) for v in values):
        raise ConfigError(f"{name}: expected finite values, got {list(values)}")


@dataclass(frozen=True)
class Box:
    """Oriented box: centre (m), full size along its own axes (m), yaw about world z (rad)
    and ``tilt`` (rad): its axes are the columns of R = Rz(yaw) Ry(tilt[1]) Rx(tilt[0])
    (:func:`tilt_matrix`): the yaw, then a turn about the yawed y axis, then one about the
    resulting x axis (a gate's bar rolled in the gate's plane, then pitched about its top
    bar)."""

    center: Vec3
    size: Vec3
    yaw: float = 0.0
    object_id: int = 0
    tilt: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self) -> None:
        _finite("Box.center", self.center)
        _finite("Box.size", self.size)
        if min(self.size) <= 0:
            raise ConfigError(f"Box.size: expected positive extents, got {self.size}")
        if len(self.tilt) != 2:
            raise ConfigError(f"Box.tilt: expected two angles (about x, about y), got {self.tilt}")
        _finite("Box.tilt", self.tilt)

    @property
    def axes(self) -> np.ndarray:
        """(3, 3) the box's axes as columns, in the world frame."""
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ tilt_matrix(self.tilt)


def tilt_matrix(tilt: Sequence[float]) -> np.ndarray:
    """(3, 3) Ry(tilt[1]) Rx(tilt[0]): a :class:`Box`'s axes before its yaw."""
    cx, sx, cy, sy = math.cos(tilt[0]), math.sin(tilt[0]), math.cos(tilt[1]), math.sin(tilt[1])
    rx = np.array([[1.0, 0.0, 0.0], [0.0, cx, -sx], [0.0, sx, cx]])
    ry = np.array([[cy, 0.0, sy], [0.0, 1.0, 0.0], [-sy, 0.0, cy]])
    return ry @ rx


def untilt(v: Tensor, tilt: Tensor | None) -> Tensor:
    """Vectors (..., 3) in a box's yawed frame -> its own frame: ``tilt^T v`` for ``tilt``
    (..., 3, 3) (:attr:`Scene.box_tilt`), or ``v`` itself when no box is tilted (None)."""
    if tilt is None:
        return v
    return torch.stack([(tilt[..., :, i] * v).sum(-1) for i in range(3)], -1)


def retilt(v: Tensor, tilt: Tensor | None) -> Tensor:
    """The inverse of :func:`untilt`: ``tilt v``."""
    if tilt is None:
        return v
    return torch.stack([(tilt[..., i, :] * v).sum(-1) for i in range(3)], -1)


@dataclass(frozen=True)
class Cylinder:
    """Finite cylinder: centre of its axis segment, unit axis (any tilt), radius, length (m)."""

    center: Vec3
    radius: float
    length: float
    axis: Vec3 = (0.0, 0.0, 1.0)
    object_id: int = 0

    def __post_init__(self) -> None:
        _finite("Cylinder.center", self.center)
        _finite("Cylinder.axis", self.axis)
        n = math.sqrt(sum(a * a for a in self.axis))
        if n < 1e-9 or self.radius <= 0 or self.length <= 0:
            raise ConfigError("Cylinder: expected a non-zero axis, radius > 0 and length > 0")
        object.__setattr__(self, "axis", tuple(a / n for a in self.axis))


@dataclass(frozen=True)
class Sphere:
    center: Vec3
    radius: float
    object_id: int = 0

    def __post_init__(self) -> None:
        _finite("Sphere.center", self.center)
        if not self.radius > 0:
            raise ConfigError(f"Sphere.radius: expected > 0 m, got {self.radius}")


@dataclass(frozen=True)
class Plane:
    """Half-space boundary: points x with n . (x - point) < 0 are inside the solid."""

    point: Vec3
    normal: Vec3
    object_id: int = 0

    def __post_init__(self) -> None:
        _finite("Plane.point", self.point)
        n = math.sqrt(sum(a * a for a in self.normal))
        if n < 1e-9:
            raise ConfigError("Plane.normal: expected a non-zero vector")
        object.__setattr__(self, "normal", tuple(a / n for a in self.normal))


@dataclass(frozen=True)
class Gate:
    """Rectangular gate given by its four corners (m, world frame, in order around the frame),
    drawn as a frame of ``border`` width and ``depth`` thickness around the opening."""

    corners: tuple[Vec3, Vec3, Vec3, Vec3]
    name: str = ""
    border: float = 0.1
    depth: float = 0.1
    object_id: int = 0

    def __post_init__(self) -> None:
        c = np.asarray(self.corners, dtype=float)
        if c.shape != (4, 3) or not np.all(np.isfinite(c)):
            raise ConfigError(f"Gate {self.name!r}: corners: expected 4 finite 3-D points")

    @property
    def center(self) -> np.ndarray:
        return np.asarray(self.corners, dtype=float).mean(axis=0)


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.array(a, copy=True)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Mesh:
    """Triangle mesh obstacle in the world frame: vertices (V, 3) m and triangles (T, 3) vertex
    indices (counter-clockwise seen from outside for a closed mesh), stored as read-only numpy
    arrays (float64, int64). Equality and hashing compare the array contents.

    A closed mesh (watertight, consistently wound) is a solid: the signed distance is negative
    inside. An open mesh (a sheet, a terrain without skirt) is a thin shell: its distance is
    unsigned, so a vehicle collides when it comes within its radius of the surface."""

    vertices: np.ndarray  # (V, 3) float64 m, read-only
    triangles: np.ndarray  # (T, 3) int64 indices into vertices, read-only
    object_id: int = 0
    name: str = ""

    def __post_init__(self) -> None:
        who = f"Mesh {self.name!r}" if self.name else "Mesh"
        try:
            v = np.asarray(self.vertices, dtype=float)
            t = np.asarray(self.triangles)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{who}: vertices/triangles: expected numeric arrays ({e})") from e
        if v.ndim != 2 or v.shape[1] != 3:
            raise ConfigError(f"{who}.vertices: expected shape (V, 3), got {v.shape}")
        if not np.all(np.isfinite(v)):
            bad = int((~np.isfinite(v)).any(axis=1).sum())
            raise ConfigError(f"{who}.vertices: expected finite values, {bad} rows are NaN/inf")
        if t.ndim != 2 or t.shape[1] != 3 or len(t) < 1:
            raise ConfigError(f"{who}.triangles: expected shape (T, 3) with T >= 1, got {t.shape}")
        if t.dtype.kind not in "iu" and not (
            t.dtype.kind == "f" and np.all(np.isfinite(t)) and np.all(t == np.round(t))
        ):
            raise ConfigError(f"{who}.triangles: expected integer vertex indices, got {t.dtype}")
        t = t.astype(np.int64)
        if t.min() < 0 or t.max() >= len(v):
            raise ConfigError(
                f"{who}.triangles: index out of range [0, {len(v)}): min {t.min()}, max {t.max()}"
            )
        object.__setattr__(self, "vertices", _readonly(v))
        object.__setattr__(self, "triangles", _readonly(t))
        key = (v.tobytes(), t.tobytes(), int(self.object_id), self.name)
        object.__setattr__(self, "_hash", hash(key))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mesh):
            return NotImplemented
        return (
            self.object_id == other.object_id
            and self.name == other.name
            and np.array_equal(self.vertices, other.vertices)
            and np.array_equal(self.triangles, other.triangles)
        )

    def __hash__(self) -> int:
        return self.__dict__["_hash"]

    @property
    def corners(self) -> np.ndarray:
        """(T, 3, 3) m: the three corners of every triangle."""
        return self.vertices[self.triangles]

    @cached_property
    def closed(self) -> bool:
        """True for a watertight, consistently wound mesh (a solid with an inside)."""
        from volary.worlds.meshgeom import is_closed

        return is_closed(self.triangles, len(self.vertices))

    @cached_property
    def pseudo_normals(self) -> np.ndarray:
        """(T, 7, 3) unit angle-weighted pseudo-normals per triangle feature (face, edges
        01/12/20, vertices 0/1/2), outward; all zero for an open mesh (unsigned distance)."""
        from volary.worlds.meshgeom import pseudo_normals

        out = pseudo_normals(self.vertices, self.triangles)
        out.setflags(write=False)
        return out

    @property
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Axis-aligned bounds (m) of the vertices."""
        return self.vertices.min(axis=0), self.vertices.max(axis=0)


Primitive = Box | Cylinder | Sphere | Plane | Mesh


@dataclass(frozen=True)
class SceneSpec:
    """One env's world: bounds, ceiling, start/goal, obstacles and gates."""

    name: str
    bounds_min: Vec3  # m, axis-aligned flight volume
    bounds_max: Vec3
    obstacles: tuple[Primitive, ...] = ()
    gates: tuple[Gate, ...] = ()
    start: Vec3 = (0.0, 0.0, 1.0)
    start_yaw: float = 0.0
    goal: Vec3 = (0.0, 0.0, 1.0)
    ceiling: float | None = None  # m; None: bounds_max z
    meta: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for n in ("bounds_min", "bounds_max", "start", "goal"):
            _finite(f"{self.name}: {n}", getattr(self, n))
        if any(lo >= hi for lo, hi in zip(self.bounds_min, self.bounds_max, strict=True)):
            raise ConfigError(f"{self.name}: bounds: expected bounds_min < bounds_max per axis")

    @property
    def flight_ceiling(self) -> float:
        return self.bounds_max[2] if self.ceiling is None else self.ceiling


@dataclass(frozen=True)
class Scene:
    """N scenes as padded tensors; ``*_valid`` masks mark real entries."""

    box_center: Tensor  # (N, Kb, 3) m
    box_half: Tensor  # (N, Kb, 3) m, half extents along the box axes
    box_yaw: Tensor  # (N, Kb) rad
    box_valid: Tensor  # (N, Kb) bool
    box_id: Tensor  # (N, Kb) int64 object id
    cyl_center: Tensor  # (N, Kc, 3) m
    cyl_axis: Tensor  # (N, Kc, 3) unit
    cyl_radius: Tensor  # (N, Kc) m
    cyl_half_length: Tensor  # (N, Kc) m
    cyl_valid: Tensor  # (N, Kc) bool
    cyl_id: Tensor  # (N, Kc) int64
    sph_center: Tensor  # (N, Ks, 3) m
    sph_radius: Tensor  # (N, Ks) m
    sph_valid: Tensor  # (N, Ks) bool
    sph_id: Tensor  # (N, Ks) int64
    plane_point: Tensor  # (N, Kp, 3) m
    plane_normal: Tensor  # (N, Kp, 3) unit, pointing out of the solid
    plane_valid: Tensor  # (N, Kp) bool
    plane_id: Tensor  # (N, Kp) int64
    tri_vertices: Tensor  # (N, T, 3, 3) m, triangle corners of every Mesh; padding is all zero
    tri_valid: Tensor  # (N, T) bool
    tri_id: Tensor  # (N, T) int64 object id of the mesh each triangle belongs to
    tri_normals: Tensor  # (N, T, 7, 3) unit pseudo-normals (face, edges, vertices); 0 if open
    gate_corners: Tensor  # (N, G, 4, 3) m
    gate_valid: Tensor  # (N, G) bool
    bounds_min: Tensor  # (N, 3) m
    bounds_max: Tensor  # (N, 3) m
    ceiling: Tensor  # (N,) m
    start: Tensor  # (N, 3) m
    goal: Tensor  # (N, 3) m
    has_triangles: bool = True  # False: no env holds a triangle, so queries may skip the mesh
    box_tilt: Tensor | None = None  # (N, Kb, 3, 3) each box's Ry Rx (Box.tilt); None: no box
    # is tilted, and every query skips the step (so level boxes cost and round as before)

    @property
    def n_envs(self) -> int:
        return int(self.bounds_min.shape[0])

    @cached_property
    def kinds_present(self) -> tuple[bool, bool, bool, bool]:
        """Whether any env holds a valid box, cylinder, sphere, plane (queries skip the
        others: their padding entries are never valid)."""
        masks = (self.box_valid, self.cyl_valid, self.sph_valid, self.plane_valid)
        return tuple(bool(m.any()) for m in masks)  # type: ignore[return-value]

    @staticmethod
    def stack(
        specs: SceneSpec | Sequence[SceneSpec],
        n_envs: int | None = None,
        *,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> Scene:
        """Batch one spec per env (a shorter list is tiled to ``n_envs``)."""
        return stack_specs(specs, n_envs, device=device, dtype=dtype)


# ------------------------------------------------ padding one SceneSpec per env into a Scene


LEVEL_RAD = 1e-6  # rad: a gate tilted less is level (a corner file's rounding tilts some
# by 1e-11; their bars stay upright, as they were before tilted bars, to the last bit)


def gate_frame(corners: np.ndarray) -> np.ndarray:
    """(3, 3) a gate's axes as columns from its corners (4, 3) (top-left, top-right,
    bottom-right, bottom-left): along the top bar, the normal, and the in-plane up (made
    orthogonal to the first); right-handed. An upright gate's up is exactly +z."""
    c = np.asarray(corners, dtype=float)
    a = c[1] - c[0]
    a = a / max(float(np.linalg.norm(a)), 1e-12)
    u = (c[0] - c[3]) + (c[1] - c[2])
    u = u - float(u @ a) * a
    u = u / max(float(np.linalg.norm(u)), 1e-12)
    return np.stack([a, np.cross(u, a), u], axis=1)


def gate_boxes(g: Gate) -> list[Box]:
    """The four frame bars around a gate's opening, as boxes in the gate's plane: yawed with
    its top bar, and tilted (:attr:`Box.tilt`) where the opening is pitched or rolled, so the
    bars stand where the corners say (before 2026-11-30 they stood upright whatever the
    corners)."""
    c = np.asarray(g.corners, dtype=float)
    center = c.mean(axis=0)
    across = c[1] - c[0]  # along the top bar
    width = float(np.linalg.norm(across))
    height = float(np.linalg.norm(c[2] - c[1]))
    yaw = math.atan2(across[1], across[0])
    b, d = g.border, g.depth
    frame = gate_frame(c)  # R = Rz(yaw) Ry(t1) Rx(t0): its z row is (-sin t1, ., .)
    a_, n_, up = frame[:, 0], frame[:, 1], frame[:, 2]
    tilt = (math.atan2(float(n_[2]), float(up[2])), math.atan2(-float(a_[2]), math.hypot(*a_[:2])))
    if max(abs(tilt[0]), abs(tilt[1])) < LEVEL_RAD:  # level: exactly the upright bars
        tilt, up = (0.0, 0.0), np.array([0.0, 0.0, 1.0])
    bars = [
        (center + up * (height + b) / 2, (width + 2 * b, d, b)),
        (center - up * (height + b) / 2, (width + 2 * b, d, b)),
        (center + a_ * (width + b) / 2, (b, d, height)),
        (center - a_ * (width + b) / 2, (b, d, height)),
    ]
    return [Box((float(p[0]), float(p[1]), float(p[2])), s, yaw, g.object_id, tilt)
            for p, s in bars]  # fmt: skip


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
    tilted = any(o.tilt != (0.0, 0.0) for r in boxes for o in r)
    bt_ = None
    if tilted:  # padding entries (never valid) hold the identity
        bt_, _ = pad(boxes, lambda o: tilt_matrix(o.tilt), (3, 3), 0.0)
        bt_[~bv] = np.eye(3)
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
        box_tilt=None if bt_ is None else t(bt_),
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
