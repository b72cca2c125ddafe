"""One work unit flown in one World batch: :func:`run_unit` -> one TrialResult per platform.

Structure: a NavPlanner adapter and its watchdog over :func:`volary.sim.rollout`. One
:class:`volary.sim.World` per unit (one env per platform, the unit's scene shared by all, the
depth camera and the LiDAR in its sensor rig); the take-off is one rollout with a scripted
setpoint, the navigation a second one (``begin=False``: take-off ends carry over) whose ``act``
calls the planners every ``CONTROL_HZ / planner_rate_hz`` steps and whose terms are the
benchmark's own (:mod:`volary.studies.flyingtrust.terms`); the time-limit causes are decided
after it.

Phases (FLYINGTRUST, paper 004 Sec. IV-B): every env spawns hovering below the start waypoint
(``TAKEOFF_CLIMB`` m, at least ``radius + 0.1`` m above the floor), climbs to it along a
scripted minimum-jerk position setpoint (``TAKEOFF_TIME`` s) and holds it (``SETTLE_TIME``
s); then the clock starts (t = 0) and the planner flies it to the goal. The 90 s limit and
every metric count from t = 0.

Control: the ``mellinger`` mode (position, velocity, acceleration feed-forward and yaw; the
NavReference is sampled at the control rate, jerk and yaw-rate feed-forward zero), physics
RK4 at 960 Hz with the numba kernel, control at 240 Hz (FlightGoggles' rates; the motors'
time constants are >= 10 ms, so 960 Hz resolves them), process noise seeded per trial.

Planner calls at ``settings.planner_rate_hz`` with the true state as odometry (no estimator
noise) and the sensors the planner ``needs``: a forward 64 x 48 depth camera (90 deg hFOV,
10 m) and/or a 16 x 180 LiDAR (30 deg vertical FOV, 20 m), ray-cast with Embree by the World's
rig, and/or an RGB camera of the depth camera's size, intrinsics and mount, rendering the
scene's Gaussian-splat appearance (:func:`volary.sensors.splat.synthesize`, seeded with the
configuration, so every trial of a configuration sees the same world) with SOUS VIDE's
renderer; all rendered for the envs still flying only. The reference a call returns is tracked until
the next call; no reference (``None``) holds the position. Planner latency is not simulated.

Ends per env (checked on the env's own schedule, so an env's row does not depend on the other
envs of its batch):

- collision: its sphere (``VehicleParams.radius``) touches an obstacle, the floor, the ceiling,
  or its centre leaves the flight volume, or the simulator flags a ground crash or a divergence.
  Collision queries run when the env's clearance could have been used up since the last
  query (clearance / (|v| + a_max * 0.05 s), at most 0.1 s apart, a_max = (TWR + 1) g; the
  signed distance is 1-Lipschitz, so no contact between queries is missed);
- success: within ``goal_radius`` continuously for ``stable_time`` s with |v| < 1 m/s
  (goal checks at 40 Hz);
- at the time limit: "no_plan" if the planner never returned a reference, "timeout" if the env
  never came within the goal radius, else "outside_goal";
- "error": the planner (or its constructor/reset) raised, returned a malformed or non-finite
  reference (a remote planner: its host answered with an error or garbage, or not within
  ``remote_timeout`` s, default 10), or used more than ``settings.trial_wall_limit`` s of wall
  clock in total. The limit is enforced with ``signal.setitimer(ITIMER_REAL)``/SIGALRM around
  each planner call when running in the main thread (a SIGALRM handler is installed for the
  unit; an outer ITIMER_REAL is suspended meanwhile and re-armed afterwards minus the elapsed
  time); in other threads the time is only checked after the call returns (a hang cannot be
  interrupted).

An env that has ended hovers at its last position; its planner and sensors are not called again.
"""

from __future__ import annotations

import math
import signal
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from typing import Any

import numpy as np
import torch

from volary.bench.threads import one_thread
from volary.errors import ConfigError
from volary.planning.navigation import (
    DepthCameraInfo,
    LidarInfo,
    NavLimits,
    NavObservation,
    NavReference,
    NavTask,
    RgbCameraInfo,
)
from volary.sensors.splat.camera import SKY
from volary.studies.flyingtrust.metrics import first_entry_time, track_json, trial_metrics
from volary.studies.flyingtrust.schema import CAUSES, TrialResult, TrialSpec, WorkUnit
from volary.studies.flyingtrust.terms import ClearanceCollisions, GoalDwell
from volary.worlds.primitives import SceneSpec

