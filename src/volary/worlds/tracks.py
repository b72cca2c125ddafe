"""Race tracks: the AlphaPilot 2019 course and its perturbations (FlightGoggles Sec. V-C), the
BoundaryPredictor lab courses (paper 002 Sec. V-A) and a seeded random gate-course generator.

Every track is a :class:`SceneSpec` whose gates are listed with corners in order around the
frame (top bar first); ``meta["order_index"]`` gives the course order as indices into
``spec.gates`` (for :class:`volary.worlds.gates.GateTracker`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import AfterValidator, Field
from pydantic import Strict as StrictType
from pydantic_core import PydanticCustomError

from volary.errors import ConfigError, FileFormatError, not_one_of
from volary.inputs import LIMITS, Quaternion, Strict, Text, Vec3, read_toml, validated
from volary.registry import Registry
from volary.worlds.primitives import Gate, SceneSpec

ALPHAPILOT_FILE = "alphapilot_2019.toml"
ARENA_MARGIN = 10.0  # m around the gates (covers the largest perturbation, 5 m); not published

# What a course file's gate must be (declared once; the loader refuses anything else):
GATE_SIDE_M = (0.01, 100.0)  # m, each side of the opening (1 cm apart: distinct corners)
GATE_FLATNESS_M = 0.05  # m, largest distance of a corner from the gates' best-fit plane
GATE_ANGLE_DEG = 5.0  # deg, every interior angle within [5, 175] deg: convex, no sliver
QUATERNION_NORM_TOL = 1e-3  # 1, | |q| - 1 | allowed for the start quaternion
PASSAGE_M = 100.0  # m, largest gate_width / inflation of the passage rule
ARENA_FLOOR_M = 0.0  # m, z of the arena floor (the simulator's ground plane): nothing below
SHIFT_M = 1000.0  # m, largest perturbation shift along x or y
GATE_NAME = re.compile(r"[^\x00-\x1f\x7f]{1,64}")  # printable, 1-64 characters
GATE_NUMBER_DIGITS = 9  # the digits of a gate's name are its object id (fits int32)


# ---- geometry helpers ---------------------------------------------------------------------------
def around_frame(corners: np.ndarray) -> np.ndarray:
    """Reorder 4 gate corners (4, 3) to go around the frame, starting with the top bar (the edge
    of highest mean z). Files list some gates in Z order (TL, TR, BL, BR). Corners that are not
    4 finite 3-D points are a ConfigError (an infinite one would stall the SVD)."""
    c = _finite_corners(corners)
    c = c[_frame_order(c)]
    top = int(np.argmax([c[i, 2] + c[(i + 1) % 4, 2] for i in range(4)]))
    return np.roll(c, -top, axis=0)


def _finite_corners(corners: Any) -> np.ndarray:
    try:
        c = np.asarray(corners, dtype=float)
    except (TypeError, ValueError):
        c = np.empty(0)
    lim = LIMITS["coordinate"]
    if c.shape != (4, 3) or not ((lim.lo <= c) & (c <= lim.hi)).all():
        raise ConfigError(
            f"corners: expected 4 points of 3 coordinates in [{lim.lo:g}, {lim.hi:g}] m, "
            f"got {corners!r:.80}"
        )
    return c


def _frame_order(c: np.ndarray) -> np.ndarray:
    """Indices putting corners (4, 3) in order of their angle about the centre, in the plane
    of best fit (finite corners only: LAPACK's SVD may never return on inf or NaN)."""
    x = c - c.mean(axis=0)
    _, _, vt = np.linalg.svd(x)
    return np.argsort(np.arctan2(x @ vt[1], x @ vt[0]))


def gate_shape_problem(corners: np.ndarray) -> str | None:
    """What makes 4 finite corners (4, 3, m, any order) unusable as a gate, or None: corners
    closer than ``GATE_SIDE_M[0]``, a side outside ``GATE_SIDE_M``, a corner farther than
    ``GATE_FLATNESS_M`` from the best-fit plane, or an interior angle outside
    [``GATE_ANGLE_DEG``, 180 - ``GATE_ANGLE_DEG``] or of the wrong turn (not convex). Such
    sides and angles give an area of at least GATE_SIDE_M[0]^2 sin(GATE_ANGLE_DEG)."""
    c = _finite_corners(corners)
    lo, hi = GATE_SIDE_M
    gap = np.linalg.norm(c[:, None] - c[None], axis=-1)
    np.fill_diagonal(gap, np.inf)
    if gap.min() < lo:
        i, j = np.unravel_index(int(np.argmin(gap)), gap.shape)
        return f"corners {i} and {j} are {gap[i, j]:.3g} m apart; expected at least {lo:g} m"
    x = c - c.mean(axis=0)
    normal = np.linalg.svd(x)[2][2]
    off = np.abs(x @ normal)
    if off.max() > GATE_FLATNESS_M:
        k = int(np.argmax(off))
        return (
            f"corner {k} is {off[k]:.3g} m off the gate plane; expected within {GATE_FLATNESS_M} m"
        )
    q = c[_frame_order(c)]
    edge = np.roll(q, -1, axis=0) - q
    side = np.linalg.norm(edge, axis=1)
    if side.min() < lo or side.max() > hi:
        bad = side.min() if side.min() < lo else side.max()
        return f"a side is {bad:.3g} m; expected sides in [{lo:g}, {hi:g}] m"
    prev = np.roll(edge, 1, axis=0)
    turn = np.cross(prev, edge) @ normal  # at each corner; one sign all round when convex
    turn = turn if turn.sum() >= 0 else -turn
    inner = 180.0 - np.degrees(np.arctan2(turn, (prev * edge).sum(axis=-1)))  # (0, 360) deg
    a = GATE_ANGLE_DEG
    if inner.min() < a or inner.max() > 180 - a:
        worst = inner.min() if inner.min() < a else inner.max()
        return (
            f"an interior angle is {worst:.3g} deg; expected angles in [{a:g}, {180 - a:g}] deg "
            "(a convex quadrilateral)"
        )
    return None


def vertical_gate(center, yaw: float, width: float, height: float) -> np.ndarray:
    """Corners (4, 3) of an upright gate opening whose normal points along ``yaw`` (rad)."""
    u = np.array([-math.sin(yaw), math.cos(yaw), 0.0]) * width / 2
    z = np.array([0.0, 0.0, height / 2])
    c = np.asarray(center, dtype=float)
    return np.stack([c - u + z, c + u + z, c + u - z, c - u - z])


def _yaw_about_centre(corners: np.ndarray, dx: float, dy: float, dyaw: float) -> np.ndarray:
    """Rotate corners about the vertical through their centre by ``dyaw`` rad, then shift."""
    ctr = corners.mean(axis=0)
    cs, sn = math.cos(dyaw), math.sin(dyaw)
    rot = np.array([[cs, -sn, 0.0], [sn, cs, 0.0], [0.0, 0.0, 1.0]])
    return (corners - ctr) @ rot.T + ctr + np.array([dx, dy, 0.0])


def _rng(rng: np.random.Generator | int) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) and rng >= 0:
        return np.random.default_rng(int(rng))
    raise ConfigError(f"rng: expected a numpy.random.Generator or a seed >= 0, got {rng!r}")


