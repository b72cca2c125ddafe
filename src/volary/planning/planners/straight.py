"""FLYINGTRUST's straight-flight baseline (paper 004 Sec. IV-A): a constant-velocity direct path
from the start to the goal without obstacle avoidance.

The reference is a trapezoidal speed profile along the start-goal segment: accelerate at
``accel`` (default the platform's ``NavLimits.max_acc``, and its vertical limit scaled by the
segment's climb) to the cruise speed (the protocol's cap, or ``speed``), cruise, brake to rest
at the goal. Heading along the segment. It is planned once in ``reset`` and returned unchanged
by every ``plan`` call.
"""

from __future__ import annotations

import math

import numpy as np

from volary.errors import ConfigError
from volary.planning.navigation import NavObservation, NavReference, NavTask


def trapezoid(distance: float, speed: float, accel: float, t: np.ndarray) -> tuple[np.ndarray, ...]:
    """Arc length, speed and acceleration (each like ``t``) of a rest-to-rest trapezoidal
    profile over ``distance`` m with cruise ``speed`` m/s and ``accel`` m/s^2 (triangular when
    the cruise speed is never reached)."""
    v = min(speed, math.sqrt(max(distance, 0.0) * accel))
    t_acc = v / accel if v > 0 else 0.0
    t_cruise = (distance - v * t_acc) / v if v > 0 else 0.0
    t_end = 2 * t_acc + t_cruise
    t = np.clip(t, 0.0, t_end)
    t_dec = np.clip(t - t_acc - t_cruise, 0.0, None)
    s = np.where(
        t < t_acc,
        0.5 * accel * t**2,
        0.5 * v * t_acc
        + v * (np.minimum(t, t_acc + t_cruise) - t_acc)
        + v * t_dec
        - 0.5 * accel * t_dec**2,
    )
    vel = np.where(t < t_acc, accel * t, v - accel * t_dec)
    acc = np.where(t < t_acc, accel, np.where(t_dec > 0, -accel, 0.0))
    acc = np.where(t >= t_end, 0.0, acc)
    return s, np.maximum(vel, 0.0), acc, np.array(t_end)


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
