"""A World on ROS 2: ``volary ros2 serve`` (docs/ros.md).

:class:`Ros2Bridge` is a :class:`~volary.serve.host.WorldHost` whose transport is one rclpy
node, ``/volary``. It publishes the World's ``/clock`` (so ``use_sim_time`` nodes work and every
vehicle shares one time), ``/tf`` and ``/tf_static`` (REP 105: ``map`` -> ``<ns>/odom`` ->
``<ns>/base_link`` -> each sensor's frame; cameras in REP 103 optical frames), and per vehicle,
in its namespace, ground-truth ``nav_msgs/Odometry``, ``sensor_msgs/Imu``, depth ``Image`` +
``CameraInfo`` (``32FC1`` in m, REP 118), ``PointCloud2`` (LiDAR, ToF), ``Range`` (rangefinder),
collisions and gate passages; ``/diagnostics`` carries every fault and each vehicle's status.

Each vehicle takes its control level's command in the message a ROS user sends for it
(:data:`COMMAND_TOPICS`), or the raw setpoint on ``<ns>/cmd_raw``. Lock-step (the default):
the World advances when every vehicle that a node flies has sent its command for the tick
(stamped with the tick's time, or unstamped), so a slow node loses no control step and a run
is reproducible: it equals the same commands flown through ``volary serve`` and in-process.
Real time (``realtime=True``): the same, paced by the wall clock; when the nodes (or the
World) cannot keep up, the clock runs slower than the wall (clock scaling, as FlightGoggles
does) and ``/volary/time_scale`` says by how much.

Nodes come and go: a vehicle is taken by the first node that commands it; a node whose
publisher leaves the graph, or that sends nothing for ``input_timeout`` s while the others
wait, frees it (the vehicle is held where it is), and whoever commands it next takes it back.
A command that is not finite, has the wrong size or is stale is refused with an error on
``/diagnostics``; so is a second node commanding a vehicle (ROS 2 does not tell a subscriber
which publisher sent a message, so the vehicle is held until one of them leaves).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from volary.errors import ConfigError
from volary.ros2 import topics
from volary.ros2.topics import Vehicle
from volary.serve import roscommon as R
from volary.serve.host import WorldHost
from volary.serve.world import ServeConfig

# control level -> (topic in the vehicle's namespace, message "pkg/Type")
COMMAND_TOPICS: dict[str, tuple[str, str]] = {
    "position": ("cmd_pose", "geometry_msgs/PoseStamped"),
    "pose": ("cmd_pose", "geometry_msgs/PoseStamped"),
    "velocity": ("cmd_vel", "geometry_msgs/TwistStamped"),
    "acceleration": ("cmd_accel", "geometry_msgs/AccelStamped"),
    "attitude": ("cmd_attitude", "mavros_msgs/AttitudeTarget"),
    "ctbr": ("cmd_rates", "mavros_msgs/AttitudeTarget"),
    "wrench": ("cmd_wrench", "geometry_msgs/WrenchStamped"),
    "rotor_speeds": ("cmd_motors", "std_msgs/Float64MultiArray"),
    "rotor_thrusts": ("cmd_motors", "std_msgs/Float64MultiArray"),
    "sticks": ("cmd_joy", "sensor_msgs/Joy"),  # with a firmware: the raw RC frame
}
# cmd_vel and cmd_accel carry a yaw *rate* (angular.z): the bridge integrates it into the
# level's yaw setpoint, yaw_k = yaw_(k-1) + r_k dt from the vehicle's yaw when a node took it
YAW_RATE_LEVELS = ("velocity", "acceleration")
UNKNOWN = "(a node not yet in the graph)"
RAW_TOPIC = "cmd_raw"  # std_msgs/Float64MultiArray: the control level's setpoint as is
LOCALHOST_ENV = {
    "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
    "FASTDDS_BUILTIN_TRANSPORTS": "SHM",
}


def localhost_only() -> None:
    """Keep DDS on this machine (shared memory, localhost discovery) unless the caller has set
    the variables: tests, benchmarks and the CLI call it before ``rclpy.init``."""
    for k, v in LOCALHOST_ENV.items():
        os.environ.setdefault(k, v)


GRAPH_GRACE_S = 0.5  # s an owner must be missing from the ROS graph before its vehicle is freed


class Ros2Bridge(WorldHost):
    """A World served on ROS 2 (module docstring).

    ``namespaces``: one per vehicle slot (default ``vehicle0``, ``vehicle1``, ...).
    ``input_timeout``: s a flown vehicle may keep the others waiting before it is freed.
    ``start_with``: vehicles that nodes must have taken before the first tick (a race start;
    after it, the World flies whoever is there). ``domain_id``: the ROS domain (default:
    ``ROS_DOMAIN_ID``, else 0). ``republish``: s between repeats of the current observation
    while the World waits (a node that subscribed late, or restarted, still gets one).
    ``realtime``/``speed``: pace the World by the wall clock; a tick more than ``max_behind``
    s late slips the schedule (clock scaling) rather than bursting to catch up. ``record``: a
    ROS 2 bag of the run, as ``volary serve --record``."""

    def __init__(
        self,
        config: ServeConfig,
        *,
        namespaces: list[str] | None = None,
        realtime: bool = False,
        speed: float = 1.0,
        input_timeout: float = 5.0,
        max_behind: float = 0.1,
        republish: float = 0.5,
        node_name: str = "volary",
        domain_id: int | None = None,
        start_with: int = 1,
        record: str | Path | None = None,
    ) -> None:
        if not isinstance(config, ServeConfig):
            raise ConfigError(f"config: expected a ServeConfig, got {type(config).__name__}")
        if any(s.role != "vehicle" for s in config.slots) or config.actors:
            raise ConfigError("config: the ROS 2 bridge flies simulated vehicles only")
        b = len(config.slots)
        names = namespaces or [f"vehicle{i}" for i in range(b)]
        if len(names) != b or len(set(names)) != b or not all(_is_name(n) for n in names):
            raise ConfigError(
                f"namespaces: expected {b} distinct ROS names (letters, digits, _), got {names!r}"
            )
        if config.control not in COMMAND_TOPICS and config.control != "mellinger":
            raise ConfigError(f"config.control: {config.control!r} has no ROS command")
        if not (isinstance(speed, int | float) and 0 < speed <= 1000):
            raise ConfigError(f"speed: expected a real-time factor in (0, 1000], got {speed!r}")
        if not (isinstance(start_with, int) and 1 <= start_with <= b):
            raise ConfigError(f"start_with: expected 1..{b} vehicles, got {start_with!r}")
        if not input_timeout > 0:
            raise ConfigError(f"input_timeout: expected seconds > 0, got {input_timeout!r}")
        rclpy = _import_rclpy()
        super().__init__(config, record=record)
        self.realtime, self.speed, self.max_behind = bool(realtime), float(speed), max_behind
        self.input_timeout, self.republish = float(input_timeout), float(republish)
        self.start_with, self.started = start_with, False
        self.faults: list[dict[str, Any]] = []
        self.time_scale = 1.0
        self.max_thrust = self.world.params.max_thrust.double().numpy()
        topic, _ = COMMAND_TOPICS.get(config.control, (RAW_TOPIC, ""))
        self.vehicles = [Vehicle(i, n, f"/{n}/{topic}") for i, n in enumerate(names)]
        localhost_only()
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node(node_name, context=self.context)
        from rclpy.executors import SingleThreadedExecutor

        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.pub = topics.Publishers(self)
        self._subscribe()
        self._obs = self.observations(range(b))
        self._last_tick_wall = time.monotonic()
        self._window: list[tuple[float, int]] = []

    # ---- commands -----------------------------------------------------------------------------
    def _subscribe(self) -> None:
        for v in self.vehicles:
            if self.config.control in COMMAND_TOPICS:
                name, kind = COMMAND_TOPICS[self.config.control]
                msg_type = topics.message_type(kind)
                convert = topics.command_reader(self.config.control)
                self.node.create_subscription(
                    msg_type, f"/{v.ns}/{name}", self._on_command(v, convert, name), 10
                )
            self.node.create_subscription(
                topics.message_type("std_msgs/Float64MultiArray"),
                f"/{v.ns}/{RAW_TOPIC}",
                self._on_command(v, topics.raw_reader, RAW_TOPIC),
                10,
            )

    def _on_command(self, v: Vehicle, convert: Callable[..., Any], topic: str) -> Any:
        what = f"/{v.ns}/{topic}"

        def callback(msg: Any) -> None:
            stamp = getattr(getattr(msg, "header", None), "stamp", None)
            if stamp is not None and (stamp.sec or stamp.nanosec):
                t = R.stamp_seconds(stamp.sec, stamp.nanosec)
                if t < self.world.tick * self.world.dt - 0.5 * self.world.dt:
                    return  # an answer to an observation already flown past (a repeat's)
            try:
                sp = R.setpoint(convert(msg, self, v), self.sp_size, what)
            except R.CommandError as e:
                v.refused += 1
                self._fault(v, "bad_command", str(e))
                return
            if v.contested:
                return
            if v.owner is None:
                v.owner = self._publisher_of(v, topic)
                v.yaw = R.yaw_of(self._obs[v.index]["state"]["quat"])
                self._status(v, 0, f"flown by {v.owner}")
            v.pending, v.heard = sp, time.monotonic()
            v.rate_form = topic != RAW_TOPIC and self.config.control in YAW_RATE_LEVELS

        return callback

    def _publisher_of(self, v: Vehicle, topic: str) -> str:
        nodes = self._publishers(f"/{v.ns}/{topic}")
        return nodes[0] if len(nodes) == 1 else UNKNOWN

    def _publishers(self, topic: str) -> list[str]:
        own = self.node.get_fully_qualified_name()
        infos = self.node.get_publishers_info_by_topic(topic)
        names = [_qualified(i.node_namespace, i.node_name) for i in infos]
        return sorted({n for n in names if n != own})

    # ---- the loop -----------------------------------------------------------------------------
    def spin(self, stop: Any = None, max_ticks: int | None = None) -> None:
        """Serve until ``stop`` (a ``threading.Event``) is set or ``max_ticks`` control
        periods have run (module docstring)."""
        self.pub.static()
        self.pub.tick(self._obs)
        last_graph = last_repeat = time.monotonic()
        schedule: tuple[float, int] | None = (
            None  # real time: (wall, tick) the schedule counts from
        )
        while not (stop is not None and stop.is_set()):
            if max_ticks is not None and self.ticks >= max_ticks:
                return
            self.executor.spin_once(timeout_sec=0.002)
            now = time.monotonic()
            if now - last_graph > 0.2:
                self._check_graph()
                last_graph = now
            if not self._ready():
                self._drop_silent(now)
                if now - max(last_repeat, self._last_tick_wall) > self.republish:
                    self.pub.tick(self._obs, repeat=True)
                    last_repeat = now
                continue
            if self.realtime:
                if schedule is None:
                    schedule = (now, self.ticks)
                due = schedule[0] + (self.ticks - schedule[1]) * self.world.dt / self.speed
                if now < due:
                    continue
                if now - due > self.max_behind:  # too late to catch up: the schedule slips
                    schedule = (now, self.ticks)
            self._tick(now)

    def _ready(self) -> bool:
        """Lock-step: the race has started and every vehicle a node flies (and no second node
        contests) has its command for the tick."""
        taken = [v for v in self.vehicles if v.owner is not None]
        self.started = self.started or len(taken) >= self.start_with
        flying = [v for v in taken if not v.contested]
        return self.started and bool(flying) and all(v.pending is not None for v in flying)

    def _tick(self, now: float) -> None:
        inputs: dict[int, tuple[str, dict[str, Any]]] = {}
        for v in self.vehicles:
            v.held = v.pending is None
            v.flown += not v.held
            if v.pending is not None:
                if v.rate_form:  # cmd_vel / cmd_accel: [.., yaw rate] -> [.., yaw]
                    v.yaw = v.yaw + float(v.pending[3]) * self.world.dt
                    v.pending = np.concatenate([v.pending[:3], [v.yaw]])
                elif self.config.control in YAW_RATE_LEVELS:
                    v.yaw = float(v.pending[3])
                inputs[v.index] = ("vehicle", {"command": v.pending})
                v.last, v.pending = v.pending, None
        self._obs = self.advance(inputs)
        missing = set(range(len(self.vehicles))) - set(self._obs)
        if missing:
            self._obs.update(self.observations(sorted(missing)))
        after = time.monotonic()
        for v in self.vehicles:
            v.since = after
        self._measure_time_scale(after)
        self.pub.tick(self._obs)
        self._last_tick_wall = after

    def _measure_time_scale(self, now: float) -> None:
        self._window.append((now, self.ticks))
        while len(self._window) > 2 and self._window[0][0] < now - 1.0:
            self._window.pop(0)
        (t0, k0), (t1, k1) = self._window[0], self._window[-1]
        if t1 > t0 and k1 > k0:
            self.time_scale = (k1 - k0) * self.world.dt / (t1 - t0)

    # ---- nodes that come and go -------------------------------------------------------------
    def _check_graph(self) -> None:
        for v in self.vehicles:
            if v.owner is None:
                continue
            nodes = sorted(
                set(self._publishers(v.topic) + self._publishers(f"/{v.ns}/{RAW_TOPIC}"))
            )
            if v.owner == UNKNOWN and len(nodes) == 1:  # the graph caught up with its first command
                v.owner = nodes[0]
            if v.owner not in nodes and v.owner != UNKNOWN:
                now = time.monotonic()  # one graph query without it is not yet a departure:
                v.absent_since = v.absent_since or now  # DDS discovery lags on a loaded host
                if now - v.absent_since >= GRAPH_GRACE_S and v.heard < v.absent_since:
                    self._free(v, "its node left the ROS graph")  # and has sent nothing since
                continue
            v.absent_since = None
            others = sorted(set(nodes) - {v.owner})
            if others != v.contested:
                v.contested = others
                if others:
                    v.pending = None
                    self._fault(
                        v, "contested",
                        f"{', '.join(others)} also command(s) /{v.ns}, flown by {v.owner}; the "
                        f"vehicle is held until one of them stops publishing",
                    )  # fmt: skip
                else:
                    self._status(v, 0, f"flown by {v.owner} again")

    def _drop_silent(self, now: float) -> None:
        """Free the vehicles whose node has kept the others waiting for ``input_timeout`` s."""
        for v in self.vehicles:
            silent = v.owner is not None and not v.contested and v.pending is None
            if silent and now - v.since > self.input_timeout:
                self._free(v, f"no command for {self.input_timeout:g} s")

    def _free(self, v: Vehicle, why: str) -> None:
        self._fault(v, "freed", f"/{v.ns} freed ({why}); held in place until a node commands it")
        v.owner, v.pending, v.contested, v.absent_since = None, None, [], None

    # ---- diagnostics --------------------------------------------------------------------------
    def _fault(self, v: Vehicle, code: str, message: str) -> None:
        entry = {"tick": self.world.tick, "vehicle": v.ns, "code": code, "message": message}
        self.faults.append(entry)
        del self.faults[:-1000]
        level = 1 if code == "freed" else 2  # diagnostic_msgs: WARN, ERROR
        self.pub.diagnostic(v, level, f"{code}: {message}")
        if self.recorder is not None:
            self.recorder.event(self.world.tick, "fault", slot=v.index, code=code, message=message)

    def _status(self, v: Vehicle, level: int, message: str) -> None:
        self.pub.diagnostic(v, level, message)

    def close(self) -> None:
        """Leave the ROS graph and close the recording."""
        self.close_recording()
        if self.context.ok():
            self.executor.shutdown()
            self.node.destroy_node()
            self.context.try_shutdown()


def _is_name(name: str) -> bool:
    return bool(name) and (name[0].isalpha()) and all(c.isalnum() or c == "_" for c in name)


def _qualified(namespace: str, name: str) -> str:
    return f"{namespace.rstrip('/')}/{name}"


def _import_rclpy() -> Any:
    try:
        import rclpy
    except ImportError as e:
        raise ConfigError(
            "the ROS 2 bridge needs rclpy: pip install 'volary[ros2]' (ROS 2 Jazzy wheels), "
            f"then python -m volary.ros2.msgs build ({e})"
        ) from e
    return rclpy
