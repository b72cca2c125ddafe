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
from typing import Any

from volary.errors import ConfigError

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
        if self.collider not in COLLIDERS:
            raise ConfigError(f"settings.collider: expected one of {', '.join(COLLIDERS)}, "
                              f"got {self.collider!r}")  # fmt: skip
        for f in fields(self):
            if f.name not in SETTING_RANGES:
                continue
            v = getattr(self, f.name)
            lo, hi, unit = SETTING_RANGES[f.name]
            if isinstance(v, bool) or not isinstance(v, int | float) or not lo <= v <= hi:
                raise ConfigError(
                    f"settings.{f.name}: expected a number in [{lo:g}, {hi:g}] {unit}, got {v!r}"
                )


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

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> TrialResult:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in row.items() if k in names})


ROW_FIELDS = tuple(f.name for f in fields(TrialResult))
