"""Aggregate statistics of navigation trials: success with bootstrap CIs and SOUS VIDE metrics.

- Success rate with a 95 % percentile bootstrap CI (Efron & Tibshirani; FLYINGTRUST Sec. IV-B:
  B = 1000 resamples), per algorithm, (algo, scenario), (algo, platform) and (algo, platform,
  scenario).
- Metrics (SOUS VIDE, paper 000 Sec. VI, recorded per trial by the episode): time to goal (mean
  over successful trials), path length, mean/max speed, tracking error and proximity percentile
  (means over the trials where they are finite), collision rate per metre pooled as
  sum(collisions) / sum(path length) ("collisions normalized by the total distance travelled").
- Platform rows carry FLYINGTRUST's indicators (``platforms.indicators``) and real/virtual.

The intervals and Holm's correction themselves are the core's (:mod:`volary.bench.stats`, which
any study may use); this module applies them to FLYINGTRUST's trial rows. Plain dataclasses and
dict rows; no pandas.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from volary.bench.stats import bootstrap_ci as bootstrap_ci  # re-exported: the old path's
from volary.bench.stats import cluster_bootstrap_ci as cluster_bootstrap_ci
from volary.bench.stats import holm as holm
from volary.bench.stats import holm_by_family as holm_by_family
from volary.bench.stats import wilson_interval as wilson_interval
from volary.errors import ConfigError
from volary.studies.flyingtrust.schema import CAUSES, TrialResult

_MEAN_FIELDS = (
    "flight_time",
    "path_length",
    "mean_speed",
    "max_speed",
    "tracking_error",
    "proximity",
    "final_distance",
)


@dataclass(frozen=True)
class PlatformInfo:
    """FLYINGTRUST indicators of a platform (NaN and category "unknown" outside the catalogue)."""

    name: str
    category: str  # "real" | "virtual" | "other" | "unknown"
    twr_max: float  # 1
    alpha_xy_max: float  # rad/s^2
    alpha_z_max: float  # rad/s^2
    mass: float = math.nan  # kg
    size: float = math.nan  # m: collision-sphere radius (arm + propeller)


def platform_category(platform: str) -> str:
    """ "real" or "virtual" for the 36 FLYINGTRUST platforms (catalogue category), else "other"."""
    from volary import platforms

    try:
        cat = platforms.entry(platform).category
    except (KeyError, ValueError):
        return "other"
    return {"flyingtrust-real": "real", "flyingtrust-virtual": "virtual"}.get(cat, "other")


@lru_cache(maxsize=512)
def platform_info(name: str) -> PlatformInfo:
    """Indicators of catalogue platform ``name`` (``platforms.indicators(platforms.get(name))``)."""
    from volary import platforms

    try:
        airframe = platforms.get(name)
        ind = platforms.indicators(airframe)
    except (KeyError, ValueError):
        return PlatformInfo(name, "unknown", math.nan, math.nan, math.nan)
    return PlatformInfo(
        name,
        platform_category(name),
        ind.twr_max,
        ind.alpha_xy_max,
        ind.alpha_z_max,
        float(airframe.mass),
        float(airframe.radius),
    )


@dataclass(frozen=True)
class GroupStats:
    """Statistics of one group of trials; ``scenario``/``platform`` are "" when pooled over."""

    algo: str
    scenario: str
    platform: str
    n: int
    successes: int
    success_rate: float  # 0-1
    ci_lo: float  # 95 % CI of success_rate (``level``), configurations as the unit
    ci_hi: float
    causes: dict[str, int] = field(default_factory=dict)  # CAUSES -> count
    time_to_goal: float = math.nan  # s, mean over successful trials
    flight_time: float = math.nan  # s
    path_length: float = math.nan  # m
    mean_speed: float = math.nan  # m/s
    max_speed: float = math.nan  # m/s, mean of the per-trial maxima
    collisions_per_m: float = math.nan  # 1/m, pooled: sum collisions / sum path length
    tracking_error: float = math.nan  # m
    proximity: float = math.nan  # %
    final_distance: float = math.nan  # m
    platform_info: PlatformInfo | None = None  # for per-platform groups
    metric_ci: dict[str, tuple[float, float]] = field(default_factory=dict)  # pooled groups

    def to_row(self) -> dict[str, Any]:
        """Flat dict row (causes as ``cause_<name>``, indicators as columns) for CSV/Parquet."""
        row: dict[str, Any] = {
            k: getattr(self, k)
            for k in ("algo", "scenario", "platform", "n", "successes", "success_rate")
        }
        row.update(ci_lo=self.ci_lo, ci_hi=self.ci_hi)
        row.update({f"cause_{c}": self.causes.get(c, 0) for c in _cause_names(self.causes)})
        for k in ("time_to_goal", *_MEAN_FIELDS[:4], "collisions_per_m", *_MEAN_FIELDS[4:]):
            row[k] = getattr(self, k)
        for k, (lo, hi) in self.metric_ci.items():
            row.update({f"{k}_lo": lo, f"{k}_hi": hi})
        if self.platform_info is not None:
            p = self.platform_info
            row.update(
                category=p.category,
                twr_max=p.twr_max,
                alpha_xy_max=p.alpha_xy_max,
                alpha_z_max=p.alpha_z_max,
                mass=p.mass,
                size=p.size,
            )
        return row


def _cause_names(causes: dict[str, int]) -> list[str]:
    return list(CAUSES) + sorted(set(causes) - set(CAUSES))


@dataclass(frozen=True)
class Summary:
    """The tables of :func:`summarize`; rows ordered by algo, then scenario/platform order."""

    algos: tuple[str, ...]
    scenarios: tuple[str, ...]  # paper order (classic, theoretical), then others
    platforms: tuple[str, ...]  # FLYINGTRUST Table I order, then others alphabetically
    by_algo: list[GroupStats]
    by_scenario: list[GroupStats]
    by_platform: list[GroupStats]
    by_cell: list[GroupStats]  # (algo, platform, scenario)
    n_trials: int
    level: float = 0.95

    def tables(self) -> dict[str, list[GroupStats]]:
        return {
            "by_algo": self.by_algo,
            "by_scenario": self.by_scenario,
            "by_platform": self.by_platform,
            "by_cell": self.by_cell,
        }

    def get(self, algo: str, scenario: str = "", platform: str = "") -> GroupStats | None:
        """The group of (algo, scenario, platform); "" pools over that dimension."""
        return self._index().get((algo, scenario, platform))

    def _index(self) -> dict[tuple[str, str, str], GroupStats]:
        idx = self.__dict__.get("_idx")
        if idx is None:
            idx = {(g.algo, g.scenario, g.platform): g for t in self.tables().values() for g in t}
            object.__setattr__(self, "_idx", idx)
        return idx


def summarize(
    results: Iterable[TrialResult], B: int = 1000, seed: int = 0, level: float = 0.95
) -> Summary:
    """Success and metrics per algo, (algo, scenario), (algo, platform) and (algo, platform,
    scenario), with intervals whose unit of replication is the configuration (a scene of a
    scenario type, flown by every platform): :func:`cluster_bootstrap_ci` over (type,
    configuration) clusters, stratified by type. Success rates get a Wilson floor; metric means
    of the algorithm and (algorithm, type) groups get the bootstrap interval alone. Each group's
    seed is derived from ``seed`` and the group's key, so a group's interval does not depend on
    which other groups exist, nor on the order of ``results``."""
    rows = _check_results(results)
    cols = _columns(rows)
    algos = tuple(sorted({r.algo for r in rows}))
    scenarios = tuple(order_scenarios({r.scenario for r in rows}))
    plats = tuple(order_platforms({r.platform for r in rows}))
    groups: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        for key in _group_keys(r):
            groups[key].append(i)
    made = {k: _group(k, np.asarray(ix), cols, B, seed, level) for k, ix in groups.items()}
    s_rank = {s: i for i, s in enumerate(scenarios)}
    p_rank = {p: i for i, p in enumerate(plats)}

    def table(has_s: bool, has_p: bool) -> list[GroupStats]:
        keys = [k for k in made if bool(k[1]) == has_s and bool(k[2]) == has_p]
        keys.sort(key=lambda k: (k[0], p_rank.get(k[2], -1), s_rank.get(k[1], -1)))
        return [made[k] for k in keys]

    return Summary(
        algos,
        scenarios,
        plats,
        table(False, False),
        table(True, False),
        table(False, True),
        table(True, True),
        len(rows),
        float(level),
    )


def _check_results(results: Iterable[TrialResult]) -> list[TrialResult]:
    if isinstance(results, str | bytes) or not isinstance(results, Iterable):
        raise ConfigError(f"results: expected an iterable of TrialResult, got {results!r}")
    rows = list(results)
    for r in rows:
        if not isinstance(r, TrialResult):
            raise ConfigError(f"results: expected TrialResult items, got {type(r).__name__}")
    if not rows:
        raise ConfigError("results: expected at least one TrialResult, got none")
    return rows


def _group_keys(r: TrialResult) -> tuple[tuple[str, str, str], ...]:
    a, s, p = r.algo, r.scenario, r.platform
    return ((a, "", ""), (a, s, ""), (a, "", p), (a, s, p))


def _columns(rows: list[TrialResult]) -> dict[str, np.ndarray]:
    def col(name: str) -> np.ndarray:
        return np.array([_float(getattr(r, name)) for r in rows], dtype=np.float64)

    cols = {k: col(k) for k in ("time_to_goal", *_MEAN_FIELDS, "collisions")}
    cols["success"] = np.array([bool(r.success) for r in rows], dtype=np.float64)
    cols["cause"] = np.array([r.cause for r in rows], dtype=object)
    for k in ("scenario", "platform"):
        cols[k] = np.array([getattr(r, k) for r in rows])
    for k in ("config", "trial"):
        cols[k] = np.array([int(getattr(r, k)) for r in rows], dtype=np.int64)
    return cols


def _float(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _nanmean(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else math.nan


_CI_FIELDS = ("time_to_goal", *_MEAN_FIELDS)  # metric means with intervals (pooled groups)


def _group(
    key: tuple[str, str, str], ix: np.ndarray, cols: dict, B: int, seed: int, level: float
) -> GroupStats:
    ix = ix[np.lexsort(tuple(cols[k][ix] for k in ("trial", "platform", "config", "scenario")))]
    succ = cols["success"][ix]
    gseed = _group_seed(seed, key)
    ci = _clustered(cols, ix, B, gseed, level)
    mean, lo, hi = ci(succ, True)
    metric_ci = {}
    if not key[2]:  # per algorithm and per (algorithm, type): the tables with metric intervals
        for k in _CI_FIELDS:
            x = cols[k][ix] if k != "time_to_goal" else np.where(succ > 0, cols[k][ix], np.nan)
            metric_ci[k] = ci(x, False)[1:]
    causes = dict.fromkeys(CAUSES, 0)
    for c in cols["cause"][ix]:
        causes[str(c)] = causes.get(str(c), 0) + 1
    ttg = cols["time_to_goal"][ix][succ > 0]
    length, coll = cols["path_length"][ix], cols["collisions"][ix]
    ok = np.isfinite(length) & np.isfinite(coll)
    total = float(length[ok].sum())
    means: dict[str, Any] = {k: _nanmean(cols[k][ix]) for k in _MEAN_FIELDS}
    return GroupStats(
        key[0],
        key[1],
        key[2],
        n=int(ix.size),
        successes=int(succ.sum()),
        success_rate=mean,
        ci_lo=lo,
        ci_hi=hi,
        causes=causes,
        time_to_goal=_nanmean(ttg),
        collisions_per_m=float(coll[ok].sum()) / total if total > 0 else math.nan,
        platform_info=platform_info(key[2]) if key[2] else None,
        metric_ci=metric_ci,
        **means,
    )


def _clustered(cols: dict, ix: np.ndarray, B: int, seed: int, level: float) -> Any:
    """``ci(x, rate)``: :func:`cluster_bootstrap_ci` of the values ``x`` of rows ``ix`` (sorted
    canonically), clustered by (scenario type, configuration) and stratified by type; the
    clusters are found once per group."""
    scen, conf = cols["scenario"][ix], cols["config"][ix]
    cut = np.flatnonzero((scen[1:] != scen[:-1]) | (conf[1:] != conf[:-1])) + 1
    parts = np.split(np.arange(ix.size), cut)
    strata = [scen[p[0]] for p in parts]

    def ci(x: np.ndarray, rate: bool) -> tuple[float, float, float]:
        return cluster_bootstrap_ci(
            [x[p] for p in parts], B=B, seed=seed, level=level, strata=strata, rate=rate
        )

    return ci


def _group_seed(seed: int, key: tuple[str, ...]) -> int:
    """A group's seed from the run's ``seed`` and the group's key (sha256; every machine)."""
    h = hashlib.sha256(f"{int(seed)}|{'|'.join(key)}".encode()).digest()
    return int.from_bytes(h[:4], "little")


def order_scenarios(names: Iterable[str]) -> list[str]:
    """Paper order (forest ... perlin, as ``worlds.SCENARIOS``), then other types alphabetically."""
    from volary.worlds import SCENARIOS

    known = tuple(SCENARIOS.names())
    s = set(names)
    return [x for x in known if x in s] + sorted(s - set(known))


def order_platforms(names: Iterable[str]) -> list[str]:
    """FLYINGTRUST Table I order (18 real, then 18 virtual), then others alphabetically."""
    from volary import platforms

    table = list(platforms.table1())
    s = set(names)
    return [x for x in table if x in s] + sorted(s - set(table))