def _tuple(c: np.ndarray) -> tuple:
    return tuple(tuple(float(v) for v in row) for row in c)


def _vec3(v) -> tuple[float, float, float]:
    x, y, z = (float(a) for a in v)
    return (x, y, z)


def _bounds(gates: list[np.ndarray], margin: float, floor: float = 0.0):
    pts = np.concatenate(gates)
    lo, hi = pts.min(axis=0) - margin, pts.max(axis=0) + margin
    return (float(lo[0]), float(lo[1]), floor), (float(hi[0]), float(hi[1]), float(hi[2]))


# ---- AlphaPilot 2019 ----------------------------------------------------------------------------
def _above_floor(value: Any) -> Any:
    low = float(np.min(np.asarray(value, dtype=float)[..., 2]))
    if low < ARENA_FLOOR_M:
        raise PydanticCustomError(
            "below_floor", "expected z >= {floor:g} m (the arena floor), got z = {z:g} m",
            {"floor": ARENA_FLOOR_M, "z": low},
        )  # fmt: skip
    return value


def _gate_corners(value: tuple) -> tuple:
    _above_floor(value)
    problem = gate_shape_problem(np.asarray(value, dtype=float))
    if problem is not None:
        raise PydanticCustomError("gate_shape", "expected a gate's 4 corners: {problem}",
                                  {"problem": problem})  # fmt: skip
    return value


def _gate_name(name: str) -> str:
    if GATE_NAME.fullmatch(name) is None or len(_digits(name)) > GATE_NUMBER_DIGITS:
        raise PydanticCustomError(
            "gate_name",
            "expected a gate name of 1-64 printable characters with at most {n} digits "
            "(its number)",
            {"n": GATE_NUMBER_DIGITS},
        )
    return name


