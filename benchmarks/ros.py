"""Control-step round trips per second through the ROS bridges, beside ``volary serve``'s.

Each vehicle is flown in lock-step by its own client process, as a user runs it, hovering:

- ``zeromq``: ``volary.client.Client`` per vehicle against :class:`volary.serve.server.Server`
  (tcp://127.0.0.1); each ``step`` sends the command and gets back the vehicle's observation.
- ``ros2``: an rclpy node per vehicle against :class:`volary.ros2.bridge.Ros2Bridge` (Fast DDS,
  shared memory, localhost discovery, a domain id of its own): it subscribes to ``<ns>/odom``
  and ``<ns>/depth/image`` and, once it has both messages of a tick (same stamp), publishes the
  hover setpoint on ``<ns>/cmd_raw`` (std_msgs/Float64MultiArray ``[0, 0, 0, yaw]``, which
  carries no stamp; ``--ros2-command vel`` sends a stamped geometry_msgs/TwistStamped on
  ``<ns>/cmd_vel`` instead). The bridge also publishes /clock, /tf, camera_info, collision
  and time_scale every tick, as it always does.
- ``ros1``: FlightGoggles' interface (:mod:`volary.ros1`, its own rosmaster on a free loopback
  port): a rospy node under Debian's /usr/bin/python3 that answers every ``/uav/sensors/imu``
  message with a hover ``/uav/input/rateThrust`` (after arming with 10 N on ``/clock``).

Two Worlds, because FlightGoggles' interface fronts only its own:

- ``forest`` (zeromq, ros2; ``--vehicles``, default 1 and 4): the forest (seed 3), a 64 x 64
  depth camera on every vehicle every tick (``aerial_gym_64``), velocity control at 60 Hz, no
  IMU. The ZeroMQ client receives state + depth per step; the ROS 2 node odometry + the image.
- ``flightgoggles`` (zeromq, ros1; 1 vehicle, FlightGoggles flies one): the AlphaPilot 2019
  course as ``volary ros1 serve`` flies it (:func:`volary.ros1.bridge.serve_config`): ctbr at
  120 Hz, IMU every tick, IR beacons + rangefinder at 60 Hz; no depth camera (FlightGoggles'
  cameras are RGB). Its zeromq row serves the same ServeConfig, so the ratio compares
  transports over one World.

Round trips per second = World ticks per wall second in steady state: the host (the server or
the bridge, on one torch thread) timestamps every tick; the count starts ``--warmup`` ticks
after every vehicle is flown and runs ``--seconds``; a run fails if any vehicle is not flown by
its client on a timed tick. zeromq and ros2 are hosted in this process; the ROS 1 bridge in a
process of its own (rospy allows one node per process, and it may not share a process with ROS
2's messages). Host and clients share the machine's cores, as for a user on one computer.
Configurations run interleaved (each round runs every one, the compared ones back to back) and
the table quotes the median over ``--rounds`` and the ratio to zeromq on the same World.

    .venv/bin/python benchmarks/ros.py                    # -> results/ros.json (~3 min, 2 cores)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _timing import machine, summarize

HERE = Path(__file__).resolve().parent
BRIDGES = ("zeromq", "ros2", "ros1")
LOCALHOST = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "FASTDDS_BUILTIN_TRANSPORTS": "SHM"}
HARD_TIMEOUT_S = 120.0  # a run that reaches no steady state in this long fails
DEBIAN_PYTHON = "/usr/bin/python3"  # Debian's ROS 1 (rospy) lives under this interpreter
G = 9.81


# ---- clients (each vehicle's own process: ``python ros.py _client KIND ...``) ---------------
# This part imports only the standard library at module level: the ROS 1 client runs this file
# under Debian's /usr/bin/python3, which has rospy and none of volary's environment.
def _zeromq_client(address: str, hover: str) -> None:
    """Hover through ``volary.client``: ``hover`` is ``vel`` (velocity [0, 0, 0, start yaw],
    checking the depth frame) or a collective thrust in N (ctbr [thrust, 0, 0, 0])."""
    import numpy as np

    from volary.client import Client

    with Client(address, timeout=60) as c:
        yaw = _yaw(c.obs["state"]["quat"])
        cmd = [0.0, 0.0, 0.0, yaw] if hover == "vel" else [float(hover), 0.0, 0.0, 0.0]
        while True:
            if hover == "vel":
                assert np.asarray(c.obs["sensors"]["depth"]["depth"]).shape == (64, 64)
            c.step(cmd)


def _ros2_client(ns: str, command: str) -> None:
    """An rclpy node: pairs ``<ns>/odom`` and ``<ns>/depth/image`` by stamp and answers each
    tick once with the hover setpoint (``cmd_raw``, or a stamped ``cmd_vel``)."""
    import numpy as np
    import rclpy
    from geometry_msgs.msg import TwistStamped
    from nav_msgs.msg import Odometry
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image
    from std_msgs.msg import Float64MultiArray

    rclpy.init()
    node = rclpy.create_node(f"hover_{ns}")
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    if command == "vel":
        pub = node.create_publisher(TwistStamped, f"/{ns}/cmd_vel", qos)
    else:
        pub = node.create_publisher(Float64MultiArray, f"/{ns}/cmd_raw", qos)
    odom: dict[tuple[int, int], Any] = {}
    depth: dict[tuple[int, int], Any] = {}
    state: dict[str, Any] = {"answered": (-1, -1), "yaw": None}

    def act(key: tuple[int, int]) -> None:
        if key not in odom or key not in depth:
            return  # (a repeat, sent while the World waits for a first command, is answered)
        od, img = odom.pop(key), depth.pop(key)
        for d in (odom, depth):
            for old in [k for k in d if k < key]:
                del d[old]
        z = np.frombuffer(bytes(img.data), dtype="<f4").reshape(img.height, img.width)
        assert z.shape == (64, 64)
        q = od.pose.pose.orientation
        if state["yaw"] is None:
            state["yaw"] = _yaw((q.w, q.x, q.y, q.z))
        if command == "vel":  # world-frame velocity 0, yaw rate 0, the tick's stamp
            msg = TwistStamped()
            msg.header.stamp, msg.header.frame_id = od.header.stamp, "map"
        else:
            msg = Float64MultiArray(data=[0.0, 0.0, 0.0, state["yaw"]])
        pub.publish(msg)
        state["answered"] = key

    def on_odom(msg: Any) -> None:
        odom[_key(msg)] = msg
        act(_key(msg))

    def on_depth(msg: Any) -> None:
        depth[_key(msg)] = msg
        act(_key(msg))

    node.create_subscription(Odometry, f"/{ns}/odom", on_odom, qos)
    node.create_subscription(Image, f"/{ns}/depth/image", on_depth, qos)
    rclpy.spin(node)


def _ros1_client() -> None:
    """A rospy node written against FlightGoggles' interface only: 10 N on every ``/clock``
    until armed (FlightGoggles arms at 9.9 N), then one hover RateThrust (mass g, rates 0) per
    ``/uav/sensors/imu`` message, as its lock-step asks."""
    import rospy
    from mav_msgs.msg import RateThrust
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import Imu

    rospy.init_node("hover_uav", disable_signals=True)
    mass = float(rospy.get_param("/uav/flightgoggles_uav_dynamics/vehicle_mass"))
    pub = rospy.Publisher("/uav/input/rateThrust", RateThrust, queue_size=100, tcp_nodelay=True)
    armed = []

    def send(thrust: float, stamp: Any) -> None:
        msg = RateThrust()
        msg.header.stamp, msg.thrust.z = stamp, thrust
        pub.publish(msg)

    def on_clock(msg: Any) -> None:
        if not armed:
            send(10.0, msg.clock)

    def on_imu(msg: Any) -> None:
        if not armed:
            armed.append(True)
        send(mass * G, msg.header.stamp)

    rospy.Subscriber("/clock", Clock, on_clock, queue_size=1, tcp_nodelay=True)
    rospy.Subscriber("/uav/sensors/imu", Imu, on_imu, queue_size=None, tcp_nodelay=True)
    rospy.spin()


def _key(msg: Any) -> tuple[int, int]:
    return msg.header.stamp.sec, msg.header.stamp.nanosec


def _yaw(q_wxyz: Any) -> float:
    w, x, y, z = (float(v) for v in q_wxyz)
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def _client_main(argv: list[str]) -> int:
    kind, *rest = argv
    if kind == "zeromq":
        _zeromq_client(rest[0], rest[1])
    elif kind == "ros2":
        _ros2_client(rest[0], rest[1])
    elif kind == "ros1":
        _ros1_client()
    else:
        raise SystemExit(f"unknown client {kind!r}")
    return 0


def _spawn(args: list[str], env: dict[str, str], python: str = sys.executable) -> Any:
    return subprocess.Popen([python, str(Path(__file__).resolve()), "_client", *args], env=env,
                            stdin=subprocess.DEVNULL)  # fmt: skip


def _threads(env: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    t = "1"
    return {**(os.environ if env is None else env), "OMP_NUM_THREADS": t,
            "OPENBLAS_NUM_THREADS": t, "MKL_NUM_THREADS": t, "NUMBA_NUM_THREADS": t,
            **extra}  # fmt: skip


# ---- the host: ticks timed in steady state ---------------------------------------------------
def forest(vehicles: int) -> Any:
    from volary.serve.world import SensorSpec, ServeConfig, SlotSpec

    slots = tuple(SlotSpec(sensors=("depth",)) for _ in range(vehicles))
    return ServeConfig(slots=slots, scene="forest", seed=3, control="velocity", imu=None,
                       sensors={"depth": SensorSpec("depth", "aerial_gym_64")})  # fmt: skip


def flightgoggles() -> Any:
    from volary.ros1.bridge import Ros1Options, serve_config

    return serve_config(Ros1Options())


class _Clock:
    """Wraps ``host.advance``: once ``flown()`` holds, skips ``warmup`` ticks, then timestamps
    every tick for ``seconds`` (counting timed ticks on which ``flown()`` did not hold) and
    sets ``stop`` (and calls ``on_stop``)."""

    def __init__(self, host: Any, flown: Any, warmup: int, seconds: float, on_stop: Any = None):
        self.host, self.flown, self.warmup, self.seconds = host, flown, warmup, seconds
        self.on_stop = on_stop
        self.stop = threading.Event()
        self.ready = self.lapses = 0
        self.stamps: list[float] = []
        self._advance = host.advance
        host.advance = self

    def __call__(self, *a: Any, **k: Any) -> Any:
        obs = self._advance(*a, **k)
        now = time.perf_counter()
        if self.stamps:
            self.stamps.append(now)
            self.lapses += not self.flown()
            if now - self.stamps[0] >= self.seconds:
                self.halt()
        elif self.flown():
            self.ready += 1
            if self.ready > self.warmup:
                self.stamps.append(now)
        return obs

    def halt(self) -> None:
        self.stop.set()
        if self.on_stop is not None:
            self.on_stop()

    def result(self) -> dict[str, Any]:
        s = self.stamps
        if len(s) < 3 or not self.stop.is_set() or s[-1] - s[0] < self.seconds:
            raise RuntimeError(f"no steady state within {HARD_TIMEOUT_S:g} s ({len(s)} ticks)")
        gaps = sorted((b - a) * 1e3 for a, b in zip(s, s[1:], strict=False))
        return {"ticks": len(s) - 1, "wall_s": s[-1] - s[0], "hz": (len(s) - 1) / (s[-1] - s[0]),
                "tick_p50_ms": statistics.median(gaps),
                "tick_p99_ms": gaps[min(len(gaps) - 1, int(0.99 * len(gaps)))]}  # fmt: skip


def _serve(host: Any, loop: Any, clock: _Clock, clients: list[Any], every: Any, close: Any):
    """Run ``loop`` until ``clock`` stops it; ``every()``: whether each vehicle flew its
    client's command on every tick (checked, with the host's faults, before ``close``)."""
    timer = threading.Timer(HARD_TIMEOUT_S, clock.halt)
    timer.start()
    try:
        loop()
    finally:
        timer.cancel()
        for p in clients:
            p.kill()
        for p in clients:
            p.wait()
        ok = bool(every()) and clock.lapses == 0
        checks = {"every_vehicle_every_tick": ok, "faults": len(getattr(host, "faults", ()))}
        close()
    return {**clock.result(), **checks}


def _aloft(host: Any) -> bool:
    """No vehicle crashed, collided or left the scene (a hover that fell would time another
    World)."""
    ev = host.events_now()
    hit = any(bool(ev[k].any()) for k in ("collided", "out_of_bounds") if k in ev)
    return not hit and not bool(host.world.state.crashed.any())


def run_zeromq(world: str, n: int, warmup: int, seconds: float, **_: Any) -> dict:
    from volary.serve.server import Server

    config = forest(n) if world == "forest" else flightgoggles()
    srv = Server(config, bind="tcp://127.0.0.1:*", input_timeout=30.0)
    hover = "vel" if world == "forest" else repr(float(srv.world.params.mass[0]) * G)
    clock = _Clock(srv, lambda: len(srv.peers) == n, warmup, seconds)
    clients = [_spawn(["zeromq", srv.address, hover], _threads()) for _ in range(n)]
    return _serve(srv, lambda: srv.serve(clock.stop), clock, clients,
                  lambda: len(srv.peers) == n and not srv.faults and _aloft(srv),
                  srv.close)  # fmt: skip


_domains = iter(range(10**6))


def run_ros2(world: str, n: int, warmup: int, seconds: float, ros2_command: str = "raw",
             **_: Any) -> dict:  # fmt: skip
    from volary.ros2.bridge import Ros2Bridge

    # 101..200: away from the test suite's 1..100, so a concurrent pytest never shares topics
    domain = 101 + (os.getpid() + next(_domains)) % 100
    bridge = Ros2Bridge(forest(n), domain_id=domain, start_with=n, input_timeout=30.0)
    clock = _Clock(bridge, lambda: all(v.owner for v in bridge.vehicles), warmup, seconds)
    env = _threads(ROS_DOMAIN_ID=str(domain), **LOCALHOST)
    clients = [_spawn(["ros2", v.ns, ros2_command], env) for v in bridge.vehicles]
    return _serve(bridge, lambda: bridge.spin(clock.stop), clock, clients,
                  lambda: all(v.flown == bridge.ticks for v in bridge.vehicles) and _aloft(bridge),
                  bridge.close)  # fmt: skip


def run_ros1(world: str, n: int, warmup: int, seconds: float, **_: Any) -> dict:
    """The ROS 1 bridge's run, in a process of its own (:func:`_ros1_host`)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "_host_ros1", str(warmup), str(seconds)]
    out = subprocess.run(cmd, env=_threads(), stdout=subprocess.PIPE, text=True,
                         timeout=HARD_TIMEOUT_S + 60, check=True)  # fmt: skip
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("result ")]
    if not lines:
        raise RuntimeError(f"ros1: no result from the bridge's process:\n{out.stdout[-2000:]}")
    return json.loads(lines[-1][len("result ") :])


