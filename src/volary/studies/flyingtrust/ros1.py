"""ROS 1 planners in the navigation benchmark: ``volary bench run --algo ros1:NAME``.

NAME names a *launch description*: a table of the TOML file ``$VOLARY_ROS1_PLANNERS`` (default
``ros1_planners.toml`` in the working directory), checked against :class:`LaunchDescription`
(docs/planners-ros1.md, "Flying it in the benchmark"). Per trial, volary

- takes a *relay* of this worker process (started on first use, reused by later trials): a
  rosmaster of its own on 127.0.0.1 (a free port) and a ROS 1 node (``python -m
  volary.studies.flyingtrust.ros1 relay``) that speaks to the episode as a
  :class:`~volary.serve.planners.PlannerHost` (the ``remote:`` planners' wire). One relay per
  planner alive at once: a batch's envs share a simulated clock but each planner gets its own
  ``/clock``, so each needs its own master;
- sets ``/use_sim_time`` and the description's parameters on that master, starts the user's
  command in a process group of its own (killed at the trial's end, or when it is dropped),
  and waits until it subscribes to the odometry topic;
- at every planner tick t (the suite's ``planner_rate_hz``): publishes ``/clock`` (ROS time =
  the trial's simulated time, t + 2 s of take-off), ``nav_msgs/Odometry``, and as the
  description asks the depth image (32FC1 in m, +inf no return, or 16UC1 in mm, 0 no return)
  with its ``CameraInfo``, the camera's pose and a world-frame ``PointCloud2`` (from the depth
  camera or the LiDAR), each at most at its rate; the goal (``geometry_msgs/PoseStamped``, or
  with ``goal_message = "path"`` the one-pose ``nav_msgs/Path`` that EGO-Planner and
  Fast-Planner take from their waypoint generator) from t = 0 until the first command; then
  advances ``/clock`` in steps of 1 / ``clock_hz`` to the next tick, waiting after each step
  (at most ``step_wait`` wall s) for a command stamped at that step once the planner streams
  commands;
- turns the ``quadrotor_msgs/PositionCommand`` s received during the tick into the tick's
  :class:`~volary.planning.navigation.NavReference` (position, velocity, acceleration, yaw at
  their stamps; the last held at its velocity to the next tick), which the episode retimes to
  the protocol's cap and tracks with volary's controller like any planner's;
- ends the trial's processes at its end: the command's process group and every descendant,
  also those in sessions of their own (roslaunch starts each node with ``setsid``);
- fails the trial (cause ``error``, the episode goes on) when the command exits ("crashed"),
  publishes no command within ``hang_timeout`` s of simulated time after the goal
  ("published nothing") or stops for that long ("hung"); the message names the topic and
  ends with the tail of the command's log.

Frames: the planner's world frame is volary's, moved by :func:`frame_offset` where the
description asks (``origin = "centre"``: a fixed-size map around the origin covers the flight
volume; ``goal_height``: the goal at the one height the planner's code flies at); positions go
out minus the offset and come back plus it. volary's world is ROS's ``map``/``world`` (REP 103,
ENU) and its body FLU, so vectors pass unchanged and quaternions change order only
(:mod:`volary.serve.roscommon`, the one tested conversion); the camera frame is the optical
frame; ``CameraInfo`` takes :func:`~volary.serve.roscommon.ros_intrinsics` (half-pixel
principal point).

This module imports neither rospy nor torch; the relay imports rospy in its own process.
Each trial's wall time waiting for the planner (the relay's waits for commands, over the
trial's planner wall time) is written as one JSON line to ``<log_dir>/timing.jsonl``.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import math
import os
import re
import shutil
import signal
import string
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, field_validator

from volary.errors import ConfigError, UnknownNameError
from volary.inputs import (
    LIMITS,
    Coordinate,
    Finite,
    Flag,
    Integer,
    Strict,
    Text,
    read_toml,
    validated,
)

PREFIX = "ros1:"  # algo prefix (episode._start_planner)
PLANNERS_ENV = "VOLARY_ROS1_PLANNERS"
DEFAULT_FILE = "ros1_planners.toml"
ROS_T0 = 2.0  # s of ROS time at the start waypoint: the episode's take-off (1.5 s) + hold (0.5 s)
STARTUP_CLOCK = 1.0  # s, the /clock the relay publishes while the planner starts (0 = unset)
LOG_TAIL = 600  # characters of the command's log in an error message

# quadrotor_msgs/PositionCommand as published by EGO-Planner and Fast-Planner (field layout of
# their PositionCommand.msg; comments ours). ROS 1 matches types by MD5: EXPECTED_MD5.
POSITION_COMMAND = """\
# A multirotor's position command: a trajectory sample for the position controller.
std_msgs/Header header
geometry_msgs/Point position       # m, header.frame_id (world)
geometry_msgs/Vector3 velocity     # m/s
geometry_msgs/Vector3 acceleration # m/s^2
float64 yaw                        # rad
float64 yaw_dot                    # rad/s
float64[3] kx                      # controller gains (unused here)
float64[3] kv

uint32 trajectory_id

uint8 TRAJECTORY_STATUS_EMPTY = 0
uint8 TRAJECTORY_STATUS_READY = 1
uint8 TRAJECTORY_STATUS_COMPLETED = 3
uint8 TRAJECTROY_STATUS_ABORT = 4
uint8 TRAJECTORY_STATUS_ILLEGAL_START = 5
uint8 TRAJECTORY_STATUS_ILLEGAL_FINAL = 6
uint8 TRAJECTORY_STATUS_IMPOSSIBLE = 7

