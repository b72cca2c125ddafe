"""``volary serve`` and ``volary.client``: the wire format, parity with in-process flight, the
AlphaPilot interface from another process, and faults that must not take the server down."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import msgpack
import numpy as np
import pytest
import torch

zmq = pytest.importorskip("zmq")

from volary.client import Client, ServerError  # noqa: E402
from volary.errors import ConfigError  # noqa: E402
from volary.serve import protocol as P  # noqa: E402
from volary.serve.server import Server  # noqa: E402
from volary.serve.world import (  # noqa: E402
    SensorSpec,
    ServeConfig,
    SlotSpec,
    build_world,
)

HOVER_CF = 0.027 * 9.81  # N, crazyflie collective thrust at hover


@contextlib.contextmanager
def serving(config: ServeConfig, **kw):
    srv = Server(config, bind=kw.pop("bind", "tcp://127.0.0.1:*"), **kw)
    stop = threading.Event()
    th = threading.Thread(target=srv.serve, args=(stop,), daemon=True)
    th.start()
    try:
        yield srv
    finally:
        stop.set()
        th.join(10)
        srv.close()


def _ctbr(k: int) -> np.ndarray:
    """A command sequence that climbs, rolls and yaws (float32 values, as a client would)."""
    return np.array(
        [HOVER_CF * (1.15 if k < 20 else 0.97), 0.4 * np.sin(k / 7), 0.2, -0.3], dtype=np.float32
    ).astype(np.float64)


# ---- the wire format --------------------------------------------------------------------------
def test_messages_round_trip_with_arrays_as_frames():
    arrays = {d: np.arange(6).astype(np.dtype(d)).reshape(2, 3) for d in sorted(P.DTYPES)}
    msg = {"op": "obs", "nested": {"list": [1, 2.5, "x", None, True], **arrays}}
    frames = P.encode(msg)
    assert len(frames) == 1 + len(arrays)  # every array travels as its own frame
    out = P.decode([bytes(f) for f in frames])
    assert out["v"] == P.VERSION and out["nested"]["list"] == [1, 2.5, "x", None, True]
    for d, a in arrays.items():
        assert out["nested"][d].dtype == a.dtype and np.array_equal(out["nested"][d], a)


def test_arrays_of_any_layout_travel_as_their_contiguous_little_endian_copy():
    """Big-endian, strided and 0-d arrays are sent as the little-endian, contiguous, 1-d-or-more
    array a reader expects; an array already so is sent as it is, with the same bytes."""
    a = np.arange(12, dtype="<f4").reshape(3, 4)
    for b in (a.astype(">f4"), np.asfortranarray(a), a.T.copy().T):
        assert [bytes(f) for f in P.encode({"op": "x", "a": b})] == [
            bytes(f) for f in P.encode({"op": "x", "a": a})
        ]
    strided = P.decode([bytes(f) for f in P.encode({"op": "x", "a": a[:, ::2]})])["a"]
    assert strided.dtype.str == "<f4" and np.array_equal(strided, a[:, ::2])
    scalar = P.decode([bytes(f) for f in P.encode({"op": "x", "a": np.array(2.5)})])["a"]
    assert scalar.shape == (1,) and scalar[0] == 2.5
    with pytest.raises(P.ProtocolError, match="nested deeper"):
        P.encode({"op": "x", "a": [[[[[[[[1]]]]]]]]})
    with pytest.raises(P.ProtocolError, match="nested deeper"):
        P.decode([msgpack.packb({"v": 1, "op": "x", "a": [[[[[[[[1]]]]]]]]})])


def _arr(frame: int, dtype: str, shape: list[int]) -> bytes:
    spec = {"__array__": frame, "dtype": dtype, "shape": shape}
    return msgpack.packb({"v": 1, "op": "x", "a": spec})


@pytest.mark.parametrize(
    "frames, code",
    [
        ([], "bad_message"),
        ([b"\xc1garbage"], "bad_message"),
        ([msgpack.packb([1, 2])], "bad_message"),
        ([msgpack.packb({"v": 99, "op": "step"})], "bad_version"),
        ([msgpack.packb({"v": 1})], "bad_message"),
        ([msgpack.packb({"v": 1, "op": "x", "e": msgpack.ExtType(5, b"ab")})], "bad_message"),
        (
            [
                msgpack.packb(
                    {"v": 1, "op": "x", "a": {"__array__": 3, "dtype": "<f4", "shape": [1]}}
                )
            ],
            "bad_field",
        ),
        (
            [
                msgpack.packb(
                    {"v": 1, "op": "x", "a": {"__array__": 1, "dtype": "<f4", "shape": [3]}}
                ),
                b"\x00" * 8,
            ],  # fmt: skip
            "bad_field",
        ),
        (
            [
                msgpack.packb(
                    {"v": 1, "op": "x", "a": {"__array__": 1, "dtype": "O", "shape": [1]}}
                ),
                b"\x00" * 8,
            ],  # fmt: skip
            "bad_field",
        ),
        ([msgpack.packb({"v": 1, "op": "x"}), b"\x00" * 2048], "too_large"),
    ],
)
def test_decode_rejects_what_is_not_protocol(frames, code):
    with pytest.raises(P.ProtocolError) as e:
        P.decode(frames, max_bytes=2000)
    assert e.value.code == code


def test_client_imports_neither_torch_nor_the_simulator():
    code = "import sys, volary.client; print(sorted({'torch', 'volary.sim'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_config_and_bind_are_checked():
    with pytest.raises(ConfigError, match="role"):
        ServeConfig(slots=(SlotSpec(role="pilot"),))
    with pytest.raises(ConfigError, match="sensors"):
        ServeConfig(slots=(SlotSpec(sensors=("depth",)),))
    with pytest.raises(ConfigError, match="token"):
        Server(ServeConfig(scene=None), bind="tcp://0.0.0.0:*")
    with pytest.raises(ConfigError, match=r"noise_keys: expected one key per slot \(1\), got 2"):
        ServeConfig(noise_keys=(1, 2))
    with pytest.raises(ConfigError, match=r"noise_keys: expected ints in \[0, 2\*\*31\), got -1"):
        ServeConfig(noise_keys=(-1,))


# ---- parity -----------------------------------------------------------------------------------
SENSORS = {"depth": SensorSpec("depth", "aerial_gym_64", 15), "tof": SensorSpec("tof", "vl53l5cx")}


def test_lockstep_flight_equals_in_process_bit_for_bit():
    """Each client's flight is the one the World as built flies in process, bit for bit, the
    second client's too: a hello puts the slot's noise streams (process, IMU, sensors) back
    where they began before it resets the slot (was: a later client's depth and ToF noise
    continued the streams the one before it had drawn). Each flies 32 ticks, so the second
    hello comes at the phase of the depth camera's 15 Hz schedule (the server's) the first had."""
    cfg = ServeConfig(slots=(SlotSpec(sensors=("depth", "tof")),), scene="forest", seed=3,
                      sensors=SENSORS)  # fmt: skip
    with serving(cfg) as srv:
        for _ in range(2):
            _fly_against_in_process(srv, cfg, build_world(cfg))
        assert srv.faults == []


def _fly_against_in_process(srv: Server, cfg: ServeConfig, ref: Any) -> None:
    with Client(srv.address) as c:
        assert c.control == "ctbr" and c.setpoint_size == 4
        # the welcome carries the sensors due at tick 0 (sensor noise streams advance per read)
        assert np.array_equal(c.obs["sensors"]["tof"]["range"], ref.read("tof").range[0].numpy())
        assert np.array_equal(
            c.obs["sensors"]["depth"]["depth"], ref.read("depth").depth[0].numpy()
        )
        tick0 = c.obs["tick"]
        for k in range(32):
            obs = c.step(_ctbr(k))
            st = ref.step(torch.from_numpy(_ctbr(k)).float()[None])
            for f in ("pos", "vel", "quat", "omega"):
                assert np.array_equal(obs["state"][f], getattr(st, f)[0].numpy()), (k, f)
            got = obs["sensors"]
            assert np.array_equal(got["imu"]["accel"], ref.sim.imu_reading.accel[0].numpy())
            assert np.array_equal(got["tof"]["range"], ref.read("tof").range[0].numpy())
            assert ("depth" in got) == ref.due("depth")
            if ref.due("depth"):
                assert np.array_equal(got["depth"]["depth"], ref.read("depth").depth[0].numpy())
        assert obs["tick"] == tick0 + 32


def test_in_the_loop_poses_render_the_same_sensors_and_collisions():
    """A position-mode flight into a tree in-process; its poses played back by a vehicle in the
    loop give the same depth and ToF readings and the same collision step."""
    from volary.worlds import make_scenario
    from volary.worlds.primitives import Cylinder

    spec = make_scenario("forest", 3)
    cfg = ServeConfig(slots=(SlotSpec(sensors=("depth", "tof")),), scene="forest", seed=3,
                      sensors=SENSORS, control="position", imu=None)  # fmt: skip
    ref = build_world(cfg)
    start = np.array(spec.start)
    trees = [o for o in spec.obstacles if isinstance(o, Cylinder)]
    tree = min(trees, key=lambda o: np.linalg.norm(np.array(o.center[:2]) - start[:2]))
    target = torch.tensor([[tree.center[0], tree.center[1], 1.5, 0.0]])
    poses, depth, tof, hits = [], {}, [], []
    first = (ref.read("tof").range[0].numpy().copy(), ref.read("depth").depth[0].numpy().copy())
    for k in range(150):
        st = ref.step(target)
        poses.append((st.pos[0].numpy().copy(), st.quat[0].numpy().copy()))
        tof.append(ref.read("tof").range[0].numpy().copy())
        if ref.due("depth"):
            depth[k] = ref.read("depth").depth[0].numpy().copy()
        hits.append(bool(ref.collision_events().collided[0]))
    assert any(hits), "the reference flight should reach the tree"
    loop_cfg = ServeConfig(slots=(SlotSpec("in_loop", sensors=("depth", "tof")),), scene="forest",
                           seed=3, sensors=SENSORS, control="position", imu=None)  # fmt: skip
    with serving(loop_cfg) as srv, Client(srv.address, role="in_loop") as c:
        assert np.array_equal(c.obs["sensors"]["tof"]["range"], first[0])
        assert np.array_equal(c.obs["sensors"]["depth"]["depth"], first[1])
        for k, (pos, quat) in enumerate(poses):
            obs = c.step(pos=pos, quat=quat)
            assert np.array_equal(obs["state"]["pos"], pos)
            assert np.array_equal(obs["sensors"]["tof"]["range"], tof[k]), k
            assert ("depth" in obs["sensors"]) == (k in depth)
            if k in depth:
                assert np.array_equal(obs["sensors"]["depth"]["depth"], depth[k]), k
            assert obs["events"]["collided"] == hits[k], k
            assert "imu" not in obs["sensors"]


# ---- the AlphaPilot interface from another process --------------------------------------------
ALPHAPILOT_CLIENT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from volary.client import Client

    with Client(sys.argv[1]) as c:
        seen = {}
        for k in range(60):  # one second of CTBR at 60 Hz
            obs = c.step([0.027 * 9.81 * 1.02, 0.0, 0.0, 0.1])
            for name, r in obs["sensors"].items():
                seen[name] = seen.get(name, 0) + 1
        b = obs["sensors"]["beacons"]
        print(json.dumps({"tick": obs["tick"], "seen": seen, "dt": c.dt,
                          "visible": int(np.sum(b["visible"])), "control": c.control}))
    """
)