def _ros1_host(warmup: int, seconds: float) -> dict:
    """``volary.ros1.service.start`` with a rosmaster of its own, its ticks timed; the client
    under /usr/bin/python3 with the generated messages on its PYTHONPATH."""
    from volary.bench.threads import one_thread
    from volary.ros1.bridge import Ros1Options
    from volary.ros1.env import client_env
    from volary.ros1.service import start

    tmp = tempfile.mkdtemp(prefix="volary-bench-ros1-")
    try:
        with one_thread():
            options = Ros1Options(input_timeout=30.0, results=str(Path(tmp) / "results.yaml"))
            svc = start(options, master_port=0, log_dir=tmp)
            b = svc.bridge
            clock = _Clock(b, lambda: b.armed, warmup, seconds, on_stop=b.stop)
            env = client_env(svc.uri, [b.messages.python], ROS_LOG_DIR=tmp, ROS_HOME=tmp)
            client = _spawn(["ros1"], _threads(env), python=DEBIAN_PYTHON)
            return _serve(b, b.serve, clock, [client],
                          lambda: b.armed and not b.stalls and not b.commands.refused,
                          svc.stop)  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ros1_missing() -> str | None:
    """Why the ROS 1 row cannot run here (None when it can)."""
    try:
        from volary.ros1.env import missing_ros1
        from volary.ros1.service import start  # noqa: F401
    except ImportError as e:
        return f"volary.ros1 is not importable ({e})"
    if not Path(DEBIAN_PYTHON).exists():
        return f"{DEBIAN_PYTHON} not found"
    return missing_ros1()


