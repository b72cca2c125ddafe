"""The wire format of ``volary serve``: msgpack maps in ZeroMQ multipart messages (version 1).

A message is one ZeroMQ multipart message: frame 0 is a msgpack map (the *header*), frames 1..K
are raw array buffers. An array inside the header is a map ``{"__array__": i, "dtype": "<f4",
"shape": [64, 64]}`` naming its frame, so a depth image travels as its bytes, never re-encoded.
Every header carries ``"v"`` (:data:`VERSION`) and ``"op"``. ``docs/protocol.md`` lists every
operation and field; this module encodes, decodes and checks, and imports neither torch nor the
rest of volary, so a client needs only numpy, pyzmq and msgpack.

Decoding is strict, because a server decodes what anyone sends it: the header must be a map of
plain msgpack types (no extension types, the timestamp included; nothing that could construct
an object: nothing is ever unpickled), arrays must name an existing frame, have a dtype from
:data:`DTYPES` and a shape whose size matches the frame's bytes, and the whole message must fit
``max_bytes``. A vector a client sends (:func:`as_vector`) is exactly its declared shape,
numbers only, finite and within :data:`MAX_ABS`. A violation raises :class:`ProtocolError` with
a code and a message naming the field; the server answers it with an ``error`` message and
carries on. The server's declared schema of each op (which fields, of which types) is in
:mod:`volary.serve.server`, so a client needs no schema library.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import msgpack
import numpy as np

VERSION = 1
MAX_BYTES = 16 * 1024 * 1024  # default per-message limit (a 1080p float32 depth frame is 8 MB)
# ZeroMQ refuses a frame larger than FRAME_CAP x the limit before reading it (ZMQ_MAXMSGSIZE: the
# connection is closed, nothing is allocated); a message within it but over the limit is read and
# answered ``too_large``, so a client that overshoots a little learns why.
FRAME_CAP = 2
# The largest magnitude of a number in a vector a client sends, in the field's SI unit (m for a
# position, m/s, rad/s, N, ...): 1,000 km for a position, far inside float32 (3.4e38, the
# World's dtype), so nothing sent becomes inf in the World.
MAX_ABS = 1e6
OPS = ("hello", "step", "ping", "bye")  # what a client may send to ``volary serve``
DTYPES = frozenset({"|b1", "|u1", "|i1", "<u2", "<i2", "<i4", "<i8", "<f2", "<f4", "<f8"})
_ARRAY = "__array__"
MAX_DEPTH = 8  # nesting of maps and lists in a header


class ProtocolError(Exception):
    """A message that does not follow the protocol; ``code`` is what the error reply carries
    (``bad_message``, ``too_large``, ``bad_version``, ``bad_field``, ``unauthorized``, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


# ---- encoding ------------------------------------------------------------------------------------
def encode(header: Mapping[str, Any]) -> list[bytes | memoryview]:
    """``header`` (a map that may hold numpy arrays at any depth) as multipart frames; the
    version is added. Arrays go out as their own frames, little-endian and contiguous."""
    frames: list[bytes | memoryview] = [b""]
    body = _lift(dict(header, v=VERSION), frames, 0)
    frames[0] = msgpack.packb(body, use_bin_type=True)
    return frames


_LEAF = (str, int, float, bool, type(None), bytes)  # plain values: sent and decoded as they are


def _lift(obj: Any, frames: list, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise ProtocolError("bad_message", f"header: nested deeper than {MAX_DEPTH}")
    if type(obj) in _LEAF:  # most of a header: returned first, as it is
        return obj
    if isinstance(obj, np.ndarray):
        a = obj  # sent as it is when little-endian (or byte-sized), contiguous, at least 1-D
        if obj.dtype.byteorder == ">" or not obj.flags.c_contiguous or obj.ndim == 0:
            a = np.ascontiguousarray(obj, dtype=obj.dtype.newbyteorder("<"))
        if a.dtype.str not in DTYPES:
            raise ProtocolError(
                "bad_field", f"array dtype {a.dtype.str} is not one of {sorted(DTYPES)}"
            )
        frames.append(memoryview(a.data).cast("B") if a.size else b"")
        return {_ARRAY: len(frames) - 1, "dtype": a.dtype.str, "shape": list(a.shape)}
    if isinstance(obj, Mapping):
        return {str(k): _lift(v, frames, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_lift(v, frames, depth + 1) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


# ---- decoding ------------------------------------------------------------------------------------
def decode(frames: Sequence[bytes], max_bytes: int = MAX_BYTES) -> dict[str, Any]:
    """Frames -> the header with its arrays in place (read-only numpy views of the frames).
    Raises :class:`ProtocolError` for anything that is not a version-1 message within
    ``max_bytes``."""
    if not frames:
        raise ProtocolError("bad_message", "message: no frames")
    check_size(frames, max_bytes)
    try:
        header = msgpack.unpackb(frames[0], raw=False, strict_map_key=True, ext_hook=_no_ext)
    except ProtocolError:
        raise
    except Exception as e:  # msgpack raises several types on garbage
        raise ProtocolError("bad_message", f"header: not msgpack ({type(e).__name__})") from None
    if not isinstance(header, dict):
        raise ProtocolError("bad_message", f"header: expected a map, got {type(header).__name__}")
    if header.get("v") != VERSION:
        raise ProtocolError("bad_version", f"v: expected {VERSION}, got {header.get('v')!r}")
    if not isinstance(header.get("op"), str):
        raise ProtocolError("bad_message", "op: expected a string")
    used: set[int] = set()
    out = _lower(header, frames, used, 0, "")
    return out


def check_size(frames: Sequence[Any], max_bytes: int, what: str = "message") -> None:
    """:class:`ProtocolError` ``too_large`` when ``frames`` hold more than ``max_bytes``."""
    size = sum(memoryview(f).nbytes for f in frames)
    if size > max_bytes:
        raise ProtocolError("too_large", f"{what}: {size} bytes, the limit is {max_bytes}")


def _no_ext(code: int, data: bytes) -> Any:
    raise ProtocolError("bad_message", f"header: extension type {code} is not allowed")


def _lower(obj: Any, frames: Sequence[bytes], used: set[int], depth: int, path: str) -> Any:
    if depth > MAX_DEPTH:
        raise ProtocolError("bad_message", f"header: nested deeper than {MAX_DEPTH}")
    if isinstance(obj, dict):
        if _ARRAY in obj:
            return _array(obj, frames, used, path)
        leaf = _LEAF if depth < MAX_DEPTH else ()  # a leaf one level deeper is still checked
        return {k: v if type(v) in leaf else _lower(v, frames, used, depth + 1,
                                                  f"{path}.{k}" if path else k)
                for k, v in obj.items()}  # fmt: skip
    if isinstance(obj, list):
        leaf = _LEAF if depth < MAX_DEPTH else ()
        return [v if type(v) in leaf else _lower(v, frames, used, depth + 1, f"{path}[{i}]")
                for i, v in enumerate(obj)]  # fmt: skip
    if type(obj) not in _LEAF:  # a msgpack Timestamp: the one extension ext_hook never sees
        raise ProtocolError(
            "bad_message", f"{path or 'header'}: {type(obj).__name__} is not a plain msgpack value"
        )
    return obj


def _array(spec: dict, frames: Sequence[bytes], used: set[int], path: str) -> np.ndarray:
    i, dtype, shape = spec.get(_ARRAY), spec.get("dtype"), spec.get("shape")
    if not isinstance(i, int) or not 1 <= i < len(frames) or i in used:
        raise ProtocolError("bad_field", f"{path}: frame index {i!r} is not a fresh data frame")
    if dtype not in DTYPES:
        raise ProtocolError("bad_field", f"{path}: dtype {dtype!r} is not one of {sorted(DTYPES)}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise ProtocolError("bad_field", f"{path}: shape {shape!r} is not a list of sizes")
    dt = np.dtype(dtype)
    if math.prod(shape) * dt.itemsize != len(frames[i]):
        raise ProtocolError(
            "bad_field", f"{path}: shape {shape} of {dtype} does not match {len(frames[i])} bytes"
        )
    used.add(i)
    return np.frombuffer(frames[i], dtype=dt).reshape(shape)


# ---- field checks used by both ends ---------------------------------------------------------
def field(
    msg: Mapping[str, Any], name: str, kind: type | tuple[type, ...], default: Any = ...
) -> Any:
    """``msg[name]`` checked to be of ``kind``; ``default`` when absent (if given)."""
    if name not in msg:
        if default is ...:
            raise ProtocolError("bad_field", f"{name}: missing from {msg.get('op')!r}")
        return default
    v = msg[name]
    if isinstance(v, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise ProtocolError("bad_field", f"{name}: expected {_names(kind)}, got bool")
    if not isinstance(v, kind):
        raise ProtocolError("bad_field", f"{name}: expected {_names(kind)}, got {type(v).__name__}")
    return v


def vector(msg: Mapping[str, Any], name: str, size: int, default: Any = ...) -> np.ndarray | None:
    """``msg[name]`` checked by :func:`as_vector`; ``default`` when absent (if given)."""
    v = field(msg, name, (list, np.ndarray), default)
    return None if v is None else as_vector(v, size, name)


def as_vector(v: Any, size: int, name: str, *, bounded: bool = True) -> np.ndarray:
    """``v`` as a float64 vector of ``size``: a msgpack list of exactly ``size`` numbers (int or
    float; not bool, str, a list or a timestamp) or an array of shape ``(size,)`` with an int or
    float dtype; every value finite with ``|x| <= MAX_ABS`` (``bounded=False``: left to the
    caller, whose own ranges are narrower). Else :class:`ProtocolError` ``bad_field`` naming
    ``name`` (and the element)."""
    if isinstance(v, np.ndarray):
        if v.shape != (size,) or v.dtype.kind not in "iuf":
            raise ProtocolError(
                "bad_field",
                f"{name}: expected an array of {size} numbers, shape ({size},), got shape "
                f"{tuple(v.shape)} of {v.dtype.str}",
            )
        return numbers(v, name) if bounded else np.array(v, dtype=np.float64)
    if not isinstance(v, list):
        raise ProtocolError(
            "bad_field", f"{name}: expected list or ndarray, got {type(v).__name__}"
        )
    if len(v) != size:
        raise ProtocolError("bad_field", f"{name}: expected {size} numbers, got {len(v)} items")
    for i, x in enumerate(v):
        if type(x) not in (int, float):
            raise ProtocolError(
                "bad_field", f"{name}[{i}]: expected a number, got {type(x).__name__}"
            )
    out = np.array(v, dtype=np.float64)  # msgpack ints fit float64
    return numbers(out, name) if bounded else out


def numbers(a: np.ndarray, name: str) -> np.ndarray:
    """``a`` as a float64 copy, each value finite and within :data:`MAX_ABS`; else
    :class:`ProtocolError` naming ``name`` and the first value that is not."""
    out = np.array(a, dtype=np.float64)
    bad = ~(np.abs(out) <= MAX_ABS)  # NaN is not <= anything
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ProtocolError(
            "bad_field",
            f"{name}[{i}]: expected a finite number with |x| <= {MAX_ABS:g} (in the field's SI "
            f"unit), got {float(out.flat[i])!r}",
        )
    return out


def _names(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def error(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """An ``error`` reply header."""
    return {"op": "error", "code": code, "message": message, **extra}


def check_bind(bind: str, token: str | None) -> None:
    """A ZeroMQ endpoint to bind: loopback (127.0.0.1, ::1, localhost, ipc://, inproc://), or
    any other with a ``token`` of at least 8 characters; else :class:`ConfigError`."""
    from volary.errors import ConfigError

    if not isinstance(bind, str) or "://" not in bind:
        raise ConfigError(
            f"bind: expected a ZeroMQ endpoint like 'tcp://127.0.0.1:5555', got {bind!r}"
        )
    if token is not None and not (isinstance(token, str) and len(token) >= 8):
        raise ConfigError("token: expected a string of at least 8 characters")
    scheme = bind.split("://", 1)[0]
    if scheme in ("ipc", "inproc"):
        return
    host = urlsplit(bind).hostname or ""
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and token is None:
        raise ConfigError(
            f"bind: {bind!r} is reachable from other machines; give a token (--token) to bind it"
        )
