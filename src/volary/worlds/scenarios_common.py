"""Helpers shared by the scenario generators: start/goal placement, keep-out tests, the
solvability guarantee (grid search, then a deterministic corridor clearing when it fails) and
the params check (:func:`check_params`: every field against the range declared next to it,
then the type's cross-field rules)."""

from __future__ import annotations

import functools
import math
import types
import typing
from dataclasses import asdict, fields, replace
from typing import Annotated, Any

import numpy as np

from volary.errors import ConfigError
from volary.inputs import LIMITS, Flag, Limit, validated, within
from volary.worlds.grid import find_path, point_distance
from volary.worlds.primitives import Primitive, SceneSpec, Vec3


def vec(*v: float) -> Vec3:
    """A plain-float 3-tuple (numpy scalars would leak into exports and meta)."""
    return (float(v[0]), float(v[1]), float(v[2]))


def config_index(seed: int) -> int:
    """Configuration index 0-9 used by the types whose difficulty rises with the index."""
    return int(seed) % 10


def clear_of(prim: Primitive, points: list[Vec3], clearance: float) -> bool:
    """True when the primitive is more than ``clearance`` (m) from every point."""
    d = point_distance(prim, np.asarray(points, dtype=float))
    return bool(np.all(d > clearance))


def _segment_distance(prim: Primitive, a: np.ndarray, b: np.ndarray, step: float) -> float:
    n = max(2, int(np.ceil(np.linalg.norm(b - a) / step)) + 1)
    pts = a[None] + np.linspace(0.0, 1.0, n)[:, None] * (b - a)[None]
    return float(point_distance(prim, pts).min())


def line_clearance(
    obstacles: list[Primitive], start: Vec3, goal: Vec3, step: float = 0.05
) -> float:
    """Minimum signed distance (m) from the straight start-goal segment (sampled every
    ``step`` m) to the obstacles; inf without obstacles, <= 0 when the segment meets one."""
    a, b = np.asarray(start, dtype=float), np.asarray(goal, dtype=float)
    return min((_segment_distance(o, a, b, step) for o in obstacles), default=float("inf"))


def line_meets(obstacles: list[Primitive], start: Vec3, goal: Vec3, step: float = 0.05) -> bool:
    """True when the straight start-goal segment touches or enters an obstacle."""
    return line_clearance(obstacles, start, goal, step) <= 0.0


def point_on_line(rng: np.random.Generator, start: Vec3, goal: Vec3) -> np.ndarray:
    """A point drawn uniformly on the middle 40 % (30-70 %) of the start-goal segment: where
    the cluttered types put an obstacle "along" the reference line (FLYINGTRUST Sec. V-A)."""
    a, b = np.asarray(start, dtype=float), np.asarray(goal, dtype=float)
    return a + rng.uniform(0.3, 0.7) * (b - a)


def _with(spec: SceneSpec, obstacles: tuple[Primitive, ...], meta: dict) -> SceneSpec:
    return SceneSpec(
        spec.name,
        spec.bounds_min,
        spec.bounds_max,
        obstacles,
        spec.gates,
        spec.start,
        spec.start_yaw,
        spec.goal,
        spec.ceiling,
        meta,
    )


def ensure_solvable(spec: SceneSpec, radius: float, resolution: float) -> SceneSpec:
    """Return ``spec`` if a grid path exists for a sphere of ``radius``; otherwise drop the
    obstacles that come within ``radius + 2 * resolution + 0.2`` m of the straight start-goal
    line (deterministic: depends only on the geometry) and record how many in ``meta``."""
    meta = dict(spec.meta, check_radius=radius, check_resolution=resolution)
    res = find_path(spec, radius, resolution)
    if res.solvable:
        return _with(spec, spec.obstacles, dict(meta, solvable=True, cleared_obstacles=0))
    a, b = np.asarray(spec.start, dtype=float), np.asarray(spec.goal, dtype=float)
    margin = radius + 2 * resolution + 0.2
    kept = tuple(o for o in spec.obstacles if _segment_distance(o, a, b, 0.05) > margin)
    cleared = _with(
        spec,
        kept,
        dict(
            meta,
            solvable=True,
            cleared_obstacles=len(spec.obstacles) - len(kept),
            first_check=res.reason,
        ),
    )
    if not find_path(cleared, radius, resolution).solvable:
        raise ConfigError(
            f"{spec.name}: no collision-free path even after clearing the "
            f"start-goal corridor ({res.reason})"
        )
    return cleared


