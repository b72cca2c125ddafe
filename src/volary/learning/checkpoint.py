"""One checkpoint format for every learner: a tagged dict of tensors and plain data.

A checkpoint is a ``torch.save``d dict ``{"format": "volary.<kind>", "version": N, "meta": {...},
<fields>}`` whose values are tensors, numbers, strings, None, lists, tuples and dicts only, so
it loads with ``torch.load(weights_only=True)`` (DESIGN.md: never unpickle). Each learner
declares one :class:`CheckpointKind` (tag, version, required fields) and calls
:func:`write_checkpoint` / :func:`read_checkpoint`. Every problem with a file raises
:class:`~volary.errors.FileFormatError` whose message starts with the file and names the field;
every problem with what is being written raises :class:`~volary.errors.ConfigError` naming the
field, before anything touches the disk.

Legacy layout: files written before this module carry a single string tag (for example
``"volary.rl.ppo/1"``) and no ``version`` field, with the same fields otherwise. A kind that
names that string as ``legacy_format`` reads such files as version 1.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import re
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from volary.errors import ConfigError, FileFormatError, VolaryError

RESERVED_FIELDS = ("format", "version", "meta")
_SCALARS = (bool, int, float, str, type(None))
_UNSAFE_GLOBAL = re.compile(r"Unsupported global: GLOBAL (\S+)")


@dataclass(frozen=True)
class CheckpointKind:
    """What one learner's checkpoint holds."""

    name: str  # the tag is "volary.<name>", e.g. "rl.ppo"
    title: str  # for messages, e.g. "PPO policy"
    fields: tuple[str, ...]  # required besides format, version and meta, e.g. ("state_dict",)
    version: int = 1  # the version written; files of versions 1..version are read
    legacy_format: str | None = None  # the single-string tag of pre-module files (version 1)

    def __post_init__(self) -> None:
        clash = sorted(set(self.fields) & set(RESERVED_FIELDS))
        if clash:
            raise ConfigError(f"fields: {clash} are reserved ({', '.join(RESERVED_FIELDS)})")
        if self.version < 1:
            raise ConfigError(f"version: expected an integer >= 1, got {self.version}")

    @property
    def tag(self) -> str:
        """The value of the ``format`` field."""
        return f"volary.{self.name}"


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint read from ``path``: its version and fields (``meta`` included)."""

    path: Path
    kind: CheckpointKind
    version: int
    fields: dict[str, Any]

    def __getitem__(self, name: str) -> Any:
        return self.fields[name]

    @contextmanager
    def reading(self, name: str) -> Iterator[None]:
        """Turn a failure to use field ``name`` (bad config, wrong shapes) into a
        ``FileFormatError`` naming the file and the field."""
        try:
            yield
        except FileFormatError:
            raise  # already names the file
        except (KeyError, RuntimeError, TypeError, ValueError) as err:
            missing = isinstance(err, KeyError) and not isinstance(err, VolaryError)
            detail = f"missing key {err}" if missing else one_line(str(err))
            raise self.error(f"field {name!r}: {detail}") from None

    def error(self, problem: str) -> FileFormatError:
        """A ``FileFormatError`` about this file: "<path>: malformed <title>: <problem>"."""
        return FileFormatError(f"{self.path}: malformed {self.kind.title}: {problem}")

    @property
    def meta(self) -> dict[str, Any]:
        """The JSON metadata (a dict)."""
        meta = self.fields["meta"]
        if not isinstance(meta, dict):
            raise self.error(f"field 'meta': expected a dict, got {type(meta).__name__}")
        return dict(meta)

    def integer(self, name: str, lo: int = 1, hi: int = 2**20) -> int:
        """Field ``name`` as an int in [lo, hi]: a str, a float or a bool is refused (a file
        that stores ``"5"`` was not written by volary)."""
        value = self.fields.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise self.error(f"field {name!r}: expected an integer in [{lo}, {hi}], got {value!r}")
        return value

    def number(self, name: str, lo: float, hi: float) -> float:
        """Field ``name`` as a finite float in [lo, hi] (an int is taken; a str or bool is not)."""
        value = self.fields.get(name)
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or not lo <= value <= hi:
            raise self.error(
                f"field {name!r}: expected a number in [{lo:g}, {hi:g}], got {value!r}"
            )
        return float(value)

    def load_state(self, module: nn.Module, name: str = "state_dict") -> None:
        """``module.load_state_dict`` (strict) from field ``name``; a state that does not fit
        raises one line: the file, the field, the network expected and torch's first problems."""
        state = self.fields.get(name)
        if isinstance(state, dict):
            bad = [k for k, v in state.items() if _non_finite(v)]
            if bad:
                raise self.error(f"field {name!r}: non-finite weights in {bad[0]!r}")
        try:
            module.load_state_dict(state)
        except (KeyError, RuntimeError, TypeError, ValueError, AttributeError) as err:
            what = type(module).__name__
            detail = one_line(str(err).replace(f"Error(s) in loading state_dict for {what}:", ""))
            raise self.error(
                f"field {name!r}: expected the weights of a {what}, got others ({detail})"
            ) from None


