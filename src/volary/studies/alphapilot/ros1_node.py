"""An AlphaPilot contestant as a ROS 1 node on FlightGoggles' interface (issue 57).

Any :class:`~volary.studies.alphapilot.interface.Contestant` (default the reference racer,
:class:`~volary.studies.alphapilot.sensor_racer.SensorRacer`) races through the topics a
FlightGoggles 2019 stack used, served by ``volary ros1 serve`` (:mod:`volary.ros1`) or any
simulator speaking them. Run it as ``python -m volary.studies.alphapilot.ros1_node`` with
``ROS_MASTER_URI`` set to a loopback master (the node's own IP is 127.0.0.1).

**The briefing** (:func:`briefing_from_ros`, the one place it is built) comes from what the
interface gives: the parameters under ``/uav`` (gate names in course order, every gate's
``nominal_location`` and ``perturbation_bound``, ``init_pose``, the vehicle's mass, inertia,
arm, rotor constants, top speed, motor time constant, drag, process noise, the IMU's
per-sample variances, the laser's variance and range, the collider radius, the time limit),
the left camera's ``camera_info`` (size and intrinsics) and ``/tf_static`` (the camera's
mount). What FlightGoggles fixed in its configuration rather than published is taken from
volary's documented copies of it: the quad-X rotor layout and spin directions, no minimum rotor
speed, no linear drag (platform ``flightgoggles``), the IMU rate (960 Hz; its bias model was not
published in 2019 and is not briefed), the 60 Hz render rate of the beacons and the laser, the
gates' frame border and depth and the arena's bounds (``alphapilot_2019``), the floor at z = 0.

**Observations**: every IMU message is one control step. FlightGoggles' frames are REP 103's
(``uav/imu`` is FLU, the world ENU), which are volary's body and world frames, so vectors pass
unchanged and only quaternions change order (:mod:`volary.serve.roscommon`). A tick's
``ir_beacons`` and rangefinder messages carry its stamp; the node waits for them (on the 60 Hz
grid) before acting on the IMU message of that stamp, since ROS 1 delivers each topic on its own
connection. The rangefinder's FlightGoggles sign (negative, along -z of ``uav/imu``) is undone.

**Arming and timing**: the step-0 command (the contestant's answer to the start pose) is sent
once on a ``/clock`` tick of the beacon grid at least ``reset_timeout`` after the start, its
thrust raised to ``min_arming_thrust`` when below (FlightGoggles 2019's arming rule), and again
after ``ARM_RETRY_S`` wall seconds without an IMU message. The first IMU message is step 1; each
answer is one ``mav_msgs/RateThrust`` on ``/uav/input/rateThrust`` (lock-step: the simulator
waits for it). The lap's result is the simulator's (``/volary/results``, ``/volary/score``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from volary.errors import ConfigError, VolaryError
from volary.serve import roscommon as R
from volary.studies.alphapilot.interface import (
    DEFAULT_CONTESTANT,
    BeaconReport,
    Briefing,
    ChallengeObservation,
    Contestant,
    PublishedImu,
    RangeReport,
    make_contestant,
)

PLATFORM = "flightgoggles"  # the catalogue's copy of FlightGoggles' vehicle configuration
CAMERA_PRESET = RANGER_PRESET = "flightgoggles"
IMU_RATE_HZ = 960.0  # FlightGoggles' IMU samples at its 960 Hz dynamics step (configuration)
RENDER_HZ = 60.0  # FlightGoggles' render rate: IR beacons and the laser (configuration)
FLOOR_Z = 0.0  # m
ARM_RETRY_S = 1.0  # wall s without an IMU message before the arming command is sent again
FRAME_WAIT_S = 2.0  # wall s to wait for a tick's beacons and range before acting without them
RATE_THRUST = "/uav/input/rateThrust"
DTYPE = torch.float32  # the simulator's precision (messages carry float32 beacons and ranges)


# ---- the briefing -------------------------------------------------------------------------------
@dataclass(frozen=True)
class CameraInfo:
    """The left camera as ``camera_info`` and ``/tf_static`` give it: size (px), row-major K,
    and the optical frame's pose in ``uav/imu`` (translation m, ROS quaternion x, y, z, w)."""

    width: int
    height: int
    k: tuple[float, ...]
    translation: tuple[float, float, float]
    rotation_xyzw: tuple[float, float, float, float]


