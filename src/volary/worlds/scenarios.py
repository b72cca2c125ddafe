"""The seven FLYINGTRUST scenario types (Sec. III-B) as deterministic generators.

``make_scenario(type, seed, **overrides)`` builds a :class:`SceneSpec` from (type, seed, params)
with ``numpy.random.default_rng(seed)`` only. Defaults are the published sizes and densities.
Every result has been checked solvable for a sphere of ``params.vehicle_radius`` by a grid search
(``volary.worlds.grid``); ``meta`` records the type, seed, params, the straight-line reference
path, the check and whether obstacles had to be cleared from the start-goal corridor.

``make_scenario("custom", seed, path=...)`` loads a scene from a mesh or point-cloud file
(:mod:`volary.worlds.custom`, :class:`CustomParams`) and checks it solvable. It is the
:data:`CUSTOM` type, kept out of :data:`SCENARIOS` (the seven generated types, each with ten
fixed configurations) because it needs a file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from types import MappingProxyType
from typing import Any

from volary.errors import ConfigError, UnknownNameError
from volary.worlds.custom import CustomParams, custom
from volary.worlds.primitives import SceneSpec
from volary.worlds.scenarios_classic import (
    ForestParams,
    RandomCylindersParams,
    UrbanParams,
    forest,
    random_cylinders,
    urban,
)
from volary.worlds.scenarios_theory import (
    MazeParams,
    NarrowGapParams,
    PerlinParams,
    SuddenDropParams,
    maze,
    narrow_gap,
    perlin,
    sudden_drop,
)

FIXED_SEEDS: tuple[int, ...] = tuple(range(10))  # the ten fixed configurations per type


@dataclass(frozen=True)
class ScenarioType:
    """A registered generator and its default params."""

    name: str
    params: Any  # frozen params dataclass instance holding the published defaults
    generate: Callable[[int, Any], SceneSpec]
    classic: bool  # FLYINGTRUST "classic" (True) or "theoretical" (False) group


SCENARIOS: Mapping[str, ScenarioType] = MappingProxyType(
    {
        t.name: t
        for t in (
            ScenarioType("forest", ForestParams(), forest, True),
            ScenarioType("urban", UrbanParams(), urban, True),
            ScenarioType("random_cylinders", RandomCylindersParams(), random_cylinders, True),
            ScenarioType("narrow_gap", NarrowGapParams(), narrow_gap, False),
            ScenarioType("sudden_drop", SuddenDropParams(), sudden_drop, False),
            ScenarioType("maze", MazeParams(), maze, False),
            ScenarioType("perlin", PerlinParams(), perlin, False),
        )
    }
)


CUSTOM = ScenarioType("custom", CustomParams(), custom, False)  # from a file: path=...


def _type(type: str) -> ScenarioType:
    if type == CUSTOM.name:
        return CUSTOM
    if type not in SCENARIOS:
        raise UnknownNameError("scenario type", type, SCENARIOS)
    return SCENARIOS[type]


def scenario_params(type: str, **overrides: Any) -> Any:
    """The params dataclass of a type with ``overrides`` applied (a new object)."""
    base = _type(type).params
    valid = {f.name for f in fields(base)}
    bad = sorted(set(overrides) - valid)
    if bad:
        raise ConfigError(f"scenario {type!r}: unknown params {bad}; valid: {sorted(valid)}")
    return replace(base, **overrides)


def make_scenario(type: str, seed: int, **overrides: Any) -> SceneSpec:
    """Generate scenario ``type`` for ``seed`` (ints >= 0) with param ``overrides``; ``type``
    is one of :data:`SCENARIOS` or ``"custom"`` (needs ``path=``, see :class:`CustomParams`)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed: expected an int >= 0, got {seed!r}")
    params = scenario_params(type, **overrides)
    return _type(type).generate(seed, params)


def fixed_configurations(type: str) -> list[SceneSpec]:
    """The ten fixed configurations (seeds 0-9) of a type with default params."""
    return [make_scenario(type, s) for s in FIXED_SEEDS]


__all__ = [
    "CUSTOM",
    "FIXED_SEEDS",
    "SCENARIOS",
    "CustomParams",
    "ForestParams",
    "MazeParams",
    "NarrowGapParams",
    "PerlinParams",
    "RandomCylindersParams",
    "ScenarioType",
    "SuddenDropParams",
    "UrbanParams",
    "fixed_configurations",
    "make_scenario",
    "scenario_params",
]
