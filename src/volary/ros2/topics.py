"""The ROS 2 messages of :class:`~volary.ros2.bridge.Ros2Bridge`: what it publishes for a tick
and how each control level's command message becomes a setpoint (docs/ros.md's tables).

QoS: every topic is reliable with a queue of 10 (so lock-step loses nothing), ``/tf_static``
transient-local with depth 1 as tf2's static broadcaster, and ``/clock`` as Gazebo publishes it.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from volary.errors import ConfigError
from volary.serve import roscommon as R
from volary.serve.roscommon import sensor_frame

if TYPE_CHECKING:
    from volary.serve.world import ServeConfig
    from volary.sim.world import World


@dataclass
class Vehicle:
    """One vehicle slot of a bridge: its namespace, command topic, owner and this tick's command."""

    index: int
    ns: str
    topic: str  # the command topic (full name)
    owner: str | None = None  # the node flying it ("/ns/name"), None while free
    pending: np.ndarray | None = None  # this tick's setpoint
    last: np.ndarray | None = None  # the last setpoint flown
    yaw: float = 0.0  # the yaw setpoint that cmd_vel / cmd_accel integrate
    rate_form: bool = False  # pending's last number is a yaw rate (cmd_vel, cmd_accel)
    since: float = 0.0  # monotonic time the World began to wait for its command
    contested: list[str] = field(default_factory=list)  # nodes besides the owner commanding it
    refused: int = 0  # commands refused (not finite, wrong size, stale)
    held: bool = True  # held in place this tick (free, dropped or contested)
    flown: int = 0  # ticks flown with its node's command
    absent_since: float | None = None  # monotonic time its owner was first missing from the graph
    heard: float = 0.0  # monotonic time of its last accepted command


class Bridge(Protocol):
    """What the messages need of :class:`~volary.ros2.bridge.Ros2Bridge` (which imports this
    module, so the bridge is passed in rather than imported)."""

    config: ServeConfig
    world: World
    node: Any
    vehicles: list[Vehicle]
    max_thrust: np.ndarray  # (B,) N, each vehicle's full thrust (mavros' normalized thrust)
    time_scale: float  # sim time over wall time in real time (1: lock-step)


_WHERE = {
    "tf2_msgs": "python -m volary.ros2.msgs build",
    "mavros_msgs": "python -m volary.ros2.msgs build",
}


def message_type(kind: str) -> Any:
    """The message class of ``"pkg/Type"``; a missing package says how to get it."""
    pkg, name = kind.split("/")
    try:
        return getattr(importlib.import_module(f"{pkg}.msg"), name)
    except ImportError as e:
        how = _WHERE.get(pkg, f"pip install 'volary[ros2]' (ros-jazzy-{pkg.replace('_', '-')})")
        raise ConfigError(f"ROS 2 message {kind}: not installed; run {how} ({e})") from e


# ---- commands in ----------------------------------------------------------------------------
def raw_reader(msg: Any, bridge: Bridge, v: Vehicle) -> np.ndarray:
    """``cmd_raw`` (std_msgs/Float64MultiArray): the level's setpoint, volary's order and SI
    (``sticks``: each stick within its range, as :func:`_joy` checks)."""
    data = np.asarray(msg.data, dtype=np.float64)
    if bridge.config.control == "sticks":
        return _stick_row(data, f"/{v.ns}/cmd_raw")
    return data


def _stick_row(values: Any, what: str) -> np.ndarray:
    from volary.fc.loop import stick_setpoint

    try:
        return stick_setpoint(values, what)
    except ConfigError as e:
        raise R.CommandError(str(e)) from None


def _joy(msg: Any, bridge: Bridge, v: Vehicle) -> np.ndarray:
    """sensor_msgs/Joy -> one RC frame (control ``sticks``, :data:`volary.fc.loop.STICKS`):
    ``axes`` = [roll, pitch, yaw, throttle] (sticks in [-1, 1], throttle in [0, 1]),
    ``buttons`` = [arm, angle] (1: on); each value checked against its range."""
    if len(msg.axes) != 4 or len(msg.buttons) != 2:
        raise R.CommandError(
            f"/{v.ns}/cmd_joy: expected 4 axes [roll, pitch, yaw, throttle] and 2 buttons "
            f"[arm, angle], got {len(msg.axes)} and {len(msg.buttons)}"
        )
    return _stick_row([*msg.axes, *msg.buttons], f"/{v.ns}/cmd_joy")


