"""A ROS 2 node (rclpy, ``use_sim_time``) that flies one vehicle of ``volary ros2 serve``
through a forest to its goal from odometry + depth. It imports nothing of volary.

    python forest_node.py --ns vehicle0 --goal 18 4.6 1.5 [--sleep 0.05] [--ticks N]

For each tick it pairs the odometry and the depth image that carry the same stamp, runs
:func:`pilot.pilot` and publishes a ``geometry_msgs/TwistStamped`` on ``<ns>/cmd_vel`` with that
stamp (world-frame velocity, yaw rate in ``angular.z``). ``--sleep``: seconds each callback
sleeps (a slow node). It exits when within 0.5 m of the goal or after answering ``--ticks`` ticks.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import rclpy
from geometry_msgs.msg import TwistStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image

sys.path.insert(0, str(Path(__file__).parent))
from pilot import pilot  # noqa: E402


class ForestPilot(Node):
    def __init__(self, ns: str, goal: list[float], sleep: float, ticks: int) -> None:
        super().__init__("forest_pilot", parameter_overrides=[
            Parameter("use_sim_time", Parameter.Type.BOOL, True)])  # fmt: skip
        self.goal, self.sleep, self.ticks = np.array(goal), sleep, ticks
        self.odom: dict[tuple[int, int], Odometry] = {}
        self.depth: dict[tuple[int, int], np.ndarray] = {}
        self.sent = 0
        self.done = False
        self.answered = (-1, 0)  # the newest stamp answered
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.cmd = self.create_publisher(TwistStamped, f"/{ns}/cmd_vel", qos)
        self.create_subscription(Odometry, f"/{ns}/odom", self.on_odom, qos)
        self.create_subscription(Image, f"/{ns}/depth/image", self.on_depth, qos)

    def on_odom(self, msg: Odometry) -> None:
        self.odom[_key(msg)] = msg
        self.act(_key(msg))

    def on_depth(self, msg: Image) -> None:
        img = np.frombuffer(bytes(msg.data), dtype="<f4").reshape(msg.height, msg.width)
        self.depth[_key(msg)] = img
        self.act(_key(msg))

    def act(self, key: tuple[int, int]) -> None:
        if self.sleep:
            time.sleep(self.sleep)
        if key not in self.odom or key not in self.depth or self.done:
            return
        od, depth = self.odom.pop(key), self.depth.pop(key)
        for old in [k for k in self.odom if k < key]:
            del self.odom[old]
        for old in [k for k in self.depth if k < key]:
            del self.depth[old]
        p, q = od.pose.pose.position, od.pose.pose.orientation
        pos, quat = np.array([p.x, p.y, p.z]), np.array([q.w, q.x, q.y, q.z])
        if np.linalg.norm(pos - self.goal) < 0.5 or self.sent >= self.ticks:
            self.done = True
            return
        c = pilot(pos, quat, depth, self.goal)
        msg = TwistStamped()
        msg.header.stamp, msg.header.frame_id = od.header.stamp, "map"
        msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z = (float(v) for v in c[:3])
        msg.twist.angular.z = float(c[3])
        self.cmd.publish(msg)  # a repeat is answered too: its stamp tells the World it is one
        self.sent += key > self.answered  # ticks answered
        self.answered = max(key, self.answered)


def _key(msg: Odometry | Image) -> tuple[int, int]:
    return msg.header.stamp.sec, msg.header.stamp.nanosec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ns", default="vehicle0")
    ap.add_argument("--goal", type=float, nargs=3, required=True)
    ap.add_argument("--sleep", type=float, default=0.0)
    ap.add_argument("--ticks", type=int, default=10**9)
    a = ap.parse_args()
    rclpy.init()
    node = ForestPilot(a.ns, a.goal, a.sleep, a.ticks)
    try:
        while rclpy.ok() and not node.done:
            rclpy.spin_once(node, timeout_sec=0.1)
    finally:
        print(f"forest_pilot: {node.sent} commands", flush=True)
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
