"""FlightGoggles' topics (names, types, frames, conventions) built from a World's tick.

Imported only after :func:`volary.ros1.env.import_rospy` (it imports ROS 1 message classes).
Every publisher sets TCP_NODELAY (a lock-step client waits for each message) and publishes
synchronously (``queue_size=None``: ``publish`` returns once the bytes are written, so a tick's
messages leave in order, before the World waits for the command).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from flightgoggles.msg import IRMarker, IRMarkerArray
from geometry_msgs.msg import TransformStamped
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Imu, Range
from std_msgs.msg import Empty, Float32, Float64, Header, String
from tf2_msgs.msg import TFMessage

from volary.serve import roscommon as R

CLOCK = "/clock"
TF = "/tf"
TF_STATIC = "/tf_static"
IMU = "/uav/sensors/imu"
IR_BEACONS = "/uav/camera/left/ir_beacons"
CAMERA_INFO = "/uav/camera/left/camera_info"
RANGEFINDER = "/uav/sensors/downward_laser_rangefinder"
COLLISION = "/uav/collision"
FPS = "/uav/camera/debug/fps"
RATE_THRUST = "/uav/input/rateThrust"
# volary's additions (FlightGoggles had none of these)
RESULTS = "/volary/results"  # std_msgs/String, latched: the reporter's results YAML
SCORE = "/volary/score"  # std_msgs/Float64, latched: the lap's score (bench.gate_race)
COMMAND_ERROR = "/volary/command_error"  # std_msgs/String: why a RateThrust was refused
CLOCK_SCALE = "/volary/clock_scale"  # std_msgs/Float32: sim s per wall s (real-time mode)

WORLD, BODY, CAMERA, NED = "world", "uav/imu", "uav/camera/left", "world/ned"


class Frames:
    """Header frame ids: FlightGoggles 2019 (ROS Kinetic) wrote "/uav/camera/left" and
    "/uav/imu" with a leading slash, which tf2 rejects from Melodic on; upstream dropped it
    in 2020. ``kinetic=True`` keeps the slash for stacks that compare the strings."""

    def __init__(self, kinetic: bool = False) -> None:
        lead = "/" if kinetic else ""
        self.camera, self.body = lead + CAMERA, lead + BODY


def stamp(rospy: Any, t: float) -> Any:
    return rospy.Time(*R.split_stamp(t))


def header(rospy: Any, t: float, frame: str = "") -> Header:
    h = Header()
    h.stamp, h.frame_id = stamp(rospy, t), frame
    return h


def transform(rospy: Any, t: float, parent: str, child: str, pos: Any, q_wxyz: Any) -> Any:
    ts = TransformStamped()
    ts.header = header(rospy, t, parent)
    ts.child_frame_id = child
    tr = ts.transform
    tr.translation.x, tr.translation.y, tr.translation.z = (float(v) for v in pos)
    r = tr.rotation
    r.x, r.y, r.z, r.w = R.to_ros_quat(q_wxyz)
    return ts


def _quat_zyx(yaw: float, pitch: float, roll: float) -> tuple[float, float, float, float]:
    """[w, x, y, z] of R = Rz(yaw) Ry(pitch) Rx(roll) (static_transform_publisher's order)."""
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    return (cr * cp * cy + sr * sp * sy, sr * cp * cy - cr * sp * sy,
            cr * sp * cy + sr * cp * sy, cr * cp * sy - sr * sp * cy)  # fmt: skip


def static_tf(rospy: Any, camera_mount: Any) -> TFMessage:
    """``uav/imu`` -> ``uav/camera/left`` (the optical frame at the camera's mount: body
    origin, looking along +x) and ``world`` -> ``world/ned`` (yaw pi/2, pitch pi)."""
    cam = transform(rospy, 0.0, BODY, CAMERA, camera_mount.translation, camera_mount.rotation)
    ned = transform(rospy, 0.0, WORLD, NED, (0.0, 0.0, 0.0), _quat_zyx(math.pi / 2, math.pi, 0))
    return TFMessage(transforms=[cam, ned])


def pose_tf(rospy: Any, t: float, pos: Any, q_wxyz: Any) -> TFMessage:
    """``world`` -> ``uav/imu``: the vehicle's true pose (FlightGoggles published it)."""
    return TFMessage(transforms=[transform(rospy, t, WORLD, BODY, pos, q_wxyz)])


def imu(rospy: Any, t: float, accel: Any, gyro: Any, var_a: float, var_g: float) -> Imu:
    """Specific force (m/s^2, no gravity: hover reads +9.81 on z) and body rates (rad/s, FLU);
    no orientation (covariance[0] = -1); empty frame id, as FlightGoggles."""
    m = Imu()
    m.header = header(rospy, t)
    m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z = (float(v) for v in gyro)
    a = m.linear_acceleration
    a.x, a.y, a.z = (float(v) for v in accel)
    m.orientation.x = m.orientation.y = m.orientation.z = m.orientation.w = 0.0
    m.orientation_covariance = [-1.0] + [0.0] * 8
    m.angular_velocity_covariance = _diag(var_g)
    m.linear_acceleration_covariance = _diag(var_a)
    return m


def _diag(v: float) -> list[float]:
    return [v, 0.0, 0.0, 0.0, v, 0.0, 0.0, 0.0, v]


def camera_info(rospy: Any, t: float, camera: Any, frame: str) -> CameraInfo:
    """The left camera's intrinsics: pinhole, no distortion ("plum_bob", D = 0)."""
    fx, fy, cx, cy = (float(v) for v in camera.intrinsics)
    m = CameraInfo()
    m.header = header(rospy, t, frame)
    m.width, m.height = int(camera.width), int(camera.height)
    m.distortion_model = "plum_bob"
    m.D = [0.0] * 5
    m.K = [fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0]
    m.R = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    m.P = [fx, 0.0, cx, 0.0, 0.0, fy, cy, 0.0, 0.0, 0.0, 1.0, 0.0]
    return m


def ir_beacons(rospy: Any, t: float, reading: Any, gate_names: list[str]) -> IRMarkerArray:
    """Every visible beacon of vehicle 0: landmarkID = gate name, markerID = corner + 1,
    (x, y) = pixel (origin top-left), z = 0; empty frame id, as FlightGoggles."""
    vis = np.flatnonzero(reading.visible[0].cpu().numpy())
    pix = reading.pixels[0].cpu().numpy()
    gate = reading.gate_index[0].cpu().numpy()
    corner = reading.corner[0].cpu().numpy()
    markers = []
    for j in vis:
        m = IRMarker()
        m.landmarkID = String(data=gate_names[int(gate[j])])
        m.markerID = String(data=str(int(corner[j]) + 1))
        m.x, m.y, m.z = float(pix[j, 0]), float(pix[j, 1]), 0.0
        markers.append(m)
    return IRMarkerArray(header=header(rospy, t), markers=markers)


def rangefinder(rospy: Any, t: float, reading: Any, ranger: Any, frame: str) -> Range:
    """FlightGoggles' sign convention: the distance is measured along -z of ``uav/imu``, so
    ``range`` is negative, ``min_range`` = -max range and ``max_range`` = 0; no return reads
    -max range."""
    m = Range()
    m.header = header(rospy, t, frame)
    m.radiation_type = Range.INFRARED
    m.field_of_view = 0.0
    m.min_range, m.max_range = -float(ranger.max_range), 0.0
    m.range = -float(reading.range[0])
    return m


class Publishers:
    """One publisher per topic (module docstring)."""

    def __init__(self, rospy: Any) -> None:
        def pub(topic: str, cls: Any, latch: bool = False) -> Any:
            with warnings.catch_warnings():  # rospy warns that queue_size=None is synchronous
                warnings.simplefilter("ignore", SyntaxWarning)
                return rospy.Publisher(topic, cls, queue_size=None, tcp_nodelay=True, latch=latch)

        self.clock = pub(CLOCK, Clock)
        self.tf = pub(TF, TFMessage)
        self.tf_static = pub(TF_STATIC, TFMessage, latch=True)
        self.imu = pub(IMU, Imu)
        self.ir = pub(IR_BEACONS, IRMarkerArray)
        self.camera_info = pub(CAMERA_INFO, CameraInfo)
        self.range = pub(RANGEFINDER, Range)
        self.collision = pub(COLLISION, Empty)
        self.fps = pub(FPS, Float32)
        self.results = pub(RESULTS, String, latch=True)
        self.score = pub(SCORE, Float64, latch=True)
        self.command_error = pub(COMMAND_ERROR, String)
        self.clock_scale = pub(CLOCK_SCALE, Float32)

    def clock_msg(self, rospy: Any, t: float) -> Clock:
        return Clock(clock=stamp(rospy, t))

    def close(self) -> None:
        for p in vars(self).values():
            p.unregister()
