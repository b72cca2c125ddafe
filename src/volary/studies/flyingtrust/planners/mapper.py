"""``mapper``: a mapping navigation planner of the optimization-based family (FLYINGTRUST
evaluates EGO-Planner and Fast-Planner; this is a compact planner of the same kind, not a port).

Every call of :meth:`MapperPlanner.plan` (the benchmark calls it at ``task.planner_rate_hz``):

1. **Map**: the depth image is back-projected and its returns mark voxels of a grid over the
   flight volume occupied; a truncated distance field is stamped incrementally around each new
   voxel (:mod:`volary.studies.flyingtrust.planners.occupancy`). The floor, the ceiling and the
   lateral bounds count as obstacles analytically; unknown space is free (optimistic).
2. **Search** (only when needed, see below): weighted A* on the grid with a clearance cost, free
   space = clearance >= radius + margin (:mod:`volary.studies.flyingtrust.planners.search`); the
   goal is clamped into the volume; a partial path toward the goal is used when the goal is not
   reached within the expansion budget.
3. **Trajectory**: the path from the current reference state is shortcut by line of sight, cut
   at ``horizon`` m, and a minimum-snap trajectory (Mellinger & Kumar 2011; a small numpy
   solver, :mod:`volary.studies.flyingtrust.planners.smoothing`, tested against
   :func:`volary.planning.minsnap.min_snap`) is fitted through the remaining waypoints
   with the start velocity and acceleration fixed (continuity) and rest at the end (a safe stop
   inside the known map). Durations start from segment length / speed and are scaled
   uniformly, T -> alpha T with alpha = max(1, v_peak / v_max, sqrt(a_peak / a_max)) (velocity
   scales with 1/alpha, acceleration with 1/alpha^2), until the samples respect the limits. The
   samples are checked against the distance field; where they come closer than radius +
   ``hard_margin``, the search path's point in the middle of that segment is inserted as a
   waypoint and the fit repeated (Richter et al. 2013, Sec. 4); if that fails, the reference
   follows the search path itself at a reduced speed.
4. **Yaw** follows the direction of motion (rate-limited), so the camera maps where it flies.

Replanning policy: the trajectory is re-fitted at every call (a few ms); the grid search runs
when there is no path, the path is blocked within the horizon, the vehicle is more than
``deviation`` m off it (``deviation=0``: never on that account), or ``search_period`` s have
passed (new map information).

Recovery: when the search finds nothing, the margin drops to ``min_margin`` and it retries;
after three searches in a row without a path the map is forgotten (it may hold spurious
returns). When the vehicle has moved less than ``stuck_progress`` m in ``stuck_time`` s, or its
best distance to the goal has not improved for ``progress_time`` s, it hovers and turns on the
spot for ``look_time`` s to map around itself, then flies with ``min_margin`` for
``recovery_time`` s. ``plan`` never returns ``None``: with no path it hovers and turns until
the map or the margin allows one (``reset`` raises when the task has no depth camera)."""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

import numpy as np

from volary.errors import ConfigError
from volary.planning.navigation import NavObservation, NavReference, NavTask
from volary.studies.flyingtrust.planners.occupancy import (
    DepthProjector,
    OccupancyGrid,
    quat_to_matrix,
)
from volary.studies.flyingtrust.planners.search import search, shortcut
from volary.studies.flyingtrust.planners.smoothing import evaluate, min_snap_coefficients

G = 9.81


