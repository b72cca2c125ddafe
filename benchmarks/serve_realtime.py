"""Real-time serving held for minutes: 100 Hz control with a 30 Hz 270x480 depth camera.

A ``volary serve --realtime`` process (forest scene, one simulated crazyflie with the D455-like
270x480 depth camera at 30 Hz and the BMI085 IMU, CTBR at 100 Hz, physics at 1 kHz) and one
client in this process that sends a hover command each period and reads the newest observation.
Reported, from the client's side: ticks against the wall clock, the drift (wall time minus the
World's time since the first observation), the time scale the server publishes, observation
intervals, depth frames received; and the server's own summary line (late ticks, lag, busy).

    .venv/bin/python benchmarks/serve_realtime.py --minutes 10   # -> results/serve_realtime.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
HOVER_CF = 0.027 * 9.81


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--control-hz", type=float, default=100.0)
    ap.add_argument("--depth", default="d455@30", help="camera preset @ rate")
    ap.add_argument("--speed", type=float, default=1.0)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "serve_realtime.json")
    args = ap.parse_args(argv)
    from volary.client import Client

    cmd = [sys.executable, "-m", "volary.cli.main", "serve", "--scene", "forest",
           "--control-hz", f"{args.control_hz:g}", "--sensor", f"depth=depth:{args.depth}",
           "--realtime", "--speed", f"{args.speed:g}", "--bind", "tcp://127.0.0.1:*"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)  # fmt: skip
    assert proc.stdout is not None
    line = ""
    while "volary serve:" not in line:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("the server exited before serving")
    m = re.search(r"tcp://[\d.]+:\d+", line)
    assert m is not None
    intervals, scales, drifts, depth, last_depth = [], [], [], 0, None
    with Client(m.group(0), timeout=30.0) as c:
        obs = c.step([HOVER_CF, 0.0, 0.0, 0.0])
        t0, sim0, tick0 = time.monotonic(), obs["clock"], obs["tick"]
        last, end = t0, t0 + 60.0 * args.minutes
        next_report = t0 + 60.0
        while time.monotonic() < end:
            obs = c.step([HOVER_CF, 0.0, 0.0, 0.0])
            now = time.monotonic()
            intervals.append(now - last)
            last = now
            scales.append(obs.get("time_scale", float("nan")))
            drifts.append((now - t0) - (obs["clock"] - sim0) / args.speed)
            d = obs["sensors"].get("depth")
            if d is not None and d["tick"] != last_depth:  # a new frame (kept across skipped obs)
                depth, last_depth = depth + 1, d["tick"]
            if now >= next_report:
                print(
                    f"{(now - t0) / 60:.0f} min: tick {obs['tick'] - tick0}, drift "
                    f"{drifts[-1] * 1e3:.1f} ms, time scale {scales[-1]:.3f}",
                    flush=True,
                )
                next_report += 60.0
        wall, ticks = time.monotonic() - t0, obs["tick"] - tick0
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    summary = next((ln for ln in out.splitlines() if ln.startswith("real time")), "")
    q = statistics.quantiles(intervals, n=100)
    doc = {
        "benchmark": "serve_realtime",
        "command": "python " + " ".join(sys.argv),
        "server": " ".join(cmd[2:]),
        "minutes": args.minutes,
        "control_hz": args.control_hz,
        "wall_s": wall,
        "ticks": ticks,
        "ticks_expected": wall * args.control_hz * args.speed,
        "drift_final_s": drifts[-1],
        "drift_max_s": max(drifts),
        "time_scale_min": min(scales),
        "time_scale_median": statistics.median(scales),
        "client_obs_interval_p50_s": q[49],
        "client_obs_interval_p99_s": q[98],
        "depth_frames": depth,
        "depth_hz": depth / wall,
        "server_summary": summary,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    for k, v in doc.items():
        print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
