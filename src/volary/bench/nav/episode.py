"""One work unit flown in one Simulator batch: :func:`run_unit` -> one TrialResult per platform.

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
10 m) and/or a 16 x 180 LiDAR (30 deg vertical FOV, 20 m), ray-cast with Embree, rendered for
the envs still flying only. The reference a call returns is tracked until the next call; no
reference (``None``) holds the position. Planner latency is not simulated.

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
  reference, or used more than ``settings.trial_wall_limit`` s of wall clock in total. The
  limit is enforced with ``signal.setitimer(ITIMER_REAL)``/SIGALRM around each planner call when
  running in the main thread (a SIGALRM handler is installed for the unit; an outer
  ITIMER_REAL is suspended meanwhile and re-armed afterwards minus the elapsed time); in other
  threads the time is only checked after the call returns (a hang cannot be interrupted).

An env that has ended hovers at its last position; its planner and sensors are not called again.
"""

from __future__ import annotations

import math
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from typing import Any

import numpy as np
import torch

from volary.bench.nav.metrics import first_entry_time, track_json, trial_metrics
from volary.bench.nav.schema import CAUSES, TrialResult, TrialSpec, WorkUnit
from volary.bench.threads import one_thread
from volary.errors import ConfigError
from volary.planning.navigation import (
    DepthCameraInfo,
    LidarInfo,
    NavLimits,
    NavObservation,
    NavReference,
    NavTask,
)
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
DEPTH_SIZE = (64, 48)  # px
DEPTH_HFOV = math.radians(90.0)
DEPTH_RANGE = 10.0  # m
LIDAR_CHANNELS, LIDAR_COLUMNS, LIDAR_VFOV, LIDAR_RANGE = 16, 180, math.radians(30.0), 20.0


class PlannerTimeout(BaseException):
    """The planner used up its trial's wall-clock budget (BaseException: a planner's own
    ``except Exception`` does not swallow it)."""


@dataclass
class _Env:
    """Bookkeeping of one env (one trial)."""

    spec: TrialSpec
    planner: Any = None
    task: NavTask | None = None
    active: bool = True
    cause: str = ""
    end_time: float = math.nan  # s since the start waypoint
    error: str = ""
    note: str = ""
    had_plan: bool = False
    ref: NavReference | None = None
    hold: np.ndarray | None = None  # position held while there is no reference
    planner_time: float = 0.0  # s of wall clock used by the planner
    inside_since: float = math.nan
    next_check: float = -math.inf  # sim time of the next collision query


