"""Navigation planners in another process: the benchmark's :class:`RemotePlanner` and the
:class:`PlannerHost` that serves any ``NavPlanner`` to it.

The benchmark (``volary bench run --algo remote:ADDRESS``, or ``--remote NAME=ADDRESS`` to fly
planner NAME's rows and seeds from another process) builds one :class:`RemotePlanner` per trial.
It is a ``NavPlanner`` whose ``reset`` and ``plan`` are requests to a host at ADDRESS, where
:func:`host_planner` (or ``volary host-planner ALGO``) runs the real planner, one instance per
trial. The messages are those of ``volary serve`` (msgpack headers, arrays as raw frames;
``docs/protocol.md``, operations ``planner_reset``, ``plan``, ``planner_close``), so a stack in
any language can host a planner.

Faults stay on the benchmark's side of the wire as exceptions of the planner call, which the
episode records as the trial's failure (cause ``error``) before going on: a host that answers
with an ``error`` (its planner raised) -> :class:`RemotePlannerError`; one that does not answer
within ``timeout`` (dead, hung, never started) -> :class:`TimeoutError`; garbage ->
:class:`~volary.serve.protocol.ProtocolError`. Replies carry the request's sequence number, so
a late answer to a timed-out request is never taken for the next one's.
"""

from __future__ import annotations

import dataclasses
import hmac
import time
import traceback
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from volary.errors import ConfigError
from volary.planning.navigation import SENSORS
from volary.serve import protocol as P

DEFAULT_ADDRESS = "tcp://127.0.0.1:5600"
MAX_TRIALS = 4096  # planner instances a host keeps (least recently used beyond it are dropped)


