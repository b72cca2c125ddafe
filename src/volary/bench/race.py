"""The AlphaPilot 2019 race (FlightGoggles, paper 001 Sec. V-C) and two min-snap racers.

Rules (001 Sec. V-C1, restated in ``alphapilot_2019.toml``):

- a gate counts when the vehicle position passes it with the official reporter's rule
  (inside the corner box inflated by ``inflation`` m and closer than ``gate_width`` m to the gate
  plane; :class:`volary.worlds.GateTracker`), in course order (a skipped gate is missed);
- score = 10 n - t, n the gates passed in order and t the seconds from the start to the final
  gate; 0 when the final gate is not reached within the time limit or the vehicle collides
  (:func:`race_score`);
- 25 perturbed courses; a contestant's result is the mean of its five best scores
  (:func:`leaderboard`). The top 2019 team scored 91.39 (001 Table III).

Here a collision is the vehicle's collision sphere touching any gate frame of its course
(all 23 gates stand in the arena; the 12 off the course are obstacles), leaving the arena
volume or its ceiling, or hitting the ground, before the final gate; what happens after the
final gate does not count (the race is over for that env). The simulation stops when every env
has finished or crashed, or ``grace_s`` after the longest plan ended: an env that has not reached
the final gate by then hovers at its plan's end and never will, and scores 0 as a timeout.

Baseline (:class:`MinSnapRacer`): knows the (perturbed) gate poses; waypoints are the start,
then per gate an entry point, the centre and an exit point ``approach`` m along the gate normal
(so the vehicle crosses each plane squarely), and a last point ``overshoot`` m past the final
gate's exit point with free end derivatives (no braking before the final gate). Timing: snap-
optimal ratios scaled to the fastest uniform time that meets the vehicle's limits
(``volary.planning.optimize_times``: thrust with drag, rotor speeds, body rate, tilt), then
per-segment rebalancing (:func:`balance_segment_times`) and the uniform rescale again
(``fastest_feasible``). Flown with the ``mellinger`` mode and drag-aware feed-forward
(:func:`volary.bench.tracking.feedforward_setpoint`), yaw held at the start yaw.

Default racer (:class:`MinTimeRacer`, ``RACERS["mintime"]``): min-snap through the gate centres
with the velocity along each gate normal (speed free), segment times and gate speeds from
:func:`volary.planning.mintime.min_time`; same vehicle limits, same controller. Racers are picked
by name with :func:`make_racer` (``"minsnap"``, ``"mintime"``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from volary.bench.threads import one_thread
from volary.bench.tracking import feedforward_setpoint
from volary.control import Gains
from volary.dynamics.params import VehicleParams
from volary.errors import ConfigError
from volary.planning import (
    FlatOutputs,
    Limits,
    PolyTrajectory,
    fastest_feasible,
    min_snap,
    optimize_times,
)
from volary.planning.flatness import check_flat, flat_to_state
from volary.planning.mintime import MinTimeResult, min_time
from volary.worlds import (
    CollisionMonitor,
    GateTracker,
    Scene,
    SceneSpec,
    alphapilot_2019,
    alphapilot_2019_courses,
    unperturbed,
)
from volary.worlds.gates import gate_planes

POINTS_PER_GATE = 10.0  # 001 Sec. V-C1
BEST_OF = 5  # leaderboard: mean of the five best scores of 25 courses
TOP_2019_SCORE = 91.39  # 001 Table III, best team
RACE_PLATFORM = "flightgoggles"  # the AlphaPilot 2019 vehicle (flightgoggles_vehicle.toml)
PATH_EVERY = 4  # control steps between recorded positions (plots)
FLAT_FIELDS = ("pos", "vel", "acc", "jerk", "snap", "yaw", "yaw_rate", "yaw_acc")
CRUISE_SPEED = 8.0  # m/s, initial proportional segment times of the baseline


# ---- score --------------------------------------------------------------------------------------
def race_score(
    gates_passed: Tensor,
    time: Tensor,
    finished: Tensor,
    collided: Tensor,
    timeout_s: float | Tensor,
) -> Tensor:
    """AlphaPilot score (001 Sec. V-C1): 10 n - t when the final gate is reached (``finished``)
    at ``time`` t <= ``timeout_s`` without collision, else 0. Shapes (N,)."""
    ok = finished & ~collided & (torch.nan_to_num(time, nan=math.inf) <= timeout_s)
    raw = POINTS_PER_GATE * gates_passed.to(time.dtype) - time
    return torch.where(ok, raw, torch.zeros_like(raw))


def leaderboard(results: RaceResult | Tensor | Sequence[float], best: int = BEST_OF) -> float:
    """Mean of the ``best`` highest scores (001 Sec. V-C1: five of 25 courses)."""
    s = results.score if isinstance(results, RaceResult) else torch.as_tensor(results)
    s = s.double().flatten()
    if s.numel() < 1 or best < 1:
        raise ConfigError(
            f"results: expected at least one score and best >= 1, got "
            f"{s.numel()} scores, best={best}"
        )
    return float(s.topk(min(best, s.numel())).values.mean())


# ---- racers -------------------------------------------------------------------------------------
class RacePlan(Protocol):
    """What a racer hands the race loop: ``mellinger`` setpoints over time, per env."""

    @property
    def duration(self) -> Tensor:
        """(N,) s, when each env's plan ends."""
        ...

    def setpoint(self, t: Tensor) -> Tensor:
        """(N, 14) ``mellinger`` setpoint at times ``t`` (N,) s."""
        ...


