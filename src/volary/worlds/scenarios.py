"""The seven FLYINGTRUST scenario types (Sec. III-B) as deterministic generators.

``make_scenario(type, seed, **overrides)`` builds a :class:`SceneSpec` from (type, seed, params)
with ``numpy.random.default_rng(seed)`` only. Defaults are the published sizes and densities.
Each type has ten fixed configurations (:data:`FIXED_SEEDS`, :func:`fixed_configurations`):
seeds 0-9, except forest and urban, whose ten are stratified on the straight line's clearance.
More configurations by the same rules: :func:`generated_seeds` ``(type, n)`` gives seeds
0..n-1, and for forest and urban the ``n`` seeds at the clearance quantiles over candidates
0..10n-1 (``generated_seeds(type, 10) == fixed_seeds(type)`` for every type).
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
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from volary.errors import ConfigError
from volary.inputs import within
from volary.registry import Registry
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
from volary.worlds.scenarios_common import check_params, line_clearance, stratified_seeds
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

FIRST_TEN: tuple[int, ...] = tuple(range(10))
# Forest and urban leave the straight start-goal line open or blocked at random, so their ten
# fixed configurations are the seeds at the (i + 1/2) / 10 quantiles of the line clearance over
# the candidate seeds 0..FIXED_CANDIDATES-1 (scenarios_common.stratified_seeds; a slow test
# recomputes them). The five theoretical/cluttered types block the line by construction (or
# rise in difficulty with the index) and keep seeds 0-9.
FIXED_CANDIDATES = 100
CANDIDATES_PER_CONFIG = FIXED_CANDIDATES // len(FIRST_TEN)  # generated_seeds: 10 n candidates
STRATIFIED_FIXED: dict[str, tuple[int, ...]] = {
    "forest": (0, 7, 8, 9, 17, 26, 38, 47, 63, 78),
    "urban": (12, 17, 32, 40, 43, 53, 54, 61, 74, 86),
}


@dataclass(frozen=True)
class ScenarioType:
    """A registered generator, its default params and its ten fixed configurations."""

    name: str
    params: Any  # frozen params dataclass instance holding the published defaults
    generate: Callable[[int, Any], SceneSpec]
    classic: bool  # FLYINGTRUST "classic" (True) or "theoretical" (False) group
    fixed_seeds: tuple[int, ...] = FIRST_TEN  # generator seeds of the ten fixed configurations


SCENARIOS: Registry[ScenarioType] = Registry(
    "scenario type",
    {
        t.name: t
        for t in (
            ScenarioType("forest", ForestParams(), forest, True, STRATIFIED_FIXED["forest"]),
            ScenarioType("urban", UrbanParams(), urban, True, STRATIFIED_FIXED["urban"]),
            ScenarioType("random_cylinders", RandomCylindersParams(), random_cylinders, True),
            ScenarioType("narrow_gap", NarrowGapParams(), narrow_gap, False),
            ScenarioType("sudden_drop", SuddenDropParams(), sudden_drop, False),
            ScenarioType("maze", MazeParams(), maze, False),
            ScenarioType("perlin", PerlinParams(), perlin, False),
        )
    },
)


CUSTOM = ScenarioType("custom", CustomParams(), custom, False)  # from a file: path=...

# The generator seeds of every type's ten fixed configurations (the benchmark's "fixed" configs).
FIXED_SEEDS: Mapping[str, tuple[int, ...]] = MappingProxyType(
    {name: t.fixed_seeds for name, t in SCENARIOS.items()}
)


def _type(type: str) -> ScenarioType:
    return CUSTOM if type == CUSTOM.name else SCENARIOS.get(type)


def scenario_params(type: str, **overrides: Any) -> Any:
    """The params dataclass of a type with ``overrides`` applied (a new object), checked
    before anything is generated: each field against the type and range declared next to it
    (``Annotated[float, Limit(...)]``), then the type's cross-field rules (ranges lo <= hi,
    margins and clearances inside the extent, obstacle counts, lattice and grid sizes within
    ``volary.inputs.LIMITS``). A problem is a one-line ConfigError naming the scenario, the
    field and the expected range with its unit. "custom" checks its own params when it loads."""
    base = _type(type).params
    valid = {f.name for f in fields(base)}
    bad = sorted(set(overrides) - valid)
    if bad:
        raise ConfigError(f"scenario {type!r}: unknown params {bad}; valid: {sorted(valid)}")
    params = replace(base, **overrides)
    return params if type == CUSTOM.name else check_params(type, params)


def make_scenario(type: str, seed: int, **overrides: Any) -> SceneSpec:
    """Generate scenario ``type`` for ``seed`` (ints >= 0) with param ``overrides``; ``type``
    is one of :data:`SCENARIOS` or ``"custom"`` (needs ``path=``, see :class:`CustomParams`)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed: expected an int >= 0, got {seed!r}")
    params = scenario_params(type, **overrides)
    return _type(type).generate(seed, params)


def fixed_seeds(type: str) -> tuple[int, ...]:
    """The generator seeds of the ten fixed configurations of a type (:data:`FIXED_SEEDS`)."""
    return SCENARIOS.get(type).fixed_seeds


def generated_seeds(type: str, n: int) -> tuple[int, ...]:
    """The generator seeds of ``n`` configurations of a type (1 <= n <= 100,
    ``LIMITS["generated_configs"]``), drawn by the rule its ten fixed ones follow: seeds
    0..n-1 for the types whose fixed ten are seeds 0-9 (narrow gap's and sudden drop's counts
    rise with ``seed % 10``, so a multiple of ten holds each level equally often); for forest
    and urban :func:`~volary.worlds.scenarios_common.stratified_seeds` with ``k = n`` over the
    line clearances of candidate seeds 0..10n-1, ascending. ``n = 10`` gives
    :func:`fixed_seeds`. Forest and urban generate their 10 n candidate scenes once per
    process (cached; n = 30 took 36 s for forest and 20 s for urban on a busy 2-core host)."""
    kind = SCENARIOS.get(type)  # an unknown name lists the valid ones
    count = int(within(n, "generated_configs", "n"))
    return _generated(kind.name, count)


@lru_cache(maxsize=1024)  # 7 types x 100 counts at most
def _generated(type: str, n: int) -> tuple[int, ...]:
    if type not in STRATIFIED_FIXED:
        return tuple(range(n))
    candidates = range(CANDIDATES_PER_CONFIG * n)
    return stratified_seeds([seed_clearance(type, s) for s in candidates], k=n)


@lru_cache(maxsize=4096)  # generated_seeds asks for 2 x 1,000 at most
def seed_clearance(type: str, seed: int) -> float:
    """The straight start-goal line's clearance (m, :func:`line_clearance`) of ``type``'s
    scene for ``seed`` with default params: what forest's and urban's configurations are
    stratified on (cached per process)."""
    spec = make_scenario(type, seed)
    return line_clearance(list(spec.obstacles), spec.start, spec.goal)


def fixed_configurations(type: str) -> list[SceneSpec]:
    """The ten fixed configurations of a type with default params, in :func:`fixed_seeds`
    order (seeds 0-9, or the clearance-stratified seeds for forest and urban)."""
    return [make_scenario(type, s) for s in fixed_seeds(type)]


__all__ = [
    "CANDIDATES_PER_CONFIG",
    "CUSTOM",
    "FIXED_CANDIDATES",
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
    "fixed_seeds",
    "generated_seeds",
    "make_scenario",
    "scenario_params",
]
