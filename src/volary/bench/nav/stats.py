"""Aggregate statistics of navigation trials: success with bootstrap CIs and SOUS VIDE metrics.

- Success rate with a 95 % percentile bootstrap CI (Efron & Tibshirani; FLYINGTRUST Sec. IV-B:
  B = 1000 resamples), per algorithm, (algo, scenario), (algo, platform) and (algo, platform,
  scenario).
- Metrics (SOUS VIDE, paper 000 Sec. VI, recorded per trial by the episode): time to goal (mean
  over successful trials), path length, mean/max speed, tracking error and proximity percentile
  (means over the trials where they are finite), collision rate per metre pooled as
  sum(collisions) / sum(path length) ("collisions normalized by the total distance travelled").
- Platform rows carry FLYINGTRUST's indicators (``platforms.indicators``) and real/virtual.

Plain dataclasses and dict rows; no pandas.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from volary.bench.nav.schema import CAUSES, TrialResult
from volary.errors import ConfigError

_MEAN_FIELDS = (
    "flight_time",
    "path_length",
    "mean_speed",
    "max_speed",
    "tracking_error",
    "proximity",
    "final_distance",
)


def bootstrap_ci(
    successes: Sequence[float] | np.ndarray, B: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, float, float]:
    """(mean, lo, hi): sample mean and percentile bootstrap CI of ``successes`` (0/1 or floats).

    ``B`` resamples with replacement (one (B, n) index draw of a seeded numpy Generator); the
    interval is the (1 - level)/2 and (1 + level)/2 percentiles of the resampled means. NaN values
    are left out; an empty sample gives (nan, nan, nan).
    """
    x = _as_sample(successes)
    if isinstance(B, bool) or not isinstance(B, int | np.integer) or B < 1:
        raise ConfigError(f"B: expected an int >= 1, got {B!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ConfigError(f"seed: expected an int >= 0, got {seed!r}")
    if isinstance(level, bool) or not isinstance(level, float | int) or not 0.0 < level < 1.0:
        raise ConfigError(f"level: expected a number in (0, 1), got {level!r}")
    x = x[~np.isnan(x)]
    if x.size == 0:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(int(seed))
    means = x[rng.integers(0, x.size, size=(int(B), x.size))].mean(axis=1)
    lo, hi = np.quantile(means, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return float(x.mean()), float(lo), float(hi)


def cluster_bootstrap_ci(
    groups: Sequence[Sequence[float]] | np.ndarray,
    B: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float, float]:
    """(mean, lo, hi) of a rate whose trials are clustered: ``groups`` holds one row of 0/1 (or
    float) outcomes per configuration (the unit of replication), e.g. the 36 platforms that flew
    it. Trials of one configuration share its scene, so they are not independent draws.

    The interval is the hull of two: a two-stage percentile bootstrap (configurations resampled
    with replacement, then trials within each; ``B`` resamples, seeded) and a Wilson score
    interval on the configuration-level mean with n = the number of configurations. The second
    keeps the interval from collapsing at 0 % and 100 % and from the percentile bootstrap's
    under-coverage with few clusters. Coverage on protocol-shaped simulations:
    ``benchmarks/stats_coverage.py``.
    """
    rows = [np.asarray(g, dtype=np.float64) for g in groups]
    rows = [r[~np.isnan(r)] for r in rows]
    rows = [r for r in rows if r.size]
    if isinstance(B, bool) or not isinstance(B, int | np.integer) or B < 1:
        raise ConfigError(f"B: expected an int >= 1, got {B!r}")
    if isinstance(level, bool) or not isinstance(level, float | int) or not 0.0 < level < 1.0:
        raise ConfigError(f"level: expected a number in (0, 1), got {level!r}")
    if not rows:
        return math.nan, math.nan, math.nan
    c = len(rows)
    width = max(r.size for r in rows)
    table = np.full((c, width), np.nan)
    for i, r in enumerate(rows):
        table[i, : r.size] = r
    sizes = np.array([r.size for r in rows])
    means = np.array([r.mean() for r in rows])
    mean = float(np.sum(means * sizes) / sizes.sum())  # every trial weighs the same
    rng = np.random.default_rng(int(seed))
    pick = rng.integers(0, c, size=(int(B), c))  # configurations
    frac = rng.random((int(B), c, width))
    cols = (frac * sizes[pick][..., None]).astype(np.int64)  # trials within each
    draws = table[pick[..., None], cols]
    mask = np.arange(width)[None, None, :] < sizes[pick][..., None]
    boot = np.where(mask, draws, 0.0).sum(axis=(1, 2)) / mask.sum(axis=(1, 2))
    lo, hi = np.quantile(boot, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    w_lo, w_hi = wilson_interval(float(means.mean()) * c, c, level)
    return mean, float(min(lo, w_lo)), float(max(hi, w_hi))


def wilson_interval(successes: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (``successes`` may be fractional: a sum of
    per-configuration rates)."""
    from statistics import NormalDist

    if n < 1:
        return math.nan, math.nan
    z = NormalDist().inv_cdf((1.0 + level) / 2.0)
    p = successes / n
    den = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def _as_sample(successes: Any) -> np.ndarray:
    try:
        x = np.asarray(successes, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"successes: expected a 1-D array of numbers, got {successes!r}") from e
    if x.ndim != 1:
        raise ConfigError(f"successes: expected a 1-D array, got shape {x.shape}")
    return x