class RemotePlannerError(Exception):
    """The planner host answered with an ``error``; ``code`` is its code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


# ---- NavTask / NavObservation / NavReference <-> message maps ---------------------------------
_OPTIONAL = ("rgb",)  # fields left out of the wire when None (hosts older than them refuse them)


def task_to_wire(task: Any) -> dict[str, Any]:
    """A ``NavTask`` as a header map (nested dataclasses as maps, arrays as arrays)."""
    out = {f.name: _plain(getattr(task, f.name)) for f in dataclasses.fields(task)}
    return {k: v for k, v in out.items() if not (k in _OPTIONAL and v is None)}


def _plain(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    return v


def task_from_wire(msg: Mapping[str, Any]) -> Any:
    """The ``NavTask`` of a ``planner_reset`` message; a missing or mistyped field raises
    :class:`~volary.serve.protocol.ProtocolError` naming it."""
    from volary.planning.navigation import (
        DepthCameraInfo,
        LidarInfo,
        NavLimits,
        NavTask,
        RgbCameraInfo,
    )

    t = P.field(msg, "task", dict)
    try:
        limits = NavLimits(**P.field(t, "limits", dict))
        depth = P.field(t, "depth", (dict, type(None)), None)
        lidar = P.field(t, "lidar", (dict, type(None)), None)
        rgb = P.field(t, "rgb", (dict, type(None)), None)
        sensors = ("limits", "depth", "lidar", "rgb")
        fields = {k: _array_copy(v) for k, v in t.items() if k not in sensors}
        return NavTask(
            **fields,
            limits=limits,
            depth=None if depth is None else DepthCameraInfo(**_copies(depth)),
            lidar=None if lidar is None else LidarInfo(**_copies(lidar)),
            rgb=None if rgb is None else RgbCameraInfo(**_copies(rgb)),
        )
    except TypeError as e:
        raise P.ProtocolError("bad_field", f"task: {e}") from None


def obs_to_wire(obs: Any) -> dict[str, Any]:
    out = {f.name: getattr(obs, f.name) for f in dataclasses.fields(obs)}
    return {k: v for k, v in out.items() if not (k in _OPTIONAL and v is None)}


def obs_from_wire(msg: Mapping[str, Any]) -> Any:
    from volary.planning.navigation import NavObservation

    o = P.field(msg, "obs", dict)
    try:
        return NavObservation(**_copies(o))
    except TypeError as e:
        raise P.ProtocolError("bad_field", f"obs: {e}") from None


_REF_FIELDS = ("times", "positions", "velocities", "accelerations", "yaws")


def ref_to_wire(ref: Any) -> dict[str, Any] | None:
    if ref is None:
        return None
    out: dict[str, Any] = {"t0": float(ref.t0)}
    for k in _REF_FIELDS:
        out[k] = np.asarray(getattr(ref, k), dtype=np.float64)
    return out


def ref_from_wire(msg: Mapping[str, Any]) -> Any:
    """The reply's ``NavReference`` (or None); shapes and finiteness are checked by the episode
    as for any planner."""
    from volary.planning.navigation import NavReference

    r = P.field(msg, "reference", (dict, type(None)))
    if r is None:
        return None
    try:
        t0 = P.field(r, "t0", (float, int))
        arrays = {k: _float_array(P.field(r, k, np.ndarray), k) for k in _REF_FIELDS}
        return NavReference(t0=float(t0), **arrays)
    except TypeError as e:
        raise P.ProtocolError("bad_field", f"reference: {e}") from None


def _float_array(a: np.ndarray, name: str) -> np.ndarray:
    if a.dtype.kind != "f":
        raise P.ProtocolError("bad_field", f"reference.{name}: expected floats, got {a.dtype}")
    return np.array(a, dtype=np.float64)


def _array_copy(v: Any) -> Any:
    return np.array(v) if isinstance(v, np.ndarray) else v  # frames are read-only views


def _copies(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _array_copy(v) for k, v in d.items()}


# ---- the benchmark's side ---------------------------------------------------------------------
class RemotePlanner:
    """A ``NavPlanner`` whose calls go to a :class:`PlannerHost` at ``address`` (module
    docstring). ``timeout``: seconds to wait for each answer; ``token``: the host's token when
    it has one (default: the environment variable ``VOLARY_PLANNER_TOKEN``); ``options``:
    keyword options for the host's planner."""

    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        *,
        timeout: float = 10.0,
        token: str | None = None,
        max_bytes: int = P.MAX_BYTES,
        **options: Any,
    ) -> None:
        import os

        import zmq

        if token is None:  # never in algo_options: those are stored in the run database
            token = os.environ.get("VOLARY_PLANNER_TOKEN")
        if not isinstance(address, str) or "://" not in address:
            raise ValueError(f"address: expected a ZeroMQ endpoint like {DEFAULT_ADDRESS!r}")
        if not (isinstance(timeout, int | float) and timeout > 0):
            raise ValueError(f"timeout: expected seconds > 0, got {timeout!r}")
        self.address, self.timeout, self.token = address, float(timeout), token
        self.max_bytes, self.options = max_bytes, options
        self.name = f"remote:{address}"
        self.needs: frozenset[str] = frozenset()
        self.trial = uuid.uuid4().hex
        self._zmq, self._seq = zmq, 0
        self._sock: Any = None

    def reset(self, task: Any) -> None:
        reply = self._call(
            {"op": "planner_reset", "task": task_to_wire(task), "options": self.options},
            "planner_ready",
        )
        name = P.field(reply, "name", str)
        needs = P.field(reply, "needs", list)
        if not all(isinstance(n, str) for n in needs) or not set(needs) <= SENSORS:
            want = f"needs: expected some of {sorted(SENSORS)}, got {needs}"
            raise P.ProtocolError("bad_field", want)
        self.name, self.needs = name, frozenset(needs)

    def plan(self, obs: Any) -> Any:
        return ref_from_wire(self._call({"op": "plan", "obs": obs_to_wire(obs)}, "reference"))

    def close(self) -> None:
        """Tell the host to drop this trial's planner (no answer awaited) and close the socket."""
        if self._sock is not None:
            try:
                msg = {"op": "planner_close", "trial": self.trial, "token": self.token}
                self._sock.send_multipart(P.encode(msg), flags=self._zmq.NOBLOCK)
            except self._zmq.ZMQError:
                pass
            self._sock.close(linger=100)
            self._sock = None

    def __del__(self) -> None:  # the episode drops its planners without a close
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def _socket(self) -> Any:
        if self._sock is None:
            zmq = self._zmq
            self._sock = zmq.Context.instance().socket(zmq.DEALER)
            self._sock.setsockopt(zmq.LINGER, 0)
            self._sock.connect(self.address)
        return self._sock

    def _call(self, header: dict[str, Any], want: str) -> dict[str, Any]:
        """Send a request and wait for its answer (``want``), at most ``timeout`` s."""
        zmq = self._zmq
        self._seq += 1
        sock = self._socket()
        sock.send_multipart(P.encode({**header, "trial": self.trial, "seq": self._seq,
                                      "token": self.token}))  # fmt: skip
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not sock.poll(int(left * 1000) + 1, zmq.POLLIN):
                self._sock.close(linger=0)  # a late answer must not meet the next request
                self._sock = None
                raise TimeoutError(
                    f"planner host {self.address}: no answer to {header['op']!r} in "
                    f"{self.timeout:g} s (is it running?)"
                )
            msg = P.decode(sock.recv_multipart(), self.max_bytes)
            if msg.get("seq") != self._seq:
                continue  # an answer to an earlier request
            if msg["op"] == "error":
                raise RemotePlannerError(str(msg.get("code", "error")), str(msg.get("message", "")))
            if msg["op"] != want:
                raise P.ProtocolError("bad_message", f"op: expected {want!r}, got {msg['op']!r}")
            return msg