def test_alphapilot_interface_from_a_separate_process():
    cfg = ServeConfig(
        slots=(SlotSpec(sensors=("camera", "beacons", "tof")),),
        scene="alphapilot_2019",
        sensors={
            "camera": SensorSpec("depth", "aerial_gym_64", 30),
            "beacons": SensorSpec("beacons", "aerial_gym_64", 30),
            "tof": SensorSpec("tof", "vl53l5cx", 60),
        },
    )
    with serving(cfg) as srv:
        out = subprocess.run(
            [sys.executable, "-c", ALPHAPILOT_CLIENT, srv.address],
            capture_output=True, text=True, timeout=300, env=_env(),
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-2000:]
        got = json.loads(out.stdout.strip().splitlines()[-1])
        assert srv.ticks == 60 and srv.faults == []
    assert got["tick"] == 60 and got["control"] == "ctbr" and abs(got["dt"] - 1 / 60) < 1e-12
    assert got["seen"] == {"imu": 60, "tof": 60, "camera": 30, "beacons": 30}
    assert got["visible"] > 0  # the first gate's corners are in view at the start


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}


# ---- faults -----------------------------------------------------------------------------------
TWO = ServeConfig(slots=(SlotSpec(), SlotSpec()), scene=None)

KILLED_CLIENT = textwrap.dedent(
    """
    import sys, time
    from volary.client import Client
    c = Client(sys.argv[1])
    for _ in range(5):
        c.step([0.3, 0.0, 0.0, 0.0])
    print("flying", flush=True)
    time.sleep(60)
    """
)