GRAVITY = 9.81
PHYSICS_HZ = 960.0
CONTROL_HZ = 240.0
TAKEOFF_CLIMB = 1.0  # m
TAKEOFF_TIME = 1.5  # s, minimum-jerk climb to the start waypoint
SETTLE_TIME = 0.5  # s, hold at the start waypoint before t = 0
RECORD_HZ = 40.0  # track samples for the metrics and goal checks
TRACK_HZ = 5.0  # samples kept in TrialResult.track
STABLE_SPEED = 1.0  # m/s, "stable" at the goal
# Planner acceleration limits: a share of the platform's envelope (g sqrt(TWR^2 - 1)
# horizontally, (TWR - 1) g up), capped alike for all platforms (FLYINGTRUST Sec. IV-A: "all
# runs respect identical ... acceleration constraints"). Above ~4 m/s^2 the heavy, slow-motor
# platforms overshoot a 4 m/s speed step by up to 35 % with the default gains (measured).
ACC_MARGIN = 0.4
MAX_ACC_CAP = 4.0  # m/s^2
MAX_VERTICAL_ACC_CAP = 4.0  # m/s^2
COLLISION_MAX_GAP = 0.1  # s between collision queries at most
# The protocol's speed cap (FLYINGTRUST Sec. IV-A: "the UAV's maximum flight speed was capped at
# 4 m/s") bounds the flown speed, not only the plan. Planners are told SPEED_REF_SHARE of the cap
# and the runner retimes any reference that is faster (uniformly slower from the plan's tick,
# same path); at every control step the position controller's velocity command is saturated at
# SPEED_GUARD_SHARE of the cap and damped (_Episode._speed_guard). The margins bound the
# controller's overshoot: see DESIGN.md "Speed cap" for the measured peaks.
SPEED_REF_SHARE = 0.95
SPEED_GUARD_SHARE = 0.97
GUARD_LOOKAHEAD = 0.2  # s, the guard's prediction horizon and acceleration damping
DEPTH_SIZE = (64, 48)  # px
DEPTH_HFOV = math.radians(90.0)
DEPTH_RANGE = 10.0  # m
RGB_SKY = SKY  # the RGB camera's background where no splat covers a pixel
LIDAR_CHANNELS, LIDAR_COLUMNS, LIDAR_VFOV, LIDAR_RANGE = 16, 180, math.radians(30.0), 20.0


class PlannerTimeout(BaseException):
    """The planner used up its trial's wall-clock budget (BaseException: a planner's own
    ``except Exception`` does not swallow it)."""


@dataclass
class _Env:
    """The planner side of one env (one trial); the World keeps its episode status."""

    spec: TrialSpec
    planner: Any = None
    task: NavTask | None = None
    end_time: float = math.nan  # s since the start waypoint, for ends the episode decides
    error: str = ""
    had_plan: bool = False
    ref: NavReference | None = None
    hold: np.ndarray | None = None  # position held while there is no reference
    planner_time: float = 0.0  # s of wall clock used by the planner


def run_unit(unit: WorkUnit) -> list[TrialResult]:
    """Fly every trial of ``unit`` in one batch; one TrialResult per platform, in order.

    Deterministic for a given unit (all fields but ``wall_time``) on a given machine, whatever
    the caller's thread settings: torch and the native pools (OpenBLAS, OpenMP) run on one
    thread during the unit and are restored afterwards. With more threads the order of
    floating-point reductions depends on the thread count, and the hard closed loops amplify
    the last bits (a 36-platform mapper unit flew 28 of 36 rows differently with two threads).
    Planner faults never raise: they become rows with cause "error" and the traceback in
    ``error``.
    """
    _check_unit(unit)
    t_wall = time.perf_counter()
    with one_thread(), _Watchdog() as watchdog:
        ep = _Episode(unit, watchdog)
        try:
            ep.run()
        finally:
            ep.close_planners()
        return ep.results(time.perf_counter() - t_wall)


def _check_unit(unit: WorkUnit) -> None:
    if not isinstance(unit, WorkUnit):
        raise ConfigError(f"unit: expected a WorkUnit, got {type(unit).__name__}")
    if not unit.platforms:
        raise ConfigError("unit.platforms: expected at least one platform")
    if not 0 <= unit.config:
        raise ConfigError(f"unit.config: expected a configuration index >= 0, got {unit.config}")


@lru_cache(maxsize=16)
def scene_spec(scenario: str, config: int) -> SceneSpec:
    """The fixed configuration ``config`` of scenario type ``scenario`` (cached)."""
    from volary.worlds import make_scenario

    return make_scenario(scenario, int(config))


