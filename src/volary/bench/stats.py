"""Intervals and multiple-comparison corrections that every study's report may use (layer 5).

- :func:`bootstrap_ci`: a sample mean with its percentile bootstrap interval (Efron and
  Tibshirani; FLYINGTRUST Sec. IV-B resamples B = 1000 times).
- :func:`cluster_bootstrap_ci`: the same when the samples come in clusters (configurations,
  courses), resampling clusters and then samples within them, with a Wilson floor for few
  clusters.
- :func:`wilson_interval`, :func:`holm`, :func:`holm_by_family`.

FLYINGTRUST's summaries of its trial rows (per algorithm, platform and scenario) are the study's
(:mod:`volary.studies.flyingtrust.stats`); ``docs/extending.md`` builds a new study's report on
this module.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from volary.errors import ConfigError


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
    groups: Sequence[Any] | np.ndarray,
    B: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    strata: Sequence[Any] | None = None,
    rate: bool = True,
) -> tuple[float, float, float]:
    """(mean, lo, hi) of a mean whose trials are clustered: ``groups`` holds one row of outcomes
    per configuration (the unit of replication), e.g. the 36 platforms that flew it. Trials of
    one configuration share its scene, so they are not independent draws. ``strata``: one label
    per row (the scenario type); configurations are then resampled within their type, so the
    fixed mix of types is not mistaken for sampling variation (per-platform and pooled rates).

    The interval is a two-stage percentile bootstrap (configurations resampled with replacement
    within each stratum, then trials within each configuration; ``B`` resamples, seeded), and
    for a success rate (``rate``) its hull with a Wilson score interval on the
    configuration-level rate, n = the number of configurations; with several strata the Wilson
    bound is stratified: each type's Wilson distances from its rate, weighted by the type's
    share of trials, added in quadrature. The Wilson part keeps the interval from collapsing at
    0 % and 100 % and from the percentile bootstrap's under-coverage with few clusters
    (coverage on protocol-shaped simulations:
    ``experiments/flyingtrust/interval-coverage/run.py``). NaN outcomes are left out;
    configurations with none are dropped. Every trial weighs the same in the mean.
    """
    if isinstance(B, bool) or not isinstance(B, int | np.integer) or B < 1:
        raise ConfigError(f"B: expected an int >= 1, got {B!r}")
    if isinstance(level, bool) or not isinstance(level, float | int) or not 0.0 < level < 1.0:
        raise ConfigError(f"level: expected a number in (0, 1), got {level!r}")
    labels = [0] * len(groups) if strata is None else list(strata)
    if len(labels) != len(groups):
        raise ConfigError(
            f"strata: expected one label per group ({len(groups)}), got {len(labels)}"
        )
    by: dict[Any, list[np.ndarray]] = {}
    for g, lab in zip(groups, labels, strict=True):
        r = np.asarray(g, dtype=np.float64).ravel()
        r = r[~np.isnan(r)]
        if r.size:
            by.setdefault(lab, []).append(r)
    if not by:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(int(seed))
    sums, counts = np.zeros(int(B)), np.zeros(int(B))
    total, n_all, wilson = 0.0, 0, []  # wilson: (trials, config-level rate, lo, hi) per stratum
    for rows in by.values():  # insertion order: the caller's row order, made canonical by it
        s_b, n_b = _two_stage(rows, int(B), rng)
        sums += s_b
        counts += n_b
        n_h = sum(r.size for r in rows)
        total += sum(float(r.sum()) for r in rows)
        n_all += n_h
        if rate:
            p_c = float(np.mean([r.mean() for r in rows]))
            wilson.append((n_h, p_c, *wilson_interval(p_c * len(rows), len(rows), level)))
    mean = total / n_all
    lo, hi = (float(v) for v in np.quantile(sums / counts, [(1 - level) / 2, (1 + level) / 2]))
    if rate:
        if len(wilson) == 1:
            w_lo, w_hi = wilson[0][2:]
        else:
            w_lo = mean - math.sqrt(sum((n / n_all * (p - a)) ** 2 for n, p, a, _ in wilson))
            w_hi = mean + math.sqrt(sum((n / n_all * (b - p)) ** 2 for n, p, _, b in wilson))
        lo, hi = max(0.0, min(lo, w_lo)), min(1.0, max(hi, w_hi))
    return mean, lo, hi


def _two_stage(rows: list[np.ndarray], B: int, rng: np.random.Generator) -> tuple:
    """Per resample: the sum and the count of the trials drawn by picking len(rows)
    configurations with replacement, then as many trials within each as it has."""
    c = len(rows)
    width = max(r.size for r in rows)
    table = np.zeros((c, width))
    for i, r in enumerate(rows):
        table[i, : r.size] = r
    sizes = np.array([r.size for r in rows])
    pick = rng.integers(0, c, size=(B, c))  # configurations
    frac = rng.random((B, c, width))
    cols = (frac * sizes[pick][..., None]).astype(np.int64)  # trials within each
    mask = np.arange(width)[None, None, :] < sizes[pick][..., None]
    draws = np.where(mask, table[pick[..., None], cols], 0.0)
    return draws.sum(axis=(1, 2)), mask.sum(axis=(1, 2)).astype(np.float64)


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


def holm(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm 1979) of one family of tests, in the input
    order: sort the m finite p-values ascending, p_(i) -> max over j <= i of
    min(1, (m - j + 1) p_(j)). Rejecting where the adjusted value is below alpha keeps the
    chance of any false claim in the family at most alpha, whatever the tests' dependence.
    NaN stays NaN and does not count in m. (scipy.stats.false_discovery_control gives the
    Benjamini-Hochberg FDR alternative.)"""
    p = np.asarray(p_values, dtype=np.float64).ravel()
    if np.any((p < 0) | (p > 1)):
        raise ConfigError(f"p_values: expected numbers in [0, 1] or NaN, got {p_values!r}")
    out = np.full(p.shape, math.nan)
    ok = np.flatnonzero(~np.isnan(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    m = order.size
    steps = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(steps)
    return out


def holm_by_family(p_values: Sequence[float] | np.ndarray, families: Sequence[Any]) -> np.ndarray:
    """:func:`holm` applied within each family (one label per p-value), in the input order."""
    p = np.asarray(p_values, dtype=np.float64).ravel()
    labels = list(families)
    if len(labels) != p.size:
        raise ConfigError(f"families: expected one label per p-value ({p.size}), got {len(labels)}")
    out = np.full(p.shape, math.nan)
    for lab in dict.fromkeys(labels):
        ix = np.array([i for i, x in enumerate(labels) if x == lab])
        out[ix] = holm(p[ix])
    return out


def _as_sample(successes: Any) -> np.ndarray:
    try:
        x = np.asarray(successes, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"successes: expected a 1-D array of numbers, got {successes!r}") from e
    if x.ndim != 1:
        raise ConfigError(f"successes: expected a 1-D array, got shape {x.shape}")
    return x