def test_a_killed_client_is_dropped_and_the_others_fly_on():
    with serving(TWO, input_timeout=2.0) as srv:
        good = Client(srv.address)
        proc = subprocess.Popen([sys.executable, "-c", KILLED_CLIENT, srv.address],
                                stdout=subprocess.PIPE, text=True, env=_env())  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while len(srv.peers) < 2:  # lock-step: the good client waits for the other to join
                assert time.monotonic() < deadline
                time.sleep(0.05)
            for _ in range(5):
                good.step([HOVER_CF, 0, 0, 0])
            assert proc.stdout.readline().strip() == "flying"
            os.kill(proc.pid, signal.SIGKILL)
            for _ in range(10):  # the first waits out the timeout, then the world is ours
                obs = good.step([HOVER_CF, 0, 0, 0])
        finally:
            proc.kill()
            proc.wait()
        assert obs["tick"] == 15
        assert [f["code"] for f in srv.faults] == ["timeout"] and srv.faults[0]["slot"] == 1
        assert len(srv._dropped) == 1  # were it alive, its next step would get "dropped"
        good.close()


def _raw(address: str):
    s = zmq.Context.instance().socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(address)
    return s


def test_ten_thousand_malformed_messages_get_errors_and_the_flight_goes_on():
    rng = np.random.default_rng(0)
    with serving(TWO) as srv:
        good = Client(srv.address, slot=0)
        bad = _raw(srv.address)
        kinds = [
            lambda: [rng.bytes(int(rng.integers(0, 200)))],
            lambda: [msgpack.packb({"v": 1, "op": "step", "command": "x" * 10})],
            lambda: [msgpack.packb({"v": 1, "op": str(rng.integers(1e6))})],
            lambda: [msgpack.packb({"v": 1, "op": "hello", "role": 7})],
            lambda: [msgpack.packb({"v": 1, "op": "hello", "slot": 0})],  # taken
        ]
        replies = 0
        for i in range(10_000):
            bad.send_multipart(kinds[i % len(kinds)]())
            if i % 1000 == 0:  # a legitimate client is served in between (the other slot free)
                good.step([HOVER_CF, 0, 0, 0])
            if i % 50 == 49:  # read the error replies (the server drops what a client leaves)
                while replies < i + 1:
                    assert bad.poll(10_000), (i, replies, srv.faults[-3:])
                    frames = bad.recv_multipart()
                    reply = P.decode(frames[1:] if frames[0] == b"" else frames)  # an empty
                    assert reply["op"] == "error" and reply["code"]  # first frame: REQ envelope
                    replies += 1
        assert replies == 10_000
        assert good.step([HOVER_CF, 0, 0, 0])["tick"] == 11
        assert len(srv.faults) == 1000  # the newest thousand are kept
        good.close()


