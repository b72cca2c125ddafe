#!/usr/bin/env python3
"""A FlightGoggles client that crashes on purpose (Debian's /usr/bin/python3, rospy; no volary).

Arms with 10 N on each /clock message, holds 10 N for ``--ticks`` IMU messages, then cuts the
thrust (one zero-thrust RateThrust per IMU message) until ``/uav/collision`` arrives; keeps
publishing zero thrust for ``--quiet`` s of sim time (a held or low command must not re-arm),
then 10 N again until the IMU comes back, and for ``--ticks`` IMU messages after. Every command
of the first ``--ticks`` ticks of each flight is 10 N, whichever callback sends it, so both
flights are flown by the same commands. Records the times of arming, the collision, every IMU
message (stamp, acceleration, rates), the /tf poses around the reset and the lap's results, and
writes them to ``--out`` as JSON.
"""

import argparse
import json
import sys
import time


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quiet", type=float, default=0.5, help="sim s of zero thrust after it")
    ap.add_argument("--timeout", type=float, default=60.0, help="wall s")
    ap.add_argument("--ticks", type=int, default=12, help="IMU messages at 10 N in each flight")
    args = ap.parse_args(argv)

    import rospy
    from mav_msgs.msg import RateThrust
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import Imu
    from std_msgs.msg import Empty, Float64, String
    from tf2_msgs.msg import TFMessage

    rec = {"armed_at": None, "collision_at": None, "imu": [], "rearmed_at": None,
           "poses": [], "results": None, "score": None, "clock": 0.0, "samples": []}  # fmt: skip
    rospy.init_node("fg_crash")
    pub = rospy.Publisher("/uav/input/rateThrust", RateThrust, queue_size=10, tcp_nodelay=True)

    def send(thrust):
        m = RateThrust()
        m.thrust.z = thrust
        pub.publish(m)

    def phase():
        if rec["collision_at"] is None:
            return "fly" if rec["armed_at"] is not None else "arm"
        if rec["clock"] < rec["collision_at"] + args.quiet:
            return "quiet"
        return "done" if rec["rearmed_at"] is not None else "rearm"

    def on_clock(m):
        rec["clock"] = m.clock.to_sec()
        if phase() in ("arm", "rearm"):
            send(10.0)
        elif phase() == "quiet":
            send(0.0)

    def on_imu(m):
        t = m.header.stamp.to_sec()
        rec["imu"].append(t)
        a, w = m.linear_acceleration, m.angular_velocity
        rec["samples"].append((t, a.x, a.y, a.z, w.x, w.y, w.z))
        if rec["armed_at"] is None:
            rec["armed_at"] = t
        elif rec["collision_at"] is not None and rec["rearmed_at"] is None:
            rec["rearmed_at"] = t
        if phase() in ("fly", "done"):
            start = rec["armed_at"] if phase() == "fly" else rec["rearmed_at"]
            send(10.0 if len([s for s in rec["imu"] if s >= start]) < args.ticks else 0.0)

    def on_collision(_):
        if rec["collision_at"] is None:
            rec["collision_at"] = rec["clock"]

    def on_tf(m):
        for ts in m.transforms:
            if ts.child_frame_id.lstrip("/") == "uav/imu":
                p = ts.transform.translation
                rec["poses"].append((ts.header.stamp.to_sec(), p.x, p.y, p.z))

    subs = [
        rospy.Subscriber("/clock", Clock, on_clock, tcp_nodelay=True),
        rospy.Subscriber("/uav/sensors/imu", Imu, on_imu, tcp_nodelay=True),
        rospy.Subscriber("/uav/collision", Empty, on_collision, tcp_nodelay=True),
        rospy.Subscriber("/tf", TFMessage, on_tf, tcp_nodelay=True),
        rospy.Subscriber("/volary/results", String, lambda m: rec.update(results=m.data)),
        rospy.Subscriber("/volary/score", Float64, lambda m: rec.update(score=m.data)),
    ]
    end = time.monotonic() + args.timeout
    while time.monotonic() < end and (
        pub.get_num_connections() == 0 or any(s.get_num_connections() == 0 for s in subs[:4])
    ):
        time.sleep(0.01)
    while time.monotonic() < end and not rospy.is_shutdown():
        done = phase() == "done" and rec["results"] is not None and rec["score"] is not None
        if done and len([s for s in rec["imu"] if s >= rec["rearmed_at"]]) >= args.ticks:
            break
        time.sleep(0.01)
    with open(args.out, "w") as f:
        json.dump(rec, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
