"""``volary serve``: one World, any number of client processes, in lock-step.

The server owns a :class:`~volary.sim.World` built by :func:`volary.serve.world.build_world` and
a ZeroMQ ROUTER socket. Clients (``volary.client``, or any ZeroMQ DEALER/REQ socket speaking
``docs/protocol.md``) claim a vehicle slot with ``hello`` and then send one ``step`` per control
period: a command for a simulated vehicle, a pose for a vehicle in the loop. When every client
has sent its step, the World advances one control period (the vehicles of free slots are held
where they are) and each client gets its vehicle's ``obs``: state, the sensors due this step,
collision and gate events. The flight is a function of the inputs alone (lock-step), so it
repeats exactly and equals the same inputs flown in-process.

Faults never stop the server: a malformed, oversized or unauthorized message gets an ``error``
reply; a client that sends no step for ``input_timeout`` seconds while others wait is dropped
(its slot freed, its vehicle held) and recorded in :attr:`Server.faults`.
"""

from __future__ import annotations

import hmac
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from volary.errors import ConfigError
from volary.serve import protocol as P
from volary.serve.host import WorldHost
from volary.serve.world import ServeConfig

log = logging.getLogger(__name__)

DEFAULT_BIND = "tcp://127.0.0.1:5555"


@dataclass
class _Peer:
    ident: bytes
    envelope: list[bytes]  # REQ sockets put an empty delimiter frame before the message
    slot: int
    role: str
    pending: dict[str, Any] | None = None  # this tick's step message (real time: the latest)
    since: float = 0.0  # when the server began to wait for this peer's step


@dataclass
class RealtimeStats:
    """How a real-time run kept to the wall clock. ``lag`` is how far the World's clock is
    behind the wall clock's schedule (s; 0 while it keeps up; it grows while the server cannot
    keep up, which is FlightGoggles' clock scaling); ``time_scale`` is simulated seconds per
    wall second over the last second (1.0 at full speed x ``speed``)."""

    ticks: int = 0
    late_ticks: int = 0  # ticks that started more than one period after their scheduled time
    slips: int = 0  # times the schedule slipped (a backlog over ``max_behind``: clock scaling)
    max_start_delay: float = 0.0  # s, the latest a tick started after its scheduled time
    lag: float = 0.0  # s of wall clock the World is behind its schedule now
    time_scale: float = 1.0
    busy: float = 0.0  # s spent ticking (stepping, rendering, replying)
    wall: float = 0.0  # s since the first tick


