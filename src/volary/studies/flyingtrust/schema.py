"""What every part of the navigation benchmark agrees on: trials, work units and result rows.

A *trial* is one (algorithm, platform, scenario type, configuration, trial index) flight. The
runner groups trials that share a scene into a *work unit* (one Simulator batch, one env per
platform); the episode code turns a unit into one :class:`TrialResult` per trial; the database
stores each result as one row; statistics and the report read rows back.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, model_validator
from pydantic_core import PydanticCustomError

from volary.errors import ConfigError, FileFormatError, VolaryError
from volary.inputs import LIMITS, Strict, read_toml, validated

SCHEMA_VERSION = 1

# Failure causes (FLYINGTRUST Sec. IV): success, or why not. "error": the planner raised,
# hung past the wall-clock limit or returned non-finite values (traceback in TrialResult.error).
CAUSES = ("success", "collision", "timeout", "outside_goal", "no_plan", "over_speed", "error")


COLLIDERS = ("sphere", "box")  # settings.collider (volary.sim.World's colliders)

# documented ranges of the numeric protocol settings: (lowest, highest, unit)
SETTING_RANGES: dict[str, tuple[float, float, str]] = {
    "speed_cap": (0.1, 50.0, "m/s"),
    "time_limit": (0.1, 3600.0, "s"),
    "goal_radius": (0.05, 100.0, "m"),
    "stable_time": (0.01, 600.0, "s"),
    "planner_rate_hz": (0.1, 1000.0, "Hz"),
    "trial_wall_limit": (0.1, 86400.0, "s"),
    "proximity_radius": (0.01, 100.0, "m"),
}


@dataclass(frozen=True)
class ProtocolSettings:
    """The protocol's constants (paper defaults). Each must be a finite number within
    :data:`SETTING_RANGES` (a run of 1e-300 s, or of 1e308 s, is refused, not flown)."""

    speed_cap: float = 4.0  # m/s
    time_limit: float = 90.0  # s, from the start waypoint
    goal_radius: float = 2.0  # m
    stable_time: float = 1.0  # s the vehicle must stay within goal_radius to count as stable
    planner_rate_hz: float = 10.0
    trial_wall_limit: float = 120.0  # s of wall clock per trial before it is an "error"
    proximity_radius: float = 0.3  # m, SOUS VIDE proximity percentile
    collider: str = "sphere"  # COLLIDERS: the collision sphere, or the box that fits the frame

    def __post_init__(self) -> None:
        _SettingsOf.check({"settings": asdict(self)}, "ProtocolSettings", ConfigError)


@dataclass(frozen=True)
class TrialSpec:
    algo: str
    platform: str
    scenario: str  # scenario type, e.g. "forest"
    config: int  # generator seed of the scene (the fixed ones: worlds.FIXED_SEEDS[scenario])
    trial: int  # trial index within the (platform, type) pair
    seed: int  # base seed of the run

    @property
    def key(self) -> str:
        return f"{self.algo}|{self.platform}|{self.scenario}|{self.config}|{self.trial}"

    @property
    def trial_seed(self) -> int:
        """Seed of this trial's random draws, stable across runs, processes and machines."""
        return trial_seed(self.seed, self.key)


