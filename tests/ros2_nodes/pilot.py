"""A reactive forest pilot: odometry + a depth image in, a velocity command out (numpy only).

The same function flies through ROS 2 (``forest_node.py``), ``volary.client`` and in-process,
so the three flights can be compared bit for bit. It turns to face the goal and flies toward
it, pushed sideways away from the near half of the image that holds the closer obstacles.
"""

from __future__ import annotations

import math

import numpy as np

SPEED = 2.0  # m/s cruise
AVOID = 3.0  # m: obstacles nearer than this push the vehicle sideways


def pilot(pos: np.ndarray, quat: np.ndarray, depth: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """[v_x, v_y, v_z (world, m/s), yaw rate (rad/s)] from the position, the [w, x, y, z]
    attitude, a z-depth image (m, NaN where no return) and the goal."""
    w, x, y, z = (float(c) for c in quat)
    yaw = math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    to_goal = np.asarray(goal, dtype=np.float64) - np.asarray(pos, dtype=np.float64)
    dist = float(np.hypot(to_goal[0], to_goal[1]))
    heading = math.atan2(to_goal[1], to_goal[0])
    err = math.atan2(math.sin(heading - yaw), math.cos(heading - yaw))
    rows = depth.shape[0]
    band = depth[rows // 3 : 2 * rows // 3]
    near = np.where(np.isfinite(band), band, np.inf).min(axis=0)  # per column, m
    push = np.clip(AVOID - near, 0.0, None)
    half = near.size // 2
    side = float(push[:half].sum() - push[half:].sum()) / max(half, 1)  # > 0: obstacles left
    ahead = float(near[half // 2 : half + half // 2].min())
    speed = min(SPEED, 0.8 * dist) * min(1.0, max(0.25, (ahead - 0.5) / AVOID))
    fwd = np.array([math.cos(yaw), math.sin(yaw)])
    left = np.array([-math.sin(yaw), math.cos(yaw)])
    vxy = speed * fwd - 1.5 * side * left  # obstacles on the left push right (-left)
    vz = 1.0 * (float(goal[2]) - float(pos[2]))
    return np.array([vxy[0], vxy[1], vz, 1.5 * err])
