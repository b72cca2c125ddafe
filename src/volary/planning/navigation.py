"""The navigation-planner interface of the FLYINGTRUST benchmark (volary.studies.flyingtrust).

A navigation planner is what a real vehicle would run: it receives its task once per trial
(start, goal, the platform's limits, the sensors it gets) and then, at its own rate, an
observation with what the vehicle measures (odometry, a depth image, an RGB image and/or a LiDAR
scan), and
returns a reference the position controller tracks until the next call. Everything is numpy,
float64, SI units, world frame z-up, quaternions [w, x, y, z] body-to-world; one planner instance
serves one trial (the runner batches trials across envs and calls each env's planner in turn).

Plug in your own with ``module:Class`` (a class taking keyword options) or the entry point group
``volary.planners``; see ``volary.studies.flyingtrust.planners``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from volary.errors import ConfigError

SENSORS = frozenset({"depth", "lidar", "rgb"})  # what a planner's ``needs`` may name


@dataclass(frozen=True)
class NavLimits:
    """What the planner may ask of the platform (FLYINGTRUST Sec. IV: 4 m/s speed cap)."""

    # m/s, the fastest reference the runner passes on: 95 % of the protocol's cap (the rest is
    # the controller's overshoot margin); faster references are slowed down (retimed)
    max_speed: float
    max_acc: float  # m/s^2, horizontal acceleration the platform can sustain at hover
    max_vertical_acc: float  # m/s^2, upward (TWR_max - 1) g, capped
    twr_max: float
    alpha_xy_max: float  # rad/s^2
    alpha_z_max: float  # rad/s^2
    radius: float  # m, the vehicle's collision radius
    # m, half extents (body x, y, z) of the box that collides instead of the sphere when the
    # protocol flies the fitted collider (settings.collider = "box"); None: the sphere
    half_extents: tuple[float, float, float] | None = None

    @property
    def plan_radius(self) -> float:
        """m, the radius to keep obstacles at: the sphere's, or with the box collider its
        larger half width across the arms (enough for a vehicle whose heading follows its
        path; turned 45 degrees across a gap the frame's diagonal is wider)."""
        if self.half_extents is None:
            return self.radius
        return max(self.half_extents[0], self.half_extents[1])


@dataclass(frozen=True)
class PinholeInfo:
    """A pinhole camera's image size and intrinsics (px; OpenCV camera frame)."""

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float


@dataclass(frozen=True)
class DepthCameraInfo(PinholeInfo):
    """Pinhole depth camera rigidly mounted on the body (OpenCV camera frame)."""

    max_range: float  # m; beyond it the observation reads +inf (no return)
    rate_hz: float
    t_body_cam: np.ndarray  # (3,) m, camera origin in the body frame
    q_body_cam: np.ndarray  # (4,) [w, x, y, z], camera-to-body rotation


@dataclass(frozen=True)
class RgbCameraInfo(PinholeInfo):
    """Pinhole RGB camera rigidly mounted on the body (OpenCV camera frame); the benchmark's
    shares the depth camera's size, intrinsics and mount, so their pixels correspond."""

    rate_hz: float
    t_body_cam: np.ndarray  # (3,) m, camera origin in the body frame
    q_body_cam: np.ndarray  # (4,) [w, x, y, z], camera-to-body rotation


@dataclass(frozen=True)
class LidarInfo:
    """A scanning LiDAR on the body: ``directions`` (K, 3) unit rays in the body frame."""

    directions: np.ndarray
    max_range: float
    rate_hz: float
    t_body_lidar: np.ndarray  # (3,) m


@dataclass(frozen=True)
class NavTask:
    """Given once per trial, before the first observation."""

    start: np.ndarray  # (3,) m, the start waypoint (the vehicle is flown there first)
    goal: np.ndarray  # (3,) m
    goal_radius: float  # m, success radius (2 m in the paper)
    bounds_min: np.ndarray  # (3,) m, the flight volume (the floor is z = bounds_min[2])
    bounds_max: np.ndarray  # (3,) m, z: the flight ceiling
    limits: NavLimits
    time_limit: float  # s, from the start waypoint
    planner_rate_hz: float  # how often observe/plan is called
    depth: DepthCameraInfo | None = None
    lidar: LidarInfo | None = None
    seed: int = 0  # for planners that draw random numbers
    platform: str = ""
    rgb: RgbCameraInfo | None = None


@dataclass(frozen=True)
class NavObservation:
    """What the vehicle measures at time ``t`` (s since the start waypoint)."""

    t: float
    position: np.ndarray  # (3,) m
    velocity: np.ndarray  # (3,) m/s, world frame
    quat: np.ndarray  # (4,) [w, x, y, z] body-to-world
    omega: np.ndarray  # (3,) rad/s, body frame
    depth: np.ndarray | None = None  # (H, W) float32 z-depth in m; no return: +inf
    lidar: np.ndarray | None = None  # (K,) float32 ranges in m along LidarInfo.directions; +inf
    extra: dict = field(default_factory=dict)
    rgb: np.ndarray | None = None  # (H, W, 3) uint8 RGB, rendered from the scene's splats


@dataclass(frozen=True)
class NavReference:
    """A trajectory the position controller tracks from ``t0`` until the next plan.

    ``sample(t)`` takes absolute times (s since the start waypoint, shape (K,)) and returns
    position, velocity, acceleration (K, 3) and yaw (K,). Times past the end hold the last point
    at rest. A planner that cannot find a plan returns ``None`` from ``plan`` instead.
    """

    t0: float
    times: np.ndarray  # (K,) absolute knot times, increasing, times[0] == t0
    positions: np.ndarray  # (K, 3)
    velocities: np.ndarray  # (K, 3)
    accelerations: np.ndarray  # (K, 3)
    yaws: np.ndarray  # (K,)

    def sample(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Piecewise-linear interpolation of the stored samples; clamped at both ends."""
        t = np.atleast_1d(np.asarray(t, dtype=np.float64))
        pos = np.stack([np.interp(t, self.times, self.positions[:, i]) for i in range(3)], -1)
        vel = np.stack([np.interp(t, self.times, self.velocities[:, i]) for i in range(3)], -1)
        acc = np.stack([np.interp(t, self.times, self.accelerations[:, i]) for i in range(3)], -1)
        yaw = np.interp(t, self.times, np.unwrap(self.yaws))
        past = t >= self.times[-1]
        vel[past] = 0.0
        acc[past] = 0.0
        return pos, vel, acc, yaw


@runtime_checkable
class NavPlanner(Protocol):
    """One planner instance per trial.

    ``needs``: the sensors it wants, a subset of :data:`SENSORS` ({"depth", "lidar", "rgb"});
    the runner only renders those. ``reset(task)`` is called once; ``plan(obs)`` at
    ``task.planner_rate_hz`` and returns the reference to track, or ``None`` when it has no plan
    (the vehicle then holds its position; a trial with no plan at all is the failure cause
    "no_plan"). A planner that holds resources (processes, sockets) may also define
    ``close()``: the benchmark calls it once when the trial's flight is over.
    """

    name: str
    needs: frozenset[str]

    def reset(self, task: NavTask) -> None: ...

    def plan(self, obs: NavObservation) -> NavReference | None: ...


def pooled_depth(depth: np.ndarray, max_range: float, grid: tuple[int, int]) -> np.ndarray:
    """The depth observation of learned planners and their training targets: (h * w,) z-depth
    over the range (no return or beyond it: 1), min-pooled to ``grid``
    (the image's size must be a multiple of it)."""
    h, w = grid
    d = np.asarray(depth, dtype=np.float32)
    if d.ndim != 2 or d.shape[0] % h or d.shape[1] % w:
        raise ConfigError(f"obs.depth: expected an (H, W) image with H, W multiples of {grid}, "
                          f"got shape {d.shape}")  # fmt: skip
    r = np.float32(max_range)
    near = np.clip(np.where(np.isfinite(d), d, r), 0.0, r) / r
    return near.reshape(h, d.shape[0] // h, w, d.shape[1] // w).min(axis=(1, 3)).reshape(-1)
