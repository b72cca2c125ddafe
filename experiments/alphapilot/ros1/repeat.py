"""Does a ROS 1 flight repeat? Fly one perturbed course through FlightGoggles' ROS 1 interface
several times (a fresh master, bridge and node each time, lock-step, the same noise seed) and
write each flight's outcome to ``--out`` (JSON). The node spends a wall-clock time planning
before it arms, so each flight is held a different number of ticks first. Needs Debian's ROS 1.

    .venv/bin/python experiments/alphapilot/ros1/repeat.py --course-index 4 \
        --out experiments/alphapilot/ros1/results/ros1-repeat-course4-seed0.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from run import _commit

from volary.studies.alphapilot.ros1_node import race_over_ros1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--course-seed", type=int, default=0)
    ap.add_argument("--course-index", type=int, default=4)
    ap.add_argument("--noise-seed", type=int, default=0)
    ap.add_argument("--flights", type=int, default=2)
    ap.add_argument("--courses-from", default="volary", help="course-generator setting")
    ap.add_argument("--arena", default="empty", help="empty or factory")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    flights = []
    with tempfile.TemporaryDirectory() as work:
        for k in range(args.flights):
            r = race_over_ros1(args.course_seed, args.course_index, args.noise_seed,
                               Path(work) / f"flight{k}", generator=args.courses_from,
                               arena=args.arena)  # fmt: skip
            flights.append(r)
            print(f"flight {k}: {r['result']}, {r['gates_passed']} gates, lap {r['lap_time']}, "
                  f"armed at tick {r['arming_tick']}", flush=True)  # fmt: skip
    # gate times are sim time since arming: the same ticks give the same times up to rounding
    spread = max((abs(a - b) for f in flights[1:]
                  for a, b in zip(f["gate_times"], flights[0]["gate_times"], strict=True)),
                 default=0.0)  # fmt: skip
    same = spread < 1e-9 and len({len(f["gate_times"]) for f in flights}) == 1
    doc = {"commit": _commit(), "course_seed": args.course_seed,
           "course_index": args.course_index, "noise_seed": args.noise_seed,
           "courses_from": args.courses_from, "arena": args.arena,
           "same_gate_times": same, "gate_time_spread_s": spread, "flights": flights}  # fmt: skip
    args.out.write_text(json.dumps(doc, indent=1))
    print(f"the same gates at the same times in every flight: {same} (spread {spread:.1e} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
