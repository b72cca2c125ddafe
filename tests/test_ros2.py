"""ROS 2 bridge (volary.ros2): real rclpy nodes in their own processes fly served vehicles.

Every packet stays on this machine: shared-memory transport, localhost discovery, and a
domain id of the test's own so parallel test workers never see each other's topics.
"""

from __future__ import annotations

import itertools
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

rclpy = pytest.importorskip(
    "rclpy", reason="ROS 2 wheels not installed (pip install 'volary[ros2]')"
)
pytest.importorskip("tf2_msgs.msg", reason="run: python -m volary.ros2.msgs build")

from volary.dynamics.state import field_numpy  # noqa: E402
from volary.ros2.bridge import Ros2Bridge  # noqa: E402
from volary.serve.host import WorldHost  # noqa: E402
from volary.serve.roscommon import yaw_of  # noqa: E402
from volary.serve.world import SensorSpec, ServeConfig, SlotSpec  # noqa: E402

NODES = Path(__file__).parent / "ros2_nodes"
sys.path.insert(0, str(NODES))
from pilot import pilot  # noqa: E402

_ids = itertools.count()
FOREST = {"length": 20.0, "width": 12.0}


def _domain() -> int:
    return 1 + (os.getpid() * 7 + next(_ids)) % 60  # 61-100: test_docs_ros


def _config(vehicles: int = 1, seed: int = 2, control: str = "velocity") -> ServeConfig:
    slots = tuple(SlotSpec(sensors=("depth",)) for _ in range(vehicles))
    return ServeConfig(slots=slots, scene="forest", seed=seed, control=control,
                       sensors={"depth": SensorSpec("depth", "aerial_gym_64")},
                       scene_params=FOREST)  # fmt: skip


class _Running:
    """A bridge spinning in a thread of the test process, its states recorded per tick."""

    def __init__(self, config: ServeConfig, **kw: Any) -> None:
        self.domain = _domain()
        self.bridge = Ros2Bridge(config, domain_id=self.domain, **kw)
        self.states: list[dict[str, np.ndarray]] = []
        advance = self.bridge.advance

        def recorded(*a: Any, **k: Any) -> Any:
            obs = advance(*a, **k)
            st = self.bridge.world.state
            fields = {f: field_numpy(st, f) for f in ("pos", "vel", "quat", "omega")}
            self.states.append({s: {f: v[s].copy() for f, v in fields.items()}
                                for s in range(self.bridge.world.b)})  # fmt: skip
            return obs

        self.bridge.advance = recorded  # type: ignore[method-assign]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.bridge.spin, args=(self.stop,), daemon=True)
        self.thread.start()

    def env(self) -> dict[str, str]:
        env = dict(
            os.environ,
            ROS_DOMAIN_ID=str(self.domain),
            ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
            FASTDDS_BUILTIN_TRANSPORTS="SHM",
        )
        return env  # fmt: skip

    def node(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(NODES / "forest_node.py"), *args],
                                env=self.env(), stdout=subprocess.PIPE, text=True)  # fmt: skip

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.bridge.close()


def _goal(config: ServeConfig) -> list[str]:
    spec = WorldHost(config).world.specs[0]
    return [str(v) for v in spec.goal]


def _in_process(config: ServeConfig, ticks: int) -> list[np.ndarray]:
    """The pilot flown in-process: the same commands the bridge flies (cmd_vel's yaw rate
    integrated from the start yaw, as the bridge documents)."""
    host = WorldHost(config)
    goal = np.array(host.world.specs[0].goal)
    o = host.obs(0)
    yaw = yaw_of(o["state"]["quat"])
    out = []
    for _ in range(ticks):
        d = o["sensors"]["depth"]
        c = pilot(o["state"]["pos"], o["state"]["quat"], np.where(d["valid"], d["depth"], np.nan),
                  goal)  # fmt: skip
        yaw = yaw + float(c[3]) * host.world.dt
        o = host.advance({0: ("vehicle", {"command": np.array([*c[:3], yaw])})})[0]
        out.append(np.concatenate([o["state"][k] for k in ("pos", "vel", "quat", "omega")]))
    return out