uint8 trajectory_flag
"""
NAV_MSGS = ("Odometry", "Path")  # nav_msgs generated where Debian's Python package is absent
EXPECTED_MD5 = {"quadrotor_msgs/PositionCommand": "4712f0609ca29a79af79a35ca3e3967a"}

# ---- the launch description -------------------------------------------------------------------
_GRAPH_NAME = re.compile(r"^/?[A-Za-z~][A-Za-z0-9_/]*$")
# task values a command argument or a string parameter may name as {placeholder}
PLACEHOLDERS = ("max_speed", "max_acc", "max_vertical_acc", "radius", "width", "height",
                "fx", "fy", "cx", "cy", "depth_range", "depth_hz", "seed",
                "extent_x", "extent_y", "extent_z", "floor", "ceiling")  # fmt: skip


def _graph_name(v: str) -> str:
    if not _GRAPH_NAME.match(v) or "//" in v:
        raise ValueError(f"expected a ROS graph name like /a/b, got {v!r}")
    return v


def _placeholders(v: str) -> str:
    try:
        names = [f for _, f, _, _ in string.Formatter().parse(v) if f is not None]
    except ValueError as e:
        raise ValueError(f"malformed {{placeholder}} in {v!r} ({e})") from None
    bad = [n for n in names if n not in PLACEHOLDERS]
    if bad:
        raise ValueError(
            f"unknown placeholder {{{bad[0]}}}; expected one of {', '.join(PLACEHOLDERS)}"
        )
    return v


GraphName = Annotated[Text, Field(min_length=1, max_length=256)]
Rate = Annotated[float, Field(strict=True, gt=0, le=1000, allow_inf_nan=False)]
Scalar = Flag | Integer | Finite | Text


class Topics(Strict):
    """Topic names the planner's launch files use (unset: not published)."""

    odom: GraphName = "/volary/odom"
    goal: GraphName = "/move_base_simple/goal"
    command: GraphName = "/planning/pos_cmd"
    depth: GraphName | None = None
    camera_info: GraphName | None = None
    camera_pose: GraphName | None = None
    cloud: GraphName | None = None

    @field_validator("*")
    @classmethod
    def _names(cls, v: str | None) -> str | None:
        return None if v is None else _graph_name(v)


class Rates(Strict):
    """Hz at which each stream is published, at most once per planner tick."""

    odom: Rate = 100.0
    depth: Rate = 30.0
    cloud: Rate = 10.0


class Frames(Strict):
    world: GraphName = "world"
    body: GraphName = "base_link"
    camera: GraphName = "camera_optical_frame"


class LaunchDescription(Strict):
    """One ``[NAME]`` table of the planners file (docs/planners-ros1.md)."""

    command: Annotated[
        list[Annotated[Text, Field(min_length=1)]], Field(min_length=1, max_length=256)
    ]
    cwd: Text | None = None
    env: dict[Text, Text] = {}
    params: dict[GraphName, Scalar | list[Scalar]] = {}
    topics: Topics = Topics()
    rates: Rates = Rates()
    frames: Frames = Frames()
    depth_encoding: Literal["32FC1", "16UC1"] = "32FC1"
    cloud_source: Literal["depth", "lidar"] = "depth"
    twist_frame: Literal["child", "world"] = "child"
    goal_message: Literal["pose", "path"] = "pose"
    origin: Literal["world", "centre"] = "world"
    goal_height: Coordinate | None = None  # m: the height the planner's code flies every goal at
    clock_hz: Rate = 100.0
    hang_timeout: Annotated[float, Field(strict=True, gt=0, le=LIMITS["duration"].hi)] = 5.0
    step_wait: Annotated[float, Field(strict=True, gt=0, le=60)] = 0.5
    startup_timeout: Annotated[float, Field(strict=True, gt=0, le=3600)] = 60.0
    log_dir: Text = "out/ros1"

    @field_validator("command")
    @classmethod
    def _command(cls, v: list[str]) -> list[str]:
        for a in v:
            _placeholders(a)
        return v

    @field_validator("params")
    @classmethod
    def _params(cls, v: dict[str, Any]) -> dict[str, Any]:
        for k, x in v.items():
            _graph_name(k)
            for s in x if isinstance(x, list) else [x]:
                if isinstance(s, str):
                    _placeholders(s)
        return v

    @property
    def needs(self) -> frozenset[str]:
        """The sensors the episode must render for this planner."""
        out = set()
        if self.topics.depth or self.topics.camera_pose:
            out.add("depth")
        if self.topics.cloud:
            out.add(self.cloud_source)
        return frozenset(out)


def planners_file() -> Path:
    """``$VOLARY_ROS1_PLANNERS``, else ``ros1_planners.toml`` in the working directory."""
    return Path(os.environ.get(PLANNERS_ENV) or DEFAULT_FILE)


def load_description(name: str, path: str | Path | None = None) -> LaunchDescription:
    """The launch description NAME of the planners file, checked; one-line errors name the file
    and the field (``FileFormatError``), or list the names the file has (``UnknownNameError``)."""
    p = Path(path) if path is not None else planners_file()
    if not p.exists():
        raise ConfigError(
            f"ros1:{name}: no planners file {p} (set ${PLANNERS_ENV} or create {DEFAULT_FILE})"
        )
    doc = read_toml(p, "ROS 1 planners file")
    if name not in doc:
        raise UnknownNameError(f"ROS 1 planner (in {p})", name, tuple(sorted(doc)))
    return validated(LaunchDescription, doc[name], f"{p}: {name}")


