"""The AlphaPilot reference racer through FlightGoggles' ROS 1 interface and in process.

For each of ``--courses`` K perturbed courses (``alphapilot_2019_courses(K, --course-seed)``),
fly the contestant (default ``reference``) as a ROS 1 node
(:mod:`volary.studies.alphapilot.ros1_node`) against ``volary ros1 serve`` (lock-step,
``--control-hz``), one course at a time, and all K courses in process
(:func:`~volary.studies.alphapilot.challenge.run_challenge`, one batch) with the sensors the
bridge publishes (exact beacons at 60 Hz, laser at 60 Hz); write both outcomes per course to
``--out`` (JSON). Needs Debian's ROS 1 (rosmaster, rospy). See README.md.

    .venv/bin/python experiments/alphapilot/ros1/run.py --courses 3 \
        --out experiments/alphapilot/ros1/results/ros1-vs-inprocess-seed0.json
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, cwd=Path(__file__).parent)  # fmt: skip
    return done.stdout.strip() or "unknown"


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(float(x)) else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--courses", type=int, default=3, help="K perturbed courses")
    ap.add_argument("--course-seed", type=int, default=0)
    ap.add_argument("--noise-seed", type=int, default=0, help="both sides' noise seed")
    ap.add_argument("--control-hz", type=float, default=240.0)
    ap.add_argument("--contestant", default="reference")
    ap.add_argument("--courses-from", default="volary", help="course-generator setting")
    ap.add_argument("--arena", default="empty", help="empty or factory")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)

    from volary.studies.alphapilot.ros1_node import race_in_process, race_over_ros1
    from volary.worlds import alphapilot_2019_courses

    courses = alphapilot_2019_courses(a.courses, a.course_seed, a.courses_from, a.arena)
    t0 = time.perf_counter()
    inproc = race_in_process(courses, a.noise_seed, contestant=a.contestant,
                             control_hz=a.control_hz)  # fmt: skip
    wall_in = time.perf_counter() - t0
    r = inproc.race
    rows: list[dict[str, Any]] = []
    for i, course in enumerate(courses):
        with tempfile.TemporaryDirectory(prefix=f"ros1-course{i}-") as work:
            ros = race_over_ros1(a.course_seed, i, a.noise_seed, work, contestant=a.contestant,
                                 control_hz=a.control_hz, generator=a.courses_from,
                                 arena=a.arena)  # fmt: skip
        local = {
            "gates_passed": int(r.gates_passed[i]),
            "finished": bool(r.finished[i]),
            "collided": bool(r.collided[i]),
            "lap_time": _finite(r.time[i]),
            "score": float(r.score[i]),
            "gate_times": [_finite(t) for t in r.gate_times[i]],
        }
        lap_ros = ros["lap_time"] if ros["result"] == "Challenge Completed" else None
        diff = None if lap_ros is None or local["lap_time"] is None else lap_ros - local["lap_time"]
        rows.append({"course": course.name, "index": i, "ros1": ros, "in_process": local,
                     "lap_time_difference_s": diff,
                     "score_difference": (ros["score"] or 0.0) - local["score"]})  # fmt: skip
        print(
            f"{course.name}: ROS 1 {ros['result']} {ros['gates_passed']}/11 score "
            f"{ros['score']}; in process {local['gates_passed']}/11 score {local['score']:.4f}"
            f"{'' if diff is None else f'; lap difference {diff:+.4f} s'}",
            flush=True,
        )
    doc = {
        "question": "Does the reference racer fly the same through FlightGoggles' ROS 1 "
        "interface (volary ros1 serve + the ros1_node) as in process (run_challenge)?",
        "commit": _commit(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "settings": {
            "courses": a.courses,
            "course_seed": a.course_seed,
            "noise_seed": a.noise_seed,
            "control_hz": a.control_hz,
            "contestant": a.contestant,
            "courses_from": a.courses_from,
            "arena": a.arena,
        },  # fmt: skip
        "in_process_wall_s": wall_in,
        "courses": rows,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
