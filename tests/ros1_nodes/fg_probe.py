#!/usr/bin/env python3
"""A test probe beside a FlightGoggles client (Debian's /usr/bin/python3, rospy; no volary).

Records one message of each sensor topic (conventions), the MD5 sums of the message classes a
client imports, the clock; once the vehicle is armed and ``--inject-at`` s of sim time have
passed, sends two RateThrust commands the simulator must refuse (thrust.z NaN, a rate inf) and
collects what ``/volary/command_error`` says; then waits for the lap's results and score
(``/volary/results``, ``/volary/score``, latched) and writes everything to ``--out`` as JSON.
Prints "probe ready" once subscribed.
"""

import argparse
import json
import sys
import time


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--inject-at", type=float, default=3.0, help="sim s after arming")
    ap.add_argument("--timeout", type=float, default=150.0, help="wall s")
    args = ap.parse_args(argv)

    import rospy
    from flightgoggles.msg import IRMarker, IRMarkerArray
    from mav_msgs.msg import RateThrust
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import CameraInfo, Imu, Range
    from std_msgs.msg import Float64, String

    rec = {
        "md5": {"mav_msgs/RateThrust": RateThrust._md5sum,
                "flightgoggles/IRMarker": IRMarker._md5sum,
                "flightgoggles/IRMarkerArray": IRMarkerArray._md5sum},
        "errors": [], "clock": 0.0, "armed_at": None, "injected_at": None,
        "results": None, "score": None, "imu": None, "range": None, "camera_info": None,
        "ir": None, "ir_frames": 0,
    }  # fmt: skip

    def on_clock(m):
        rec["clock"] = m.clock.to_sec()

    def on_imu(m):
        if rec["armed_at"] is None:
            rec["armed_at"] = m.header.stamp.to_sec()
            a, w = m.linear_acceleration, m.angular_velocity
            rec["imu"] = {"frame_id": m.header.frame_id, "accel": [a.x, a.y, a.z],
                          "gyro": [w.x, w.y, w.z],
                          "orientation_covariance": list(m.orientation_covariance),
                          "accel_cov": list(m.linear_acceleration_covariance),
                          "gyro_cov": list(m.angular_velocity_covariance)}  # fmt: skip

    def on_range(m):
        if rec["range"] is None:
            rec["range"] = {"frame_id": m.header.frame_id, "range": m.range,
                            "min_range": m.min_range, "max_range": m.max_range,
                            "radiation_type": m.radiation_type}  # fmt: skip

    def on_info(m):
        if rec["camera_info"] is None:
            rec["camera_info"] = {"frame_id": m.header.frame_id, "K": list(m.K),
                                  "width": m.width, "height": m.height,
                                  "distortion_model": m.distortion_model}  # fmt: skip

    def on_ir(m):
        rec["ir_frames"] += 1
        if rec["ir"] is None and m.markers:
            rec["ir"] = {"frame_id": m.header.frame_id, "stamp": m.header.stamp.to_sec(),
                         "markers": [[k.landmarkID.data, k.markerID.data, k.x, k.y, k.z]
                                     for k in m.markers]}  # fmt: skip

    rospy.init_node("fg_probe")
    pub = rospy.Publisher("/uav/input/rateThrust", RateThrust, queue_size=10)
    subs = [
        rospy.Subscriber("/clock", Clock, on_clock),
        rospy.Subscriber("/uav/sensors/imu", Imu, on_imu),
        rospy.Subscriber("/uav/sensors/downward_laser_rangefinder", Range, on_range),
        rospy.Subscriber("/uav/camera/left/camera_info", CameraInfo, on_info),
        rospy.Subscriber("/uav/camera/left/ir_beacons", IRMarkerArray, on_ir),
        rospy.Subscriber("/volary/command_error", String, lambda m: rec["errors"].append(m.data)),
        rospy.Subscriber("/volary/results", String, lambda m: rec.update(results=m.data)),
        rospy.Subscriber("/volary/score", Float64, lambda m: rec.update(score=m.data)),
    ]
    end = time.monotonic() + args.timeout
    while time.monotonic() < end and (
        pub.get_num_connections() == 0 or any(s.get_num_connections() == 0 for s in subs[:5])
    ):
        time.sleep(0.01)
    print("probe ready", flush=True)
    while time.monotonic() < end and not rospy.is_shutdown():
        armed = rec["armed_at"]
        due = armed is not None and rec["clock"] > armed + args.inject_at
        if rec["injected_at"] is None and due:
            rec["injected_at"] = rec["clock"]
            for field in ("thrust.z", "angular_rates.y"):
                m = RateThrust()
                m.thrust.z = float("nan") if field == "thrust.z" else 9.81
                m.angular_rates.y = float("inf") if field == "angular_rates.y" else 0.0
                pub.publish(m)
        if rec["results"] is not None and rec["score"] is not None:
            break
        time.sleep(0.01)
    rec["clock_at_end"] = rec["clock"]
    with open(args.out, "w") as f:
        json.dump(rec, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