def _non_finite(value: Any) -> bool:
    """A floating tensor holding a NaN or an infinity (a trained network never does)."""
    return (
        isinstance(value, Tensor)
        and value.is_floating_point()
        and not bool(torch.isfinite(value).all())
    )


def one_line(text: str, limit: int = 240) -> str:
    """``text`` (torch's errors run to many lines) as one line of at most ``limit``
    characters: its lines joined with "; ", cut with "..."."""
    flat = "; ".join(ln.strip() for ln in text.splitlines() if ln.strip())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def state_on_cpu(module: nn.Module) -> dict[str, Tensor]:
    """Detached CPU copies of ``module``'s state dict (parameters and buffers)."""
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


# ---- writing -------------------------------------------------------------------------------------
def write_checkpoint(
    path: str | Path,
    kind: CheckpointKind,
    fields: Mapping[str, Any],
    meta: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``fields`` plus the tag and JSON-able ``meta`` to ``path`` atomically (a temporary
    file beside it, then ``os.replace``); returns the path. ``ConfigError`` names a missing,
    reserved or unloadable field (one ``torch.load(weights_only=True)`` would refuse)."""
    missing = [f for f in kind.fields if f not in fields]
    if missing:
        raise ConfigError(f"{kind.title}: missing field(s) {', '.join(map(repr, missing))}")
    for name, value in fields.items():
        if name in RESERVED_FIELDS:
            raise ConfigError(f"{kind.title}: field {name!r} is reserved")
        check_plain(value, name)
    out = Path(path)
    _save_atomic({"format": kind.tag, "version": kind.version, **fields, "meta": _json(meta)}, out)
    return out


def check_plain(value: Any, where: str) -> None:
    """``ConfigError`` naming ``where`` (a dotted path) unless ``value`` is made only of
    tensors, numbers, strings, None, lists, tuples and dicts with str or int keys."""
    if isinstance(value, (Tensor, *_SCALARS)):
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            check_plain(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, (str, int)):
                raise ConfigError(f"{where}: keys must be str or int, got {type(key).__name__}")
            check_plain(item, f"{where}.{key}")
        return
    raise ConfigError(
        f"{where}: a checkpoint holds tensors, numbers, strings, lists and dicts only "
        f"(torch.load(weights_only=True)), got {type(value).__name__}"
    )


def _json(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """A plain copy of ``meta``, or ``ConfigError`` if it is not JSON."""
    try:
        return json.loads(json.dumps(dict(meta or {})))
    except (TypeError, ValueError) as err:
        raise ConfigError(f"meta: expected JSON-able values ({err})") from None


def _save_atomic(obj: dict[str, Any], out: Path) -> None:
    """``torch.save`` to a unique temporary file in ``out``'s folder, then rename it onto
    ``out``: a reader sees the old file or the new one, never half of one."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with open(tmp, "xb") as fh:
            torch.save(obj, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


# ---- reading -------------------------------------------------------------------------------------
def read_checkpoint(
    path: str | Path, kind: CheckpointKind, map_location: str | torch.device = "cpu"
) -> Checkpoint:
    """Load ``path`` with ``torch.load(weights_only=True)`` and check its tag, version and
    fields. ``FileFormatError`` naming the file and the field for a missing, truncated or
    corrupt file, one that needs pickle, one that is not a volary checkpoint, one of another
    kind or a newer version, and one that lacks a field."""
    p = Path(path)
    if not p.is_file():
        raise FileFormatError(f"{p}: no such {kind.title} file")
    raw = _load_weights_only(p, kind, map_location)
    version = _version(p, kind, raw)
    missing = [f for f in ("meta", *kind.fields) if f not in raw]
    if missing:
        names = ", ".join(map(repr, missing))
        raise FileFormatError(f"{p}: malformed {kind.title}: missing field(s) {names}")
    fields = {k: v for k, v in raw.items() if k not in ("format", "version")}
    return Checkpoint(p, kind, version, fields)


def _load_weights_only(p: Path, kind: CheckpointKind, map_location: str | torch.device) -> Any:
    """``torch.load(weights_only=True)``, its failures as ``FileFormatError``."""
    try:
        return torch.load(p, weights_only=True, map_location=map_location)
    except pickle.UnpicklingError as err:
        unsafe = _UNSAFE_GLOBAL.search(str(err))
        if unsafe:
            raise FileFormatError(
                f"{p}: refused: it holds a pickled Python object ({unsafe.group(1)}); "
                "volary checkpoints hold tensors, numbers and strings only and are read with "
                f"torch.load(weights_only=True) (expected {kind.title})"
            ) from None
        raise FileFormatError(f"{p}: not a readable {kind.title} ({_reason(err)})") from None
    except Exception as err:  # noqa: BLE001 - any unreadable file is a format error
        raise FileFormatError(f"{p}: not a readable {kind.title} ({_reason(err)})") from None


def _reason(err: Exception) -> str:
    """The informative line of a ``torch.load`` error (its messages run to paragraphs)."""
    text = str(err)
    _, sep, tail = text.partition("WeightsUnpickler error:")
    lines = [ln.strip() for ln in (tail if sep else text).splitlines() if ln.strip()]
    detail = lines[0].split(". ")[0][:200] if lines else "unexpected end of file"
    return f"truncated, corrupt or not written by torch.save: {type(err).__name__}: {detail}"


def _version(p: Path, kind: CheckpointKind, raw: Any) -> int:
    """The file's version after checking its ``format`` tag (legacy tags read as 1)."""
    if not isinstance(raw, dict) or "format" not in raw:
        raise FileFormatError(
            f"{p}: not a volary checkpoint: no field 'format' (expected {kind.tag!r}: {kind.title})"
        )
    tag = raw["format"]
    if kind.legacy_format is not None and tag == kind.legacy_format and "version" not in raw:
        return 1  # legacy layout: a single-string tag, no version field, the same fields
    if tag != kind.tag:
        raise FileFormatError(
            f"{p}: field 'format' is {tag!r}, expected {kind.tag!r} ({kind.title})"
        )
    if "version" not in raw:
        raise FileFormatError(f"{p}: malformed {kind.title}: missing field 'version'")
    version = raw["version"]
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise FileFormatError(f"{p}: field 'version' is {version!r}, expected an integer >= 1")
    if version > kind.version:
        raise FileFormatError(
            f"{p}: field 'version' is {version}; this volary reads {kind.title} versions "
            f"1 to {kind.version} (written by a newer volary?)"
        )
    return version


__all__ = [
    "RESERVED_FIELDS",
    "Checkpoint",
    "CheckpointKind",
    "check_plain",
    "read_checkpoint",
    "state_on_cpu",
    "write_checkpoint",
]
