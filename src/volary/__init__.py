"""volary: batched multirotor simulation, control and benchmarking for autonomy research.

Importing volary loads no optional backend; subpackages are imported on first use
(``volary.dynamics``, ``volary.platforms``, ``volary.control``, ``volary.sim``...). Its one side
effect: ``MKL_CBWR`` defaults to ``AUTO,STRICT`` (unless already set), MKL's strict conditional
numerical reproducibility. Without it MKL's results depend on the operands' memory alignment on
some CPUs (seen on AMD EPYC), so an env's numbers changed with its position in a batch; volary
promises results independent of batch size. It takes effect when volary is imported before the
first MKL call (import volary before running torch code, or set the variable yourself).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")  # see the docstring: batch-size independence

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
