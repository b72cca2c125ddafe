"""Claims that say where they tie (issue 59): paired FinalScore differences, compact letter
displays, partial correlations holding mass and size fixed, and what the design can detect."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from test_nav_stats import synthetic_results
from volary.errors import ConfigError
from volary.studies.flyingtrust.compare import (
    compact_letters,
    partial_spearman,
    partial_test,
    score_differences,
    score_draws,
    score_intervals,
)
from volary.studies.flyingtrust.power import (
    detectable_difference,
    detectable_ratio,
    sign_flip_pvalues,
)
from volary.studies.flyingtrust.report import ranking_sentence
from volary.studies.flyingtrust.score import composite_scores


# ------------------------------------------------------------------- FinalScore differences
def test_score_differences_are_paired_on_the_interval_draws():
    rows = synthetic_results(configs=5)
    draws = score_draws(rows, B=400)
    points = {s.algo: s.final_score_fixed for s in composite_scores(rows)}
    diffs = score_differences(draws, points)
    assert len(diffs) == math.comb(len(points), 2)
    for d in diffs:
        assert d.diff == pytest.approx(points[d.algo_a] - points[d.algo_b])
        assert d.ci[0] <= d.ci[1] and 0 < d.p_value <= 1
        # the interval of A - B comes from the same draws as each algorithm's own interval
        i, j = draws.algos.index(d.algo_a), draws.algos.index(d.algo_b)
        delta = draws.final_score_fixed[:, i] - draws.final_score_fixed[:, j]
        assert d.ci == pytest.approx(tuple(np.quantile(delta, [0.025, 0.975])))
    # the draws give the same intervals as score_intervals with the same seed
    assert score_intervals(draws) == score_intervals(rows, B=400)


def test_identical_algorithms_differ_by_nothing():
    rows = synthetic_results(configs=4)
    twin = [replace(r, algo="twin") for r in rows if r.algo == "mapper"]
    draws = score_draws(rows + twin, B=300)
    pts = {s.algo: s.final_score_fixed for s in composite_scores(rows + twin)}
    d = next(x for x in score_differences(draws, pts) if {x.algo_a, x.algo_b} == {"mapper", "twin"})
    assert d.diff == 0 and d.ci == (0.0, 0.0) and d.p_value == 1.0


# ----------------------------------------------------------------------------- letter display
def test_compact_letters_share_a_letter_exactly_when_not_separated():
    means = {"A": 5.0, "B": 4.0, "C": 3.0, "D": 1.0}
    sep = [("A", "C"), ("A", "D"), ("B", "D")]
    got = compact_letters(means, sep)
    assert got == {"A": "a", "B": "ab", "C": "bc", "D": "c"}
    for x in means:
        for y in means:
            if x != y:
                shares = bool(set(got[x]) & set(got[y]))
                assert shares == ((x, y) not in sep and (y, x) not in sep)
    assert compact_letters(means, []) == dict.fromkeys(means, "a")
    assert ranking_sentence(["A", "B", "C", "D"], got) == "A ≈ B ≈ C ≈ D"
    every = [(x, y) for x in means for y in means if x < y]
    assert ranking_sentence(list(means), compact_letters(means, every)) == "A > B > C > D"


# ---------------------------------------------------------------------- partial correlations
def test_partial_spearman_removes_a_shared_cause():
    """Shaped as the catalogue: success falls with mass (Spearman about -0.9), an indicator
    moves loosely with mass (about -0.45) and has no effect of its own. The raw correlation is
    clearly positive, the partial one is null: the permutation test rejects about 5 % of 200
    such data sets at 0.05, while an indicator with an effect of its own is found every time."""
    rng = np.random.default_rng(3)
    rejected, found, raw = 0, 0, []
    for _ in range(200):
        mass = rng.uniform(0.5, 5.0, 36)
        indicator = -mass + 2.5 * rng.standard_normal(36)
        success = -mass + 0.5 * rng.standard_normal(36)
        raw.append(stats.spearmanr(indicator, success).statistic)
        _, p, _ = partial_test(indicator, success, mass[:, None], n_perm=500, B=2)
        rejected += p < 0.05
        own = rng.standard_normal(36)
        noise = 0.5 * rng.standard_normal(36)
        _, p2, _ = partial_test(own - mass, own - mass + noise, mass[:, None], n_perm=500, B=2)
        found += p2 < 0.05
    assert np.mean(raw) > 0.35
    assert 2 <= rejected <= 20  # 10 expected; binomial(200, 0.05) stays in 2-20 w.p. > 0.999
    assert found == 200


def test_partial_spearman_is_pearson_of_rank_residuals():
    rng = np.random.default_rng(4)
    x, y, z = rng.standard_normal((3, 30))
    rx, ry, rz = (stats.rankdata(v) for v in (x, y, z))
    A = np.column_stack([np.ones(30), rz])
    ex = rx - A @ np.linalg.lstsq(A, rx, rcond=None)[0]
    ey = ry - A @ np.linalg.lstsq(A, ry, rcond=None)[0]
    assert partial_spearman(x, y, z[:, None]) == pytest.approx(stats.pearsonr(ex, ey).statistic)
    assert math.isnan(partial_spearman(z, y, z[:, None]))  # x explained by the control


# ------------------------------------------------------------------------------------ power
def test_sign_flip_pvalues_match_the_report_test():
    from volary.studies.flyingtrust.compare import sign_flip_p

    rng = np.random.default_rng(5)
    x = rng.standard_normal((20, 8)) + 0.5
    got = sign_flip_pvalues(x)
    want = [sign_flip_p(row)[0] for row in x]
    np.testing.assert_allclose(got, want)


def test_detectable_difference_scales_with_the_spread_and_the_configurations():
    r10 = detectable_ratio(10, 0.05)
    r30 = detectable_ratio(30, 0.05)
    # a normal-theory check: the one-sample t-test needs about (z_a/2 + z_b) / sqrt(n) sd
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    assert r30 == pytest.approx(z / math.sqrt(30), rel=0.15)
    assert r10 > r30 and detectable_ratio(10, 0.05 / 7) > r10
    assert detectable_difference(0.2, 10) == pytest.approx(0.2 * r10)
    assert detectable_difference(0.0, 10) == 0.0
    assert math.isinf(detectable_ratio(5, 0.05))  # 2 / 2^5 > 0.05: no 5 configurations can
    with pytest.raises(ConfigError, match="n_configs"):
        detectable_ratio(0)
    with pytest.raises(ConfigError, match="sd"):
        detectable_difference(-1.0, 10)


def test_sign_flip_test_equals_scipy_permutation_test_where_exact():
    """The report's sign-flip test is scipy.stats.permutation_test's one-sample sign flips
    (exact enumeration) to the last digit, zeros and ties included; volary keeps its own
    vectorized version for the power simulation and the Monte-Carlo path's seeded flips."""
    from volary.studies.flyingtrust.compare import sign_flip_p

    rng = np.random.default_rng(11)
    for n in (3, 6, 10):
        for _ in range(5):
            d = rng.choice([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0], size=n) / 36
            if not d.any():
                continue
            res = stats.permutation_test(
                (d,), np.mean, permutation_type="samples", n_resamples=np.inf
            )
            assert sign_flip_p(d)[0] == pytest.approx(res.pvalue, abs=1e-12), d