@dataclass(frozen=True)
class MapperOptions:
    """Keyword options of :class:`MapperPlanner` (lengths m, times s, rates rad/s)."""

    resolution: float = 0.2  # voxel edge
    truncation: float = 2.0  # distance-field truncation (<= 2.5)
    margin: float = 0.25  # search inflation beyond the vehicle radius
    min_margin: float = 0.06  # inflation margin in recovery
    hard_margin: float = 0.12  # the fitted trajectory must keep radius + this
    soft_clearance: float = 1.0  # clearance below which the search pays a cost
    clearance_weight: float = 2.0  # that cost's weight
    vertical_cost: float = 1.5  # kz: vertical steps cost kz times horizontal ones
    heuristic_weight: float = 1.5  # eps of weighted A*
    max_expansions: int = 250_000
    horizon: float = 8.0  # length of path fitted per call
    search_period: float = 1.0
    deviation: float = 1.0  # 0: no re-search for being off the path
    pixel_stride: int = 2  # fuse every n-th pixel in both directions
    sample_dt: float = 0.05  # reference sample spacing
    speed: float = 0.0  # nominal speed; 0: the platform's max_speed
    acc_fraction: float = 0.7  # share of max_acc / max_vertical_acc the plan may use
    yaw_rate: float = 2.5
    stuck_time: float = 5.0  # moved less than stuck_progress in this time: stuck
    stuck_progress: float = 1.0
    progress_time: float = 30.0  # no new best distance to the goal in this time: stuck
    look_time: float = 2.5
    recovery_time: float = 8.0  # how long min_margin stays after a stuck event


def _check_options(opts: MapperOptions, name: str = "mapper") -> None:
    for f in dataclasses.fields(opts):
        v = getattr(opts, f.name)
        if "choices" in f.metadata:  # a named choice, e.g. BsplineOptions.optimizer
            if v not in f.metadata["choices"]:
                raise ConfigError(f"{name} option {f.name}: expected one of "
                                  f"{', '.join(f.metadata['choices'])}, got {v!r}")  # fmt: skip
            continue
        if not (isinstance(v, int | float) and math.isfinite(v)):
            raise ConfigError(f"{name} option {f.name}: expected a finite number, got {v!r}")
        if v < 0 or (
            v == 0 and f.name not in ("speed", "min_margin", "clearance_weight", "deviation")
        ):
            raise ConfigError(f"{name} option {f.name}: expected > 0, got {v!r}")
    if opts.vertical_cost < 1 or opts.heuristic_weight < 1:
        raise ConfigError(f"{name} options vertical_cost, heuristic_weight: expected >= 1")
    if opts.acc_fraction > 1:
        raise ConfigError(f"{name} option acc_fraction: expected <= 1, got {opts.acc_fraction}")


def _yaw_of(quat: np.ndarray) -> float:
    r = quat_to_matrix(quat)
    return math.atan2(r[1, 0], r[0, 0])


def _wrap(a: np.ndarray | float) -> np.ndarray | float:
    return (np.asarray(a) + np.pi) % (2 * np.pi) - np.pi