@dataclass
class _Record:
    t: list[float] = field(default_factory=list)
    pos: list[np.ndarray] = field(default_factory=list)
    vel: list[np.ndarray] = field(default_factory=list)


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
        ep.run()
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
    def __init__(self, unit: WorkUnit, watchdog: _Watchdog) -> None:
        from volary.sim import Simulator
        from volary.worlds import CollisionMonitor, Scene

        self.unit, self.settings, self.watchdog = unit, unit.settings, watchdog
        self.spec = scene_spec(unit.scenario, unit.config)
        self.envs = [_Env(s) for s in unit.trials()]
        self.n = len(self.envs)
        self.sim = Simulator(
            list(unit.platforms),
            control="mellinger",
            compile="numba",
            physics_hz=PHYSICS_HZ,
            control_hz=CONTROL_HZ,
            stochastic=True,
            on_divergence="reset",
        )
        self._seed_noise()
        self.radius = self.sim.params.radius.double().numpy().copy()
        self.acc_bound = np.array(
            [GRAVITY * (_indicators(a).twr_max + 1) for a in self.sim.airframes]
        )
        self.scene = Scene.stack([self.spec] * self.n)
        self.monitor = CollisionMonitor(self.scene, self.sim.params.radius)
        self.start = np.asarray(self.spec.start, dtype=np.float64)
        self.goal = np.asarray(self.spec.goal, dtype=np.float64)
        self.rec = _Record()
        self.t_nav0 = TAKEOFF_TIME + SETTLE_TIME  # sim time of t = 0
        self.sensors = _Sensors(self.spec, self.n)
        self._make_planners()

    # ---- set-up ------------------------------------------------------------------------------
    def _seed_noise(self) -> None:
        """Env i's process noise from its trial seed alone (not its index in the batch)."""
        from volary.math import random as vrandom

        zero = torch.zeros(1, dtype=torch.int64)
        self.sim.keys = torch.cat([vrandom.env_keys(e.spec.trial_seed, zero) for e in self.envs])

    def _make_planners(self) -> None:
        opts = dict(self.unit.algo_options)
        for i, env in enumerate(self.envs):
            env.task = self._task(i)
            self._guard(env, partial(_start_planner, env, self.unit.algo, opts))
        self.needs = set().union(*(e.planner.needs for e in self.envs if e.active))

    def _task(self, i: int) -> NavTask:
        s, spec = self.settings, self.spec
        ind = _indicators(self.sim.airframes[i])
        twr = ind.twr_max
        limits = NavLimits(
            max_speed=s.speed_cap,
            max_acc=min(ACC_MARGIN * GRAVITY * math.sqrt(max(twr**2 - 1.0, 0.0)), MAX_ACC_CAP),
            max_vertical_acc=min(ACC_MARGIN * (twr - 1.0) * GRAVITY, MAX_VERTICAL_ACC_CAP),
            twr_max=twr,
            alpha_xy_max=ind.alpha_xy_max,
            alpha_z_max=ind.alpha_z_max,
            radius=float(self.radius[i]),
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
            depth=self.sensors.depth_info(s.planner_rate_hz),
            lidar=self.sensors.lidar_info(s.planner_rate_hz),
            seed=self.envs[i].spec.trial_seed,
            platform=self.envs[i].spec.platform,
        )

    # ---- planner guard -----------------------------------------------------------------------
    def _guard(self, env: _Env, fn: Callable[[], Any]) -> tuple[bool, Any]:
        """Run ``fn`` within the env's remaining wall-clock budget: (True, its result), or
        (False, None) after a fault, which ends the env with cause "error"."""
        if not env.active:
            return False, None
        limit = self.settings.trial_wall_limit
        over = f"PlannerTimeout: the planner exceeded the trial wall-clock limit of {limit:g} s"
        t0 = time.perf_counter()
        try:
            out = self.watchdog.call(fn, limit - env.planner_time)
        except PlannerTimeout:
            self._fail(env, over)
            return False, None
        except Exception:
            self._fail(env, traceback.format_exc())
            return False, None
        finally:
            env.planner_time += time.perf_counter() - t0
        if env.planner_time > limit:
            self._fail(env, over)
            return False, None
        return True, out

    def _fail(self, env: _Env, text: str) -> None:
        env.active, env.cause, env.error = False, "error", text
        env.end_time = self._nav_time()

    def _nav_time(self) -> float:
        return max(0.0, float(self.sim.state.time[0]) - self.t_nav0)

    # ---- flight ------------------------------------------------------------------------------
    def run(self) -> None:
        self._takeoff()
        self.hold = self.sim.state.pos.double().numpy().copy()
        for e in self.envs:
            e.hold = self.start.copy()
        rate = self.settings.planner_rate_hz
        steps = max(1, int(round(CONTROL_HZ / rate)))
        n_ticks = int(math.ceil(self.settings.time_limit * rate))
        self._record(0)
        for k in range(n_ticks):
            if not any(e.active for e in self.envs):
                break
            buf = self._plan_tick(k / rate, steps)
            self._fly(buf, k * steps, steps)
        self._time_limit()

    def _takeoff(self) -> None:
        spawn = self.start.copy()
        pos0 = np.repeat(spawn[None], self.n, 0)
        pos0[:, 2] = np.maximum(spawn[2] - TAKEOFF_CLIMB, self.radius + 0.1)
        yaw = self.spec.start_yaw
        quat = [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]
        self.sim.reset(pos=torch.as_tensor(pos0, dtype=torch.float32), quat=torch.tensor(quat))
        n_steps = int(round((TAKEOFF_TIME + SETTLE_TIME) * CONTROL_HZ))
        for j in range(n_steps):
            s = min(j / CONTROL_HZ / TAKEOFF_TIME, 1.0)
            p, v, a = _min_jerk(s, TAKEOFF_TIME)
            sp = np.zeros((self.n, 14))
            sp[:, :3] = pos0 + p * (self.start - pos0)
            sp[:, 3:6] = v * (self.start - pos0)
            sp[:, 6:9] = a * (self.start - pos0)
            sp[:, 12] = yaw
            self.sim.step(torch.as_tensor(sp, dtype=torch.float32))
            self._check_collisions(force=j == n_steps - 1)

    def _plan_tick(self, t: float, steps: int) -> np.ndarray:
        """Call every active env's planner; the (N, steps, 14) setpoints until the next tick."""
        st = self.sim.state
        pos, vel = st.pos.double().numpy(), st.vel.double().numpy()
        quat, omega = st.quat.double().numpy(), st.omega.double().numpy()
        active = np.array([e.active for e in self.envs])
        depth, lidar = self.sensors.render(st, active, self.needs)
        times = t + np.arange(steps) / CONTROL_HZ
        buf = np.zeros((self.n, steps, 14))
        for i, env in enumerate(self.envs):
            if env.active:
                obs = NavObservation(
                    t=t,
                    position=pos[i].copy(),
                    velocity=vel[i].copy(),
                    quat=quat[i].copy(),
                    omega=omega[i].copy(),
                    depth=None if depth is None or "depth" not in env.planner.needs else depth[i],
                    lidar=None if lidar is None or "lidar" not in env.planner.needs else lidar[i],
                )
                self._plan_env(env, obs)
            if not env.active:
                if env.hold is None or env.ref is not None:
                    env.hold, env.ref = pos[i].copy(), None
            buf[i] = _setpoints(env.ref, env.hold, times, self._yaw(env, quat[i]))
        return buf

    def _plan_env(self, env: _Env, obs: NavObservation) -> None:
        ok, out = self._guard(env, lambda: _checked(env.planner.plan(obs)))
        if not ok:
            return
        if isinstance(out, NavReference):
            env.ref, env.had_plan = out, True
        elif env.ref is not None:  # no plan: hold the position where the vehicle is
            env.ref, env.hold = None, obs.position.copy()

    def _yaw(self, env: _Env, quat: np.ndarray) -> float:
        w, x, y, z = quat
        return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))

    def _fly(self, buf: np.ndarray, k0: int, steps: int) -> None:
        sp = torch.as_tensor(buf, dtype=torch.float32)
        every = int(round(CONTROL_HZ / RECORD_HZ))
        for j in range(steps):
            self.sim.step(sp[:, j])
            self._check_collisions()
            if (k0 + j + 1) % every == 0:
                self._record(k0 + j + 1)
            if not any(e.active for e in self.envs):
                return

    # ---- ends --------------------------------------------------------------------------------
    def _check_collisions(self, force: bool = False) -> None:
        st = self.sim.state
        t = float(st.time[0])
        crash = (st.crashed | self.sim.last_reset).numpy()
        due = [
            e.active and (force or t >= e.next_check or crash[i]) for i, e in enumerate(self.envs)
        ]
        if not any(due):
            return
        from volary.worlds.collision import collision_events

        ev = collision_events(self.scene, st.pos, self.monitor.radius)
        pos = st.pos.double().numpy()
        speed = np.linalg.norm(st.vel.double().numpy(), axis=1)
        margin = self._margin(ev.clearance.double().numpy(), pos)
        hit = (ev.collided | ev.out_of_bounds | ev.above_ceiling).numpy() | (margin < 0) | crash
        for i, env in enumerate(self.envs):
            if not due[i]:
                continue
            if hit[i]:
                env.note = _collision_note(ev, i, crash[i], bool(self.sim.last_reset[i]))
                self._end(env, "collision", self._nav_time())
                continue
            gap = margin[i] / (speed[i] + self.acc_bound[i] * COLLISION_MAX_GAP / 2)
            env.next_check = t + min(COLLISION_MAX_GAP, max(gap, 0.0))

    def _margin(self, clearance: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """Distance (m) each sphere may move before any event: obstacles, floor, ceiling, bounds."""
        lo, hi = np.array(self.spec.bounds_min), np.array(self.spec.bounds_max)
        floor = pos[:, 2] - self.radius - lo[2]
        ceil = self.spec.flight_ceiling - pos[:, 2] - self.radius
        box = np.minimum(pos - lo, hi - pos).min(axis=1)
        return np.minimum.reduce([clearance, floor, ceil, box])

    def _end(self, env: _Env, cause: str, t: float) -> None:
        env.active, env.cause, env.end_time = False, cause, t

    def _record(self, k: int) -> None:
        st = self.sim.state
        t = k / CONTROL_HZ
        pos, vel = st.pos.double().numpy().copy(), st.vel.double().numpy().copy()
        self.rec.t.append(t)
        self.rec.pos.append(pos)
        self.rec.vel.append(vel)
        dist = np.linalg.norm(pos - self.goal, axis=1)
        speed = np.linalg.norm(vel, axis=1)
        r, stable = self.settings.goal_radius, self.settings.stable_time
        for i, env in enumerate(self.envs):
            if not env.active:
                continue
            if dist[i] > r:
                env.inside_since = math.nan
                continue
            if math.isnan(env.inside_since):
                env.inside_since = t
            if t - env.inside_since >= stable - 1e-9 and speed[i] < STABLE_SPEED:
                self._end(env, "success", t)

    def _time_limit(self) -> None:
        t = self._nav_time()
        for env in self.envs:
            if not env.active:
                continue
            if not env.had_plan:
                self._end(env, "no_plan", t)
            elif not self._ever_inside(env):
                self._end(env, "timeout", t)
            else:
                self._end(env, "outside_goal", t)

    def _ever_inside(self, env: _Env) -> bool:
        i = self.envs.index(env)
        pos = np.stack([p[i] for p in self.rec.pos])
        return bool((np.linalg.norm(pos - self.goal, axis=1) <= self.settings.goal_radius).any())

    # ---- results -----------------------------------------------------------------------------
    def results(self, wall: float) -> list[TrialResult]:
        t_all = np.asarray(self.rec.t)
        pos_all, vel_all = np.stack(self.rec.pos, 1), np.stack(self.rec.vel, 1)  # (N, K, 3)
        planner_total = sum(e.planner_time for e in self.envs)
        shared = max(wall - planner_total, 0.0) / self.n
        every = max(1, int(round(RECORD_HZ / TRACK_HZ)))
        return [
            self._row(env, i, t_all, pos_all[i], vel_all[i], shared, every)
            for i, env in enumerate(self.envs)
        ]

    def _row(
        self,
        env: _Env,
        i: int,
        t_all: np.ndarray,
        pos: np.ndarray,
        vel: np.ndarray,
        shared: float,
        every: int,
    ) -> TrialResult:
        end = env.end_time if math.isfinite(env.end_time) else 0.0
        keep = t_all <= end + 1e-9
        t, p, v = t_all[keep], pos[keep], vel[keep]
        s = env.spec
        m = trial_metrics(
            t,
            p,
            v,
            start=self.start,
            goal=self.goal,
            collisions=int(env.cause == "collision"),
            proximity_radius=self.settings.proximity_radius,
        )
        m["flight_time"] = end
        m["mean_speed"] = m["path_length"] / end if end > 0 else 0.0
        assert env.cause in CAUSES, env.cause
        return TrialResult(
            algo=s.algo,
            platform=s.platform,
            scenario=s.scenario,
            config=s.config,
            trial=s.trial,
            seed=s.seed,
            success=env.cause == "success",
            cause=env.cause,
            time_to_goal=first_entry_time(t, p, self.goal, self.settings.goal_radius),
            sim_time=self.t_nav0 + end,
            wall_time=shared + env.planner_time,
            error=env.error or env.note,
            track=track_json(t, p, every),
            **m,
        )


# ---------------------------------------------------------------------------------------------
class _Sensors:
    """Depth camera / LiDAR for the envs still flying (one Embree scene shared by all envs)."""

    def __init__(self, spec: SceneSpec, n: int) -> None:
        self.spec, self.n = spec, n
        self._cam: Any = None
        self._lidar: Any = None
        self._caster: Any = None

    def depth_info(self, rate: float) -> DepthCameraInfo:
        from volary.sensors.rays import FORWARD_CAMERA, pinhole_intrinsics

        w, h = DEPTH_SIZE
        fx, fy, cx, cy = pinhole_intrinsics(w, h, DEPTH_HFOV, None).tolist()
        return DepthCameraInfo(
            width=w, height=h, fx=fx, fy=fy, cx=cx, cy=cy, max_range=DEPTH_RANGE, rate_hz=rate,
            t_body_cam=np.array(FORWARD_CAMERA.translation, dtype=np.float64),
            q_body_cam=np.array(FORWARD_CAMERA.rotation, dtype=np.float64),
        )  # fmt: skip

    def lidar_info(self, rate: float) -> LidarInfo:
        from volary.sensors.rays import spherical_rays

        cfg = self._lidar_config()
        dirs = spherical_rays(cfg.elevations(), cfg.azimuths()).reshape(-1, 3)
        return LidarInfo(
            directions=dirs.double().numpy(), max_range=LIDAR_RANGE, rate_hz=rate,
            t_body_lidar=np.zeros(3),
        )  # fmt: skip

    def _lidar_config(self) -> Any:
        from volary.sensors.lidar import LidarConfig

        return LidarConfig(
            channels=LIDAR_CHANNELS,
            columns=LIDAR_COLUMNS,
            vfov_min=-LIDAR_VFOV / 2,
            vfov_max=LIDAR_VFOV / 2,
            min_range=0.0,
            max_range=LIDAR_RANGE,
        )

    def _shared(self) -> Any:
        if self._caster is None:
            from volary.sensors.raycast.registry import make_raycaster

            self._caster = _SharedSceneCaster(make_raycaster([self.spec], 1), self.n)
        return self._caster

    def render(
        self, state: Any, active: np.ndarray, needs: set[str]
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(N, H, W) z-depth and (N, K) LiDAR ranges (+inf: no return) for the active envs."""
        if not needs or not active.any():
            return None, None
        caster = self._shared()
        caster.active = torch.as_tensor(active)
        depth = lidar = None
        if "depth" in needs:
            depth = self._depth(caster, state)
        if "lidar" in needs:
            lidar = self._scan(caster, state)
        return depth, lidar

    def _depth(self, caster: Any, state: Any) -> np.ndarray:
        if self._cam is None:
            from volary.sensors.camera import CameraConfig, DepthCamera

            w, h = DEPTH_SIZE
            cfg = CameraConfig(
                width=w, height=h, hfov=DEPTH_HFOV, max_range=DEPTH_RANGE,
                invalid_value=math.nan, segmentation=False, normals=False,
            )  # fmt: skip
            self._cam = DepthCamera(cfg, caster)
        r = self._cam(state.pos, state.quat)
        d = r.depth.numpy().astype(np.float32)
        return np.where(r.valid.numpy(), d, np.float32(np.inf))

    def _scan(self, caster: Any, state: Any) -> np.ndarray:
        if self._lidar is None:
            from volary.sensors.lidar import Lidar

            self._lidar = Lidar(replace(self._lidar_config(), invalid_value=math.nan), caster)
        r = self._lidar(state.pos, state.quat)
        rng = r.range.reshape(self.n, -1).numpy().astype(np.float32)
        return np.where(r.valid.reshape(self.n, -1).numpy(), rng, np.float32(np.inf))


class _SharedSceneCaster:
    """A RayCaster for N envs that share one scene: casts the active envs' rays in one call of
    a one-env caster; inactive envs read as misses."""

    name = "shared"

    def __init__(self, inner: Any, n: int) -> None:
        self.inner, self.n_envs = inner, n
        self.device, self.dtype = inner.device, inner.dtype
        self.active = torch.ones(n, dtype=torch.bool)

    def cast(self, origins: torch.Tensor, directions: torch.Tensor, max_range: float) -> Any:
        from volary.sensors.raycast.base import RayHits, miss_hits

        n, r = origins.shape[:2]
        idx = torch.nonzero(self.active)[:, 0]
        out = miss_hits((n, r), self.device, self.dtype)
        if len(idx) == 0:
            return out
        o = origins[idx].reshape(1, -1, 3)
        d = directions[idx].reshape(1, -1, 3)
        hits = self.inner.cast(o, d, max_range)
        dist, oid, nrm = out.distance.clone(), out.object_id.clone(), out.normal.clone()
        dist[idx] = hits.distance.reshape(len(idx), r)
        oid[idx] = hits.object_id.reshape(len(idx), r)
        nrm[idx] = hits.normal.reshape(len(idx), r, 3)
        return RayHits(dist, oid, nrm)


# ---------------------------------------------------------------------------------------------
def _indicators(airframe: Any) -> Any:
    from volary.platforms import indicators

    return indicators(airframe)


def _start_planner(env: _Env, algo: str, options: dict[str, Any]) -> None:
    from volary.planning.planners import get_planner

    env.planner = get_planner(algo, **options)
    env.planner.reset(env.task)


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


def _collision_note(ev: Any, i: int, crash: bool, diverged: bool) -> str:
    if diverged:
        return "collision: the simulation diverged (state reset)"
    if crash:
        return "collision: ground crash"
    if bool(ev.collided[i]):
        return f"collision: obstacle {int(ev.object_id[i])}"
    if bool(ev.above_ceiling[i]):
        return "collision: ceiling"
    if bool(ev.out_of_bounds[i]):
        return "collision: left the flight volume"
    return "collision: floor or volume boundary"


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


__all__ = ["CONTROL_HZ", "PHYSICS_HZ", "PlannerTimeout", "run_unit", "scene_spec"]
