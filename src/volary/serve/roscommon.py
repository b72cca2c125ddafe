"""What every ROS bridge shares (ROS 2 natively, ROS 1 as FlightGoggles): the one place where
volary's conventions meet ROS's, as plain numbers, importing neither rclpy nor rospy.

- Frames (REP 103 / 105): volary's world is z-up with x forward and y left, as ROS's ``map``
  (ENU); the body frame is FLU, as ``base_link``; a camera's sensor frame is OpenCV's (x right,
  y down, z along the axis), which is ROS's camera *optical* frame. So positions, velocities
  and rates pass unchanged, and only the quaternion's order changes: volary stores
  [w, x, y, z], ROS names the fields x, y, z, w (:func:`to_ros_quat`, :func:`from_ros_quat`).
- Time: a ``builtin_interfaces/Time`` (ROS 2) or ``rospy.Time`` (ROS 1) is whole seconds and
  nanoseconds; :func:`split_stamp` rounds a World time to the nearest nanosecond.
- Commands: :func:`setpoint` checks a command's numbers (finite, the control level's size)
  once, at the boundary, and names what was wrong; the bridges publish that text on their
  diagnostics topic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

NS = 1_000_000_000
Vec = Sequence[float] | np.ndarray


def to_ros_quat(q_wxyz: Vec) -> tuple[float, float, float, float]:
    """volary [w, x, y, z] -> ROS (x, y, z, w), as Python floats."""
    w, x, y, z = (float(v) for v in q_wxyz)
    return x, y, z, w


def from_ros_quat(x: float, y: float, z: float, w: float) -> np.ndarray:
    """ROS (x, y, z, w) -> volary [w, x, y, z] (float64, not normalized)."""
    return np.array([w, x, y, z], dtype=np.float64)


def split_stamp(t: float) -> tuple[int, int]:
    """A time in s -> (sec, nanosec), rounded to the nearest nanosecond (t >= 0)."""
    ns = int(round(float(t) * NS))
    return ns // NS, ns % NS


def stamp_seconds(sec: int, nanosec: int) -> float:
    """(sec, nanosec) -> s."""
    return sec + nanosec * 1e-9


def yaw_of(q_wxyz: Vec) -> float:
    """The yaw (rad, about world z) of a [w, x, y, z] attitude: ZYX Euler angles' last."""
    w, x, y, z = (float(v) for v in q_wxyz)
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def euler_of(q_wxyz: Vec) -> tuple[float, float, float]:
    """(roll, pitch, yaw) rad, ZYX convention (volary.math.quat_to_euler's), of [w, x, y, z]."""
    w, x, y, z = (float(v) for v in q_wxyz)
    roll = math.atan2(2.0 * (w * x + y * z), 1.0 - 2.0 * (x * x + y * y))
    pitch = math.asin(max(-1.0, min(1.0, 2.0 * (w * y - z * x))))
    return roll, pitch, yaw_of((w, x, y, z))


class CommandError(ValueError):
    """A command that the World cannot fly; the message names the field and what was wrong."""


def setpoint(values: Sequence[float] | np.ndarray, size: int, what: str) -> np.ndarray:
    """``values`` as a float64 setpoint of ``size`` numbers, or :class:`CommandError` naming
    ``what`` (the topic) when the count is wrong or a value is not finite."""
    a = np.asarray(values, dtype=np.float64).reshape(-1)
    if a.size != size:
        raise CommandError(f"{what}: expected {size} numbers, got {a.size}")
    bad = np.flatnonzero(~np.isfinite(a))
    if bad.size:
        raise CommandError(f"{what}: element {int(bad[0])} is {float(a[bad[0]])}; expected finite")
    return a


def body_velocity(q_wxyz: Vec, v_world: Vec) -> np.ndarray:
    """R^T v: a world-frame velocity in the body frame of the [w, x, y, z] attitude (float64;
    odometry's twist is in its child frame, REP 105)."""
    w, x, y, z = (float(c) for c in q_wxyz)
    n = math.sqrt(w * w + x * x + y * y + z * z)
    w, x, y, z = w / n, x / n, y / n, z / n
    rot = np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip
    return rot.T @ np.asarray(v_world, dtype=np.float64)


def ros_intrinsics(fx: float, fy: float, cx: float, cy: float) -> tuple[float, ...]:
    """volary's (fx, fy, cx, cy) -> a ROS ``CameraInfo``'s. volary puts pixel j's centre at
    u = j + 0.5 (cx = W / 2 is the image centre); ROS and OpenCV put it at u = j, so the
    principal point moves half a pixel: cx - 0.5, cy - 0.5."""
    return float(fx), float(fy), float(cx) - 0.5, float(cy) - 0.5


def pinhole_matrices(fx: float, fy: float, cx: float, cy: float) -> dict[str, list[float]]:
    """A ``CameraInfo``'s row-major ``K`` (3x3), ``R`` (3x3, identity) and ``P`` (3x4) of
    volary's undistorted pinhole (fx, fy, cx, cy), in ROS's pixel convention
    (:func:`ros_intrinsics`); keys lower-case (ROS 2 field names)."""
    fx, fy, cx, cy = ros_intrinsics(fx, fy, cx, cy)
    return {
        "k": [fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0],
        "r": [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        "p": [fx, 0.0, cx, 0.0, 0.0, fy, cy, 0.0, 0.0, 0.0, 1.0, 0.0],
    }


CAMERAS = ("depth", "splat")  # sensor kinds framed as cameras (REP 103 optical frame)


def sensor_frame(ns: str, name: str, kind: str) -> str:
    """A sensor's tf frame: a camera's REP 103 optical frame, the others' ``_link``."""
    return f"{ns}/{name}_optical_frame" if kind in CAMERAS else f"{ns}/{name}_link"
