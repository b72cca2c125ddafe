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
reply (a frame over ``FRAME_CAP`` x ``max_bytes`` is refused by ZeroMQ unread: the connection is
closed); a rejected step is not the client's input for the tick; a client that sends no step for
``input_timeout`` seconds while others wait is dropped (its slot freed, its vehicle held), and
a ``hello`` that finds no free slot takes the slot of a client silent that long; each is
recorded in :attr:`Server.faults`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hmac
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import torch
from pydantic import ConfigDict, PlainValidator, ValidationError, ValidationInfo
from pydantic_core import PydanticCustomError

from volary.errors import ConfigError
from volary.fc.loop import STICKS, stick_setpoint
from volary.inputs import Integer, Strict, Text, explain
from volary.serve import protocol as P
from volary.serve.host import WorldHost
from volary.serve.world import ServeConfig

log = logging.getLogger(__name__)

DEFAULT_BIND = "tcp://127.0.0.1:5555"
_RCVHWM = 16  # messages queued from one client before ZeroMQ stops reading its connection
_KEEP = 1000  # the newest faults and dropped clients remembered
# Buffers from this size up are mapped on their own and unmapped when freed (glibc's
# M_MMAP_THRESHOLD), so an oversized message the server read and refused leaves nothing behind.
_MMAP_FROM = 4 * 2**20


def _return_big_buffers() -> None:
    """Fix glibc's mmap threshold at :data:`_MMAP_FROM` (no-op off glibc). By default glibc
    raises it to the size of the largest buffer freed (up to 32 MB), after which buffers that
    size come from the heap and stay resident when freed: a refused 25 MB frame left ~50 MB
    behind (``tests/test_serve_faults.py``)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt(-3, _MMAP_FROM)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError, TypeError):  # not glibc (musl, macOS): nothing to fix
        pass


# ---- what a client sends: one declared schema per op (docs/protocol.md) -----------------------
def _vector(size: int | None, nonzero: bool = False) -> PlainValidator:
    """A vector field's check (:func:`protocol.as_vector`: exactly ``size`` numbers, finite,
    within ``MAX_ABS``; ``None``: the setpoint size the validation context gives), its error
    message naming the field and the element."""

    def check(v: Any, info: ValidationInfo) -> np.ndarray:
        n = size if size is not None else (info.context or {})["setpoint_size"]
        name = info.field_name or "vector"
        try:
            out = P.as_vector(v, n, name)
        except P.ProtocolError as e:
            raise PydanticCustomError("bad_field", "{reason}", {"reason": str(e)}) from None
        if nonzero and float(np.linalg.norm(out)) < 1e-6:
            raise PydanticCustomError("bad_field", "{reason}", {"reason": _ZERO_QUAT})
        return out

    return PlainValidator(check)


def _rc_frame() -> PlainValidator:
    """A ``sticks`` command's check: :func:`protocol.as_vector` of 6 numbers, then each stick
    within its declared range (:func:`volary.fc.loop.stick_setpoint`, ``inputs.LIMITS``),
    the error naming the element and the stick."""

    def check(v: Any, info: ValidationInfo) -> np.ndarray:
        name = info.field_name or "command"
        try:
            return stick_setpoint(P.as_vector(v, len(STICKS), name, bounded=False), name)
        except (P.ProtocolError, ConfigError) as e:
            raise PydanticCustomError("bad_field", "{reason}", {"reason": str(e)}) from None

    return PlainValidator(check)


_ZERO_QUAT = "quat: expected a nonzero quaternion"
Command = Annotated[np.ndarray, _vector(None)]  # the control level's setpoint (setpoint_size)
RcFrame = Annotated[np.ndarray, _rc_frame()]  # [roll, pitch, yaw, throttle, arm, angle]
Vector3 = Annotated[np.ndarray, _vector(3)]  # pos (m), vel (m/s, world), omega (rad/s, body)
Rotation = Annotated[np.ndarray, _vector(4, nonzero=True)]  # [w, x, y, z], any nonzero norm


class Request(Strict):
    """Fields every request may carry; a field not declared by its op is refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
    v: Literal[1]  # (decode checks it first: bad_version)
    op: str
    seq: Integer | None = None  # echoed in the reply


class Hello(Request):
    op: Literal["hello"]
    role: Literal["vehicle", "in_loop", "actor"] = "vehicle"
    slot: Integer | None = None  # None: the first free slot of the role
    token: Text | None = None


class Ping(Request):
    op: Literal["ping"]


class Bye(Request):
    op: Literal["bye"]


class Step(Request):
    op: Literal["step"]
    tick: Integer | None = None  # the tick of the client's last obs (lock-step: checked)