RUNNERS = {"zeromq": run_zeromq, "ros2": run_ros2, "ros1": run_ros1}


def plan(bridges: list[str], counts: list[int]) -> list[tuple[str, str, int]]:
    """One round's (world, bridge, vehicles), each compared pair back to back."""
    out = [("forest", b, n) for n in counts for b in ("zeromq", "ros2") if b in bridges]
    if "ros1" in bridges:
        out += [("flightgoggles", "zeromq", 1), ("flightgoggles", "ros1", 1)]
    return out


# ---- main ------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_client"]:
        return _client_main(argv[1:])
    if argv[:1] == ["_host_ros1"]:
        print("result " + json.dumps(_ros1_host(int(argv[1]), float(argv[2]))), flush=True)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = "comma-separated; ros1 is left out, saying why, where it cannot run"
    ap.add_argument("--bridges", default=",".join(BRIDGES), help=what)
    ap.add_argument("--vehicles", default="1,4", help="vehicle counts of the forest World")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=60, help="ticks skipped once all are flown")
    ap.add_argument("--seconds", type=float, default=4.0, help="wall seconds timed per run")
    ap.add_argument("--ros2-command", choices=("raw", "vel"), default="raw")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "ros.json")
    args = ap.parse_args(argv)
    bridges = args.bridges.split(",")
    if unknown := set(bridges) - set(BRIDGES):
        ap.error(f"--bridges: unknown {sorted(unknown)}")
    skipped = {}
    if "ros1" in bridges and (why := ros1_missing()):
        skipped["ros1"] = why
        bridges.remove("ros1")
        print(f"ros1: not run ({why})", flush=True)
    counts = [int(v) for v in args.vehicles.split(",")]

    import torch

    from volary.bench.threads import cpu_model, one_thread

    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    host = machine()
    runs = []
    with one_thread():
        for rnd in range(args.rounds):
            for world, b, n in plan(bridges, counts):
                r = RUNNERS[b](world, n, args.warmup, args.seconds,
                               ros2_command=args.ros2_command)  # fmt: skip
                runs.append({"world": world, "bridge": b, "vehicles": n, "round": rnd, **r})
                print(f"round {rnd + 1}  {world:13s} {b:7s} vehicles={n}: {r['hz']:7.1f} ticks/s"
                      f"  (tick p50 {r['tick_p50_ms']:.2f} ms, p99 {r['tick_p99_ms']:.2f} ms, "
                      f"{r['ticks']} ticks{_flag(r)})", flush=True)  # fmt: skip
    summary = _summary(runs)
    _table(summary)
    rmw = os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp (default)")
    meta = {"machine": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "torch_threads": 1, "command": " ".join(sys.argv),
            "started": started, "rounds": args.rounds, "warmup_ticks": args.warmup,
            "seconds": args.seconds, "ros2_command": args.ros2_command, "cuda": _cuda(),
            "ros2_rmw": rmw, "skipped": skipped, "host": host, "worlds": {
                "forest": "forest seed 3, depth aerial_gym_64 (64x64) on every vehicle every "
                          "tick, velocity control 60 Hz, no IMU, hover",
                "flightgoggles": "volary.ros1.bridge.serve_config(Ros1Options()): AlphaPilot "
                                 "2019, ctbr 120 Hz, IMU, IR beacons + rangefinder 60 Hz, "
                                 "1 vehicle, hover"}}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    out = {"meta": meta, "summary": summary, "runs": runs}
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0 if all(r["every_vehicle_every_tick"] and not r["faults"] for r in runs) else 1


