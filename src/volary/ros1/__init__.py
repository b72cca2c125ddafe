"""volary as FlightGoggles on ROS 1 (AlphaPilot 2019's interface): ``volary ros1 serve``.

An unmodified stack written against FlightGoggles (v2.0.x, AlphaPilot Test 3) flies volary's
World: same topics, types, frames, parameters and arming rule (src/volary/ros1/DESIGN.md).
Importing this package imports neither rospy nor torch.

Starting it (Debian's ROS 1: ros-core, python3-rospy, python3-genpy, ros-sensor-msgs, ...)::

    # a process of its own, starting Debian's rosmaster on 127.0.0.1:11411 (0: a free port);
    # once serving it prints one line:
    #   volary-ros1 ready master=http://127.0.0.1:11411 pythonpath=DIR msg=DIR include=DIR
    #   results=PATH
    .venv/bin/python -m volary.ros1 serve --master-port 11411 [--realtime] [--control-hz 120]
    # or on a running master: ROS_MASTER_URI=http://127.0.0.1:PORT (loopback only)
    .venv/bin/python -m volary.ros1 serve --results out/results.yaml

    # in-process (one bridge per process: rospy has one node):
    from volary.ros1 import Ros1Options, serve_in_thread
    svc = serve_in_thread(Ros1Options(), master_port=0)   # returns once serving
    svc.stop()

``pythonpath=DIR`` holds the generated message packages Debian lacks (``mav_msgs``,
``flightgoggles``, and ``sensor_msgs`` when python3-sensor-msgs is absent): a rospy node puts
it on PYTHONPATH (``volary.ros1.env.client_env`` builds such an environment). ``msg=DIR`` has
the .msg files (``<pkg>/<Type>.msg``) for a catkin build, ``include=DIR`` gencpp's headers.
``python -m volary.ros1 msgs`` only generates them and prints the three directories.

A client commands ``/uav/input/rateThrust`` (mav_msgs/RateThrust: thrust.z in N, angular_rates
body FLU in rad/s); thrust.z >= 9.9 N arms the vehicle. Lock-step (default): each tick
publishes /clock, /tf, at 60 Hz camera_info, ir_beacons and the rangefinder, and last
/uav/sensors/imu; the World then waits for a RateThrust and flies the next tick with the newest
one: publish one RateThrust per IMU message. ``--realtime`` runs on the wall clock instead,
holding the newest command, as FlightGoggles did. At the lap's end the reporter's results YAML
is written (``--results``, also ``/uav/results_location``) and published on ``/volary/results``,
the score on ``/volary/score``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from volary.ros1.bridge import Ros1Bridge, Ros1Options
    from volary.ros1.service import Ros1Service, serve_in_thread, start

_LAZY = {
    "Ros1Bridge": "volary.ros1.bridge",
    "Ros1Options": "volary.ros1.bridge",
    "Ros1Service": "volary.ros1.service",
    "serve_in_thread": "volary.ros1.service",
    "start": "volary.ros1.service",
}
__all__ = ["Ros1Bridge", "Ros1Options", "Ros1Service", "serve_in_thread", "start"]


def __getattr__(name: str) -> Any:
    """The bridge's names, imported on first use (they import torch and the World)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'volary.ros1' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(_LAZY[name]), name)
