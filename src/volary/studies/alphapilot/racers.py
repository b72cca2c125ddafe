"""Racers: plan a drone race through a course of gates before the start (AlphaPilot 2019,
paper 001 Sec. V-C); the race itself (rules, score, the flight) is
:mod:`volary.studies.alphapilot.race`.

A racer (:class:`Racer`) gives the ``mellinger`` controller gains and, per course (env), a
:class:`RacePlan`: setpoints over time. Both racers here know the (perturbed) gate poses and
fly a min-snap trajectory with drag-aware feed-forward
(:func:`volary.planning.flatness.feedforward_setpoint`), yaw held at the start yaw.

Baseline (:class:`MinSnapRacer`): waypoints are the start, then per gate an entry point, the
centre and an exit point ``approach`` m along the gate normal (so the vehicle crosses each plane
squarely), and a last point ``overshoot`` m past the final gate's exit point with free end
derivatives (no braking before the final gate). Timing: snap-optimal ratios scaled to the
fastest uniform time that meets the vehicle's limits (``volary.planning.optimize_times``: thrust
with drag, rotor speeds, body rate, tilt), then per-segment rebalancing
(:func:`balance_segment_times`) and the uniform rescale again (``fastest_feasible``).

Default racer (:class:`MinTimeRacer`, ``RACERS["mintime"]``): min-snap through the gate centres
with the velocity along each gate normal (speed free), segment times and gate speeds from
:func:`volary.planning.mintime.min_time`; same vehicle limits, same controller. Racers are picked
by name with :func:`make_racer` (``"minsnap"``, ``"mintime"``).

Part of the AlphaPilot study (layer 6; it was ``volary.planning.racing``): imports
``volary.control`` (the gains), ``volary.worlds`` (course geometry) and ``volary.planning``;
never ``volary.sim`` or ``volary.bench``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from volary.control import Gains
from volary.dynamics.params import VehicleParams
from volary.errors import ConfigError
from volary.planning.flatness import Limits, check_flat, feedforward_setpoint, flat_to_state
from volary.planning.minsnap import min_snap
from volary.planning.mintime import MinTimeResult, min_time
from volary.planning.timing import fastest_feasible, optimize_times
from volary.planning.trajectory import FlatOutputs, PolyTrajectory
from volary.registry import Registry
from volary.worlds import SceneSpec, unperturbed
from volary.worlds.gates import gate_planes

FLAT_FIELDS = ("pos", "vel", "acc", "jerk", "snap", "yaw", "yaw_rate", "yaw_acc")
CRUISE_SPEED = 8.0  # m/s, initial proportional segment times of the baseline


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

    def setpoints(self, t: Tensor) -> Tensor:
        """(K, N, 14): :meth:`setpoint` at K times per env, ``t`` (K, N) s, in one batched
        evaluation (the plan is a function of time alone, so a race can tabulate it)."""
        return self.tabulate(t)[0]

    def tabulate(self, t: Tensor) -> tuple[Tensor, FlatOutputs]:
        """(setpoints (K, N, 14), the flat outputs themselves with fields (N, K, ...)) at K
        times per env, ``t`` (K, N) s, from one evaluation of the trajectory."""
        k, n = t.shape
        f = self.traj.evaluate(t.to(torch.float64).T)  # fields (N, K, ...)

        def rows(x: Tensor) -> Tensor:  # (N, K, ...) -> (K * N, ...), time-major
            return x.transpose(0, 1).reshape(k * n, *x.shape[2:])

        flat = FlatOutputs(*(rows(getattr(f, name)) for name in FLAT_FIELDS))
        envs = torch.arange(n, device=t.device).repeat(k)
        sp = feedforward_setpoint(flat, self.params.index(envs)).reshape(k, n, -1)
        return sp, FlatOutputs(*(getattr(f, name) for name in FLAT_FIELDS))


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


RACERS: Registry[type[MinSnapRacer] | type[MinTimeRacer]] = Registry(
    "racer", {"minsnap": MinSnapRacer, "mintime": MinTimeRacer}
)
DEFAULT_RACER = "mintime"  # leaderboard 92.33 against MinSnapRacer's 89.49 (seed 0, DESIGN.md)


def make_racer(name: str) -> MinSnapRacer | MinTimeRacer:
    """The racer registered as ``name`` (:data:`RACERS`) with its default settings."""
    if name not in RACERS:
        raise ConfigError(f"racer: unknown racer {name!r}, expected one of {sorted(RACERS)}")
    return RACERS.get(name)()


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
    start = torch.as_tensor(np.asarray(spec.start, dtype=float))
    c, n = travel_planes(corners[None], start[None])
    return c[0].numpy(), n[0].numpy()


def travel_planes(corners: Tensor, start: Tensor) -> tuple[Tensor, Tensor]:
    """Centres (N, L, 3) and unit normals (N, L, 3) of gates given by their corners (N, L, 4, 3)
    in course order, each normal turned along the direction of travel: from the previous gate
    (or ``start`` (N, 3)) toward the next one (past the last gate: straight on)."""
    c, n = gate_planes(corners)
    prev = torch.cat((start[:, None].to(c.dtype), c[:, :-1]), 1)
    nxt = torch.cat((c[:, 1:], c[:, -1:] + (c[:, -1:] - prev[:, -1:])), 1)
    sign = torch.sign((n * (nxt - prev)).sum(-1, keepdim=True))
    return c, n * torch.where(sign == 0, 1.0, sign)


__all__ = [
    "CONTROL_MAX_TILT",
    "DEFAULT_RACER",
    "MinSnapRacer",
    "MinTimeRacer",
    "RACERS",
    "RacePlan",
    "Racer",
    "TrajectoryPlan",
    "balance_segment_times",
    "course_gates",
    "make_racer",
    "travel_planes",
    "segment_load",
]
