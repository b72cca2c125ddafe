"""The one validation layer at volary's boundaries (layer 0): declared limits, file reading,
and schema checks with pydantic v2.

Every quantity a user can hand volary from outside (a file, a CLI option, a wire message) is
checked here, once, before anything is allocated:

- :data:`LIMITS` declares each bounded quantity once, with its unit and range (a world
  coordinate, a simulated duration, a text file's size, an occupancy grid's cell count, ...);
  :func:`within` checks a number against one and names the argument in its error.
- :func:`read_text` and :func:`read_toml` read a user's text file: the path is a path (no NUL
  byte), the file a regular file (a FIFO or ``/dev/zero`` would block or never end), its size
  within the limit *before* it is read, its text UTF-8, its nesting bounded.
- :func:`validated` checks decoded data against a pydantic model (``strict``, unknown keys
  refused) and turns the first problem into one line naming the source and the field:
  ``course.toml: gates.Gate1.corners: expected 4 corners of 3 numbers, got 3``.

The pydantic types below (:data:`Finite`, :data:`Coordinate`, :data:`Vec3`, ...) are the
declared shapes the readers' models are written in. Why pydantic rather than hand-written checks:
one declaration per field gives the check, the error's location and the documentation at once,
and strict mode refuses the silent coercions (``"1"`` for 1, ``true`` for 1) a hand-written
check forgets. Imports only the standard library, pydantic and :mod:`volary.errors`.
"""

from __future__ import annotations

import math
import os
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError
from pydantic import Strict as _StrictType
from pydantic import TypeAdapter as _TypeAdapter

from volary.errors import ConfigError, FileFormatError, VolaryError

M = TypeVar("M")


# ----------------------------------------------------------------------------- limits
@dataclass(frozen=True)
class Limit:
    """One bounded quantity: what it is, its unit and its closed range."""

    quantity: str
    unit: str
    lo: float
    hi: float
    integer: bool = False

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a finite number"
        unit = "" if self.unit in ("", "1") else f" {self.unit}"
        return f"{kind} in [{self.lo:g}, {self.hi:g}]{unit} ({self.quantity})"


# World extent: volary's scenes, courses and goals live within 100 km of the origin (float32
# positions keep 1 cm there); the ranges below are what one request may ask of one process.
LIMITS: dict[str, Limit] = {
    "coordinate": Limit("world coordinate", "m", -1e5, 1e5),
    "duration": Limit("simulated duration", "s", 0.0, 86400.0),
    "yaw": Limit("yaw angle", "rad", -1e3, 1e3),
    "text_file": Limit("text file size", "B", 0, 64 * 2**20, integer=True),
    "nesting": Limit("nesting depth of a structured file", "1", 0, 32, integer=True),
    # ~7 bytes a node with its distance search: 2**28 nodes is about 2 GB
    "grid_cells": Limit("occupancy grid cells", "1", 1, 2**28, integer=True),
    "trajectory_samples": Limit("trajectory samples held at once", "1", 1, 2**24, integer=True),
    "gates": Limit("gates in a course", "1", 1, 10_000, integer=True),
    "scene_objects": Limit("obstacles a scene generator places", "1", 0, 2**14, integer=True),
    "lattice_cells": Limit("generated maze or noise lattice cells", "1", 1, 2**20, integer=True),
    "scene_vertices": Limit("vertices or points of a scene file", "1", 1, 2**24, integer=True),
    "scene_faces": Limit("triangles of a scene file", "1", 1, 2**24, integer=True),
    # a scene file read whole into memory (OBJ, STL, PCD, ASCII PLY; binary PLY is mapped)
    "scene_file": Limit("scene file size", "B", 0, 2**30, integer=True),
    "fc_vehicles": Limit("flight-controller firmware processes", "1", 1, 64, integer=True),
    "stick": Limit("RC stick deflection", "1", -1.0, 1.0),
    "throttle_stick": Limit("RC throttle stick", "1", 0.0, 1.0),
    "switch": Limit("RC switch (> 0.5: on)", "1", 0.0, 1.0),
    # a learning dataset or a recording is read whole: its arrays' declared bytes, before reading
    "array_bytes": Limit("bytes of the arrays read from a data file", "B", 0, 2**34, integer=True),
    # a benchmark suite's "generated:N" (forest and urban generate 10 N candidate scenes)
    "generated_configs": Limit("configurations per scenario type", "1", 1, 100, integer=True),
}


def within(value: Any, limit: str | Limit, arg: str) -> float:
    """``value`` as a number within the declared limit, or ConfigError naming ``arg``."""
    lim = LIMITS[limit] if isinstance(limit, str) else limit
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok and isinstance(value, float):  # an int is compared exactly: 10**400 is no OverflowError
        ok = math.isfinite(value) and (not lim.integer or value.is_integer())
    if not ok or not lim.lo <= value <= lim.hi:
        raise ConfigError(f"{arg}: expected {lim.describe()}, got {_short(value)}")
    return int(value) if lim.integer else float(value)


# ----------------------------------------------------------------------------- files
def _path(path: Any, what: str) -> Path:
    if not isinstance(path, str | os.PathLike):
        raise ConfigError(f"{what}: expected a file path, got {type(path).__name__}")
    text = os.fspath(path)
    if isinstance(text, bytes) or "\x00" in text:
        raise ConfigError(f"{what}: expected a file path, got {text!r}")
    if not text:
        raise ConfigError(f"{what}: expected a file path, got an empty string")
    return Path(text)