def _unit_quaternion(q: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
    if abs(math.sqrt(sum(v * v for v in q)) - 1.0) > QUATERNION_NORM_TOL:
        raise PydanticCustomError(
            "quaternion_norm", "expected a unit quaternion (norm within {tol} of 1)",
            {"tol": QUATERNION_NORM_TOL},
        )  # fmt: skip
    return q


def _number(lo: float, hi: float, open_lo: bool = False) -> Any:
    low = Field(gt=lo) if open_lo else Field(ge=lo)
    return Annotated[float, StrictType(), low, Field(le=hi, allow_inf_nan=False)]


_N_GATES = int(LIMITS["gates"].hi)
GateName = Annotated[str, StrictType(), AfterValidator(_gate_name)]
Shift = _number(0.0, SHIFT_M)  # m
Turn = _number(0.0, 180.0)  # deg


class CourseGate(Strict):
    """One ``[gates.<name>]`` table: 4 corners (m, world, any order) and the perturbation
    bounds (+-x m, +-y m, +-yaw deg)."""

    corners: Annotated[tuple[Vec3, Vec3, Vec3, Vec3], AfterValidator(_gate_corners)]
    perturbation: tuple[Shift, Shift, Turn]


class CourseSettings(Strict):
    """The ``[course]`` table: the order of gates flown, start pose and passage settings."""

    name: Annotated[Text, Field(max_length=256)] = ""
    order: Annotated[list[Text], Field(min_length=1, max_length=_N_GATES)]
    start_position: Annotated[Vec3, AfterValidator(_above_floor)]
    start_quaternion_wxyz: Annotated[Quaternion, AfterValidator(_unit_quaternion)]
    timeout_s: _number(0.0, LIMITS["duration"].hi, open_lo=True)  # s
    gate_width: _number(0.0, PASSAGE_M, open_lo=True)  # m
    inflation: _number(0.0, PASSAGE_M)  # m


class CourseFile(Strict):
    """A course file (format of ``data/alphapilot_2019.toml``): ``[course]`` and 1 to
    ``LIMITS["gates"]`` gate tables."""

    course: CourseSettings
    gates: Annotated[dict[GateName, CourseGate], Field(min_length=1, max_length=_N_GATES)]


def read_course(path: str | Path | None = None) -> tuple[CourseFile, str]:
    """The checked course file at ``path`` (default: the packaged AlphaPilot 2019 course) and
    its name for messages. A path that is not a regular file, non-UTF-8 text, invalid TOML, or
    any field outside :class:`CourseFile` is a one-line FileFormatError naming the file and the
    field (ConfigError when ``path`` is not a path); nothing is opened but a regular file."""
    if path is None:
        path, src = (
            Path(__file__).with_name("data") / ALPHAPILOT_FILE,
            f"volary/worlds/data/{ALPHAPILOT_FILE}",
        )
    else:
        src = str(path)
    doc = read_toml(path, "course file")
    course = validated(CourseFile, doc, src)
    for i, name in enumerate(course.course.order):
        if name not in course.gates:
            raise FileFormatError(
                f"{src}: course.order.{i}: expected the name of a gate of [gates], got {name!r}"
            )
    return course, src


def _digits(name: str) -> str:
    return "".join(ch for ch in name if "0" <= ch <= "9")


def _gate_number(name: str) -> int:
    """The gate's number (its object id): the ASCII digits of its name, 0 when none."""
    digits = _digits(name)
    return int(digits) if digits else 0


def _start_yaw(q) -> float:
    w, x, y, z = (float(v) for v in q)
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


ARENAS = ("empty", "factory")  # the arena around the AlphaPilot gates (:func:`alphapilot_2019`)
OVERSHOOT_M = 5.0  # m the racing line runs on past the final gate (the racers fly 3 m past it)
LINE_SAMPLE_M = 0.25  # m between the samples of the keep-out around the racing line


def alphapilot_2019(path: str | Path | None = None, arena: str = "empty") -> SceneSpec:
    """The AlphaPilot 2019 qualifier arena: all 23 gates (object id = gate number), the 11-gate
    course order, start pose and the official passage/score settings in ``meta``. ``path``
    reads another course in the same format (checked by :func:`read_course`).

    Bounds are the gates' extent plus ``ARENA_MARGIN`` (the arena walls are not published), or
    more where a gate's perturbation could carry it farther. ``arena``: ``"empty"`` (gates,
    floor and the bounds) or ``"factory"`` (the hall of :mod:`volary.worlds.factory` around the
    course: walls, roof, pillars, machines, clear of every course the generators draw)."""
    if arena not in ARENAS:
        raise not_one_of("arena", arena, ARENAS)
    spec = _alphapilot_gates(path)
    if arena == "empty":
        return spec
    from volary.worlds.factory import factory_obstacles

    obstacles = factory_obstacles(spec.bounds_min, spec.bounds_max, keep_out(spec))
    return replace(spec, obstacles=obstacles, meta={**spec.meta, "arena": arena})


def _alphapilot_gates(path: str | Path | None) -> SceneSpec:
    file, src = read_course(path)
    course, table = file.course, file.gates
    names = sorted(table, key=_gate_number)
    corners = [around_frame(np.asarray(table[n].corners, dtype=float)) for n in names]
    pert = {n: table[n].perturbation for n in names}
    order = list(course.order)
    where = {n: i for i, n in enumerate(names)}
    index = [where[n] for n in order]
    gates = tuple(
        Gate(_tuple(c), name=n, object_id=_gate_number(n))
        for n, c in zip(names, corners, strict=True)
    )
    reach = max(  # a perturbed gate's corners stay within shift + radius of its centre
        max(pert[n][:2]) + float(np.linalg.norm(c - c.mean(axis=0), axis=1).max())
        for n, c in zip(names, corners, strict=True)
    )
    margin = max(ARENA_MARGIN, reach)
    lo, hi = _bounds(corners, margin, ARENA_FLOOR_M)
    lim = LIMITS["coordinate"]
    if min(lo) < lim.lo or max(hi) > lim.hi:
        far = min(lo) if min(lo) < lim.lo else max(hi)
        raise FileFormatError(
            f"{src}: gates: the arena (the gates' extent plus a {margin:g} m margin) reaches "
            f"{far:g} m; expected it within [{lim.lo:g}, {lim.hi:g}] m ({lim.quantity})"
        )
    meta = {
        "source": src,
        "course": course.name,
        "order": order,
        "order_index": index,
        "gate_width": course.gate_width,
        "inflation": course.inflation,
        "timeout_s": course.timeout_s,
        "perturbation": pert,
        "start_quaternion_wxyz": course.start_quaternion_wxyz,
    }
    return SceneSpec(
        name="alphapilot_2019",
        bounds_min=lo,
        bounds_max=hi,
        gates=gates,
        start=course.start_position,
        start_yaw=_start_yaw(course.start_quaternion_wxyz),
        goal=_vec3(corners[index[-1]].mean(axis=0)),
        meta=meta,
    )


def perturb_course(spec: SceneSpec, rng: np.random.Generator | int) -> SceneSpec:
    """A new course: each gate shifted by U(-x, x), U(-y, y) m and turned about the vertical
    through its centre by U(-yaw, yaw) deg, with the bounds in ``meta["perturbation"]``."""
    g = _rng(rng)
    bounds = spec.meta.get("perturbation")
    if not isinstance(bounds, dict):
        raise ConfigError(f"spec: {spec.name} has no meta['perturbation'] bounds")
    lim = np.array([bounds.get(gt.name, (0.0, 0.0, 0.0)) for gt in spec.gates], dtype=float)
    draw = g.uniform(-1.0, 1.0, size=lim.shape) * lim  # (G, 3): dx m, dy m, dyaw deg
    gates = tuple(
        replace(
            gt,
            corners=_tuple(
                _yaw_about_centre(np.asarray(gt.corners), d[0], d[1], math.radians(d[2]))
            ),
        )
        for gt, d in zip(spec.gates, draw, strict=True)
    )
    last = gates[spec.meta["order_index"][-1]].center
    base = spec.meta.get("perturbation_base") or {
        "name": spec.name,
        "gates": [[list(c) for c in gt.corners] for gt in spec.gates],
        "goal": list(spec.goal),
    }
    meta = {**spec.meta, "perturbation_draw": draw.tolist(), "perturbation_base": base}
    return replace(spec, gates=gates, goal=_vec3(last), meta=meta)


_PERTURBATION_KEYS = ("perturbation_draw", "perturbation_base", "course_generator")


def unperturbed(spec: SceneSpec) -> SceneSpec:
    """The course that :func:`perturb_course` or a :data:`COURSE_GENERATORS` setting drew
    ``spec`` from (its name, gates and goal, from ``meta["perturbation_base"]``: the corners,
    and the frame bars' widths where the setting changed them; the first course of a chain of
    perturbations), or ``spec`` itself when it was not perturbed."""
    base = spec.meta.get("perturbation_base")
    if base is None:
        return spec
    try:
        corners = [np.asarray(c, dtype=float) for c in base["gates"]]
        borders = [float(b) for b in base.get("borders", [gt.border for gt in spec.gates])]
        gates = tuple(
            replace(gt, corners=_tuple(c), border=b)
            for gt, c, b in zip(spec.gates, corners, borders, strict=True)
        )
        name, goal = str(base["name"]), _vec3(base["goal"])
    except (KeyError, ValueError, TypeError) as err:
        raise ConfigError(f"spec: {spec.name} has a malformed meta['perturbation_base']") from err
    meta = {k: v for k, v in spec.meta.items() if k not in _PERTURBATION_KEYS}
    return replace(spec, name=name, gates=gates, goal=goal, meta=meta)


def alphapilot_2019_courses(
    n: int = 25,
    rng: np.random.Generator | int = 0,
    generator: str = "volary",
    arena: str = "empty",
) -> list[SceneSpec]:
    """``n`` perturbed AlphaPilot courses (the qualifier used 25), deterministic in ``rng``,
    drawn by the named :data:`COURSE_GENERATORS` setting (default ``volary``: each gate's
    rigid shift + yaw within its published bounds, :func:`perturb_course`) in the ``arena``
    of :func:`alphapilot_2019` (the gates' draws do not depend on it)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ConfigError(f"n: expected a course count >= 1, got {n!r}")
    gen = COURSE_GENERATORS.get(generator)
    base, g = alphapilot_2019(arena=arena), _rng(rng)
    return [replace(gen.draw(base, g), name=f"alphapilot_2019_{i}") for i in range(n)]


# ---- course generator settings ------------------------------------------------------------------
GENERATOR_KEY = "course_generator"  # meta key naming the setting a course was drawn with
MAX_DRAWS = 100  # redraws of one course whose gates overlap or block the start


@dataclass(frozen=True)
class CourseGenerator:
    """A named way of drawing perturbed courses from a nominal one (``volary race
    --courses-from``). Every setting starts from volary's rigid perturbation of each gate (shift
    U(-s b_x, s b_x), U(-s b_y, s b_y) m plus ``extra_shift_m`` on both axes, yaw U(-s b_yaw,
    s b_yaw) deg plus ``extra_yaw_deg``, with b the gate's published bounds and s
    ``shift_scale``) and then changes the course gates (those of ``order_index``; the other
    gates are the arena's and stay as published):

    - ``replace_p``: each course gate's opening is, with this probability, swapped for another
      arena gate's (its width, height and in-plane roll; uniform over the gates whose opening
      differs by more than 5 cm), at the same centre and facing;
    - ``resize``: the opening's width and height each scaled by U(lo, hi);
      ``border``: the frame bar's width scaled by U(lo, hi) (the outer size follows);
    - ``tilt_deg``: pitch about the gate's horizontal in-plane axis and roll about its normal,
      each U(-t, t) deg; ``dz_m``: height change U(lo, hi) m.

    A course whose gates come closer than ``clearance_m`` (bounding spheres) where the
    nominal ones did not, whose gate dips below 0.2 m, or which leaves the arena is drawn
    again (at most :data:`MAX_DRAWS` times, from the same generator: deterministic).
    ``volary`` (the default) is :func:`perturb_course` itself, draw for draw."""

    name: str
    summary: str
    shift_scale: float = 1.0
    extra_shift_m: float = 0.0
    extra_yaw_deg: float = 0.0
    replace_p: float = 0.0
    resize: tuple[float, float] = (1.0, 1.0)
    border: tuple[float, float] = (1.0, 1.0)
    tilt_deg: float = 0.0
    dz_m: tuple[float, float] = (0.0, 0.0)
    clearance_m: float = 0.5

    @property
    def rigid_only(self) -> bool:
        """The setting is today's rigid shift + yaw of each gate and nothing else."""
        return self == replace(VOLARY_GENERATOR, name=self.name, summary=self.summary)

    def draw(self, spec: SceneSpec, rng: np.random.Generator | int) -> SceneSpec:
        """One course drawn from the nominal ``spec`` (its ``meta["perturbation"]`` bounds)."""
        g = _rng(rng)
        if self.rigid_only:
            out = perturb_course(spec, g)
        else:
            for _ in range(MAX_DRAWS):
                out = _varied(spec, self, g)
                if _acceptable(spec, out, self.clearance_m):
                    break
            else:
                raise ConfigError(
                    f"courses-from {self.name}: no course with gates {self.clearance_m} m apart "
                    f"in {MAX_DRAWS} draws"
                )
        return replace(out, meta={**out.meta, GENERATOR_KEY: self.name})


