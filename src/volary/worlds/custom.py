"""Custom scenes from files (FLYINGTRUST Sec. III-B also lets users bring their own scene).

:func:`scene_from_file` reads a triangle mesh (PLY/OBJ/STL, one closed or open :class:`Mesh`
obstacle) or a point cloud (PCD, or a PLY without faces: occupied voxels merged into boxes)
and wraps it in a :class:`SceneSpec`. ``make_scenario("custom", seed, path=...)`` does the same
through :class:`CustomParams` and checks the result solvable like the generated types; the
user's geometry is never altered, so an unsolvable file is an error rather than a cleared
corridor.

Every argument is checked against a declared model (:class:`SceneFileArgs`) and the scene's
bounds, start and goal against the world extent (``volary.inputs.LIMITS["coordinate"]``)
before anything is sized from them; the file's own coordinates are checked by its reader.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from volary.errors import ConfigError, FileFormatError, not_one_of
from volary.inputs import Coordinate, Flag, Integer, NonNegative, Positive, Strict, validated
from volary.inputs import Vec3 as Vec3Field
from volary.worlds.fields import VoxelGrid
from volary.worlds.grid import find_path, grid_shape
from volary.worlds.io import check_extent, load_mesh, load_points, read_ply
from volary.worlds.primitives import Mesh, Primitive, SceneSpec, Vec3

DEFAULT_VOXEL = 0.2  # m, voxel edge for point clouds (a 0.3 m vehicle still sees 0.2 m gaps)
_KINDS = ("auto", "mesh", "points")


def _kind(path: Path, kind: str) -> str:
    """'mesh' or 'points' for a file: OBJ/STL are meshes, PCD are points, a PLY is a mesh when
    it has at least one face."""
    if kind not in _KINDS:
        raise not_one_of("kind", kind, _KINDS, shown=str(_KINDS))
    if kind != "auto":
        return kind
    fmt = path.suffix.lower().lstrip(".")
    if fmt in ("obj", "stl"):
        return "mesh"
    if fmt == "pcd":
        return "points"
    if fmt == "ply":
        _, faces = read_ply(path)
        return "points" if faces is None or len(faces) == 0 else "mesh"
    raise FileFormatError(
        f"{path}: unsupported scene file format {fmt!r} (expected ply, obj, stl or pcd)"
    )


def load_obstacles(
    path: str | Path,
    *,
    kind: str = "auto",
    object_id: int = 1,
    voxel: float | None = None,
    drop_nan: bool = False,
) -> tuple[Primitive, ...]:
    """The obstacles of a scene file: one Mesh for a mesh file, merged voxel boxes (edge
    ``voxel`` m, default :data:`DEFAULT_VOXEL`) for a point cloud. Malformed or empty files
    raise :class:`FileFormatError` naming the file."""
    path = Path(path)
    if _kind(path, kind) == "mesh":
        m = load_mesh(path)
        return (Mesh(m.vertices, m.triangles, object_id, m.name),)
    pc = load_points(path, drop_nan=drop_nan)
    try:
        grid = VoxelGrid.from_points(
            pc.points, DEFAULT_VOXEL if voxel is None else voxel, object_id, pc.name
        )
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from e
    return grid.to_boxes()


def _extent(path: Path, obstacles: tuple[Primitive, ...]) -> tuple[np.ndarray, np.ndarray]:
    from volary.worlds.grid import aabb

    boxes = [b for b in (aabb(o) for o in obstacles) if b is not None]
    if not boxes:
        raise FileFormatError(f"{path}: no obstacle in the scene file")
    return np.min([b[0] for b in boxes], axis=0), np.max([b[1] for b in boxes], axis=0)


class SceneFileArgs(Strict):
    """The options of :func:`scene_from_file` (m; checked before the file is read)."""

    bounds: tuple[Vec3Field, Vec3Field] | None = None
    start: Vec3Field | None = None
    goal: Vec3Field | None = None
    object_id: Integer = 1
    voxel: Positive | None = None
    margin: Positive = 1.0
    kind: Literal["auto", "mesh", "points"] = "auto"
    ceiling: Coordinate | None = None
    drop_nan: Flag = False


def _file(path: Any) -> Path:
    if not isinstance(path, str | os.PathLike) or isinstance(os.fspath(path), bytes):
        raise ConfigError(f"path: expected a scene file path, got {type(path).__name__}")
    return Path(path)


def _vec(a: Any) -> Vec3:
    v = np.asarray(a, dtype=float).reshape(3)
    return (float(v[0]), float(v[1]), float(v[2]))


def scene_from_file(
    path: str | Path,
    *,
    bounds: tuple[Vec3, Vec3] | None = None,
    start: Vec3 | None = None,
    goal: Vec3 | None = None,
    object_id: int = 1,
    voxel: float | None = None,
    margin: float = 1.0,
    kind: str = "auto",
    ceiling: float | None = None,
    drop_nan: bool = False,
) -> SceneSpec:
    """A SceneSpec holding the geometry of a mesh or point-cloud file (world frame, m, z up).

    ``bounds`` default to the data's extent plus ``margin`` (m) on every side; ``start`` and
    ``goal`` default to the centres of the -x and +x margin slabs at mid height (flight along
    +x, as in the generated scenarios). ``kind`` forces 'mesh' or 'points'; ``drop_nan`` drops
    NaN points of organized clouds instead of failing. Not checked for solvability (see
    ``make_scenario("custom", ...)``). Options outside their declared ranges, and bounds, start
    or goal outside the world extent, are a one-line ConfigError naming the file and the field;
    a malformed file or one with coordinates outside the world extent a FileFormatError."""
    path = _file(path)
    args = validated(
        SceneFileArgs,
        dict(bounds=bounds, start=start, goal=goal, object_id=object_id, voxel=voxel,
             margin=margin, kind=kind, ceiling=ceiling, drop_nan=drop_nan),
        str(path),
        ConfigError,
    )  # fmt: skip
    margin = args.margin
    obstacles = load_obstacles(
        path, kind=args.kind, object_id=args.object_id, voxel=args.voxel, drop_nan=args.drop_nan
    )
    lo, hi = _extent(path, obstacles)
    around = "" if args.bounds is not None else " (the data's extent and the margin)"
    bounds = args.bounds or (_vec(lo - margin), _vec(hi + margin))
    b0, b1 = np.asarray(bounds[0], float), np.asarray(bounds[1], float)
    check_extent(path, b0, "bounds_min" + around, ConfigError)
    check_extent(path, b1, "bounds_max" + around, ConfigError)
    start, goal, ceiling = args.start, args.goal, args.ceiling
    mid = (b0 + b1) / 2
    start = _vec([b0[0] + margin / 2, mid[1], mid[2]]) if start is None else _vec(start)
    goal = _vec([b1[0] - margin / 2, mid[1], mid[2]]) if goal is None else _vec(goal)
    yaw = float(np.arctan2(goal[1] - start[1], goal[0] - start[0]))
    meta = dict(
        type="custom", source=str(path), extent=(_vec(lo), _vec(hi)), reference_path=(start, goal)
    )
    return SceneSpec(
        f"custom-{path.stem}", _vec(b0), _vec(b1), obstacles, (), start, yaw, goal, ceiling, meta
    )


@dataclass(frozen=True)
class CustomParams:
    """``make_scenario("custom", seed, path=...)``: a scene from a file (the seed is recorded
    only; the scene is the file's). The other fields are those of :func:`scene_from_file`."""

    path: str = ""  # mesh (ply/obj/stl) or point cloud (pcd/ply) file; required
    bounds: tuple[Vec3, Vec3] | None = None
    start: Vec3 | None = None
    goal: Vec3 | None = None
    object_id: int = 1
    voxel: float | None = None  # m; None: DEFAULT_VOXEL
    margin: float = 1.0  # m around the data when bounds are not given
    kind: str = "auto"
    ceiling: float | None = None
    drop_nan: bool = False
    vehicle_radius: float = 0.3  # m, solvability check
    check_resolution: float = 0.25  # m


class _SolvabilityArgs(Strict):
    """The solvability check's options of :class:`CustomParams`."""

    vehicle_radius: NonNegative
    check_resolution: Positive


def custom(seed: int, params: CustomParams) -> SceneSpec:
    """Generator of the "custom" type: load, then require a grid path from start to goal (a
    grid of more than ``LIMITS["grid_cells"]`` nodes at ``check_resolution`` is refused)."""
    if not params.path:
        raise ConfigError('scenario "custom": expected path=<mesh or point cloud file>')
    checks = dict(vehicle_radius=params.vehicle_radius, check_resolution=params.check_resolution)
    validated(_SolvabilityArgs, checks, str(params.path), ConfigError)
    spec = scene_from_file(
        params.path,
        bounds=params.bounds,
        start=params.start,
        goal=params.goal,
        object_id=params.object_id,
        voxel=params.voxel,
        margin=params.margin,
        kind=params.kind,
        ceiling=params.ceiling,
        drop_nan=params.drop_nan,
    )
    try:
        grid_shape(spec, params.check_resolution)
    except ConfigError as e:
        raise ConfigError(f"{params.path}: check_resolution: {e}") from None
    res = find_path(spec, params.vehicle_radius, params.check_resolution)
    if not res.solvable:
        raise ConfigError(
            f"{params.path}: custom scene is not solvable for a "
            f"{params.vehicle_radius} m vehicle ({res.reason})"
        )
    meta = dict(
        spec.meta,
        seed=int(seed),
        params=asdict(params),
        solvable=True,
        check_radius=params.vehicle_radius,
        check_resolution=params.check_resolution,
        cleared_obstacles=0,
    )
    return SceneSpec(
        spec.name,
        spec.bounds_min,
        spec.bounds_max,
        spec.obstacles,
        (),
        spec.start,
        spec.start_yaw,
        spec.goal,
        spec.ceiling,
        meta,
    )


__all__ = [
    "DEFAULT_VOXEL",
    "CustomParams",
    "SceneFileArgs",
    "custom",
    "load_obstacles",
    "scene_from_file",
]