def test_oversized_messages_and_wrong_tokens_are_refused():
    with serving(TWO, max_bytes=64 * 1024, token="s3cret-token") as srv:
        with pytest.raises(ServerError, match="unauthorized"):
            Client(srv.address, token="wrong-token", timeout=10)
        with pytest.raises(ServerError, match="unauthorized"):
            Client(srv.address, timeout=10)
        c = Client(srv.address, token="s3cret-token")
        big = _raw(srv.address)
        big.send_multipart([msgpack.packb({"v": 1, "op": "ping"}), b"\x00" * (100 * 1024)])
        assert big.poll(5000)
        assert P.decode(big.recv_multipart())["code"] == "too_large"
        # beyond ZeroMQ's hard cap (4 x max_bytes) the connection itself is dropped
        big.send_multipart([b"\x00" * (300 * 1024)])
        assert c.step([HOVER_CF, 0, 0, 0])["tick"] == 1
        codes = [f["code"] for f in srv.faults]
        assert codes.count("unauthorized") == 2 and codes.count("too_large") == 1
        c.close()


def test_a_client_that_stops_reading_does_not_block_the_server():
    with serving(TWO, hwm=4) as srv:
        good = Client(srv.address, slot=0)
        deaf = zmq.Context.instance().socket(zmq.DEALER)
        deaf.setsockopt(zmq.LINGER, 0)
        deaf.setsockopt(zmq.RCVHWM, 4)
        deaf.setsockopt(zmq.RCVBUF, 4096)
        deaf.connect(srv.address)
        ping = P.encode({"op": "ping"})
        deadline, ticks = time.monotonic() + 60, 0
        while not any(f["code"] == "backpressure" for f in srv.faults):
            assert time.monotonic() < deadline, "replies to the deaf client should be dropped"
            for _ in range(1000):  # every ping is answered; nothing is read
                with contextlib.suppress(zmq.Again):
                    deaf.send_multipart(ping, flags=zmq.NOBLOCK)
            obs = good.step([HOVER_CF, 0, 0, 0])  # meanwhile the others are served
            ticks += 1
            assert obs["tick"] == ticks
        assert good.step([HOVER_CF, 0, 0, 0])["tick"] == ticks + 1
        good.close()
        deaf.close(0)


