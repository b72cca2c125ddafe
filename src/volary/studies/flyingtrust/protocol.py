"""The benchmark protocol: which trials a suite flies and how they are grouped into work units.

A :class:`Suite` is platforms x scenario types x configurations x trials per configuration
(FLYINGTRUST Sec. IV). Built-ins (:data:`SUITES`):

- ``flyingtrust``: the 36 Table I platforms x the 7 scenario types x each type's 10 fixed
  configurations x 1 trial = 2,520 trials per algorithm. The paper's "10 trials per
  combination" of a (platform, type) pair are its 10 fixed configurations: trial k flies the
  k-th. The fixed configurations are generator seeds (``worlds.FIXED_SEEDS``): 0-9, except
  forest and urban, whose ten are stratified on the straight line's clearance.
- ``quick``: 6 platforms spanning TWR_max 1.4-6.0 x 7 types x the first 2 fixed configurations
  of each type = 84 trials per algorithm, for CI and a first look at every type.
- ``demo``: 4 platforms (TWR_max 1.4-6.0) x forest, urban, sudden drop x the first fixed
  configuration = 12 trials per algorithm, the benchmark part of ``volary demo``.

A user suite is a TOML file (see :func:`load_suite_file`)::

    name = "my-suite"
    platforms = ["0.60kg-EMAX", "1.00kg-SunnySky"]   # or "flyingtrust" (the 36) / "all"
    scenarios = ["forest", "maze"]                    # or "all" (the 7 types)
    configs = "fixed"            # each type's 10 fixed configurations; "fixed:2" the first 2;
                                 # "generated:30": 30 per type by each type's rule (below);
                                 # or generator seeds for every type, e.g. [0, 1, 2]
    trials_per_config = 1
    # a platform file stands in for a name: "my_quad.toml" or "airframes.toml:TABLE",
    # a relative path read from the suite file's folder
    [settings]                                        # optional ProtocolSettings overrides
    time_limit = 60.0

More configurations, by the rule that chose the fixed ten: ``configs = "generated:N"``
(1 <= N <= 100; ``volary bench run --configs N``) flies, per type,
``worlds.generated_seeds(type, N)``: seeds 0..N-1, and for forest and urban the N seeds at the
clearance quantiles (i + 1/2)/N over candidate seeds 0..10N-1. ``generated:10`` flies exactly
the fixed ten; for N != 10 forest's and urban's seeds are a new stratified sample, not the
fixed ten extended or cut. Listing the units generates forest's and urban's 10 N candidates
once per process (N = 30: forest 36 s, urban 20 s on a busy 2-core host); the run database
stores the units, so a resumed run does not generate them again.

Trial numbering: within a (platform, type) pair trials are numbered across configurations,
``trial = i * trials_per_config + j`` for the i-th listed configuration and repetition j, so
the key of every trial in a suite is unique. A work unit is one (algorithm, type,
configuration, trial) with every platform of the suite as one env (the same scene), split into
chunks of at most ``max_envs`` platforms.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from volary.errors import ConfigError
from volary.registry import Registry, check_name
from volary.studies.flyingtrust.schema import (
    CONFIGS_EXPECTED,
    FIXED,
    GENERATED,
    MAX_GENERATED_CONFIGS,
    N_FIXED_CONFIGS,
    SUITE_RANGES,
    ProtocolSettings,
    SuiteFile,
    WorkUnit,
    configs_token,
    read_suite_file,
    suite_document,
)

# The seven FLYINGTRUST scenario types, in worlds.SCENARIOS order (kept here so that listing
# suites does not import the scene generators; a test checks they agree).
SCENARIO_TYPES: tuple[str, ...] = (
    "forest",
    "urban",
    "random_cylinders",
    "narrow_gap",
    "sudden_drop",
    "maze",
    "perlin",
)

# quick: six Table I platforms spanning TWR_max (1.4, 1.8, 2.2, 3.3, 4.6, 6.0).
QUICK_PLATFORMS: tuple[str, ...] = (
    "1.20kg-JFRC",
    "1.50kg-DJI",
    "0.60kg-EMAX",
    "0.895kg-DJI",
    "0.98kg-EGO-Planner-DIY",
    "1.00kg-SunnySky",
)

# repetitions of each configuration (1e9 would never finish)
MAX_TRIALS_PER_CONFIG = SUITE_RANGES["trials_per_config"][1]


@dataclass(frozen=True)
class Suite:
    """What a benchmark run flies; every algorithm flies every trial of the suite."""

    name: str
    platforms: tuple[str, ...]  # catalogue names, one env each
    scenarios: tuple[str, ...]  # scenario types (worlds.SCENARIOS)
    # "fixed" / "fixed:N": each type's (first N) fixed configurations (worlds.FIXED_SEEDS);
    # "generated:N": N per type by each type's rule (worlds.generated_seeds);
    # a tuple of ints: these generator seeds for every type
    configs: tuple[int, ...] | str
    trials_per_config: int = 1
    settings: ProtocolSettings = field(default_factory=ProtocolSettings)
    max_envs: int = 36  # platforms per work unit (one Simulator batch)

    def __post_init__(self) -> None:
        _check_suite(self)

    def units(
        self,
        algos: Sequence[str],
        seed: int,
        algo_options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> list[WorkUnit]:
        """Every work unit of the suite for ``algos`` (order: algo, type, config, trial, chunk).

        ``algo_options``: planner keyword options per algorithm name, e.g.
        ``{"straight": {"speed": 2.0}}``; values must be TOML-like scalars or lists.
        """
        algos = _check_algos(algos)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"seed: expected an int >= 0, got {seed!r}")
        options = _freeze_options(algo_options, algos)
        out = []
        for algo in algos:
            for scen in self.scenarios:
                for i, config in enumerate(self.scene_seeds(scen)):
                    for j in range(self.trials_per_config):
                        trial = i * self.trials_per_config + j
                        for chunk in self._chunks():
                            out.append(
                                WorkUnit(
                                    algo,
                                    scen,
                                    config,
                                    trial,
                                    chunk,
                                    seed,
                                    options[algo],
                                    self.settings,
                                )  # fmt: skip
                            )
        return out

    def scene_seeds(self, scenario: str) -> tuple[int, ...]:
        """The generator seeds (the rows' ``config``) this suite flies for ``scenario``."""
        if isinstance(self.configs, str):
            from volary.worlds.scenarios import fixed_seeds, generated_seeds

            kind, n = _token(self.configs)
            return fixed_seeds(scenario)[:n] if kind == FIXED else generated_seeds(scenario, n)
        return self.configs

    def n_configs(self) -> int:
        """Configurations per scenario type."""
        if isinstance(self.configs, str):
            return _token(self.configs)[1]
        return len(self.configs)

    def n_trials(self, n_algos: int = 1) -> int:
        """Trials the suite flies for ``n_algos`` algorithms."""
        per = len(self.platforms) * len(self.scenarios) * self.n_configs()
        return n_algos * per * self.trials_per_config

    def _chunks(self) -> list[tuple[str, ...]]:
        p = self.platforms
        return [p[k : k + self.max_envs] for k in range(0, len(p), self.max_envs)]


def get_suite(name_or_path: str | Path) -> Suite:
    """A built-in suite by name (:data:`SUITES`) or a suite TOML file by path."""
    if isinstance(name_or_path, str) and name_or_path in _BUILTIN:
        return _BUILTIN.get(name_or_path)()
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        return load_suite_file(path)
    raise _BUILTIN.unknown(name_or_path)


def _quick() -> Suite:
    return Suite("quick", QUICK_PLATFORMS, SCENARIO_TYPES, f"{FIXED}:2", 1)


DEMO_PLATFORMS: tuple[str, ...] = (  # TWR_max 1.4, 2.2, 4.6, 6.0
    "1.20kg-JFRC",
    "0.60kg-EMAX",
    "0.98kg-EGO-Planner-DIY",
    "1.00kg-SunnySky",
)
DEMO_TYPES: tuple[str, ...] = ("forest", "urban", "sudden_drop")


def _demo() -> Suite:
    """`volary demo`'s small benchmark: four platforms spanning TWR_max 1.4-6.0 in one batch,
    three types, each type's first fixed configuration (24 trials for two planners). One
    configuration per type: its intervals are the Wilson floor's, as wide as they should be."""
    return Suite("demo", DEMO_PLATFORMS, DEMO_TYPES, f"{FIXED}:1", 1)


def _flyingtrust() -> Suite:
    return Suite("flyingtrust", flyingtrust_platforms(), SCENARIO_TYPES, FIXED, 1)


_BUILTIN: Registry[Callable[[], Suite]] = Registry(
    "suite", {"demo": _demo, "quick": _quick, "flyingtrust": _flyingtrust}
)
SUITES: tuple[str, ...] = _BUILTIN.names()


def flyingtrust_platforms() -> tuple[str, ...]:
    """The 36 FLYINGTRUST Table I platforms, in table order."""
    from volary.platforms import table1

    return tuple(table1())


def load_suite_file(path: str | Path) -> Suite:
    """A suite TOML file (format: module docstring), read safely and checked against
    :class:`~volary.studies.flyingtrust.schema.SuiteFile`; a problem is one ConfigError line."""
    if not Path(path).exists():
        raise ConfigError(f"suite file {str(path)!r} does not exist")
    return _suite(read_suite_file(path), default_name=Path(path).stem, base=Path(path).parent)


def suite_from_dict(
    data: Mapping[str, Any], default_name: str = "custom", source: str = ""
) -> Suite:
    """Build a :class:`Suite` from the TOML table layout (or ``asdict(suite)``); a problem is
    one ConfigError line naming ``source`` and the key."""
    return _suite(suite_document(data, source or "suite"), default_name)


def _suite(doc: SuiteFile, default_name: str, base: Path | None = None) -> Suite:
    """``base``: the suite file's folder, which relative platform-file paths are read from."""
    platforms = _platform_list(doc.platforms)
    return Suite(
        name=doc.name or default_name,
        platforms=platforms if base is None else tuple(_beside(base, p) for p in platforms),
        scenarios=SCENARIO_TYPES if doc.scenarios == "all" else tuple(doc.scenarios),
        configs=doc.configs,
        trials_per_config=doc.trials_per_config,
        max_envs=doc.max_envs,
        settings=ProtocolSettings(**doc.settings.model_dump()),
    )


def _token(token: str) -> tuple[str, int]:
    """``(FIXED or GENERATED, N)`` of a configs token (:func:`schema.configs_token`);
    ConfigError, one line naming the bounds, otherwise."""
    parsed = configs_token(token)
    if parsed is None:
        raise ConfigError(f"Suite.configs: {CONFIGS_EXPECTED}, got {token[:60]!r}")
    return parsed


def _beside(base: Path, platform: str) -> str:
    """``platform`` with a relative platform-file path read from ``base`` (the suite file's
    folder), so a suite flies the same from any working directory; names are unchanged."""
    from volary.platforms.catalogue import file_reference

    ref = file_reference(platform)
    if ref is None or ref[0].is_absolute():
        return platform
    path = os.path.normpath(base / ref[0])
    return path if ref[1] is None else f"{path}:{ref[1]}"


def _platform_list(value: tuple[str, ...] | str) -> tuple[str, ...]:
    if value == "flyingtrust":
        return flyingtrust_platforms()
    if value == "all":
        from volary.platforms import names

        return tuple(names())
    return tuple(value)


def _check_suite(s: Suite) -> None:
    """Validate names and ranges; unknown platform/scenario names list the valid ones."""
    if not isinstance(s.name, str) or not s.name:
        raise ConfigError(f"Suite.name: expected a non-empty str, got {s.name!r}")
    if isinstance(s.configs, str):
        _token(s.configs)
    for attr in ("platforms", "scenarios") + (() if isinstance(s.configs, str) else ("configs",)):
        v = getattr(s, attr)
        if not isinstance(v, tuple) or not v:
            raise ConfigError(f"Suite.{attr}: expected a non-empty tuple, got {v!r}")
        if len(set(v)) != len(v):
            raise ConfigError(f"Suite.{attr}: duplicates in {v!r}")
    _check_platforms(s.platforms)
    for scen in s.scenarios:
        check_name("scenario type", scen, SCENARIO_TYPES)
    for c in () if isinstance(s.configs, str) else s.configs:
        if isinstance(c, bool) or not isinstance(c, int) or c < 0:
            raise ConfigError(
                f"Suite.configs: expected generator seeds (ints >= 0), or {FIXED!r} for "
                f"each type's fixed configurations, got {c!r}"
            )
    for attr, (least, most) in SUITE_RANGES.items():
        v = getattr(s, attr)
        if isinstance(v, bool) or not isinstance(v, int) or not least <= v <= most:
            raise ConfigError(f"Suite.{attr}: expected an int in [{least}, {most}], got {v!r}")
    if not isinstance(s.settings, ProtocolSettings):
        raise ConfigError(f"Suite.settings: expected ProtocolSettings, got {s.settings!r}")


def _check_platforms(platforms: Iterable[str]) -> None:
    from volary.platforms import entry

    for p in platforms:
        entry(p)  # unknown names raise, listing the catalogue


def _check_algos(algos: Sequence[str]) -> tuple[str, ...]:
    if isinstance(algos, str):
        algos = [a.strip() for a in algos.split(",") if a.strip()]
    algos = tuple(algos)
    if not algos or not all(isinstance(a, str) and a for a in algos):
        raise ConfigError(f"algos: expected a non-empty list of names, got {algos!r}")
    if len(set(algos)) != len(algos):
        raise ConfigError(f"algos: duplicates in {algos!r}")
    return algos


def _freeze(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise ConfigError(f"algo_options: values must be scalars, lists or tables, got {value!r}")


def _freeze_options(
    algo_options: Mapping[str, Mapping[str, Any]] | None, algos: tuple[str, ...]
) -> dict[str, tuple[tuple[str, Any], ...]]:
    algo_options = algo_options or {}
    if not isinstance(algo_options, Mapping):
        raise ConfigError(f"algo_options: expected a mapping algo -> options, got {algo_options!r}")
    bad = sorted(set(algo_options) - set(algos))
    if bad:
        raise ConfigError(f"algo_options: {bad} are not among the algorithms {list(algos)}")
    out = {}
    for a in algos:
        opts = algo_options.get(a, {})
        if not isinstance(opts, Mapping):
            raise ConfigError(f"algo_options[{a!r}]: expected a mapping, got {opts!r}")
        out[a] = _freeze(opts)
    return out


__all__ = [
    "FIXED",
    "GENERATED",
    "MAX_GENERATED_CONFIGS",
    "N_FIXED_CONFIGS",
    "QUICK_PLATFORMS",
    "SCENARIO_TYPES",
    "SUITES",
    "Suite",
    "flyingtrust_platforms",
    "get_suite",
    "load_suite_file",
    "suite_from_dict",
]