VOLARY_GENERATOR = CourseGenerator(
    "volary", "today's: a rigid shift and yaw of each gate within its published bounds "
    "(development setting)",
)  # fmt: skip
COURSE_GENERATORS: Registry[CourseGenerator] = Registry(
    "course generator",
    {
        "volary": VOLARY_GENERATOR,
        "replaced": CourseGenerator(
            "replaced", "volary's draw, then each course gate's frame swapped with p = 0.3 for "
            "another arena gate's opening (size, shape, roll)", replace_p=0.3,
        ),
        "resized": CourseGenerator(
            "resized", "volary's draw, then each course gate's opening width and height "
            "scaled by U(0.8, 1.2) and its frame bar by U(1, 3)",
            resize=(0.8, 1.2), border=(1.0, 3.0),
        ),
        "moved": CourseGenerator(
            "moved", "beyond a rigid shift: shifts U(-(1.5 b + 0.5), 1.5 b + 0.5) m, yaw "
            "U(-(1.5 b + 5), 1.5 b + 5) deg, pitch and roll U(-15, 15) deg, height U(-0.5, 1) m",
            shift_scale=1.5, extra_shift_m=0.5, extra_yaw_deg=5.0, tilt_deg=15.0,
            dz_m=(-0.5, 1.0),
        ),
    },
)  # fmt: skip