# ---------------------------------------------------------------------------------------------
class _Episode:
    """A NavPlanner adapter and its watchdog over two rollouts of one World: take-off, then
    navigation with a planner tick every ``steps`` control steps."""

    def __init__(self, unit: WorkUnit, watchdog: _Watchdog) -> None:
        from volary.sim import Sensing, World

        self.unit, self.settings, self.watchdog = unit, unit.settings, watchdog
        self.spec = scene_spec(unit.scenario, unit.config)
        self.envs = [_Env(s) for s in unit.trials()]
        self.n = len(self.envs)
        self.steps = max(1, int(round(CONTROL_HZ / self.settings.planner_rate_hz)))
        self.world = World(
            list(unit.platforms),
            self.spec,
            sensors=_rig(CONTROL_HZ / self.steps)
            | {
                "rgb": Sensing(
                    _RgbCamera(self.spec, unit.config, lambda: self.world.active),
                    rate_hz=CONTROL_HZ / self.steps,
                )
            },  # fmt: skip
            noise_seeds=[e.spec.trial_seed for e in self.envs],
            control="mellinger",
            compile="numba",
            physics_hz=PHYSICS_HZ,
            control_hz=CONTROL_HZ,
            stochastic=True,
            on_divergence="reset",
            collider=self.settings.collider,
        )
        self.sim = self.world.sim
        self.radius = self.sim.params.radius.double().numpy().copy()
        self.half = (self.sim.params.collider_half.double().numpy().copy()
                     if self.settings.collider == "box" else None)  # fmt: skip
        acc_bound = np.array([GRAVITY * (_indicators(a).twr_max + 1) for a in self.sim.airframes])
        self.start = np.asarray(self.spec.start, dtype=np.float64)
        self.goal = np.asarray(self.spec.goal, dtype=np.float64)
        self.t_nav0 = TAKEOFF_TIME + SETTLE_TIME  # sim time of t = 0
        bound = self.radius if self.half is None else np.linalg.norm(self.half, axis=1)
        self.collisions = ClearanceCollisions(
            self.spec, bound, acc_bound, self.t_nav0, COLLISION_MAX_GAP, half=self.half
        )
        s = self.settings
        every = int(round(CONTROL_HZ / RECORD_HZ))
        self.at_goal = GoalDwell(self.goal, s.goal_radius, s.stable_time, STABLE_SPEED, every)
        self.setpoints = torch.zeros(self.n, self.steps, 14)  # until the next planner tick
        self.v_ref = s.speed_cap * SPEED_REF_SHARE  # what planners may plan, m/s
        self.v_guard = s.speed_cap * SPEED_GUARD_SHARE  # velocity-command saturation, m/s
        self.peak_speed = torch.zeros(self.n, dtype=torch.float64)  # control-rate, in flight
        self.prev_vel = torch.zeros(self.n, 3)
        g: Any = self.sim.controller.gains  # type: ignore[attr-defined]  # mellinger's Lee gains
        self.kx_over_kv = (g.k_x / g.k_v).float()  # (N, 3) 1/s
        self.track: Any = None  # the navigation rollout's Episode (the 40 Hz track)
        self.pos0 = self._spawn()
        self._make_planners()

    # ---- set-up ------------------------------------------------------------------------------
    def _spawn(self) -> np.ndarray:
        """Every env at rest below the start waypoint (their episodes begin); the spawn points."""
        pos0 = np.repeat(self.start[None], self.n, 0)
        pos0[:, 2] = np.maximum(self.start[2] - TAKEOFF_CLIMB, self.radius + 0.1)
        yaw = self.spec.start_yaw
        quat = [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]
        self.world.reset(pos=torch.as_tensor(pos0, dtype=torch.float32), quat=torch.tensor(quat))
        return pos0

    def _make_planners(self) -> None:
        opts = dict(self.unit.algo_options)
        for i, env in enumerate(self.envs):
            env.task = self._task(i)
            self._guard(i, partial(_start_planner, env, self.unit.algo, opts))
        active = self.world.active.tolist()
        self.needs = set().union(
            *(e.planner.needs for e, a in zip(self.envs, active, strict=True) if a)
        )

    def _task(self, i: int) -> NavTask:
        s, spec = self.settings, self.spec
        ind = _indicators(self.sim.airframes[i])
        twr = ind.twr_max
        limits = NavLimits(
            max_speed=self.v_ref,
            max_acc=min(ACC_MARGIN * GRAVITY * math.sqrt(max(twr**2 - 1.0, 0.0)), MAX_ACC_CAP),
            max_vertical_acc=min(ACC_MARGIN * (twr - 1.0) * GRAVITY, MAX_VERTICAL_ACC_CAP),
            twr_max=twr,
            alpha_xy_max=ind.alpha_xy_max,
            alpha_z_max=ind.alpha_z_max,
            radius=float(self.radius[i]),
            half_extents=None if self.half is None else _xyz(self.half[i]),
        )
        bmax = np.array(spec.bounds_max, dtype=np.float64)
        bmax[2] = min(bmax[2], spec.flight_ceiling)
        return NavTask(
            start=self.start.copy(),
            goal=self.goal.copy(),
            goal_radius=s.goal_radius,
            bounds_min=np.array(spec.bounds_min, dtype=np.float64),
            bounds_max=bmax,
            limits=limits,
            time_limit=s.time_limit,
            planner_rate_hz=s.planner_rate_hz,
            depth=_depth_info(s.planner_rate_hz),
            lidar=_lidar_info(s.planner_rate_hz),
            seed=self.envs[i].spec.trial_seed,
            platform=self.envs[i].spec.platform,
            rgb=_rgb_info(s.planner_rate_hz),
        )

    # ---- planner guard -----------------------------------------------------------------------
    def _guard(self, i: int, fn: Callable[[], Any]) -> tuple[bool, Any]:
        """Run ``fn`` within env i's remaining wall-clock budget: (True, its result), or
        (False, None) after a fault, which ends the env with cause "error"."""
        env = self.envs[i]
        limit = self.settings.trial_wall_limit
        over = f"PlannerTimeout: the planner exceeded the trial wall-clock limit of {limit:g} s"
        t0 = time.perf_counter()
        try:
            out = self.watchdog.call(fn, limit - env.planner_time)
        except (PlannerTimeout, Exception) as exc:  # PlannerTimeout is a BaseException
            self._stop(i, "error", over if _from_timeout(exc) else traceback.format_exc())
            return False, None
        finally:
            env.planner_time += time.perf_counter() - t0
        if env.planner_time > limit:
            self._stop(i, "error", over)
            return False, None
        return True, out

    def _stop(self, i: int, cause: str, error: str = "") -> None:
        """End env i now for ``cause`` (the World's status; the time on the simulator clock)."""
        mask = torch.zeros(self.n, dtype=torch.bool)
        mask[i] = True
        self.world.end(mask, cause)
        env = self.envs[i]
        env.error, env.end_time = error, self._nav_time()

    def _nav_time(self) -> float:
        return max(0.0, float(self.sim.state.time[0]) - self.t_nav0)

    # ---- flight ------------------------------------------------------------------------------
    def run(self) -> None:
        from volary.sim import rollout

        self._takeoff()
        for e in self.envs:
            e.hold = self.start.copy()
        rate = self.settings.planner_rate_hz
        n_ticks = int(math.ceil(self.settings.time_limit * rate))
        self.world.end(self.at_goal.check(self.world, 0), GoalDwell.name)
        self.track = rollout(
            self.world,
            self._act,
            (self.collisions, self.at_goal),
            steps=n_ticks * self.steps,
            record=_TRACK,
            record_every=self.at_goal.every,
            record_initial=True,
            begin=False,
        )
        self._time_limit()

    def _takeoff(self) -> None:
        """Minimum-jerk climb from the spawn points to the start waypoint, then hold; every env
        still flying gets a collision query at the last step."""
        from volary.sim import rollout

        n_steps = int(round((TAKEOFF_TIME + SETTLE_TIME) * CONTROL_HZ))
        delta, yaw = self.start - self.pos0, self.spec.start_yaw

        def climb(world: Any, j: int) -> torch.Tensor:
            p, v, a = _min_jerk(min(j / CONTROL_HZ / TAKEOFF_TIME, 1.0), TAKEOFF_TIME)
            sp = np.zeros((self.n, 14))
            sp[:, :3] = self.pos0 + p * delta
            sp[:, 3:6] = v * delta
            sp[:, 6:9] = a * delta
            sp[:, 12] = yaw
            return torch.as_tensor(sp, dtype=torch.float32)

        self.collisions.force_tick = self.world.tick + n_steps
        rollout(
            self.world, climb, (self.collisions,), steps=n_steps, begin=False,
            stop_when_done=False,
        )  # fmt: skip

    def _act(self, world: Any, k: int) -> torch.Tensor:
        """The setpoint of control step k: a planner tick every ``steps`` steps."""
        j = k % self.steps
        if j == 0:
            buf = self._plan_tick(k // self.steps / self.settings.planner_rate_hz)
            self.setpoints = torch.as_tensor(buf, dtype=torch.float32)
        return self._speed_guard(world, self.setpoints[:, j])

    def _speed_guard(self, world: Any, sp: torch.Tensor) -> torch.Tensor:
        """The setpoint with the cap enforced; also keeps each flying vehicle's control-rate
        peak speed and ends the vehicles the guard cannot hold (:meth:`_end_over_speed`).

        Lee's position law (eq. 12) is a velocity loop around a velocity command:
        -k_x e_x - k_v e_v = k_v (v_cmd - v), v_cmd = v_d + (k_x / k_v)(p_d - p). Where |v_cmd|
        exceeds ``v_guard``, or the speed GUARD_LOOKAHEAD s ahead at the last step's
        acceleration a would, the setpoint becomes [p, sat(v_cmd) - GUARD_LOOKAHEAD a, no
        feed-forward]: the same law with v_cmd saturated at ``v_guard`` and damped by the
        measured acceleration, so the attitude loop's lag does not carry the vehicle past it.
        Elsewhere the setpoint is untouched."""
        st = world.sim.state
        speed = st.vel.norm(dim=-1)
        flying = world.active
        self.peak_speed = torch.where(
            flying, torch.maximum(self.peak_speed, speed.double()), self.peak_speed
        )
        dv = st.vel - self.prev_vel
        self.prev_vel = st.vel.clone()
        self._end_over_speed(flying & ((st.vel + dv).norm(dim=-1) > self.settings.speed_cap), speed)
        v_cmd = sp[:, 3:6] + self.kx_over_kv * (sp[:, 0:3] - st.pos)
        n = v_cmd.norm(dim=-1)
        ahead = (st.vel + dv * (GUARD_LOOKAHEAD * CONTROL_HZ)).norm(dim=-1)
        over = world.active & ((n > self.v_guard) | (ahead > self.v_guard))
        if not bool(over.any()):
            return sp
        sp = sp.clone()
        sat = v_cmd * (self.v_guard / n.clamp_min(self.v_guard))[:, None]
        sp[over, 0:3] = st.pos[over]
        sp[over, 3:6] = (sat - dv * (GUARD_LOOKAHEAD * CONTROL_HZ))[over]
        sp[over, 6:12] = 0.0
        sp[over, 13] = 0.0
        return sp

    def _end_over_speed(self, mask: torch.Tensor, speed: torch.Tensor) -> None:
        """End the envs in ``mask`` (cause "over_speed"): at their last control step's
        acceleration the next one would pass the cap, so the guard has lost them (a vehicle out
        of control, not a planner's choice: the guard holds the controllable ones below it)."""
        cap = self.settings.speed_cap
        for i in torch.nonzero(mask).flatten().tolist():
            v = float(speed[i])
            note = f"over_speed: {v:.2f} m/s and rising, about to pass the {cap:g} m/s cap"
            self._stop(i, "over_speed", note)

    def _plan_tick(self, t: float) -> np.ndarray:
        """Call every active env's planner; the (N, steps, 14) setpoints until the next tick."""
        st = self.sim.state
        pos, vel = st.pos.double().numpy(), st.vel.double().numpy()
        quat, omega = st.quat.double().numpy(), st.omega.double().numpy()
        active = self.world.active.tolist()
        depth, lidar, rgb = self._render()
        times = t + np.arange(self.steps) / CONTROL_HZ
        buf = np.zeros((self.n, self.steps, 14))
        for i, env in enumerate(self.envs):
            if active[i]:
                obs = NavObservation(
                    t=t,
                    position=pos[i].copy(),
                    velocity=vel[i].copy(),
                    quat=quat[i].copy(),
                    omega=omega[i].copy(),
                    depth=None if depth is None or "depth" not in env.planner.needs else depth[i],
                    lidar=None if lidar is None or "lidar" not in env.planner.needs else lidar[i],
                    rgb=None if rgb is None or "rgb" not in env.planner.needs else rgb[i],
                )
                self._plan_env(i, obs)
        for i, (env, flying) in enumerate(zip(self.envs, self.world.active.tolist(), strict=True)):
            if not flying and (env.hold is None or env.ref is not None):
                env.hold, env.ref = pos[i].copy(), None
            buf[i] = _setpoints(env.ref, env.hold, times, _yaw(quat[i]))
        return buf

    def _render(self) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
        """(N, H, W) z-depth, (N, K) LiDAR ranges (+inf: no return) and (N, H, W, 3) uint8 RGB
        from the World's rig, for the envs still flying; None for a sensor no planner needs."""
        depth = lidar = rgb = None
        if "depth" in self.needs:
            r = self.world.read("depth")
            d = r.depth.numpy().astype(np.float32)
            depth = np.where(r.valid.numpy(), d, np.float32(np.inf))
        if "lidar" in self.needs:
            r = self.world.read("lidar")
            rng = r.range.reshape(self.n, -1).numpy().astype(np.float32)
            lidar = np.where(r.valid.reshape(self.n, -1).numpy(), rng, np.float32(np.inf))
        if "rgb" in self.needs:
            rgb = self.world.read("rgb").numpy()
        return depth, lidar, rgb

    def _plan_env(self, i: int, obs: NavObservation) -> None:
        env = self.envs[i]
        ok, out = self._guard(i, lambda: _checked(env.planner.plan(obs)))
        if not ok:
            return
        if isinstance(out, NavReference):
            env.ref, env.had_plan = retimed(out, obs.t, self.v_ref), True
        elif env.ref is not None:  # no plan: hold the position where the vehicle is
            env.ref, env.hold = None, obs.position.copy()

    # ---- ends --------------------------------------------------------------------------------
    def close_planners(self) -> None:
        """Call ``close()`` on every planner that has one, once, when the unit's flight is over
        (a ROS 1 planner's relay then stops its nodes and writes the trial's timing line). A
        failing ``close`` is reported as a warning; the trial's row stays as flown."""
        for env in self.envs:
            close = getattr(env.planner, "close", None)
            env.planner = None
            if callable(close):
                try:
                    close()
                except Exception as e:  # noqa: BLE001 (a planner's own fault, after its flight)
                    warnings.warn(f"{self.unit.algo}: close() raised {e!r}", stacklevel=2)

    def _time_limit(self) -> None:
        pos = self.track.records["pos"].numpy()  # (K, N, 3)
        for i in np.flatnonzero(self.world.active.numpy()).tolist():
            ever_inside = np.linalg.norm(pos[:, i] - self.goal, axis=1) <= self.settings.goal_radius
            if not self.envs[i].had_plan:
                self._stop(i, "no_plan")
            elif not ever_inside.any():
                self._stop(i, "timeout")
            else:
                self._stop(i, "outside_goal")

    # ---- results -----------------------------------------------------------------------------
    def results(self, wall: float) -> list[TrialResult]:
        t_all = np.asarray(self.track.record_steps) / CONTROL_HZ
        pos_all = np.ascontiguousarray(self.track.records["pos"].numpy().transpose(1, 0, 2))
        vel_all = np.ascontiguousarray(self.track.records["vel"].numpy().transpose(1, 0, 2))
        planner_total = sum(e.planner_time for e in self.envs)
        shared = max(wall - planner_total, 0.0) / self.n
        every = max(1, int(round(RECORD_HZ / TRACK_HZ)))
        causes = self.world.causes()
        return [
            self._row(i, causes[i], t_all, pos_all[i], vel_all[i], shared, every)
            for i in range(self.n)
        ]

    def _end_time(self, i: int, cause: str) -> float:
        if cause == ClearanceCollisions.name:
            return float(self.collisions.ended_at[i])
        if cause == GoalDwell.name and self.at_goal.ended_at is not None:
            return float(self.at_goal.ended_at[i])
        return self.envs[i].end_time

    def _row(
        self,
        i: int,
        cause: str,
        t_all: np.ndarray,
        pos: np.ndarray,
        vel: np.ndarray,
        shared: float,
        every: int,
    ) -> TrialResult:
        env = self.envs[i]
        end_time = self._end_time(i, cause)
        end = end_time if math.isfinite(end_time) else 0.0
        keep = t_all <= end + 1e-9
        t, p, v = t_all[keep], pos[keep], vel[keep]
        s = env.spec
        m = trial_metrics(
            t,
            p,
            v,
            start=self.start,
            goal=self.goal,
            collisions=int(cause == "collision"),
            proximity_radius=self.settings.proximity_radius,
        )
        m["flight_time"] = end
        m["mean_speed"] = m["path_length"] / end if end > 0 else 0.0
        m["max_speed"] = float(self.peak_speed[i])  # at the control rate, not the 40 Hz track
        assert cause in CAUSES, cause
        return TrialResult(
            algo=s.algo,
            platform=s.platform,
            scenario=s.scenario,
            config=s.config,
            trial=s.trial,
            seed=s.seed,
            success=cause == "success",
            cause=cause,
            time_to_goal=first_entry_time(t, p, self.goal, self.settings.goal_radius),
            sim_time=self.t_nav0 + end,
            wall_time=shared + env.planner_time,
            error=env.error or self.collisions.notes[i],
            track=track_json(t, p, every),
            **m,
        )


_TRACK = {
    "pos": lambda w: w.state.pos.double(),
    "vel": lambda w: w.state.vel.double(),
}  # (N, 3) float64 samples of the 40 Hz track


# ---- sensors ------------------------------------------------------------------------------------
def _rig(rate_hz: float) -> dict[str, Any]:
    """The World's sensor rig: the forward depth camera and the LiDAR, read at ``rate_hz``."""
    from volary.sensors.camera import CameraConfig
    from volary.sim import Sensing

    w, h = DEPTH_SIZE
    cam = CameraConfig(
        width=w, height=h, hfov=DEPTH_HFOV, max_range=DEPTH_RANGE, invalid_value=math.nan,
        segmentation=False, normals=False,
    )  # fmt: skip
    lidar = replace(_lidar_config(), invalid_value=math.nan)
    return {"depth": Sensing(cam, rate_hz=rate_hz), "lidar": Sensing(lidar, rate_hz=rate_hz)}


class _RgbCamera:
    """The forward RGB camera over the scene's synthesized splats, built on its first reading
    (the splats only exist for planners that need them); renders the envs ``active()`` says
    are flying, the others read black. (N, H, W, 3) uint8."""

    def __init__(self, spec: SceneSpec, seed: int, active: Callable[[], torch.Tensor]) -> None:
        self.spec, self.seed, self.active = spec, int(seed), active
        self.camera: Any = None

    def __call__(self, pos: torch.Tensor, quat: torch.Tensor) -> torch.Tensor:
        from volary.sensors.splat import SplatCamera, synthesize, to_uint8

        if self.camera is None:
            w, h = DEPTH_SIZE
            self.camera = SplatCamera(synthesize(self.spec, self.seed), w, h, DEPTH_HFOV,
                                      background=RGB_SKY)  # fmt: skip
        w, h = DEPTH_SIZE
        out = torch.zeros(pos.shape[0], h, w, 3, dtype=torch.uint8)
        idx = torch.nonzero(self.active().cpu()).flatten()
        if idx.numel():
            out[idx] = to_uint8(self.camera(pos[idx], quat[idx]).rgb)
        return out


def _rgb_info(rate: float) -> RgbCameraInfo:
    d = _depth_info(rate)
    return RgbCameraInfo(
        width=d.width, height=d.height, fx=d.fx, fy=d.fy, cx=d.cx, cy=d.cy, rate_hz=rate,
        t_body_cam=d.t_body_cam, q_body_cam=d.q_body_cam,
    )  # fmt: skip


def _depth_info(rate: float) -> DepthCameraInfo:
    from volary.sensors.rays import FORWARD_CAMERA, pinhole_intrinsics

    w, h = DEPTH_SIZE
    fx, fy, cx, cy = pinhole_intrinsics(w, h, DEPTH_HFOV, None).tolist()
    return DepthCameraInfo(
        width=w, height=h, fx=fx, fy=fy, cx=cx, cy=cy, max_range=DEPTH_RANGE, rate_hz=rate,
        t_body_cam=np.array(FORWARD_CAMERA.translation, dtype=np.float64),
        q_body_cam=np.array(FORWARD_CAMERA.rotation, dtype=np.float64),
    )  # fmt: skip


def _lidar_info(rate: float) -> LidarInfo:
    from volary.sensors.rays import spherical_rays

    cfg = _lidar_config()
    dirs = spherical_rays(cfg.elevations(), cfg.azimuths()).reshape(-1, 3)
    return LidarInfo(
        directions=dirs.double().numpy(), max_range=LIDAR_RANGE, rate_hz=rate,
        t_body_lidar=np.zeros(3),
    )  # fmt: skip


def _lidar_config() -> Any:
    from volary.sensors.lidar import LidarConfig

    return LidarConfig(
        channels=LIDAR_CHANNELS,
        columns=LIDAR_COLUMNS,
        vfov_min=-LIDAR_VFOV / 2,
        vfov_max=LIDAR_VFOV / 2,
        min_range=0.0,
        max_range=LIDAR_RANGE,
    )


# ---------------------------------------------------------------------------------------------
def _indicators(airframe: Any) -> Any:
    from volary.platforms import indicators

    return indicators(airframe)


def _start_planner(env: _Env, algo: str, options: dict[str, Any]) -> None:
    """The env's planner, reset for its task: ``remote:ADDRESS`` (or the option ``remote`` of
    a named algorithm) is a :class:`~volary.serve.planners.RemotePlanner` of the host at that
    address, given the other options; ``ros1:NAME`` a
    :class:`~volary.studies.flyingtrust.ros1.Ros1Planner` flying the ROS 1 planner of launch
    description NAME; anything else comes from the planner registry."""
    opts = dict(options)
    address = opts.pop("remote", None)
    if address is None and algo.startswith(REMOTE):
        address = algo.removeprefix(REMOTE)
    if address is not None:
        from volary.serve.planners import RemotePlanner

        timeout = opts.pop("remote_timeout", REMOTE_TIMEOUT)
        env.planner = RemotePlanner(address, timeout=timeout, **opts)
    elif algo.startswith(ROS1):
        from volary.studies.flyingtrust.ros1 import Ros1Planner

        env.planner = Ros1Planner(algo.removeprefix(ROS1), **opts)
    else:
        from volary.studies.flyingtrust.planners import get_planner

        env.planner = get_planner(algo, **opts)
    env.planner.reset(env.task)


REMOTE = "remote:"  # algo prefix of a planner served by another process (volary.serve.planners)
REMOTE_TIMEOUT = 10.0  # s a remote planner may take per call before the trial fails
ROS1 = (
    "ros1:"  # algo prefix of a ROS 1 planner's launch description (volary.studies.flyingtrust.ros1)
)


def _xyz(v: Any) -> tuple[float, float, float]:
    """Three floats from a length-3 array (a box collider's half extents)."""
    return float(v[0]), float(v[1]), float(v[2])


def _yaw(quat: np.ndarray) -> float:
    w, x, y, z = quat
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def _min_jerk(s: float, duration: float) -> tuple[float, float, float]:
    """Minimum-jerk blend 10 s^3 - 15 s^4 + 6 s^5 and its first two time derivatives."""
    p = 10 * s**3 - 15 * s**4 + 6 * s**5
    v = (30 * s**2 - 60 * s**3 + 30 * s**4) / duration
    a = (60 * s - 180 * s**2 + 120 * s**3) / duration**2
    return p, v, a


def _setpoints(
    ref: NavReference | None, hold: np.ndarray | None, times: np.ndarray, yaw: float
) -> np.ndarray:
    """(S, 14) mellinger setpoints [p, v, a, jerk = 0, yaw, yaw_rate = 0] at ``times``."""
    out = np.zeros((len(times), 14))
    if ref is None:
        out[:, :3] = hold
        out[:, 12] = yaw
        return out
    p, v, a, y = ref.sample(times)
    out[:, :3], out[:, 3:6], out[:, 6:9], out[:, 12] = p, v, a, y
    return out


def retimed(ref: NavReference, t_now: float, v_max: float) -> NavReference:
    """``ref`` slowed uniformly from ``t_now`` so that no knot is faster than ``v_max``: the same
    path, knot times t_now + (t - t_now) s, velocities / s, accelerations / s^2, with
    s = (fastest knot speed) / v_max; ``ref`` itself when it is within the cap."""
    fastest = float(np.linalg.norm(np.asarray(ref.velocities), axis=1).max())
    if fastest <= v_max:
        return ref
    s = fastest / v_max
    times = t_now + (np.asarray(ref.times, dtype=np.float64) - t_now) * s
    return NavReference(
        t0=float(times[0]),
        times=times,
        positions=np.asarray(ref.positions, dtype=np.float64),
        velocities=np.asarray(ref.velocities, dtype=np.float64) / s,
        accelerations=np.asarray(ref.accelerations, dtype=np.float64) / (s * s),
        yaws=np.asarray(ref.yaws, dtype=np.float64),
    )


def _checked(ref: Any) -> NavReference | None:
    """The planner's output if it is None or a well-formed, finite NavReference; else raise."""
    if ref is None:
        return None
    if not isinstance(ref, NavReference):
        raise TypeError(f"plan() returned {type(ref).__name__}, expected NavReference or None")
    times = np.asarray(ref.times)
    k = times.shape[0] if times.ndim == 1 else -1
    shapes = {
        "times": (times.shape, (k,)),
        "positions": (np.shape(ref.positions), (k, 3)),
        "velocities": (np.shape(ref.velocities), (k, 3)),
        "accelerations": (np.shape(ref.accelerations), (k, 3)),
        "yaws": (np.shape(ref.yaws), (k,)),
    }
    for name, (got, want) in shapes.items():
        if k < 1 or got != want:
            raise ValueError(f"NavReference.{name}: expected shape {want}, got {got}")
        if not np.isfinite(np.asarray(getattr(ref, name), dtype=np.float64)).all():
            raise ValueError(f"NavReference.{name}: non-finite values")
    if k > 1 and not (np.diff(times) > 0).all():
        raise ValueError("NavReference.times: expected strictly increasing times")
    return ref


class _Watchdog:
    """Interrupts planner calls that overrun their budget with :class:`PlannerTimeout`.

    In the main thread (where signals are delivered) it installs a SIGALRM handler for the
    duration of the unit and arms ``ITIMER_REAL`` around each call; an outer ITIMER_REAL is
    suspended meanwhile and re-armed afterwards minus the elapsed time. Elsewhere (worker
    threads) calls run unguarded and the budget is checked after they return.
    """

    def __init__(self) -> None:
        self.armed = threading.current_thread() is threading.main_thread() and hasattr(
            signal, "setitimer"
        )
        self._old: Any = None

    def __enter__(self) -> _Watchdog:
        if self.armed:
            self._t0 = time.monotonic()
            self._old_handler = signal.signal(signal.SIGALRM, _alarm)
            self._old = signal.setitimer(signal.ITIMER_REAL, 0)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._old_handler)
            delay, interval = self._old
            if delay > 0:
                left = max(delay - (time.monotonic() - self._t0), 1e-3)
                signal.setitimer(signal.ITIMER_REAL, left, interval)

    def call(self, fn: Callable[[], Any], budget: float) -> Any:
        """``fn()``, interrupted after ``budget`` s when armed."""
        if budget <= 0:
            raise PlannerTimeout()
        if not self.armed:
            return fn()
        signal.setitimer(signal.ITIMER_REAL, budget)
        try:
            return fn()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)


def _alarm(signum: int, frame: Any) -> None:
    raise PlannerTimeout()


def _from_timeout(exc: BaseException) -> bool:
    """Whether ``exc`` is a :class:`PlannerTimeout` or was raised from one. When the alarm
    strikes while compiled code (a numba kernel) has called back into Python, the kernel returns
    with the timeout pending and CPython raises ``SystemError`` from it: the timeout is its
    cause."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, PlannerTimeout):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False


__all__ = ["CONTROL_HZ", "PHYSICS_HZ", "PlannerTimeout", "run_unit", "scene_spec"]
