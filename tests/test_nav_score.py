"""Composite score, FLYINGTRUST eq. 12-19, against hand-computed cases and Table II."""

from __future__ import annotations

import pytest

from volary.errors import ConfigError
from volary.studies.flyingtrust.schema import TrialResult
from volary.studies.flyingtrust.score import (
    CLASSIC_SCENARIOS,
    PAPER_TABLE_II,
    THEORETICAL_SCENARIOS,
    ScoreWeights,
    composite_scores,
    final_scores,
    platform_category,
)

REAL, VIRT = "0.60kg-EMAX", "0.55kg-UAV-1"  # FLYINGTRUST real (w 1.5) and virtual (w 1.0)


def by_algo(rows):
    return {r.algo: r for r in rows}


# Hand computation, weights 1.2 (forest, classic) / 1.0 (maze, theoretical), 1.5 real / 1.0
# virtual: W_forest = 6/11, W_maze = 5/11 (eq. 12); W_real = 0.6, W_virt = 0.4 (eq. 13).
A = {("A", "forest", REAL): 1.0, ("A", "forest", VIRT): 0.5,
     ("A", "maze", REAL): 0.0, ("A", "maze", VIRT): 0.5}  # fmt: skip
A_HAT = 6 / 11 * (0.6 * 1.0 + 0.4 * 0.5) + 5 / 11 * (0.6 * 0.0 + 0.4 * 0.5)  # eq. 14 = 5.8/11
A_VAR = (
    6 / 11 * 0.6 * (1.0 - A_HAT) ** 2
    + 6 / 11 * 0.4 * (0.5 - A_HAT) ** 2
    + 5 / 11 * 0.6 * (0.0 - A_HAT) ** 2
    + 5 / 11 * 0.4 * (0.5 - A_HAT) ** 2
)  # eq. 16
B = {("B", s, m): 0.5 for s in ("forest", "maze") for m in (REAL, VIRT)}  # zero variance


def test_hand_computed_two_algorithms():
    assert A_HAT == pytest.approx(5.8 / 11) and A_VAR == pytest.approx(0.1492562, abs=1e-7)
    rows = by_algo(composite_scores({**A, **B}))
    a, b = rows["A"], rows["B"]
    assert a.score == pytest.approx(100 * 5.8 / 11)  # 52.727 (eq. 15)
    assert a.var == pytest.approx(A_VAR)
    assert b.score == pytest.approx(50.0) and b.var == pytest.approx(0.0)
    assert a.var_norm == pytest.approx(1.0) and b.var_norm == pytest.approx(0.0)  # eq. 17
    assert a.final_score == pytest.approx(100 * 5.8 / 11 * (1 - 0.3))  # eq. 18: 36.909
    assert b.final_score == pytest.approx(50.0)
    assert [r.algo for r in composite_scores({**A, **B})] == ["B", "A"]  # best FinalScore first
    assert a.missing_scenarios == () and a.n_cells == 4


def test_beta_zero_is_the_plain_weighted_mean():
    rows = by_algo(composite_scores({**A, **B}, ScoreWeights(beta=0.0)))
    assert rows["A"].final_score == pytest.approx(rows["A"].score) == pytest.approx(52.7272727)
    assert rows["A"].var_norm == pytest.approx(1.0)  # still reported
    assert rows["B"].final_score == pytest.approx(50.0)


def test_missing_scenario_is_dropped_and_weights_renormalized():
    # Types forest, urban (classic, 1.2) and maze (1.0): W = 1.2/3.4, 1.2/3.4, 1/3.4 (eq. 12).
    # Algorithm D has no urban result: W'_forest = 1.2/2.2 = 6/11, W'_maze = 5/11 (eq. 19).
    full = {("F", s, m): v for s, v in (("forest", 1.0), ("urban", 1.0), ("maze", 0.0))
            for m in (REAL, VIRT)}  # fmt: skip
    d = {("D", s, m): v for s, v in (("forest", 1.0), ("maze", 0.0)) for m in (REAL, VIRT)}
    rows = by_algo(composite_scores({**full, **d}))
    assert rows["D"].missing_scenarios == ("urban",) and rows["F"].missing_scenarios == ()
    assert rows["D"].score == pytest.approx(100 * 6 / 11)  # 54.545, not 100 * 1.2/3.4
    d_var = 6 / 11 * (1 - 6 / 11) ** 2 + 5 / 11 * (6 / 11) ** 2  # = 330/1331
    assert rows["D"].var == pytest.approx(330 / 1331) == pytest.approx(d_var)
    f_hat = 2.4 / 3.4
    assert rows["F"].score == pytest.approx(100 * f_hat)
    assert rows["F"].var == pytest.approx(2.4 / 3.4 * (1 - f_hat) ** 2 + 1 / 3.4 * f_hat**2)
    vmax = max(rows["D"].var, rows["F"].var)
    for r in rows.values():
        assert r.final_score == pytest.approx(r.score * (1 - 0.3 * r.var / vmax))