@dataclass(frozen=True)
class PlatformInfo:
    """FLYINGTRUST indicators of a platform (NaN and category "unknown" outside the catalogue)."""

    name: str
    category: str  # "real" | "virtual" | "other" | "unknown"
    twr_max: float  # 1
    alpha_xy_max: float  # rad/s^2
    alpha_z_max: float  # rad/s^2


@lru_cache(maxsize=512)
def platform_info(name: str) -> PlatformInfo:
    """Indicators of catalogue platform ``name`` (``platforms.indicators(platforms.get(name))``)."""
    from volary import platforms
    from volary.bench.nav.score import platform_category

    try:
        ind = platforms.indicators(platforms.get(name))
    except (KeyError, ValueError):
        return PlatformInfo(name, "unknown", math.nan, math.nan, math.nan)
    return PlatformInfo(
        name, platform_category(name), ind.twr_max, ind.alpha_xy_max, ind.alpha_z_max
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
    ci_lo: float  # 95 % bootstrap CI of success_rate (or ``level``)
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
        if self.platform_info is not None:
            p = self.platform_info
            row.update(
                category=p.category,
                twr_max=p.twr_max,
                alpha_xy_max=p.alpha_xy_max,
                alpha_z_max=p.alpha_z_max,
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
    """Success (with bootstrap CIs) and metrics per algo, (algo, scenario), (algo, platform) and
    (algo, platform, scenario). Each group's bootstrap seed is derived from ``seed`` and the
    group's key, so a group's CI does not depend on which other groups exist."""
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
    return cols


def _float(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _nanmean(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else math.nan


def _group(
    key: tuple[str, str, str], ix: np.ndarray, cols: dict, B: int, seed: int, level: float
) -> GroupStats:
    succ = cols["success"][ix]
    mean, lo, hi = bootstrap_ci(succ, B=B, seed=_group_seed(seed, key), level=level)
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
        **means,
    )


def _group_seed(seed: int, key: tuple[str, str, str]) -> int:
    h = hashlib.sha256(f"{int(seed)}|{'|'.join(key)}".encode()).digest()
    return int.from_bytes(h[:4], "little")


def order_scenarios(names: Iterable[str]) -> list[str]:
    """Paper order (forest ... perlin, as ``worlds.SCENARIOS``), then other types alphabetically."""
    from volary.bench.nav.score import CLASSIC_SCENARIOS, THEORETICAL_SCENARIOS

    known = CLASSIC_SCENARIOS + THEORETICAL_SCENARIOS
    s = set(names)
    return [x for x in known if x in s] + sorted(s - set(known))


def order_platforms(names: Iterable[str]) -> list[str]:
    """FLYINGTRUST Table I order (18 real, then 18 virtual), then others alphabetically."""
    from volary import platforms

    table = list(platforms.table1())
    s = set(names)
    return [x for x in table if x in s] + sorted(s - set(table))