def regular_file(path: Any, what: str = "file", max_bytes: int | None = None) -> Path:
    """``path`` as a Path to a regular, readable file no larger than ``max_bytes``, else
    FileFormatError (or ConfigError when ``path`` is not a path at all)."""
    p = _path(path, what)
    try:
        st = p.stat()
    except OSError as e:
        raise FileFormatError(f"{p}: cannot read the {what} ({e.strerror or e})") from e
    if not stat.S_ISREG(st.st_mode):
        raise FileFormatError(f"{p}: cannot read the {what} (not a regular file)")
    if max_bytes is not None and st.st_size > max_bytes:
        raise FileFormatError(
            f"{p}: the {what} is {st.st_size} bytes; expected at most {max_bytes} bytes"
        )
    return p


def read_text(path: Any, what: str = "file", max_bytes: int | None = None) -> str:
    """The UTF-8 text of a user's file, checked as :func:`regular_file` says; a file that grows
    while it is read is cut at the limit and refused."""
    limit = int(LIMITS["text_file"].hi if max_bytes is None else max_bytes)
    p = regular_file(path, what, limit)
    try:
        with open(p, "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise FileFormatError(f"{p}: cannot read the {what} ({e.strerror or e})") from e
    if len(data) > limit:
        raise FileFormatError(f"{p}: the {what} is over {limit} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise FileFormatError(f"{p}: line {line}: the {what} is not UTF-8 text") from e
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise FileFormatError(f"{p}: line {line}: a NUL byte in the {what}")
    return text


def _depth(value: Any, limit: int, level: int = 0) -> int:
    if level > limit:
        return level
    if isinstance(value, Mapping):
        return max([_depth(v, limit, level + 1) for v in value.values()], default=level)
    if isinstance(value, list | tuple):
        return max([_depth(v, limit, level + 1) for v in value], default=level)
    return level


def parse_toml(text: str, source: str, what: str = "file") -> dict[str, Any]:
    """A TOML document, its nesting within ``LIMITS["nesting"]``, or FileFormatError."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise FileFormatError(f"{source}: the {what} is not valid TOML ({e})") from e
    except RecursionError as e:
        raise FileFormatError(f"{source}: the {what} is nested too deeply") from e
    limit = int(LIMITS["nesting"].hi)
    if _depth(doc, limit) > limit:
        raise FileFormatError(f"{source}: the {what} is nested deeper than {limit} levels")
    return doc


def read_toml(path: Any, what: str = "file", max_bytes: int | None = None) -> dict[str, Any]:
    """A user's TOML file, read by :func:`read_text` and parsed by :func:`parse_toml`."""
    return parse_toml(read_text(path, what, max_bytes), str(path), what)


# ----------------------------------------------------------------------------- schemas
class Strict(BaseModel):
    """Base of the readers' models: unknown keys refused, frozen. Scalars are written in the
    strict types below (no ``"1"`` for 1, no ``true`` for 1); sequences take a list or a tuple
    (TOML and msgpack give lists)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


Finite = Annotated[float, _StrictType(), Field(allow_inf_nan=False)]
Positive = Annotated[float, _StrictType(), Field(gt=0, allow_inf_nan=False)]
NonNegative = Annotated[float, _StrictType(), Field(ge=0, allow_inf_nan=False)]
Coordinate = Annotated[
    float,
    _StrictType(),
    Field(ge=LIMITS["coordinate"].lo, le=LIMITS["coordinate"].hi, allow_inf_nan=False),
]
Text = StrictStr
Integer = StrictInt
Flag = StrictBool
Vec3 = Annotated[tuple[Coordinate, Coordinate, Coordinate], Field()]
Quaternion = Annotated[tuple[Finite, Finite, Finite, Finite], Field()]


def _where(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def _short(value: Any, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


def explain(err: ValidationError) -> str:
    """The first problem of a pydantic error as ``field.path: message (got value)``."""
    first = err.errors(include_url=False)[0]
    got = "" if first["type"] == "missing" else f", got {_short(first.get('input'))}"
    msg = first["msg"]
    return f"{_where(first['loc'])}: {msg[:1].lower() + msg[1:]}{got}"


def validated(
    model: type[M] | Any,
    data: Any,
    source: str,
    error: type[VolaryError] = FileFormatError,
) -> M:
    """``data`` checked against ``model`` (a pydantic model or any type a TypeAdapter takes);
    the first problem raised as ``error`` in one line, ``source: field: problem``."""
    try:
        if isinstance(model, type) and issubclass(model, BaseModel):
            return model.model_validate(data)
        return _adapter(model).validate_python(data)
    except ValidationError as e:
        raise error(f"{source}: {explain(e)}") from None
    except RecursionError:
        raise error(f"{source}: nested too deeply") from None


_ADAPTERS: dict[Any, _TypeAdapter] = {}


def _adapter(tp: Any) -> _TypeAdapter:
    if tp not in _ADAPTERS:
        _ADAPTERS[tp] = _TypeAdapter(tp)
    return _ADAPTERS[tp]