class Racer(Protocol):
    """Plans every env's race before the start, knowing its course."""

    def gains(self, params: VehicleParams) -> Gains:
        """Controller gains of the ``mellinger`` mode that flies the plan."""
        ...

    def plan(self, courses: Sequence[SceneSpec], params: VehicleParams) -> RacePlan:
        """One plan per course (env)."""
        ...


@dataclass(frozen=True)
class TrajectoryPlan:
    """A batch of flat-output trajectories flown with drag-aware feed-forward."""

    traj: PolyTrajectory  # float64, batch (N,)
    params: VehicleParams  # float64, the vehicles that fly it
    duration: Tensor  # (N,) s

    def setpoint(self, t: Tensor) -> Tensor:
        """(N, 14) setpoint of each env's trajectory at its time ``t`` (N,) s."""
        f = self.traj.evaluate(t.to(torch.float64)[:, None])  # fields (N, 1, ...)
        one = FlatOutputs(*(getattr(f, k)[:, 0] for k in FLAT_FIELDS))
        return feedforward_setpoint(one, self.params)


CONTROL_MAX_TILT = math.radians(88.0)  # rad, the racer's controller tilt cap (default 45 deg)


def _default_limits() -> Limits:
    """Planning limits: 90 % of the max thrust and 95 % of the max rotor speed (headroom for
    feedback), body rates within 15 rad/s; tilt only 3 deg inside the controller's cap (the real
    limit is the thrust: at speed the drag needs the thrust vector nearly horizontal)."""
    return Limits(
        thrust_margin=0.9,
        rotor_margin=0.95,
        max_body_rate=15.0,
        max_tilt=CONTROL_MAX_TILT - math.radians(3.0),
    )


