"""volary: batched multirotor simulation, control and benchmarking for autonomy research.

Importing volary has no side effects and loads no optional backend; subpackages are imported
on first use (``volary.dynamics``, ``volary.platforms``, ``volary.control``, ``volary.sim``...).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_SUBPACKAGES = (
    "math",
    "errors",
    "types",
    "dynamics",
    "platforms",
    "worlds",
    "control",
    "sensors",
    "planning",
    "sim",
    "envs",
    "learning",
    "bench",
)


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"volary.{name}")
    raise AttributeError(f"module 'volary' has no attribute {name!r}")


__all__ = ["__version__", *_SUBPACKAGES]
