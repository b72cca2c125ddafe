"""Recording a served run to a ROS 2 bag (MCAP storage) and replaying it."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("rosbags")
pytest.importorskip("mcap")
zmq = pytest.importorskip("zmq")

from test_serve import HOVER_CF, SENSORS, _ctbr, serving  # noqa: E402
from volary.client import Client  # noqa: E402
from volary.serve import protocol as P  # noqa: E402
from volary.serve.recording import read_bag  # noqa: E402
from volary.serve.replay import replay  # noqa: E402
from volary.serve.world import SensorSpec, ServeConfig, SlotSpec  # noqa: E402

RIG = {**SENSORS, "lidar": SensorSpec("lidar", "os0_16", 10.0)}
TWO = ServeConfig(
    slots=(SlotSpec(sensors=("depth", "tof", "lidar")), SlotSpec(role="in_loop",
           sensors=("depth",))), scene="forest", seed=3, sensors=RIG,
    noise_keys=(11, 2**31 - 1),  # each vehicle's noise from its own key; replayed the same
)  # fmt: skip


def _fly(address: str, steps: int) -> list[dict]:
    out = []
    with Client(address, slot=0) as sim, Client(address, role="in_loop") as loop:
        for k in range(steps):
            # the in-the-loop vehicle's pose goes in first; the tick waits for the simulated one
            loop.sock.send_multipart(P.encode({"op": "step", "pos": [1.0, 0.5 + 0.01 * k, 1.5],
                                               "quat": [1.0, 0.0, 0.0, 0.0],
                                               "vel": [0.0, 0.6, 0.0]}))  # fmt: skip
            out.append(sim.step(_ctbr(k)))
            assert loop.sock.poll(10_000)
            assert P.decode(loop.sock.recv_multipart())["op"] == "obs"
    return out


def test_a_recording_holds_every_tick_and_opens_with_mcap_and_rosbags(tmp_path):
    bag = tmp_path / "run"
    with serving(TWO, record=bag) as srv:
        obs = _fly(srv.address, 25)
        junk = zmq.Context.instance().socket(zmq.DEALER)
        junk.connect(srv.address)
        junk.send(b"\xc1 not msgpack")  # a fault, recorded as an event
        assert junk.poll(10_000) and P.decode(junk.recv_multipart())["op"] == "error"
        junk.close(0)
    # a pure-Python MCAP reader with the ROS 2 schemas (no ROS install)
    from mcap.reader import make_reader
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    (mcap_file,) = bag.glob("*.mcap")
    counts: dict[str, int] = {}
    with open(mcap_file, "rb") as f:
        reader = make_reader(f)
        schemas = {s.name for s in reader.get_summary().schemas.values()}
        for schema, channel, message in reader.iter_messages():
            counts[channel.topic] = counts.get(channel.topic, 0) + 1
            assert schema.encoding == "ros2msg" and channel.message_encoding == "cdr"
            msg = ts.deserialize_cdr(message.data, schema.name)
            if channel.topic == "/vehicle0/pose" and message.log_time == 25 * round(1e9 / 60):
                p = msg.pose.position
                assert [p.x, p.y, p.z] == obs[-1]["state"]["pos"].astype(float).tolist()
    assert {"sensor_msgs/msg/Imu", "sensor_msgs/msg/Image", "sensor_msgs/msg/PointCloud2",
            "sensor_msgs/msg/CameraInfo", "geometry_msgs/msg/PoseStamped",
            "nav_msgs/msg/Odometry", "tf2_msgs/msg/TFMessage"} <= schemas  # fmt: skip
    assert counts["/vehicle0/pose"] == counts["/vehicle1/pose"] == counts["/clock"] == 25
    assert counts["/vehicle0/odom"] == counts["/vehicle1/odom"] == counts["/tf"] == 25
    assert counts["/tf_static"] == 1
    assert counts["/vehicle0/setpoint"] == counts["/vehicle1/pose_in"] == 25
    assert counts["/vehicle0/imu"] == 25 and counts["/vehicle0/tof/points"] == 25
    assert counts["/vehicle0/depth/image"] == counts["/vehicle1/depth/image"] == 25 // 4  # 15 Hz
    assert counts["/vehicle0/depth/camera_info"] == counts["/vehicle0/depth/image"]
    _, ticks = read_bag(bag)
    events = [json.loads(m.data) for msgs in ticks.values() for t, m in msgs
              if t == "/volary/events"]  # fmt: skip
    assert [e["slot"] for e in events if e["event"] == "reset"] == [0, 1]
    assert [e["code"] for e in events if e["event"] == "fault"] == ["bad_message"]


def test_replay_reproduces_the_recorded_run_bit_for_bit(tmp_path):
    with serving(TWO, record=tmp_path / "live") as srv:
        _fly(srv.address, 30)
    replay(tmp_path / "live", record=tmp_path / "again")
    _, live = read_bag(tmp_path / "live")
    _, again = read_bag(tmp_path / "again")
    assert sorted(live) == sorted(again)
    compared = 0
    for tick in live:
        a = {t: m for t, m in live[tick] if t != "/volary/events"}
        b = {t: m for t, m in again[tick] if t != "/volary/events"}
        assert sorted(a) == sorted(b), tick
        for topic, m in a.items():
            if topic.endswith(("/pose", "/twist", "/odom", "/tf", "/image", "/imu", "/points")):
                assert _fields(m) == _fields(b[topic]), (tick, topic)
                compared += 1
    assert compared >= 30 * 9  # poses, twists, odometry, tf, IMU and ToF every tick; depth 15 Hz


def _bag(path) -> dict[str, list[tuple[int, object]]]:
    """{topic: [(log time ns, message), ...]} of a recording, read with mcap and rosbags."""
    from mcap.reader import make_reader
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    (mcap_file,) = path.glob("*.mcap")
    out: dict[str, list[tuple[int, object]]] = {}
    with open(mcap_file, "rb") as f:
        for schema, channel, message in make_reader(f).iter_messages():
            msg = ts.deserialize_cdr(message.data, schema.name)
            out.setdefault(channel.topic, []).append((message.log_time, msg))
    return out


def test_the_recording_has_the_ros2_bridges_frames_tf_and_camera_info(tmp_path):
    """/tf_static chains every sensor frame to map, /tf moves base_link every tick, the twist
    is the body twist in base_link (as the odometry's), and each depth image has its
    CameraInfo with ROS's pixel-centre intrinsics."""
    from volary.sensors import camera_config, lidar_config, tof_config
    from volary.serve.roscommon import body_velocity, ros_intrinsics, to_ros_quat

    steps, dt_ns = 12, round(1e9 / 60)
    with serving(TWO, record=tmp_path / "bag") as srv:
        obs = _fly(srv.address, steps)
    bag = _bag(tmp_path / "bag")

    def xyz(v):
        return [v.x, v.y, v.z]

    def quat(q):
        return (q.x, q.y, q.z, q.w)

    # /tf_static: map -> vehicle{i}/odom (identity), base_link -> each sensor's frame (mount)
    ((t0, static),) = bag["/tf_static"]
    assert t0 == 0
    parent = {tr.child_frame_id: tr.header.frame_id for tr in static.transforms}
    by_child = {tr.child_frame_id: tr for tr in static.transforms}
    for i in (0, 1):
        odom = by_child[f"vehicle{i}/odom"]
        assert odom.header.frame_id == "map"
        assert xyz(odom.transform.translation) == [0.0, 0.0, 0.0]
        assert quat(odom.transform.rotation) == (0.0, 0.0, 0.0, 1.0)
    mounts = {"vehicle0/depth_optical_frame": camera_config("aerial_gym_64").mount,
              "vehicle0/tof_link": tof_config("vl53l5cx").mount,
              "vehicle0/lidar_link": lidar_config("os0_16").mount,
              "vehicle1/depth_optical_frame": camera_config("aerial_gym_64").mount}  # fmt: skip
    for frame, mount in mounts.items():
        tr = by_child[frame]
        assert tr.header.frame_id == f"{frame.split('/')[0]}/base_link"
        assert xyz(tr.transform.translation) == list(mount.translation)
        assert quat(tr.transform.rotation) == to_ros_quat(mount.rotation)

    # /tf: odom -> base_link of both vehicles every tick, the pose topic's pose
    assert [t for t, _ in bag["/tf"]] == [k * dt_ns for k in range(1, steps + 1)]
    poses = {i: dict(bag[f"/vehicle{i}/pose"]) for i in (0, 1)}
    for t, msg in bag["/tf"]:
        assert [tr.child_frame_id for tr in msg.transforms] == ["vehicle0/base_link",
                                                                "vehicle1/base_link"]  # fmt: skip
        for i, tr in enumerate(msg.transforms):
            parent[tr.child_frame_id] = tr.header.frame_id
            assert tr.header.frame_id == f"vehicle{i}/odom"
            assert (tr.header.stamp.sec * 10**9 + tr.header.stamp.nanosec) == t
            pose = poses[i][t]
            assert pose.header.frame_id == "map"
            assert xyz(tr.transform.translation) == xyz(pose.pose.position)
            assert quat(tr.transform.rotation) == quat(pose.pose.orientation)
    for frame in mounts:  # every sensor frame reaches map
        chain = [frame]
        while chain[-1] in parent:
            chain.append(parent[chain[-1]])
        assert chain[-1] == "map" and len(chain) == 4, chain

    # the twist: body velocity and rates in base_link, equal to the odometry's twist
    for i in (0, 1):
        for (_, tw), (_, od) in zip(bag[f"/vehicle{i}/twist"], bag[f"/vehicle{i}/odom"],
                                    strict=True):  # fmt: skip
            assert tw.header.frame_id == od.child_frame_id == f"vehicle{i}/base_link"
            assert od.header.frame_id == f"vehicle{i}/odom"
            assert xyz(tw.twist.linear) == xyz(od.twist.twist.linear)
            assert xyz(tw.twist.angular) == xyz(od.twist.twist.angular)
    last = bag["/vehicle0/twist"][-1][1].twist
    st = obs[-1]["state"]
    np.testing.assert_allclose(xyz(last.linear), body_velocity(st["quat"], st["vel"]),
                               rtol=1e-6, atol=1e-7)  # fmt: skip
    np.testing.assert_allclose(xyz(last.angular), st["omega"], rtol=1e-6, atol=1e-7)
    assert bag["/vehicle0/imu"][0][1].header.frame_id == "vehicle0/base_link"

    # images, clouds and CameraInfo in the sensor frames; K in ROS's pixel convention
    cam = camera_config("aerial_gym_64")
    fx, fy, cx, cy = ros_intrinsics(*cam.intrinsics.tolist())
    for i in (0, 1):
        images = bag[f"/vehicle{i}/depth/image"]
        infos = bag[f"/vehicle{i}/depth/camera_info"]
        assert [t for t, _ in images] == [t for t, _ in infos] and images
        for (_, img), (_, info) in zip(images, infos, strict=True):
            assert img.header.frame_id == info.header.frame_id == f"vehicle{i}/depth_optical_frame"
            assert img.encoding == "32FC1" and (img.width, img.height) == (cam.width, cam.height)
            assert (info.width, info.height) == (cam.width, cam.height)
            assert info.k.tolist() == [fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0]
            assert info.p.tolist() == [fx, 0.0, cx, 0.0, 0.0, fy, cy, 0.0, 0.0, 0.0, 1.0, 0.0]
    assert cx == cam.intrinsics[2].item() - 0.5
    seen = [o for o in obs if "depth" in o["sensors"]]
    assert seen
    images = dict(bag["/vehicle0/depth/image"])
    for o in seen:  # z-depth, NaN where invalid
        d = o["sensors"]["depth"]
        img = np.frombuffer(images[o["tick"] * dt_ns].data.tobytes(), "<f4").reshape(64, 64)
        want = np.where(d["valid"], d["depth"], np.nan).astype(np.float32)
        np.testing.assert_array_equal(img, want)
    for name, frame in (("tof", "vehicle0/tof_link"), ("lidar", "vehicle0/lidar_link")):
        assert {m.header.frame_id for _, m in bag[f"/vehicle0/{name}/points"]} == {frame}


def _fields(msg) -> str:
    """A message as text of every field (arrays as bytes), for exact comparison."""

    def lift(v):
        if isinstance(v, np.ndarray):
            return v.tobytes().hex()
        if hasattr(v, "__dataclass_fields__"):
            return {k: lift(getattr(v, k)) for k in v.__dataclass_fields__}
        if isinstance(v, list):
            return [lift(x) for x in v]
        return repr(v)

    return json.dumps(lift(msg), sort_keys=True)


def test_a_killed_client_loses_nothing_in_the_recording(tmp_path):
    """The surviving client's ticks are all recorded, with the drop as a fault event."""
    cfg = ServeConfig(slots=(SlotSpec(), SlotSpec()), scene="forest", seed=3)
    with serving(cfg, record=tmp_path / "bag", input_timeout=0.5) as srv:
        good, gone = Client(srv.address, slot=0), Client(srv.address, slot=1)
        gone.sock.send_multipart(P.encode({"op": "step", "command": [HOVER_CF, 0, 0, 0]}))
        good.step([HOVER_CF, 0, 0, 0])
        gone.sock.close(0)  # vanishes without a bye
        for _ in range(5):
            good.step([HOVER_CF, 0, 0, 0])
        good.close()
    _, ticks = read_bag(tmp_path / "bag")
    topics = [t for msgs in ticks.values() for t, _ in msgs]
    assert topics.count("/vehicle0/setpoint") == 6 and topics.count("/vehicle1/setpoint") == 1
    assert topics.count("/vehicle0/pose") == topics.count("/vehicle1/pose") == 6
    faults = [json.loads(m.data) for msgs in ticks.values() for t, m in msgs
              if t == "/volary/events" and json.loads(m.data)["event"] == "fault"]  # fmt: skip
    # the drop is recorded as slot 1's timeout; when the server answers the vanished client's
    # step after the socket closed (a busy machine), the reply's failure is recorded too
    codes = [f["code"] for f in faults]
    assert codes.count("timeout") == 1 and set(codes) <= {"timeout", "unreachable"}, codes
    assert {f["slot"] for f in faults} == {1}


def test_every_fault_is_recorded_even_past_the_in_memory_log(tmp_path):
    """3,000 malformed messages, an oversized one and a wrong token while a client flies: the
    server keeps its newest thousand faults in memory, the recording keeps every one, and
    every tick of the flight."""
    cfg = ServeConfig(scene="forest", seed=3)
    with serving(cfg, record=tmp_path / "bag", token="s3cret-token", max_bytes=4096) as srv:
        good = Client(srv.address, token="s3cret-token")
        bad = zmq.Context.instance().socket(zmq.DEALER)
        bad.setsockopt(zmq.LINGER, 0)
        bad.connect(srv.address)
        sent = 0
        for _tick in range(10):
            for _ in range(300):
                bad.send(b"\xc1 garbage")
                sent += 1
            good.step([HOVER_CF, 0.0, 0.0, 0.0])
        bad.send_multipart(P.encode({"op": "hello", "token": "wrong-token"}))
        bad.send_multipart(P.encode({"op": "ping", "pad": np.zeros(4096, np.uint8)}))
        sent += 2
        for _ in range(sent):  # every one gets its error reply
            assert bad.poll(10_000)
            bad.recv_multipart()
        good.step([HOVER_CF, 0.0, 0.0, 0.0])
        good.close()
        bad.close(0)
        assert len(srv.faults) == 1000
    _, ticks = read_bag(tmp_path / "bag")
    events = [json.loads(m.data) for msgs in ticks.values() for t, m in msgs
              if t == "/volary/events"]  # fmt: skip
    codes = [e["code"] for e in events if e["event"] == "fault"]
    assert len(codes) == sent and codes.count("bad_message") == 3000
    assert codes[-2:] == ["unauthorized", "too_large"]
    topics = [t for msgs in ticks.values() for t, _ in msgs]
    assert topics.count("/vehicle0/pose") == topics.count("/vehicle0/setpoint") == 11
