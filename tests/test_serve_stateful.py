"""``volary serve`` against any sequence of requests (issue 55): a Hypothesis state machine
mixes a well-behaved client's hello / step / ping ("obs") / bye-and-hello ("reset") / bye with
faulty messages: random msgpack values, headers of random fields, commands of wrong types,
lengths, shapes and ranges, oversized messages, unknown and out-of-order ops, clients that die
without ``bye``. Invariants: every request gets its reply or a documented refusal (an ``error``
with a code of docs/protocol.md, or no reply for a frame over ZeroMQ's cap), the server never
dies, and the well-behaved client's flight is a reference flight bit for bit."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest

zmq = pytest.importorskip("zmq")
pytest.importorskip("hypothesis")

from hypothesis import settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import (  # noqa: E402
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from test_serve import _ctbr, _raw, serving  # noqa: E402
from test_serve_faults import _same  # noqa: E402
from volary.client import Client  # noqa: E402
from volary.serve import protocol as P  # noqa: E402
from volary.serve.world import ServeConfig, SlotSpec  # noqa: E402

CONFIG = ServeConfig(slots=(SlotSpec(), SlotSpec()), scene=None)  # the pilot flies slot 0
LIMIT = 64 * 1024  # the server's max_bytes (small: oversized messages stay cheap)
TIMEOUT = 0.2  # s: the server's input_timeout (a dead client holds the others up this long)
FLIGHT = 24  # steps of the reference flight
DOC = Path(__file__).resolve().parents[1] / "docs" / "protocol.md"
CODES = frozenset({"bad_message", "bad_version", "bad_field", "bad_op", "too_large",
                   "unauthorized", "not_joined", "no_slot", "slot_taken", "dropped"})  # fmt: skip
REPLIES = {"hello": "welcome", "ping": "pong", "bye": "bye", "step": "obs"}

_leaf = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats()
    | st.text(max_size=6) | st.binary(max_size=6)
)  # fmt: skip
VALUES = st.recursive(
    _leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = st.dictionaries(
    st.sampled_from(["role", "slot", "token", "tick", "command", "pos", "quat", "seq", "x"]),
    VALUES,
    max_size=4,
)
_number = st.floats(-1e6, 1e6) | st.integers(-(10**6), 10**6)
BAD_COMMANDS = st.one_of(  # never 4 finite numbers within 1e6: each is refused, whatever else
    st.lists(_number, max_size=8).filter(lambda v: len(v) != 4),  # wrong length
    st.tuples(st.lists(_number, min_size=3, max_size=3), st.integers(0, 3),
              st.none() | st.booleans() | st.text(max_size=3) | st.lists(_number, max_size=2)
              | st.dictionaries(st.text(max_size=2), _number, max_size=2))
    .map(lambda t: t[0][: t[1]] + [t[2]] + t[0][t[1]:]),  # a non-number among numbers
    st.tuples(st.lists(_number, min_size=3, max_size=3), st.integers(0, 3),
              st.sampled_from([1e39, -1e7, float("nan"), float("inf"), 2**64 - 1, -(2**63)]))
    .map(lambda t: t[0][: t[1]] + [t[2]] + t[0][t[1]:]),  # out of range or not finite
    st.sampled_from([np.eye(2), np.ones(3), np.ones(5), np.ones((4, 1)), np.ones(4, bool),
                     np.zeros(0), np.array([0.3, 0, 0, 1e39])]),  # wrong shape, dtype, range
    VALUES.filter(lambda v: not isinstance(v, list)),  # not a vector at all
)  # fmt: skip


class ServeMachine(RuleBasedStateMachine):
    """One shared server (:attr:`srv`), a pilot (a ``volary.client.Client`` on slot 0, or
    None) and vandals (raw DEALER sockets, slot 1 at most)."""

    srv: Any = None
    reference: list[dict] = []

    def __init__(self) -> None:
        super().__init__()
        self.pilot: Client | None = None
        self.flown: list[dict] = []  # the pilot's observations since its hello
        self.vandal = _raw(self.srv.address)

    def teardown(self) -> None:
        if self.pilot is not None:
            self.pilot.close()
        self.vandal.close(0)

    # ---- the well-behaved client ------------------------------------------------------------
    @precondition(lambda self: self.pilot is None)
    @rule()
    def hello(self) -> None:
        self.pilot = Client(self.srv.address, slot=0, timeout=10)
        self.flown = [self.pilot.obs]
        self._check_flight()

    @precondition(lambda self: self.pilot is not None and len(self.flown) <= FLIGHT)
    @rule()
    def step(self) -> None:
        assert self.pilot is not None
        self.flown.append(self.pilot.step(_ctbr(len(self.flown) - 1)))
        self._check_flight()

    @precondition(lambda self: self.pilot is not None)
    @rule()
    def obs(self) -> None:
        """A ping on the pilot's connection: the World is where the pilot's last obs said."""
        assert self.pilot is not None
        assert self._ask(self.pilot.sock, P.encode({"op": "ping"}), "pong")["tick"] == (
            self.pilot.tick
        )

    @precondition(lambda self: self.pilot is not None)
    @rule()
    def reset(self) -> None:
        """Leave and join again: the flight starts over, as the reference did."""
        self.bye()
        self.hello()

    @precondition(lambda self: self.pilot is not None)
    @rule()
    def bye(self) -> None:
        assert self.pilot is not None
        self.pilot.close()
        self.pilot = None

    # ---- faults on the pilot's own connection -----------------------------------------------
    @precondition(lambda self: self.pilot is not None)
    @rule(command=BAD_COMMANDS, stale=st.booleans())
    def bad_command(self, command: Any, stale: bool) -> None:
        """A malformed command, or a valid one for a tick that is not the World's: refused,
        and never the pilot's input for the tick."""
        assert self.pilot is not None
        msg = {"op": "step", "tick": self.pilot.tick, "command": command}
        if stale:
            msg = {**msg, "tick": self.pilot.tick + 1, "command": [0.3, 0.0, 0.0, 0.0]}
        reply = self._ask(self.pilot.sock, P.encode(msg))
        assert reply["code"] in ("bad_field", "bad_message"), reply

    @precondition(lambda self: self.pilot is not None)
    @rule()
    def second_hello(self) -> None:
        reply = self._ask(self.pilot.sock, P.encode({"op": "hello"}))  # type: ignore[union-attr]
        assert reply["code"] == "bad_op"

    # ---- faults from other connections ------------------------------------------------------
    @rule(value=VALUES.filter(lambda v: not (isinstance(v, dict) and "op" in v)))
    def random_value(self, value: Any) -> None:
        """Any msgpack value as a message's header."""
        self._ask(self.vandal, [msgpack.packb(value)])

    @rule(
        op=st.sampled_from(["hello", "step", "bye", "ping", "obs", ""]) | st.text(max_size=6),
        fields=FIELDS,
        arrays=st.lists(st.sampled_from([np.ones(4), np.eye(2), np.zeros(3, "<i4")]), max_size=2),
    )  # fmt: skip
    def random_header(self, op: str, fields: dict, arrays: list) -> None:
        """A version-1 header of any op with random fields (arrays too): a hello among them
        asks for slot 1, and leaves again if it is welcomed."""
        header = {**fields, "op": op, **{f"a{i}": a for i, a in enumerate(arrays)}}
        if op == "hello":
            header["slot"] = 1
        self._ask(self.vandal, P.encode(header))

    @rule(extra=st.integers(1, LIMIT - 16), frames=st.integers(1, 3))
    def oversized(self, extra: int, frames: int) -> None:
        """Over the limit, each frame within ZeroMQ's cap: read and answered ``too_large``."""
        size = LIMIT + extra
        data = [b"\0" * (size // frames + 1)] * frames
        reply = self._ask(self.vandal, [P.encode({"op": "ping"})[0], *data])
        assert reply["code"] == "too_large", reply

    @rule(size=st.integers(P.FRAME_CAP * LIMIT + 1, 4 * P.FRAME_CAP * LIMIT))
    def over_the_cap(self, size: int) -> None:
        """A frame over ZeroMQ's cap: the connection is closed, no reply (docs/protocol.md)."""
        sock = _raw(self.srv.address)
        sock.send_multipart([P.encode({"op": "ping"})[0], b"\0" * size])
        assert not sock.poll(50)
        sock.close(0)

    @rule()
    def dead_client(self) -> None:
        """A client that takes slot 1 and dies without ``bye``: dropped after the timeout
        (or refused ``slot_taken`` while the last one is not yet silent that long)."""
        sock = _raw(self.srv.address)
        reply = self._ask(sock, P.encode({"op": "hello", "slot": 1}), keep=True)
        assert reply["op"] == "welcome" or reply["code"] == "slot_taken", reply
        sock.close(0)

    # ---- invariants -------------------------------------------------------------------------
    @invariant()
    def server_alive(self) -> None:
        """The server answers a ping after whatever came before."""
        self._ask(self.vandal, P.encode({"op": "ping"}), "pong")
        assert len(self.srv.peers) <= 2

    def _check_flight(self) -> None:
        _same(self.flown, self.reference[: len(self.flown)])

    def _ask(self, sock: Any, frames: list, want: str | None = None, keep: bool = False) -> dict:
        """Send ``frames``; the one reply (an error with a documented code, or the op's own
        reply). A vandal's welcome is answered with ``bye`` unless ``keep``."""
        sock.send_multipart(frames)
        assert sock.poll(10_000), "no reply"
        reply = P.decode(sock.recv_multipart())
        assert not sock.poll(0), "a second reply"
        if reply["op"] == "error":
            assert reply["code"] in CODES, reply
            assert isinstance(reply["message"], str) and "\n" not in reply["message"]
        else:
            assert reply["op"] in REPLIES.values(), reply
        if want is not None:
            assert reply["op"] == want, reply
        if reply["op"] == "welcome" and not keep:
            assert reply["slot"] == 1, reply  # never the pilot's slot
            sock.send_multipart(P.encode({"op": "bye"}))
            assert sock.poll(10_000) and P.decode(sock.recv_multipart())["op"] == "bye"
        return reply


def _run(examples: int, steps: int) -> None:
    with serving(CONFIG, max_bytes=LIMIT, input_timeout=TIMEOUT) as srv:
        with Client(srv.address, slot=0, timeout=10) as c:
            reference = [c.obs, *[c.step(_ctbr(k)) for k in range(FLIGHT)]]
        ServeMachine.srv, ServeMachine.reference = srv, reference
        try:
            run_state_machine_as_test(
                ServeMachine,
                settings=settings(max_examples=examples, stateful_step_count=steps),
            )
        finally:
            ServeMachine.srv = None
        assert any(f["code"] == "timeout" for f in srv.faults)  # a dead client was dropped


def test_the_documented_error_codes_are_those_checked():
    section = DOC.read_text().split("`error`: `code`, `message`. Codes:", 1)[1].split("##")[0]
    assert set(re.findall(r"`([a-z_]+)` \(|`([a-z_]+)`[,.]", section)) and all(
        f"`{code}`" in section for code in CODES
    )


def test_any_sequence_of_requests_is_served_or_refused_and_the_pilot_flies_on():
    _run(examples=8, steps=20)


@pytest.mark.slow
def test_a_longer_sequence_of_requests():
    _run(examples=150, steps=50)