def test_a_silent_client_is_told_it_was_dropped_and_may_join_again():
    with serving(TWO, input_timeout=0.3) as srv:
        a, b = Client(srv.address), Client(srv.address)
        assert a.step([HOVER_CF, 0, 0, 0])["tick"] == 1  # b said nothing for 0.3 s: dropped
        with pytest.raises(ServerError, match="dropped"):
            b.step([HOVER_CF, 0, 0, 0])
        again = Client(srv.address)  # its slot is free again
        assert again.slot == b.slot == 1
        a.close()
        again.close()


def test_a_splat_rgb_camera_streams_the_same_frames_as_in_process():
    """The photoreal RGB camera of the service (``splat`` kind, the scene's synthesized
    Gaussian splats): a client gets the frames an in-process World renders, bit for bit."""
    cfg = ServeConfig(slots=(SlotSpec(sensors=("rgb",)),), scene="forest", seed=3,
                      sensors={"rgb": SensorSpec("splat", "32x24", 30)})  # fmt: skip
    ref = build_world(cfg)
    pass  # TMP2
    with serving(cfg) as srv, Client(srv.address) as c:
        assert c.sensors["rgb"]["kind"] == "splat"
        first = c.obs["sensors"]["rgb"]["rgb"]
        assert first.shape == (24, 32, 3) and 0.0 <= first.min() and first.max() <= 1.0
        assert np.array_equal(first, ref.read("rgb").rgb[0].numpy())
        assert first.std() > 0.01  # a picture, not a blank
        for k in range(4):
            obs = c.step(_ctbr(k))
            ref.step(torch.from_numpy(_ctbr(k)).float()[None])
            if ref.due("rgb"):
                assert np.array_equal(obs["sensors"]["rgb"]["rgb"], ref.read("rgb").rgb[0].numpy())