class MapperPlanner:
    """Depth-fusing mapping planner (see the module docstring). Keyword options:
    :class:`MapperOptions`. ``stats`` holds call counts and time spent per stage."""

    name = "mapper"
    needs = frozenset({"depth"})
    options_type: type[MapperOptions] = MapperOptions  # subclasses extend the options

    def __init__(self, **options: float) -> None:
        valid = [f.name for f in dataclasses.fields(self.options_type)]
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise ConfigError(f"{self.name} options {unknown}: unknown; valid options are {valid}")
        self.options = self.options_type(**options)  # type: ignore[arg-type]
        _check_options(self.options, self.name)
        self.task: NavTask | None = None
        self.stats: dict[str, float] = {}

    # ------------------------------------------------------------------ reset / state
    def reset(self, task: NavTask) -> None:
        if task.depth is None:
            raise ConfigError("task.depth: the mapper planner needs a depth camera, got None")
        o = self.options
        self.task = task
        self.grid = OccupancyGrid(task.bounds_min, task.bounds_max, o.resolution, o.truncation)
        self.projector = DepthProjector(task.depth, o.pixel_stride)
        lim = task.limits
        self.radius = float(lim.plan_radius)  # the sphere, or the fitted box's half width
        self.v_max = float(min(o.speed, lim.max_speed) if o.speed > 0 else lim.max_speed)
        self.a_xy = max(o.acc_fraction * float(lim.max_acc), 0.5)
        self.a_up = max(o.acc_fraction * float(lim.max_vertical_acc), 0.5)
        self.a_down = min(self.a_up, 0.5 * G)
        self.goal = np.asarray(task.goal, dtype=np.float64).copy()
        self._path: np.ndarray | None = None
        self._path_reached = False
        self._path_time = -math.inf
        self._ref: NavReference | None = None
        self._yaw = math.nan
        self._best_dist = math.inf
        self._t_improved = 0.0
        self._look_until = -math.inf
        self._look_yaw0 = 0.0
        self._low_margin_until = -math.inf
        self._no_path = 0
        self._history: list[tuple[float, np.ndarray]] = []
        self._t = 0.0
        self.stats = {
            "calls": 0,
            "plan_s": 0.0,
            "fuse_s": 0.0,
            "searches": 0,
            "search_s": 0.0,
            "fit_s": 0.0,
            "fallbacks": 0,
            "stuck_events": 0,
            "no_path": 0,
            "map_resets": 0,
        }

    @property
    def margin(self) -> float:
        return self.options.min_margin if self._t < self._low_margin_until else self.options.margin

    # ------------------------------------------------------------------ plan
    def plan(self, obs: NavObservation) -> NavReference | None:
        if self.task is None:
            raise ConfigError("MapperPlanner.plan: call reset(task) first")
        t_start = time.perf_counter()
        self._t = float(obs.t)
        pos = np.asarray(obs.position, dtype=np.float64)
        if math.isnan(self._yaw):
            self._yaw = _yaw_of(obs.quat)
        if obs.depth is not None:
            t1 = time.perf_counter()
            self.grid.insert_points(self._map_points(obs))
            self.stats["fuse_s"] += time.perf_counter() - t1
        ref = self._plan(obs, pos)
        self._ref = ref
        self.stats["calls"] += 1
        self.stats["plan_s"] += time.perf_counter() - t_start
        return ref

    def _map_points(self, obs: NavObservation) -> np.ndarray:
        pts = self.projector.points(np.asarray(obs.depth), obs.position, obs.quat)
        # floor and ceiling are known analytically: drop returns within half a voxel of them
        z = pts[:, 2]
        keep = (z > self.grid.lo[2] + 0.5 * self.grid.res) & (z < self.grid.hi[2])
        return pts[keep]

    def _plan(self, obs: NavObservation, pos: np.ndarray) -> NavReference:
        t = self._t
        p0, v0, a0 = self._start_state(obs, pos)
        self._check_stuck(pos)
        if t < self._look_until:
            return self._look_around(p0, v0, a0, t)
        if self._needs_search(p0):
            self._search(p0)
        if self._path is None:
            self._begin_look(t)
            return self._look_around(p0, v0, a0, t)
        return self._fit(p0, v0, a0, t)

    def _start_state(
        self, obs: NavObservation, pos: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The previous reference at obs.t when the vehicle tracks it (continuity, as in
        EGO-Planner), else the measured position and velocity."""
        vel = np.asarray(obs.velocity, dtype=np.float64)
        if self._ref is not None:
            p, v, a, _ = self._ref.sample(np.array([self._t]))
            if np.linalg.norm(p[0] - pos) < 0.4:
                return p[0], v[0], a[0]
        return pos.copy(), vel.copy(), np.zeros(3)

    # ------------------------------------------------------------------ search
    def _thr(self) -> float:
        return self.radius + self.margin

    def _goal_point(self) -> np.ndarray:
        pad = self.radius + self.margin + 0.5 * self.grid.res
        lo, hi = self.grid.lo + pad, self.grid.hi - pad
        return np.clip(self.goal, lo, np.maximum(lo, hi))

    def _needs_search(self, p0: np.ndarray) -> bool:
        if self._path is None:
            return True
        self._trim_path(p0)
        if self._t - self._path_time >= self.options.search_period:
            return True
        if 0 < self.options.deviation < float(np.linalg.norm(self._path[0] - p0)):
            return True
        ahead = self._path[: max(2, int(self.options.horizon / self.grid.res) + 1)]
        return bool((self.grid.clearance(ahead) < self.radius + self.options.hard_margin).any())

    def _trim_path(self, p0: np.ndarray) -> None:
        path = self._path
        assert path is not None
        n = min(len(path), 60)
        i = int(np.argmin(np.linalg.norm(path[:n] - p0, axis=1)))
        self._path = path[i:]

    def _search(self, p0: np.ndarray) -> None:
        o = self.options
        t1 = time.perf_counter()
        goal = self._goal_point()
        goal_clear = self.grid.clearance(goal[None])[0] >= self._thr()
        tol = 0.3 if goal_clear else 0.75 * self.task.goal_radius  # type: ignore[union-attr]
        path, reached = None, False
        for margin in dict.fromkeys((self.margin, o.min_margin)):
            found = self._find_path(p0, goal, tol, margin)
            if found is not None:
                path, reached = found
                if margin < self.margin:
                    self._low_margin_until = self._t + o.recovery_time
                break
        self.stats["searches"] += 1
        self.stats["search_s"] += time.perf_counter() - t1
        if path is None:
            self.stats["no_path"] += 1
            self._no_path += 1
            if self._no_path >= 3:  # the map blocks every way out: it may hold bad returns
                self.grid.clear()
                self._no_path = 0
                self.stats["map_resets"] += 1
            self._path = None
            return
        self._no_path = 0
        if self._keep_old(path, reached):
            self._path_time = self._t
            return
        self._accept_path(path, reached)

    def _find_path(
        self, p0: np.ndarray, goal: np.ndarray, tol: float, margin: float
    ) -> tuple[np.ndarray, bool] | None:
        """The guiding path (K, 3) from p0 (its first point) toward the goal at the given
        inflation margin and whether it reaches the goal; None when it gets nowhere. Here the
        grid's weighted A*; the kinodynamic planner replaces it."""
        o = self.options
        cand, reached, _ = search(
            self.grid,
            p0,
            goal,
            self.radius + margin,
            goal_tol=tol,
            soft=o.soft_clearance,
            w_clear=o.clearance_weight,
            kz=o.vertical_cost,
            eps=o.heuristic_weight,
            max_expand=o.max_expansions,
        )
        if len(cand) <= 1 and not reached:
            return None
        path = cand.copy()
        path[0] = p0
        if reached:
            path = np.vstack([path, goal[None]])
        return path, reached

    def _accept_path(self, path: np.ndarray, reached: bool) -> None:
        self._path, self._path_reached, self._path_time = path, reached, self._t

    def _keep_old(self, new: np.ndarray, reached: bool) -> bool:
        """Hysteresis: a periodic re-search keeps the current path while it is still free at
        the search inflation and not 15 % (+ 1 m) longer than the new one, so the reference
        does not flip between near-equal detours (the tracking suffers from such flips)."""
        old = self._path
        if old is None or len(old) < 2 or (reached and not self._path_reached):
            return False
        if (self.grid.clearance(old) < self._thr()).any():
            return False
        length = lambda p: float(np.linalg.norm(np.diff(p, axis=0), axis=1).sum())  # noqa: E731
        return length(old) <= 1.15 * length(new) + 1.0

    # ------------------------------------------------------------------ trajectory fit
    def _waypoints(self, p0: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """Shortcut waypoints within the horizon, their indices into the dense path (the cut
        point gets the index of the dense point after it), and whether the end is the goal."""
        path = self._path
        assert path is not None
        dense = np.vstack([p0[None], path[1:]]) if len(path) > 1 else p0[None]
        # only the part within ~1.5 horizons matters (dense steps are <= sqrt(3) voxels)
        dense = dense[: int(1.5 * self.options.horizon / self.grid.res) + 2]
        keep = shortcut(self.grid, dense, self.radius + self.margin)
        wp, idx = dense[keep], keep
        seg = np.linalg.norm(np.diff(wp, axis=0), axis=1)
        cum = np.concatenate([[0.0], np.cumsum(seg)])
        h = self.options.horizon
        is_goal = self._path_reached
        if cum[-1] > h:
            k = int(np.searchsorted(cum, h))
            frac = (h - cum[k - 1]) / max(seg[k - 1], 1e-9)
            cut = wp[k - 1] + frac * (wp[k] - wp[k - 1])
            wp = np.vstack([wp[:k], cut[None]])
            idx = np.concatenate([idx[:k], [idx[k]]])
            is_goal = False
        wp, idx = self._dedup(wp, idx)
        return wp, idx, is_goal

    @staticmethod
    def _dedup(wp: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keep = [0]
        for i in range(1, len(wp)):
            if np.linalg.norm(wp[i] - wp[keep[-1]]) > 0.05:
                keep.append(i)
        if len(keep) > 1 and len(wp) > 1 and keep[-1] != len(wp) - 1:
            keep[-1] = len(wp) - 1  # keep the end point itself
        return wp[keep], idx[keep]

    def _fit(self, p0: np.ndarray, v0: np.ndarray, a0: np.ndarray, t: float) -> NavReference:
        t1 = time.perf_counter()
        wp, idx, _ = self._waypoints(p0)
        if len(wp) < 2:
            self.stats["fit_s"] += time.perf_counter() - t1
            return self._brake(p0, v0, a0, t)
        hard = self.radius + self.options.hard_margin
        c0 = float(self.grid.clearance(p0[None])[0])
        dense = self._path
        assert dense is not None
        for _ in range(5):
            wp = self._split_long(wp)
            times, pos, vel, acc = self._min_snap(wp, v0, a0)
            # inside the margin already (tracking error, new returns): do not go deeper
            bad = np.nonzero(self.grid.clearance(pos) < min(hard, c0 - 0.02))[0]
            if bad.size == 0:
                self.stats["fit_s"] += time.perf_counter() - t1
                return self._reference(t, times, pos, vel, acc)
            more = self._insert_support(wp, pos[bad[0]], dense)
            if more is None:
                break
            wp = more
        self.stats["fallbacks"] += 1
        ref = self._follow_path(p0, v0, a0, t, hard)
        self.stats["fit_s"] += time.perf_counter() - t1
        return ref

    def _split_long(self, wp: np.ndarray, max_len: float = 3.0) -> np.ndarray:
        out = [wp[0]]
        for a, b in zip(wp[:-1], wp[1:], strict=True):
            n = int(math.ceil(np.linalg.norm(b - a) / max_len))
            out.extend(a + (b - a) * (k / n) for k in range(1, n + 1))
        return np.asarray(out)

    def _insert_support(
        self, wp: np.ndarray, bad_point: np.ndarray, dense: np.ndarray
    ) -> np.ndarray | None:
        """Insert the dense-path point nearest to the clipping sample between the waypoints
        around it (Richter et al. 2013: add the straight-line midpoint of the failing segment;
        here the search path's point, which has clearance)."""
        j = int(np.argmin(np.linalg.norm(dense - bad_point, axis=1)))
        q = dense[j]
        if np.min(np.linalg.norm(wp - q, axis=1)) < 0.05:
            return None
        best, best_d = 0, math.inf  # segment of wp closest to q
        for i in range(len(wp) - 1):
            a, b = wp[i], wp[i + 1]
            ab = b - a
            s = np.clip(np.dot(q - a, ab) / max(np.dot(ab, ab), 1e-12), 0.0, 1.0)
            d = float(np.linalg.norm(a + s * ab - q))
            if d < best_d:
                best, best_d = i, d
        return np.vstack([wp[: best + 1], q[None], wp[best + 1 :]])

    def _min_snap(
        self, wp: np.ndarray, v0: np.ndarray, a0: np.ndarray, speed: float = 0.0
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Min-snap from (v0, a0) to rest through ``wp``, uniformly time-scaled to the limits
        (numpy solver of :mod:`volary.studies.flyingtrust.planners.smoothing`)."""
        seg = np.linalg.norm(np.diff(wp, axis=0), axis=1)
        dur = np.maximum(seg / (speed or self.v_max), 0.15)
        start = np.array([v0, a0, np.full(3, np.nan)])  # jerk free at the start
        end = np.zeros((3, 3))  # rest at the end
        for _ in range(4):
            coeffs = min_snap_coefficients(wp, dur, start, end)
            total = float(dur.sum())
            n = max(int(math.ceil(total / self.options.sample_dt)), 2)
            ts = np.linspace(0.0, total, n + 1)
            pos, vel, acc = evaluate(coeffs, dur, ts)
            alpha = self._time_scale(vel, acc)
            if alpha <= 1.02:
                break
            dur = dur * alpha
        return ts, pos, vel, acc

    def _time_scale(self, vel: np.ndarray, acc: np.ndarray) -> float:
        v_pk = float(np.linalg.norm(vel, axis=1).max())
        a_xy = float(np.linalg.norm(acc[:, :2], axis=1).max())
        a_up = float(max(acc[:, 2].max(), 0.0))
        a_dn = float(max(-acc[:, 2].min(), 0.0))
        ratios = [v_pk / self.v_max, math.sqrt(a_xy / self.a_xy)]
        ratios += [math.sqrt(a_up / self.a_up), math.sqrt(a_dn / self.a_down)]
        return max(1.0, *ratios)

    # ------------------------------------------------------------------ references
    def _yaws(self, vel: np.ndarray, dt: float) -> np.ndarray:
        """Face the direction of motion; hold the heading when slow; rate-limited."""
        yaws = np.empty(len(vel))
        y = self._yaw
        speed = np.hypot(vel[:, 0], vel[:, 1]).tolist()
        target = np.arctan2(vel[:, 1], vel[:, 0]).tolist()
        step = self.options.yaw_rate * dt
        for k in range(len(vel)):
            if speed[k] > 0.3:
                e = (target[k] - y + math.pi) % (2 * math.pi) - math.pi
                y += min(max(e, -step), step)
            yaws[k] = y
        return yaws

    def _reference(
        self, t: float, times: np.ndarray, pos: np.ndarray, vel: np.ndarray, acc: np.ndarray
    ) -> NavReference:
        dt = float(times[1] - times[0]) if len(times) > 1 else self.options.sample_dt
        yaws = self._yaws(vel, dt)
        # the heading the vehicle should have at the next call
        k = min(int(round((1.0 / self.task.planner_rate_hz) / dt)), len(yaws) - 1)  # type: ignore[union-attr]
        self._yaw = float(yaws[k])
        return NavReference(t, t + times, pos, vel, acc, yaws)

    def _hold(
        self, p: np.ndarray, t: float, yaw_rate: float = 0.0, dur: float = 1.0
    ) -> NavReference:
        dt = self.options.sample_dt
        times = np.arange(0.0, dur + 1e-9, dt)
        n = len(times)
        yaws = self._yaw + yaw_rate * times
        self._yaw = float(_wrap(self._yaw + yaw_rate / self.task.planner_rate_hz))  # type: ignore[union-attr]
        z = np.zeros((n, 3))
        return NavReference(t, t + times, np.repeat(p[None], n, 0), z, z.copy(), yaws)

    def _follow_path(
        self, p0: np.ndarray, v0: np.ndarray, a0: np.ndarray, t: float, hard: float
    ) -> NavReference:
        """Fallback: min-snap through the search path's points every ~0.6 m (up to half the
        horizon) at a reduced speed; if that clips too, brake to rest."""
        path = self._path
        assert path is not None
        pts = np.vstack([p0[None], path[1:]])
        seg = np.linalg.norm(np.diff(pts, axis=0), axis=1)
        cum = np.concatenate([[0.0], np.cumsum(seg)])
        length = min(cum[-1], 0.5 * self.options.horizon)
        if length < 0.3:
            return self._brake(p0, v0, a0, t)
        s = np.linspace(0.0, length, max(int(math.ceil(length / 0.6)), 1) + 1)
        wp = np.stack([np.interp(s, cum, pts[:, i]) for i in range(3)], -1)
        times, pos, vel, acc = self._min_snap(wp, v0, a0, speed=min(1.5, self.v_max))
        c0 = float(self.grid.clearance(p0[None])[0])
        if self.grid.clearance(pos).min() >= min(hard, c0 - 0.02):
            return self._reference(t, times, pos, vel, acc)
        return self._brake(p0, v0, a0, t)

    def _brake(
        self, p0: np.ndarray, v0: np.ndarray, a0: np.ndarray, t: float, yaw_rate: float = 0.0
    ) -> NavReference:
        """Come to rest smoothly from (p0, v0, a0) along the current velocity (stopping
        distance |v|^2 / (2 a_max), min-snap within the limits), then hold for 1 s; the yaw
        turns at ``yaw_rate`` meanwhile (0: held)."""
        speed = float(np.linalg.norm(v0))
        if speed < 0.2:
            return self._hold(p0, t, yaw_rate)
        stop = p0 + v0 * (speed / (2.0 * self.a_xy) + 0.05)
        times, pos, vel, acc = self._min_snap(np.stack([p0, stop]), v0, a0)
        dt = self.options.sample_dt
        tail = times[-1] + dt * np.arange(1, int(1.0 / dt) + 1)
        n = len(tail)
        times = np.concatenate([times, tail])
        pos = np.vstack([pos, np.repeat(pos[-1:], n, 0)])
        vel = np.vstack([vel, np.zeros((n, 3))])
        acc = np.vstack([acc, np.zeros((n, 3))])
        if yaw_rate == 0.0:
            return self._reference(t, times, pos, vel, acc)
        yaws = self._yaw + yaw_rate * times
        self._yaw = float(_wrap(self._yaw + yaw_rate / self.task.planner_rate_hz))  # type: ignore[union-attr]
        return NavReference(t, t + times, pos, vel, acc, yaws)

    # ------------------------------------------------------------------ recovery
    def _check_stuck(self, pos: np.ndarray) -> None:
        """Stuck: moved less than ``stuck_progress`` m in ``stuck_time`` s, or no new best
        distance to the goal for ``progress_time`` s (a maze may need long detours); not
        near the goal."""
        o = self.options
        self._history.append((self._t, pos.copy()))
        while len(self._history) > 1 and self._history[1][0] <= self._t - o.stuck_time:
            self._history.pop(0)
        d = float(np.linalg.norm(pos - self.goal))
        if d < self._best_dist - o.stuck_progress:
            self._best_dist, self._t_improved = d, self._t
        if d < 0.5 * self.task.goal_radius or self._t < self._look_until:  # type: ignore[union-attr]
            return
        t_old, p_old = self._history[0]
        idle = self._t - t_old >= o.stuck_time and np.linalg.norm(pos - p_old) < o.stuck_progress
        if idle or self._t - self._t_improved > o.progress_time:
            self.stats["stuck_events"] += 1
            self._low_margin_until = self._t + o.look_time + o.recovery_time
            self._begin_look(self._t)
            self._t_improved, self._best_dist = self._t, d
            self._history = [(self._t + o.look_time, pos.copy())]

    def _begin_look(self, t: float) -> None:
        if t >= self._look_until:
            self._look_until = t + self.options.look_time
            self._path = None

    def _look_around(
        self, p0: np.ndarray, v0: np.ndarray, a0: np.ndarray, t: float
    ) -> NavReference:
        """Brake to rest and turn (one full turn over ``look_time``) to map around."""
        rate = min(2 * math.pi / self.options.look_time, self.options.yaw_rate)
        return self._brake(p0, v0, a0, t, yaw_rate=rate)