@dataclass(frozen=True)
class MinSnapRacer:
    """Min-snap through the gates with optimized timing (module docstring)."""

    approach: float = 2.0  # m, entry/exit points before/after each gate centre
    overshoot: float = 3.0  # m, last waypoint beyond the final gate's exit point
    limits: Limits = field(default_factory=_default_limits)
    ratio_iters: int = 15  # snap-ratio descent steps (volary.planning.refine_ratios)
    balance_iters: int = 40  # per-segment time balancing steps (balance_segment_times)
    max_tilt: float = CONTROL_MAX_TILT  # rad, controller tilt cap

    def __post_init__(self) -> None:
        for name in ("approach", "overshoot"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ConfigError(f"{name}: expected a distance > 0 m, got {v}")

    def gains(self, params: VehicleParams) -> Gains:
        """Default gains with the tilt cap raised to ``max_tilt`` (fast gates need > 45 deg)."""
        return Gains.default(params).override(max_tilt=self.max_tilt)

    def waypoints(self, spec: SceneSpec) -> np.ndarray:
        """(3 G + 2, 3) m: start, entry/centre/exit per course gate, a point past the last."""
        c, n = course_gates(spec)
        pts = [np.asarray(spec.start, dtype=float)]
        for ci, ni in zip(c, n, strict=True):
            pts += [ci - self.approach * ni, ci, ci + self.approach * ni]
        pts.append(c[-1] + (self.approach + self.overshoot) * n[-1])
        return np.stack(pts)

    def plan(self, courses: Sequence[SceneSpec], params: VehicleParams) -> TrajectoryPlan:
        wp = torch.as_tensor(np.stack([self.waypoints(s) for s in courses]), dtype=torch.float64)
        yaw = torch.tensor([s.start_yaw for s in courses], dtype=torch.float64)
        yaw = yaw[:, None].expand(-1, wp.shape[1]).clone()
        der = torch.full((*wp.shape[:2], 3, 4), math.nan, dtype=torch.float64)
        der[:, 0] = 0.0  # start at rest; the end is free (no braking before the final gate)
        p64 = params.to(device="cpu", dtype=torch.float64)
        traj = optimize_times(
            wp,
            p64,
            self.limits,
            yaw=yaw,
            derivatives=der,
            speed=CRUISE_SPEED,
            iters=self.ratio_iters,
        )
        if self.balance_iters > 0:
            dur = balance_segment_times(
                wp,
                traj.durations,
                p64,
                self.limits,
                yaw=yaw,
                derivatives=der,
                iters=self.balance_iters,
            )
            traj = fastest_feasible(min_snap(wp, dur, yaw=yaw, derivatives=der), p64, self.limits)
        dev = params.device
        return TrajectoryPlan(traj.to(dev), params.to(dtype=torch.float64), traj.duration.to(dev))


@dataclass(frozen=True)
class MinTimeRacer:
    """Min-snap through the gate centres with minimum-time segment times (the default racer).

    Waypoints: the start, every course gate's centre, and a point ``overshoot`` m past the final
    gate. At each gate centre the velocity is constrained to v_j n_j along the gate normal (so
    the vehicle crosses the plane squarely), with the speed v_j free. Segment times and gate
    speeds come from :func:`volary.planning.mintime.min_time` (gradient descent on the time the
    trajectory needs after the uniform rescale onto the limits; the last segment, after the
    final gate, weighs ``tail_weight`` in that time because the race ends at the final gate).
    Same vehicle limits as :class:`MinSnapRacer` (90 % thrust, 95 % rotor speed headroom).
    """

    overshoot: float = 3.0  # m past the final gate
    limits: Limits = field(default_factory=_default_limits)
    iters: int = 800  # descent steps (volary.planning.mintime.min_time)
    warm_iters: int = 200  # steps for the other courses, warm-started from the first one
    samples: int = 3000  # limit checks per trajectory and step
    tail_weight: float = 0.3
    max_tilt: float = CONTROL_MAX_TILT  # rad, controller tilt cap

    def __post_init__(self) -> None:
        if not (math.isfinite(self.overshoot) and self.overshoot > 0):
            raise ConfigError(f"overshoot: expected a distance > 0 m, got {self.overshoot}")
        if not (0.0 <= self.tail_weight <= 1.0):
            raise ConfigError(f"tail_weight: expected a weight in [0, 1], got {self.tail_weight}")
        for name in ("iters", "warm_iters", "samples"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name}: expected an int >= 1, got {v!r}")

    def gains(self, params: VehicleParams) -> Gains:
        """Default gains with the tilt cap raised to ``max_tilt`` (fast gates need > 45 deg)."""
        return Gains.default(params).override(max_tilt=self.max_tilt)

    def waypoints(self, spec: SceneSpec) -> tuple[np.ndarray, np.ndarray]:
        """(G + 2, 3) m waypoints (start, gate centres, overshoot) and their directions (unit
        gate normals at the centres, NaN rows where the velocity is free)."""
        c, n = course_gates(spec)
        pts = np.concatenate(
            [np.asarray(spec.start, dtype=float)[None], c, c[-1:] + self.overshoot * n[-1:]]
        )
        dirs = np.full_like(pts, np.nan)
        dirs[1 : 1 + len(c)] = n
        return pts, dirs

    def plan(self, courses: Sequence[SceneSpec], params: VehicleParams) -> TrajectoryPlan:
        """Plan every course; a course's plan depends only on itself and its vehicle.

        A perturbed course (``worlds.perturb_course``) is warm-started, ``warm_iters`` steps,
        from the cold solution (``iters`` steps) of the course it was drawn from
        (``worlds.unperturbed``: e.g. the nominal AlphaPilot course); any other course is
        solved cold. Each distinct unperturbed course and vehicle is solved once per call.
        """
        if len({len(self.waypoints(s)[0]) for s in courses}) != 1:
            raise ConfigError("courses: expected the same number of gates on every course")
        p64 = params.to(device="cpu", dtype=torch.float64)
        env = [0 if p64.n_envs == 1 else i for i in range(len(courses))]
        bases = [unperturbed(s) for s in courses]
        roots: dict[tuple, int] = {}  # (course, vehicle) key -> row of the cold batch
        root_specs: list[SceneSpec] = []
        root_envs: list[int] = []
        root_row: list[int] = []
        for i, base in enumerate(bases):
            key = (_course_key(base), _vehicle_key(p64, env[i]))
            if key not in roots:
                roots[key] = len(root_specs)
                root_specs.append(base)
                root_envs.append(env[i])
            root_row.append(roots[key])
        cold = self._solve(root_specs, p64.index(root_envs), self.iters)
        source = [(cold, root_row[i]) for i in range(len(courses))]  # (result, row) per course
        warm_idx = [i for i, (s, b) in enumerate(zip(courses, bases, strict=True)) if b is not s]
        if warm_idx:
            rows = [root_row[i] for i in warm_idx]
            warm = self._solve(
                [courses[i] for i in warm_idx],
                p64.index([env[i] for i in warm_idx]),
                self.warm_iters,
                cold.durations[rows],
                None if cold.speeds is None else cold.speeds[rows],
            )
            for k, i in enumerate(warm_idx):
                source[i] = (warm, k)
        traj = PolyTrajectory(
            torch.stack([res.traj.coeffs[r] for res, r in source]),
            torch.stack([res.traj.durations[r] for res, r in source]),
        )
        dev = params.device
        return TrajectoryPlan(traj.to(dev), params.to(dtype=torch.float64), traj.duration.to(dev))

    def _solve(
        self,
        courses: Sequence[SceneSpec],
        vehicles: VehicleParams,
        iters: int,
        durations: Tensor | None = None,
        speeds: Tensor | None = None,
    ) -> MinTimeResult:
        """One batched :func:`min_time` over ``courses`` (one vehicle row each), warm-started
        from ``durations`` / ``speeds`` when given."""
        pairs = [self.waypoints(s) for s in courses]
        wp = torch.as_tensor(np.stack([p for p, _ in pairs]), dtype=torch.float64)
        dirs = torch.as_tensor(np.stack([d for _, d in pairs]), dtype=torch.float64)
        yaw = torch.tensor([s.start_yaw for s in courses], dtype=torch.float64)
        yaw = yaw[:, None].expand(-1, wp.shape[1]).clone()
        der = torch.full((*wp.shape[:2], 3, 4), math.nan, dtype=torch.float64)
        der[:, 0] = 0.0  # start at rest; the end is free (no braking before the final gate)
        weights = torch.ones(wp.shape[1] - 1, dtype=torch.float64)
        weights[-1] = self.tail_weight
        return min_time(
            wp,
            vehicles,
            self.limits,
            yaw=yaw,
            derivatives=der,
            directions=dirs,
            weights=weights,
            durations=durations,
            speeds=speeds,
            iters=iters,
            samples=self.samples,
        )


def _course_key(spec: SceneSpec) -> tuple:
    """What a course's plan depends on: its start pose and its gates in course order."""
    c, n = course_gates(spec)
    return (tuple(spec.start), spec.start_yaw, c.round(12).tobytes(), n.round(12).tobytes())


def _vehicle_key(params: VehicleParams, env: int) -> bytes:
    """The parameter values of one env (equal vehicles give equal keys)."""
    one = params.index([env])
    return b"".join(getattr(one, f.name).detach().double().numpy().tobytes() for f in fields(one))


RACERS: dict[str, type[MinSnapRacer] | type[MinTimeRacer]] = {
    "minsnap": MinSnapRacer,
    "mintime": MinTimeRacer,
}
DEFAULT_RACER = "mintime"  # leaderboard 92.33 against MinSnapRacer's 89.49 (seed 0, DESIGN.md)


def make_racer(name: str) -> MinSnapRacer | MinTimeRacer:
    """The racer registered as ``name`` (:data:`RACERS`) with its default settings."""
    if name not in RACERS:
        raise ConfigError(f"racer: unknown racer {name!r}, expected one of {sorted(RACERS)}")
    return RACERS[name]()


def segment_load(
    traj: PolyTrajectory, vehicle: VehicleParams, limits: Limits, samples: int = 16
) -> Tensor:
    """(N, M) how hard each segment pushes the limits, in units that scale roughly like 1/T^2
    with the segment time T: the largest of thrust / (margin T_max), (rotor speed / (margin
    w_max))^2, (body rate / max rate)^2 and tan(tilt) / tan(max tilt) over ``samples`` points
    per segment (``volary.planning.flatness.check_flat``); 1 is at a limit."""
    n, m = traj.durations.shape
    s = torch.linspace(0.0, 1.0, samples, dtype=traj.durations.dtype)
    t = (traj.knot_times[:, :-1, None] + traj.durations[:, :, None] * s).reshape(n, m * samples)
    f = traj.evaluate(t)
    flat = FlatOutputs(
        *(getattr(f, k).reshape(n, m, samples, *getattr(f, k).shape[2:]) for k in FLAT_FIELDS)
    )
    rep = check_flat(flat, flat_to_state(flat, vehicle), vehicle, limits)
    tilt = rep.max_tilt.clamp_max(math.radians(89.0)).tan() / math.tan(limits.max_tilt)
    rate = (rep.max_body_rate / limits.max_body_rate) ** 2
    return torch.stack((rep.max_thrust_ratio, rep.max_rotor_ratio**2, rate, tilt)).amax(0)


def balance_segment_times(
    waypoints: Tensor,
    durations: Tensor,
    vehicle: VehicleParams,
    limits: Limits,
    *,
    yaw: Tensor | None = None,
    derivatives: Tensor | None = None,
    iters: int = 40,
    step: float = 0.03,
) -> Tensor:
    """Per-segment times (N, M) that spread the load of :func:`segment_load` more evenly.

    ``optimize_times`` scales the whole trajectory by one factor, so its tightest turn sets the
    pace everywhere. Each step here rescales segment i by (load_i / max_j load_j)^(1/2) (load
    scales about like 1/T^2), limited to a factor in [1 - step, 1 + step] because min-snap couples
    neighbouring segments; the uniform rescale this set would need is about
    sqrt(max load), so the iterate with the smallest sum(T) sqrt(max load) is returned (the
    process can drift once min-snap starts to oscillate on long legs next to short ones, which
    a plain fixed-point iteration did). Finish with ``fastest_feasible`` to meet the limits.
    """
    dur = durations.clone()
    best, best_cost = dur.clone(), torch.full_like(dur[:, 0], math.inf)
    for _ in range(iters):
        traj = min_snap(waypoints, dur, yaw=yaw, derivatives=derivatives)
        load = segment_load(traj, vehicle, limits).clamp_min(1e-9)
        peak = load.amax(-1, keepdim=True)
        cost = dur.sum(-1) * peak[:, 0].sqrt()
        better = cost < best_cost
        best = torch.where(better[:, None], dur, best)
        best_cost = torch.where(better, cost, best_cost)
        dur = dur * (load / peak).sqrt().clamp(1.0 - step, 1.0 + step)
    return best


def course_gates(spec: SceneSpec) -> tuple[np.ndarray, np.ndarray]:
    """Centres (L, 3) and unit normals (L, 3) of the course gates in order, each normal pointing
    along the direction of travel (from the previous gate, or the start, to the next one)."""
    order = spec.meta["order_index"]
    corners = torch.as_tensor(np.stack([np.asarray(spec.gates[i].corners) for i in order]))
    c, n = (x.numpy() for x in gate_planes(corners))
    prev = np.concatenate([np.asarray(spec.start, dtype=float)[None], c[:-1]])
    nxt = np.concatenate([c[1:], c[-1:] + (c[-1:] - prev[-1:])])
    sign = np.sign(np.einsum("ij,ij->i", n, nxt - prev))
    return c, n * np.where(sign == 0, 1.0, sign)[:, None]


# ---- the race loop ------------------------------------------------------------------------------
@dataclass(frozen=True)
class RaceResult:
    """Outcome per env (one course each)."""

    courses: tuple[str, ...]  # course names
    gates_passed: Tensor  # (N,) int64, gates passed in order
    gate_times: Tensor  # (N, L) s, time each course gate was passed; NaN if not
    finished: Tensor  # (N,) bool, the final gate was reached
    collided: Tensor  # (N,) bool, collision/out of bounds/ground before the final gate
    timed_out: Tensor  # (N,) bool, the final gate was not reached (and no collision)
    time: Tensor  # (N,) s to the final gate; NaN if not reached
    score: Tensor  # (N,) AlphaPilot score
    plan_time: Tensor  # (N,) s, the racer's planned duration
    path: Tensor  # (K, N, 3) m, positions every PATH_EVERY control steps
    path_time: Tensor  # (K,) s

    def to_dict(self) -> dict:
        """JSON-ready per-course results."""

        def f(x: Tensor) -> list:
            return [None if isinstance(v, float) and math.isnan(v) else v for v in x.tolist()]

        return {
            "courses": [
                {
                    "course": name,
                    "gates_passed": int(self.gates_passed[i]),
                    "gate_times_s": f(self.gate_times[i]),
                    "finished": bool(self.finished[i]),
                    "collided": bool(self.collided[i]),
                    "timed_out": bool(self.timed_out[i]),
                    "time_s": f(self.time[i : i + 1])[0],
                    "score": float(self.score[i]),
                    "plan_time_s": float(self.plan_time[i]),
                }
                for i, name in enumerate(self.courses)
            ]
        }


@dataclass
class _Progress:
    """Mutable per-env bookkeeping of the race loop."""

    gate_times: Tensor  # (N, L)
    crash_time: Tensor  # (N,) s, first crash of any kind; NaN until then
    path: list[Tensor] = field(default_factory=list)
    path_time: list[float] = field(default_factory=list)


def run_race(
    courses: Sequence[SceneSpec] | None = None,
    racer: Racer | None = None,
    seed: int = 0,
    *,
    device: str = "cpu",
    stochastic: bool = True,
    control_hz: float = 240.0,
    grace_s: float = 2.0,
) -> RaceResult:
    """Fly one env per course (default: the nominal course) with the AlphaPilot vehicle.

    ``seed`` seeds the vehicle's process noise (``stochastic``); the courses carry their own.
    Planning and flight run with one torch/BLAS/OpenMP thread (:mod:`volary.bench.threads`).
    """
    specs = [alphapilot_2019()] if courses is None else list(courses)
    if not specs:
        raise ConfigError("courses: expected at least one course")
    pilot: Racer = racer if racer is not None else make_racer(DEFAULT_RACER)
    with one_thread():  # the same result however the caller set its threads (bench.threads)
        return _run_race(specs, pilot, seed, device, stochastic, control_hz, grace_s)


def _run_race(
    specs: list[SceneSpec],
    pilot: Racer,
    seed: int,
    device: str,
    stochastic: bool,
    control_hz: float,
    grace_s: float,
) -> RaceResult:
    from volary.sim import Simulator  # layer 4, imported on use

    sim = Simulator(
        [RACE_PLATFORM] * len(specs),
        control="mellinger",
        device=device,
        stochastic=stochastic,
        seed=seed,
        control_hz=control_hz,
        gains=pilot.gains,
        compile="numba" if device == "cpu" else False,
    )
    plan = pilot.plan(specs, sim.params)
    scene = Scene.stack(specs, device=device)
    quat = [_yaw_quat(s.start_yaw) for s in specs]
    sim.reset(pos=torch.tensor([s.start for s in specs]), quat=torch.tensor(quat))
    tracker = _tracker(scene, specs)
    prog = _fly(sim, plan, tracker, CollisionMonitor(scene, sim.params.radius), grace_s)
    return _result(specs, tracker, prog, plan)


def _yaw_quat(yaw: float) -> list[float]:
    return [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]


def _tracker(scene: Scene, specs: Sequence[SceneSpec]) -> GateTracker:
    """The course order of every env (padded with -1) and its passage-rule settings."""
    length = max(len(s.meta["order_index"]) for s in specs)
    order = torch.full((len(specs), length), -1, dtype=torch.int64)
    for i, s in enumerate(specs):
        order[i, : len(s.meta["order_index"])] = torch.tensor(s.meta["order_index"])
    return GateTracker(
        scene,
        order=order.to(scene.gate_corners.device),
        gate_width=torch.tensor([s.meta.get("gate_width", 0.3) for s in specs]),
        inflation=torch.tensor([s.meta.get("inflation", 0.1) for s in specs]),
    )


def _final_passed(tracker: GateTracker) -> Tensor:
    last = (tracker.n_gates - 1).clamp_min(0)
    return tracker.passed.gather(1, last[:, None])[:, 0]


def _fly(
    sim, plan: RacePlan, tracker: GateTracker, monitor: CollisionMonitor, grace_s: float
) -> _Progress:
    n, dev = sim.n_envs, sim.config.device
    nan = torch.full((n,), math.nan, device=dev, dtype=torch.float64)
    prog = _Progress(
        torch.full(tracker.passed.shape, math.nan, device=dev, dtype=torch.float64), nan.clone()
    )
    end = float(plan.duration.max()) + grace_s
    for k in range(int(math.ceil(end * sim.config.control_hz))):
        t = torch.full((n,), k * sim.dt, device=dev, dtype=torch.float64)
        state = sim.step(plan.setpoint(t))
        done = _final_passed(tracker) | ~torch.isnan(prog.crash_time)
        _record(sim, state, tracker, monitor, prog, ~done)
        if k % PATH_EVERY == 0:
            prog.path.append(state.pos.detach().cpu().clone())
            prog.path_time.append(float(state.time[0]))
        if bool((_final_passed(tracker) | ~torch.isnan(prog.crash_time)).all()):
            break
    return prog


def _record(
    sim, state, tracker: GateTracker, monitor: CollisionMonitor, prog: _Progress, active: Tensor
) -> None:
    """Gate passages and crashes of the envs still racing (``active``)."""
    t = state.time.to(torch.float64)
    before = tracker.passed.clone()
    tracker.update(state.pos)
    new = tracker.passed & ~before & active[:, None]
    prog.gate_times = torch.where(new, t[:, None], prog.gate_times)
    tracker.passed = torch.where(active[:, None], tracker.passed, before)
    ev = monitor.update(state)
    crash = ev.any | state.crashed | sim.last_reset
    first = crash & active & torch.isnan(prog.crash_time)
    prog.crash_time = torch.where(first, t, prog.crash_time)


def _result(
    specs: Sequence[SceneSpec], tracker: GateTracker, prog: _Progress, plan: RacePlan
) -> RaceResult:
    finished = _final_passed(tracker).cpu()
    collided = ~torch.isnan(prog.crash_time).cpu()
    last = (tracker.n_gates - 1).clamp_min(0).cpu()
    gt = prog.gate_times.cpu()
    time = torch.where(finished, gt.gather(1, last[:, None])[:, 0], math.nan)
    passed = (~torch.isnan(gt)).sum(-1)
    timeout = torch.tensor([s.meta.get("timeout_s", 300.0) for s in specs], dtype=torch.float64)
    score = race_score(passed, time, finished, collided, timeout)
    return RaceResult(
        courses=tuple(s.name for s in specs),
        gates_passed=passed,
        gate_times=gt,
        finished=finished,
        collided=collided,
        timed_out=~finished & ~collided,
        time=time,
        score=score,
        plan_time=plan.duration.cpu().double(),
        path=torch.stack(prog.path),
        path_time=torch.tensor(prog.path_time),
    )


# ---- plot and command-line entry ----------------------------------------------------------------
def plot_race(result: RaceResult, spec: SceneSpec, path: str | Path, env: int = 0) -> Path:
    """Top-down view (x-y) of one env's run: every gate of the arena (course gates numbered in
    order, passed ones green, missed/unreached red), the flown path coloured by speed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 8))
    order = list(spec.meta.get("order_index", []))
    passed = ~torch.isnan(result.gate_times[env])
    for i, g in enumerate(spec.gates):
        xy = np.asarray(g.corners)[:, :2]
        k = order.index(i) if i in order else None
        color = "0.6" if k is None else ("tab:green" if bool(passed[k]) else "tab:red")
        ax.plot(xy[:, 0], xy[:, 1], "-", color=color, lw=3)
        if k is not None:
            ax.annotate(str(k + 1), xy[:2].mean(0), textcoords="offset points", xytext=(6, 6))
    p = result.path[:, env].numpy()
    v = np.linalg.norm(np.diff(p[:, :2], axis=0), axis=-1) / np.diff(result.path_time.numpy())
    sc = ax.scatter(p[1:, 0], p[1:, 1], c=v, s=3, cmap="viridis")
    fig.colorbar(sc, ax=ax, label="horizontal speed [m/s]")
    ax.plot(*spec.start[:2], "k^", ms=9, label="start")
    ax.set(xlabel="x [m]", ylabel="y [m]", aspect="equal", title=_title(result, env))
    ax.legend(loc="best")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out


def _title(result: RaceResult, env: int) -> str:
    status = (
        "finished"
        if bool(result.finished[env])
        else "collided"
        if bool(result.collided[env])
        else "timeout"
    )
    t = float(result.time[env])
    when = "" if math.isnan(t) else f" in {t:.2f} s"
    return (
        f"{result.courses[env]}: {int(result.gates_passed[env])} gates, {status}{when}, "
        f"score {float(result.score[env]):.2f}"
    )


def race_cli(
    out: str | Path,
    seed: int = 0,
    courses: int = 25,
    device: str = "cpu",
    racer: str = DEFAULT_RACER,
) -> Path:
    """``volary race``: the nominal course and ``courses`` perturbed ones (seed ``seed``) flown by
    the racer named ``racer`` (:data:`RACERS`) in one batch; writes ``race.json`` (per-course
    results, leaderboard over the perturbed courses, or over the nominal alone when ``courses`` is
    0) and top-down PNGs of the nominal run and of the best perturbed run. Returns the JSON
    path."""
    if not isinstance(courses, int) or isinstance(courses, bool) or courses < 0:
        raise ConfigError(f"courses: expected a course count >= 0, got {courses!r}")
    pilot = make_racer(racer)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    nominal = alphapilot_2019()
    specs = [nominal, *(alphapilot_2019_courses(courses, seed) if courses else [])]
    res = run_race(specs, racer=pilot, seed=seed, device=device)
    rows = res.to_dict()["courses"]
    scores = res.score[1:] if courses else res.score
    doc = {
        "seed": seed,
        "platform": RACE_PLATFORM,
        "racer": type(pilot).__name__,
        "nominal": rows[0],
        "leaderboard": leaderboard(scores),
        "leaderboard_over": f"{courses} perturbed courses" if courses else "the nominal course",
        "best_of": BEST_OF,
        "top_2019_score": TOP_2019_SCORE,
        "courses": rows[1:],
    }
    plot_race(res, nominal, out_dir / "race_nominal.png", env=0)
    if courses:
        best = 1 + int(scores.argmax())
        plot_race(res, specs[best], out_dir / "race_best.png", env=best)
    path = out_dir / "race.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


__all__ = [
    "BEST_OF",
    "DEFAULT_RACER",
    "MinSnapRacer",
    "MinTimeRacer",
    "RACERS",
    "RacePlan",
    "RaceResult",
    "Racer",
    "TOP_2019_SCORE",
    "TrajectoryPlan",
    "course_gates",
    "leaderboard",
    "make_racer",
    "plot_race",
    "race_cli",
    "race_score",
    "run_race",
]