def briefing_from_ros(
    uav: Mapping[str, Any],
    camera: CameraInfo,
    control_hz: float,
) -> Briefing:
    """The contestant's :class:`Briefing` from the ``/uav`` parameter tree (as
    ``rospy.get_param("/uav")`` returns it), the camera and the control rate (module
    docstring: which values are published, which are FlightGoggles' configuration)."""
    if not (math.isfinite(control_hz) and control_hz > 0):
        raise ConfigError(f"control_hz: expected a rate > 0 Hz, got {control_hz!r}")
    course = course_from_params(uav)
    return Briefing(
        course=course,
        n_envs=1,
        vehicle=vehicle_from_params(uav),
        dt=1.0 / control_hz,
        imu=imu_from_params(uav),
        camera=camera_from_ros(camera),
        beacon_rate_hz=RENDER_HZ,
        rangefinder=rangefinder_from_params(uav),
        range_rate_hz=RENDER_HZ,
        start_pos=tuple(float(v) for v in course.start),  # type: ignore[arg-type]
        start_yaw=float(course.start_yaw),
        floor_z=FLOOR_Z,
    )


def _section(uav: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    sec = uav.get(name)
    if not isinstance(sec, Mapping):
        raise ConfigError(f"/uav/{name}: expected FlightGoggles' parameters there, found none")
    return sec


def _number(sec: Mapping[str, Any], where: str, key: str) -> float:
    try:
        v = float(sec[key])
    except (KeyError, TypeError, ValueError):
        raise ConfigError(f"/uav/{where}/{key}: expected a number, got {sec.get(key)!r}") from None
    if not math.isfinite(v):
        raise ConfigError(f"/uav/{where}/{key}: expected a finite number, got {v!r}")
    return v


def _gate_number(name: str) -> int:
    digits = "".join(c for c in name if c.isascii() and c.isdigit())
    return int(digits) if digits else 0


def course_from_params(uav: Mapping[str, Any]) -> Any:
    """The nominal course: every gate with a ``nominal_location`` (object id = its number,
    corner k = IR marker k + 1), the course order of ``gate_names``, the perturbation bounds,
    the start of ``init_pose``; frame border/depth and arena bounds from ``alphapilot_2019``."""
    from volary.worlds import Gate, SceneSpec, alphapilot_2019

    ref = alphapilot_2019()
    known = {g.name: g for g in ref.gates}
    names = sorted((k for k, v in uav.items() if isinstance(v, Mapping) and "nominal_location"
                    in v), key=_gate_number)  # fmt: skip
    gates = []
    for n in names:
        corners = np.asarray(uav[n]["nominal_location"], dtype=float)
        if corners.shape != (4, 3) or not np.isfinite(corners).all():
            raise ConfigError(f"/uav/{n}/nominal_location: expected 4 finite [x, y, z] corners")
        c = tuple(tuple(float(v) for v in row) for row in corners)
        base = known.get(n)
        gates.append(Gate(c, name=n, object_id=_gate_number(n)) if base is None
                     else replace(base, corners=c))  # fmt: skip
    order = [str(n) for n in uav.get("gate_names", [])]
    missing = [n for n in order if n not in names]
    if not order or missing:
        raise ConfigError(f"/uav/gate_names: expected gates with a nominal_location, got {order}"
                          f" ({missing} have none)")  # fmt: skip
    pert = {n: tuple(float(v) for v in uav[n].get("perturbation_bound", (0.0, 0.0, 0.0)))
            for n in names}  # fmt: skip
    dyn = _section(uav, "flightgoggles_uav_dynamics")
    pose = [float(v) for v in dyn.get("init_pose", ())]
    if len(pose) != 7 or not all(map(math.isfinite, pose)):
        raise ConfigError(f"/uav/flightgoggles_uav_dynamics/init_pose: expected [x, y, z, qx, "
                          f"qy, qz, qw], got {dyn.get('init_pose')!r}")  # fmt: skip
    q = R.from_ros_quat(*pose[3:])
    index = [names.index(n) for n in order]
    meta = {
        "source": "ROS parameters /uav",
        "course": str(uav.get("challenge_name", "")),
        "order": order,
        "order_index": index,
        "gate_width": float(uav.get("gate_width", ref.meta["gate_width"])),
        "inflation": float(uav.get("inflation", ref.meta["inflation"])),
        "timeout_s": float(uav.get("timeout", ref.meta["timeout_s"])),
        "perturbation": pert,
        "start_quaternion_wxyz": tuple(float(v) for v in q / np.linalg.norm(q)),
    }
    goal = tuple(float(v) for v in gates[index[-1]].center)
    return SceneSpec(name=ref.name, bounds_min=ref.bounds_min, bounds_max=ref.bounds_max,
                     gates=tuple(gates), start=tuple(pose[:3]), start_yaw=R.yaw_of(q),
                     goal=goal, meta=meta)  # type: ignore[arg-type]  # fmt: skip


def vehicle_from_params(uav: Mapping[str, Any]) -> Any:
    """The vehicle (one env, float64 of the simulator's float32, as the in-process briefing):
    the published dynamics parameters over platform ``flightgoggles`` (rotor layout)."""
    from volary.dynamics import VehicleParams
    from volary.platforms import get

    where = "flightgoggles_uav_dynamics"
    dyn = _section(uav, where)
    f = {k: _number(dyn, where, k) for k in (
        "vehicle_mass", "vehicle_inertia_xx", "vehicle_inertia_yy", "vehicle_inertia_zz",
        "moment_arm", "thrust_coefficient", "torque_coefficient", "max_prop_speed",
        "motor_time_constant", "drag_coefficient", "linear_process_noise",
        "angular_process_noise")}  # fmt: skip
    radius = _number(_section(uav, "flightgoggles_ros_bridge"), "flightgoggles_ros_bridge",
                     "collider_radius")  # fmt: skip
    af = get(PLATFORM)
    pos = np.asarray(af.rotor_positions, dtype=float)
    pos[:, :2] *= f["moment_arm"] / float(np.linalg.norm(pos[0, :2]))
    n = len(af.rotor_positions)
    jxx, jyy, jzz = f["vehicle_inertia_xx"], f["vehicle_inertia_yy"], f["vehicle_inertia_zz"]
    c = f["drag_coefficient"]
    af = replace(
        af,
        mass=f["vehicle_mass"],
        inertia=((jxx, 0.0, 0.0), (0.0, jyy, 0.0), (0.0, 0.0, jzz)),
        rotor_positions=tuple(tuple(float(v) for v in p) for p in pos),
        k_f=(f["thrust_coefficient"],) * n,
        k_m=(f["torque_coefficient"],) * n,
        max_rotor_speed=(f["max_prop_speed"],) * n,
        motor_tau_up=(f["motor_time_constant"],) * n,
        motor_tau_down=(f["motor_time_constant"],) * n,
        drag_quadratic=(c, c, c),
        force_noise=math.sqrt(f["linear_process_noise"]),
        moment_noise=math.sqrt(f["angular_process_noise"]),
        collider_radius=radius,
    )
    return VehicleParams.from_airframes(af, 1, dtype=DTYPE).to(dtype=torch.float64)


def imu_from_params(uav: Mapping[str, Any]) -> PublishedImu:
    """The IMU as 2019 published it: the per-sample variances as noise densities at
    FlightGoggles' 960 Hz (no bias model: a contestant assumes its own)."""
    where = "flightgoggles_imu"
    sec = _section(uav, where)
    var_a = _number(sec, where, "accelerometer_variance")
    var_g = _number(sec, where, "gyroscope_variance")
    return PublishedImu(math.sqrt(var_a / IMU_RATE_HZ), math.sqrt(var_g / IMU_RATE_HZ),
                        IMU_RATE_HZ)  # fmt: skip


def rangefinder_from_params(uav: Mapping[str, Any]) -> Any:
    """The downward laser: published variance and range over preset ``flightgoggles``."""
    from volary.sensors import rangefinder_config

    where = "flightgoggles_laser"
    sec = _section(uav, where)
    return replace(rangefinder_config(RANGER_PRESET),
                   max_range=_number(sec, where, "rangefinder_max_range"),
                   noise_std=math.sqrt(_number(sec, where, "rangefinder_variance")))  # fmt: skip


def camera_from_ros(info: CameraInfo) -> Any:
    """The beacon camera: size and focal lengths of ``camera_info`` (a centred principal
    point, as volary's pinhole), the mount of ``/tf_static`` (``uav/imu`` -> the optical
    frame), the rest of preset ``flightgoggles``."""
    from volary.sensors import camera_config
    from volary.sensors.rays import Mount

    w, h = int(info.width), int(info.height)
    fx, cx, fy, cy = (float(info.k[i]) for i in (0, 2, 4, 5))
    if w <= 0 or h <= 0 or not (fx > 0 and fy > 0):
        raise ConfigError(f"camera_info: expected a size and K > 0, got {w}x{h}, K={info.k}")
    if abs(cx - w / 2) > 0.5 or abs(cy - h / 2) > 0.5:
        raise ConfigError(f"camera_info: expected the principal point at the image centre "
                          f"({w / 2}, {h / 2}) +- 0.5 px, got ({cx}, {cy})")  # fmt: skip
    mount = Mount(tuple(info.translation), tuple(R.from_ros_quat(*info.rotation_xyzw)))
    return replace(camera_config(CAMERA_PRESET), width=w, height=h,
                   hfov=2 * math.atan(w / (2 * fx)), vfov=2 * math.atan(h / (2 * fy)),
                   mount=mount)  # fmt: skip


# ---- messages -> observation --------------------------------------------------------------------
def stamp_of(msg: Any) -> float:
    """A message header's stamp in s."""
    s = msg.header.stamp
    return R.stamp_seconds(int(s.secs), int(s.nsecs))


def imu_sample(msg: Any) -> tuple[Tensor, Tensor]:
    """(accel (1, 3) m/s^2 specific force, gyro (1, 3) rad/s) of a ``sensor_msgs/Imu`` in
    ``uav/imu`` (FLU, REP 103): volary's body frame, so the vectors pass unchanged."""
    a, g = msg.linear_acceleration, msg.angular_velocity
    return (torch.tensor([[a.x, a.y, a.z]], dtype=DTYPE),
            torch.tensor([[g.x, g.y, g.z]], dtype=DTYPE))  # fmt: skip


def beacon_report(msg: Any, course: Any) -> BeaconReport:
    """A ``flightgoggles/IRMarkerArray`` as a :class:`BeaconReport` over the course's 4 G slots
    (slot 4 g + k: gate g of ``course.gates``, corner k = markerID - 1); markers of unknown
    gates or corners are left out."""
    index = {g.name: i for i, g in enumerate(course.gates)}
    k = 4 * len(course.gates)
    pixels = torch.full((1, k, 2), math.nan, dtype=DTYPE)
    visible = torch.zeros(1, k, dtype=torch.bool)
    for m in msg.markers:
        g, marker = index.get(m.landmarkID.data), m.markerID.data
        if g is None or not marker.isdigit() or not 1 <= int(marker) <= 4:
            continue
        slot = 4 * g + int(marker) - 1
        pixels[0, slot, 0], pixels[0, slot, 1] = float(m.x), float(m.y)
        visible[0, slot] = True
    ids = torch.tensor([g.object_id for g in course.gates], dtype=torch.int64)
    gate_id = ids.repeat_interleave(4)[None]
    corner = (torch.arange(k, dtype=torch.int64) % 4)[None]
    return BeaconReport(pixels, visible, gate_id, corner)


def range_report(msg: Any, ranger: Any) -> RangeReport:
    """A ``sensor_msgs/Range`` in FlightGoggles' sign (negative along -z of ``uav/imu``) as a
    :class:`RangeReport`: the distance, valid below ``ranger``'s and the message's own maximum
    (``-min_range``). No return is published at the maximum; every other value is a return,
    a noisy one under ``ranger.min_range`` included (the sensor decides validity on the true
    distance and then adds noise, so in process such a reading is valid too)."""
    d = -float(msg.range)
    top = min(-float(msg.min_range), float(ranger.max_range))
    ok = math.isfinite(d) and d < top
    return RangeReport(torch.tensor([d if ok else float(ranger.max_range)], dtype=DTYPE),
                       torch.tensor([ok]))  # fmt: skip


def observation(
    step: int, dt: float, imu: Any | None, beacons: Any | None, rng: Any | None, brief: Briefing
) -> ChallengeObservation:
    """Control step ``step``'s observation from its messages (None: none this step)."""
    accel, gyro = imu_sample(imu) if imu is not None else (None, None)
    return ChallengeObservation(
        step=step,
        time=torch.tensor([step * dt], dtype=torch.float64),
        accel=accel,
        gyro=gyro,
        beacons=None if beacons is None else beacon_report(beacons, brief.course),
        range=None if rng is None or brief.rangefinder is None
        else range_report(rng, brief.rangefinder),
    )  # fmt: skip


def checked_command(cmd: Any) -> tuple[float, float, float, float]:
    """The contestant's (1, 4) CTBR answer as four finite floats, or a ConfigError."""
    if not isinstance(cmd, Tensor) or tuple(cmd.shape) != (1, 4):
        shape = tuple(cmd.shape) if isinstance(cmd, Tensor) else type(cmd).__name__
        raise ConfigError(f"contestant: act() must return a (1, 4) tensor [thrust N, w_x, w_y, "
                          f"w_z rad/s], got {shape}")  # fmt: skip
    v = tuple(float(x) for x in cmd[0])
    if not all(map(math.isfinite, v)):
        raise ConfigError(f"contestant: act() returned a non-finite command {v}")
    return v  # type: ignore[return-value]


# ---- the node -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeOptions:
    """How the node races (module docstring). ``control_hz``: the simulator's tick (one IMU
    message per tick); ``time_limit_s``: sim s after arming to give up; ``setup_timeout_s``:
    wall s to wait for the parameters, camera_info, /tf_static and a first beacon frame."""

    contestant: str = DEFAULT_CONTESTANT
    control_hz: float = 240.0
    time_limit_s: float = 60.0
    setup_timeout_s: float = 120.0
    out: str | None = None
    msg_cache: str | None = None

    def __post_init__(self) -> None:
        for name in ("control_hz", "time_limit_s", "setup_timeout_s"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ConfigError(f"{name}: expected a value > 0, got {v!r}")


class _Frames:
    """Beacon and range messages by stamp (ns), filled by rospy's threads."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.by_stamp: dict[str, dict[int, Any]] = {"ir": {}, "range": {}}
        self.latest: dict[str, Any] = {}

    def put(self, kind: str, msg: Any) -> None:
        ns = round(stamp_of(msg) * R.NS)
        with self.cond:
            self.by_stamp[kind][ns] = msg
            self.latest[kind] = msg
            self.cond.notify_all()

    def take(self, kind: str, ns: int, until: float) -> Any | None:
        """The ``kind`` message of stamp ``ns``, waiting until monotonic ``until``; older
        ones are dropped."""
        with self.cond:
            while ns not in self.by_stamp[kind] and time.monotonic() < until:
                self.cond.wait(0.05)
            msg = self.by_stamp[kind].get(ns)
            self.by_stamp[kind] = {k: v for k, v in self.by_stamp[kind].items() if k > ns}
            return msg


class ContestantNode:
    """The contestant on FlightGoggles' topics (module docstring)."""

    def __init__(self, rospy: Any, contestant: Contestant, options: NodeOptions) -> None:
        self.rospy, self.racer, self.options = rospy, contestant, options
        self.frames = _Frames()
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.camera: dict[str, Any] = {}
        self.results: str | None = None
        self.score: float | None = None
        self.collisions = 0
        self.step = 0
        self.t_arm: float | None = None  # s sim: the tick the arming command flew
        self.arm_sent: float | None = None  # monotonic s of the last arming command
        self.missing = {"ir": 0, "range": 0}  # grid ticks acted on without that message
        self.skipped = 0  # IMU messages that were not the next step
        self.wall_flight: float | None = None

    # ---- setup --------------------------------------------------------------------------------
    def subscribe(self) -> None:
        from flightgoggles.msg import IRMarkerArray
        from mav_msgs.msg import RateThrust
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import CameraInfo as CameraInfoMsg
        from sensor_msgs.msg import Imu, Range
        from std_msgs.msg import Empty, Float64, String
        from tf2_msgs.msg import TFMessage

        rospy = self.rospy
        self.RateThrust = RateThrust
        self.pub = rospy.Publisher(RATE_THRUST, RateThrust, queue_size=10, tcp_nodelay=True)
        sub = rospy.Subscriber
        sub("/tf_static", TFMessage, self._on_tf_static)
        sub("/uav/camera/left/camera_info", CameraInfoMsg, self._on_camera_info)
        sub("/uav/camera/left/ir_beacons", IRMarkerArray, lambda m: self.frames.put("ir", m),
            tcp_nodelay=True)  # fmt: skip
        sub("/uav/sensors/downward_laser_rangefinder", Range,
            lambda m: self.frames.put("range", m), tcp_nodelay=True)  # fmt: skip
        sub("/uav/sensors/imu", Imu, self._on_imu, tcp_nodelay=True)
        sub("/clock", Clock, self._on_clock, tcp_nodelay=True)
        sub("/uav/collision", Empty, self._on_collision)
        sub("/volary/results", String, self._on_results)
        sub("/volary/score", Float64, self._on_score)

    def _on_tf_static(self, msg: Any) -> None:
        for tr in msg.transforms:
            if tr.child_frame_id.lstrip("/") == "uav/camera/left":
                t, q = tr.transform.translation, tr.transform.rotation
                self.camera["mount"] = ((t.x, t.y, t.z), (q.x, q.y, q.z, q.w))

    def _on_camera_info(self, msg: Any) -> None:
        self.camera["info"] = (int(msg.width), int(msg.height), tuple(float(v) for v in msg.K))

    def brief(self) -> Briefing:
        """Wait for the camera and a first beacon and range frame, then build the briefing."""
        until = time.monotonic() + self.options.setup_timeout_s
        while time.monotonic() < until and not (
            {"info", "mount"} <= set(self.camera) and {"ir", "range"} <= set(self.frames.latest)
        ):
            time.sleep(0.05)
        if not {"info", "mount"} <= set(self.camera) or "ir" not in self.frames.latest:
            raise ConfigError(f"the simulator: no camera_info, /tf_static and ir_beacons within "
                              f"{self.options.setup_timeout_s} s (is it serving?)")  # fmt: skip
        (w, h, k), (trans, rot) = self.camera["info"], self.camera["mount"]
        uav = self.rospy.get_param("/uav")
        cam = CameraInfo(w, h, k, trans, rot)
        self.uav = uav
        return briefing_from_ros(uav, cam, self.options.control_hz)

    def start(self) -> float:
        """Brief and reset the contestant, take its step-0 answer (at the held start pose, with
        the newest beacon and range frames); returns the reset's wall s."""
        self.briefing = b = self.brief()
        t0 = time.perf_counter()
        self.racer.reset(b)
        reset_s = time.perf_counter() - t0
        obs = observation(0, b.dt, None, self.frames.latest.get("ir"),
                          self.frames.latest.get("range"), b)  # fmt: skip
        self.cmd0 = checked_command(self.racer.act(obs))
        dyn = self.uav["flightgoggles_uav_dynamics"]
        self.arm_thrust = max(self.cmd0[0], float(dyn.get("min_arming_thrust", 9.9)))
        self.arm_after = float(dyn.get("reset_timeout", 0.1)) + b.dt
        self.started = True
        return reset_s

    # ---- flight -------------------------------------------------------------------------------
    def _send(self, cmd: Sequence[float]) -> None:
        m = self.RateThrust()
        m.header.stamp = self.rospy.Time.now()
        m.thrust.z = float(cmd[0])
        m.angular_rates.x, m.angular_rates.y, m.angular_rates.z = (float(v) for v in cmd[1:])
        self.pub.publish(m)

    def _on_grid(self, t: float) -> bool:
        x = t * self.briefing.beacon_rate_hz  # type: ignore[operator]
        return abs(x - round(x)) < 1e-6

    def _on_clock(self, msg: Any) -> None:
        if not getattr(self, "started", False) or self.t_arm is not None or self.done.is_set():
            return
        t = msg.clock.to_sec()
        now = time.monotonic()
        due = self.arm_sent is None or now - self.arm_sent > ARM_RETRY_S
        if t >= self.arm_after and due and self._on_grid(t):
            self.arm_sent = now
            self._send((self.arm_thrust, *self.cmd0[1:]))

    def _on_imu(self, msg: Any) -> None:
        if not getattr(self, "started", False) or self.done.is_set():
            return
        with self.lock:
            dt = self.briefing.dt
            t = stamp_of(msg)
            if self.t_arm is None:
                self.t_arm, self.wall_flight = t - dt, time.monotonic()
            step = round((t - self.t_arm) / dt)
            self.skipped += int(step != self.step + 1)
            self.step = step
            ns = round(t * R.NS)
            ir = rng = None
            if self._on_grid(t):
                until = time.monotonic() + FRAME_WAIT_S
                ir, rng = self.frames.take("ir", ns, until), self.frames.take("range", ns, until)
                self.missing["ir"] += ir is None
                self.missing["range"] += rng is None
            obs = observation(step, dt, msg, ir, rng, self.briefing)
            cmd = checked_command(self.racer.act(obs))
            if step * dt >= self.options.time_limit_s:
                self.done.set()
        self._send(cmd)

    def _on_collision(self, msg: Any) -> None:
        self.collisions += 1

    def _on_results(self, msg: Any) -> None:
        self.results = msg.data
        if self.score is not None:
            self.done.set()

    def _on_score(self, msg: Any) -> None:
        self.score = float(msg.data)
        if self.results is not None:
            self.done.set()

    def summary(self, reset_s: float) -> dict[str, Any]:
        """What the node saw: the simulator's lap (results YAML, score), arming, steps."""
        import yaml

        doc = yaml.safe_load(self.results) if self.results else {}
        gates = [doc[k] for k in sorted((k for k in doc if k.startswith("Gate")),
                                        key=_gate_number)]  # fmt: skip
        times = [float(g["Time"]) if g.get("Success") == "True" else None for g in gates]
        arm_tick = None if self.t_arm is None else self.t_arm * self.options.control_hz
        return {
            "result": doc.get("Result"),
            "score": self.score,
            "gates_passed": sum(t is not None for t in times),
            "gate_times": times,
            "lap_time": max((t for t in times if t is not None), default=None),
            "collisions": self.collisions,
            "armed_at_s": self.t_arm,
            "arming_tick": None if arm_tick is None else round(arm_tick),
            "arming_on_beacon_grid": None if self.t_arm is None else self._on_grid(self.t_arm),
            "arming_thrust": self.arm_thrust,
            "step0_thrust": self.cmd0[0],
            "steps": self.step,
            "skipped_steps": self.skipped,
            "missing_frames": dict(self.missing),
            "reset_s": reset_s,
            "flight_wall_s": None if self.wall_flight is None
            else time.monotonic() - self.wall_flight,
            "options": asdict(self.options),
        }  # fmt: skip


def run_node(options: NodeOptions) -> dict[str, Any]:
    """Start the node on ``ROS_MASTER_URI`` (loopback only), race until the simulator reports
    the lap (or ``time_limit_s``), return :meth:`ContestantNode.summary` (also written to
    ``options.out``)."""
    from volary.bench.threads import one_thread
    from volary.ros1.env import check_loopback, import_rospy, ros_env
    from volary.ros1.msgs import ensure_messages
    from volary.ros1.service import DEFAULT_MASTER

    uri = os.environ.get("ROS_MASTER_URI", DEFAULT_MASTER)
    check_loopback(uri)
    os.environ.pop("ROS_HOSTNAME", None)  # it would override ROS_IP
    os.environ.update(ros_env(uri, {}))
    racer = make_contestant(options.contestant)
    dirs = ensure_messages(options.msg_cache)
    rospy = import_rospy([dirs.python, dirs.overlay])
    rospy.init_node("volary_contestant", anonymous=True, disable_signals=True)
    node = ContestantNode(rospy, racer, options)
    node.subscribe()
    try:
        with one_thread():  # as run_challenge: the plan's descent is thread-sensitive
            reset_s = node.start()
            print(f"volary-contestant armed-with thrust={node.arm_thrust:.3f} (step 0: "
                  f"{node.cmd0[0]:.3f}) reset_s={reset_s:.1f}", flush=True)  # fmt: skip
            while not node.done.wait(0.1) and not rospy.is_shutdown():
                pass
        out = node.summary(reset_s)
    finally:
        rospy.signal_shutdown("contestant done")
    if options.out is not None:
        Path(options.out).parent.mkdir(parents=True, exist_ok=True)
        Path(options.out).write_text(json.dumps(out, indent=1))
    print(f"volary-contestant lap result={out['result']} score={out['score']} "
          f"gates={out['gates_passed']} lap_time={out['lap_time']}", flush=True)  # fmt: skip
    return out


# ---- one course through ROS 1 and in process -------------------------------------------------
def ros1_sensors() -> Any:
    """The in-process sensors that match what ``volary ros1 serve`` publishes: exact beacons
    (FlightGoggles' renderer: no pixel noise, no dropped reports) and the laser at 60 Hz."""
    from volary.studies.alphapilot.challenge import ChallengeSensors

    return ChallengeSensors(pixel_std=0.0, dropout=0.0, beacon_rate_hz=RENDER_HZ,
                            range_rate_hz=RENDER_HZ)  # fmt: skip


def race_over_ros1(
    course_seed: int,
    course_index: int,
    noise_seed: int,
    workdir: str | Path,
    *,
    contestant: str = DEFAULT_CONTESTANT,
    control_hz: float = 240.0,
    time_limit_s: float = 60.0,
    timeout_s: float = 900.0,
    generator: str = "volary",
    arena: str = "empty",
) -> dict[str, Any]:
    """Fly ``contestant`` through ROS 1 on one perturbed course: a rosmaster on a free loopback
    port, ``volary ros1 serve`` (lock-step, ``--course-seed course_seed --course-index
    course_index --courses-from generator --arena arena --noise-key K``, K the pair's
    ``noise_key``, so the flight draws the noise it draws in process; ending with the lap) and
    this node, each a process of its
    own (logs in ``workdir``). Returns the node's summary plus ``wall_s``; a ConfigError if
    the node wrote none within ``timeout_s`` wall seconds."""
    import subprocess

    from volary.ros1.env import free_port, master_uri, ros_env, start_master, stop_processes

    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    uri, t0 = master_uri(port), time.monotonic()
    env = ros_env(uri, dict(os.environ), ROS_LOG_DIR=str(work / "log"),
                  ROS_HOME=str(work / "ros"))  # fmt: skip
    procs = [start_master(port, work / "log")]
    out = work / "node.json"
    try:
        with open(work / "bridge.log", "w") as blog, open(work / "node.log", "w") as nlog:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "volary.ros1", "serve", "--control-hz", str(control_hz),
                 "--course-seed", str(course_seed), "--course-index", str(course_index),
                 "--courses-from", generator, "--arena", arena,
                 "--seed", str(noise_seed), "--noise-key", str(_noise_key(
                     course_seed, course_index, generator, arena, noise_seed)),
                 "--exit-on-result",
                 "--results", str(work / "results.yaml"), "--log-dir", str(work / "log")],
                env=env, stdout=blog, stderr=subprocess.STDOUT))  # fmt: skip
            node = subprocess.Popen(
                [sys.executable, "-m", "volary.studies.alphapilot.ros1_node", "--contestant",
                 contestant, "--control-hz", str(control_hz), "--time-limit",
                 str(time_limit_s), "--out", str(out)],
                env=env, stdout=nlog, stderr=subprocess.STDOUT)  # fmt: skip
            procs.append(node)
            try:
                node.wait(timeout_s)
            except subprocess.TimeoutExpired:
                pass
    finally:
        stop_processes(procs)
    if not out.is_file():
        tail = (work / "node.log").read_text()[-1500:] + (work / "bridge.log").read_text()[-1500:]
        raise ConfigError(f"the ROS 1 flight in {work} ended without a lap summary:\n{tail}")
    summary = json.loads(out.read_text())
    summary["wall_s"] = time.monotonic() - t0
    summary["bridge_held_ticks"] = _held_ticks((work / "bridge.log").read_text())
    return summary