def trial_seed(base: int, key: str) -> int:
    h = hashlib.sha256(f"{int(base)}|{key}".encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


@dataclass(frozen=True)
class WorkUnit:
    """Trials flown in one batch: same algorithm, scene and trial index, one env per platform."""

    algo: str
    scenario: str
    config: int
    trial: int
    platforms: tuple[str, ...]
    seed: int
    algo_options: tuple[tuple[str, Any], ...] = ()  # planner keyword options, hashable
    settings: ProtocolSettings = field(default_factory=ProtocolSettings)

    def trials(self) -> list[TrialSpec]:
        return [
            TrialSpec(self.algo, p, self.scenario, self.config, self.trial, self.seed)
            for p in self.platforms
        ]


@dataclass
class TrialResult:
    """One finished trial = one database row. Floats are NaN where a metric does not apply."""

    algo: str
    platform: str
    scenario: str
    config: int
    trial: int
    seed: int
    success: bool
    cause: str  # one of CAUSES
    time_to_goal: float = math.nan  # s from the start waypoint until within goal_radius
    flight_time: float = math.nan  # s flown (until success, failure or the time limit)
    path_length: float = math.nan  # m
    mean_speed: float = math.nan  # m/s
    max_speed: float = math.nan  # m/s
    collisions: int = 0  # number of collision events (the trial ends at the first)
    collisions_per_m: float = math.nan  # collisions / path_length
    tracking_error: float = math.nan  # m, mean distance to the reference path (start-goal line)
    proximity: float = math.nan  # %, share of samples within proximity_radius of the reference
    final_distance: float = math.nan  # m, to the goal
    sim_time: float = math.nan  # s simulated for this trial
    wall_time: float = math.nan  # s of wall clock for this trial's share of its unit
    error: str = ""  # traceback for cause == "error"
    track: str = ""  # compact JSON [[t, x, y, z], ...] at ~5 Hz, for failure plots

    @property
    def key(self) -> str:
        return TrialSpec(
            self.algo, self.platform, self.scenario, self.config, self.trial, self.seed
        ).key

    def to_row(self) -> dict[str, Any]:
        return asdict(self)


ROW_FIELDS = tuple(f.name for f in fields(TrialResult))


# ---- declared inputs: protocol settings and the suite TOML file ---------------------------------
# documented ranges of a suite's counts: (lowest, highest); a typo cannot start a billion trials
SUITE_RANGES: dict[str, tuple[int, int]] = {"trials_per_config": (1, 1000), "max_envs": (1, 4096)}


class SuiteFileError(FileFormatError, ConfigError):
    """A suite TOML file (or suite table) is malformed. A :class:`FileFormatError` by kind and
    a :class:`ConfigError` for the callers that caught that before the suite had a schema."""


def _refuse(expected: str) -> PydanticCustomError:
    return PydanticCustomError("volary", expected)


def _setting(name: str) -> Any:
    """A numeric setting within its documented range (:data:`SETTING_RANGES`), as a float."""
    lo, hi, unit = SETTING_RANGES[name]

    def check(v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, int | float) or not lo <= v <= hi:
            raise _refuse(f"expected a number in [{lo:g}, {hi:g}] {unit}")
        return float(v)

    return Annotated[float, BeforeValidator(check)]


def _count(name: str) -> Any:
    """A suite count within :data:`SUITE_RANGES` (an int; not a bool, not 2.0)."""
    lo, hi = SUITE_RANGES[name]

    def check(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise _refuse(f"expected an int in [{lo}, {hi}]")
        return v

    return Annotated[int, BeforeValidator(check)]


def _names(what: str, shorthands: tuple[str, ...]) -> Any:
    """A non-empty list of names, or one of the ``shorthands``."""
    words = " or ".join(repr(s) for s in shorthands)

    def check(v: Any) -> tuple[str, ...] | str:
        if isinstance(v, str) and v in shorthands:
            return v
        if isinstance(v, list | tuple) and v and all(isinstance(x, str) and x for x in v):
            return tuple(v)
        raise _refuse(f"expected a non-empty list of {what}, or {words}")

    return Annotated[tuple[str, ...] | str, BeforeValidator(check)]


# A suite's configs: a token, or a list of generator seeds flown for every type.
FIXED = "fixed"  # each type's 10 fixed configurations ("fixed:N": the first N)
GENERATED = "generated"  # "generated:N": N configurations by each type's rule
N_FIXED_CONFIGS = 10  # fixed configurations per scenario type (worlds.FIXED_SEEDS)
MAX_GENERATED_CONFIGS = int(LIMITS["generated_configs"].hi)
CONFIGS_EXPECTED = (
    f"expected {FIXED!r}, '{FIXED}:N' with 1 <= N <= {N_FIXED_CONFIGS}, '{GENERATED}:N' with "
    f"1 <= N <= {MAX_GENERATED_CONFIGS} ({LIMITS['generated_configs'].quantity}), or a "
    "non-empty list of generator seeds (ints >= 0)"
)


def configs_token(token: str) -> tuple[str, int] | None:
    """``(FIXED or GENERATED, N)`` of a configs token (``"fixed"`` is ``(FIXED, 10)``), or
    None when ``token`` is not one (N out of its range included)."""
    if token == FIXED:
        return FIXED, N_FIXED_CONFIGS
    head, sep, tail = token.partition(":")
    most = {FIXED: N_FIXED_CONFIGS, GENERATED: MAX_GENERATED_CONFIGS}.get(head)
    if not sep or most is None or not (tail.isascii() and tail.isdigit()) or len(tail) > 8:
        return None  # (more than 8 digits is out of range anyway)
    n = int(tail)
    return (head, n) if 1 <= n <= most else None


def _configs(v: Any) -> tuple[int, ...] | str:
    if isinstance(v, str) and configs_token(v) is not None:
        return v
    ok = isinstance(v, list | tuple) and v
    if ok and all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in v):
        return tuple(v)
    raise _refuse(CONFIGS_EXPECTED)


def _one_of(choices: tuple[str, ...]) -> Any:
    def check(v: Any) -> str:
        if not isinstance(v, str) or v not in choices:
            raise _refuse(f"expected one of {', '.join(choices)}")
        return v

    return Annotated[str, BeforeValidator(check)]


def _non_empty_text(v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise _refuse("expected a non-empty text")
    return v


class _Listed(Strict):
    """A table whose unknown keys are refused listing the valid ones."""

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            raise _refuse("expected a table of keys and values")
        bad = sorted(set(data) - set(cls.model_fields))
        if bad:
            raise _refuse(f"unknown keys {bad}; valid keys: {sorted(cls.model_fields)}")
        return data

    @classmethod
    def check(cls, data: Any, source: str, error: type[VolaryError] = SuiteFileError) -> Any:
        """``data`` validated, or one line ``source: field: expected ..., got ...``."""
        return validated(cls, data, source, error=error)


class SettingsModel(_Listed):
    """The ``[settings]`` table: :class:`ProtocolSettings` fields, each in its documented range
    (:data:`SETTING_RANGES`) and ``collider`` one of :data:`COLLIDERS`; omitted ones default."""

    speed_cap: _setting("speed_cap") = 4.0  # type: ignore[valid-type]
    time_limit: _setting("time_limit") = 90.0  # type: ignore[valid-type]
    goal_radius: _setting("goal_radius") = 2.0  # type: ignore[valid-type]
    stable_time: _setting("stable_time") = 1.0  # type: ignore[valid-type]
    planner_rate_hz: _setting("planner_rate_hz") = 10.0  # type: ignore[valid-type]
    trial_wall_limit: _setting("trial_wall_limit") = 120.0  # type: ignore[valid-type]
    proximity_radius: _setting("proximity_radius") = 0.3  # type: ignore[valid-type]
    collider: _one_of(COLLIDERS) = "sphere"  # type: ignore[valid-type]


class _SettingsOf(_Listed):
    """Checks a :class:`ProtocolSettings` built in code (``settings.FIELD: expected ...``)."""

    settings: SettingsModel


_NonEmptyText = Annotated[str, BeforeValidator(_non_empty_text)]


class SuiteFile(_Listed):
    """A suite TOML file (layout: :mod:`volary.studies.flyingtrust.protocol`), checked as declared
    here: names non-empty, ``configs`` a ``fixed``/``generated`` token or seeds >= 0, the counts
    within :data:`SUITE_RANGES`, the ``[settings]`` within :data:`SETTING_RANGES`."""

    name: _NonEmptyText | None = None
    platforms: _names("platform names", ("flyingtrust", "all"))  # type: ignore[valid-type]
    scenarios: _names("scenario types", ("all",))  # type: ignore[valid-type]
    configs: Annotated[tuple[int, ...] | str, BeforeValidator(_configs)]
    trials_per_config: _count("trials_per_config") = 1  # type: ignore[valid-type]
    max_envs: _count("max_envs") = 36  # type: ignore[valid-type]
    settings: SettingsModel = SettingsModel()


def suite_document(data: Any, source: str = "suite") -> SuiteFile:
    """A suite table (a decoded TOML file, or ``asdict(suite)``) checked against
    :class:`SuiteFile`; a problem is one :class:`SuiteFileError` line naming ``source`` and
    the field."""
    return SuiteFile.check(data, source)


def read_suite_file(path: str | Path) -> SuiteFile:
    """A suite TOML file read safely (:func:`volary.inputs.read_toml`: a regular file, its size
    checked before reading, UTF-8, no NUL byte, bounded nesting) and checked as
    :func:`suite_document` says; every problem is one :class:`SuiteFileError` line."""
    try:
        data = read_toml(path, "suite file")
    except FileFormatError as e:
        raise SuiteFileError(str(e)) from None
    return suite_document(data, str(path))
