#!/usr/bin/env python3
"""A stand-in ROS 1 navigation planner (Debian's /usr/bin/python3, rospy; no volary).

Speaks what EGO-Planner's and Fast-Planner's launch files speak: subscribes to odometry
(nav_msgs/Odometry) and a goal (geometry_msgs/PoseStamped, /move_base_simple/goal), and once
both arrived publishes quadrotor_msgs/PositionCommand at 100 Hz of simulated time (a rospy
Timer on /clock, /use_sim_time true): a straight line from where the odometry put the vehicle
to the goal, speed ramped up and down at --acc to --speed, yaw along the line.

--mode chooses a fault: "ok" flies; "crash" exits with code 3 after --after s of commands;
"hang" stops publishing after --after s, once it has published (the process stays); "silent"
never publishes.
"""

import argparse
import math
import sys


def profile(length, speed, acc, t):
    """Distance, speed and acceleration along a trapezoid (or triangle) at time t."""
    t_ramp = speed / acc
    if 2 * 0.5 * acc * t_ramp**2 > length:
        t_ramp = math.sqrt(length / acc)
        speed = acc * t_ramp
    d_ramp = 0.5 * acc * t_ramp**2
    t_cruise = (length - 2 * d_ramp) / speed
    t_end = 2 * t_ramp + t_cruise
    if t <= 0:
        return 0.0, 0.0, 0.0
    if t < t_ramp:
        return 0.5 * acc * t * t, acc * t, acc
    if t < t_ramp + t_cruise:
        return d_ramp + speed * (t - t_ramp), speed, 0.0
    if t < t_end:
        r = t_end - t
        return length - 0.5 * acc * r * r, acc * r, -acc
    return length, 0.0, 0.0


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("ok", "crash", "hang", "silent"), default="ok")
    ap.add_argument("--speed", type=float, default=3.0)
    ap.add_argument("--acc", type=float, default=2.0)
    ap.add_argument("--after", type=float, default=0.5, help="sim s of commands before a fault")
    ap.add_argument("--odom", default="/volary/odom")
    ap.add_argument("--goal", default="/move_base_simple/goal")
    ap.add_argument("--cmd", default="/planning/pos_cmd")
    args = ap.parse_args(rospy_argv(argv))

    import rospy
    from geometry_msgs.msg import PoseStamped
    from nav_msgs.msg import Odometry
    from quadrotor_msgs.msg import PositionCommand

    rospy.init_node("nav_standin", anonymous=True)
    state = {"odom": None, "plan": None, "sent": 0}
    pub = rospy.Publisher(args.cmd, PositionCommand, queue_size=100, tcp_nodelay=True)

    def on_odom(m):
        p = m.pose.pose.position
        state["odom"] = (p.x, p.y, p.z)

    def on_goal(m):
        if state["odom"] is None or state["plan"] is not None:
            return
        g = m.pose.position
        start, goal = state["odom"], (g.x, g.y, g.z)
        delta = [b - a for a, b in zip(start, goal, strict=True)]
        length = math.sqrt(sum(d * d for d in delta)) or 1e-9
        unit = [d / length for d in delta]
        state["plan"] = (rospy.Time.now().to_sec(), start, unit, length)

    def on_timer(event):
        plan = state["plan"]
        if plan is None or args.mode == "silent":
            return
        t0, start, unit, length = plan
        now = rospy.Time.now()
        t = now.to_sec() - t0
        if t > args.after and args.mode == "crash":
            sys.stderr.write("nav_standin: crashing on purpose\n")
            sys.stderr.flush()
            import os

            os._exit(3)
        if t > args.after and args.mode == "hang" and state["sent"]:
            return  # hangs once it has published (a loaded host may start it late)
        s, v, a = profile(length, args.speed, args.acc, t)
        c = PositionCommand()
        c.header.stamp, c.header.frame_id = now, "world"
        c.position.x, c.position.y, c.position.z = (
            p + s * u for p, u in zip(start, unit, strict=True)
        )
        c.velocity.x, c.velocity.y, c.velocity.z = (v * u for u in unit)
        c.acceleration.x, c.acceleration.y, c.acceleration.z = (a * u for u in unit)
        c.yaw = math.atan2(unit[1], unit[0])
        c.trajectory_id, c.trajectory_flag = 1, 1
        pub.publish(c)
        state["sent"] += 1

    rospy.Subscriber(args.odom, Odometry, on_odom, tcp_nodelay=True)
    rospy.Subscriber(args.goal, PoseStamped, on_goal, tcp_nodelay=True)
    rospy.Timer(rospy.Duration(0.01), on_timer)
    rospy.spin()


def rospy_argv(argv):
    """The arguments without ROS remappings (name:=value), which rospy reads itself."""
    return [a for a in (sys.argv[1:] if argv is None else argv) if ":=" not in a]


if __name__ == "__main__":
    main()
