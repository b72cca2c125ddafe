"""What the protocol's design can detect: per scenario type, the smallest difference in success
rate between two planners that a paired sign-flip test over ``n`` configurations finds at 80 %
power.

The comparison the report makes (:func:`volary.studies.flyingtrust.compare.paired_test`) takes, per
configuration, the difference of the two planners' success rates over the platforms both flew,
and tests its mean with sign flips. Its power depends on how much those per-configuration
differences scatter within a type. The model here: the ``n`` differences are independent
normal draws with mean ``delta`` and the type's spread ``sd`` (:func:`config_sd`: the median,
over the planner pairs in the rows, of the standard deviation of their per-configuration
differences). :func:`detectable_difference` bisects ``delta`` on the power that
``scipy.stats.power`` simulates for the same sign-flip test (exact at up to 16 configurations,
Monte-Carlo flips beyond), with common random numbers so that power rises with ``delta``.

A per-type claim in the report is adjusted over the seven types (Holm), so the first claim of a
family must reach ``0.05 / 7``; :func:`power_table` gives both levels.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from volary.errors import ConfigError
from volary.studies.flyingtrust.compare import EXACT_MAX, config_differences
from volary.studies.flyingtrust.schema import TrialResult
from volary.studies.flyingtrust.stats import order_scenarios

POWER = 0.8
LEVELS = (0.05, 0.05 / 7)  # one type alone; Holm's first step over the seven types
FLIPS = 2000  # Monte-Carlo sign patterns per simulated study beyond EXACT_MAX configurations


def config_sds(results: Sequence[TrialResult], scenario: str) -> list[float]:
    """The standard deviation of the per-configuration success differences in ``scenario`` of
    every algorithm pair with at least two configurations (empty when there is none)."""
    rows = [r for r in results if r.scenario == scenario]
    sds = []
    for a, b in itertools.combinations(sorted({r.algo for r in rows}), 2):
        d, _, _ = config_differences(rows, a, b, scenario)
        if d.size >= 2:
            sds.append(float(np.std(d, ddof=1)))
    return sds


def sign_flip_pvalues(x: np.ndarray, axis: int = -1, seed: int = 0) -> np.ndarray:
    """Two-sided sign-flip p-values of mean = 0 along ``axis`` (vectorized over the rest):
    every sign pattern at up to :data:`EXACT_MAX` values (as the report's test), else
    :data:`FLIPS` seeded patterns with p = (1 + hits) / (1 + FLIPS)."""
    x = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    n = x.shape[-1]
    obs = np.abs(x.sum(-1)) - 1e-12
    if n <= EXACT_MAX:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
        return (np.abs(x @ signs.T) >= obs[..., None]).mean(-1)
    signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(FLIPS, n))
    return (1 + (np.abs(x @ signs.T) >= obs[..., None]).sum(-1)) / (1 + FLIPS)


def _power(delta: float, sd: float, n: int, alpha: float, resamples: int, seed: int) -> float:
    from scipy.stats import power

    def rvs(size: tuple[int, ...]) -> np.ndarray:
        z = np.random.default_rng(seed).standard_normal(size)  # the same draws for every delta
        return delta + sd * z

    res = power(sign_flip_pvalues, rvs, (n,), significance=alpha, n_resamples=resamples)
    return float(np.ravel(res.power)[0])


@lru_cache(maxsize=64)
def detectable_ratio(
    n_configs: int, alpha: float = 0.05, power: float = POWER, resamples: int = 4000, seed: int = 0
) -> float:
    """The smallest mean difference, in units of the per-configuration spread, that the
    sign-flip test over ``n_configs`` normal differences detects at level ``alpha`` with
    probability ``power``. The test is scale-free (its p-value does not change when every
    difference is multiplied by a constant), so the detectable difference at spread ``sd`` is
    ``sd`` times this. inf when no ``n_configs`` configurations can reach ``alpha`` (the
    smallest exact p is 2 / 2^n)."""
    if isinstance(n_configs, bool) or not isinstance(n_configs, int) or n_configs < 1:
        raise ConfigError(f"n_configs: expected an int >= 1, got {n_configs!r}")
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ConfigError(f"alpha, power: expected values in (0, 1), got {alpha!r}, {power!r}")
    if n_configs <= EXACT_MAX and 2.0 / 2**n_configs >= alpha:
        return math.inf

    def ok(d: float) -> bool:
        return _power(d, 1.0, n_configs, alpha, resamples, seed) >= power

    lo, hi = 0.0, 16.0
    if not ok(hi):
        return math.inf
    for _ in range(14):  # 16 / 2^14 = 0.001 sd
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def detectable_difference(
    sd: float, n_configs: int, alpha: float = 0.05, power: float = POWER
) -> float:
    """The smallest mean success difference (0-1) that ``n_configs`` configurations detect at
    ``alpha`` with ``power`` when the per-configuration differences scatter with ``sd``
    (:func:`detectable_ratio` times ``sd``); inf where the design cannot reach ``alpha``."""
    if not math.isfinite(sd) or sd < 0:
        raise ConfigError(f"sd: expected a finite number >= 0, got {sd!r}")
    r = detectable_ratio(n_configs, alpha, power)
    return math.inf if math.isinf(r) else sd * r


@dataclass(frozen=True)
class PowerRow:
    """Smallest detectable success difference (0-1) in one type at ``n_configs`` and ``alpha``."""

    scenario: str
    sd: float  # median over the algorithm pairs of their per-configuration spread (config_sds)
    sd_min: float
    sd_max: float
    n_pairs: int
    n_configs: int
    alpha: float
    detectable: float  # inf: cannot reach alpha / not detectable


def power_table(
    results: Iterable[TrialResult],
    n_configs: Sequence[int] = (10, 30),
    levels: Sequence[float] = LEVELS,
    power: float = POWER,
) -> list[PowerRow]:
    """:func:`detectable_difference` for every scenario type of ``results`` at the median
    spread of its algorithm pairs, for each configuration count and level."""
    rows = list(results)
    out = []
    for s in order_scenarios({r.scenario for r in rows}):
        sds = config_sds(rows, s)
        if not sds:
            continue
        sd = float(np.median(sds))
        for n in n_configs:
            for a in levels:
                mdd = detectable_difference(sd, n, a, power)
                out.append(PowerRow(s, sd, min(sds), max(sds), len(sds), n, a, mdd))
    return out


__all__ = [
    "LEVELS",
    "POWER",
    "PowerRow",
    "config_sds",
    "detectable_difference",
    "detectable_ratio",
    "power_table",
    "sign_flip_pvalues",
]