def _held_ticks(log: str) -> int | None:
    """Armed ticks the bridge flew on a held command because the node's answer did not come
    within ``input_timeout`` (its closing line's ``held=``; None when it printed none): a
    flight with any is not the in-process flight."""
    import re

    found = re.findall(r"^volary-ros1 stopped .*\bheld=(\d+)", log, flags=re.M)
    return int(found[-1]) if found else None


def _noise_key(course_seed: int, index: int, generator: str, arena: str, noise_seed: int) -> int:
    """``noise_key`` of the course x noise-seed pair the bridge serves, so the flight over ROS 1
    draws the noise the same pair draws in process (:func:`race_in_process`)."""
    from volary.studies.alphapilot.race import noise_key
    from volary.worlds import alphapilot_2019_courses

    course = alphapilot_2019_courses(index + 1, course_seed, generator, arena)[index]
    return noise_key(course, noise_seed)


class ArmedAsFlightGoggles:
    """``contestant`` with FlightGoggles' arming rule applied in process, as this node applies
    it over ROS 1: the step-0 answer's thrust raised to ``min_arming_thrust`` when below (the
    rest of the command and every later answer unchanged), so both sides fly the same
    commands."""

    def __init__(self, contestant: str | Contestant, min_thrust: float) -> None:
        self.inner, self.min_thrust = make_contestant(contestant), float(min_thrust)

    def reset(self, briefing: Briefing) -> None:
        self.inner.reset(briefing)

    def act(self, obs: ChallengeObservation) -> Tensor:
        cmd = self.inner.act(obs)
        if obs.step != 0:
            return cmd
        cmd = torch.as_tensor(cmd).clone()
        cmd[:, 0] = cmd[:, 0].clamp(min=self.min_thrust)
        return cmd


