"""The airframe catalogue: named, validated airframes loaded from the package's TOML files.

Files are parsed on first use and cached; importing this module reads nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from volary.errors import ConfigError, FileFormatError
from volary.platforms.schema import CATEGORIES, Entry, load_file
from volary.registry import Registry, check_name

if TYPE_CHECKING:
    import torch

    from volary.dynamics import Airframe, VehicleParams
    from volary.platforms.indicators import Indicators

DATA_DIR = Path(__file__).with_name("data")
FILES = ("presets.toml", "flyingtrust.toml", "identified.toml")


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
    is not a known string is an UnknownNameError listing the valid ones."""
    if not isinstance(name, str):
        return _entries().get(name)  # raises UnknownNameError
    for fname in FILES:
        found = _file(fname).get(name)
        if found is not None:
            return found
    return _entries().get(name)  # not there: the registry's error names the close matches


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
    _entries.cache_clear()