def check_algo(algo: str) -> None:
    """Refuse ``ros1:NAME`` whose description is missing or malformed (one line), before a run."""
    if algo.startswith(PREFIX):
        load_description(algo.removeprefix(PREFIX))


def substitute(text: str, values: dict[str, Any]) -> str:
    return text.format_map(values)


def task_values(task: Any, desc: LaunchDescription | None = None) -> dict[str, Any]:
    """The values a description's ``{placeholders}`` name, from the trial's NavTask.

    ``floor`` and ``ceiling`` are the flight volume's bottom and top (m) in the planner's frame
    (volary's minus ``desc``'s :func:`frame_offset`; without ``desc``, volary's), the frame of
    every position the relay sends; ``extent_*`` are the volume's size (m) in either frame."""
    from volary.serve.roscommon import ros_intrinsics

    lim, d = task.limits, task.depth
    fx, fy, cx, cy = ros_intrinsics(d.fx, d.fy, d.cx, d.cy)
    lo, hi = np.asarray(task.bounds_min, float), np.asarray(task.bounds_max, float)
    ex, ey, ez = (float(x) for x in hi - lo)
    dz = 0.0 if desc is None else float(frame_offset(desc, task)[2])
    return {
        "max_speed": lim.max_speed, "max_acc": lim.max_acc,
        "max_vertical_acc": lim.max_vertical_acc, "radius": lim.plan_radius,
        "width": d.width, "height": d.height, "fx": fx, "fy": fy, "cx": cx, "cy": cy,
        "depth_range": d.max_range, "depth_hz": d.rate_hz, "seed": task.seed,
        "extent_x": ex, "extent_y": ey, "extent_z": ez,
        "floor": float(lo[2]) - dz, "ceiling": float(hi[2]) - dz,
    }  # fmt: skip


def frame_offset(desc: LaunchDescription, task: Any) -> np.ndarray:
    """Where the planner's world frame has its origin, in volary's world (m; the planner's
    coordinates are volary's minus this). ``origin = "centre"``: the flight volume's horizontal
    centre, for planners whose map is a fixed box around their origin. ``goal_height`` h: the
    frame is lowered or raised so that the goal lies at height h, for planners whose code flies
    every goal at one height (EGO-Planner and Fast-Planner: 1.0 m). Both use only what the
    task gives every planner (the flight volume, the goal)."""
    off = np.zeros(3)
    if desc.origin == "centre":
        lo, hi = np.asarray(task.bounds_min, float), np.asarray(task.bounds_max, float)
        off[:2] = 0.5 * (lo[:2] + hi[:2])
    if desc.goal_height is not None:
        off[2] = float(task.goal[2]) - desc.goal_height
    return off


def param_value(v: Any, values: dict[str, Any]) -> Any:
    """A parameter with its placeholders filled; ``"{name}"`` alone becomes the number."""
    if isinstance(v, list):
        return [param_value(x, values) for x in v]
    if isinstance(v, str):
        m = re.fullmatch(r"\{(\w+)\}", v)
        return values[m.group(1)] if m else substitute(v, values)
    return v


# ---- the benchmark's side -------------------------------------------------------------------
class Ros1Planner:
    """A ``NavPlanner`` flying the ROS 1 planner NAME through a relay of this process (module
    docstring). ``planners_file``: the description file (default :func:`planners_file`);
    ``hang_timeout``, ``clock_hz``, ``step_wait``, ``log_dir``: override the description's."""

    def __init__(self, name: str, planners_file: str | None = None, **overrides: Any) -> None:
        desc = load_description(name, planners_file)
        if overrides:
            desc = validated(LaunchDescription, {**desc.model_dump(), **overrides},
                             f"ros1:{name} options", ConfigError)  # fmt: skip
        self.desc, self.name = desc, f"ros1:{name}"
        self.needs: frozenset[str] = desc.needs
        self._relay: _Relay | None = None
        self._remote: Any = None

    def reset(self, task: Any) -> None:
        from volary.serve.planners import RemotePlanner

        self._relay = _RELAYS.acquire()
        ticks = max(1, math.ceil(self.desc.clock_hz / task.planner_rate_hz))
        timeout = self.desc.startup_timeout + ticks * self.desc.step_wait + 30.0
        self._remote = RemotePlanner(
            self._relay.address, timeout=timeout, description=self.desc.model_dump(), name=self.name
        )
        self._remote.reset(task)

    def plan(self, obs: Any) -> Any:
        return self._remote.plan(obs)

    def close(self) -> None:
        """End the trial and wait for the relay to have stopped the planner's processes and
        written the trial's timing line (``trial_end``; a pool worker may exit right after its
        last unit, and its relays with it); the relay is free again."""
        if self._remote is not None:
            try:
                self._remote._call({"op": TRIAL_END}, "trial_ended")
            except Exception:  # noqa: BLE001 - a dead or hung relay: the close below suffices
                pass
            self._remote.close()
            self._remote = None
        if self._relay is not None:
            _RELAYS.release(self._relay)
            self._relay = None

    def __del__(self) -> None:  # the episode drops its planners at the unit's end
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class _Relay:
    """A rosmaster and a relay node of this worker (module docstring)."""

    def __init__(self) -> None:
        from volary.ros1.env import _die_with_parent, free_port, master_uri, ros_env, start_master

        port = free_port()
        self.uri = master_uri(port)
        log = Path(os.environ.get("ROS_LOG_DIR") or _cache() / "log")
        self.master = start_master(port, log)
        env = ros_env(self.uri, ROS_LOG_DIR=str(log))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "volary.studies.flyingtrust.ros1", "relay"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True, preexec_fn=_die_with_parent,
        )  # fmt: skip
        self.address, lines = "", deque(maxlen=40)
        end = time.monotonic() + 120.0
        assert self.proc.stdout is not None
        while time.monotonic() < end:
            line = self.proc.stdout.readline()
            if line.startswith("volary-ros1-relay ready "):
                self.address = line.split()[-1]
                break
            lines.append(line)
            if not line and self.proc.poll() is not None:
                break
        if not self.address:
            self.stop()
            raise RuntimeError(f"the ROS 1 relay did not start: {''.join(lines)[-LOG_TAIL:]}")
        threading.Thread(target=_drain, args=(self.proc.stdout,), daemon=True).start()

    def alive(self) -> bool:
        return self.proc.poll() is None and self.master.poll() is None

    def stop(self) -> None:
        from volary.ros1.env import stop_processes

        stop_processes((self.master, self.proc), grace_s=5.0)


