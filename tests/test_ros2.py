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

rclpy = pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (pip install 'volary[ros2]')")
pytest.importorskip("tf2_msgs.msg", reason="run: python -m volary.ros2.msgs build")

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
    return 1 + (os.getpid() * 7 + next(_ids)) % 100


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
            self.states.append({s: {f: np.array(v) for f, v in o["state"].items()}
                                for s, o in obs.items()})  # fmt: skip
            return obs

        self.bridge.advance = recorded  # type: ignore[method-assign]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.bridge.spin, args=(self.stop,), daemon=True)
        self.thread.start()

    def env(self) -> dict[str, str]:
        env = dict(os.environ, ROS_DOMAIN_ID=str(self.domain),
                   ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", FASTDDS_BUILTIN_TRANSPORTS="SHM")
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
