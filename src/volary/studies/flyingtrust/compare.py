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

from volary.bench.stats import holm
from volary.errors import ConfigError
from volary.studies.flyingtrust.schema import TrialResult
from volary.studies.flyingtrust.score import (
    PAPER_MAX_VARIANCE,
    ScoreWeights,
    normalized_weights,
)
from volary.studies.flyingtrust.stats import _group_seed, order_scenarios

EXACT_MAX = 16  # configurations with a difference: up to 2^16 sign patterns are enumerated


def _seed(seed: int, *key: str) -> int:
    return _group_seed(seed, key)


# ---------------------------------------------------------------------------- score intervals
@dataclass(frozen=True)
class ScoreInterval:
    """Percentile intervals of one algorithm's composite score (``level``, configurations as
    the unit); point values are :func:`~volary.studies.flyingtrust.score.composite_scores`'."""

    algo: str
    score: tuple[float, float]
    var: tuple[float, float]
    final_score: tuple[float, float]  # eq. 17 relative to the run's algorithms
    final_score_fixed: tuple[float, float]  # eq. 17 with the paper's PAPER_MAX_VARIANCE


@dataclass(frozen=True)
class ScoreDraws:
    """Bootstrap draws of every algorithm's composite score (configurations resampled within
    their type, the same draw for every algorithm): arrays of shape (B, n_algos), columns in
    ``algos`` order."""

    algos: tuple[str, ...]
    score: np.ndarray
    var: np.ndarray
    final_score: np.ndarray  # eq. 17 relative to the run's algorithms
    final_score_fixed: np.ndarray  # eq. 17 with the paper's PAPER_MAX_VARIANCE


def score_draws(
    results: Iterable[TrialResult],
    weights: ScoreWeights | None = None,
    B: int = 2000,
    seed: int = 0,
) -> ScoreDraws:
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
    return ScoreDraws(tuple(algos), score, var, final, fixed)