def gate_reach(spec: SceneSpec) -> np.ndarray:
    """(G,) m: how far each gate's centre can move from its nominal place under any
    :data:`COURSE_GENERATORS` setting (horizontal shift and height change together)."""
    bounds = spec.meta.get("perturbation", {})
    course = set(spec.meta.get("order_index", ()))
    out = np.zeros(len(spec.gates))
    for i, gt in enumerate(spec.gates):
        bx, by, _ = bounds.get(gt.name, (0.0, 0.0, 0.0))
        for gen in COURSE_GENERATORS.values():
            s, e = (gen.shift_scale, gen.extra_shift_m) if i in course else (1.0, 0.0)
            dz = max(abs(v) for v in gen.dz_m) if i in course else 0.0
            out[i] = max(out[i], float(np.hypot(np.hypot(s * bx + e, s * by + e), dz)))
    return out


def racing_line(spec: SceneSpec) -> tuple[np.ndarray, np.ndarray]:
    """The nominal racing line: points (L + 2, 3) m (the start, the course gates' centres in
    ``order_index``, and :data:`OVERSHOOT_M` past the final gate) and how far each point can
    move under the course generators (:func:`gate_reach`; 0 at the start)."""
    order = spec.meta["order_index"]
    reach = gate_reach(spec)
    pts = [np.asarray(spec.start, dtype=float)] + [np.asarray(spec.gates[i].center) for i in order]
    last = pts[-1] - pts[-2]
    pts.append(pts[-1] + OVERSHOOT_M * last / max(float(np.linalg.norm(last)), 1e-9))
    widen = np.array([0.0, *(reach[i] for i in order), reach[order[-1]]])
    return np.stack(pts), widen


def keep_out(spec: SceneSpec) -> tuple[np.ndarray, np.ndarray]:
    """Spheres (centres (K, 3) m, radii (K,) m) that arena structure must stay out of: the
    racing line (:func:`racing_line`) sampled every :data:`LINE_SAMPLE_M`, each sample's radius
    ``LINE_CLEARANCE_M`` plus the line's reach there (linear between its points: a point of a
    drawn course's line lies within that of the nominal one) plus half a sample step; and every
    gate, its radius the largest a generator can make a gate (1.2 x the largest bounding
    radius plus a 0.3 m bar) plus its reach plus ``GATE_CLEARANCE_M``."""
    from volary.worlds.factory import GATE_CLEARANCE_M, LINE_CLEARANCE_M

    pts, widen = racing_line(spec)
    ctr, rad = [], []
    for a, b, wa, wb in zip(pts[:-1], pts[1:], widen[:-1], widen[1:], strict=True):
        k = max(1, int(np.ceil(np.linalg.norm(b - a) / LINE_SAMPLE_M)))
        t = np.linspace(0.0, 1.0, k + 1)
        ctr.append(a + t[:, None] * (b - a))
        rad.append(LINE_CLEARANCE_M + wa + t * (wb - wa) + LINE_SAMPLE_M / 2)
    centres, r = _spheres(spec)
    gate_r = 1.2 * float(r.max()) + 0.3 + gate_reach(spec) + GATE_CLEARANCE_M
    return np.concatenate([*ctr, centres]), np.concatenate([*rad, gate_r])