def _xyz(p: Any) -> list[float]:
    return [p.x, p.y, p.z]


def _wxyz(q: Any) -> np.ndarray:
    return R.from_ros_quat(q.x, q.y, q.z, q.w)


def _pose_position(msg: Any, bridge: Bridge, v: Vehicle) -> list[float]:
    """PoseStamped -> [x, y, z, yaw] (map frame)."""
    return [*_xyz(msg.pose.position), R.yaw_of(_unit(_wxyz(msg.pose.orientation), "cmd_pose"))]


def _pose_full(msg: Any, bridge: Bridge, v: Vehicle) -> list[float]:
    """PoseStamped -> [x, y, z, roll, pitch, yaw]."""
    q = _unit(_wxyz(msg.pose.orientation), "cmd_pose")
    return [*_xyz(msg.pose.position), *R.euler_of(q)]


def _twist(msg: Any, bridge: Bridge, v: Vehicle) -> list[float]:
    """TwistStamped (map frame) -> [v_x, v_y, v_z, yaw rate]; the bridge integrates the rate."""
    return [*_xyz(msg.twist.linear), msg.twist.angular.z]


def _accel(msg: Any, bridge: Bridge, v: Vehicle) -> list[float]:
    """AccelStamped (map frame) -> [a_x, a_y, a_z, yaw rate] (angular.z: the yaw rate)."""
    return [*_xyz(msg.accel.linear), msg.accel.angular.z]


def _thrust(msg: Any, bridge: Bridge, v: Vehicle) -> float:
    """mavros' thrust is normalized, 0..1 of the vehicle's maximum collective thrust."""
    if not 0.0 <= msg.thrust <= 1.0:
        raise R.CommandError(f"thrust: expected 0..1 (normalized, as mavros), got {msg.thrust}")
    return float(msg.thrust) * float(bridge.max_thrust[v.index])


def _rates(msg: Any, bridge: Bridge, v: Vehicle) -> list[float]:
    """AttitudeTarget -> [collective thrust N, body rates FLU rad/s]."""
    return [_thrust(msg, bridge, v), *_xyz(msg.body_rate)]


def _attitude(msg: Any, bridge: Bridge, v: Vehicle) -> list[float]:
    """AttitudeTarget -> [collective thrust N, roll, pitch, yaw]."""
    q = _unit(_wxyz(msg.orientation), "cmd_attitude")
    return [_thrust(msg, bridge, v), *R.euler_of(q)]


def _wrench(msg: Any, bridge: Bridge, v: Vehicle) -> list[float]:
    """WrenchStamped (base_link) -> [f; m]."""
    return [*_xyz(msg.wrench.force), *_xyz(msg.wrench.torque)]


def _unit(q: np.ndarray, what: str) -> np.ndarray:
    n = float(np.linalg.norm(q))
    if not (np.isfinite(q).all() and n > 1e-6):
        raise R.CommandError(f"{what}: orientation expected a nonzero finite quaternion")
    return q / n


_READERS = {
    "position": _pose_position,
    "pose": _pose_full,
    "velocity": _twist,
    "acceleration": _accel,
    "attitude": _attitude,
    "ctbr": _rates,
    "wrench": _wrench,
    "rotor_speeds": raw_reader,
    "rotor_thrusts": raw_reader,
    "sticks": _joy,  # with COMMAND_TOPICS["sticks"] = ("cmd_joy", "sensor_msgs/Joy")
}


def command_reader(level: str) -> Any:
    return _READERS[level]


