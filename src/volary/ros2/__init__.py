"""volary on ROS 2 (``pip install 'volary[ros2]'``): :class:`~volary.ros2.bridge.Ros2Bridge`
puts any served World on ROS 2 topics (docs/ros.md). Importing this package imports no rclpy."""