def _rot(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation matrix (3, 3) by ``angle`` rad about the unit ``axis`` (Rodrigues)."""
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * (k @ k)


def _frame_axes(c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A gate's in-plane "across" axis (along its top bar), "up" axis and normal (unit)."""
    across = (c[1] - c[0]) + (c[2] - c[3])
    across /= np.linalg.norm(across)
    up = (c[0] - c[3]) + (c[1] - c[2])
    up -= (up @ across) * across
    up /= np.linalg.norm(up)
    return across, up, np.cross(across, up)


def _opening(c: np.ndarray) -> tuple[float, float, float]:
    """(width m, height m, roll rad) of an opening: the roll is the top bar's slope."""
    w = 0.5 * (np.linalg.norm(c[1] - c[0]) + np.linalg.norm(c[2] - c[3]))
    h = 0.5 * (np.linalg.norm(c[0] - c[3]) + np.linalg.norm(c[1] - c[2]))
    top = c[1] - c[0]
    return float(w), float(h), math.atan2(float(top[2]), float(np.linalg.norm(top[:2])))


def _reshaped(c: np.ndarray, width: float, height: float, roll: float) -> np.ndarray:
    """Corners (4, 3) of an opening ``width`` x ``height`` m rolled by ``roll`` rad about the
    normal of the frame ``c`` (same centre, same facing; top bar first)."""
    across, _, normal = _frame_axes(c)
    flat = np.array([0.0, 0.0, 1.0]) - (normal @ [0.0, 0.0, 1.0]) * normal
    up = flat / np.linalg.norm(flat) if np.linalg.norm(flat) > 1e-9 else _frame_axes(c)[1]
    across = np.cross(up, normal)
    r = _rot(normal, roll)
    a, u = r @ across * width / 2, r @ up * height / 2
    ctr = c.mean(axis=0)
    return np.stack([ctr - a + u, ctr + a + u, ctr + a - u, ctr - a - u])


def _varied(spec: SceneSpec, gen: CourseGenerator, g: np.random.Generator) -> SceneSpec:
    """One draw of ``gen`` (its docstring) from the nominal ``spec``: rigid first, then the
    course gates' variations, in a fixed order of draws."""
    bounds = spec.meta.get("perturbation")
    if not isinstance(bounds, dict):
        raise ConfigError(f"spec: {spec.name} has no meta['perturbation'] bounds")
    pub = np.array([bounds.get(gt.name, (0.0, 0.0, 0.0)) for gt in spec.gates], dtype=float)
    course = set(spec.meta["order_index"])
    on = np.array([i in course for i in range(len(spec.gates))])[:, None]
    extra = [gen.extra_shift_m, gen.extra_shift_m, gen.extra_yaw_deg]
    lim = np.where(on, pub * gen.shift_scale + extra, pub)
    draw = g.uniform(-1.0, 1.0, size=lim.shape) * lim  # (G, 3): dx m, dy m, dyaw deg
    shapes = [_opening(np.asarray(gt.corners)) for gt in spec.gates]
    gates = []
    for i, (gt, d) in enumerate(zip(spec.gates, draw, strict=True)):
        c = _yaw_about_centre(np.asarray(gt.corners), d[0], d[1], math.radians(d[2]))
        border = gt.border
        if i in course:
            c, border = _course_gate(c, gt.border, shapes, i, gen, g)
        gates.append(replace(gt, corners=_tuple(c), border=float(border)))
    last = gates[spec.meta["order_index"][-1]].center
    base = {
        "name": spec.name,
        "gates": [[list(c) for c in gt.corners] for gt in spec.gates],
        "borders": [gt.border for gt in spec.gates],  # a setting may widen the frame bars
        "goal": list(spec.goal),
    }
    meta = {**spec.meta, "perturbation_draw": draw.tolist(), "perturbation_base": base}
    return replace(spec, gates=tuple(gates), goal=_vec3(last), meta=meta)


def _course_gate(
    c: np.ndarray,
    border: float,
    shapes: list[tuple[float, float, float]],
    i: int,
    gen: CourseGenerator,
    g: np.random.Generator,
) -> tuple[np.ndarray, float]:
    """A course gate's frame after the variations of ``gen`` (draws in a fixed order)."""
    w, h, roll = _opening(c)
    swap, pick = g.uniform(), g.uniform()
    others = [s for j, s in enumerate(shapes) if j != i and abs(s[0] - w) + abs(s[1] - h) > 0.05]
    if gen.replace_p > 0 and swap < gen.replace_p and others:
        w, h, roll = others[min(int(pick * len(others)), len(others) - 1)]
    fw, fh, fb = g.uniform(*gen.resize), g.uniform(*gen.resize), g.uniform(*gen.border)
    pitch, rolled = g.uniform(-1, 1, size=2) * math.radians(gen.tilt_deg)
    dz = g.uniform(*gen.dz_m)
    c = _reshaped(c, w * fw, h * fh, roll + rolled)
    across, _, _ = _frame_axes(c)
    ctr = c.mean(axis=0)
    c = (c - ctr) @ _rot(across, pitch).T + ctr + np.array([0.0, 0.0, dz])
    return c, border * fb


def _spheres(spec: SceneSpec) -> tuple[np.ndarray, np.ndarray]:
    c = np.stack([np.asarray(gt.corners, dtype=float) for gt in spec.gates])
    ctr = c.mean(axis=1)
    r = np.linalg.norm(c - ctr[:, None], axis=-1).max(-1) + np.array(
        [gt.border for gt in spec.gates]
    )
    return ctr, r


def _acceptable(nominal: SceneSpec, course: SceneSpec, clearance: float) -> bool:
    """The drawn course keeps its gates apart (bounding spheres ``clearance`` m apart wherever
    the nominal ones were), above 0.2 m, inside the arena and off the start (2 m)."""
    ctr, r = _spheres(course)
    ctr0, r0 = _spheres(nominal)
    gap = np.linalg.norm(ctr[:, None] - ctr[None], axis=-1) - r[:, None] - r[None]
    gap0 = np.linalg.norm(ctr0[:, None] - ctr0[None], axis=-1) - r0[:, None] - r0[None]
    np.fill_diagonal(gap, np.inf)
    np.fill_diagonal(gap0, np.inf)
    if ((gap < clearance) & (gap0 >= clearance)).any():
        return False
    pts = np.concatenate([np.asarray(gt.corners, dtype=float) for gt in course.gates])
    lo, hi = np.asarray(course.bounds_min), np.asarray(course.bounds_max)
    if pts[:, 2].min() < 0.2 or (pts < lo).any() or (pts > hi).any():
        return False
    start = np.asarray(course.start, dtype=float)
    return bool((np.linalg.norm(ctr - start, axis=-1) - r).min() > 2.0)


# ---- Crazyflie-scale courses --------------------------------------------------------------------
@dataclass(frozen=True)
class GateCourseConfig:
    """Gate-course geometry. Defaults: the BoundaryPredictor lab (paper 002 Sec. V-A, Table II):
    gate centre heights 0.3/0.525 m, gate-to-gate distance 0.8-1.5 m, heading change within
    +-pi/4. Opening and frame sizes are Crazyflie-scale assumptions (not published there)."""

    n_gates: int = 6
    spacing: tuple[float, float] = (0.8, 1.5)  # m, gate-to-gate distance range
    turn: tuple[float, float] = (-math.pi / 4, math.pi / 4)  # rad, heading change per gate
    heights: tuple[float, ...] = (0.3, 0.525)  # m, gate centre heights
    opening: float = 0.4  # m, square opening (assumed)
    border: float = 0.05  # m, frame bar width (assumed)
    depth: float = 0.05  # m, frame thickness (assumed)
    min_separation: float = 0.6  # m between non-consecutive gate centres (random courses)
    margin: float = 1.0  # m, flight volume around the gates

    def __post_init__(self) -> None:
        if self.n_gates < 1:
            raise ConfigError(f"n_gates: expected >= 1, got {self.n_gates}")
        if not 0 < self.spacing[0] <= self.spacing[1]:
            raise ConfigError(f"spacing: expected 0 < low <= high m, got {self.spacing}")
        if not self.turn[0] <= self.turn[1]:
            raise ConfigError(f"turn: expected low <= high rad, got {self.turn}")
        if not self.heights or min(self.heights) <= 0 or self.opening <= 0:
            raise ConfigError("heights/opening: expected positive metres")


def _bisector_yaws(xy: np.ndarray, start_heading: float) -> np.ndarray:
    """Gate normals along the bisector of the incoming and outgoing legs (ends: one leg)."""
    legs = np.diff(xy, axis=0)
    head = np.arctan2(legs[:, 1], legs[:, 0])
    inc = np.concatenate([[start_heading], head])
    out = np.concatenate([head, [inc[-1]]])
    return np.arctan2(np.sin(inc) + np.sin(out), np.cos(inc) + np.cos(out))


def course_from_centres(
    name: str, centres: np.ndarray, yaws: np.ndarray, cfg: GateCourseConfig, meta: dict
) -> SceneSpec:
    """A course through upright gates at ``centres (G, 3)`` with normals along ``yaws (G,)``;
    the start is one mean spacing before the first gate, the goal the last gate's centre."""
    corners = [
        vertical_gate(c, y, cfg.opening, cfg.opening) for c, y in zip(centres, yaws, strict=True)
    ]
    gates = tuple(
        Gate(_tuple(c), name=f"gate{i}", border=cfg.border, depth=cfg.depth, object_id=i + 1)
        for i, c in enumerate(corners)
    )
    back = np.array([math.cos(yaws[0]), math.sin(yaws[0]), 0.0]) * float(np.mean(cfg.spacing))
    start = centres[0] - back
    lo, hi = _bounds(corners + [start[None]], cfg.margin)
    hi = (hi[0], hi[1], max(hi[2], max(cfg.heights) + cfg.margin))
    return SceneSpec(
        name=name,
        bounds_min=lo,
        bounds_max=hi,
        gates=gates,
        start=_vec3(start),
        start_yaw=float(yaws[0]),
        goal=_vec3(centres[-1]),
        meta={"order_index": list(range(len(gates))), **meta},
    )


def _heights(cfg: GateCourseConfig, n: int) -> np.ndarray:
    return np.array([cfg.heights[i % len(cfg.heights)] for i in range(n)], dtype=float)


def _straight(n: int, d: float, turn: float) -> tuple[np.ndarray, np.ndarray]:
    return np.stack([np.arange(n) * d, np.zeros(n)], axis=-1), np.zeros(n)


def _circular(n: int, d: float, turn: float) -> tuple[np.ndarray, np.ndarray]:
    """Regular n-gon on a circle (chord ``d``), gates facing along the tangent."""
    r = d / (2 * math.sin(math.pi / n))
    phi = 2 * math.pi * np.arange(n) / n
    return np.stack([r * np.sin(phi), r - r * np.cos(phi)], axis=-1), phi


def _snaked(n: int, d: float, turn: float) -> tuple[np.ndarray, np.ndarray]:
    """Legs alternating +-turn/2 about +x, so the heading changes by ``turn`` at each gate."""
    head = np.where(np.arange(n - 1) % 2 == 0, turn / 2, -turn / 2)
    legs = d * np.stack([np.cos(head), np.sin(head)], axis=-1)
    xy = np.concatenate([np.zeros((1, 2)), np.cumsum(legs, axis=0)])
    return xy, _bisector_yaws(xy, -turn / 2)


_Legs = Callable[[int, float, float], tuple[np.ndarray, np.ndarray]]
BP_COURSES: Registry[tuple[_Legs, int]] = Registry(
    "BoundaryPredictor course",  # name -> (centres and yaws of n gates, default n)
    {"straight": (_straight, 4), "circular": (_circular, 8), "snaked": (_snaked, 6)},
)


def boundary_predictor_course(
    kind: str,
    n_gates: int | None = None,
    spacing: float = 1.2,
    turn: float = math.pi / 4,
    config: GateCourseConfig | None = None,
) -> SceneSpec:
    """The BoundaryPredictor lab courses (paper 002 Sec. V-A, Sec. I: circular, straight and
    snaked): gate heights alternating 0.3/0.525 m, ``spacing`` m between consecutive gates,
    heading change ``turn`` rad at each gate (circular: 2 pi / n_gates; snaked: +-turn).

    Defaults keep every leg inside the paper's sampling ranges (Table II: 0.8-1.5 m, +-pi/4):
    4 straight gates, 8 on the circle (the fewest with turns <= pi/4), 6 snaked."""
    build, default_n = BP_COURSES.get(kind)
    n = default_n if n_gates is None else int(n_gates)
    if n < (3 if kind == "circular" else 1):
        raise ConfigError(f"n_gates: expected at least {3 if kind == 'circular' else 1}, got {n}")
    if not (spacing > 0 and math.isfinite(spacing)):
        raise ConfigError(f"spacing: expected a distance > 0 m, got {spacing}")
    cfg = replace(config or GateCourseConfig(), n_gates=n)
    xy, yaws = build(n, spacing, turn)
    centres = np.concatenate([xy, _heights(cfg, n)[:, None]], axis=-1)
    meta = {
        "kind": kind,
        "spacing": spacing,
        "turn": turn,
        "source": "BoundaryPredictor (paper 002) Sec. V-A and Table II ranges",
    }
    return course_from_centres(f"bp_{kind}", centres, yaws, cfg, meta)


def random_gate_course(
    rng: np.random.Generator | int, config: GateCourseConfig | None = None, max_tries: int = 100
) -> SceneSpec:
    """A random course: each gate at a distance U(spacing) and heading change U(turn) from the
    previous one, at a height drawn from ``heights``; courses whose non-consecutive gates come
    closer than ``min_separation`` are redrawn (from the same generator, so it stays
    deterministic)."""
    cfg, g = config or GateCourseConfig(), _rng(rng)
    n = cfg.n_gates
    for _ in range(max_tries):
        d = g.uniform(*cfg.spacing, size=n)
        head = np.cumsum(g.uniform(*cfg.turn, size=n))
        z = np.asarray(cfg.heights, dtype=float)[g.integers(0, len(cfg.heights), size=n)]
        xy = np.cumsum(d[:, None] * np.stack([np.cos(head), np.sin(head)], axis=-1), axis=0)
        gap = np.linalg.norm(xy[:, None] - xy[None], axis=-1) + np.eye(n) * 1e9
        gap[np.abs(np.subtract.outer(np.arange(n), np.arange(n))) == 1] = 1e9
        if gap.min() >= cfg.min_separation:
            centres = np.concatenate([xy, z[:, None]], axis=-1)
            yaws = _bisector_yaws(xy, float(head[0]))
            meta = {"kind": "random", "legs_m": d.tolist(), "headings_rad": head.tolist()}
            return course_from_centres("random_gates", centres, yaws, cfg, meta)
    raise ConfigError(
        f"config: no course with min_separation {cfg.min_separation} m found in {max_tries} draws"
    )
