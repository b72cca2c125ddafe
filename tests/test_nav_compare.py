"""Inference with the configuration as the unit: stratified intervals, the composite score's
fixed normalization and intervals, paired tests and indicator correlations (issue 17)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from test_nav_stats import synthetic_results
from volary.bench.stats import cluster_bootstrap_ci
from volary.errors import ConfigError
from volary.studies.flyingtrust.compare import (
    config_differences,
    correlation_test,
    indicator_correlations,
    paired_test,
    paired_tests,
    score_intervals,
    sign_flip_p,
    spearman,
)
from volary.studies.flyingtrust.schema import TrialResult
from volary.studies.flyingtrust.score import PAPER_TABLE_II, composite_scores, fixed_final_score
from volary.studies.flyingtrust.stats import summarize

PLATS = ("0.60kg-EMAX", "1.00kg-SunnySky", "2.00kg-T-MOTOR")


def _row(algo: str, platform: str, scenario: str, config: int, ok: bool) -> TrialResult:
    return TrialResult(algo, platform, scenario, config, 0, 0, ok, "success" if ok else "timeout")


# --------------------------------------------------------------------------- composite score
def test_fixed_normalization_reproduces_table_ii():
    """Table II's FinalScores are eq. 18 with Var_norm = Var / 0.122 (NavRL's variance)."""
    for p in PAPER_TABLE_II:
        assert fixed_final_score(p.score, p.variance, 0.3) == pytest.approx(p.final_score, abs=0.05)


def test_fixed_final_score_does_not_depend_on_the_other_algorithms():
    rows = synthetic_results(configs=2)
    alone = composite_scores([r for r in rows if r.algo == "mapper"])[0]
    together = next(s for s in composite_scores(rows) if s.algo == "mapper")
    assert alone.final_score_fixed == pytest.approx(together.final_score_fixed)
    assert alone.final_score != pytest.approx(together.final_score)  # eq. 17 is run-relative


def test_score_intervals_resample_configurations():
    rows = synthetic_results(configs=5)
    iv = score_intervals(rows, B=500)
    point = {s.algo: s for s in composite_scores(rows)}
    for a, i in iv.items():
        assert i.score[0] <= point[a].score <= i.score[1]
        assert i.score[0] < i.score[1] and i.final_score_fixed[0] < i.final_score_fixed[1]
    # one configuration per type: every resample draws the same scenes, nothing varies
    one = [r for r in rows if r.config == 0]
    fixed = score_intervals(one, B=200)["mapper"]
    assert fixed.score[0] == fixed.score[1] == pytest.approx(point_of(one, "mapper"))


def point_of(rows, algo):
    return next(s.score for s in composite_scores(rows) if s.algo == algo)


# ------------------------------------------------------------------------------ paired tests
def test_sign_flip_p_exact_and_monte_carlo():
    assert sign_flip_p(np.ones(10)) == (2 / 1024, "exact")
    assert sign_flip_p(-np.ones(10)) == (2 / 1024, "exact")  # two-sided
    assert sign_flip_p(np.r_[1.0, np.zeros(9)]) == (1.0, "exact")  # one differing configuration
    assert sign_flip_p(np.zeros(10)) == (1.0, "exact")
    d = np.array([0.5, 0.2, -0.1, 0.3])
    brute = np.mean([abs(np.dot(s, d)) >= abs(d.sum()) - 1e-12
                     for s in np.array(np.meshgrid(*[[1, -1]] * 4)).reshape(4, -1).T])  # fmt: skip
    assert sign_flip_p(d)[0] == pytest.approx(brute)
    p, method = sign_flip_p(np.ones(30), n_perm=20_000, seed=1)
    assert method == "monte-carlo 20000" and p == 1 / 20_001


def test_paired_test_pairs_platform_configuration_and_trial():
    rows = [_row("A", p, "forest", c, True) for p in PLATS for c in range(10)]
    rows += [_row("B", p, "forest", c, False) for p in PLATS[:2] for c in range(10)]
    t = paired_test(rows, "A", "B", "forest")
    assert (t.n_configs, t.n_differing, t.diff, t.p_value) == (10, 10, 1.0, 2 / 1024)
    assert t.rate_b == 0.0 and t.significant
    d, ra, rb = config_differences(rows, "A", "B")
    assert d.shape == (10,) and ra == 1.0  # PLATS[2] (B never flew it) is left out
    # the narrow-gap case: 3 of 360 vs 0 of 360, one configuration differing
    gap = [
        _row("A", f"p{i}", "narrow_gap", c, c == 4 and i < 3) for i in range(36) for c in range(10)
    ]
    gap += [_row("B", f"p{i}", "narrow_gap", c, False) for i in range(36) for c in range(10)]
    t = paired_test(gap, "A", "B", "narrow_gap")
    assert (t.n_differing, t.p_value, t.significant) == (1, 1.0, False)
    with pytest.raises(ConfigError, match="both"):
        paired_test(rows, "A", "C")


# ------------------------------------------------------------------------------ correlations
def test_spearman_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    x = rng.normal(size=36)
    y = np.round(x + rng.normal(size=36), 1)
    y[:6] = y[0]  # ties
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)


def test_correlation_test_separates_signal_from_noise():
    rng = np.random.default_rng(3)
    x = np.arange(36.0)
    rho, p, (lo, hi) = correlation_test(x, x + rng.normal(0, 8, 36), seed=0)
    assert rho > 0.6 and p < 0.001 and lo < rho < hi
    rho, p, (lo, hi) = correlation_test(x, rng.normal(size=36), seed=0)
    assert p > 0.05 and lo < 0 < hi


# --------------------------------------------------------------------------- stratification
def test_stratified_interval():
    rng = np.random.default_rng(0)
    g = (rng.random((10, 36)) < rng.random((10, 1))).astype(float)
    assert cluster_bootstrap_ci(g, strata=[0] * 10, seed=3) == cluster_bootstrap_ci(g, seed=3)
    strata = [h for h in range(7) for _ in range(10)]
    m, lo, hi = cluster_bootstrap_ci(np.zeros((70, 1)), strata=strata)
    assert m == lo == 0.0 < hi < 0.15  # not zero-width at 0 %
    m, lo, hi = cluster_bootstrap_ci(np.ones((70, 1)), strata=strata)
    assert 0.85 < lo < hi == m == 1.0
    with pytest.raises(ConfigError, match="strata"):
        cluster_bootstrap_ci(g, strata=[0, 1])


def test_per_platform_intervals_are_stratified_by_type():
    """A platform that always succeeds in forest and always fails in maze: the type mix is the
    design, not sampling noise, so its interval is narrow; pooled over types it would not be."""
    rows = [_row("A", PLATS[0], "forest", c, True) for c in range(10)]
    rows += [_row("A", PLATS[0], "maze", c, False) for c in range(10)]
    g = summarize(rows).get("A", "", PLATS[0])
    _, lo_u, hi_u = cluster_bootstrap_ci([[float(r.success)] for r in rows])
    assert g.success_rate == 0.5 and g.ci_hi - g.ci_lo < 0.3 < hi_u - lo_u


# ------------------------------------------------------------------------------ determinism
def _everything(rows):
    s = summarize(rows, B=300)
    groups = {(g.algo, g.scenario, g.platform): (g.ci_lo, g.ci_hi, g.metric_ci)
              for t in s.tables().values() for g in t}  # fmt: skip
    return (groups, score_intervals(rows, B=300), paired_tests(rows),
            indicator_correlations(s))  # fmt: skip


def test_results_do_not_depend_on_row_order():
    rows = synthetic_results(algos={"straight": 0.25, "mapper": 0.8}, configs=2)
    shuffled = rows[:]
    random.Random(5).shuffle(shuffled)
    assert _everything(shuffled) == _everything(rows)


def test_same_numbers_on_every_machine():
    """Golden values of the seeded statistics on seeded synthetic rows (Python's random and
    numpy's PCG64 are the same everywhere): a change here is a change of published numbers."""
    rows = synthetic_results(configs=4)
    s = summarize(rows)
    g = s.get("mapper")
    assert (g.success_rate, g.ci_lo, g.ci_hi) == pytest.approx(
        (0.40714285714285714, 0.2920072078407847, 0.5541106820563885), abs=1e-12
    )
    assert g.metric_ci["path_length"] == pytest.approx((31.1691097083703, 38.82151492093229),
                                                       abs=1e-9)  # fmt: skip
    g = s.get("reactive", "", "2.00kg-T-MOTOR")
    assert (g.ci_lo, g.ci_hi) == pytest.approx((0.03571428571428571, 0.31942707520618435),
                                               abs=1e-12)  # fmt: skip
    iv = score_intervals(rows)
    assert iv["mapper"].final_score_fixed == pytest.approx(
        (22.928366441603142, 32.214659626968015), abs=1e-9
    )
    t = paired_tests(rows)[0]
    assert (t.algo_a, t.algo_b, t.scenario) == ("mapper", "reactive", "")
    assert t.p_value == pytest.approx(0.0005799942000579994, abs=1e-15)
    c = indicator_correlations(s)[0]
    assert (c.rho, c.p_value) == pytest.approx((0.8944271909999159, 0.09919008099190081),
                                               abs=1e-12)  # fmt: skip