class VehicleStep(Step):
    """A simulated vehicle's step: its command."""

    command: Command


class SticksStep(VehicleStep):
    """A firmware-flown vehicle's step with control ``"sticks"``: its command is one RC frame,
    ``[roll, pitch, yaw, throttle, arm, angle]`` (:data:`volary.fc.loop.STICKS`: sticks in
    [-1, 1], throttle, arm and angle switches in [0, 1])."""

    command: RcFrame


class ActorStep(Step):
    """An actor's step: its pose."""

    pos: Vector3
    quat: Rotation


class InLoopStep(ActorStep):
    """A vehicle in the loop: its measured pose, and its velocity and body rates if known."""

    vel: Vector3 | None = None
    omega: Vector3 | None = None


REQUESTS: dict[str, type[Request]] = {"hello": Hello, "ping": Ping, "bye": Bye, "step": Step}
STEPS: dict[str, type[Step]] = {"vehicle": VehicleStep, "in_loop": InLoopStep,
                                "actor": ActorStep}  # fmt: skip


def step_schemas(control: str) -> dict[str, type[Step]]:
    """Each role's step schema for a server of control level ``control`` (``"sticks"``: a
    vehicle's command is an RC frame, :class:`SticksStep`)."""
    return {**STEPS, "vehicle": SticksStep} if control == "sticks" else dict(STEPS)


def checked(schema: type[Request], msg: dict[str, Any], setpoint_size: int = 0) -> Any:
    """``msg`` as an instance of ``schema``, or :class:`protocol.ProtocolError` ``bad_field``
    naming the first field that does not fit (a vector's own message: its element and why)."""
    try:
        return schema.model_validate(msg, context={"setpoint_size": setpoint_size})
    except ValidationError as err:
        raise _refusal(err, schema, msg.get("op")) from None


def _refusal(err: ValidationError, schema: type[Request], op: Any) -> P.ProtocolError:
    first = err.errors(include_url=False)[0]
    where = ".".join(str(p) for p in first["loc"])
    # (in STEPS' order: InLoopStep is an ActorStep; SticksStep a VehicleStep)
    role = next((r for r, s in STEPS.items() if issubclass(schema, s)), None)
    what = repr(op)
    if role is not None:
        what = f"{'a' if role == 'vehicle' else 'an'} {role!r} client's 'step'"
    if first["type"] == "bad_field":  # a vector's own message
        return P.ProtocolError("bad_field", first["msg"])
    if first["type"] == "missing":
        return P.ProtocolError("bad_field", f"{where}: missing from {what}")
    if first["type"] == "extra_forbidden":
        fields = ", ".join(schema.model_fields)
        return P.ProtocolError("bad_field", f"{where}: not a field of {what} (fields: {fields})")
    return P.ProtocolError("bad_field", explain(err))


