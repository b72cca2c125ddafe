"""Navigation planners for the FLYINGTRUST benchmark, picked by name (STYLE.md habit 5).

``get_planner(name_or_spec, **options)`` builds one planner instance (one per trial) from

- a built-in name (:data:`PLANNERS`): ``straight`` (the paper's straight-flight baseline),
  ``reactive`` (a depth-image gap follower), ``mapper`` (a mapping planner: depth fusion,
  distance field, path search, smoothing); each is imported only when asked for;
- ``"package.module:Class"``: any class whose keyword arguments are the options;
- a name registered by an installed package under the entry-point group ``volary.planners``
  (``[project.entry-points."volary.planners"] myplanner = "mypkg.nav:MyPlanner"``).

Every planner satisfies :class:`volary.planning.navigation.NavPlanner`.
"""

from __future__ import annotations

import importlib
import importlib.util
from importlib.metadata import entry_points
from typing import Any

from volary.errors import ConfigError, UnknownNameError
from volary.planning.navigation import NavPlanner

ENTRY_POINT_GROUP = "volary.planners"

# Built-in planners: name -> "module:Class", imported on first use.
_BUILTIN: dict[str, str] = {
    "straight": "volary.planning.planners.straight:StraightPlanner",
    "reactive": "volary.planning.planners.reactive:ReactivePlanner",
    "mapper": "volary.planning.planners.mapper:MapperPlanner",
}

PLANNERS: tuple[str, ...] = tuple(_BUILTIN)
"""Names of the built-in planners."""


def available_planners() -> list[str]:
    """Built-in planners whose module is present, then entry-point names, sorted."""
    built = [n for n, spec in _BUILTIN.items() if _module_exists(spec.split(":")[0])]
    return built + sorted(set(_entry_points()) - set(built))


def get_planner(name_or_spec: str, **options: Any) -> NavPlanner:
    """A new planner: a built-in name, ``"module:Class"`` or an entry-point name, built with
    ``options`` as keyword arguments. Unknown names raise UnknownNameError with the valid ones."""
    if not isinstance(name_or_spec, str) or not name_or_spec.strip():
        raise ConfigError(f"planner: expected a name or 'module:Class', got {name_or_spec!r}")
    cls = resolve_planner(name_or_spec.strip())
    try:
        planner = cls(**options)
    except TypeError as exc:
        raise ConfigError(
            f"planner {name_or_spec!r}: bad options {sorted(options)}: {exc}"
        ) from exc
    _check_planner(planner, name_or_spec)
    return planner


def resolve_planner(name_or_spec: str) -> Any:
    """The planner class (or factory) for a name or ``module:Class`` spec, not instantiated."""
    if name_or_spec in _BUILTIN:
        return _load(_BUILTIN[name_or_spec], name_or_spec)
    if ":" in name_or_spec:
        return _load(name_or_spec, name_or_spec)
    eps = _entry_points()
    if name_or_spec in eps:
        try:
            return eps[name_or_spec].load()
        except Exception as exc:
            raise ConfigError(f"planner {name_or_spec!r}: its entry point failed: {exc}") from exc
    raise UnknownNameError(
        "planner", name_or_spec, [*PLANNERS, *eps, "or a 'package.module:Class' spec"]
    )


def _entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _module_exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


def _load(spec: str, name: str) -> Any:
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ConfigError(f"planner {name!r}: expected 'package.module:Class'")
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"planner {name!r}: cannot import {module!r}: {exc}") from exc
    obj = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"planner {name!r}: module {module!r} has no {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(f"planner {name!r}: {spec!r} is not a class")
    return obj


def _check_planner(planner: Any, name: str) -> None:
    missing = [a for a in ("name", "needs", "reset", "plan") if not hasattr(planner, a)]
    if missing:
        raise ConfigError(
            f"planner {name!r}: {type(planner).__name__} lacks {missing} of the NavPlanner protocol"
        )
    bad = set(planner.needs) - {"depth", "lidar"}
    if bad:
        raise ConfigError(f"planner {name!r}: needs {sorted(bad)}; valid: ['depth', 'lidar']")


__all__ = ["ENTRY_POINT_GROUP", "PLANNERS", "available_planners", "get_planner", "resolve_planner"]
