"""Inference on benchmark results whose unit of replication is the configuration.

Every platform flies the same fixed configurations (scenes) of each scenario type, and the
configuration decides most outcomes, so the trials of one configuration are not independent
draws. Everything here resamples or permutes configurations, never single trials:

- :func:`score_intervals`: percentile intervals of Score, Var and FinalScore (eq. 12-19, run-
  relative and under the paper's fixed normalization) from a bootstrap of configurations within
  each scenario type, the same draw for every algorithm (their intervals are paired).
- :func:`paired_test`: "does A succeed more often than B" as an exact (or Monte-Carlo) sign-flip
  permutation test on the per-configuration differences in success rate (A and B paired on the
  same platform, configuration and trial), per scenario type and pooled.
- :func:`indicator_correlations`: Spearman's rank correlation of per-platform success with the
  platform indicators (TWR_max, alpha_xy_max, alpha_z_max), with a permutation p-value and a
  bootstrap interval over platforms (the unit there is the platform), for all platforms and for
  the real ones alone.

Seeded numpy Generators throughout; the results depend only on the rows, not on their order.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from volary.bench.nav.schema import TrialResult
from volary.bench.nav.score import (
    PAPER_MAX_VARIANCE,
    ScoreWeights,
    normalized_weights,
)
from volary.bench.nav.stats import _group_seed, order_scenarios
from volary.errors import ConfigError

EXACT_MAX = 16  # configurations with a difference: up to 2^16 sign patterns are enumerated


def _seed(seed: int, *key: str) -> int:
    return _group_seed(seed, key)


# ---------------------------------------------------------------------------- score intervals
@dataclass(frozen=True)
class ScoreInterval:
    """Percentile intervals of one algorithm's composite score (``level``, configurations as
    the unit); point values are :func:`~volary.bench.nav.score.composite_scores`'."""

    algo: str
    score: tuple[float, float]
    var: tuple[float, float]
    final_score: tuple[float, float]  # eq. 17 relative to the run's algorithms
    final_score_fixed: tuple[float, float]  # eq. 17 with the paper's PAPER_MAX_VARIANCE


