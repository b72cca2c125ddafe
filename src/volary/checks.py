"""The vocabulary of declared option checks (layer 0): what a ``volary`` option takes.

A :class:`Check` has a ``kind`` (``number``, ``name``, ``text``, ``in_file``, ``in_dir``,
``in_path``, ``out_dir`` or ``out_file``) and a function that raises one ``option: expected ...,
got ...`` :class:`~volary.errors.ConfigError` line for a bad value. The constructors (
:func:`number`, :func:`count`, :func:`counts`, :func:`real`, :func:`one_of`, :func:`listed`,
:func:`looked_up`, :func:`parsed`, :func:`text`, the input and output paths) and the shared
checks (:data:`SEED`, :data:`DEVICE`, :data:`OUT`, :data:`SET`, :data:`ENV`) are what the core's
command table (:data:`volary.cli.checks.OPTIONS`) and each study's ``cli.OPTIONS`` are written
in; ``volary.cli`` merges the studies' tables into the core's when it mounts them and runs the
checks before a command starts. Names a registry knows are looked up by the caller's function,
imported on use, so this module imports nothing of volary above layer 0.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from volary.errors import ConfigError, FileFormatError, VolaryError, not_one_of
from volary.inputs import Limit, regular_file, within


@dataclass(frozen=True)
class Check:
    """One option's check: ``fn(value, option)`` raises a one-line VolaryError; ``kind`` is
    ``number``, ``name``, ``text``, ``in_file``, ``in_dir``, ``in_path``, ``out_dir`` or
    ``out_file``."""

    kind: str
    fn: Callable[[Any, str], None]

    def __call__(self, value: Any, option: str) -> None:
        if value is None:  # an optional option left out
            return
        if isinstance(value, list | tuple):
            for v in value:
                self._one(v, option)
        else:
            self._one(value, option)

    def _one(self, value: Any, option: str) -> None:
        if isinstance(value, str) and "\x00" in value:
            raise ConfigError(f"{option}: expected text without NUL bytes, got {value!r}")
        try:
            self.fn(value, option)
        except VolaryError as e:
            msg = str(e)
            if msg.startswith(option):
                raise
            cls = type(e) if type(e) in (ConfigError, FileFormatError) else ConfigError
            raise cls(f"{option}: {msg}") from None


# ----------------------------------------------------------------------------- vocabulary
def number(limit: str | Limit) -> Check:
    """A number within a declared limit (``LIMITS`` name or a :class:`Limit`)."""
    return Check("number", lambda v, opt: within(v, limit, opt) and None)


def count(lo: int, hi: int, quantity: str, unit: str = "1") -> Check:
    """An integer in [lo, hi] (the bounds written out in full: a seed's is 4294967295)."""
    unit_s = "" if unit == "1" else f" {unit}"

    def fn(v: Any, opt: str) -> None:
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise ConfigError(f"{opt}: expected an integer in [{lo}, {hi}]{unit_s} ({quantity}), "
                              f"got {v!r}")  # fmt: skip

    return Check("number", fn)


def real(lo: float, hi: float, quantity: str, unit: str, *, above: bool = False) -> Check:
    """A finite number in [lo, hi] (``above``: strictly above ``lo``)."""
    lim = Limit(quantity, unit, lo, hi)

    def fn(v: Any, opt: str) -> None:
        within(v, lim, opt)
        if above and v <= lo:
            unit_s = "" if unit == "1" else f" {unit}"
            raise ConfigError(f"{opt}: expected a number > {lo:g}{unit_s} ({quantity}), got {v!r}")

    return Check("number", fn)


def one_of(names: Collection[str] | Callable[[], Collection[str]]) -> Check:
    """One of a fixed set of names (or a callable giving them, imported on use)."""

    def fn(v: Any, opt: str) -> None:
        valid = names() if callable(names) else names
        if v not in valid:
            raise not_one_of(opt, v, sorted(valid))

    return Check("name", fn)


def listed(names: Collection[str] | Callable[[], Collection[str]]) -> Check:
    """A comma-separated list of names from a fixed set (at least one)."""
    inner = one_of(names)

    def fn(v: Any, opt: str) -> None:
        items = [s.strip() for s in str(v).split(",") if s.strip()]
        if not items:
            raise ConfigError(f"{opt}: expected at least one comma-separated name, got {v!r}")
        for item in items:
            inner.fn(item, opt)

    return Check("name", fn)


def looked_up(get: Callable[[str], Any]) -> Check:
    """A name a registry knows (``get`` raises UnknownNameError listing the valid ones)."""
    return Check("name", lambda v, opt: _nonempty(v, opt) or get(v) and None)


def parsed(parse: Callable[[str], Any], kind: str = "name") -> Check:
    """A value of a small syntax (``NAME=KIND:PRESET``, ``x,y,z``, ...): ``parse`` raises."""
    return Check(kind, lambda v, opt: _nonempty(v, opt) or parse(v) and None)


def text(pattern: str | None = None, what: str = "text") -> Check:
    """Free text (a token, a name the user picks); ``pattern``: what it must match."""
    rx = None if pattern is None else re.compile(pattern)

    def fn(v: Any, opt: str) -> None:
        if rx is not None and not rx.fullmatch(v):
            raise ConfigError(f"{opt}: expected {what}, got {v!r}")

    return Check("text", fn)


def _nonempty(v: Any, opt: str) -> None:
    if not str(v).strip():
        raise ConfigError(f"{opt}: expected a name, got an empty string")


def as_path(v: Any, opt: str) -> Path:
    """A path option's value as a Path (the empty string is refused)."""
    s = os.fspath(v)
    if not s:
        raise ConfigError(f"{opt}: expected a path, got an empty string")
    return Path(s)


def in_file(what: str) -> Check:
    """An existing regular file (not a FIFO, a directory or a device)."""
    return Check("in_file", lambda v, opt: regular_file(as_path(v, opt), what) and None)


def in_dir(what: str) -> Check:
    """An existing directory."""

    def fn(v: Any, opt: str) -> None:
        p = as_path(v, opt)
        if not p.is_dir():
            raise ConfigError(f"{opt}: expected an existing directory ({what}), got {str(p)!r}")

    return Check("in_dir", fn)


def in_path(what: str) -> Check:
    """An existing directory or regular file."""

    def fn(v: Any, opt: str) -> None:
        p = as_path(v, opt)
        if not p.is_dir():
            regular_file(p, what)

    return Check("in_path", fn)


def _no_file_above(p: Path, opt: str) -> None:
    for parent in p.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(f"{opt}: {str(parent)!r} is not a directory")
            return


def out_dir() -> Check:
    """A directory to write into: absent (created) or a directory, under a directory."""

    def fn(v: Any, opt: str) -> None:
        p = as_path(v, opt)
        if p.exists() and not p.is_dir():
            raise ConfigError(f"{opt}: expected a directory to write into, got {str(p)!r}")
        _no_file_above(p, opt)

    return Check("out_dir", fn)


def out_file() -> Check:
    """A file to write: not a directory nor a FIFO or device, under a directory."""

    def fn(v: Any, opt: str) -> None:
        p = as_path(v, opt)
        if p.exists() and not p.is_file():
            raise ConfigError(f"{opt}: expected a file path to write, got {str(p)!r}")
        _no_file_above(p, opt)

    return Check("out_file", fn)


def out_new_dir() -> Check:
    """A directory this command creates: it must not exist yet."""

    def fn(v: Any, opt: str) -> None:
        p = as_path(v, opt)
        if p.exists():
            raise ConfigError(f"{opt}: expected a new directory, {str(p)!r} exists")
        _no_file_above(p, opt)

    return Check("out_dir", fn)


def counts(hi: int, quantity: str, lo: int = 1) -> Check:
    """A count in [lo, hi], from 1 unless ``lo`` says otherwise."""
    return count(lo, hi, quantity)


def _device(v: Any, opt: str) -> None:
    if v not in ("cpu", "cuda") and not re.fullmatch(r"cuda:\d{1,2}", v):
        raise ConfigError(f"{opt}: expected cpu, cuda or cuda:N, got {v!r}")
    if v.startswith("cuda"):
        from volary.device import checked  # the Simulator's own check, the same message

        checked(v, opt)


def _keyval(v: str) -> None:
    key, eq, _ = v.partition("=")
    if not eq or not re.fullmatch(r"[A-Za-z_][\w.]*", key.strip()):
        raise ConfigError(f"expected FIELD=VALUE such as lr=0.001, got {v!r}")


#: The shared checks: a seed, a torch device, an output directory, ``--set FIELD=VALUE``, and
#: ``--env FIELD=VALUE`` (a task config's field).
SEED = count(0, 2**32 - 1, "seed")
DEVICE = Check("name", _device)
OUT = out_dir()
SET = parsed(_keyval)
ENV = parsed(_keyval)