def _flag(r: dict) -> str:
    ok = r["every_vehicle_every_tick"] and not r["faults"]
    return "" if ok else f"; NOT every vehicle every tick, {r['faults']} faults"


def _summary(runs: list[dict]) -> list[dict]:
    """Per (world, vehicles, bridge): the median rate and its ratio to zeromq's median on the
    same World and vehicle count."""

    def hz(world: str, n: int, b: str) -> list[float]:
        return [r["hz"] for r in runs if (r["world"], r["vehicles"], r["bridge"]) == (world, n, b)]

    rows: list[dict] = []
    for world, n, b in dict.fromkeys((r["world"], r["vehicles"], r["bridge"]) for r in runs):
        mine = [r for r in runs if (r["world"], r["vehicles"], r["bridge"]) == (world, n, b)]
        med, base = statistics.median(hz(world, n, b)), hz(world, n, "zeromq")
        ratio = med / statistics.median(base) if base else None
        tick = summarize([1e3 / h for h in hz(world, n, b)], label=f"{world} {b} x{n} ms/tick")
        rows.append({"world": world, "bridge": b, "vehicles": n, "median_hz": med,
                     "rounds_hz": hz(world, n, b),
                     "median_tick_p50_ms": statistics.median(r["tick_p50_ms"] for r in mine),
                     "ratio_vs_zeromq": ratio,
                     "tick_ms_over_rounds": tick.to_json(unit="ms")})  # fmt: skip
    return rows


def _table(summary: list[dict]) -> None:
    print(f"\n{'world':13s} {'bridge':7s} {'vehicles':>8s} {'ticks/s':>8s} {'tick p50 ms':>11s} "
          f"{'/ zeromq':>8s}  rounds")  # fmt: skip
    for s in summary:
        ratio = "-" if s["ratio_vs_zeromq"] is None else f"{s['ratio_vs_zeromq']:.2f}"
        rounds = ", ".join(f"{h:.1f}" for h in s["rounds_hz"])
        print(f"{s['world']:13s} {s['bridge']:7s} {s['vehicles']:>8d} {s['median_hz']:>8.1f} "
              f"{s['median_tick_p50_ms']:>11.2f} {ratio:>8s}  {rounds}")  # fmt: skip


def _cuda() -> str | None:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


if __name__ == "__main__":
    raise SystemExit(main())