# ---- the planner's side ---------------------------------------------------------------------
class PlannerHost:
    """Serves ``factory(**options)`` planners to :class:`RemotePlanner` s: one instance per
    trial, built at ``planner_reset``. ``bind``: loopback unless a ``token`` (>= 8 characters)
    is given, which every request must carry. Planner exceptions become ``error`` answers (the
    trial fails, the host carries on), as do malformed requests."""

    def __init__(
        self,
        factory: Callable[..., Any],
        bind: str = DEFAULT_ADDRESS,
        *,
        token: str | None = None,
        max_bytes: int = P.MAX_BYTES,
    ) -> None:
        import zmq

        P.check_bind(bind, token)
        self.factory, self.token, self.max_bytes = factory, token, max_bytes
        self.planners: OrderedDict[str, Any] = OrderedDict()
        self.requests = self.faults = 0
        self._zmq = zmq
        self.sock: Any = zmq.Context.instance().socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.MAXMSGSIZE, max_bytes + 4096)
        self.sock.bind(bind)
        self.address: str = self.sock.getsockopt_string(zmq.LAST_ENDPOINT)

    def serve(self, stop: Callable[[], bool] | None = None) -> None:
        """Answer requests until ``stop()`` is true (checked every 100 ms) or forever."""
        while stop is None or not stop():
            if self.sock.poll(100, self._zmq.POLLIN):
                self.handle(self.sock.recv_multipart())

    def handle(self, frames: list[bytes]) -> None:
        ident, body = frames[0], frames[1:]
        self.requests += 1
        seq = None
        try:
            msg = P.decode(body, self.max_bytes)
            seq = msg.get("seq")
            self._authorize(msg)
            reply = self._dispatch(msg)
        except P.ProtocolError as e:
            self.faults += 1
            reply = P.error(e.code, str(e))
        except Exception as e:  # noqa: BLE001 - the planner raised: that trial fails
            self.faults += 1
            tb = traceback.format_exc(limit=8)
            reply = P.error("planner_error", f"{type(e).__name__}: {e}\n{tb}"[-4000:])
        if reply is not None:
            if isinstance(seq, int) and not isinstance(seq, bool):
                reply["seq"] = seq
            self.sock.send_multipart([ident, *P.encode(reply)])

    def _authorize(self, msg: dict[str, Any]) -> None:
        if self.token is None:
            return
        token = msg.get("token")
        if not (
            isinstance(token, str) and hmac.compare_digest(token.encode(), self.token.encode())
        ):
            raise P.ProtocolError("unauthorized", "token: missing or wrong")

    def _dispatch(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        op, trial = msg["op"], P.field(msg, "trial", str)
        if op == "planner_reset":
            task = task_from_wire(msg)
            options = P.field(msg, "options", dict, {})
            planner = self.factory(**options)
            planner.reset(task)
            self.planners[trial] = planner
            while len(self.planners) > MAX_TRIALS:
                self.planners.popitem(last=False)
            needs = sorted(str(n) for n in getattr(planner, "needs", ()))
            return {"op": "planner_ready", "name": str(getattr(planner, "name", "")),
                    "needs": needs}  # fmt: skip
        if op == "plan":
            planner = self.planners.get(trial)
            if planner is None:
                raise P.ProtocolError("bad_field", f"trial {trial!r}: no planner_reset yet")
            self.planners.move_to_end(trial)
            return {"op": "reference", "reference": ref_to_wire(planner.plan(obs_from_wire(msg)))}
        if op == "planner_close":
            self.planners.pop(trial, None)
            return None
        raise P.ProtocolError("bad_message", f"op: {op!r} is not a planner host operation")

    def close(self) -> None:
        self.sock.close(linger=0)


PLANNER_ENTRY_POINTS = "volary.planners"  # NavPlanner classes by name, volary's slate included


def planner_factory(planner: str | Callable[..., Any]) -> Callable[..., Any]:
    """What builds one planner per trial from the benchmark's ``algo_options``: ``planner``
    itself when it is callable, else the class that the name (installed under the entry-point
    group ``volary.planners``: the FLYINGTRUST slate's ``straight`` ... ``learned_rgb``, declared
    in volary's own ``pyproject.toml``, and any other package's) or ``"module:Class"`` names.
    An unknown name raises UnknownNameError listing the installed ones; options the class does
    not take raise ConfigError when a trial asks for a planner."""
    if not isinstance(planner, str):
        return planner
    from volary.registry import Registry

    name = planner.strip()
    cls = Registry("planner", group=PLANNER_ENTRY_POINTS, specs=True).get(name)

    def factory(**options: Any) -> Any:
        try:
            return cls(**options)
        except TypeError as exc:
            raise ConfigError(f"planner {name!r}: bad options {sorted(options)}: {exc}") from exc

    return factory


def host_planner(
    planner: str | Callable[..., Any],
    bind: str = DEFAULT_ADDRESS,
    *,
    token: str | None = None,
    stop: Callable[[], bool] | None = None,
) -> None:
    """Serve a navigation planner to the benchmark until ``stop()`` (or forever): ``planner`` is
    a planner name (``"ego"``, ``"mapper"`` ...: an entry point of ``volary.planners``),
    ``"module:Class"``, or a callable returning a new ``NavPlanner`` (given the benchmark's
    ``algo_options`` as keywords); :func:`planner_factory` resolves it before serving."""
    factory = planner_factory(planner)
    host = PlannerHost(factory, bind, token=token)
    try:
        host.serve(stop)
    finally:
        host.close()