def finish(
    kind: str,
    seed: int,
    params: Any,
    obstacles: list[Primitive],
    start: Vec3,
    goal: Vec3,
    *,
    size: Vec3 | None = None,
    ceiling: float | None = None,
    **meta: Any,
) -> SceneSpec:
    """Assemble the SceneSpec of a generated scenario and guarantee it is solvable. The flight
    volume spans the origin to ``size`` (default: ``params``' length, width and ceiling), the
    ceiling is ``params.ceiling`` unless given."""
    lx, ly, lz = size if size is not None else (params.length, params.width, params.ceiling)
    bounds = ((0.0, 0.0, 0.0), (lx, ly, lz))
    ceiling = params.ceiling if ceiling is None else ceiling
    full_meta = dict(
        type=kind, seed=int(seed), params=asdict(params), reference_path=(start, goal), **meta
    )
    yaw = float(np.arctan2(goal[1] - start[1], goal[0] - start[0]))
    spec = SceneSpec(
        f"{kind}-{seed}",
        bounds[0],
        bounds[1],
        tuple(obstacles),
        (),
        start,
        yaw,
        goal,
        float(ceiling),
        full_meta,
    )
    return ensure_solvable(spec, params.vehicle_radius, params.check_resolution)


def start_goal(
    rng: np.random.Generator, length: float, width: float, height: float, margin: float
) -> tuple[Vec3, Vec3]:
    """Start near x = 0 and goal near x = length (opposite sides), y in the middle half."""
    ys = rng.uniform(0.25 * width, 0.75 * width, size=2)
    return vec(margin, ys[0], height), vec(length - margin, ys[1], height)


