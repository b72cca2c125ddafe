"""Holm's adjustment of each family of claims (issue 59): textbook values, families, report."""

from __future__ import annotations

import math

import numpy as np
import pytest

from volary.bench.stats import holm, holm_by_family
from volary.errors import ConfigError
from volary.studies.flyingtrust.compare import Correlation, PairedTest
from volary.studies.flyingtrust.report import (
    _correlation_table,
    _tests_table,
    correlation_holm,
    paired_families,
    paired_holm,
)


def test_holm_gives_the_textbook_values() -> None:
    # m = 5: sorted p times 5, 4, 3, 2, 1, then the running maximum.
    got = holm([0.01, 0.02, 0.03, 0.04, 0.05])
    np.testing.assert_allclose(got, [0.05, 0.08, 0.09, 0.09, 0.09])
    # Input order is kept; 0.04 x 1 = 0.04 is lifted to 0.06 by monotonicity.
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02])
    # Capped at 1; ties keep equal adjusted values.
    np.testing.assert_allclose(holm([0.5, 0.5, 0.001]), [1.0, 1.0, 0.003])


def test_holm_leaves_nan_out_of_the_family_size() -> None:
    got = holm([0.2, math.nan, 0.01])
    assert math.isnan(got[1])
    np.testing.assert_allclose(got[[0, 2]], [0.2, 0.02])
    assert holm([]).size == 0


def test_holm_refuses_values_that_are_not_p_values() -> None:
    with pytest.raises(ConfigError, match="p_values"):
        holm([0.1, 1.5])
    with pytest.raises(ConfigError, match="families"):
        holm_by_family([0.1, 0.2], ["a"])


def test_holm_by_family_adjusts_each_family_on_its_own() -> None:
    got = holm_by_family([0.01, 0.02, 0.01, 0.04], ["a", "b", "a", "b"])
    np.testing.assert_allclose(got, [0.02, 0.04, 0.02, 0.04])


def _t(a: str, b: str, scen: str, p: float) -> PairedTest:
    return PairedTest(a, b, scen, 10, 5, 0.9, 0.8, 0.1, p, "exact")


def test_report_adjusts_pooled_tests_together_and_each_pairs_types_together() -> None:
    # The slate's ego vs kinodynamic in urban: p = 0.0078 among 7 per-type tests -> 0.055.
    tests = [
        _t("ego", "kinodynamic", "", 3e-5),
        _t("ego", "kinodynamic", "urban", 0.0078125),
        *(_t("ego", "kinodynamic", s, 1.0) for s in "abcdef"),
        _t("ego", "topo", "", 1e-5),
    ]
    fams = paired_families(tests)
    assert fams[0] == fams[-1] == "all types"
    assert set(fams[1:-1]) == {"ego vs kinodynamic by type"}
    adj = paired_holm(tests)
    assert adj[1] == pytest.approx(7 * 0.0078125)
    assert adj[0] == pytest.approx(2 * 1e-5 * 1.5)  # max(2 x 1e-5, 1 x 3e-5)
    html = _tests_table(tests)
    assert "p (Holm)" in html and "p = 0.0078" in html and "p = 0.055" in html


def test_correlations_are_adjusted_per_algorithm() -> None:
    corrs = [
        Correlation("mapper", "TWR_max", "all", 36, 0.44, 0.0088, (0.1, 0.6)),
        Correlation("mapper", "alpha_xy_max", "real", 18, 0.54, 0.0226, (0.1, 0.8)),
        Correlation("ego", "TWR_max", "all", 36, 0.24, 0.16, (-0.1, 0.5)),
    ]
    np.testing.assert_allclose(correlation_holm(corrs), [0.0176, 0.0226, 0.16])
    assert "p (Holm)" in _correlation_table(corrs)


def test_a_correlation_without_a_p_value_is_not_printed_as_significant() -> None:
    # A constant success rate has no Spearman rho and no p-value; it printed "p < 0.001".
    corrs = [Correlation("straight", "TWR_max", "all", 36, math.nan, math.nan, (math.nan,) * 2)]
    html = _correlation_table(corrs)
    assert "p &lt; 0.001" not in html and "p < 0.001" not in html
    assert html.count("n/a") == 2  # raw and Holm


def test_the_reports_sentences_call_a_type_significant_only_after_holm() -> None:
    """Per type, a raw p of 0.02 among 7 types is not a claim (adjusted 0.14); one of 0.001
    is (0.007); the sentence gives both p-values."""
    from volary.studies.flyingtrust.report import _comparison_sentences

    per = [_t("a", "b", "forest", 0.001), _t("a", "b", "urban", 0.02)]
    per += [_t("a", "b", f"type{i}", 0.5) for i in range(5)]
    (text,) = _comparison_sentences([_t("a", "b", "", 0.0001), *per])
    assert "a succeeds more often than b" in text
    assert "significant after Holm's adjustment at 0.05 in 1 of 7 (forest)" in text
    assert "urban (p = 0.02, Holm-adjusted p = 0.12)" in text