def test_one_missing_cell_uses_the_eq14_denominator():
    part = dict(A)
    del part[("A", "maze", VIRT)]  # weights left: 6/11*0.6, 6/11*0.4, 5/11*0.6
    w = (6 / 11 * 0.6, 6 / 11 * 0.4, 5 / 11 * 0.6)
    hat = (w[0] * 1.0 + w[1] * 0.5 + w[2] * 0.0) / sum(w)
    (row,) = composite_scores(part)
    assert row.score == pytest.approx(100 * hat) and row.missing_scenarios == ()
    var = (w[0] * (1 - hat) ** 2 + w[1] * (0.5 - hat) ** 2 + w[2] * hat**2) / sum(w)
    assert row.var == pytest.approx(var) and row.n_cells == 3


def test_single_algorithm_and_zero_variance():
    (a,) = composite_scores(A)  # Var_norm = Var / max over itself = 1: full penalty
    assert a.var_norm == pytest.approx(1.0)
    assert a.final_score == pytest.approx(a.score * 0.7)
    (b,) = composite_scores(B)  # zero variance everywhere: no penalty, no division by zero
    assert b.var == 0.0 and b.var_norm == 0.0 and b.final_score == pytest.approx(50.0)
    zero = {("Z", "forest", REAL): 0.0, ("Z", "maze", VIRT): 0.0}
    rows = by_algo(composite_scores({**B, **zero}))
    assert rows["Z"].final_score == 0.0 and rows["B"].var_norm == 0.0


def test_results_and_rates_agree():
    rows = []
    for (algo, scen, plat), rate in {**A, **B}.items():
        for k in range(4):  # 4 trials per cell; rates 0, 0.5, 1 -> 0, 2, 4 successes
            ok = k < round(4 * rate)
            rows.append(TrialResult(algo, plat, scen, k, k, 0, ok, "success" if ok else "timeout"))
    from_rows = composite_scores(rows)
    from_rates = composite_scores({**A, **B})
    for x, y in zip(from_rows, from_rates, strict=True):
        assert x.algo == y.algo and x.final_score == pytest.approx(y.final_score)
        assert x.var == pytest.approx(y.var)
    assert by_algo(from_rows)["A"].n_trials == 16


def test_paper_table_ii_final_scores_follow_eq_17_18():
    """Table II's FinalScore from its own Score and Variance (beta = 0.3, max Var = NavRL's
    0.122) to the rounding of the printed numbers."""
    out = final_scores([p.score for p in PAPER_TABLE_II], [p.variance for p in PAPER_TABLE_II], 0.3)
    for p, (_, fs) in zip(PAPER_TABLE_II, out, strict=True):
        assert fs == pytest.approx(p.final_score, abs=0.05), p.algo


def test_weights_and_categories():
    w = ScoreWeights()
    assert (w.classic, w.theoretical, w.real, w.virtual, w.beta) == (1.2, 1.0, 1.5, 1.0, 0.3)
    assert [w.scenario_weight(s) for s in CLASSIC_SCENARIOS] == [1.2] * 3
    assert [w.scenario_weight(s) for s in THEORETICAL_SCENARIOS] == [1.0] * 4
    assert w.platform_weight(REAL) == 1.5 and w.platform_weight(VIRT) == 1.0
    assert platform_category("crazyflie") == "other" and platform_category("nope") == "other"
    assert w.platform_weight("nope") == 1.0
    over = ScoreWeights(scenario_overrides=(("maze", 3.0),), platform_overrides=((VIRT, 2.0),))
    assert over.scenario_weight("maze") == 3.0 and over.platform_weight(VIRT) == 2.0
    from volary.worlds import SCENARIOS

    assert {s for s, t in SCENARIOS.items() if t.classic} == set(CLASSIC_SCENARIOS)
    assert {s for s, t in SCENARIOS.items() if not t.classic} == set(THEORETICAL_SCENARIOS)


def test_equal_weights_change_the_score():
    flat = ScoreWeights(classic=1.0, theoretical=1.0, real=1.0, virtual=1.0)
    (a,) = composite_scores(A, flat)
    assert a.score == pytest.approx(100 * (1.0 + 0.5 + 0.0 + 0.5) / 4)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"beta": 1.5}, "beta"),
        ({"beta": -0.1}, "beta"),
        ({"classic": 0.0}, "classic"),
        ({"real": float("nan")}, "real"),
        ({"scenario_overrides": (("maze", -1.0),)}, "scenario_overrides"),
        ({"platform_overrides": ("x",)}, "platform_overrides"),
    ],
)
def test_bad_weights(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        ScoreWeights(**kwargs)


def test_bad_inputs():
    with pytest.raises(ConfigError, match="results_or_rates"):
        composite_scores({})
    with pytest.raises(ConfigError, match="results_or_rates"):
        composite_scores({("A", "forest", REAL): 1.5})
    with pytest.raises(ConfigError, match="results_or_rates"):
        composite_scores({("A", "forest"): 0.5})
    with pytest.raises(ConfigError, match="TrialResult"):
        composite_scores([object()])
    with pytest.raises(ConfigError, match="weights"):
        composite_scores(A, weights={"beta": 0.0})