def stratified_seeds(clearance: np.ndarray | list[float], k: int = 10) -> tuple[int, ...]:
    """``k`` generator seeds at the clearance quantiles (i + 1/2) / k, i = 0..k-1.

    ``clearance[s]`` is :func:`line_clearance` of seed ``s`` for the candidate seeds
    ``0..N-1`` (N a multiple of ``k``). The seeds are ordered by clearance (ties by seed) and
    cut into ``k`` strata of ``m = N / k`` consecutive seeds; from each stratum the seed at its
    midpoint rank (m - 1) / 2 is taken (for even m the two middle seeds tie and the lower seed,
    the one the generator drew first, wins). Returns the ``k`` seeds in ascending order. The
    empirical clearance distribution of the ``k`` configurations is then within 1 / (2k) of
    the candidates' (Kolmogorov distance), the least any ``k`` points can be: the fixed
    configurations represent how open their generator's straight line is, instead of whatever
    the first ``k`` seeds happen to give.
    """
    c = np.asarray(clearance, dtype=float)
    if c.ndim != 1 or k < 1 or c.size < k or c.size % k:
        raise ConfigError(
            f"clearance: expected a 1-D array whose length is a multiple of k = {k}, "
            f"got shape {c.shape}"
        )
    if np.any(np.isnan(c)) or np.any(c == -np.inf):
        raise ConfigError("clearance: expected finite values (or +inf for an empty scene)")
    order = np.lexsort((np.arange(c.size), c))  # by clearance, then by seed
    m = c.size // k
    out = []
    for stratum in order.reshape(k, m):
        middle = stratum[(m - 1) // 2 : m // 2 + 1]  # one seed (odd m) or the two middle ones
        out.append(int(middle.min()))
    return tuple(sorted(out))


# ----------------------------------------------------------------------------- params checks
EXTENT = LIMITS["coordinate"].hi  # m: a scene spans 0..size, so no size exceeds the world extent
ATTEMPTS_BASE = 1_000  # draws a rejection-sampling loop may always make ...
ATTEMPTS_PER_OBJECT = 100  # ... plus this many per object it must place (see attempts())
LENGTH = Limit("length along x, the flight direction", "m", 1.0, EXTENT)
WIDTH = Limit("width along y", "m", 1.0, EXTENT)
CEILING = Limit("flight ceiling", "m", 0.5, EXTENT)
FLIGHT_HEIGHT = Limit("start and goal altitude", "m", 0.0, EXTENT)
MARGIN = Limit("start and goal distance from the x ends", "m", 0.0, EXTENT)
CLEARANCE = Limit("free radius around start and goal", "m", 0.0, EXTENT)
VEHICLE_RADIUS = Limit("vehicle radius of the solvability check", "m", 0.0, 10.0)
RESOLUTION = Limit("grid resolution of the solvability check", "m", 0.01, 100.0)
Span = tuple[float, float]  # a (lo, hi) range drawn uniformly
PER_AXIS = "per axis"  # metadata of a 2-tuple field that is a value per axis, not a (lo, hi) range


def attempts(n: int) -> int:
    """The draws a rejection-sampling placement of ``n`` objects may make before it gives up
    with a ConfigError (an acceptance rate below 1 % on average; the published params need at
    most ``2 n + 5`` draws over seeds 0-99, so valid scenes are never cut short)."""
    return ATTEMPTS_BASE + ATTEMPTS_PER_OBJECT * int(n)


@functools.cache
def declared(cls: type) -> dict[str, tuple[Any, Limit | None, bool]]:
    """Each field of a params dataclass: its annotation without the metadata, the
    :class:`~volary.inputs.Limit` declared next to it (``Annotated[float, Limit(...)]``; None
    for a flag) and whether a 2-tuple is a (lo, hi) range (else it carries :data:`PER_AXIS`).
    A numeric field without a declared Limit is a programming error."""
    hints = typing.get_type_hints(cls, include_extras=True)
    out: dict[str, tuple[Any, Limit | None, bool]] = {}
    for f in fields(cls):
        ann = hints[f.name]
        base, meta = ann, ()
        if typing.get_origin(ann) is Annotated:
            base, meta = typing.get_args(ann)[0], ann.__metadata__
        limits = [m for m in meta if isinstance(m, Limit)]
        if base is not bool and not limits:
            raise TypeError(f"{cls.__name__}.{f.name}: no declared Limit")
        out[f.name] = (base, limits[0] if limits else None, PER_AXIS not in meta)
    return out


def check_params(kind: str, params: Any) -> Any:
    """``params`` (a scenario params dataclass) with every field checked against its declared
    type and range and normalised (ints to floats for float fields, lists to tuples), then the
    type's cross-field rules (``params.check_rules(kind)``). Any problem is a one-line
    ConfigError naming the scenario, the field and what was expected, with its unit."""
    arg = f"{kind}: {{}}"
    changes = {
        name: _field(arg.format(name), getattr(params, name), base, limit, ranged)
        for name, (base, limit, ranged) in declared(type(params)).items()
    }
    params = replace(params, **changes)
    params.check_rules(kind)
    return params


def _shown(value: Any, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


def _field(arg: str, value: Any, base: Any, limit: Limit | None, ranged: bool) -> Any:
    if limit is None:
        return validated(Flag, value, arg, ConfigError)
    if typing.get_origin(base) in (typing.Union, types.UnionType) and value is None:
        return None  # an optional count left to its rule (e.g. gaps=None: rising with the index)
    if typing.get_origin(base) is tuple:
        return _pair(arg, value, limit, ranged)
    return _number(arg, value, limit)


def _number(arg: str, value: Any, limit: Limit) -> float | int:
    """``value`` within ``limit`` (:func:`volary.inputs.within`), refusing bools, strings,
    floats for integer fields and ints too large for a float with the same one-line error."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if (
        not number
        or (limit.integer and not isinstance(value, int))
        or (isinstance(value, int) and not limit.lo <= value <= limit.hi)
    ):
        raise ConfigError(f"{arg}: expected {limit.describe()}, got {_shown(value)}")
    return within(value, limit, arg)


def _pair(arg: str, value: Any, limit: Limit, ranged: bool) -> tuple[Any, Any]:
    """A 2-tuple field: two numbers within ``limit``; a (lo, hi) range also has lo <= hi."""
    if not isinstance(value, tuple | list) or len(value) != 2:
        what = "(lo, hi)" if ranged else "(x, y)"
        raise ConfigError(f"{arg}: expected {what}, each {limit.describe()}, got {_shown(value)}")
    lo, hi = (_number(f"{arg}.{i}", v, limit) for i, v in enumerate(value))
    if ranged and lo > hi:
        raise ConfigError(f"{arg}: expected lo <= hi, got ({lo:g}, {hi:g}) {limit.unit}")
    return (lo, hi)


def require(ok: bool, kind: str, field: str, expected: str, got: str) -> None:
    """A cross-field rule: unless ``ok``, a one-line ConfigError
    ``kind: field: expected EXPECTED, got GOT``."""
    if not ok:
        raise ConfigError(f"{kind}: {field}: expected {expected}, got {got}")


def require_layout(kind: str, p: Any, length: float, width: float, height: float) -> None:
    """The rules every generated type shares: start and goal ``margin`` in from the x ends
    (before the middle), at ``flight_height`` under ``height`` (the ceiling), a ``clearance``
    (where the type has one) narrower than the floor, and a solvability grid of at most
    ``LIMITS["grid_cells"]`` nodes over ``length x width x height`` at ``check_resolution``."""
    if hasattr(p, "margin"):
        require(
            2 * p.margin < length, kind, "margin", f"< length / 2 = {length / 2:g} m",
            f"{p.margin:g} m",
        )  # fmt: skip
    if hasattr(p, "flight_height"):
        require(
            p.flight_height < height, kind, "flight_height", f"< the ceiling {height:g} m",
            f"{p.flight_height:g} m",
        )  # fmt: skip
    if hasattr(p, "clearance"):
        floor = min(length, width)
        require(
            p.clearance < floor, kind, "clearance", f"< the floor's smaller side {floor:g} m",
            f"{p.clearance:g} m",
        )  # fmt: skip
    res, cap = p.check_resolution, LIMITS["grid_cells"]
    nodes = math.prod(math.floor(s / res + 1e-9) + 1 for s in (length, width, height))
    require(
        nodes <= cap.hi, kind, "check_resolution",
        f"a grid of at most {cap.hi:.0f} nodes ({cap.quantity}) over "
        f"{length:g} x {width:g} x {height:g} m",
        f"{res:g} m ({nodes:.3g} nodes)",
    )  # fmt: skip


def require_count(kind: str, field: str, n: float, what: str) -> None:
    """The number of obstacles a generator is asked to place within ``LIMITS["scene_objects"]``
    (``what`` says how it follows from the params)."""
    cap = LIMITS["scene_objects"]
    require(
        n <= cap.hi, kind, field, f"at most {cap.hi:.0f} {cap.quantity}",
        f"{what} = {n:.4g}",
    )  # fmt: skip


def placement_failed(
    kind: str, what: str, placed: int, n: int, tries: int, hint: str
) -> typing.NoReturn:
    """Raise the ConfigError of a rejection-sampling loop that ran out of attempts."""
    raise ConfigError(
        f"{kind}: could not place {n} {what} after {tries} attempts ({placed} placed); {hint}"
    )
