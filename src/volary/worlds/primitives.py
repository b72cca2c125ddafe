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
    """Oriented box: centre (m), full size along its own axes (m), yaw about world z (rad)."""

    center: Vec3
    size: Vec3
    yaw: float = 0.0
    object_id: int = 0

    def __post_init__(self) -> None:
        _finite("Box.center", self.center)
        _finite("Box.size", self.size)
        if min(self.size) <= 0:
            raise ConfigError(f"Box.size: expected positive extents, got {self.size}")


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
        from volary.worlds._stack import stack_specs

        return stack_specs(specs, n_envs, device=device, dtype=dtype)
