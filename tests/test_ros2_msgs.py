"""volary.ros2.msgs: the tf2_msgs and mavros_msgs packages it builds work over real DDS.

A child process publishes a TFMessage and an AttitudeTarget through rclpy (rmw_fastrtps_cpp);
this process receives both with every field equal, and discovery reports upstream's type names
and RIHS01 hashes, the two things a real ROS 2 peer (rviz, tf2, mavros) matches on. The packages
are built into pytest's cache folder (seconds the first time, an up-to-date check afterwards).

Needs the ROS 2 wheels in the running interpreter (skipped otherwise) and gcc/g++. tests/
conftest.py imports torch, which a ROS venv may lack; run it there with --noconftest:
``PYTHONPATH=src <ros-venv>/bin/python -m pytest --noconftest tests/test_ros2_msgs.py``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

rclpy = pytest.importorskip("rclpy")
# Generated message modules import rosidl_parser, whose lark import trips this on Python 3.11.
pytestmark = pytest.mark.filterwarnings("ignore:module 'sre_:DeprecationWarning")

# Upstream's hashes: TFMessage's is what `ros2 topic info -v /tf` prints on Jazzy;
# AttitudeTarget's follows from mavros_msgs' field list (constants and comments are not hashed).
TF_HASH = "RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087"
ATTITUDE_HASH = "RIHS01_4b73630cb236d7e19f68f2366a565145460c507603df32bc3ff209554b88fe10"
# Loopback only: shared-memory transport, discovery limited to this host.
ROS_ENV = {"FASTDDS_BUILTIN_TRANSPORTS": "SHM", "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
TIMEOUT_S = 8.0


@pytest.fixture(scope="module")
def prefix(request: pytest.FixtureRequest) -> Iterator[Path]:
    """Build (or find up to date) the packages in a per-interpreter cache folder."""
    if shutil.which("gcc") is None or shutil.which("g++") is None:
        pytest.skip("gcc and g++ are needed to build the message packages")
    from volary.ros2.msgs import build

    key = hashlib.sha256(sys.prefix.encode()).hexdigest()[:12]
    folder = _cache_dir(request, f"volary_ros2_msgs_{key}")
    build(folder, log=lambda _line: None)
    sys.path.insert(0, str(folder))
    try:
        yield folder
    finally:
        sys.path.remove(str(folder))


def _cache_dir(request: pytest.FixtureRequest, name: str) -> Path:
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    if cache is not None:
        return Path(cache.mkdir(name))
    return request.getfixturevalue("tmp_path_factory").mktemp(name)


def make_messages() -> dict[str, Any]:
    """The messages the child publishes and this process expects, keyed by topic suffix."""
    from builtin_interfaces.msg import Time
    from geometry_msgs.msg import Quaternion, Transform, TransformStamped, Vector3
    from mavros_msgs.msg import AttitudeTarget
    from std_msgs.msg import Header
    from tf2_msgs.msg import TFMessage

    def transform(parent: str, child: str, x: float, sec: int) -> TransformStamped:
        return TransformStamped(
            header=Header(stamp=Time(sec=sec, nanosec=250_000_000), frame_id=parent),
            child_frame_id=child,
            transform=Transform(
                translation=Vector3(x=x, y=-2.25, z=0.125),
                rotation=Quaternion(x=0.5, y=-0.5, z=0.5, w=0.5),
            ),
        )

    tf = TFMessage(transforms=[transform("world", "base_link", 1.5, 7), transform("a", "b", 0, 8)])
    attitude = AttitudeTarget(
        header=Header(stamp=Time(sec=42, nanosec=7), frame_id="base_link"),
        type_mask=AttitudeTarget.IGNORE_ATTITUDE | AttitudeTarget.IGNORE_YAW_RATE,
        orientation=Quaternion(x=0.0, y=0.0, z=0.7071067811865476, w=0.7071067811865476),
        body_rate=Vector3(x=0.25, y=-1.5, z=3.0),
        thrust=0.625,  # exact in float32
    )
    return {"tf": tf, "attitude": attitude}


def test_constants_match_upstream(prefix: Path) -> None:
    from mavros_msgs.msg import AttitudeTarget

    masks = [
        AttitudeTarget.IGNORE_ROLL_RATE,
        AttitudeTarget.IGNORE_PITCH_RATE,
        AttitudeTarget.IGNORE_YAW_RATE,
        AttitudeTarget.IGNORE_THRUST,
        AttitudeTarget.IGNORE_ATTITUDE,
    ]
    assert masks == [1, 2, 4, 64, 128]


def test_messages_cross_processes(prefix: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ROS_ENV.items():
        monkeypatch.setenv(name, value)
    namespace = f"/volary_test_{os.getpid()}"
    expected = make_messages()
    from rclpy.context import Context

    context = Context()
    rclpy.init(context=context)
    child = None
    try:
        node = rclpy.create_node("volary_msgs_receiver", context=context)
        received: dict[str, Any] = {}
        for topic, msg in expected.items():
            node.create_subscription(
                type(msg), f"{namespace}/{topic}", _keep_first(received, topic), 10
            )
        child = _start_publisher(prefix, namespace)
        _spin_until(node, context, lambda: len(received) == len(expected), child)
        for topic in expected:
            assert received[topic] == expected[topic], topic
        infos = {t: node.get_publishers_info_by_topic(f"{namespace}/{t}") for t in expected}
        assert [(i.topic_type, str(i.topic_type_hash)) for i in infos["tf"]] == [
            ("tf2_msgs/msg/TFMessage", TF_HASH)
        ]
        assert [(i.topic_type, str(i.topic_type_hash)) for i in infos["attitude"]] == [
            ("mavros_msgs/msg/AttitudeTarget", ATTITUDE_HASH)
        ]
    finally:
        if child is not None:
            child.kill()
            child.wait()
        rclpy.shutdown(context=context)


def _keep_first(received: dict[str, Any], topic: str) -> Any:
    return lambda msg: received.setdefault(topic, msg)


def _start_publisher(prefix: Path, namespace: str) -> subprocess.Popen[bytes]:
    path = os.pathsep.join([str(prefix), *sys.path])
    env = {**os.environ, **ROS_ENV, "PYTHONPATH": path}
    return subprocess.Popen([sys.executable, __file__, namespace], env=env)


def _spin_until(node: Any, context: Any, done: Any, child: subprocess.Popen[bytes]) -> None:
    from rclpy.executors import SingleThreadedExecutor

    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    deadline = time.monotonic() + TIMEOUT_S
    while not done():
        assert child.poll() is None, f"the publisher process exited ({child.returncode})"
        assert time.monotonic() < deadline, "nothing received from the publisher process"
        executor.spin_once(timeout_sec=0.05)


def _publish_forever(namespace: str) -> None:
    """Child process: publish the messages every 50 ms until killed (or TIMEOUT_S passes)."""
    rclpy.init()
    node = rclpy.create_node("volary_msgs_sender")
    messages = make_messages()
    publishers = {
        t: node.create_publisher(type(m), f"{namespace}/{t}", 10) for t, m in messages.items()
    }
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        for topic, msg in messages.items():
            publishers[topic].publish(msg)
        time.sleep(0.05)


if __name__ == "__main__":
    _publish_forever(sys.argv[1])
