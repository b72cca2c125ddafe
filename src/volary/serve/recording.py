"""A served run as a ROS 2 bag in MCAP storage, and its replay.

:class:`BagRecorder` writes, tick by tick, what went into the World and what came out, with ROS 2
message types (serialized to CDR by ``rosbags``, stored by its rosbag2 writer with the MCAP
storage plugin: a directory with ``metadata.yaml`` and one ``.mcap`` file that ``ros2 bag``,
Foxglove and rerun open). Frames and topics follow the ROS 2 bridge's (:mod:`volary.ros2.topics`,
REP 103/105/118): ``map`` (volary's world, z-up ENU) -> ``vehicle{i}/odom`` (identity: ground
truth) -> ``vehicle{i}/base_link`` (FLU body) -> each sensor's frame, its mount T_BS:
``vehicle{i}/{name}_optical_frame`` for a depth camera (OpenCV = ROS's optical frame),
``vehicle{i}/{name}_link`` for the others. Topics (``i`` the slot):

- ``/volary/config`` (std_msgs/String): the ``ServeConfig`` as JSON (the first message);
- ``/tf_static`` (tf2_msgs/TFMessage, once, at time 0): ``map`` -> ``vehicle{i}/odom`` and
  ``vehicle{i}/base_link`` -> every sensor frame of the slot;
- ``/tf`` (TFMessage, every tick): ``vehicle{i}/odom`` -> ``vehicle{i}/base_link``, each
  vehicle's pose after the tick;
- ``/clock`` (rosgraph_msgs/Clock): the World's time after each tick;
- inputs, replayed by :func:`replay` (their values exactly as the clients sent them):
  ``/vehicle{i}/setpoint`` (std_msgs/Float64MultiArray): a simulated vehicle's command;
  ``/actor{k}/pose_in`` (geometry_msgs/PoseStamped, ``map``): a dynamic actor's pose;
  ``/vehicle{i}/pose_in`` (PoseStamped, ``map``) and ``/twist_in`` (TwistStamped): a vehicle
  in the loop's pose and twist as volary's protocol takes them: linear the world (``map``)
  velocity, angular the body (FLU) rates; its ``frame_id`` is ``map``, the linear part's;
- ``/vehicle{i}/odom`` (nav_msgs/Odometry): the state after the tick, pose in
  ``vehicle{i}/odom``, twist in ``vehicle{i}/base_link`` (body velocity R^T v, body rates);
- ``/vehicle{i}/pose`` (PoseStamped, ``map``) and ``/vehicle{i}/twist`` (TwistStamped,
  ``vehicle{i}/base_link``: body velocity R^T v and body rates, as the odometry's twist);
- ``/vehicle{i}/imu`` (sensor_msgs/Imu, ``vehicle{i}/base_link``): a simulated vehicle's IMU;
- ``/vehicle{i}/{name}/image`` (sensor_msgs/Image 32FC1: z-depth in m, NaN where invalid) and
  ``/vehicle{i}/{name}/camera_info`` (sensor_msgs/CameraInfo: the pinhole model in ROS's
  pixel-centre convention, :func:`volary.serve.roscommon.ros_intrinsics`) for a depth camera;
  ``/vehicle{i}/{name}/points`` (PointCloud2 x, y, z float32 in the sensor frame, NaN where no
  return) for LiDAR and ToF; ``/vehicle{i}/{name}/range`` (sensor_msgs/Range) for a
  rangefinder; IR beacons as std_msgs/String JSON on ``/vehicle{i}/{name}/beacons``;
- ``/volary/events`` (std_msgs/String): JSON of joins (``reset``), faults, collisions and gate
  passages.

Every message of tick ``k`` has the log time ``k * dt`` (ns): the bag groups by tick. Inputs
are float64, so :func:`replay` feeds exactly the recorded commands and poses to a fresh World
(the ``ServeConfig`` travels as the first message) and reproduces the run bit for bit
(``tests/test_serve_recording.py``). Quaternions go to ROS's named fields through
:func:`volary.serve.roscommon.to_ros_quat`. ``/tf_static`` is recorded once with the writer's
default QoS: for ``ros2 bag play`` to latch it, override its durability to transient-local.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import ConfigDict, Field

from volary.errors import ConfigError, FileFormatError, MissingDependencyError, UnknownNameError
from volary.inputs import LIMITS, Positive, Strict, Text, regular_file, validated
from volary.serve.roscommon import body_velocity, pinhole_matrices, sensor_frame, to_ros_quat

CONFIG_TOPIC = "/volary/config"
EVENTS = "/volary/events"
MAP = "map"
TF = "tf2_msgs/msg/TFMessage"


def _rosbags() -> tuple[Any, Any, Any]:
    try:
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.typesys import Stores, get_typestore
    except ImportError as e:
        raise MissingDependencyError("rosbags", "record") from e
    return Writer, StoragePlugin, get_typestore(Stores.ROS2_HUMBLE)


def config_to_json(config: Any) -> str:
    return json.dumps(dataclasses.asdict(config), sort_keys=True)


class BagRecorder:
    """Writes a served run to ``path`` (a new rosbag2 directory; module docstring)."""

    def __init__(self, path: str | Path, config: Any, world: Any) -> None:
        writer_cls, plugin, self.ts = _rosbags()
        self.path = Path(path)
        if self.path.exists():
            raise ConfigError(f"record: {self.path} exists; give a new directory")
        self.config, self.world = config, world
        self.dt_ns = round(world.dt * 1e9)
        self.sensors = {n: s.ray_config() for n, s in config.sensors.items()}
        self.writer = writer_cls(self.path, version=9, storage_plugin=plugin.MCAP)
        self.writer.open()
        self.conns: dict[str, Any] = {}
        self.m = self.ts.types  # message classes by type name
        self.messages = 0
        config_msg = self.m["std_msgs/msg/String"](data=config_to_json(config))
        self._write(CONFIG_TOPIC, "std_msgs/msg/String", config_msg, 0)
        self._write("/tf_static", TF, self._tf_static(), 0)

    # ---- writing ----------------------------------------------------------------------------
    def _write(self, topic: str, typename: str, msg: Any, tick: int) -> None:
        conn = self.conns.get(topic)
        if conn is None:
            conn = self.conns[topic] = self.writer.add_connection(
                topic, typename, typestore=self.ts
            )
        self.writer.write(conn, tick * self.dt_ns, self.ts.serialize_cdr(msg, typename))
        self.messages += 1

    def event(self, tick: int, kind: str, **fields: Any) -> None:
        """A JSON line on /volary/events (a join's slot reset, a fault, ...)."""
        text = json.dumps({"tick": tick, "event": kind, **fields}, sort_keys=True, default=str)
        self._write(EVENTS, "std_msgs/msg/String", self.m["std_msgs/msg/String"](data=text), tick)

    def inputs(
        self,
        tick: int,
        inputs: dict[int, tuple[str, dict[str, Any]]],
        actors: dict[int, dict[str, Any]] | None = None,
    ) -> None:
        """What the clients sent for the tick that starts at ``tick`` (vehicles' commands and
        poses, actors' poses)."""
        for k, pose in sorted((actors or {}).items()):
            self._write(f"/actor{k}/pose_in", "geometry_msgs/msg/PoseStamped",
                        self._pose(self._stamp(tick), pose["pos"], pose["quat"]), tick)  # fmt: skip
        for slot, (role, d) in sorted(inputs.items()):
            if role == "vehicle":
                arr = self.m["std_msgs/msg/Float64MultiArray"](
                    layout=self._layout(), data=np.asarray(d["command"], dtype=np.float64)
                )
                self._write(f"/vehicle{slot}/setpoint", "std_msgs/msg/Float64MultiArray", arr, tick)
            else:
                stamp = self._stamp(tick)
                self._write(f"/vehicle{slot}/pose_in", "geometry_msgs/msg/PoseStamped",
                            self._pose(stamp, d["pos"], d["quat"]), tick)  # fmt: skip
                if d.get("vel") is not None or d.get("omega") is not None:
                    # as the protocol takes it: world velocity, body rates (module docstring)
                    self._write(f"/vehicle{slot}/twist_in", "geometry_msgs/msg/TwistStamped",
                                self._twist(stamp, MAP, d.get("vel"), d.get("omega")),
                                tick)  # fmt: skip

    def outputs(self, tick: int, obs: dict[int, dict[str, Any]]) -> None:
        """The state, sensors and events of every slot after the tick (the servers' ``obs``)."""
        w = self.world
        stamp = self._stamp(tick)
        clock = self.m["rosgraph_msgs/msg/Clock"](clock=stamp)
        self._write("/clock", "rosgraph_msgs/msg/Clock", clock, tick)
        st = w.state
        states = [
            {k: getattr(st, k)[slot].double().numpy() for k in ("pos", "quat", "vel", "omega")}
            for slot in range(w.b)
        ]
        tfs = [self._transform(stamp, f"{_ns(i)}/odom", f"{_ns(i)}/base_link", s["pos"],
                               s["quat"]) for i, s in enumerate(states)]  # fmt: skip
        self._write("/tf", TF, self.m[TF](transforms=tfs), tick)
        events: dict[str, Any] = {}
        for slot, s in enumerate(states):
            ns = _ns(slot)
            base = f"{ns}/base_link"
            vb = body_velocity(s["quat"], s["vel"])  # the twist of base_link, in base_link
            self._write(f"/{ns}/pose", "geometry_msgs/msg/PoseStamped",
                        self._pose(stamp, s["pos"], s["quat"]), tick)  # fmt: skip
            self._write(f"/{ns}/twist", "geometry_msgs/msg/TwistStamped",
                        self._twist(stamp, base, vb, s["omega"]), tick)  # fmt: skip
            self._write(f"/{ns}/odom", "nav_msgs/msg/Odometry",
                        self._odom(stamp, ns, s, vb), tick)  # fmt: skip
            o = obs.get(slot)
            if o is None:
                continue
            for name, reading in o["sensors"].items():
                self._sensor(slot, name, reading, stamp, tick)
            hit = {k: v for k, v in o["events"].items() if v}
            if hit:
                events[str(slot)] = hit
        if events:
            self.event(tick, "vehicle_events", slots=events)

    def close(self) -> None:
        self.writer.close()

    # ---- messages -----------------------------------------------------------------------------
    def _stamp(self, tick: int) -> Any:
        ns = tick * self.dt_ns
        return self.m["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9)

    def _header(self, stamp: Any, frame: str) -> Any:
        return self.m["std_msgs/msg/Header"](stamp=stamp, frame_id=frame)

    def _layout(self) -> Any:
        return self.m["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)

    def _quat(self, q_wxyz: Any) -> Any:
        x, y, z, w = to_ros_quat(np.asarray(q_wxyz, dtype=np.float64).reshape(4))
        return self.m["geometry_msgs/msg/Quaternion"](x=x, y=y, z=z, w=w)

    def _pose_of(self, pos: Any, quat_wxyz: Any) -> Any:
        m = self.m
        return m["geometry_msgs/msg/Pose"](
            position=m["geometry_msgs/msg/Point"](*(float(v) for v in pos)),
            orientation=self._quat(quat_wxyz),
        )

    def _pose(self, stamp: Any, pos: Any, quat_wxyz: Any) -> Any:
        pose = self._pose_of(pos, quat_wxyz)
        return self.m["geometry_msgs/msg/PoseStamped"](header=self._header(stamp, MAP), pose=pose)

    def _vec3(self, v: Any) -> Any:
        v = np.zeros(3) if v is None else np.asarray(v, dtype=np.float64)
        return self.m["geometry_msgs/msg/Vector3"](*(float(c) for c in v))

    def _twist(self, stamp: Any, frame: str, vel: Any, omega: Any) -> Any:
        m = self.m
        twist = m["geometry_msgs/msg/Twist"](linear=self._vec3(vel), angular=self._vec3(omega))
        return m["geometry_msgs/msg/TwistStamped"](header=self._header(stamp, frame),
                                                   twist=twist)  # fmt: skip

    def _odom(self, stamp: Any, ns: str, s: dict[str, np.ndarray], v_body: Any) -> Any:
        """Ground truth (REP 105, ``odom`` = ``map`` here): pose in ``<ns>/odom``, twist in
        ``<ns>/base_link`` (body velocity and body rates), covariances zero."""
        m = self.m
        twist = m["geometry_msgs/msg/Twist"](linear=self._vec3(v_body),
                                             angular=self._vec3(s["omega"]))  # fmt: skip
        return m["nav_msgs/msg/Odometry"](
            header=self._header(stamp, f"{ns}/odom"), child_frame_id=f"{ns}/base_link",
            pose=m["geometry_msgs/msg/PoseWithCovariance"](
                pose=self._pose_of(s["pos"], s["quat"]), covariance=np.zeros(36)),
            twist=m["geometry_msgs/msg/TwistWithCovariance"](twist=twist,
                                                              covariance=np.zeros(36)),
        )  # fmt: skip

    def _transform(self, stamp: Any, parent: str, child: str, t: Any, q_wxyz: Any) -> Any:
        m = self.m
        tr = m["geometry_msgs/msg/Transform"](
            translation=self._vec3(np.asarray(t, dtype=np.float64)), rotation=self._quat(q_wxyz)
        )
        return m["geometry_msgs/msg/TransformStamped"](
            header=self._header(stamp, parent), child_frame_id=child, transform=tr
        )

    def _tf_static(self) -> Any:
        """``map`` -> ``vehicle{i}/odom`` (identity) and ``vehicle{i}/base_link`` -> each of the
        slot's sensor frames (the sensor's mount T_BS), as the bridge's ``/tf_static``."""
        stamp = self._stamp(0)
        out = []
        for i, slot in enumerate(self.config.slots):
            out.append(self._transform(stamp, MAP, f"{_ns(i)}/odom", (0, 0, 0), (1, 0, 0, 0)))
            for name in slot.sensors:
                cfg = self.sensors.get(name)
                if cfg is None:  # beacons, splat: no mount of their own
                    continue
                frame = sensor_frame(_ns(i), name, self.config.sensors[name].kind)
                out.append(self._transform(stamp, f"{_ns(i)}/base_link", frame,
                                           cfg.mount.translation, cfg.mount.rotation))  # fmt: skip
        return self.m[TF](transforms=out)

    def _sensor(self, slot: int, name: str, r: dict[str, Any], stamp: Any, tick: int) -> None:
        ns, m = _ns(slot), self.m
        if name == "imu":
            cov = np.zeros(9)
            imu = m["sensor_msgs/msg/Imu"](
                header=self._header(stamp, f"{ns}/base_link"),
                orientation=m["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
                orientation_covariance=np.array([-1.0, *cov[1:]]),  # REP 145: no orientation
                angular_velocity=self._vec3(r["gyro"]),
                angular_velocity_covariance=cov,
                linear_acceleration=self._vec3(r["accel"]),
                linear_acceleration_covariance=cov,
            )
            self._write(f"/{ns}/imu", "sensor_msgs/msg/Imu", imu, tick)
            return
        kind = self.config.sensors[name].kind
        topic, frame = f"/{ns}/{name}", sensor_frame(ns, name, kind)
        if kind == "depth":
            cfg = self.sensors[name]
            self._write(f"{topic}/image", "sensor_msgs/msg/Image",
                        self._depth(name, r, cfg, frame, stamp), tick)  # fmt: skip
            self._write(f"{topic}/camera_info", "sensor_msgs/msg/CameraInfo",
                        self._camera_info(cfg, frame, stamp), tick)  # fmt: skip
        elif kind in ("lidar", "tof"):
            rays = self.world.read(name).rays.double().numpy()  # this tick's cached reading
            rng = np.where(r["valid"], r["range"], np.nan).reshape(-1, 1)
            self._write(f"{topic}/points", "sensor_msgs/msg/PointCloud2",
                        self._cloud(stamp, frame, rng * rays), tick)  # fmt: skip
        elif kind == "rangefinder":
            cfg = self.sensors[name]
            valid = bool(np.asarray(r["valid"]).reshape(-1)[0]) if "valid" in r else True
            rng = m["sensor_msgs/msg/Range"](
                header=self._header(stamp, frame), radiation_type=1,
                field_of_view=float(getattr(cfg, "fov", 0.0) or 0.0),
                min_range=float(cfg.min_range), max_range=float(cfg.max_range),
                range=float(np.asarray(r["range"]).reshape(-1)[0]) if valid else float("inf"),
            )  # fmt: skip
            self._write(f"{topic}/range", "sensor_msgs/msg/Range", rng, tick)
        else:  # beacons: no standard message; pixels and visibility as JSON
            data = {k: np.asarray(v).tolist() for k, v in r.items()}
            msg = m["std_msgs/msg/String"](data=json.dumps(data))
            self._write(f"{topic}/beacons", "std_msgs/msg/String", msg, tick)

    def _depth(self, name: str, r: dict[str, Any], cfg: Any, frame: str, stamp: Any) -> Any:
        """REP 118: 32FC1, metres of z along the optical axis, NaN where no measurement."""
        valid = np.asarray(r["valid"], dtype=bool)
        if cfg.depth_mode == "z":
            z = np.asarray(r["depth"], dtype=np.float64)
        else:  # range along the ray -> z
            rz = self.world.read(name).rays[:, 2].double().numpy()  # this tick's, cached
            z = (np.asarray(r["range"], dtype=np.float64).reshape(-1) * rz).reshape(valid.shape)
        img = np.ascontiguousarray(np.where(valid, z, np.nan), dtype="<f4")
        h, wd = img.shape
        return self.m["sensor_msgs/msg/Image"](
            header=self._header(stamp, frame), height=h, width=wd, encoding="32FC1",
            is_bigendian=0, step=4 * wd, data=img.view(np.uint8).reshape(-1),
        )  # fmt: skip

    def _camera_info(self, cfg: Any, frame: str, stamp: Any) -> Any:
        """The ray caster's pinhole model (no distortion) in ROS's pixel-centre convention."""
        mats = pinhole_matrices(*np.asarray(cfg.intrinsics, dtype=np.float64).tolist())
        return self.m["sensor_msgs/msg/CameraInfo"](
            header=self._header(stamp, frame), height=int(cfg.height), width=int(cfg.width),
            distortion_model="plumb_bob", d=np.zeros(5),
            **{name: np.array(v) for name, v in mats.items()},
            binning_x=0, binning_y=0,
            roi=self.m["sensor_msgs/msg/RegionOfInterest"](x_offset=0, y_offset=0, height=0,
                                                           width=0, do_rectify=False),
        )  # fmt: skip

    def _cloud(self, stamp: Any, frame: str, points: Any) -> Any:
        m = self.m
        pts = np.ascontiguousarray(np.asarray(points, dtype="<f4").reshape(-1, 3))
        fields = [
            m["sensor_msgs/msg/PointField"](name=c, offset=4 * i, datatype=7, count=1)
            for i, c in enumerate("xyz")
        ]
        return m["sensor_msgs/msg/PointCloud2"](
            header=self._header(stamp, frame), height=1, width=len(pts),
            fields=fields, is_bigendian=False, point_step=12, row_step=12 * len(pts),
            data=pts.view(np.uint8).reshape(-1), is_dense=bool(np.isfinite(pts).all()),
        )  # fmt: skip


def _ns(slot: int) -> str:
    return f"vehicle{slot}"


# ---- reading back --------------------------------------------------------------------------
class _Slot(Strict):
    role: Text
    platform: Text
    sensors: list[Text]


class _Sensor(Strict):
    kind: Text
    preset: Text
    rate_hz: Annotated[float, Field(strict=True, gt=0, le=10_000)] | None = None


class _Actor(Strict):
    shape: Text
    size: tuple[Positive, Positive, Positive]
    mesh: Text | None = None


class _ConfigDoc(Strict):
    """The ``ServeConfig`` JSON of ``/volary/config`` (:func:`config_to_json`); the rules
    between fields are :class:`~volary.serve.world.ServeConfig`'s own. A field added to
    ``ServeConfig`` later passes through to it."""

    model_config = ConfigDict(extra="allow", frozen=True)

    slots: Annotated[list[_Slot], Field(min_length=1, max_length=1024)]
    scene: Text | None
    seed: Annotated[int, Field(strict=True, ge=0)]
    control: Text
    control_hz: Annotated[float, Field(strict=True, ge=1, le=10_000)]  # as volary serve's
    physics_hz: Annotated[float, Field(strict=True, gt=0, le=1e6)]
    imu: Text | None
    sensors: dict[Text, _Sensor]
    sim_seed: Annotated[int, Field(strict=True, ge=0)]
    actors: list[_Actor]
    scene_params: dict[Text, Any]
    noise_keys: Annotated[list[Annotated[int, Field(strict=True, ge=0, lt=2**31)]],
                          Field(max_length=1024)] = []  # fmt: skip


def _bag_files(path: Any) -> Path:
    """``path`` as a rosbag2 directory whose every entry is a regular file (a FIFO or a link
    to ``/dev/zero`` would block or never end), ``metadata.yaml`` within the text-file limit."""
    if not isinstance(path, str | os.PathLike) or "\x00" in os.fspath(path):
        raise ConfigError(f"path: expected a recording directory, got {path!r}")
    p = Path(path)
    if not p.is_dir():
        what = "no such directory" if not p.exists() else "not a directory"
        raise FileFormatError(
            f"{p}: expected a recording (a rosbag2 directory with metadata.yaml), {what}"
        )
    regular_file(p / "metadata.yaml", "recording's metadata", int(LIMITS["text_file"].hi))
    for entry in sorted(p.iterdir()):
        regular_file(entry, "recording's file")
    return p


def _config(text: str, source: str) -> Any:
    """The recorded ``ServeConfig``: JSON of the declared fields, then its own rules."""
    from volary.serve.world import ActorSpec, SensorSpec, ServeConfig, SlotSpec

    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise FileFormatError(f"{source}: expected ServeConfig JSON ({e})") from None
    d = validated(_ConfigDoc, doc, source).model_dump()
    _known_names(d, source)
    ratio = d["physics_hz"] / d["control_hz"]  # the Simulator's rule, checked before replaying
    if abs(ratio - round(ratio)) > 1e-9 or round(ratio) < 1:
        raise FileFormatError(
            f"{source}: control_hz: expected a divisor of physics_hz={d['physics_hz']:g}, "
            f"got {d['control_hz']:g}"
        )
    try:
        return ServeConfig(
            slots=tuple(
                SlotSpec(s["role"], s["platform"], tuple(s["sensors"])) for s in d["slots"]
            ),
            sensors={k: SensorSpec(**v) for k, v in d["sensors"].items()},
            actors=tuple(ActorSpec(a["shape"], tuple(a["size"]), a["mesh"]) for a in d["actors"]),
            noise_keys=tuple(d["noise_keys"]),
            **{k: v for k, v in d.items() if k not in ("slots", "sensors", "actors", "noise_keys")},
        )
    except ConfigError as e:
        raise FileFormatError(f"{source}: {e}") from None
    except TypeError as e:  # a key ServeConfig does not take
        raise FileFormatError(f"{source}: {e}") from None


def _known_names(d: dict[str, Any], source: str) -> None:
    """The scene (a scenario type, a race track or None) and the slots' platforms exist:
    replaying an unknown one would fail only once the World is built."""
    from volary.platforms import get as platform
    from volary.serve.world import TRACKS
    from volary.worlds.scenarios import SCENARIOS

    try:
        if d["scene"] is not None and d["scene"] not in TRACKS:
            SCENARIOS.get(d["scene"])
        for s in d["slots"]:
            platform(s["platform"])
    except UnknownNameError as e:
        raise FileFormatError(f"{source}: {e}") from None


def read_bag(path: str | Path) -> tuple[Any, dict[int, list[tuple[str, Any]]]]:
    """(ServeConfig, {tick: [(topic, message), ...]}) of a recording, messages deserialized.
    ``FileFormatError`` in one line naming the recording for anything else: not a directory
    of regular files, not a rosbag2 bag, no ``/volary/config`` first, a config whose fields
    are not :class:`~volary.serve.world.ServeConfig`'s, a message before time 0, a damaged
    message."""
    try:
        from rosbags.rosbag2 import Reader
        from rosbags.typesys import Stores, get_typestore
    except ImportError as e:
        raise MissingDependencyError("rosbags", "record") from e
    path = _bag_files(path)
    ts = get_typestore(Stores.ROS2_HUMBLE)
    by_tick: dict[int, list[tuple[str, Any]]] = defaultdict(list)
    try:
        with Reader(path) as reader:
            config, dt_ns = None, 0
            for conn, t, raw in reader.messages():
                msg: Any = ts.deserialize_cdr(raw, conn.msgtype)
                if conn.topic == CONFIG_TOPIC and config is None:
                    config = _config(msg.data, f"{path}: {CONFIG_TOPIC}")
                    dt_ns = round(1e9 / config.control_hz)
                    continue
                if config is None:
                    raise FileFormatError(
                        f"{path}: not a volary recording (no {CONFIG_TOPIC} before {conn.topic})"
                    )
                if t < 0:
                    raise FileFormatError(f"{path}: {conn.topic}: a message at {t} ns, before 0")
                tick = round(t / dt_ns)
                by_tick[tick].append((conn.topic, msg))
        if config is None:
            raise FileFormatError(f"{path}: not a volary recording (no {CONFIG_TOPIC})")
    except (FileFormatError, MissingDependencyError):
        raise
    except Exception as e:  # noqa: BLE001 - rosbags raises several types on a broken bag
        detail = " ".join(str(e).split())[:200]
        raise FileFormatError(f"{path}: not a readable rosbag2 recording ({type(e).__name__}: "
                              f"{detail})") from None  # fmt: skip
    return config, dict(by_tick)
