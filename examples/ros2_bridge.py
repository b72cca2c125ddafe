"""A ROS 2 node that puts a vehicle of ``volary serve`` on ROS 2 topics (an example; untested here).

ROS 2 (rclpy) cannot be installed on volary's development machines, so this file is documented,
type-free example code, not part of the test suite. It needs a ROS 2 installation (Humble or
later: rclpy, sensor_msgs, geometry_msgs, std_msgs, rosgraph_msgs) and volary's client, which
needs only numpy, pyzmq and msgpack::

    volary serve --realtime --control-hz 100 --sensor depth=depth:aerial_gym_64@30 &
    python3 examples/ros2_bridge.py --ros-args -p address:=tcp://127.0.0.1:5555

Topics (the same types ``volary serve --record`` writes; frames: world z-up ``world``, body FLU
``base_link``, camera ``base_link/<name>`` in the OpenCV = ROS optical convention):

- published: ``/clock`` (rosgraph_msgs/Clock, the World's time; use ``use_sim_time``),
  ``~/pose`` (geometry_msgs/PoseStamped), ``~/twist`` (TwistStamped: world velocity, body rates),
  ``~/imu`` (sensor_msgs/Imu), ``~/<name>`` (sensor_msgs/Image 32FC1 in m, per depth camera);
- subscribed: ``~/cmd`` (std_msgs/Float64MultiArray): the control level's setpoint, for CTBR
  ``[collective thrust N, roll rate, pitch rate, yaw rate rad/s]`` as AlphaPilot's teams sent.

The node steps once per control period with the latest command (hover thrust until one
arrives): against a lock-step server that advances the World; against a real-time one it sends
the command and publishes the newest observation the server pushed.
"""

from __future__ import annotations

import numpy as np
import rclpy
from builtin_interfaces.msg import Time
from geometry_msgs.msg import PoseStamped, TwistStamped
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Image, Imu
from std_msgs.msg import Float64MultiArray

from volary.client import Client


def _stamp(t: float) -> Time:
    ns = int(round(t * 1e9))
    return Time(sec=ns // 10**9, nanosec=ns % 10**9)


class VolaryBridge(Node):
    def __init__(self) -> None:
        super().__init__("volary_bridge")
        address = self.declare_parameter("address", "tcp://127.0.0.1:5555").value
        hover = self.declare_parameter("hover_thrust", 0.027 * 9.81).value  # N, a crazyflie
        self.client = Client(address)
        self.command = np.array([hover, 0.0, 0.0, 0.0])[: self.client.setpoint_size]
        self.clock = self.create_publisher(Clock, "/clock", 10)
        self.pose = self.create_publisher(PoseStamped, "~/pose", 10)
        self.twist = self.create_publisher(TwistStamped, "~/twist", 10)
        self.imu = self.create_publisher(Imu, "~/imu", 50)
        self.images = {
            name: self.create_publisher(Image, f"~/{name}", 5)
            for name, info in self.client.sensors.items()
            if info["kind"] == "depth"
        }
        self.create_subscription(Float64MultiArray, "~/cmd", self.on_cmd, 10)
        self.create_timer(self.client.dt, self.on_timer)
        self.get_logger().info(f"volary slot {self.client.slot} at {address}")

    def on_cmd(self, msg: Float64MultiArray) -> None:
        cmd = np.asarray(msg.data, dtype=np.float64)
        if cmd.size != self.client.setpoint_size or not np.isfinite(cmd).all():
            self.get_logger().warn(f"~/cmd: expected {self.client.setpoint_size} finite numbers")
            return
        self.command = cmd

    def on_timer(self) -> None:
        self.publish(self.client.step(self.command))

    def publish(self, obs: dict) -> None:
        stamp = _stamp(obs["time"])
        self.clock.publish(Clock(clock=stamp))
        st = obs["state"]
        pose = PoseStamped()
        pose.header.stamp, pose.header.frame_id = stamp, "world"
        pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = map(float, st["pos"])
        w, x, y, z = map(float, st["quat"])  # volary [w, x, y, z] -> ROS named fields
        o = pose.pose.orientation
        o.w, o.x, o.y, o.z = w, x, y, z
        self.pose.publish(pose)
        twist = TwistStamped()
        twist.header = pose.header
        v, om = twist.twist.linear, twist.twist.angular
        v.x, v.y, v.z = map(float, st["vel"])
        om.x, om.y, om.z = map(float, st["omega"])
        self.twist.publish(twist)
        sensors = obs["sensors"]
        if "imu" in sensors:
            imu = Imu()
            imu.header.stamp, imu.header.frame_id = stamp, "base_link"
            imu.orientation_covariance[0] = -1.0  # REP 145: no orientation estimate
            a, g = imu.linear_acceleration, imu.angular_velocity
            a.x, a.y, a.z = map(float, sensors["imu"]["accel"])
            g.x, g.y, g.z = map(float, sensors["imu"]["gyro"])
            self.imu.publish(imu)
        for name, pub in self.images.items():
            if name in sensors:
                depth = np.ascontiguousarray(sensors[name]["depth"], dtype="<f4")
                img = Image()
                img.header.stamp, img.header.frame_id = stamp, f"base_link/{name}"
                img.height, img.width = depth.shape
                img.encoding, img.is_bigendian, img.step = "32FC1", 0, 4 * depth.shape[1]
                img.data = depth.tobytes()
                pub.publish(img)


def main() -> None:
    rclpy.init()
    node = VolaryBridge()
    try:
        rclpy.spin(node)
    finally:
        node.client.close()
        node.destroy_node()
        rclpy.shutdown()


if __name__ == "__main__":
    main()