@dataclass
class _Peer:
    ident: bytes
    envelope: list[bytes]  # REQ sockets put an empty delimiter frame before the message
    slot: int
    role: str
    pending: dict[str, Any] | None = None  # this tick's step message (real time: the latest)
    since: float = 0.0  # when the server began to wait for this peer's step
    heard: float = 0.0  # when this peer last sent anything
    seq: int | None = None  # the ``seq`` of its pending step, echoed in the obs


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
    constant time). ``max_bytes``: the largest message accepted (a frame over
    ``protocol.FRAME_CAP`` x ``max_bytes`` is refused by ZeroMQ before it is read).
    ``input_timeout``: seconds a client may keep the others waiting before it is dropped, and
    after which a new client's ``hello`` may take its slot. ``hwm``: replies queued for a
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
        _return_big_buffers()
        self.realtime, self.speed, self.max_behind = bool(realtime), float(speed), max_behind
        self.rt = RealtimeStats()
        self.token, self.max_bytes = token, max_bytes
        self.input_timeout = float(input_timeout)
        self.peers: dict[bytes, _Peer] = {}
        self._steps = step_schemas(config.control)  # each role's step schema
        self.faults: list[dict[str, Any]] = []
        self._fault_count: dict[bytes, int] = {}
        self._dropped: dict[bytes, str] = {}  # clients dropped for silence, and why
        self._ctx: Any = zmq.Context.instance()
        self.sock = self._ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.SNDHWM, hwm)
        self.sock.setsockopt(zmq.RCVHWM, _RCVHWM)
        # a larger frame is refused unread (the connection closed); the limit is checked below
        self.sock.setsockopt(zmq.MAXMSGSIZE, P.FRAME_CAP * max_bytes)
        self.sock.setsockopt(zmq.ROUTER_MANDATORY, 1)  # a full or gone peer raises (see _send)
        try:  # bound first: a taken port fails before the World is built
            self.sock.bind(bind)
        except zmq.ZMQError as e:
            self.sock.close(0)
            why = zmq.strerror(e.errno) if e.errno else str(e)  # (without pyzmq's "(addr=)")
            raise ConfigError(f"bind: cannot bind {bind}: {why}") from None
        self.address = self.sock.getsockopt(zmq.LAST_ENDPOINT).decode()
        try:
            super().__init__(config, record=record)
        except BaseException:
            self.sock.close(0)
            raise

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
        peer = self.peers.get(ident)
        if peer is not None:
            peer.heard = time.monotonic()
        msg: dict[str, Any] = {}
        try:
            msg = P.decode(rest, self.max_bytes)
            self._dispatch(ident, envelope, msg)
        except P.ProtocolError as e:
            self._fault(ident, e.code, str(e))
            self._send(ident, envelope, _echo(P.error(e.code, str(e)), msg))
        except ConfigError as e:
            self._fault(ident, "bad_field", str(e))
            self._send(ident, envelope, _echo(P.error("bad_field", str(e)), msg))

    def close(self) -> None:
        self.sock.close(0)
        self.close_recording()

    # ---- operations -------------------------------------------------------------------------
    def _dispatch(self, ident: bytes, envelope: list[bytes], msg: dict[str, Any]) -> None:
        """Check ``msg`` in full against its op's schema (a step's: its client's role's), then
        act on it."""
        op = msg["op"]
        if op not in REQUESTS:
            raise P.ProtocolError("bad_op", f"op: {op!r} is not one of {', '.join(P.OPS)}")
        peer = self.peers.get(ident)
        if peer is None and op in ("step", "bye"):  # before hello: its common fields only
            checked(Request, {k: msg[k] for k in ("v", "op", "seq") if k in msg})
            if ident in self._dropped:
                raise P.ProtocolError("dropped", self._dropped[ident])
            raise P.ProtocolError("not_joined", f"op {op!r}: send 'hello' first")
        schema = self._steps[peer.role] if peer is not None and op == "step" else REQUESTS[op]
        req = checked(schema, msg, self.sp_size)
        if isinstance(req, Hello):
            self._hello(ident, envelope, req)
            return
        if isinstance(req, Ping):
            self._send(ident, envelope, _echo({"op": "pong", "tick": self.world.tick}, msg))
            return
        assert peer is not None
        peer.envelope = envelope
        if isinstance(req, Step):
            self._step(peer, req)
            return
        del self.peers[ident]  # bye
        self._send(ident, envelope, _echo({"op": "bye"}, msg))
        self._maybe_tick()

    def _hello(self, ident: bytes, envelope: list[bytes], msg: Hello) -> None:
        token = msg.token
        if self.token is not None and not (
            isinstance(token, str) and hmac.compare_digest(token.encode(), self.token.encode())
        ):
            raise P.ProtocolError("unauthorized", "token: missing or wrong")
        if ident in self.peers:
            raise P.ProtocolError("bad_op", "hello: this client has joined already")
        self._dropped.pop(ident, None)
        role = msg.role
        slot = self._claim(role, msg.slot)
        now = time.monotonic()
        peer = _Peer(ident, envelope, slot, role, since=now, heard=now)
        mode = "realtime" if self.realtime else "lockstep"
        reply = {"seq": msg.seq}
        if role == "actor":
            self.peers[ident] = peer
            welcome = {"op": "welcome", "slot": slot, "role": role, "dt": self.world.dt,
                       "sensors": {}, "mode": mode, "speed": self.speed,
                       "max_bytes": self.max_bytes, "obs": self._actor_obs()}  # fmt: skip
            self._send(ident, envelope, _echo(welcome, reply))
            return
        self.reset_slot(slot)
        self.peers[ident] = peer
        obs = self.obs(slot)
        obs["sensors"].pop("imu", None)  # no IMU sample since the reset: the first obs has one
        welcome = {
            "op": "welcome",
            "slot": slot,
            "role": role,
            "control": self.config.control,
            "setpoint_size": self.sp_size,
            "dt": self.world.dt,
            "sensors": {n: self._sensor_info(n) for n in self.config.slots[slot].sensors},
            "mode": mode,
            "speed": self.speed,
            "max_bytes": self.max_bytes,
            "obs": obs,
        }
        self._send(ident, envelope, _echo(welcome, reply))

    def _claim(self, role: str, want: int | None) -> int:
        """A slot of ``role`` for a new client: ``want``, else the first free one; a slot whose
        client has been silent for ``input_timeout`` counts as free (that client is dropped)."""
        slots = self.config.role_slots(role)
        taken = {p.slot: p for p in self.peers.values()
                 if (p.role == "actor") == (role == "actor")}  # fmt: skip
        if want is not None:
            if want not in slots:
                raise P.ProtocolError("bad_field", f"slot: {want} is not a {role!r} slot")
            if want in taken:
                if not self._silent(taken[want]):
                    raise P.ProtocolError("slot_taken", f"slot: {want} is taken")
                self._drop(taken[want], "its slot was given to a new client")
            return want
        free = [i for i in slots if i not in taken]
        if free:
            return free[0]
        silent = [p for i, p in taken.items() if i in slots and self._silent(p)]
        if not silent:
            raise P.ProtocolError("no_slot", f"role: every {role!r} slot is taken")
        quietest = min(silent, key=lambda p: max(p.since, p.heard))
        self._drop(quietest, "its slot was given to a new client")
        return quietest.slot

    def _silent(self, peer: _Peer) -> bool:
        """Has ``peer`` sent nothing for ``input_timeout`` s while the World waited for its
        step (real time: sent nothing at all)?"""
        quiet = time.monotonic() - max(peer.since, peer.heard)
        return quiet > self.input_timeout and (self.realtime or peer.pending is None)

    def _step(self, peer: _Peer, msg: Step) -> None:
        """``msg`` (checked in full by its role's schema) as ``peer``'s input for the tick: a
        refused step never becomes one."""
        if peer.pending is not None and not self.realtime:
            raise P.ProtocolError("bad_op", "step: already sent for this tick; wait for the obs")
        if msg.tick is not None and msg.tick != self.world.tick and not self.realtime:
            raise P.ProtocolError(
                "bad_field", f"tick: the world is at {self.world.tick}, got {msg.tick}"
            )
        if isinstance(msg, VehicleStep):
            pending: dict[str, Any] = {"command": msg.command}
        else:
            assert isinstance(msg, ActorStep)
            pending = {"pos": msg.pos, "quat": msg.quat}
            if isinstance(msg, InLoopStep):
                pending["vel"], pending["omega"] = msg.vel, msg.omega
        peer.pending, peer.seq = pending, msg.seq
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
            o = self._actor_obs() if p.role == "actor" else obs[p.slot]
            if p.seq is not None:
                o["seq"] = p.seq
            p.pending, p.since, p.seq = None, now, None
            self._send(p.ident, p.envelope, o)

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
            self._drop(p, "the slot was freed")
        if late:
            self._maybe_tick()

    def _drop(self, peer: _Peer, outcome: str) -> None:
        """Drop a client silent for ``input_timeout`` (a ``timeout`` fault); its next message
        is answered ``dropped``."""
        why = f"slot {peer.slot}: no step for {self.input_timeout} s; {outcome}"
        self._fault(peer.ident, "timeout", why)
        self._dropped[peer.ident] = f"dropped at tick {self.world.tick}: {why}; send 'hello'"
        if len(self._dropped) > _KEEP:
            del self._dropped[next(iter(self._dropped))]
        del self.peers[peer.ident]

    def reset_slot(self, slot: int) -> None:
        """:meth:`WorldHost.reset_slot` after every noise stream of the slot (process noise,
        IMU, its sensors) is put back where it began (``World.restart_noise``; their keys are
        the server's ``sim_seed`` or ``noise_keys`` and the slot), so a client's flight repeats
        whatever flew the slot before it, the same joins repeat exactly (a replay too), and a
        flight draws what the same World's first flight draws in process. The other slots'
        streams are left where they were."""
        mask = torch.zeros(self.world.b, dtype=torch.bool, device=self.world.device)
        mask[slot] = True
        self.world.restart_noise(mask)
        super().reset_slot(slot)

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
        del self.faults[:-_KEEP]  # the newest thousand
        if self.recorder is not None:  # every fault, also those the log leaves out
            self.recorder.event(self.world.tick, "fault", **{k: v for k, v in entry.items()
                                                             if k != "tick"})  # fmt: skip
        if len(self._fault_count) > 100 * _KEEP:  # clients that reconnect with new identities
            self._fault_count.clear()
        n = self._fault_count[ident] = self._fault_count.get(ident, 0) + 1
        if n <= 10 or n % 1000 == 0:  # a flood is logged, not echoed
            log.warning("serve: %s from %s (fault %d): %s", code, ident.hex(), n, message)


def _echo(reply: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """``reply`` with the ``seq`` of the ``request`` it answers, when that has one (a client
    tells a late reply from the answer it waits for by it)."""
    seq = request.get("seq")
    if type(seq) is int:
        reply["seq"] = seq
    return reply
