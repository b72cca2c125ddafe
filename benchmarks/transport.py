"""Which messaging library carries ``volary serve``: localhost round-trip latency, measured.

The service's hot path is a request and its reply between two processes on one machine: a
command (tens of bytes) answered by a state (hundreds), or by a depth frame (64 x 64 float32,
16 kB; 270 x 480 float32, 518 kB). Each candidate echoes a payload of that size back from a
server process; the client times ``--trips`` round trips after a warm-up and reports p50 and
p99 in microseconds. Candidates (all pip-installable, all maintained):

- ``zmq-tcp``: pyzmq REQ/REP over tcp://127.0.0.1, msgpack framing;
- ``zmq-ipc``: the same over a Unix socket;
- ``zenoh``: eclipse-zenoh query/reply (``get`` on a ``queryable``), peer mode, localhost;
- ``grpc``: grpcio unary call with raw-bytes (de)serializers (no protobuf codegen).

    /tmp/tvenv/bin/python benchmarks/transport.py          # -> results/transport.json

Needs ``pyzmq msgpack eclipse-zenoh grpcio`` in the interpreter that runs it (they are not all
volary dependencies; the choice is what this file is for).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from _timing import machine
from _timing import measure as timed

HERE = Path(__file__).resolve().parent
SIZES = {"state 128 B": 128, "depth 64x64 f32": 64 * 64 * 4, "depth 270x480 f32": 270 * 480 * 4}


# ---- servers (each runs in its own process until killed) -------------------------------------
def _zmq_server(addr: str) -> None:
    import msgpack
    import zmq

    sock = zmq.Context().socket(zmq.REP)
    sock.bind(addr)
    while True:
        msg = msgpack.unpackb(sock.recv())
        sock.send(msgpack.packb({"op": "reply", "data": msg["data"]}))


def _zenoh_server(port: int) -> None:
    import zenoh

    conf = zenoh.Config()
    conf.insert_json5("listen/endpoints", json.dumps([f"tcp/127.0.0.1:{port}"]))
    conf.insert_json5("scouting/multicast/enabled", "false")
    session = zenoh.open(conf)

    def reply(query):
        query.reply("volary/echo", query.payload.to_bytes())

    session.declare_queryable("volary/echo", reply)
    while True:
        time.sleep(1)


def _grpc_server(port: int) -> None:
    from concurrent import futures

    import grpc

    def echo(request: bytes, context) -> bytes:
        return request

    handler = grpc.method_handlers_generic_handler(
        "volary.Echo",
        {
            "Call": grpc.unary_unary_rpc_method_handler(
                echo, request_deserializer=None, response_serializer=None
            )
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    server.wait_for_termination()


# ---- clients: a function payload -> reply -----------------------------------------------------
def _zmq_client(addr: str):
    import msgpack
    import zmq

    sock = zmq.Context().socket(zmq.REQ)
    sock.connect(addr)

    def call(data: bytes) -> bytes:
        sock.send(msgpack.packb({"op": "echo", "data": data}))
        return msgpack.unpackb(sock.recv())["data"]

    return call


def _zenoh_client(port: int):
    import zenoh

    conf = zenoh.Config()
    conf.insert_json5("connect/endpoints", json.dumps([f"tcp/127.0.0.1:{port}"]))
    conf.insert_json5("scouting/multicast/enabled", "false")
    session = zenoh.open(conf)

    def call(data: bytes) -> bytes:
        for r in session.get("volary/echo", payload=data):
            return r.ok.payload.to_bytes()
        raise RuntimeError("zenoh: no reply")

    return call


def _grpc_client(port: int):
    import grpc

    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = channel.unary_unary("/volary.Echo/Call")

    def call(data: bytes) -> bytes:
        return stub(data)

    return call


def _candidates(tmp: str) -> dict:
    ipc = f"ipc://{tmp}/echo.sock"
    return {
        "zmq-tcp": (
            _zmq_server,
            ("tcp://127.0.0.1:47811",),
            _zmq_client,
            ("tcp://127.0.0.1:47811",),
        ),
        "zmq-ipc": (_zmq_server, (ipc,), _zmq_client, (ipc,)),
        "zenoh": (_zenoh_server, (47812,), _zenoh_client, (47812,)),
        "grpc": (_grpc_server, (47813,), _grpc_client, (47813,)),
    }


def measure(call, size: int, trips: int, label: str) -> dict:
    data = os.urandom(size)
    for _ in range(max(50, trips // 20)):
        assert call(data) == data
    t = timed(lambda: call(data), warmup=0, repeats=trips, label=label)
    lat = [x * 1e6 for x in t.samples]
    q = statistics.quantiles(lat, n=100)
    return {"p50_us": statistics.median(lat), "p99_us": q[98], "trips": trips,
            "latency_us": t.to_json(unit="us", scale=1e6)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trips", type=int, default=3000)
    ap.add_argument("--only", default="zmq-tcp,zmq-ipc,zenoh,grpc")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "transport.json")
    args = ap.parse_args(argv)
    host = machine()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cands = _candidates(tmp)
        for name in args.only.split(","):
            serve, sargs, client, cargs = cands[name]
            proc = mp.get_context("spawn").Process(target=serve, args=sargs, daemon=True)
            proc.start()
            time.sleep(1.5)  # the server binds
            try:
                call = client(*cargs)
                for label, size in SIZES.items():
                    trips = args.trips if size < 100_000 else args.trips // 5
                    r = {"transport": name, "payload": label, "bytes": size}
                    r.update(measure(call, size, trips, f"{name} {label}"))
                    rows.append(r)
                    print(f"{name:8s} {label:20s} p50 {r['p50_us']:8.1f} us  "
                          f"p99 {r['p99_us']:8.1f} us", flush=True)  # fmt: skip
            finally:
                proc.kill()
                proc.join()
    print(f"\n{'payload':20s}" + "".join(f"{n:>18s}" for n in args.only.split(",")))
    for label in SIZES:
        cells = []
        for name in args.only.split(","):
            r = next(x for x in rows if x["transport"] == name and x["payload"] == label)
            cells.append(f"{r['p50_us']:7.0f} / {r['p99_us']:<7.0f}")
        print(f"{label:20s}" + "".join(f"{c:>18s}" for c in cells))
    print("(p50 / p99 round trip, microseconds)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "machine": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "host": host,
    }
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
