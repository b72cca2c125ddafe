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
from volary.serve.recording import read_bag, replay  # noqa: E402
from volary.serve.world import SensorSpec, ServeConfig, SlotSpec  # noqa: E402

RIG = {**SENSORS, "lidar": SensorSpec("lidar", "os0_16", 10.0)}
TWO = ServeConfig(
    slots=(SlotSpec(sensors=("depth", "tof", "lidar")), SlotSpec(role="in_loop",
           sensors=("depth",))), scene="forest", seed=3, sensors=RIG,
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
            "geometry_msgs/msg/PoseStamped"} <= schemas  # fmt: skip
    assert counts["/vehicle0/pose"] == counts["/vehicle1/pose"] == counts["/clock"] == 25
    assert counts["/vehicle0/setpoint"] == counts["/vehicle1/pose_in"] == 25
    assert counts["/vehicle0/imu"] == 25 and counts["/vehicle0/tof"] == 25
    assert counts["/vehicle0/depth"] == counts["/vehicle1/depth"] == 25 // 4  # 15 Hz of 60
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
            if topic.endswith(("/pose", "/twist", "/depth", "/imu", "/tof")):
                assert _fields(m) == _fields(b[topic]), (tick, topic)
                compared += 1
    assert compared >= 30 * 6  # poses, twists, IMU and ToF every tick; depth at 15 Hz


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