def _drain(stream: Any) -> None:
    for _ in stream:
        pass


class _RelayPool:
    """This process's relays: a free one is reused, else a new one is started."""

    def __init__(self) -> None:
        self.free: list[_Relay] = []
        self.busy: list[_Relay] = []
        self.lock = threading.Lock()
        atexit.register(self.stop)

    def acquire(self) -> _Relay:
        if not self.free and self.busy:
            # the episode drops its planners without closing them and a finished unit's objects
            # form reference cycles: collect them, so that their relays come back (__del__)
            import gc

            gc.collect()
        with self.lock:
            while self.free:
                r = self.free.pop()
                if r.alive():
                    self.busy.append(r)
                    return r
                r.stop()
        r = _Relay()
        with self.lock:
            self.busy.append(r)
        return r

    def release(self, r: _Relay) -> None:
        with self.lock:
            if r in self.busy:
                self.busy.remove(r)
                self.free.append(r)

    def stop(self) -> None:
        with self.lock:
            relays, self.free, self.busy = self.free + self.busy, [], []
        for r in relays:
            r.stop()


_RELAYS = _RelayPool()


# ---- generated messages -----------------------------------------------------------------------
def _cache() -> Path:
    from volary.ros1.msgs import default_cache

    return default_cache()


def ensure_messages(cache: str | Path | None = None) -> tuple[list[Path], list[Path]]:
    """(a rospy node's PYTHONPATH entries, the relay's overlay: the same plus the links that put
    ROS 1's packages before ROS 2 wheels of the same names) for the messages beyond Debian's:
    volary.ros1's set (``sensor_msgs`` where python3-sensor-msgs is absent) and this module's
    ``quadrotor_msgs/PositionCommand`` and ``nav_msgs/Odometry`` and ``Path`` (generated with
    genpy from our text and Debian's ``/usr/share/nav_msgs``), generated once into the cache."""
    from volary.ros1 import msgs as M

    base = Path(cache) if cache is not None else _cache()
    first = M.ensure_messages(base)
    key = hashlib.sha1((POSITION_COMMAND + " ".join(NAV_MSGS)).encode()).hexdigest()[:12]
    root = base / f"nav-{key}"
    if not (root / "DONE").is_file():
        tmp = base / f".nav-build-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            _generate(tmp)
            (tmp / "DONE").write_text("ok\n")
            try:
                tmp.rename(root)
            except OSError:
                if not (root / "DONE").is_file():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return [root / "python", first.python], [root / "python", first.python, first.overlay]


def _generate(root: Path) -> None:
    from volary.ros1.env import DEBIAN_SHARE, ros1_tools
    from volary.ros1.msgs import _genpy_package

    genpy, _ = ros1_tools()
    msg = root / "msg" / "quadrotor_msgs"
    msg.mkdir(parents=True)
    (msg / "PositionCommand.msg").write_text(POSITION_COMMAND)
    search = {p: [str(DEBIAN_SHARE / p / "msg")]
              for p in ("std_msgs", "geometry_msgs", "sensor_msgs", "nav_msgs")}  # fmt: skip
    search["quadrotor_msgs"] = [str(msg)]
    out = root / "python"
    _genpy_package(genpy, "quadrotor_msgs", [str(msg / "PositionCommand.msg")], out, search)
    nav = [str(DEBIAN_SHARE / "nav_msgs" / "msg" / f"{m}.msg") for m in NAV_MSGS]
    if not (DEBIAN_SHARE.parent / "lib/python3/dist-packages/nav_msgs").is_dir():
        _genpy_package(genpy, "nav_msgs", nav, out, search)


# ---- the relay (its own process; imports rospy) ------------------------------------------------
def relay_main() -> None:
    """``python -m volary.studies.flyingtrust.ros1 relay``: a PlannerHost of :class:`RosTrial` s on
    this process's ROS_MASTER_URI; prints ``volary-ros1-relay ready ADDRESS`` once serving."""
    from volary.ros1.env import import_rospy

    rospy = import_rospy(ensure_messages()[1])
    rospy.init_node("volary_bench", anonymous=True, disable_signals=True)
    host = _TrialHost(lambda **kw: RosTrial(rospy, **kw), "tcp://127.0.0.1:*")
    signal.signal(signal.SIGTERM, lambda *_: host.stop_now())
    print(f"volary-ros1-relay ready {host.address}", flush=True)
    try:
        host.serve(lambda: host.stopping)
    finally:
        host.end_trial()
        host.close()