def _through_client(config: ServeConfig, ticks: int) -> list[np.ndarray]:
    from volary.client import Client
    from volary.serve.server import Server

    srv = Server(config, bind=f"inproc://ros2-test-{next(_ids)}")
    stop = threading.Event()
    th = threading.Thread(target=srv.serve, args=(stop,), daemon=True)
    th.start()
    goal = np.array(srv.world.specs[0].goal)
    out = []
    try:
        with Client(srv.address) as c:
            o = c.obs
            yaw = yaw_of(o["state"]["quat"])
            for _ in range(ticks):
                d = o["sensors"]["depth"]
                u = pilot(o["state"]["pos"], o["state"]["quat"],
                          np.where(d["valid"], d["depth"], np.nan), goal)  # fmt: skip
                yaw = yaw + float(u[3]) * srv.world.dt
                o = c.step([*u[:3], yaw])
                out.append(np.concatenate([o["state"][k] for k in ("pos", "vel", "quat", "omega")]))
    finally:
        stop.set()
        th.join(5)
        srv.close()
    return out


def test_a_node_flies_the_forest_to_its_goal_bit_identical_to_the_client_and_in_process():
    config = _config()
    run = _Running(config)
    try:
        node = run.node("--ns", "vehicle0", "--goal", *_goal(config))
        assert node.wait(120) == 0
    finally:
        run.close()
    ros = [np.concatenate([s[0][k] for k in ("pos", "vel", "quat", "omega")]) for s in run.states]
    goal = np.array([float(v) for v in _goal(config)])
    assert np.linalg.norm(ros[-1][:3] - goal) < 0.6, "the node reached its goal"
    assert len(ros) > 300 and not any(f["code"] == "bad_command" for f in run.bridge.faults)
    for other in (_in_process(config, len(ros)), _through_client(config, len(ros))):
        assert len(other) == len(ros)
        np.testing.assert_array_equal(np.stack(ros), np.stack(other))


class _Listener:
    """A node of the test process (its own rclpy context) that keeps what it hears."""

    def __init__(self, domain: int, name: str = "listener") -> None:
        from rclpy.executors import SingleThreadedExecutor

        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, domain_id=domain)
        self.node = rclpy.create_node(name, context=self.ctx)
        self.got: dict[str, list[Any]] = {}
        self.lock = threading.Lock()
        self.ex = SingleThreadedExecutor(context=self.ctx)
        self.ex.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        while self.ctx.ok():
            try:
                self.ex.spin_once(timeout_sec=0.05)
            except Exception:  # the context was shut down under it
                return

    def listen(self, msg_type: Any, topic: str, latched: bool = False) -> None:
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        if latched:
            qos.durability = DurabilityPolicy.TRANSIENT_LOCAL

        def keep(msg: Any) -> None:
            with self.lock:
                self.got.setdefault(topic, []).append(msg)

        self.node.create_subscription(msg_type, topic, keep, qos)

    def messages(self, topic: str) -> list[Any]:
        with self.lock:
            return list(self.got.get(topic, []))

    def close(self) -> None:
        self.ex.shutdown()
        self.node.destroy_node()
        self.ctx.try_shutdown()
        self.thread.join(5)


