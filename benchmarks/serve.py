"""``volary serve`` round-trip latency on localhost: 1 and 8 clients, state only and depth frames.

One round trip = ``Client.step(command)`` until its ``obs`` is back: the message out, the
server's lock-step tick (the World's control period: controller, physics, the sensors due, the
collision query), the reply in. With 8 clients, each client's round trip includes waiting for
the others (lock-step), which is what a multi-vehicle user sees. The server runs as
``volary serve`` in its own process, each client in its own process; p50 and p99 pool every
client's timed steps after a warm-up.

Cases: ``state`` (no sensors, no IMU), ``depth64`` (a 64 x 64 depth camera every step,
``aerial_gym_64``), ``depth270x480`` (``d455``, 270 x 480, every step), ``splat64`` (a 64 x 64
photoreal RGB camera every step over the forest's synthesized Gaussian splats: gsplat on a CUDA
machine where installed, the numba CPU path elsewhere; not in the default list, add it with
``--cases``), and ``echo``: the floor under ``state``, the same clients and messages against a
lock-step echo server that speaks the protocol but flies no World (a state-sized ``obs`` for every
``step``): what the transport, the encoding and the machine's scheduling cost alone; ``zmq``: the
same echo with raw bytes of the same sizes on bare DEALER/ROUTER sockets (no protocol, no
``Client``): the sockets and the scheduling alone.

    .venv/bin/python benchmarks/serve.py                 # -> results/serve.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _timing import machine, summarize
from _timing import measure as measure_calls

HERE = Path(__file__).resolve().parent
CASES = {
    "state": ["--imu", "none"],
    "depth64": ["--imu", "none", "--sensor", "depth=depth:aerial_gym_64"],
    "depth270x480": ["--imu", "none", "--sensor", "depth=depth:d455"],
    "splat64": ["--imu", "none", "--sensor", "rgb=splat:64x64"],
}
DEFAULT_CASES = ("zmq", "echo", "state", "depth64", "depth270x480")
TARGETS_P99_MS = {"state": 1.0, "depth64": 5.0}


def _client(address: str, warmup: int, steps: int, out: mp.Queue) -> None:
    from volary.client import Client

    with Client(address, timeout=120) as c:
        cmd = [0.027 * 9.81, 0.0, 0.0, 0.0]
        t = measure_calls(lambda: c.step(cmd), warmup=warmup, repeats=steps, quiet=True)
        out.put([x * 1e3 for x in t.samples])


def _zmq_client(address: str, warmup: int, steps: int, out: mp.Queue) -> None:
    import zmq

    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.connect(address)

    def round_trip() -> None:
        sock.send_multipart([b"s" * 56, b"c" * 32])  # a step message's frame sizes
        sock.recv_multipart()

    t = measure_calls(round_trip, warmup=warmup, repeats=steps, quiet=True)
    out.put([x * 1e3 for x in t.samples])


def _zmq_echo(clients: int, out: mp.Queue) -> None:
    """Raw-bytes lock-step echo: all clients' messages, then replies of an ``obs``'s frame sizes."""
    import zmq

    sock = zmq.Context.instance().socket(zmq.ROUTER)
    sock.bind("tcp://127.0.0.1:*")
    out.put(sock.getsockopt(zmq.LAST_ENDPOINT).decode())
    waiting: list[bytes] = []
    while True:
        waiting.append(sock.recv_multipart()[0])
        if len(waiting) == clients:
            for ident in waiting:
                sock.send_multipart([ident, b"o" * 234, b"p" * 12, b"v" * 12, b"q" * 16, b"w" * 12])
            waiting.clear()


def _echo(clients: int, out: mp.Queue) -> None:
    """A lock-step echo server: waits for every client's ``step``, then answers each with a
    state-sized ``obs`` (no World)."""
    import numpy as np
    import zmq

    from volary.serve import protocol as P

    sock = zmq.Context.instance().socket(zmq.ROUTER)
    sock.bind("tcp://127.0.0.1:*")
    out.put(sock.getsockopt(zmq.LAST_ENDPOINT).decode())
    state = {k: np.zeros(4 if k == "quat" else 3, np.float32)
             for k in ("pos", "vel", "quat", "omega")}  # fmt: skip
    peers: list[tuple[bytes, str]] = []
    tick = 0
    while True:
        frames = sock.recv_multipart()
        msg = P.decode(frames[1:])
        if msg["op"] == "hello":
            welcome = {"op": "welcome", "slot": 0, "role": "vehicle", "control": "ctbr",
                       "setpoint_size": 4, "dt": 1 / 60, "sensors": {}, "mode": "lockstep",
                       "obs": {"op": "obs", "tick": 0}}  # fmt: skip
            sock.send_multipart([frames[0], *P.encode(welcome)])
            continue
        peers.append((frames[0], msg["op"]))
        if len(peers) < clients:
            continue
        tick += 1
        obs = {"op": "obs", "tick": tick, "clock": tick / 60, "time": tick / 60, "state": state,
               "sensors": {}, "events": {"collided": False, "out_of_bounds": False}}  # fmt: skip
        for ident, op in peers:
            sock.send_multipart([ident, *P.encode(obs if op == "step" else {"op": "bye"})])
        peers.clear()


def measure(case: str, clients: int, warmup: int, steps: int) -> dict:
    if case in ("echo", "zmq"):
        return _measure_echo(case, clients, warmup, steps)
    args = [sys.executable, "-m", "volary.cli.main", "serve", "--scene", "forest", "--seed", "3",
            "--vehicles", str(clients), "--bind", "tcp://127.0.0.1:*", "--timeout", "600",
            *CASES[case]]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    server = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = ""
        while "volary serve:" not in line:
            line = server.stdout.readline()
            if not line:
                raise RuntimeError(f"{case}: the server exited")
        address = re.search(r"tcp://[\d.]+:\d+", line).group(0)
        lat = _fly_clients(_client, address, clients, warmup, steps)
    finally:
        server.kill()
        server.wait()
    return _row(case, clients, steps, lat)


def _fly_clients(client: Any, address: str, clients: int, warmup: int, steps: int) -> list:
    """Run ``clients`` client processes against ``address``; every timed round trip (ms)."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=client, args=(address, warmup, steps, q)) for _ in range(clients)]
    for p in procs:
        p.start()
    lat = [x for _ in procs for x in q.get(timeout=1800)]
    for p in procs:
        p.join()
    return lat