def _trial_host_base() -> Any:
    from volary.serve.planners import PlannerHost

    return PlannerHost


TRIAL_END = "trial_end"  # the relay's own operation: end a trial, answer once it has ended


class _TrialHost(_trial_host_base()):  # type: ignore[misc]
    """A PlannerHost that runs one trial at a time and ends its processes at ``planner_close``
    or at the next ``planner_reset``."""

    stopping = False

    def stop_now(self) -> None:
        self.stopping = True
        self.end_trial()

    def end_trial(self) -> None:
        for trial in list(self.planners.values()):
            trial.close()
        self.planners.clear()

    def _dispatch(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        op, trial = msg.get("op"), msg.get("trial")
        if op == TRIAL_END:  # Ros1Planner.close: end the trial now and say when it has ended
            if trial in self.planners:
                self.planners.pop(trial).close()
            return {"op": "trial_ended"}
        if op == "planner_reset":
            self.end_trial()
        elif op == "planner_close" and trial in self.planners:  # only its own trial: a late
            self.planners.pop(trial).close()  # close may come after the next trial's reset
        return super()._dispatch(msg)


class RosTrial:
    """The relay's side of one trial: the user's processes, the published streams and the
    commands received (module docstring). Raises (the trial's ``error``) on a crash, a hang or
    silence."""

    def __init__(self, rospy: Any, description: dict[str, Any], name: str = "ros1") -> None:
        self.rospy, self.name = rospy, name
        self.desc = validated(LaunchDescription, description, name, ConfigError)
        self.needs = self.desc.needs
        self.proc: subprocess.Popen | None = None
        self.cmds: deque[tuple[float, np.ndarray]] = deque()
        self.cond = threading.Condition()
        self.newest = -math.inf  # ROS time of the newest command's stamp
        self.last_cmd_t = math.nan  # nav time of the last command
        self.goal_t = math.nan
        self.wait_wall = self.plan_wall = self.start_wall = 0.0
        self.n_cmds = 0
        self.bad_cmd = ""
        self.last_pub: dict[str, float] = {}
        self.pubs: dict[str, Any] = {}
        self.sub: Any = None
        self.task: Any = None
        self.off = np.zeros(3)  # the planner's world frame origin in volary's (frame_offset)

    # ---- set-up ------------------------------------------------------------------------------
    def reset(self, task: Any) -> None:
        """Start the trial; a start that fails (the command exits, or never subscribes) ends
        what it started before the error goes on: the host keeps no trial to close."""
        w0 = time.perf_counter()
        try:
            self._start(task)
        except BaseException:
            self.start_wall = time.perf_counter() - w0
            self.close()
            raise
        self.start_wall = time.perf_counter() - w0

    def _start(self, task: Any) -> None:
        from volary.ros1.env import _die_with_parent

        rospy, d = self.rospy, self.desc
        self.task, self.values = task, task_values(task, d)
        self.off = frame_offset(d, task)
        rospy.set_param("/use_sim_time", True)
        for k, v in d.params.items():
            rospy.set_param(k, param_value(v, self.values))
        self._publishers()
        self.pubs["clock"].publish(self._clock(STARTUP_CLOCK - ROS_T0))
        log_dir = Path(d.log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{task.platform}-{task.seed}.log"
        self.log = open(self.log_path, "w")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [substitute(a, self.values) for a in d.command],
            cwd=d.cwd, env=self._env(), stdout=self.log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent,
        )  # fmt: skip
        self._await_subscriber()

    def _env(self) -> dict[str, str]:
        """A rospy or roscpp node's environment: this relay's master, loopback, the generated
        messages on PYTHONPATH, the description's ``env`` last."""
        from volary.ros1.env import client_env

        paths = [*ensure_messages()[0], *_existing(os.environ.get("VOLARY_ROS1_EXTRA_PATH", ""))]
        return {**client_env(os.environ["ROS_MASTER_URI"], paths), **self.desc.env}

    def _publishers(self) -> None:
        import warnings

        from geometry_msgs.msg import PoseStamped
        from nav_msgs.msg import Odometry
        from nav_msgs.msg import Path as PathMsg
        from quadrotor_msgs.msg import PositionCommand
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import CameraInfo, Image, PointCloud2

        t = self.desc.topics
        want = {
            "clock": ("/clock", Clock),
            "odom": (t.odom, Odometry),
            "goal": (t.goal, PathMsg if self.desc.goal_message == "path" else PoseStamped),
            "depth": (t.depth, Image),
            "camera_info": (t.camera_info, CameraInfo),
            "camera_pose": (t.camera_pose, PoseStamped),
            "cloud": (t.cloud, PointCloud2),
        }
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            for key, (topic, cls) in want.items():
                if topic:
                    self.pubs[key] = self.rospy.Publisher(
                        topic, cls, queue_size=None, tcp_nodelay=True, latch=key == "goal"
                    )
        self.sub = self.rospy.Subscriber(t.command, PositionCommand, self._on_command,
                                         tcp_nodelay=True, queue_size=1000)  # fmt: skip

    def _await_subscriber(self) -> None:
        end = time.monotonic() + self.desc.startup_timeout
        pub = self.pubs["odom"]
        while pub.get_num_connections() == 0:
            self._check_alive()
            if time.monotonic() > end:
                raise TimeoutError(self._why(
                    f"no subscriber to {self.desc.topics.odom} within "
                    f"{self.desc.startup_timeout:g} s of wall time after the launch"))  # fmt: skip
            time.sleep(0.02)
        # the command topic: connected once its publisher is up (checked at the first command)

    # ---- commands ----------------------------------------------------------------------------
    def _on_command(self, m: Any) -> None:
        t = m.header.stamp.to_sec() - ROS_T0
        v = np.array([m.position.x, m.position.y, m.position.z, m.velocity.x, m.velocity.y,
                      m.velocity.z, m.acceleration.x, m.acceleration.y, m.acceleration.z,
                      m.yaw], dtype=np.float64)  # fmt: skip
        with self.cond:
            v[:3] += self.off  # the planner's frame -> volary's world
            if not np.isfinite(v).all():
                self.bad_cmd = f"a PositionCommand with non-finite values at t = {t:.3f} s"
            else:
                self.cmds.append((t, v))
                self.n_cmds += 1
            self.newest = max(self.newest, t)
            self.cond.notify_all()

    def _wait_command(self, t: float, budget: float) -> bool:
        """Wait (at most ``budget`` wall s) for a command stamped at or after nav time t."""
        t0 = time.perf_counter()
        with self.cond:
            ok = self.cond.wait_for(lambda: self.newest >= t - 1e-6, budget)
        self.wait_wall += time.perf_counter() - t0
        return ok

    # ---- a tick ------------------------------------------------------------------------------
    def plan(self, obs: Any) -> Any:
        w0 = time.perf_counter()
        try:
            return self._tick(obs)
        finally:
            self.plan_wall += time.perf_counter() - w0

    def _tick(self, obs: Any) -> Any:
        d, t = self.desc, float(obs.t)
        self._check_alive()
        self.pubs["clock"].publish(self._clock(t))
        self._publish_state(obs)
        if self.n_cmds == 0:
            self._send_goal(t)
        dt_tick = 1.0 / self.task.planner_rate_hz
        n = max(1, math.ceil(dt_tick * d.clock_hz - 1e-9))
        streaming = self.n_cmds > 0
        for k in range(n):
            tk = t + k * dt_tick / n
            if k:
                self.pubs["clock"].publish(self._clock(tk))
            if streaming and not self._wait_command(tk, d.step_wait):
                streaming = False
        if not streaming:  # not (or no longer) streaming: one wait for anything at this tick
            self._wait_command(t + (n - 1) * dt_tick / n, d.step_wait)
        self._check_alive()
        with self.cond:
            cmds, self.cmds = list(self.cmds), deque()
            bad = self.bad_cmd
        if bad:
            raise ValueError(f"{d.topics.command}: {bad}")
        if cmds:
            newest = max(c[0] for c in cmds)
            self.last_cmd_t = (
                newest if math.isnan(self.last_cmd_t) else max(self.last_cmd_t, newest)
            )
        self._check_hang(t + dt_tick)
        return _reference([c for c in cmds if c[0] > t - dt_tick - 1e-6], t, t + dt_tick)

    def _check_hang(self, now: float) -> None:
        d, topic = self.desc, self.desc.topics.command
        if self.n_cmds == 0 and now - self.goal_t > d.hang_timeout + 1e-9:
            raise TimeoutError(self._why(
                f"published nothing: no PositionCommand on {topic} within {d.hang_timeout:g} s "
                "of simulated time after the goal"))  # fmt: skip
        if self.n_cmds and now - self.last_cmd_t > d.hang_timeout + 1e-9:
            raise TimeoutError(self._why(
                f"hung: no PositionCommand on {topic} for {d.hang_timeout:g} s of simulated "
                f"time (the last at t = {self.last_cmd_t:.2f} s)"))  # fmt: skip

    def _check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(
                self._why(f"crashed: the command exited with code {self.proc.returncode}")
            )

    def _why(self, what: str) -> str:
        self.log.flush()
        tail = self.log_path.read_text(errors="replace")[-LOG_TAIL:].strip()
        return f"ROS 1 planner {self.name} {what}; its log {self.log_path} ends:\n{tail}"

    # ---- publishing --------------------------------------------------------------------------
    def _clock(self, t: float) -> Any:
        from rosgraph_msgs.msg import Clock

        return Clock(clock=self._stamp(t))

    def _stamp(self, t: float) -> Any:
        from volary.serve.roscommon import split_stamp

        return self.rospy.Time(*split_stamp(t + ROS_T0))

    def _due(self, key: str, t: float, hz: float) -> bool:
        if key not in self.pubs:
            return False
        last = self.last_pub.get(key, -math.inf)
        if t - last < 1.0 / hz - 1e-6:
            return False
        self.last_pub[key] = t
        return True

    def _publish_state(self, obs: Any) -> None:
        from volary.serve.roscommon import body_velocity, to_ros_quat

        d, t, stamp = self.desc, float(obs.t), self._stamp(float(obs.t))
        m = _odometry(stamp, d, obs, np.asarray(obs.position) - self.off, to_ros_quat(obs.quat))
        if d.twist_frame == "child":
            v = body_velocity(obs.quat, obs.velocity)
            m.twist.twist.linear.x, m.twist.twist.linear.y, m.twist.twist.linear.z = v.tolist()
        if self._due("odom", t, d.rates.odom):
            self.pubs["odom"].publish(m)
        cam = self.task.depth
        p_cam, q_cam = _camera_pose(obs, cam)
        if self._due("camera_pose", t, d.rates.depth):
            self.pubs["camera_pose"].publish(_pose(stamp, d.frames.world, p_cam - self.off, q_cam))
        if obs.depth is not None and self._due("depth", t, d.rates.depth):
            self.pubs["depth"].publish(_image(stamp, d, obs.depth))
        if self._due("camera_info", t, d.rates.depth):
            self.pubs["camera_info"].publish(_camera_info(stamp, d.frames.camera, cam))
        if self._due("cloud", t, d.rates.cloud):
            pts = _cloud_points(obs, self.task, d.cloud_source, p_cam, q_cam)
            self.pubs["cloud"].publish(_cloud(stamp, d.frames.world, pts - self.off))

    def _send_goal(self, t: float) -> None:
        if math.isnan(self.goal_t):
            self.goal_t = t
        goal = np.asarray(self.task.goal, dtype=np.float64) - self.off
        pose = _pose(self._stamp(t), self.desc.frames.world, goal, np.array([1.0, 0.0, 0.0, 0.0]))
        self.pubs["goal"].publish(_path(pose) if self.desc.goal_message == "path" else pose)

    # ---- the end -----------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the command's process group; write the trial's timing line; unregister."""
        if self.proc is not None:
            _kill_group(self.proc)
            self.proc = None
            self._timing()
            self.log.close()
            self._forget_nodes()
        for p in self.pubs.values():
            if p.name != "/clock":
                p.unregister()
        if self.sub is not None:
            self.sub.unregister()
        self.pubs, self.sub = {}, None

    def _forget_nodes(self) -> None:
        """Unregister the trial's (now dead) nodes from the master, as ``rosnode cleanup``
        does: a next trial's node of the same name must not be taken for them."""
        import rosgraph
        import rosnode

        master = rosgraph.Master(self.rospy.get_name())
        state = master.getSystemState()
        nodes = {n for group in state for _, names in group for n in names}
        nodes -= {self.rospy.get_name(), "/rosout"}
        if nodes:
            rosnode.cleanup_master_blacklist(master, sorted(nodes))

    def _timing(self) -> None:
        line = {"planner": self.name, "platform": self.task.platform, "seed": self.task.seed,
                "start_wall_s": round(self.start_wall, 4),
                "plan_wall_s": round(self.plan_wall, 4), "wait_wall_s": round(self.wait_wall, 4),
                "wait_share": round(self.wait_wall / self.plan_wall, 4) if self.plan_wall else None,
                "commands": self.n_cmds}  # fmt: skip
        with open(Path(self.desc.log_dir) / "timing.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")


def _existing(paths: str) -> list[Path]:
    return [Path(p) for p in paths.split(os.pathsep) if p]


def _descendants(pid: int) -> list[int]:
    """The ids of the processes now alive that descend from ``pid`` or from a member of its
    process group (``pid`` may have exited: its group's members live on), from /proc. roslaunch
    starts every node in a session of its own (``setsid``), so a node is outside its launcher's
    process group: only the parent links find it."""
    children: dict[int, list[int]] = {}
    roots = [pid]
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # the comm field may hold spaces
        ppid, pgrp, me = int(fields[1]), int(fields[2]), int(d.name)
        children.setdefault(ppid, []).append(me)
        if pgrp == pid and me != pid:
            roots.append(me)
    out, todo = [], list(roots)
    while todo:
        kids = [k for k in children.get(todo.pop(0), []) if k not in out and k not in roots]
        out += kids
        todo += kids
    return roots[1:] + out


def _kill_group(proc: subprocess.Popen, grace: float = 3.0) -> None:
    """End ``proc`` (its own session), its process group and every descendant, wherever its
    session (a roslaunch node's): SIGTERM, then SIGKILL to whatever is left after ``grace`` s."""
    pids = _descendants(proc.pid)
    _signal(proc.pid, pids, signal.SIGTERM)
    end = time.monotonic() + grace
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    while time.monotonic() < end and any(_alive(p) for p in pids):
        time.sleep(0.05)
    _signal(proc.pid, [p for p in pids if _alive(p)], signal.SIGKILL)
    proc.wait(5)


def _signal(group: int, pids: list[int], sig: int) -> None:
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        pass
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _reference(cmds: list[tuple[float, np.ndarray]], t: float, t_next: float) -> Any:
    """The NavReference of the tick's commands (sorted by stamp; the last carried at its
    velocity to the next tick), or None when there are none."""
    from volary.planning.navigation import NavReference

    if not cmds:
        return None
    cmds = sorted(cmds, key=lambda c: c[0])
    times, rows = [], []
    for tc, v in cmds:
        if not times or tc > times[-1] + 1e-9:
            times.append(tc)
            rows.append(v)
        else:
            rows[-1] = v  # the same stamp twice: the newer wins
    last_t, last = times[-1], rows[-1]
    if last_t < t_next - 1e-9:
        ext = last.copy()
        ext[:3] = last[:3] + last[3:6] * (t_next - last_t)
        times.append(t_next)
        rows.append(ext)
    a = np.array(rows)
    return NavReference(t0=times[0], times=np.array(times), positions=a[:, 0:3],
                        velocities=a[:, 3:6], accelerations=a[:, 6:9], yaws=a[:, 9])  # fmt: skip


def _rot(q: np.ndarray) -> np.ndarray:
    w, x, y, z = (float(c) for c in q / np.linalg.norm(q))
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array(
        [
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ]
    )


def _camera_pose(obs: Any, cam: Any) -> tuple[np.ndarray, np.ndarray]:
    """The depth camera's optical frame in the world: position and [w, x, y, z]."""
    q = np.asarray(obs.quat, dtype=np.float64)
    p = np.asarray(obs.position) + _rot(q) @ np.asarray(cam.t_body_cam, dtype=np.float64)
    return p, _quat_mul(q, np.asarray(cam.q_body_cam, dtype=np.float64))


def _cloud_points(
    obs: Any, task: Any, source: str, p_cam: np.ndarray, q_cam: np.ndarray
) -> np.ndarray:
    """(K, 3) world points of the depth image's or the LiDAR's returns."""
    if source == "lidar":
        if obs.lidar is None:
            return np.zeros((0, 3))
        li = task.lidar
        r = np.asarray(obs.lidar, dtype=np.float64)
        ok = np.isfinite(r)
        body = li.directions[ok] * r[ok, None] + np.asarray(li.t_body_lidar)
        q = np.asarray(obs.quat, dtype=np.float64)
        return body @ _rot(q).T + np.asarray(obs.position)
    if obs.depth is None:
        return np.zeros((0, 3))
    c = task.depth
    z = np.asarray(obs.depth, dtype=np.float64)
    v, u = np.nonzero(np.isfinite(z))
    zz = z[v, u]
    pts = np.stack([(u + 0.5 - c.cx) / c.fx * zz, (v + 0.5 - c.cy) / c.fy * zz, zz], -1)
    return pts @ _rot(q_cam).T + p_cam


# ---- message builders (ROS 1 classes imported in the relay only) ------------------------------
def _odometry(
    stamp: Any, d: LaunchDescription, obs: Any, position: np.ndarray, q_xyzw: tuple
) -> Any:
    from nav_msgs.msg import Odometry

    m = Odometry()
    m.header.stamp, m.header.frame_id, m.child_frame_id = stamp, d.frames.world, d.frames.body
    p, o = m.pose.pose.position, m.pose.pose.orientation
    p.x, p.y, p.z = (float(x) for x in position)
    o.x, o.y, o.z, o.w = q_xyzw
    lin, ang = m.twist.twist.linear, m.twist.twist.angular
    lin.x, lin.y, lin.z = (float(x) for x in obs.velocity)
    ang.x, ang.y, ang.z = (float(x) for x in obs.omega)
    return m


def _pose(stamp: Any, frame: str, p: np.ndarray, q_wxyz: np.ndarray) -> Any:
    from geometry_msgs.msg import PoseStamped

    from volary.serve.roscommon import to_ros_quat

    m = PoseStamped()
    m.header.stamp, m.header.frame_id = stamp, frame
    m.pose.position.x, m.pose.position.y, m.pose.position.z = (float(x) for x in p)
    o = m.pose.orientation
    o.x, o.y, o.z, o.w = to_ros_quat(q_wxyz)
    return m


def _path(pose: Any) -> Any:
    """A ``nav_msgs/Path`` of one pose: the goal as EGO's and Fast-Planner's
    ``waypoint_generator`` hands it to them (``/waypoint_generator/waypoints``)."""
    from nav_msgs.msg import Path as PathMsg

    m = PathMsg()
    m.header = pose.header
    m.poses = [pose]
    return m


def _image(stamp: Any, d: LaunchDescription, depth: np.ndarray) -> Any:
    from sensor_msgs.msg import Image

    z = np.asarray(depth, dtype=np.float32)
    m = Image()
    m.header.stamp, m.header.frame_id = stamp, d.frames.camera
    m.height, m.width = int(z.shape[0]), int(z.shape[1])
    m.encoding, m.is_bigendian = d.depth_encoding, 0
    if d.depth_encoding == "16UC1":  # mm, 0 = no return (REP 118)
        mm = np.where(np.isfinite(z), np.clip(np.round(z * 1000.0), 1, 65535), 0)
        data = mm.astype("<u2")
    else:  # m, +inf = no return (REP 117)
        data = z.astype("<f4")
    m.step = int(data.shape[1] * data.itemsize)
    m.data = data.tobytes()
    return m


def _camera_info(stamp: Any, frame: str, cam: Any) -> Any:
    from sensor_msgs.msg import CameraInfo

    from volary.serve.roscommon import pinhole_matrices

    m = CameraInfo()
    m.header.stamp, m.header.frame_id = stamp, frame
    m.width, m.height = int(cam.width), int(cam.height)
    m.distortion_model, m.D = "plumb_bob", [0.0] * 5
    mats = pinhole_matrices(cam.fx, cam.fy, cam.cx, cam.cy)
    m.K, m.R, m.P = mats["k"], mats["r"], mats["p"]
    return m


def _cloud(stamp: Any, frame: str, pts: np.ndarray) -> Any:
    from sensor_msgs.msg import PointCloud2, PointField

    m = PointCloud2()
    m.header.stamp, m.header.frame_id = stamp, frame
    m.height, m.width = 1, int(len(pts))
    m.fields = [PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1)
                for i, n in enumerate("xyz")]  # fmt: skip
    m.is_bigendian, m.point_step, m.is_dense = False, 12, True
    m.row_step = 12 * m.width
    m.data = np.asarray(pts, dtype="<f4").reshape(-1, 3).tobytes()
    return m


if __name__ == "__main__":
    if sys.argv[1:] == ["relay"]:
        relay_main()
    else:
        sys.exit("usage: python -m volary.studies.flyingtrust.ros1 relay")
