"""Navigation planners for the FLYINGTRUST benchmark, picked by name (STYLE.md habit 5).

``get_planner(name_or_spec, **options)`` builds one planner instance (one per trial) from

- a built-in name (:data:`PLANNERS`): ``straight`` (the paper's straight-flight baseline),
  ``reactive`` (a depth-image gap follower), ``mapper`` (a mapping planner: depth fusion,
  distance field, path search, smoothing), and FLYINGTRUST's families on the mapper's map:
  ``kinodynamic`` (Fast-Planner), ``ego`` (EGO-Planner), ``topo`` (Path-Guided PGO); and
  ``learned`` (NavRL-like: a PPO depth policy behind a velocity-obstacle shield) and
  ``learned_rgb`` (the same policy from RGB alone, on a depth grid a small CNN predicts); each
  is imported only when asked for;
- ``"package.module:Class"``: any class whose keyword arguments are the options;
- a name registered by an installed package under the entry-point group ``volary.planners``
  (``[project.entry-points."volary.planners"] myplanner = "mypkg.nav:MyPlanner"``).

Every planner satisfies :class:`volary.planning.navigation.NavPlanner`.
"""

from __future__ import annotations

from typing import Any

from volary.errors import ConfigError
from volary.planning.navigation import NavPlanner
from volary.registry import Registry

ENTRY_POINT_GROUP = "volary.planners"

# Built-in planners: name -> "module:Class", imported on first use.
_BUILTIN: dict[str, str] = {
    "straight": "volary.studies.flyingtrust.planners.straight:StraightPlanner",
    "reactive": "volary.studies.flyingtrust.planners.reactive:ReactivePlanner",
    "mapper": "volary.studies.flyingtrust.planners.mapper:MapperPlanner",
    "kinodynamic": "volary.studies.flyingtrust.planners.kinodynamic:KinodynamicPlanner",
    "ego": "volary.studies.flyingtrust.planners.ego:EgoPlanner",
    "topo": "volary.studies.flyingtrust.planners.topo:TopoPlanner",
    "learned": "volary.studies.flyingtrust.planners.learned:LearnedPlanner",
    "learned_rgb": "volary.studies.flyingtrust.planners.learned:LearnedRgbPlanner",
}
# the built-ins, then entry points, then any "module:Class" spec
_REGISTRY: Registry[Any] = Registry("planner", _BUILTIN, group=ENTRY_POINT_GROUP, specs=True)

PLANNERS: tuple[str, ...] = tuple(_BUILTIN)
"""Names of the built-in planners."""


def available_planners() -> list[str]:
    """The built-in planners, then the entry-point names (sorted)."""
    return list(_REGISTRY.names())


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
    cls = _REGISTRY.get(name_or_spec)
    if not callable(cls):
        raise ConfigError(f"planner {name_or_spec!r}: {cls!r} is not a class")
    return cls


def _check_planner(planner: Any, name: str) -> None:
    missing = [a for a in ("name", "needs", "reset", "plan") if not hasattr(planner, a)]
    if missing:
        raise ConfigError(
            f"planner {name!r}: {type(planner).__name__} lacks {missing} of the NavPlanner protocol"
        )
    from volary.planning.navigation import SENSORS

    bad = set(planner.needs) - SENSORS
    if bad:
        raise ConfigError(f"planner {name!r}: needs {sorted(bad)}; valid: {sorted(SENSORS)}")


__all__ = ["ENTRY_POINT_GROUP", "PLANNERS", "available_planners", "get_planner", "resolve_planner"]
