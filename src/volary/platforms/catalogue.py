"""The airframe catalogue: named, validated airframes loaded from the package's TOML files.

Files are parsed on first use and cached; importing this module reads nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from volary.errors import ConfigError, FileFormatError, UnknownNameError
from volary.platforms.schema import CATEGORIES, Entry, load_file
from volary.registry import Registry, check_name

if TYPE_CHECKING:
    import torch

    from volary.dynamics import Airframe, VehicleParams
    from volary.platforms.indicators import Indicators

DATA_DIR = Path(__file__).with_name("data")
FILES = ("presets.toml", "flyingtrust.toml", "identified.toml")
USER_SUFFIX = ".toml"  # a platform name ending so is a user's platform file (file_reference)


@functools.cache
def _file(fname: str) -> dict[str, Entry]:
    return load_file(DATA_DIR / fname)


@functools.cache
def _entries() -> Registry[Entry]:
    out: Registry[Entry] = Registry("platform")
    for fname in FILES:
        for name, entry in _file(fname).items():
            if name in out:
                raise FileFormatError(f"{fname}: [{name}] already defined in {out[name].path.name}")
            out.register(name, entry)
    return out


def entry(name: str) -> Entry:
    """The catalogue entry ``name`` (airframe, category, description, published indicators).

    Files are parsed in order until one has ``name`` (a preset is found without parsing the
    FLYINGTRUST table, a tenth of a second of a one-vehicle command's start-up). A name that
    is not a known string is an UnknownNameError listing the valid ones.

    A user's platform file stands in for a name: ``PATH.toml`` (a file of one airframe, such
    as the ``platform.toml`` that ``volary sysid`` writes) or ``PATH.toml:TABLE`` (one table of
    a file of several), read by :func:`~volary.platforms.schema.load_file` and cached until the
    file changes; so every command and suite that takes a platform name takes a file too."""
    if not isinstance(name, str):
        return _entries().get(name)  # raises UnknownNameError
    ref = file_reference(name)
    if ref is not None:
        return _from_file(*ref)
    for fname in FILES:
        found = _file(fname).get(name)
        if found is not None:
            return found
    return _entries().get(name)  # not there: the registry's error names the close matches


def file_reference(name: str) -> tuple[Path, str | None] | None:
    """``(path, table or None)`` when ``name`` refers to a platform file (``PATH.toml`` or
    ``PATH.toml:TABLE``), else None (a catalogue name: none ends in ``.toml``)."""
    path, sep, table = name.rpartition(":")
    if sep and path.endswith(USER_SUFFIX) and table and not set(table) & set("/\\"):
        return Path(path), table
    return (Path(name), None) if name.endswith(USER_SUFFIX) else None


def _from_file(path: Path, table: str | None) -> Entry:
    """The entry ``table`` of the user's platform file ``path`` (its only one when None)."""
    try:
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = (0, 0)  # load_file names the path and why it cannot be read
    entries = _user_file(str(path.absolute()), stamp)
    if table is None:
        if len(entries) == 1:
            return next(iter(entries.values()))
        raise ConfigError(
            f"platform {str(path)!r}: the file holds {len(entries)} airframes "
            f"({', '.join(entries)}); expected {path}:NAME naming one of them"
        )
    if table not in entries:
        raise UnknownNameError(f"airframe table of {path.name}", table, entries)
    return entries[table]


@functools.lru_cache(maxsize=32)  # bounded: every edit of a file is a new key
def _user_file(path: str, stamp: tuple[int, int]) -> dict[str, Entry]:
    return load_file(path)  # stamp: (mtime, size), so an edited file is read again


def get(name: str) -> Airframe:
    """The validated :class:`~volary.dynamics.Airframe` called ``name``."""
    return entry(name).airframe


def names(category: str | None = None) -> list[str]:
    """Registered names in file order, optionally of one category (see :data:`CATEGORIES`)."""
    if category is not None:
        check_name("platform category", category, CATEGORIES)
    return [n for n, e in _entries().items() if category is None or e.category == category]


def table1() -> dict[str, Indicators]:
    """FLYINGTRUST Table I as published: platform name -> indicators (36 rows, table order)."""
    return {n: e.table1 for n, e in _entries().items() if e.table1 is not None}


def params(
    platforms: str | Airframe | Sequence[str | Airframe],
    n_envs: int | None = None,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
) -> VehicleParams:
    """Batched :class:`~volary.dynamics.VehicleParams` for names and/or airframes.

    A list shorter than ``n_envs`` is tiled (``n_envs=72`` over the 36 FLYINGTRUST names gives
    each platform twice); ``dtype`` defaults to float32.
    """
    import torch

    from volary.dynamics import Airframe, VehicleParams

    items = [platforms] if isinstance(platforms, str | Airframe) else list(platforms)
    if not items:
        raise ConfigError("platforms: expected a name, an Airframe or a non-empty list of them")
    afs = [get(p) if isinstance(p, str) else p for p in items]
    return VehicleParams.from_airframes(
        afs, n_envs, device=device, dtype=torch.float32 if dtype is None else dtype
    )


def clear_cache() -> None:
    """Forget the parsed files (after editing them in place)."""
    _file.cache_clear()
    _entries.cache_clear()
    _user_file.cache_clear()
