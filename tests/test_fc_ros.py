"""Betaflight through the ROS bridges (issue 58): nodes that know only ROS fly a vehicle whose
commands Betaflight 4.6.0 SITL's acro rate loop turns into motor outputs.

- ROS 1 (``volary ros1 serve --firmware betaflight``, FlightGoggles' interface): a rospy node
  (Debian's /usr/bin/python3, nothing of volary) arms, climbs 1 m and holds it from ``/tf``
  with ``mav_msgs/RateThrust``; a second flight repeats the first bit for bit; a firmware killed
  mid-flight is ``/volary/firmware_lost`` and ``/uav/collision`` to the node, and the node's
  next arming flies a fresh firmware.
- ROS 2 (``volary ros2 serve --firmware betaflight``): an rclpy node holds 1 m from odometry
  with mavros ``AttitudeTarget`` on ``cmd_rates`` (an in-process bridge); a slow test flies
  it through the command and finds it bit for bit the in-process flight.

Each needs the built SITL (``python -m volary.fc.betaflight build``) and its ROS; without them
the tests skip and say why. Everything stays on 127.0.0.1 / localhost DDS.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _procs import Procs
from test_ros1 import _lines, _serve
from volary.fc.betaflight import find
from volary.ros1.env import missing_ros1

SITL = find()
needs_sitl = pytest.mark.skipif(
    SITL is None, reason="Betaflight SITL not built: run `python -m volary.fc.betaflight build`"
)
WHY_NO_ROS1 = missing_ros1()
needs_ros1 = pytest.mark.skipif(WHY_NO_ROS1 is not None, reason=str(WHY_NO_ROS1))
HZ = 60  # control ticks per sim s (physics and firmware exchanges at 960 Hz)
CLIMB = 1.0  # m the ROS 1 node climbs above the course's start (5.3 m) and holds
FLIGHT = 150  # armed ticks of a ROS 1 hover flight (2.5 s)
HOLD_FROM = 90  # from 1.5 s on it holds the height (it climbs in ~1.2 s)
KILL_AT = 30  # armed tick of the ROS 1 flight whose firmware the node kills
AFTER = 45  # armed ticks flown on the fresh firmware after the loss
HOVER_Z = 1.0  # m, the ROS 2 node's altitude (its start in open space)
ROS2_TICKS = 120  # 2 s

ROS1_NODE = r'''
"""A FlightGoggles-style rospy node: arm (one 10 N RateThrust), then per IMU message one
RateThrust from the /tf pose of the same stamp: climb --climb m above where it armed and hold
it, body rates levelling the vehicle. Flights: --plan "180,180,k45,60" (armed ticks; kNN: kill
the bridge's firmware child at armed tick NN and fly on until /uav/collision). Between flights:
zero thrust until /uav/collision (the vehicle falls, is reset and disarmed), then arm again.
Writes what it saw to --out as JSON."""
import argparse, json, math, os, signal, sys, threading, time
import rospy
from mav_msgs.msg import RateThrust
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu
from std_msgs.msg import Empty, String
from tf2_msgs.msg import TFMessage

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--plan", required=True)
ap.add_argument("--climb", type=float, default=1.0)
ap.add_argument("--bridge-pid", type=int, default=0)
ap.add_argument("--sitl", default="")
ap.add_argument("--timeout", type=float, default=120.0)
args = ap.parse_args()
plan = [(p.startswith("k"), int(p.lstrip("k"))) for p in args.plan.split(",")]

rospy.init_node("fc_hover")
mass = float(rospy.get_param("/uav/flightgoggles_uav_dynamics/vehicle_mass"))
firmware = rospy.get_param("/volary/firmware")
pub = rospy.Publisher("/uav/input/rateThrust", RateThrust, queue_size=10, tcp_nodelay=True)
cond = threading.Condition()
poses = {}  # stamp (ns) -> (x, y, z, qw, qx, qy, qz)
rec = {"firmware": firmware, "flights": [], "lost": [], "collisions": [], "killed": [],
       "collision_walls": [], "error": None}
st = {"clock": 0.0, "phase": "arm", "arm_at": 0.0, "k": 0, "z0": None, "flight": 0}


def send(thrust, rates=(0.0, 0.0, 0.0)):
    m = RateThrust()
    m.thrust.z = thrust
    m.angular_rates.x, m.angular_rates.y, m.angular_rates.z = rates
    pub.publish(m)


def kill_firmware():
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid == args.bridge_pid and os.readlink(f"/proc/{pid}/exe") == args.sitl:
                os.kill(int(pid), signal.SIGKILL)
                return int(pid)
        except (OSError, ValueError, IndexError):
            continue
    return None


def on_clock(m):
    with cond:
        st["clock"] = m.clock.to_sec()
        if st["phase"] == "arm" and st["clock"] >= st["arm_at"]:
            send(10.0)  # FlightGoggles' arming: >= 9.9 N, once (again 0.5 s later if unheard)
            st["arm_at"] = st["clock"] + 0.5


def on_tf(m):
    for ts in m.transforms:
        if ts.child_frame_id.lstrip("/") == "uav/imu":
            p, q = ts.transform.translation, ts.transform.rotation
            with cond:
                poses[ts.header.stamp.to_nsec()] = (p.x, p.y, p.z, q.w, q.x, q.y, q.z)
                cond.notify_all()


def command(now, before, dt):
    x, y, z, w, qx, qy, qz = now
    up = (2 * (qx * qz - w * qy), 2 * (qy * qz + w * qx), 1 - 2 * (qx * qx + qy * qy))
    vz = 0.0 if before is None else (z - before[2]) / dt
    err = st["z0"] + args.climb - z
    thrust = max(0.0, mass * (9.81 + 4.0 * err - 3.0 * vz) / max(up[2], 0.5))
    return thrust, (-8.0 * up[1], 8.0 * up[0], 0.0)


def on_imu(m):
    ns = m.header.stamp.to_nsec()
    with cond:
        if not cond.wait_for(lambda: ns in poses, 5.0):
            rec["error"] = f"no /tf for the IMU stamp {ns}"
            return
        phase = st["phase"]
        if phase == "arm":  # the first armed tick
            st["phase"], st["k"], phase = "fly", 0, "fly"
            st["z0"] = poses[ns][2]
            rec["flights"].append({"armed_at": m.header.stamp.to_sec(), "rows": [],
                                   "armed_wall": time.monotonic()})
        if phase == "cut":
            send(0.0)
            return
        if phase != "fly":
            return
        kill, length = plan[st["flight"]]
        flight = rec["flights"][-1]
        if kill and st["k"] == length:
            rec["killed"].append([m.header.stamp.to_sec(), kill_firmware()])
        older = [t for t in poses if t < ns]
        last = max(older) if older else None  # the tick before (held: the start pose)
        dt = 1.0 if last is None else (ns - last) * 1e-9
        thrust, rates = command(poses[ns], None if last is None else poses[last], dt)
        flight["rows"].append(list(poses[ns]))
        flight["end_wall"] = time.monotonic()
        st["k"] += 1
        if not kill and st["k"] >= length:
            st["flight"] += 1
            st["phase"] = "cut" if st["flight"] < len(plan) else "done"
        send(thrust, rates)


def on_collision(_):
    with cond:
        rec["collisions"].append(st["clock"])
        rec["collision_walls"].append(time.monotonic())
        if st["phase"] in ("cut", "fly"):
            if st["phase"] == "fly":  # a kill flight ends here
                st["flight"] += 1
            st["phase"] = "arm" if st["flight"] < len(plan) else "done"
            st["arm_at"] = st["clock"] + 0.3


def on_lost(m):
    with cond:
        rec["lost"].append([st["clock"], m.data])


subs = [
    rospy.Subscriber("/clock", Clock, on_clock, tcp_nodelay=True),
    rospy.Subscriber("/tf", TFMessage, on_tf, tcp_nodelay=True),
    rospy.Subscriber("/uav/sensors/imu", Imu, on_imu, tcp_nodelay=True),
    rospy.Subscriber("/uav/collision", Empty, on_collision, tcp_nodelay=True),
    rospy.Subscriber("/volary/firmware_lost", String, on_lost, tcp_nodelay=True),
]
end = time.monotonic() + args.timeout
while time.monotonic() < end and (
    pub.get_num_connections() == 0 or any(s.get_num_connections() == 0 for s in subs)
):
    time.sleep(0.01)
with cond:
    st["arm_at"] = st["clock"] + 0.3
print("node ready", flush=True)
while time.monotonic() < end and st["phase"] != "done" and rec["error"] is None:
    time.sleep(0.02)
time.sleep(0.2)  # the last loss message, if any, is on its way
with open(args.out, "w") as f:
    json.dump(rec, f)
print("node done", st["phase"], flush=True)
'''


# ---- ROS 1 ------------------------------------------------------------------------------------
def _fly_ros1(tmp_path: Path, plan: str, *bridge_args: str) -> dict[str, Any]:
    """A bridge (``--firmware betaflight`` and ``bridge_args``) and the node flying ``plan``
    (:data:`ROS1_NODE`) until it is done; what the node saw, and the bridge's output."""
    if SITL is None or WHY_NO_ROS1 is not None:
        pytest.skip(str(WHY_NO_ROS1) if SITL is not None else "Betaflight SITL not built")
    procs = Procs()
    try:
        _, env, b_lines = _serve(tmp_path, procs, "--firmware", "betaflight", "--control-hz",
                                 str(HZ), *bridge_args)  # fmt: skip
        bridge = procs.procs[-1]
        (tmp_path / "node.py").write_text(ROS1_NODE)
        node = procs.start(
            ["/usr/bin/python3", str(tmp_path / "node.py"), "--out", str(tmp_path / "node.json"),
             "--plan", plan, "--climb", str(CLIMB), "--bridge-pid", str(bridge.pid),
             "--sitl", str(SITL[0])],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        n_lines = _lines(node)
        try:
            node.wait(120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the node did not finish:\n{''.join(n_lines)[-2000:]}\n"
                        f"{''.join(b_lines)[-2000:]}")  # fmt: skip
        alive = bridge.poll() is None
    finally:
        procs.stop()
    context = "".join(n_lines)[-1500:] + "".join(b_lines)[-2500:]
    assert (tmp_path / "node.json").exists(), context
    rec = json.loads((tmp_path / "node.json").read_text())
    assert rec["error"] is None, (rec["error"], context)
    return {"rec": rec, "bridge_alive": alive, "bridge_lines": b_lines, "context": context}


@pytest.fixture(scope="module")
def ros1_session(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One bridge (``--imu ideal``) and one node flying two hover flights, a flight whose
    firmware it kills, and a flight after that. The noise-free IMU preset: the ROS 1 bridge
    ticks on the wall clock while disarmed (FlightGoggles' arming rule), so with a noisy IMU
    the noise a flight meets depends on when it armed."""
    plan = f"{FLIGHT},{FLIGHT},k{KILL_AT},{AFTER}"
    return _fly_ros1(tmp_path_factory.mktemp("fc_ros1"), plan, "--imu", "ideal")


@needs_sitl
@needs_ros1
@pytest.mark.ros1  # make test ROS1=skip leaves it out
def test_a_ros1_node_hovers_a_betaflight_vehicle_and_a_second_flight_repeats_it(
    ros1_session: dict[str, Any],
) -> None:
    """RateThrust from a rospy node through Betaflight's acro loop: the vehicle climbs 1 m
    above its start and holds it within 0.1 m for the last 1 s of a 2.5 s flight; the next
    flight (a fresh firmware armed at rest, as at every arming) is bit for bit the same."""
    rec, context = ros1_session["rec"], ros1_session["context"]
    assert rec["firmware"] == "betaflight"
    first, second = (np.array(f["rows"]) for f in rec["flights"][:2])
    assert len(first) == len(second) == FLIGHT, context
    target = first[0, 2] + CLIMB
    assert abs(first[0, 2] - 5.3) < 1e-3  # FlightGoggles' start, 5.3 m up
    held = first[HOLD_FROM:, 2]
    assert np.abs(held - target).max() < 0.1, (held.min(), held.max(), target)
    assert np.abs(first[:, :2] - first[0, :2]).max() < 0.3  # levelled: little drift
    assert rec["flights"][1]["armed_at"] > rec["flights"][0]["armed_at"]
    assert np.array_equal(first, second), np.abs(first - second).max()
    # disarmed after the fall, the clock runs at wall speed: the node's arming 0.3 s of sim
    # time after the collision comes soon (it used to wait until the wall clock caught up
    # with the sim time the lock-step flight had run ahead, ~2 s here)
    waited = rec["flights"][1]["armed_wall"] - rec["collision_walls"][0]
    assert waited < 1.5, waited


def test_disarmed_ticks_go_on_at_wall_speed_after_lock_step_ran_ahead() -> None:
    """The ROS 1 bridge's wall-clock schedule: after armed lock-step ticks ran ahead of the
    wall clock, the next disarmed tick is due one period from now, not when the wall clock
    reaches the sim time; after a stall it is due at once, without a burst."""
    from volary.ros1.bridge import next_due

    period = 1 / 60
    assert next_due(100.0, period, now=50.0) == 50.0 + period  # ran 50 s ahead
    assert next_due(10.0, period, now=10.0) == 10.0 + period  # on schedule
    assert next_due(10.0, period, now=12.0) == 12.0 - 0.25  # a stall: no burst


@needs_sitl
@needs_ros1
@pytest.mark.ros1  # make test ROS1=skip leaves it out
def test_a_killed_firmware_is_reported_to_the_ros1_node_and_the_bridge_goes_on(
    ros1_session: dict[str, Any],
) -> None:
    """SIGKILL to the firmware mid-flight: the node hears ``/volary/firmware_lost`` (the cause
    named) and ``/uav/collision`` (the flight ends as a collision would: back to the start,
    disarmed); it arms again and flies the fresh firmware; the bridge keeps serving."""
    rec, context = ros1_session["rec"], ros1_session["context"]
    (killed_at, pid), *_ = rec["killed"]
    assert pid is not None, "no firmware process among the bridge's children"
    (_, why), *more = rec["lost"]
    assert not more, rec["lost"]
    assert "betaflight firmware lost" in why and "SIGKILL" in why, why
    lost_at = float(why.split()[0].removeprefix("t="))  # the bridge's sim time of the loss
    tick = 1.0 / HZ
    assert killed_at - 1e-3 <= lost_at <= killed_at + tick + 1e-3  # in the step it happened
    # the node's /clock when /uav/collision came (its /clock may trail its IMU by a tick)
    assert any(abs(t - lost_at) < 3 * tick for t in rec["collisions"]), (rec["collisions"], why)
    kill_flight, after = rec["flights"][2], rec["flights"][3]
    assert len(kill_flight["rows"]) in (KILL_AT + 1, KILL_AT + 2)  # the tick it happened in
    rows = np.array(after["rows"])
    assert len(rows) == AFTER and after["armed_at"] > lost_at
    assert abs(rows[0, 2] - 5.3) < 1e-3  # back at the start
    assert rows[-1, 2] > rows[0, 2] + 0.3, "the fresh firmware climbs"
    assert ros1_session["bridge_alive"], context
    assert any("firmware lost" in x for x in ros1_session["bridge_lines"]), context


@pytest.mark.slow  # wall-clock pacing: load-sensitive, and a bridge start of its own
@needs_sitl
@needs_ros1
@pytest.mark.ros1  # make test ROS1=skip leaves it out
def test_a_ros1_node_flies_a_betaflight_vehicle_in_real_time(tmp_path: Path) -> None:
    """``--realtime``: the World, the firmware in lock-step with it, ticks on the wall clock
    holding the newest RateThrust (FlightGoggles' mode): the node's armed flight of 2.5 s of
    sim time takes 2.5 s of wall time (within 10 %) and still climbs to and holds its height
    (within 0.15 m: a command may arrive a tick late)."""
    run = _fly_ros1(tmp_path, str(FLIGHT), "--realtime", "--imu", "flightgoggles")
    (flight,) = run["rec"]["flights"]
    rows = np.array(flight["rows"])
    assert len(rows) == FLIGHT, run["context"]
    wall = flight["end_wall"] - flight["armed_wall"]
    assert wall == pytest.approx((FLIGHT - 1) / HZ, rel=0.1), wall
    held = rows[HOLD_FROM:, 2] - (rows[0, 2] + CLIMB)
    assert np.abs(held).max() < 0.15, (held.min(), held.max())


# ---- ROS 2 ------------------------------------------------------------------------------------
ROS2_NODE = r'''
"""An rclpy node (use_sim_time): per odometry message of a new stamp, one mavros AttitudeTarget
on cmd_rates with that stamp: collective thrust (normalized by --max-thrust N) holding
--hover-z m, body rates levelling the vehicle. Writes the poses it saw to --out."""
import argparse, json, sys
import rclpy
from mavros_msgs.msg import AttitudeTarget
from nav_msgs.msg import Odometry
from std_msgs.msg import Bool
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--mass", type=float, required=True)
ap.add_argument("--max-thrust", type=float, required=True)
ap.add_argument("--hover-z", type=float, default=1.0)
ap.add_argument("--ticks", type=int, required=True)
a = ap.parse_args()


class Hover(Node):
    def __init__(self):
        super().__init__("fc_hover", parameter_overrides=[
            Parameter("use_sim_time", Parameter.Type.BOOL, True)])
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.cmd = self.create_publisher(AttitudeTarget, "/vehicle0/cmd_rates", qos)
        self.create_subscription(Odometry, "/vehicle0/odom", self.on_odom, qos)
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.create_subscription(Bool, "/vehicle0/firmware_lost", self.on_lost, latched)
        self.rows, self.last, self.lost = [], None, []

    def on_lost(self, msg):
        self.lost.append([len(self.rows), bool(msg.data)])

    def on_odom(self, msg):
        key = (msg.header.stamp.sec, msg.header.stamp.nanosec)
        if self.last is not None and key <= self.last[0]:
            return  # a repeat of a tick already answered
        p, q = msg.pose.pose.position, msg.pose.pose.orientation
        w, x, y, z = q.w, q.x, q.y, q.z
        up = (2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y))
        vz = 0.0 if self.last is None else (p.z - self.last[1]) * 60.0
        thrust = a.mass * (9.81 + 4.0 * (a.hover_z - p.z) - 3.0 * vz) / max(up[2], 0.5)
        self.last = (key, p.z)
        self.rows.append([p.x, p.y, p.z, w, x, y, z])
        cmd = AttitudeTarget()
        cmd.header.stamp = msg.header.stamp
        cmd.type_mask = AttitudeTarget.IGNORE_ATTITUDE
        cmd.thrust = min(1.0, max(0.0, thrust / a.max_thrust))
        cmd.body_rate.x, cmd.body_rate.y, cmd.body_rate.z = -8.0 * up[1], 8.0 * up[0], 0.0
        self.cmd.publish(cmd)


rclpy.init()
node = Hover()
while rclpy.ok() and len(node.rows) < a.ticks:
    rclpy.spin_once(node, timeout_sec=0.1)
with open(a.out, "w") as f:
    json.dump(node.rows, f)
with open(a.out + ".lost", "w") as f:
    json.dump(node.lost, f)
node.destroy_node()
rclpy.try_shutdown()
'''
ROS2_PLATFORM = "fpv_racer_250"


def _ros2_env(domain: int) -> dict[str, str]:
    return dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
                FASTDDS_BUILTIN_TRANSPORTS="SHM")  # fmt: skip


def _ros2_node(tmp_path: Path, name: str, domain: int) -> subprocess.Popen:
    from volary.platforms import get

    script = tmp_path / "ros2_node.py"
    script.write_text(ROS2_NODE)
    air = get(ROS2_PLATFORM)
    max_thrust = sum(k * w**2 for k, w in zip(air.k_f, air.max_rotor_speed, strict=True))
    cmd = [sys.executable, str(script), "--out", str(tmp_path / f"{name}.json"), "--mass",
           str(air.mass), "--max-thrust", repr(max_thrust), "--hover-z", str(HOVER_Z),
           "--ticks", str(ROS2_TICKS)]  # fmt: skip
    return subprocess.Popen(cmd, env=_ros2_env(domain), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip


def _ros2_rows(tmp_path: Path, name: str) -> np.ndarray:
    return np.array(json.loads((tmp_path / f"{name}.json").read_text()))


def _needs_ros2() -> None:
    pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (pip install 'volary[ros2]')")
    pytest.importorskip("mavros_msgs.msg", reason="run: python -m volary.ros2.msgs build")


def _fly_ros2_in_process(tmp_path: Path, kill_at: int | None = None) -> np.ndarray:
    """The node flying a bridge of this process, of the config ``volary ros2 serve --scene
    none --platform fpv_racer_250 --firmware betaflight`` builds; the node's rows.
    ``kill_at``: SIGKILL the vehicle's firmware once the bridge has run that many ticks."""
    from test_ros2 import _domain
    from volary.cli.serve import build_config
    from volary.ros2.bridge import Ros2Bridge

    config = build_config(scene="none", seed=0, vehicles=1, in_loop=0, platform=ROS2_PLATFORM,
                          control="ctbr", control_hz=60.0, imu="bmi085", sensors=[],
                          scene_params=None, firmware="betaflight")  # fmt: skip
    domain = _domain()
    bridge = Ros2Bridge(config, domain_id=domain)
    stop = threading.Event()
    spin = threading.Thread(target=bridge.spin, args=(stop, ROS2_TICKS), daemon=True)
    spin.start()
    node = _ros2_node(tmp_path, "inproc", domain)
    try:
        if kill_at is not None:
            _kill_when(bridge, kill_at, spin)
        spin.join(90)
        assert not spin.is_alive() and bridge.ticks == ROS2_TICKS
        assert node.wait(30) == 0
        assert bridge.firmware is not None
        assert len(bridge.firmware.events) == (kill_at is not None)
        assert not bridge.faults, bridge.faults
    finally:
        stop.set()
        spin.join(10)
        if node.poll() is None:
            node.kill()
            node.wait(10)
        bridge.close()
    return _ros2_rows(tmp_path, "inproc")


def _kill_when(bridge: Any, tick: int, spin: threading.Thread) -> None:
    """SIGKILL vehicle 0's firmware once ``bridge`` has run ``tick`` ticks."""
    import time

    while bridge.ticks < tick and spin.is_alive():
        time.sleep(0.002)
    bank = bridge.firmware.banks[0]
    assert bank is not None
    os.kill(bank.firmwares[0].pid, signal.SIGKILL)


@needs_sitl
def test_a_killed_firmware_is_published_to_the_ros2_node(tmp_path: Path) -> None:
    """SIGKILL to the firmware mid-flight: the node hears ``<ns>/firmware_lost`` true (after
    the false it got first), the vehicle falls, and the bridge runs every tick."""
    _needs_ros2()
    rows = _fly_ros2_in_process(tmp_path, kill_at=40)
    lost = json.loads((tmp_path / "inproc.json.lost").read_text())
    assert lost and lost[0][1] is False, lost
    assert [v for _, v in lost].count(True) == 1, lost
    at = next(i for i, v in lost if v)
    assert 30 <= at <= 70, lost  # heard within a few ticks of the kill
    assert rows[-1, 2] < rows[at, 2] - 0.1  # no motors: it falls


@needs_sitl
def test_a_ros2_node_hovers_a_betaflight_vehicle(tmp_path: Path) -> None:
    """CTBR on ``cmd_rates`` (mavros AttitudeTarget, thrust normalized) from an rclpy node
    through the ROS 2 bridge's Betaflight rate loop: the vehicle holds 1 m within 0.1 m over
    the last second of 2 s, levelled (little drift)."""
    _needs_ros2()
    rows = _fly_ros2_in_process(tmp_path)
    assert len(rows) == ROS2_TICKS  # ticks 0 .. ROS2_TICKS - 1, each answered
    held = rows[ROS2_TICKS - 60 :, 2]
    assert np.abs(held - HOVER_Z).max() < 0.1, (held.min(), held.max())
    assert np.abs(rows[:, :2]).max() < 0.3


@pytest.mark.slow  # a second World and torch import in a process of its own (~15 s loaded)
@needs_sitl
def test_volary_ros2_serve_firmware_betaflight_flies_the_node_bit_for_bit_as_in_process(
    tmp_path: Path,
) -> None:
    """The same node through the command ``volary ros2 serve --firmware betaflight``: it serves
    the ticks without a fault and the flight is bit for bit the in-process bridge's (lock-step
    on stamps; the firmware follows the World's steps)."""
    _needs_ros2()
    from test_ros2 import _domain

    domain = _domain()
    served = subprocess.Popen(
        [sys.executable, "-m", "volary.cli.main", "ros2", "serve", "--scene", "none",
         "--platform", ROS2_PLATFORM, "--control", "ctbr", "--firmware", "betaflight",
         "--ticks", str(ROS2_TICKS)],
        env=_ros2_env(domain), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    node = _ros2_node(tmp_path, "cli", domain)
    try:
        out, _ = served.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        served.kill()
        node.kill()
        out = served.communicate()[0]
        pytest.fail(f"no end of serving in 90 s:\n{out[-2000:]}\nnode: {node.communicate()[0]}")
    try:
        assert served.returncode == 0, out
        assert node.wait(30) == 0, node.stdout.read() if node.stdout else ""
    finally:
        for proc in (served, node):
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert f"served {ROS2_TICKS} control periods; 0 fault(s)" in out, out
    cli, inproc = _ros2_rows(tmp_path, "cli"), _fly_ros2_in_process(tmp_path)
    assert len(cli) == ROS2_TICKS
    assert np.array_equal(cli, inproc), np.abs(cli - inproc).max()


def test_ros1_firmware_options_are_checked_before_anything_starts() -> None:
    from volary.errors import ConfigError, UnknownNameError
    from volary.ros1.bridge import FIRMWARE_PLATFORM, Ros1Options, serve_config

    with pytest.raises(ConfigError, match="firmware: expected one of"):
        Ros1Options(firmware="px4")
    with pytest.raises(UnknownNameError, match="rate profile"):
        Ros1Options(firmware="betaflight", platform="flightgoggles")
    with pytest.raises(UnknownNameError, match="platform"):
        Ros1Options(platform="no_such_quad")
    config = serve_config(Ros1Options(firmware="betaflight"))
    assert config.firmware == "betaflight" and config.slots[0].platform == FIRMWARE_PLATFORM
    assert serve_config(Ros1Options()).slots[0].platform == "flightgoggles"  # unchanged


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--firmware", "px4"], "--firmware: expected one of betaflight, ideal"),
        (["--firmware", "betaflight", "--platform", "flightgoggles"], "rate profile"),
    ],
)
def test_volary_ros1_serve_refuses_bad_firmware_options_in_one_line(
    args: list[str], says: str
) -> None:
    from typer.testing import CliRunner

    from volary.cli.main import app

    r = CliRunner().invoke(app, ["ros1", "serve", *args])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and says in lines[0], r.output