def _percentile(x: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.quantile(x, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return float(lo), float(hi)


def score_intervals(
    results: Iterable[TrialResult] | ScoreDraws,
    weights: ScoreWeights | None = None,
    B: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, ScoreInterval]:
    """Percentile intervals of each algorithm's Score, Var and FinalScore from
    :func:`score_draws` (``results`` may be the draws themselves)."""
    d = results if isinstance(results, ScoreDraws) else score_draws(results, weights, B, seed)
    return {
        a: ScoreInterval(
            a,
            _percentile(d.score[:, i], level),
            _percentile(d.var[:, i], level),
            _percentile(d.final_score[:, i], level),
            _percentile(d.final_score_fixed[:, i], level),
        )
        for i, a in enumerate(d.algos)
    }


@dataclass(frozen=True)
class ScoreDifference:
    """FinalScore (the paper's normalization) of A minus B with its paired bootstrap interval
    (both from the same configuration draws) and a two-sided bootstrap p-value."""

    algo_a: str
    algo_b: str
    diff: float  # point difference of composite_scores' final_score_fixed
    ci: tuple[float, float]
    p_value: float  # 2 min(P*(d <= 0), P*(d >= 0)), (1 + count) / (1 + B)


def score_differences(
    draws: ScoreDraws, points: dict[str, float], level: float = 0.95
) -> list[ScoreDifference]:
    """Every pair (alphabetical A, B) of FinalScore differences from the paired draws.
    ``points``: each algorithm's point FinalScore (composite_scores' final_score_fixed)."""
    B = draws.final_score_fixed.shape[0]
    out = []
    for (i, a), (j, b) in itertools.combinations(enumerate(draws.algos), 2):
        d = draws.final_score_fixed[:, i] - draws.final_score_fixed[:, j]
        tail = min(int((d <= 0).sum()), int((d >= 0).sum()))
        p = min(1.0, 2.0 * (1 + tail) / (1 + B))
        out.append(ScoreDifference(a, b, points[a] - points[b], _percentile(d, level), p))
    return out


def score_letters(diffs: Sequence[ScoreDifference], points: dict[str, float]) -> dict[str, str]:
    """:func:`compact_letters` of FinalScore: pairs separated where the Holm-adjusted (over all
    pairs) bootstrap p-value of their difference is below 0.05."""
    adjusted = holm([d.p_value for d in diffs])
    sep = [(d.algo_a, d.algo_b) for d, p in zip(diffs, adjusted, strict=True) if p < 0.05]
    return compact_letters(points, sep)


def compact_letters(
    means: dict[str, float], different: Iterable[tuple[str, str]]
) -> dict[str, str]:
    """A compact letter display (Piepho 2004, insert-and-absorb): two algorithms share a letter
    exactly when they were not shown different. ``means`` orders the letters (a: the group of
    the best); ``different``: the pairs a test separated (after adjustment)."""
    names = sorted(means, key=lambda k: (-means[k], k))
    groups: list[set[str]] = [set(names)]
    for x, y in different:
        nxt: list[set[str]] = []
        for g in groups:
            if x in g and y in g:
                nxt += [g - {x}, g - {y}]
            else:
                nxt.append(g)
        # absorb: drop a group contained in another (and duplicates)
        uniq = [g for k, g in enumerate(nxt) if g and g not in nxt[:k]]
        groups = [g for g in uniq if not any(g < h for h in uniq)]
    rank = {n: k for k, n in enumerate(names)}
    groups.sort(key=lambda g: sorted(rank[n] for n in g))
    letters = "abcdefghijklmnopqrstuvwxyz"
    return {n: "".join(letters[k] for k, g in enumerate(groups) if n in g) for n in names}


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
    sd: float = math.nan  # standard deviation of the configuration differences (power.py)

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
    sd = float(d.std(ddof=1)) if d.size > 1 else math.nan
    return PairedTest(
        a, b, scenario, int(d.size), int((d != 0).sum()), ra, rb, float(d.mean()), p, method, sd
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
    idx = rng.integers(0, y.size, size=(B, y.size))
    if np.isfinite(x).all() and np.isfinite(y).all():
        boots = _spearman_rows(x[idx], y[idx])
    else:
        boots = np.array([spearman(x[i], y[i]) for i in idx])
    boots = boots[np.isfinite(boots)]
    lo, hi = np.quantile(boots, [0.025, 0.975]) if boots.size else (math.nan, math.nan)
    return rho, p, (float(lo), float(hi))


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """:func:`spearman` of each row pair of finite (m, n) arrays at once; NaN where a row is
    constant."""
    from scipy.stats import rankdata

    rx, ry = rankdata(x, axis=1), rankdata(y, axis=1)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    sx, sy = np.sqrt((rx * rx).sum(1)), np.sqrt((ry * ry).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (rx * ry).sum(1) / (sx * sy)
    return np.where((sx > 0) & (sy > 0), np.clip(r, -1.0, 1.0), math.nan)


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


# ---------------------------------------------------------------------- partial correlations
CONTROLS: tuple[tuple[str, ...], ...] = (("mass",), ("mass", "size"))  # PlatformInfo fields


@dataclass(frozen=True)
class PartialCorrelation:
    """Spearman partial correlation of per-platform success with an indicator, holding the
    ``controls`` (platform mass, size) fixed, over ``n`` platforms."""

    algo: str
    indicator: str
    controls: str  # "mass" or "mass+size"
    n: int
    rho: float
    p_value: float  # two-sided permutation test (Freedman-Lane: residuals of success permuted)
    ci: tuple[float, float]  # percentile bootstrap over platforms


def _partial_rows(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Spearman partial correlations of each row of x (m, n) and y (m, n) given z (m, n, k):
    ranks (ties averaged) along each row, least-squares residuals on [1, ranks of z], then the
    residuals' Pearson correlation; NaN where a residual is constant (z explains it)."""
    from scipy.stats import rankdata

    rx, ry = rankdata(x, axis=-1), rankdata(y, axis=-1)
    D = np.concatenate([np.ones(z.shape[:2] + (1,)), rankdata(z, axis=1)], axis=2)
    P = np.linalg.pinv(D)  # (m, k + 1, n)

    def resid(v: np.ndarray) -> np.ndarray:
        return v - (D @ (P @ v[..., None]))[..., 0]

    ex, ey = resid(rx), resid(ry)
    sx, sy = np.linalg.norm(ex, axis=-1), np.linalg.norm(ey, axis=-1)
    ok = (sx > 1e-9 * x.shape[-1]) & (sy > 1e-9 * x.shape[-1])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, (ex * ey).sum(-1) / (sx * sy), math.nan)


def partial_spearman(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> float:
    """Spearman's partial correlation of x and y given the columns of z (n, k): the Pearson
    correlation of the residuals of rank(x) and rank(y) after a least-squares fit on the ranks
    of z with an intercept. NaN when either residual is constant."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    z = np.asarray(z, dtype=np.float64).reshape(x.size, -1)
    return float(_partial_rows(x[None], y[None], z[None])[0])


def partial_test(
    x: np.ndarray, y: np.ndarray, z: np.ndarray, n_perm: int = 10_000, B: int = 2000, seed: int = 0
) -> tuple[float, float, tuple[float, float]]:
    """(partial rho, permutation p, 95 % bootstrap interval over the units). The p-value
    permutes the residuals of rank(y) on the controls and refits (Freedman and Lane 1983),
    p = (1 + hits) / (1 + n_perm). It holds its level when x is not itself a near-exact
    function of the controls (in the catalogue the indicators' Spearman with mass is -0.33 to
    -0.38); when both x and y are, their rank residuals are a few swaps that coincide and the
    test rejects too often (tests/test_nav_claims.py measures the catalogue's shape)."""
    from scipy.stats import rankdata

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    z = np.asarray(z, dtype=np.float64).reshape(x.size, -1)
    rho = partial_spearman(x, y, z)
    if math.isnan(rho):
        return math.nan, math.nan, (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    D = np.column_stack([np.ones(x.size), rankdata(z, axis=0)])
    R = np.eye(x.size) - D @ np.linalg.pinv(D)
    ex, ey = R @ rankdata(x), R @ rankdata(y)
    perms = np.argsort(rng.random((n_perm, y.size)), axis=1)
    ey_p = ey[perms] @ R.T  # each permuted residual refitted on the controls
    null = (ey_p @ ex) / (np.linalg.norm(ey_p, axis=1) * np.linalg.norm(ex))
    p = (1 + int((np.abs(null) >= abs(rho) - 1e-12).sum())) / (1 + n_perm)
    idx = rng.integers(0, y.size, size=(B, y.size))
    boots = _partial_rows(x[idx], y[idx], z[idx])
    boots = boots[np.isfinite(boots)]
    lo, hi = np.quantile(boots, [0.025, 0.975]) if boots.size else (math.nan, math.nan)
    return rho, p, (float(lo), float(hi))


def partial_correlations(summary, seed: int = 0) -> list[PartialCorrelation]:
    """Per algorithm and indicator, over all catalogue platforms: the indicator's Spearman
    partial correlation with success holding mass, and mass and size, fixed (:data:`CONTROLS`).
    Success falls with size (heavy vehicles are large and fly the same scenes), so a raw
    indicator correlation can be size in disguise; what remains here is the indicator's own."""
    out = []
    for a in summary.algos:
        sel = [g for g in summary.by_platform if g.algo == a and g.platform_info is not None]
        if len(sel) < 6:
            continue
        y = np.array([g.success_rate for g in sel])
        for attr, name in INDICATORS:
            x = np.array([getattr(g.platform_info, attr) for g in sel], dtype=np.float64)
            for ctl in CONTROLS:
                z = np.array([[getattr(g.platform_info, c) for c in ctl] for g in sel], float)
                if not (np.isfinite(x).all() and np.isfinite(z).all()):
                    continue
                rho, p, ci = partial_test(x, y, z, seed=_seed(seed, a, attr, *ctl))
                out.append(PartialCorrelation(a, name, "+".join(ctl), len(sel), rho, p, ci))
    return out