class Server(WorldHost):
    """A World served over ZeroMQ (module docstring).

    ``bind``: a ZeroMQ endpoint; loopback (127.0.0.1, ::1, localhost, ipc://, inproc://) unless
    a ``token`` is given, which every client must then present in ``hello`` (compared in
    constant time). ``max_bytes``: the largest message accepted. ``input_timeout``: seconds a
    client may keep the others waiting before it is dropped. ``hwm``: replies queued for a
    client that does not read them before further ones are dropped (a ``backpressure``
    fault)."""

    def __init__(
        self,
        config: ServeConfig,
        *,
        bind: str = DEFAULT_BIND,
        token: str | None = None,
        max_bytes: int = P.MAX_BYTES,
        input_timeout: float = 5.0,
        hwm: int = 1000,
        record: str | Path | None = None,
        realtime: bool = False,
        speed: float = 1.0,
        max_behind: float = 0.1,
    ) -> None:
        import zmq

        if not isinstance(config, ServeConfig):
            raise ConfigError(f"config: expected a ServeConfig, got {type(config).__name__}")
        P.check_bind(bind, token)
        if not (isinstance(max_bytes, int) and max_bytes >= 1024):
            raise ConfigError(f"max_bytes: expected an int >= 1024, got {max_bytes!r}")
        if not (isinstance(hwm, int) and hwm >= 1):
            raise ConfigError(f"hwm: expected an int >= 1, got {hwm!r}")
        if not input_timeout > 0:
            raise ConfigError(f"input_timeout: expected seconds > 0, got {input_timeout!r}")
        if not (isinstance(speed, int | float) and 0 < speed <= 1000):
            raise ConfigError(f"speed: expected a real-time factor in (0, 1000], got {speed!r}")
        if not (isinstance(max_behind, int | float) and max_behind >= 0):
            raise ConfigError(f"max_behind: expected seconds >= 0, got {max_behind!r}")
        self.realtime, self.speed, self.max_behind = bool(realtime), float(speed), max_behind
        self.rt = RealtimeStats()
        self.token, self.max_bytes = token, max_bytes
        self.input_timeout = float(input_timeout)
        super().__init__(config, record=record)
        self.peers: dict[bytes, _Peer] = {}
        self.faults: list[dict[str, Any]] = []
        self._fault_count: dict[bytes, int] = {}
        self._dropped: dict[bytes, str] = {}  # clients dropped for silence, and why
        self._ctx: Any = zmq.Context.instance()
        self.sock = self._ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.SNDHWM, hwm)
        self.sock.setsockopt(zmq.MAXMSGSIZE, 4 * max_bytes)  # hard cap; the limit is checked below
        self.sock.setsockopt(zmq.ROUTER_MANDATORY, 1)  # a full or gone peer raises (see _send)
        self.sock.bind(bind)
        self.address = self.sock.getsockopt(zmq.LAST_ENDPOINT).decode()

    # ---- the loop ---------------------------------------------------------------------------
    def serve(self, stop: Any = None, max_ticks: int | None = None) -> None:
        """Serve until ``stop`` (a ``threading.Event``) is set or ``max_ticks`` control
        periods have run."""
        import zmq

        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        if self.realtime:
            self._serve_realtime(poller, stop, max_ticks)
            return
        while not (stop is not None and stop.is_set()):
            if max_ticks is not None and self.ticks >= max_ticks:
                return
            if poller.poll(50):
                self.handle(self.sock.recv_multipart(copy=True))
            self._drop_stragglers()

    def _serve_realtime(self, poller: Any, stop: Any, max_ticks: int | None) -> None:
        """The wall clock paces the World: a tick every ``dt / speed`` s with each client's
        latest input (held until it sends another), its observation pushed to every client.
        A slow tick (a camera frame, say) is caught up by the next ones as long as the World
        is at most ``max_behind`` s behind its schedule; beyond that the schedule slips: the
        World's time then runs slower than the wall clock (clock scaling), and :attr:`rt`
        reports by how much."""
        period = self.world.dt / self.speed
        start: float | None = None  # wall time of tick 0 of the schedule
        window: list[tuple[float, int]] = []  # (wall, tick) of the last second
        while not (stop is not None and stop.is_set()):
            if max_ticks is not None and self.ticks >= max_ticks:
                return
            now = time.monotonic()
            due = now if start is None else start + self.rt.lag + self.rt.ticks * period
            if not self.peers:  # nobody to fly for: wait for a hello, restart the schedule
                start = None
                if poller.poll(50):
                    self.handle(self.sock.recv_multipart(copy=True))
                continue
            if now < due:
                if poller.poll(max(1, int((due - now) * 1000))):
                    self.handle(self.sock.recv_multipart(copy=True))
                continue
            for _ in range(64):  # behind schedule: still read what arrived (inputs, byes)
                if not poller.poll(0):
                    break
                self.handle(self.sock.recv_multipart(copy=True))
            if not self.peers:
                continue
            if start is None:  # the first tick warms the kernels up; the schedule starts after
                self._tick_realtime()
                self.rt.ticks = 1
                start = time.monotonic() - period
                window = [(time.monotonic(), self.ticks)]
                continue
            delay = now - due
            self.rt.max_start_delay = max(self.rt.max_start_delay, delay)
            if delay > period:
                self.rt.late_ticks += 1
            if delay > self.max_behind:  # too far behind to catch up: the schedule slips
                self.rt.slips += 1
                self.rt.lag += delay
            self._tick_realtime()
            after = time.monotonic()
            self.rt.busy += after - now
            self.rt.ticks += 1
            self.rt.wall = after - start
            window.append((after, self.ticks))
            while window[0][0] < after - 1.0:
                window.pop(0)
            if len(window) > 1 and window[-1][0] > window[0][0]:
                sim = (window[-1][1] - window[0][1]) * self.world.dt
                self.rt.time_scale = sim / (window[-1][0] - window[0][0])

    def handle(self, frames: list[bytes]) -> None:
        """One incoming message (``[identity, (b""), header, data...]``)."""
        ident, rest = frames[0], frames[1:]
        envelope: list[bytes] = []
        if rest and rest[0] == b"":
            envelope, rest = [b""], rest[1:]
        try:
            msg = P.decode(rest, self.max_bytes)
            self._dispatch(ident, envelope, msg)
        except P.ProtocolError as e:
            self._fault(ident, e.code, str(e))
            self._send(ident, envelope, P.error(e.code, str(e)))
        except ConfigError as e:
            self._fault(ident, "bad_field", str(e))
            self._send(ident, envelope, P.error("bad_field", str(e)))

    def close(self) -> None:
        self.sock.close(0)
        self.close_recording()

    # ---- operations -------------------------------------------------------------------------
    def _dispatch(self, ident: bytes, envelope: list[bytes], msg: dict[str, Any]) -> None:
        op = msg["op"]
        if op == "hello":
            self._hello(ident, envelope, msg)
            return
        if op == "ping":
            self._send(ident, envelope, {"op": "pong", "tick": self.world.tick})
            return
        peer = self.peers.get(ident)
        if peer is None:
            if ident in self._dropped:
                raise P.ProtocolError("dropped", self._dropped[ident])
            raise P.ProtocolError("not_joined", f"op {op!r}: send 'hello' first")
        peer.envelope = envelope
        if op == "step":
            self._step(peer, msg)
        elif op == "bye":
            del self.peers[ident]
            self._send(ident, envelope, {"op": "bye"})
            self._maybe_tick()
        else:
            raise P.ProtocolError("bad_op", f"op: {op!r} is not one of hello, step, ping, bye")

    def _hello(self, ident: bytes, envelope: list[bytes], msg: dict[str, Any]) -> None:
        token = P.field(msg, "token", (str, type(None)), None)
        if self.token is not None and not (
            isinstance(token, str) and hmac.compare_digest(token.encode(), self.token.encode())
        ):
            raise P.ProtocolError("unauthorized", "token: missing or wrong")
        if ident in self.peers:
            raise P.ProtocolError("bad_op", "hello: this client has joined already")
        self._dropped.pop(ident, None)
        role = P.field(msg, "role", str, "vehicle")
        if role not in ("vehicle", "in_loop", "actor"):
            raise P.ProtocolError(
                "bad_field", f"role: expected 'vehicle', 'in_loop' or 'actor', got {role!r}"
            )
        slot = self._claim(role, P.field(msg, "slot", (int, type(None)), None))
        peer = _Peer(ident, envelope, slot, role, since=time.monotonic())
        if role == "actor":
            self.peers[ident] = peer
            mode = "realtime" if self.realtime else "lockstep"
            welcome = {"op": "welcome", "slot": slot, "role": role, "dt": self.world.dt,
                       "sensors": {}, "mode": mode, "speed": self.speed,
                       "obs": self._actor_obs()}  # fmt: skip
            self._send(ident, envelope, welcome)
            return
        self.reset_slot(slot)
        self.peers[ident] = peer
        welcome = {
            "op": "welcome",
            "slot": slot,
            "role": role,
            "control": self.config.control,
            "setpoint_size": self.sp_size,
            "dt": self.world.dt,
            "sensors": {n: self._sensor_info(n) for n in self.config.slots[slot].sensors},
            "mode": "realtime" if self.realtime else "lockstep",
            "speed": self.speed,
            "obs": self.obs(slot),
        }
        self._send(ident, envelope, welcome)

    def _claim(self, role: str, want: int | None) -> int:
        taken = {p.slot for p in self.peers.values() if (p.role == "actor") == (role == "actor")}
        free = [i for i in self.config.role_slots(role) if i not in taken]
        if want is not None:
            if want not in self.config.role_slots(role):
                raise P.ProtocolError("bad_field", f"slot: {want} is not a {role!r} slot")
            if want in taken:
                raise P.ProtocolError("slot_taken", f"slot: {want} is taken")
            return want
        if not free:
            raise P.ProtocolError("no_slot", f"role: every {role!r} slot is taken")
        return free[0]

    def _step(self, peer: _Peer, msg: dict[str, Any]) -> None:
        if peer.pending is not None and not self.realtime:
            raise P.ProtocolError("bad_op", "step: already sent for this tick; wait for the obs")
        tick = P.field(msg, "tick", (int, type(None)), None)
        if tick is not None and tick != self.world.tick and not self.realtime:
            raise P.ProtocolError(
                "bad_field", f"tick: the world is at {self.world.tick}, got {tick}"
            )
        if peer.role == "actor":
            peer.pending = {"pos": P.vector(msg, "pos", 3), "quat": P.vector(msg, "quat", 4)}
            if float(np.linalg.norm(peer.pending["quat"])) < 1e-6:
                raise P.ProtocolError("bad_field", "quat: expected a nonzero quaternion")
        elif peer.role == "vehicle":
            cmd = P.vector(msg, "command", self.sp_size)
            peer.pending = {"command": cmd}
        else:
            pose = {
                "pos": P.vector(msg, "pos", 3),
                "quat": P.vector(msg, "quat", 4),
                "vel": P.vector(msg, "vel", 3, None),
                "omega": P.vector(msg, "omega", 3, None),
            }
            quat = pose["quat"]
            assert quat is not None
            if float(np.linalg.norm(quat)) < 1e-6:
                raise P.ProtocolError("bad_field", "quat: expected a nonzero quaternion")
            peer.pending = pose
        if not self.realtime:  # real time: the clock ticks, the input is held until replaced
            self._maybe_tick()

    # ---- ticks --------------------------------------------------------------------------------
    def _maybe_tick(self) -> None:
        if self.realtime:  # the wall clock ticks (_serve_realtime)
            return
        if self.peers and all(p.pending is not None for p in self.peers.values()):
            self._tick()

    def _inputs(self) -> tuple[dict[int, tuple[str, dict]], dict[int, dict]]:
        """The peers' pending inputs: vehicles' {slot: (role, fields)} and actors' {k: pose}."""
        vehicles, actors = {}, {}
        for p in self.peers.values():
            if p.pending is None:
                continue
            if p.role == "actor":
                actors[p.slot] = p.pending
            else:
                vehicles[p.slot] = (p.role, p.pending)
        return vehicles, actors

    def _tick(self) -> None:
        obs = self.advance(*self._inputs())
        now = time.monotonic()
        for p in list(self.peers.values()):
            p.pending, p.since = None, now
            self._send(p.ident, p.envelope, self._actor_obs() if p.role == "actor" else obs[p.slot])

    def _tick_realtime(self) -> None:
        """One real-time tick: every client's latest input (a client that has sent none yet
        is held at its pose), then its observation to every client."""
        obs = self.advance(*self._inputs())
        for p in list(self.peers.values()):
            if p.role == "actor":
                o = self._actor_obs()
            else:
                o = obs.get(p.slot) or self.obs(p.slot)
            o["time_scale"] = self.rt.time_scale
            self._send(p.ident, p.envelope, o)

    def _actor_obs(self) -> dict[str, Any]:
        """What an actor's client gets back: the tick and the World's time."""
        w = self.world
        return {"op": "obs", "tick": w.tick, "clock": w.tick * w.dt,
                "time": float(w.state.time[0])}  # fmt: skip

    def _drop_stragglers(self) -> None:
        waiting = [p for p in self.peers.values() if p.pending is None]
        if not waiting or len(waiting) == len(self.peers):
            return
        now = time.monotonic()
        late = [p for p in waiting if now - p.since > self.input_timeout]
        for p in late:
            why = f"slot {p.slot}: no step for {self.input_timeout} s; the slot was freed"
            self._fault(p.ident, "timeout", why)
            self._dropped[p.ident] = f"dropped at tick {self.world.tick}: {why}; send 'hello'"
            del self.peers[p.ident]
        if late:
            self._maybe_tick()

    # ---- replies ------------------------------------------------------------------------------
    def _sensor_info(self, name: str) -> dict[str, Any]:
        s = self.config.sensors[name]
        return {"kind": s.kind, "preset": s.preset, "rate_hz": s.rate_hz}

    def _send(self, ident: bytes, envelope: list[bytes], header: dict[str, Any]) -> None:
        import zmq

        frames = [ident, *envelope, *P.encode(header)]
        for attempt in range(2):
            try:
                self.sock.send_multipart(frames, flags=zmq.NOBLOCK)
                return
            except zmq.Again:
                # libzmq learns that a peer has read its queue from commands a busy socket
                # processes only now and then; reading ZMQ_EVENTS processes them, then retry
                if attempt == 0:
                    self.sock.getsockopt(zmq.EVENTS)
                    continue
                self._fault(ident, "backpressure", "reply dropped: the client's queue is full")
            except zmq.ZMQError as e:  # EHOSTUNREACH: the client is gone
                self._fault(ident, "unreachable", f"reply dropped: {e}")
                return

    def _fault(self, ident: bytes, code: str, message: str) -> None:
        peer = self.peers.get(ident)
        entry = {"tick": self.world.tick, "client": ident.hex(), "code": code, "message": message}
        if peer is not None:
            entry["slot"] = peer.slot
        self.faults.append(entry)
        del self.faults[:-1000]  # the newest thousand
        if self.recorder is not None:  # every fault, also those the log leaves out
            self.recorder.event(self.world.tick, "fault", **{k: v for k, v in entry.items()
                                                             if k != "tick"})  # fmt: skip
        n = self._fault_count[ident] = self._fault_count.get(ident, 0) + 1
        if n <= 10 or n % 1000 == 0:  # a flood is logged, not echoed
            log.warning("serve: %s from %s (fault %d): %s", code, ident.hex(), n, message)