# ---- what a tick publishes ------------------------------------------------------------------
class Publishers:
    """Every publisher of a bridge, and the messages of one tick."""

    def __init__(self, bridge: Bridge) -> None:
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

        self.bridge = bridge
        node = bridge.node
        m = message_type
        self.T = {k: m(k) for k in (
            "rosgraph_msgs/Clock", "tf2_msgs/TFMessage", "geometry_msgs/TransformStamped",
            "nav_msgs/Odometry", "sensor_msgs/Imu", "sensor_msgs/Image", "sensor_msgs/CameraInfo",
            "sensor_msgs/PointCloud2", "sensor_msgs/PointField", "sensor_msgs/Range",
            "std_msgs/Bool", "std_msgs/UInt32", "std_msgs/Float64",
            "diagnostic_msgs/DiagnosticArray", "diagnostic_msgs/DiagnosticStatus",
            "diagnostic_msgs/KeyValue",
        )}  # fmt: skip
        rel = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)  # fmt: skip
        self.clock = node.create_publisher(self.T["rosgraph_msgs/Clock"], "/clock", rel)
        self.tf = node.create_publisher(self.T["tf2_msgs/TFMessage"], "/tf", 100)
        self.tf_static = node.create_publisher(self.T["tf2_msgs/TFMessage"], "/tf_static", latched)
        self.diag = node.create_publisher(self.T["diagnostic_msgs/DiagnosticArray"],
                                          "/diagnostics", rel)  # fmt: skip
        self.scale = node.create_publisher(self.T["std_msgs/Float64"], "/volary/time_scale", rel)
        self.sensors = {n: s.ray_config() for n, s in bridge.config.sensors.items()}
        for n, s in bridge.config.sensors.items():
            if s.kind == "splat":
                self.sensors[n] = _Pinhole.of_splat(bridge.world.rig[n].sensor)
        self.per: list[dict[str, Any]] = []
        self._last_events: list[dict[str, Any]] = [{} for _ in bridge.vehicles]
        self._scale_sent = -1.0
        for v in bridge.vehicles:
            ns, pubs = f"/{v.ns}", {}
            pubs["odom"] = node.create_publisher(self.T["nav_msgs/Odometry"], f"{ns}/odom", rel)
            if bridge.config.imu is not None:
                pubs["imu"] = node.create_publisher(self.T["sensor_msgs/Imu"], f"{ns}/imu", rel)
            for name in bridge.config.slots[v.index].sensors:
                kind = bridge.config.sensors[name].kind
                for suffix, t in _SENSOR_TOPICS.get(kind, ()):
                    pubs[f"{name}/{suffix}"] = node.create_publisher(
                        self.T[t], f"{ns}/{name}/{suffix}", rel
                    )
            pubs["collision"] = node.create_publisher(self.T["std_msgs/Bool"], f"{ns}/collision",
                                                      rel)  # fmt: skip
            if bridge.config.firmware != "ideal":
                pubs["firmware_lost"] = node.create_publisher(  # latched: a late joiner hears it
                    self.T["std_msgs/Bool"], f"{ns}/firmware_lost", latched
                )
            if bridge.world.gates is not None:
                pubs["gates_passed"] = node.create_publisher(
                    self.T["std_msgs/UInt32"], f"{ns}/gates_passed", latched
                )
            self.per.append(pubs)

    # ---- tf -------------------------------------------------------------------------------------
    def _transform(self, parent: str, child: str, t: Any, q_wxyz: Any, stamp: Any) -> Any:
        tr = self.T["geometry_msgs/TransformStamped"]()
        tr.header.stamp, tr.header.frame_id, tr.child_frame_id = stamp, parent, child
        p = tr.transform.translation
        p.x, p.y, p.z = (float(x) for x in t)
        o = tr.transform.rotation
        o.x, o.y, o.z, o.w = R.to_ros_quat(q_wxyz)
        return tr

    def static(self) -> None:
        """``map`` -> ``<ns>/odom`` (ground truth: identity) and ``<ns>/base_link`` -> each
        sensor's frame (its mount T_BS; a camera's sensor frame is its optical frame)."""
        stamp = self._stamp(0.0)
        out = []
        for v in self.bridge.vehicles:
            out.append(self._transform("map", f"{v.ns}/odom", (0, 0, 0), (1, 0, 0, 0), stamp))
            for name in self.bridge.config.slots[v.index].sensors:
                mount = self.sensors[name].mount
                out.append(self._transform(f"{v.ns}/base_link", sensor_frame(v.ns, name,
                           self.bridge.config.sensors[name].kind), mount.translation,
                           mount.rotation, stamp))  # fmt: skip
        self.tf_static.publish(self.T["tf2_msgs/TFMessage"](transforms=out))

    def _stamp(self, t: float) -> Any:
        from builtin_interfaces.msg import Time

        sec, nanosec = R.split_stamp(t)
        return Time(sec=sec, nanosec=nanosec)

    # ---- a tick ---------------------------------------------------------------------------------
    def tick(self, obs: dict[int, dict[str, Any]], repeat: bool = False) -> None:
        """The clock, the vehicles' transforms, then each vehicle's sensors, IMU and events,
        its odometry last (a node that acts on odometry has the tick's other messages).
        ``repeat``: the World is waiting; the clock, /tf and the messages of the vehicles no
        node has taken yet go out again (a late subscriber's first messages, or a first
        command, can be lost while DDS matches; a taken vehicle's node has shown both work, so
        it gets no repeat it might answer twice)."""
        b = self.bridge
        t = b.world.tick * b.world.dt
        stamp = self._stamp(t)
        self.clock.publish(self.T["rosgraph_msgs/Clock"](clock=stamp))
        tfs = [self._transform(f"{v.ns}/odom", f"{v.ns}/base_link", obs[v.index]["state"]["pos"],
                               obs[v.index]["state"]["quat"], stamp)
               for v in b.vehicles]  # fmt: skip
        self.tf.publish(self.T["tf2_msgs/TFMessage"](transforms=tfs))
        for v in b.vehicles:
            if repeat and v.owner is not None:
                continue
            o, pubs = obs[v.index], self.per[v.index]
            for name in o["sensors"]:
                if name != "imu":
                    self._sensor(v, name, pubs, stamp)
            if "imu" in pubs and "imu" in o["sensors"]:
                pubs["imu"].publish(self._imu(v, o["sensors"]["imu"], stamp))
            self._events(v, o["events"], pubs, repeat)
            pubs["odom"].publish(self._odom(v, o["state"], stamp))
        now = time.monotonic()
        if not repeat and now - self._scale_sent >= 0.5:  # twice a (wall) second
            self.scale.publish(self.T["std_msgs/Float64"](data=float(b.time_scale)))
            self._scale_sent = now

    def _events(self, v: Vehicle, ev: dict[str, Any], pubs: dict[str, Any], repeat: bool) -> None:
        """``collision`` every tick while touching and when it changes; ``gates_passed`` and
        ``firmware_lost`` (a firmware-flown World: the vehicle's firmware was lost, it has no
        motors) when they change (and first): events, not a stream, so a quiet flight costs no
        messages."""
        last = self._last_events[v.index]
        now = {
            "collision": bool(ev.get("collided")),
            "gates_passed": int(ev.get("gates_passed", 0)),
            "firmware_lost": bool(ev.get("firmware_lost", False)),
        }
        if "firmware_lost" in pubs and (now["firmware_lost"] != last.get("firmware_lost")
                                        or repeat):  # fmt: skip
            pubs["firmware_lost"].publish(self.T["std_msgs/Bool"](data=now["firmware_lost"]))
        if now["collision"] or now["collision"] != last.get("collision") or repeat:
            pubs["collision"].publish(self.T["std_msgs/Bool"](data=now["collision"]))
        if "gates_passed" in pubs and (now["gates_passed"] != last.get("gates_passed") or repeat):
            pubs["gates_passed"].publish(self.T["std_msgs/UInt32"](data=now["gates_passed"]))
        self._last_events[v.index] = now

    def _odom(self, v: Vehicle, st: dict[str, np.ndarray], stamp: Any) -> Any:
        """Ground truth (REP 105 ``odom`` = ``map`` here): pose in ``<ns>/odom``, twist in
        ``<ns>/base_link`` (body velocity R^T v and body rates), covariances zero."""
        od = self.T["nav_msgs/Odometry"]()
        od.header.stamp, od.header.frame_id = stamp, f"{v.ns}/odom"
        od.child_frame_id = f"{v.ns}/base_link"
        p, o = od.pose.pose.position, od.pose.pose.orientation
        p.x, p.y, p.z = (float(x) for x in st["pos"])
        o.x, o.y, o.z, o.w = R.to_ros_quat(st["quat"])
        vb = R.body_velocity(st["quat"], st["vel"])
        lin, ang = od.twist.twist.linear, od.twist.twist.angular
        lin.x, lin.y, lin.z = (float(x) for x in vb)
        ang.x, ang.y, ang.z = (float(x) for x in st["omega"])
        return od

    def _imu(self, v: Vehicle, imu: dict[str, np.ndarray], stamp: Any) -> Any:
        msg = self.T["sensor_msgs/Imu"]()
        msg.header.stamp, msg.header.frame_id = stamp, f"{v.ns}/base_link"
        msg.orientation_covariance[0] = -1.0  # REP 145: no orientation estimate
        a, g = msg.linear_acceleration, msg.angular_velocity
        a.x, a.y, a.z = (float(x) for x in imu["accel"])
        g.x, g.y, g.z = (float(x) for x in imu["gyro"])
        return msg

    def _sensor(self, v: Vehicle, name: str, pubs: dict[str, Any], stamp: Any) -> None:
        b = self.bridge
        kind = b.config.sensors[name].kind
        if kind not in _SENSOR_TOPICS:
            return
        reading = b.world.read(name)  # this tick's, cached: reading again draws no noise
        frame = sensor_frame(v.ns, name, kind)
        i = v.index
        if kind == "depth":
            cfg = self.sensors[name]
            pubs[f"{name}/image"].publish(self._depth(reading, i, cfg, frame, stamp))
            pubs[f"{name}/camera_info"].publish(self._camera_info(cfg, frame, stamp))
        elif kind == "splat":
            pubs[f"{name}/image"].publish(self._rgb(reading, i, frame, stamp))
            pubs[f"{name}/camera_info"].publish(self._camera_info(self.sensors[name], frame, stamp))
        elif kind in ("lidar", "tof"):
            pts = reading.points("sensor")[i].detach().cpu().numpy()
            pubs[f"{name}/points"].publish(self._cloud(pts, frame, stamp))
        elif kind == "rangefinder":
            pubs[f"{name}/range"].publish(self._range(reading, i, self.sensors[name], frame,
                                                      stamp))  # fmt: skip

    def _depth(self, reading: Any, i: int, cfg: Any, frame: str, stamp: Any) -> Any:
        """REP 118: 32FC1, metres of z along the optical axis, NaN where no measurement."""
        valid = reading.valid[i].detach().cpu().numpy()
        if cfg.depth_mode == "z":
            z = reading.depth[i].detach().cpu().numpy()
        else:  # range along the ray -> z
            rz = reading.rays[:, 2].detach().cpu().numpy()
            z = (reading.range[i].detach().cpu().numpy() * rz).reshape(valid.shape)
        img = np.where(valid, z, np.nan).astype("<f4")
        msg = self.T["sensor_msgs/Image"]()
        msg.header.stamp, msg.header.frame_id = stamp, frame
        msg.height, msg.width = img.shape
        msg.encoding, msg.is_bigendian, msg.step = "32FC1", 0, 4 * img.shape[1]
        msg.data = img.tobytes()
        return msg

    def _rgb(self, reading: Any, i: int, frame: str, stamp: Any) -> Any:
        """A splat camera's colours as ``rgb8`` (rounded, clamped: what a camera delivers)."""
        from volary.sensors.splat import to_uint8

        px = to_uint8(reading.rgb[i]).numpy()
        msg = self.T["sensor_msgs/Image"]()
        msg.header.stamp, msg.header.frame_id = stamp, frame
        msg.height, msg.width = px.shape[:2]
        msg.encoding, msg.is_bigendian, msg.step = "rgb8", 0, 3 * px.shape[1]
        msg.data = np.ascontiguousarray(px).tobytes()
        return msg

    def _camera_info(self, cfg: Any, frame: str, stamp: Any) -> Any:
        """The pinhole model of the ray caster (no distortion), in ROS's pixel convention."""
        msg = self.T["sensor_msgs/CameraInfo"]()
        msg.header.stamp, msg.header.frame_id = stamp, frame
        msg.width, msg.height = int(cfg.width), int(cfg.height)
        msg.distortion_model, msg.d = "plumb_bob", [0.0] * 5
        mats = R.pinhole_matrices(*cfg.intrinsics.tolist())
        msg.k, msg.r, msg.p = mats["k"], mats["r"], mats["p"]
        return msg

    def _cloud(self, pts: np.ndarray, frame: str, stamp: Any) -> Any:
        """PointCloud2 of x, y, z float32 in the sensor frame; NaN points where no return."""
        field = self.T["sensor_msgs/PointField"]
        msg = self.T["sensor_msgs/PointCloud2"]()
        msg.header.stamp, msg.header.frame_id = stamp, frame
        msg.height, msg.width = 1, pts.shape[0]
        msg.fields = [field(name=c, offset=4 * k, datatype=field.FLOAT32, count=1)
                      for k, c in enumerate("xyz")]  # fmt: skip
        msg.is_bigendian, msg.point_step, msg.is_dense = False, 12, False
        msg.row_step = 12 * pts.shape[0]
        msg.data = np.ascontiguousarray(pts, dtype="<f4").tobytes()
        return msg

    def _range(self, reading: Any, i: int, cfg: Any, frame: str, stamp: Any) -> Any:
        msg = self.T["sensor_msgs/Range"]()
        msg.header.stamp, msg.header.frame_id = stamp, frame
        msg.radiation_type = msg.INFRARED
        msg.field_of_view = float(getattr(cfg, "fov", 0.0) or 0.0)
        msg.min_range, msg.max_range = float(cfg.min_range), float(cfg.max_range)
        valid = bool(reading.valid[i])
        msg.range = float(reading.range[i]) if valid else float("inf")
        return msg

    # ---- diagnostics ----------------------------------------------------------------------------
    def diagnostic(self, v: Vehicle, level: int, message: str) -> None:
        """One status on ``/diagnostics`` (level 0 OK, 1 WARN, 2 ERROR) for vehicle ``v``."""
        kv = self.T["diagnostic_msgs/KeyValue"]
        st = self.T["diagnostic_msgs/DiagnosticStatus"](
            level=bytes([level]), name=f"volary: /{v.ns}", message=message, hardware_id=v.ns,
            values=[kv(key="owner", value=str(v.owner)), kv(key="tick", value=str(
                self.bridge.world.tick)), kv(key="refused", value=str(v.refused))],
        )  # fmt: skip
        arr = self.T["diagnostic_msgs/DiagnosticArray"](status=[st])
        arr.header.stamp = self._stamp(self.bridge.world.tick * self.bridge.world.dt)
        self.diag.publish(arr)


_SENSOR_TOPICS: dict[str, tuple[tuple[str, str], ...]] = {
    "depth": (("image", "sensor_msgs/Image"), ("camera_info", "sensor_msgs/CameraInfo")),
    "splat": (("image", "sensor_msgs/Image"), ("camera_info", "sensor_msgs/CameraInfo")),
    "lidar": (("points", "sensor_msgs/PointCloud2"),),
    "tof": (("points", "sensor_msgs/PointCloud2"),),
    "rangefinder": (("range", "sensor_msgs/Range"),),
}


class _Pinhole:
    """What CameraInfo and /tf_static need of a splat camera: size, intrinsics, mount."""

    def __init__(self, width: int, height: int, intrinsics: Any, mount: Any) -> None:
        import torch

        self.width, self.height, self.mount = width, height, mount
        self.intrinsics = torch.tensor(intrinsics, dtype=torch.float64)

    @staticmethod
    def of_splat(cam: Any) -> _Pinhole:
        from volary.sensors.rays import FORWARD_CAMERA

        return _Pinhole(cam.width, cam.height, cam.intrinsics, cam.mount or FORWARD_CAMERA)
