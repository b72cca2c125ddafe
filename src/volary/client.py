"""A client of ``volary serve``: fly a vehicle of a served World from your own process.

Needs numpy, pyzmq and msgpack only (importing it imports neither torch nor the simulator), so
an autonomy stack can use it in its own environment::

    from volary.client import Client

    with Client("tcp://127.0.0.1:5555") as c:      # claims a simulated vehicle
        obs = c.obs                                 # state, sensors, events at the start
        for _ in range(60):
            obs = c.step([0.3, 0.0, 0.0, 0.0])      # one control period (CTBR here)
        print(obs["state"]["pos"], obs["sensors"].get("imu"))

``Client(address, role="in_loop")`` claims a vehicle in the loop instead: ``step(pos=, quat=)``
sends its measured pose and gets back the sensors rendered from it and its events.
``Client(address, role="actor")`` claims a dynamic actor (a person, a moving obstacle; the
server's ``--actor`` shapes): ``step(pos=, quat=)`` moves it, and every sensor and collision
check sees it from that tick on. The wire
format is ``docs/protocol.md``; any ZeroMQ DEALER or REQ socket that speaks it works as well.

Every request carries a ``seq`` the server echoes, so a reply is never taken for another's: after
a :class:`TimeoutError` the request may still take effect (a step that timed out in lock-step
advances the World once the others have stepped), and its late reply is read before the next
request is sent (waiting up to ``timeout``; a late ``obs`` becomes :attr:`Client.obs`). A
message over the server's ``max_bytes`` (told in its ``welcome``; before it, this client's
``max_bytes``) raises :class:`~volary.serve.protocol.ProtocolError` ``too_large`` unsent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from volary.serve import protocol as P


class ServerError(Exception):
    """The server answered with an ``error`` message; ``code`` is its code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class Client:
    """One participant of a served World (module docstring).

    ``role``: ``"vehicle"``, ``"in_loop"`` or ``"actor"``; ``slot``: a particular slot (an
    actor's index for an actor; default: the first free one of the role); ``token``: the
    server's token when it has one; ``timeout``: seconds to wait for any reply before
    :class:`TimeoutError`; ``max_bytes``: the largest reply accepted, and the largest message
    sent until the server's ``welcome`` tells its own limit."""

    def __init__(
        self,
        address: str = "tcp://127.0.0.1:5555",
        *,
        role: str = "vehicle",
        slot: int | None = None,
        token: str | None = None,
        timeout: float = 30.0,
        max_bytes: int = P.MAX_BYTES,
    ) -> None:
        import zmq

        if role not in ("vehicle", "in_loop", "actor"):
            raise ValueError(f"role: expected 'vehicle', 'in_loop' or 'actor', got {role!r}")
        if not timeout > 0:
            raise ValueError(f"timeout: expected seconds > 0, got {timeout!r}")
        self.timeout, self.max_bytes = float(timeout), max_bytes
        self.send_limit = max_bytes  # the server's max_bytes once its welcome has told it
        self._seq = 0  # the last request's sequence number
        self._late: int | None = None  # the seq of a request whose reply did not come in time
        self._ctx: Any = zmq.Context.instance()
        self.sock = self._ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(address)
        try:
            welcome = self._call({"op": "hello", "role": role, "slot": slot, "token": token})
        except BaseException:
            self.sock.close(0)
            raise
        self.send_limit = int(welcome.get("max_bytes", max_bytes))
        self.slot: int = welcome["slot"]
        self.role: str = welcome["role"]
        self.control: str = welcome.get("control", "")  # (an actor has neither)
        self.setpoint_size: int = welcome.get("setpoint_size", 0)
        self.dt: float = welcome["dt"]
        self.sensors: dict[str, Any] = welcome["sensors"]
        self.realtime: bool = welcome.get("mode") == "realtime"
        self.obs: dict[str, Any] = welcome["obs"]

    @property
    def tick(self) -> int:
        return int(self.obs["tick"])

    def step(
        self,
        command: Sequence[float] | np.ndarray | None = None,
        *,
        pos: Sequence[float] | np.ndarray | None = None,
        quat: Sequence[float] | np.ndarray | None = None,
        vel: Sequence[float] | np.ndarray | None = None,
        omega: Sequence[float] | np.ndarray | None = None,
    ) -> dict[str, Any]:
        """One control period: a simulated vehicle's ``command`` (its control level's
        setpoint), or an in-the-loop vehicle's ``pos``/``quat`` (and optional ``vel``,
        ``omega``); returns the observation after it (also kept as :attr:`obs`).

        Against a real-time server (``volary serve --realtime``) the input is held from the
        next tick on, until the next ``step``, and this returns the newest observation after
        it (older ones queued meanwhile are skipped; :meth:`latest` reads without sending)."""
        if self._late is not None and not self.realtime:
            self._settle(None)  # a step that timed out may have moved the World on
        msg: dict[str, Any] = {"op": "step", "tick": self.tick}
        if self.role == "vehicle":
            if command is None:
                raise ValueError("command: a simulated vehicle's step needs a command")
            msg["command"] = _vec(command, self.setpoint_size, "command")
        else:
            if pos is None or quat is None:
                raise ValueError("pos, quat: a vehicle in the loop sends its pose")
            if self.role == "actor" and (vel is not None or omega is not None):
                raise ValueError("vel, omega: an actor's step is its pose only")
            msg["pos"], msg["quat"] = _vec(pos, 3, "pos"), _vec(quat, 4, "quat")
            if vel is not None:
                msg["vel"] = _vec(vel, 3, "vel")
            if omega is not None:
                msg["omega"] = _vec(omega, 3, "omega")
        if self.realtime:
            self._send(msg)
            return self.latest()
        self.obs = self._call(msg)
        return self.obs

    def latest(self, timeout: float | None = None) -> dict[str, Any]:
        """Real time: wait for the next observation, then skip to the newest one queued. The
        sensor readings of the skipped ones are kept (the newest of each sensor), so no camera
        frame is lost to a slow client: ``obs["sensors"][name]["tick"]`` says when it was
        taken."""
        reply = self._recv(timeout)
        sensors = _stamped(reply)
        while self.sock.poll(0):
            reply = self._recv(timeout)
            sensors.update(_stamped(reply))
        reply["sensors"] = sensors
        self.obs = reply
        return reply

    def close(self) -> None:
        """Leave the world (the slot is freed) and close the socket."""
        if self.sock.closed:
            return
        try:
            reply = self._call({"op": "bye"}, timeout=2.0, settle=False)
            for _ in range(10_000):  # real time: observations were still on their way
                if reply.get("op") == "bye":
                    break
                reply = self._recv(2.0)
        except (TimeoutError, ServerError):
            pass
        self.sock.close(0)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- transport -----------------------------------------------------------------------------
    def _call(
        self, header: dict[str, Any], timeout: float | None = None, settle: bool = True
    ) -> dict[str, Any]:
        """Send a request and return the reply with its ``seq``; a late reply to an earlier
        request is read first (``settle``) or passed over."""
        if settle and self._late is not None:
            self._settle(timeout)
        self._seq += 1
        seq = self._seq
        self._send({**header, "seq": seq})
        what = f"a reply to {header['op']!r}"
        while True:
            try:
                reply = self._recv(timeout, what, check=False)
            except TimeoutError:
                self._late = seq
                raise
            if reply.get("seq", seq) == seq:  # (a server that echoes none: in order)
                self._late = None
                return _checked(reply)
            self._took_late(reply)

    def _settle(self, timeout: float | None) -> None:
        """Wait for the reply to the request that timed out (:attr:`_late`)."""
        late = self._late
        while self._late is not None:
            try:
                reply = self._recv(timeout, f"reply to the request that timed out (seq {late})",
                                   check=False)  # fmt: skip
            except TimeoutError as e:
                raise TimeoutError(f"{e}; nothing was sent") from None
            self._took_late(reply)
            if reply.get("seq", late) == late:
                self._late = None

    def _took_late(self, reply: dict[str, Any]) -> None:
        """A reply to an earlier request: an ``obs`` is the World after that step."""
        now = getattr(self, "obs", None)  # (none before the welcome)
        if reply["op"] == "obs" and (now is None or reply.get("tick", -1) >= now.get("tick", -1)):
            self.obs = reply

    def _send(self, header: dict[str, Any]) -> None:
        frames = P.encode(header)
        P.check_size(frames, self.send_limit, f"{header['op']!r} (not sent)")
        self.sock.send_multipart(frames, copy=False)

    def _recv(
        self, timeout: float | None, what: str = "an observation", check: bool = True
    ) -> dict[str, Any]:
        wait = timeout or self.timeout
        if not self.sock.poll(int(1000 * wait)):
            raise TimeoutError(f"volary serve: no {what} in {wait} s")
        reply = P.decode(self.sock.recv_multipart(), self.max_bytes)
        return _checked(reply) if check else reply