def score_intervals(
    results: Iterable[TrialResult],
    weights: ScoreWeights | None = None,
    B: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, ScoreInterval]:
    """Bootstrap the composite score over configurations: in every resample each scenario type
    draws its configurations with replacement (the same draw for every algorithm and platform),
    each (algorithm, type, platform) cell's success rate is the mean over the drawn
    configurations' trials, and Score, Var and FinalScore follow eq. 12-19 (platforms and
    types are the fixed design, as in the paper)."""
    w = ScoreWeights() if weights is None else weights
    rows = list(results)
    if not rows:
        raise ConfigError("results: expected at least one TrialResult, got none")
    algos = sorted({r.algo for r in rows})
    scen = order_scenarios({r.scenario for r in rows})
    plats = sorted({r.platform for r in rows})
    confs = {s: sorted({r.config for r in rows if r.scenario == s}) for s in scen}
    a_ix = {a: i for i, a in enumerate(algos)}
    m_ix = {m: i for i, m in enumerate(plats)}
    w_s = normalized_weights(scen, w.scenario_weight)
    w_m = np.array([normalized_weights(plats, w.platform_weight)[m] for m in plats])
    rng = np.random.default_rng(_seed(seed, "score"))
    num = np.zeros((B, len(algos), len(scen), len(plats)))  # successes drawn per cell
    den = np.zeros_like(num)  # trials drawn per cell
    for j, s in enumerate(scen):
        c_ix = {c: i for i, c in enumerate(confs[s])}
        wins = np.zeros((len(algos), len(plats), len(c_ix)))
        n = np.zeros_like(wins)
        for r in rows:
            if r.scenario == s:
                k = (a_ix[r.algo], m_ix[r.platform], c_ix[r.config])
                wins[k] += bool(r.success)
                n[k] += 1
        pick = rng.integers(0, len(c_ix), size=(B, len(c_ix)))
        num[:, :, j] = wins[:, :, pick].sum(-1).transpose(2, 0, 1)
        den[:, :, j] = n[:, :, pick].sum(-1).transpose(2, 0, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        S = num / den  # (B, A, S, M); NaN where a cell drew no trial
    ws = np.array([w_s[s] for s in scen])
    present = np.isfinite(S)
    W = ws[None, None, :, None] * w_m[None, None, None, :] * present
    # eq. 19 for missing types, and the single-missing-cell convention: weights over present
    hat = np.nansum(W * np.nan_to_num(S), axis=(2, 3)) / W.sum(axis=(2, 3))
    var = (W * np.nan_to_num(S - hat[..., None, None]) ** 2).sum(axis=(2, 3)) / W.sum(axis=(2, 3))
    score = 100.0 * hat
    vmax = var.max(axis=1, keepdims=True)
    norm = np.where(vmax > 0, var / np.where(vmax > 0, vmax, 1.0), 0.0)
    final = score * (1.0 - w.beta * norm)
    fixed = score * (1.0 - w.beta * var / PAPER_MAX_VARIANCE)
    q = [(1.0 - level) / 2.0, (1.0 + level) / 2.0]

    def iv(x: np.ndarray) -> tuple[float, float]:
        lo, hi = np.quantile(x, q)
        return float(lo), float(hi)

    return {
        a: ScoreInterval(a, iv(score[:, i]), iv(var[:, i]), iv(final[:, i]), iv(fixed[:, i]))
        for a, i in a_ix.items()
    }


# ------------------------------------------------------------------------------ paired tests
@dataclass(frozen=True)
class PairedTest:
    """A vs B on success, paired by (platform, configuration, trial); ``scenario`` "" pools the
    types. ``diff``: mean over configurations of (rate A - rate B) at that configuration;
    ``p_value``: two-sided sign-flip permutation test of the configuration differences."""

    algo_a: str
    algo_b: str
    scenario: str
    n_configs: int
    n_differing: int  # configurations where the two rates differ
    rate_a: float
    rate_b: float
    diff: float
    p_value: float
    method: str  # "exact" or "monte-carlo N"

    @property
    def significant(self) -> bool:
        return self.p_value < 0.05


def config_differences(
    results: Iterable[TrialResult], a: str, b: str, scenario: str = ""
) -> tuple[np.ndarray, float, float]:
    """Per-configuration differences of success rate A - B over the (platform, trial) pairs
    both flew; (diffs sorted by (type, configuration), rate A, rate B over those pairs)."""
    out: dict[str, dict[tuple, bool]] = {a: {}, b: {}}
    for r in results:
        if r.algo in out and (not scenario or r.scenario == scenario):
            out[r.algo][(r.scenario, r.config, r.platform, r.trial)] = bool(r.success)
    keys = sorted(set(out[a]) & set(out[b]))
    per: dict[tuple, list[float]] = defaultdict(list)
    for k in keys:
        per[k[:2]].append(float(out[a][k]) - float(out[b][k]))
    d = np.array([np.mean(per[c]) for c in sorted(per)])
    ra = float(np.mean([out[a][k] for k in keys])) if keys else math.nan
    rb = float(np.mean([out[b][k] for k in keys])) if keys else math.nan
    return d, ra, rb


def sign_flip_p(d: np.ndarray, n_perm: int = 100_000, seed: int = 0) -> tuple[float, str]:
    """Two-sided p-value of mean(d) = 0 against sign flips of the paired differences ``d``:
    exact over every sign pattern of the nonzero ones when there are at most EXACT_MAX of
    them, else ``n_perm`` seeded random patterns ((1 + hits) / (1 + n_perm))."""
    nz = np.asarray(d, dtype=np.float64)
    nz = nz[nz != 0]
    if nz.size == 0:
        return 1.0, "exact"
    obs = abs(nz.sum()) - 1e-12
    if nz.size <= EXACT_MAX:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=nz.size)))
        return float(np.mean(np.abs(signs @ nz) >= obs)), "exact"
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, n_perm, 10_000):
        k = min(10_000, n_perm - start)
        signs = rng.choice((1.0, -1.0), size=(k, nz.size))
        hits += int((np.abs(signs @ nz) >= obs).sum())
    return (1 + hits) / (1 + n_perm), f"monte-carlo {n_perm}"