def _wait(cond: Any, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return False


def _stamp(msg: Any) -> float:
    s = msg.header.stamp if hasattr(msg, "header") else msg.clock
    return s.sec + 1e-9 * s.nanosec


def _transform(tr: Any) -> np.ndarray:
    """4 x 4 of a geometry_msgs/TransformStamped (parent <- child)."""
    import torch

    from volary.math.quaternion import quat_to_rotmat

    t, q = tr.transform.translation, tr.transform.rotation
    m = np.eye(4)
    m[:3, :3] = quat_to_rotmat(torch.tensor([q.w, q.x, q.y, q.z], dtype=torch.float64)).numpy()
    m[:3, 3] = [t.x, t.y, t.z]
    return m


def _resolve(frame: str, edges: dict[str, tuple[str, np.ndarray]]) -> np.ndarray:
    """map <- frame through the tf tree ``edges`` {child: (parent, T)}."""
    m = np.eye(4)
    seen = 0
    while frame != "map":
        assert frame in edges, f"/tf does not resolve {frame!r}"
        parent, t = edges[frame]
        m, frame, seen = t @ m, parent, seen + 1
        assert seen < 10
    return m


def test_two_nodes_share_one_clock_tf_resolves_every_sensor_and_camera_info_reprojects():
    from nav_msgs.msg import Odometry
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import CameraInfo, Image
    from tf2_msgs.msg import TFMessage

    config = _config(vehicles=2)
    run = _Running(config, start_with=2)
    lis = _Listener(run.domain)
    try:
        lis.listen(Clock, "/clock")
        lis.listen(TFMessage, "/tf")
        lis.listen(TFMessage, "/tf_static", latched=True)
        for ns in ("vehicle0", "vehicle1"):
            lis.listen(Odometry, f"/{ns}/odom")
            lis.listen(Image, f"/{ns}/depth/image")
            lis.listen(CameraInfo, f"/{ns}/depth/camera_info")
        goal = _goal(config)
        nodes = [run.node("--ns", ns, "--goal", *goal, "--ticks", "90")
                 for ns in ("vehicle0", "vehicle1")]  # fmt: skip
        assert all(n.wait(60) == 0 for n in nodes)
        last = 90 * run.bridge.world.dt
        assert _wait(lambda: all(lis.messages(f"/{ns}/depth/camera_info") and _stamp(
            lis.messages(f"/{ns}/depth/camera_info")[-1]) >= last - 1e-6
            for ns in ("vehicle0", "vehicle1")))  # fmt: skip
        run.stop.set()
        run.thread.join(10)
        assert run.bridge.world.tick == 90
        # one clock: both vehicles' odometry carries the clock's stamps, tick for tick
        clock = {round(_stamp(m), 9) for m in lis.messages("/clock")}
        for ns in ("vehicle0", "vehicle1"):
            stamps = [round(_stamp(m), 9) for m in lis.messages(f"/{ns}/odom")]
            assert set(stamps) <= clock and len(set(stamps)) == 91
        # /tf resolves every sensor frame to map
        edges = {}
        for m in lis.messages("/tf_static") + [lis.messages("/tf")[-1]]:
            for tr in m.transforms:
                edges[tr.child_frame_id] = (tr.header.frame_id, _transform(tr))
        reading = run.bridge.world.read("depth")  # the last tick's, as published
        pts_world = reading.points("world").numpy()
        for i, ns in enumerate(("vehicle0", "vehicle1")):
            img_msg = lis.messages(f"/{ns}/depth/image")[-1]
            info = lis.messages(f"/{ns}/depth/camera_info")[-1]
            assert abs(_stamp(img_msg) - last) < 1e-6
            t_map = _resolve(img_msg.header.frame_id, edges)
            img = np.frombuffer(bytes(img_msg.data), "<f4").reshape(img_msg.height, img_msg.width)
            fx, cx, fy, cy = info.k[0], info.k[2], info.k[4], info.k[5]
            vs, us = np.nonzero(np.isfinite(img))
            assert us.size > 100
            for v, u in list(zip(vs, us, strict=True))[:: max(1, us.size // 50)]:
                z = float(img[v, u])
                p_cam = np.array([(u - cx) / fx * z, (v - cy) / fy * z, z, 1.0])
                p_map = (t_map @ p_cam)[:3]
                hit = pts_world[i, v * img.shape[1] + u]
                assert np.linalg.norm(p_map - hit) < 0.01, (ns, u, v, p_map, hit)
    finally:
        lis.close()
        run.close()


def test_a_killed_node_frees_its_vehicle_the_other_flies_on_and_a_restarted_node_takes_it_back():
    config = _config(vehicles=2)
    run = _Running(config, start_with=2, input_timeout=1.0)
    goal = _goal(config)
    nodes: list[subprocess.Popen] = []
    try:
        nodes = [run.node("--ns", ns, "--goal", *goal) for ns in ("vehicle0", "vehicle1")]
        assert _wait(lambda: run.bridge.world.tick >= 60)
        before = len(run.bridge.faults)  # (a loaded host has shown a spurious early free)
        os.kill(nodes[0].pid, signal.SIGKILL)
        nodes[0].wait(10)
        v0, v1 = run.bridge.vehicles
        assert _wait(lambda: v0.owner is None, 10), "the dead node's vehicle is freed"
        flown1 = v1.flown
        assert _wait(lambda: v1.flown >= flown1 + 60), "the other vehicle flies on"
        held_at = run.states[-1][0]["pos"].copy()
        flown0 = v0.flown
        nodes[0] = run.node("--ns", "vehicle0", "--goal", *goal)
        assert _wait(lambda: v0.flown >= flown0 + 30, 20), "the restarted node flies it again"
        assert np.linalg.norm(run.states[-1][0]["pos"] - held_at) > 0.05
        freed = [f for f in run.bridge.faults[before:] if f["code"] == "freed"]
        assert freed and freed[0]["vehicle"] == "vehicle0", freed
        assert "no command" in freed[0]["message"] or "left the ROS graph" in freed[0]["message"]
    finally:
        for n in nodes:
            n.kill()
        run.close()


@pytest.mark.parametrize("realtime", [False, True], ids=["lockstep", "realtime"])
def test_a_slow_node_loses_no_step_and_real_time_scales_the_clock(realtime):
    from std_msgs.msg import Float64

    config = _config()
    run = _Running(config, realtime=realtime)
    lis = _Listener(run.domain)
    try:
        lis.listen(Float64, "/volary/time_scale")
        node = run.node("--goal", *_goal(config), "--sleep", "0.05", "--ticks", "30")
        assert node.wait(60) == 0
        assert _wait(lambda: run.bridge.world.tick >= 30)
        v = run.bridge.vehicles[0]
        assert run.bridge.world.tick == v.flown == 30, "every tick flew the node's command"
        if realtime:  # 2 callbacks x 50 ms per 1/60 s tick: the clock runs at ~1/6 speed
            assert _wait(lambda: any(m.data < 0.5 for m in lis.messages("/volary/time_scale")))
            assert run.bridge.time_scale < 0.5
    finally:
        lis.close()
        run.close()


def test_bad_commands_and_a_node_in_another_vehicles_namespace_are_refused_on_diagnostics():
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import TwistStamped
    from nav_msgs.msg import Odometry
    from std_msgs.msg import Float64MultiArray

    config = _config(vehicles=2)
    run = _Running(config, start_with=2)
    lis = _Listener(run.domain)
    pilot1 = _Listener(run.domain, name="scripted")  # flies vehicle1 from the test process
    intruder = None
    node = None
    try:
        lis.listen(DiagnosticArray, "/diagnostics")
        vel = pilot1.node.create_publisher(TwistStamped, "/vehicle1/cmd_vel", 10)
        raw = pilot1.node.create_publisher(Float64MultiArray, "/vehicle1/cmd_raw", 10)
        bad = {5: [math.nan, 0, 0, 0], 6: [1.0, 2.0, 3.0]}  # tick -> a raw command to refuse

        def on_odom(msg: Any) -> None:
            tick = round(_stamp(msg) / run.bridge.world.dt)
            if tick in bad:
                raw.publish(Float64MultiArray(data=[float(x) for x in bad[tick]]))
            if tick == 7:
                cmd = TwistStamped()
                cmd.header.stamp, cmd.twist.linear.x = msg.header.stamp, math.inf
                vel.publish(cmd)
            cmd = TwistStamped()
            cmd.header.stamp = msg.header.stamp
            vel.publish(cmd)

        pilot1.node.create_subscription(Odometry, "/vehicle1/odom", on_odom, 10)
        node = run.node("--ns", "vehicle0", "--goal", *_goal(config), "--sleep", "0.01")
        assert _wait(lambda: run.bridge.world.tick >= 30)
        intruder = _Listener(run.domain, name="intruder")
        wrong = intruder.node.create_publisher(TwistStamped, "/vehicle0/cmd_vel", 10)
        v0, v1 = run.bridge.vehicles
        assert _wait(lambda: bool(v0.contested), 10), "a second node on vehicle0 is seen"
        wrong.publish(TwistStamped())
        flown0, flown1 = v0.flown, v1.flown
        assert _wait(lambda: v1.flown >= flown1 + 30), "the World flies on"
        assert v0.flown == flown0, "the contested vehicle is held"
        intruder.close()
        intruder = None
        assert _wait(lambda: v0.flown > flown0 + 10, 15), "vehicle0 flies again once it leaves"

        def texts() -> list[str]:
            return [s.message for m in lis.messages("/diagnostics") for s in m.status]

        expected = ["element 0 is nan", "expected 4 numbers, got 3", "element 0 is inf",
                    "/intruder also command(s) /vehicle0"]  # fmt: skip
        assert _wait(lambda: all(any(e in t for t in texts()) for e in expected), 5), texts()
        errors = [s for m in lis.messages("/diagnostics") for s in m.status if s.level == b"\x02"]
        assert {s.hardware_id for s in errors} == {"vehicle0", "vehicle1"}
        assert v1.refused == 3 and v1.owner == "/scripted"
    finally:
        if node is not None:
            node.kill()
        for n in (intruder, pilot1, lis):
            if n is not None:
                n.close()
        run.close()


def test_a_race_track_with_splat_rgb_flown_by_mavros_attitude_targets():
    """AlphaPilot's track, a photoreal (splat) RGB camera, collective thrust + body rates as a
    mavros user sends them: rgb8 images with their CameraInfo, gate counts, and a hover."""
    from mavros_msgs.msg import AttitudeTarget
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import CameraInfo, Image
    from std_msgs.msg import UInt32

    config = ServeConfig(slots=(SlotSpec(platform="flightgoggles", sensors=("rgb",)),),
                         scene="alphapilot_2019", control="ctbr", imu=None,
                         sensors={"rgb": SensorSpec("splat", "64x48", 15.0)})  # fmt: skip
    run = _Running(config)
    lis = _Listener(run.domain)
    pilot1 = _Listener(run.domain, name="mavros_like")
    try:
        for topic, t in (("image", Image), ("camera_info", CameraInfo)):
            lis.listen(t, f"/vehicle0/rgb/{topic}")
        lis.listen(UInt32, "/vehicle0/gates_passed")
        hover = float(
            run.bridge.world.params.mass[0] * 9.81 / run.bridge.world.params.max_thrust[0]
        )
        cmd = pilot1.node.create_publisher(AttitudeTarget, "/vehicle0/cmd_rates", 10)

        def on_odom(msg: Any) -> None:
            out = AttitudeTarget()
            out.header.stamp, out.type_mask = msg.header.stamp, AttitudeTarget.IGNORE_ATTITUDE
            out.thrust = hover
            cmd.publish(out)

        pilot1.node.create_subscription(Odometry, "/vehicle0/odom", on_odom, 10)
        assert _wait(lambda: run.bridge.world.tick >= 16 and len(lis.messages(
            "/vehicle0/rgb/image")) >= 4)  # fmt: skip
        img, info = (
            lis.messages("/vehicle0/rgb/image")[-1],
            lis.messages("/vehicle0/rgb/camera_info")[-1],
        )
        assert (img.encoding, img.width, img.height, len(img.data)) == ("rgb8", 64, 48, 64 * 48 * 3)
        assert np.frombuffer(bytes(img.data), np.uint8).std() > 1.0, "a picture, not a blank"
        assert (info.width, info.height, info.k[2], info.k[5]) == (64, 48, 31.5, 23.5)
        assert img.header.frame_id == info.header.frame_id == "vehicle0/rgb_optical_frame"
        assert lis.messages("/vehicle0/gates_passed")[-1].data == 0
        z = [s[0]["pos"][2] for s in run.states]
        assert abs(z[-1] - z[0]) < 0.05, "normalized hover thrust holds the vehicle up"
    finally:
        pilot1.close()
        lis.close()
        run.close()


def test_a_scene_file_from_the_command_line_is_the_world_on_ros2(tmp_path):
    from volary.cli.serve import build_config
    from volary.worlds.io import MeshScene, box_mesh, write_obj
    from volary.worlds.primitives import Box

    v, f = box_mesh(Box(center=(5.0, 0.0, 1.0), size=(1.0, 1.0, 2.0)))
    write_obj(tmp_path / "box.obj", MeshScene(v, f))
    params = [f"path={tmp_path / 'box.obj'}", "start=[0, 0, 1]", "goal=[10, 0, 1]",
              "bounds=[[-2, -4, 0], [12, 4, 3]]"]  # fmt: skip
    config = build_config(scene="custom", seed=0, vehicles=1, in_loop=0, platform="crazyflie",
                          control="velocity", control_hz=60.0, imu="none",
                          sensors=["depth=depth:aerial_gym_64"], scene_params=params)  # fmt: skip
    bridge = Ros2Bridge(config, domain_id=_domain())
    try:
        depth = bridge._obs[0]["sensors"]["depth"]["depth"]
        assert abs(float(depth[32, 32]) - 4.5) < 1e-3, "the box's face, 4.5 m ahead"
    finally:
        bridge.close()


def test_a_node_still_commanding_is_not_freed_when_a_graph_query_misses_it():
    """DDS discovery lags on a loaded host: a graph query without the owner frees its vehicle
    only after GRAPH_GRACE_S *and* no command from it since it went missing (a clean run froze
    a live node's vehicle at tick 62 this way)."""
    from types import SimpleNamespace

    from volary.ros2 import bridge as B
    from volary.ros2.topics import Vehicle

    freed: list[str] = []
    v = Vehicle(index=0, ns="vehicle0", topic="/vehicle0/cmd", owner="/vehicle0/pilot")
    fake = SimpleNamespace(vehicles=[v], _publishers=lambda topic: [],
                           _free=lambda veh, why: freed.append(why))  # fmt: skip
    B.Ros2Bridge._check_graph(fake)  # type: ignore[arg-type]
    assert v.absent_since is not None and not freed  # one missing query is not a departure
    v.absent_since -= 2 * B.GRAPH_GRACE_S
    v.heard = time.monotonic()  # but it commanded since
    B.Ros2Bridge._check_graph(fake)  # type: ignore[arg-type]
    assert not freed
    v.heard = v.absent_since - 1.0  # silent since it went missing
    B.Ros2Bridge._check_graph(fake)  # type: ignore[arg-type]
    assert freed == ["its node left the ROS graph"]
