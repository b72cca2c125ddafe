"""FLYINGTRUST's straight-flight baseline (paper 004 Sec. IV-A): a constant-velocity direct path
from the start to the goal without obstacle avoidance.

The reference is a rest-to-rest speed profile along the start-goal segment: a raised-cosine
ramp with peak acceleration ``accel`` (default the platform's ``NavLimits.max_acc``, and its
vertical limit scaled by the segment's climb) to the cruise speed (the protocol's cap, or
``speed``), cruise, and the mirrored ramp to rest at the goal. Heading along the segment. It
is planned once in ``reset`` and returned unchanged by every ``plan`` call.
"""

from __future__ import annotations

import math

import numpy as np

from volary.errors import ConfigError
from volary.planning.navigation import NavObservation, NavReference, NavTask


def trapezoid(distance: float, speed: float, accel: float, t: np.ndarray) -> tuple[np.ndarray, ...]:
    """Arc length, speed and acceleration (each like ``t``) and the end time of a rest-to-rest
    speed profile over ``distance`` m: a raised-cosine ramp to the cruise ``speed`` m/s with
    peak acceleration ``accel`` m/s^2 (ramp time T = pi v / (2 a), covering v T / 2), cruise,
    and the mirrored ramp down; the acceleration is continuous (no step the attitude loop would
    have to follow instantly). Without room to cruise the peak speed is sqrt(2 a d / pi)."""
    v = min(speed, math.sqrt(2.0 * accel * max(distance, 0.0) / math.pi))
    ramp = math.pi * v / (2.0 * accel) if v > 0 else 0.0
    cruise = (distance - v * ramp) / v if v > 0 else 0.0
    t_end = 2 * ramp + cruise
    t = np.clip(np.asarray(t, dtype=np.float64), 0.0, t_end)
    if v <= 0:
        z = np.zeros_like(t)
        return z, z, z, np.array(t_end)
    w = math.pi / ramp
    up = np.minimum(t, ramp)
    down = np.clip(t - ramp - cruise, 0.0, ramp)
    s_up = 0.5 * v * (up - np.sin(w * up) / w)
    s_down = 0.5 * v * (down + np.sin(w * down) / w)
    s = s_up + v * np.clip(t - ramp, 0.0, cruise) + s_down
    vel = np.where(
        t < ramp,
        0.5 * v * (1 - np.cos(w * t)),
        np.where(down > 0, 0.5 * v * (1 + np.cos(w * down)), v),
    )
    acc = np.where(t < ramp, 0.5 * v * w * np.sin(w * t), -0.5 * v * w * np.sin(w * down))
    return s, vel, acc, np.array(t_end)


class StraightPlanner:
    """Constant speed along the start-goal line (no obstacle avoidance); needs no sensor."""

    name = "straight"
    needs: frozenset[str] = frozenset()

    def __init__(self, speed: float | None = None, accel: float | None = None, dt: float = 0.05):
        for key, val in (("speed", speed), ("accel", accel), ("dt", dt)):
            if val is not None and not (
                isinstance(val, int | float) and math.isfinite(val) and val > 0
            ):
                raise ConfigError(f"straight: {key}: expected a number > 0, got {val!r}")
        self.speed, self.accel, self.dt = speed, accel, float(dt)
        self._ref: NavReference | None = None

    def reset(self, task: NavTask) -> None:
        start, goal = np.asarray(task.start, float), np.asarray(task.goal, float)
        d = goal - start
        dist = float(np.linalg.norm(d))
        u = d / dist if dist > 1e-9 else np.zeros(3)
        speed = min(self.speed or task.limits.max_speed, task.limits.max_speed)
        accel = self.accel or _line_accel(u, task.limits.max_acc, task.limits.max_vertical_acc)
        _, _, _, t_end = trapezoid(dist, speed, accel, np.zeros(1))
        t = np.append(np.arange(0.0, float(t_end) - 0.5 * self.dt, self.dt), float(t_end))
        s, v, a, _ = trapezoid(dist, speed, accel, t)
        yaw = math.atan2(u[1], u[0]) if np.linalg.norm(u[:2]) > 1e-9 else 0.0
        self._ref = NavReference(
            t0=0.0,
            times=t,
            positions=start + s[:, None] * u,
            velocities=v[:, None] * u,
            accelerations=a[:, None] * u,
            yaws=np.full(t.shape, yaw),
        )

    def plan(self, obs: NavObservation) -> NavReference | None:
        return self._ref


def _line_accel(u: np.ndarray, max_acc: float, max_vertical_acc: float) -> float:
    """Largest acceleration along unit ``u`` within the horizontal and vertical limits."""
    h, z = float(np.linalg.norm(u[:2])), abs(float(u[2]))
    lims = [max_acc / h if h > 1e-9 else math.inf, max_vertical_acc / z if z > 1e-9 else math.inf]
    return min(lims)