def _checked(reply: dict[str, Any]) -> dict[str, Any]:
    """``reply``, or :class:`ServerError` when it is an ``error``."""
    if reply["op"] == "error":
        raise ServerError(str(reply.get("code")), str(reply.get("message")))
    return reply


def _stamped(obs: dict[str, Any]) -> dict[str, Any]:
    """The observation's sensor readings, each with the observation's tick."""
    return {k: {**v, "tick": obs.get("tick")} for k, v in obs.get("sensors", {}).items()}


def _vec(v: Any, n: int, name: str) -> np.ndarray:
    """``v`` as the float64 vector the protocol takes: ``n`` numbers, finite, within
    ``protocol.MAX_ABS`` (else ValueError, as the server would refuse it)."""
    a = np.asarray(v, dtype=np.float64)
    if a.shape != (n,):
        raise ValueError(f"{name}: expected {n} numbers, shape ({n},), got shape {a.shape}")
    try:
        return P.numbers(a, name)
    except P.ProtocolError as e:
        raise ValueError(str(e)) from None


def host_planner(
    planner: Any,
    bind: str = "tcp://127.0.0.1:5600",
    *,
    token: str | None = None,
    stop: Any = None,
) -> None:
    """Serve a navigation planner to ``volary bench run --algo remote:ADDRESS`` from this
    process until ``stop()`` is true (or forever): ``planner`` is a class or callable returning
    a new ``NavPlanner`` per trial, a planner name (the slate's ``"ego"``, ``"mapper"`` ... or
    any name installed under the entry-point group ``volary.planners``) or ``"module:Class"``
    (:mod:`volary.serve.planners`, ``docs/remote-planner.md``)."""
    from volary.serve.planners import host_planner as serve

    serve(planner, bind, token=token, stop=stop)
