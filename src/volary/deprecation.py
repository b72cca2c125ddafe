"""Old import paths kept for one release after a module moved (layer 0).

A moved module's old file becomes a shim: it names the new module in ``MOVED_TO`` (how
``tests/test_layers.py`` tells a shim from the core it sits in), imports it, and hands its names
on through :func:`forward`; each name read from the old path warns with a
``DeprecationWarning`` that names the new path.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any


def public_names(module: ModuleType) -> list[str]:
    """The names ``from module import *`` gives: its ``__all__``, else every public name."""
    names = getattr(module, "__all__", None)
    return list(names) if names is not None else [n for n in vars(module) if n[:1] != "_"]


def forward(old: str, new: ModuleType) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the shim at the import path ``old``: every public name of
    ``new`` (also one left out of its ``__all__``) is read from ``new`` with a
    ``DeprecationWarning``; any other name raises AttributeError as a missing one would."""

    def __getattr__(name: str) -> Any:
        if name.startswith("_") or not hasattr(new, name):
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        _warn(old, new.__name__, name)
        return getattr(new, name)

    def __dir__() -> list[str]:
        return sorted(public_names(new))

    return __getattr__, __dir__


def forward_names(old: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """``__getattr__`` for a module at ``old`` that keeps living but lost some names: each name
    of ``moved`` (name -> the module it moved to) is imported from there on first use, with a
    ``DeprecationWarning``; any other name raises AttributeError as a missing one would."""

    def __getattr__(name: str) -> Any:
        if name not in moved:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        _warn(old, moved[name], name)
        return getattr(importlib.import_module(moved[name]), name)

    return __getattr__


def _warn(old: str, new: str, name: str) -> None:
    warnings.warn(
        f"{old}.{name} moved to {new}.{name}; import it from {new} "
        f"(the old path goes away in the next release)",
        DeprecationWarning,
        stacklevel=3,
    )


__all__ = ["forward", "forward_names", "public_names"]