def race_in_process(
    courses: Sequence[Any],
    noise_seed: int,
    *,
    contestant: str = DEFAULT_CONTESTANT,
    control_hz: float = 240.0,
    time_limit_s: float = 60.0,
) -> Any:
    """The same courses in process (:func:`~volary.studies.alphapilot.challenge.run_challenge`)
    with the sensors the bridge publishes (:func:`ros1_sensors`) and its arming rule
    (:class:`ArmedAsFlightGoggles`): with the bridge's noise keyed as here
    (:func:`race_over_ros1`), a course flies the same flight on both sides up to the messages'
    float32 fields and the lap clock (the bridge's starts one tick after arming)."""
    from volary.ros1.params import MIN_ARMING_THRUST
    from volary.studies.alphapilot.challenge import run_challenge

    racer = ArmedAsFlightGoggles(contestant, MIN_ARMING_THRUST)
    return run_challenge(list(courses), racer, seed=noise_seed, sensors=ros1_sensors(),
                         control_hz=control_hz, time_limit_s=time_limit_s)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m volary.studies.alphapilot.ros1_node``: race, print the lap, write --out."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--contestant",
        default=DEFAULT_CONTESTANT,
        help="'reference' or module:Class (built with no arguments)",
    )
    ap.add_argument(
        "--control-hz",
        type=float,
        default=240.0,
        help="the simulator's tick (volary ros1 serve --control-hz)",
    )
    ap.add_argument("--time-limit", type=float, default=60.0, help="sim s after arming")
    ap.add_argument("--setup-timeout", type=float, default=120.0, help="wall s")
    ap.add_argument("--out", help="write the lap summary (JSON) here")
    ap.add_argument("--msg-cache", help="where generated ROS 1 messages go")
    a = ap.parse_args(argv)
    try:
        run_node(NodeOptions(a.contestant, a.control_hz, a.time_limit,
                             a.setup_timeout, a.out, a.msg_cache))  # fmt: skip
    except VolaryError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