def paired_test(
    results: Sequence[TrialResult], a: str, b: str, scenario: str = "", seed: int = 0
) -> PairedTest:
    """A vs B (:class:`PairedTest`) over the configurations of ``scenario`` ("" = all types)."""
    d, ra, rb = config_differences(results, a, b, scenario)
    if d.size == 0:
        raise ConfigError(f"no trials flown by both {a!r} and {b!r} in {scenario or 'any type'}")
    p, method = sign_flip_p(d, seed=_seed(seed, a, b, scenario))
    return PairedTest(
        a, b, scenario, int(d.size), int((d != 0).sum()), ra, rb, float(d.mean()), p, method
    )


def paired_tests(results: Sequence[TrialResult], seed: int = 0) -> list[PairedTest]:
    """Every pair of algorithms (alphabetical order as A, B), pooled and per scenario type."""
    rows = list(results)
    algos = sorted({r.algo for r in rows})
    scen = order_scenarios({r.scenario for r in rows})
    out = []
    for a, b in itertools.combinations(algos, 2):
        for s in ("", *scen):
            try:
                out.append(paired_test(rows, a, b, s, seed))
            except ConfigError:
                continue
    return out


# ------------------------------------------------------------------------------ correlations
@dataclass(frozen=True)
class Correlation:
    """Spearman's rho of per-platform success with an indicator over ``n`` platforms."""

    algo: str
    indicator: str
    platforms: str  # "all" or "real"
    n: int
    rho: float
    p_value: float  # two-sided permutation test over platforms
    ci: tuple[float, float]  # percentile bootstrap over platforms


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation over the pairs where both are finite (average ranks for
    ties); NaN with fewer than 3 pairs or when either is constant."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3:
        return math.nan
    rx, ry = _ranks(x[ok]), _ranks(y[ok])
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    r = np.empty(x.size)
    r[order] = np.arange(x.size, dtype=np.float64)
    for v in np.unique(x):  # ties share their mean rank
        m = x == v
        r[m] = r[m].mean()
    return r


def correlation_test(
    x: np.ndarray, y: np.ndarray, n_perm: int = 10_000, B: int = 2000, seed: int = 0
) -> tuple[float, float, tuple[float, float]]:
    """(rho, permutation p, 95 % bootstrap interval); p = (1 + hits) / (1 + n_perm)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    rho = spearman(x, y)
    if math.isnan(rho):
        return math.nan, math.nan, (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    rx, ry = _ranks(x), _ranks(y)
    ry = (ry - ry.mean()) / ry.std()
    rx = (rx - rx.mean()) / rx.std()
    perms = np.argsort(rng.random((n_perm, y.size)), axis=1)
    null = (rx[None, :] * ry[perms]).mean(axis=1)
    p = (1 + int((np.abs(null) >= abs(rho) - 1e-12).sum())) / (1 + n_perm)
    boots = []
    for idx in rng.integers(0, y.size, size=(B, y.size)):
        r = spearman(x[idx], y[idx])
        if not math.isnan(r):
            boots.append(r)
    lo, hi = np.quantile(boots, [0.025, 0.975]) if boots else (math.nan, math.nan)
    return rho, p, (float(lo), float(hi))


INDICATORS = (
    ("twr_max", "TWR_max"),
    ("alpha_xy_max", "alpha_xy_max"),
    ("alpha_z_max", "alpha_z_max"),
)


def indicator_correlations(summary, seed: int = 0) -> list[Correlation]:
    """Per algorithm and indicator, for all catalogue platforms and the real ones alone."""
    out = []
    for a in summary.algos:
        gs = [g for g in summary.by_platform if g.algo == a and g.platform_info is not None]
        for subset in ("all", "real"):
            sel = [g for g in gs if subset == "all" or g.platform_info.category == "real"]
            if len(sel) < 4:
                continue
            y = np.array([g.success_rate for g in sel])
            for attr, name in INDICATORS:
                x = np.array([getattr(g.platform_info, attr) for g in sel], dtype=np.float64)
                if not np.isfinite(x).all():
                    continue
                rho, p, ci = correlation_test(x, y, seed=_seed(seed, a, attr, subset))
                out.append(Correlation(a, name, subset, len(sel), rho, p, ci))
    return out