def _measure_echo(case: str, clients: int, warmup: int, steps: int) -> dict:
    ctx = mp.get_context("spawn")
    addr = ctx.Queue()
    serve, client = (_echo, _client) if case == "echo" else (_zmq_echo, _zmq_client)
    server = ctx.Process(target=serve, args=(clients, addr), daemon=True)
    server.start()
    try:
        lat = _fly_clients(client, addr.get(timeout=60), clients, warmup, steps)
    finally:
        server.kill()
        server.join()
    return _row(case, clients, steps, lat)


def _row(case: str, clients: int, steps: int, lat: list[float]) -> dict:
    q99 = statistics.quantiles(lat, n=100)[98]
    t = summarize(lat, label=f"{case} clients={clients} round trip")
    return {"case": case, "clients": clients, "steps_per_client": steps,
            "p50_ms": statistics.median(lat), "p99_ms": q99, "max_ms": max(lat),
            "latency_ms": t.to_json(unit="ms")}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--clients", default="1,8")
    ap.add_argument("--cases", default=",".join(DEFAULT_CASES))
    ap.add_argument("--out", type=Path, default=HERE / "results" / "serve.json")
    args = ap.parse_args(argv)
    host = machine()
    rows = []
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for case in args.cases.split(","):
        for n in (int(c) for c in args.clients.split(",")):
            steps = args.steps if case != "depth270x480" else max(30, args.steps // (5 * n * n))
            r = measure(case, n, args.warmup, steps)
            rows.append(r)
            print(f"{case:14s} clients={n}: p50 {r['p50_ms']:7.3f} ms  p99 {r['p99_ms']:7.3f} ms",
                  flush=True)  # fmt: skip
    print(f"\n{'case':14s} {'clients':>7s} {'p50 ms':>9s} {'p99 ms':>9s} {'target p99':>11s}")
    for r in rows:
        target = TARGETS_P99_MS.get(r["case"])
        mark = (
            "-"
            if target is None
            else f"< {target:g} {'met' if r['p99_ms'] < target else 'NOT met'}"
        )
        cells = f"{r['clients']:>7d} {r['p50_ms']:>9.3f} {r['p99_ms']:>9.3f}"
        print(f"{r['case']:14s} {cells} {mark:>11s}")
    if "splat64" not in args.cases.split(","):
        print("splat RGB 64x64: not run (add --cases splat64; gsplat renders on CUDA)")
    meta = {"machine": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "python": platform.python_version(), "command": " ".join(sys.argv),
            "cuda": _cuda_name(), "started": started, "host": host}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    return 0


def _cuda_name() -> str | None:
    try:
        import torch

        return torch.cuda.get_device_name() if torch.cuda.is_available() else None
    except ImportError:  # pragma: no cover
        return None


if __name__ == "__main__":
    raise SystemExit(main())
