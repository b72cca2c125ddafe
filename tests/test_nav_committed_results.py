"""The committed full-protocol results (experiments/flyingtrust/table-ii/results/, flown with
the speed cap): every one of the 5,040 rows under the cap, and the published summaries recomputed
from its rows."""

from __future__ import annotations

import csv
import math
from dataclasses import fields
from pathlib import Path

import pytest

from volary.studies.flyingtrust.schema import ProtocolSettings, TrialResult

TABLE_II = Path(__file__).resolve().parents[1] / "experiments" / "flyingtrust" / "table-ii"
RESULTS = TABLE_II / "results" / "straight-mapper"
_TYPES = {f.name: f.type for f in fields(TrialResult)}


def _value(name: str, text: str) -> object:
    kind = _TYPES[name]
    if kind == "bool":
        return text == "True"
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text) if text else math.nan
    return text


def committed_rows(folder: Path = RESULTS) -> list[TrialResult]:
    with (folder / "trials.csv").open(newline="", encoding="utf-8") as fh:
        return [
            TrialResult(**{k: _value(k, v) for k, v in r.items() if k in _TYPES})
            for r in csv.DictReader(fh)
        ]


def test_no_committed_trial_exceeds_the_speed_cap():
    rows = committed_rows()
    cap = ProtocolSettings().speed_cap
    assert len(rows) == 5040 and {r.algo for r in rows} == {"straight", "mapper"}
    assert len({r.key for r in rows}) == 5040  # every trial once
    fastest = max(rows, key=lambda r: r.max_speed)
    assert fastest.max_speed <= cap, fastest.key
    assert not any(r.cause == "error" for r in rows)


@pytest.mark.slow
def test_published_summaries_recompute_from_the_rows():
    from volary.studies.flyingtrust.compare import score_intervals
    from volary.studies.flyingtrust.score import composite_scores
    from volary.studies.flyingtrust.stats import summarize

    rows = committed_rows()
    with (RESULTS / "summary_by_scenario.csv").open(newline="", encoding="utf-8") as fh:
        published = {(r["algo"], r["scenario"]): r for r in csv.DictReader(fh)}
    for g in summarize(rows).by_scenario:
        p = published[(g.algo, g.scenario)]
        assert (float(p["success_rate"]), float(p["ci_lo"]), float(p["ci_hi"])) == pytest.approx(
            (g.success_rate, g.ci_lo, g.ci_hi), abs=1e-12
        )
    with (RESULTS / "scores.csv").open(newline="", encoding="utf-8") as fh:
        scores = {r["algo"]: r for r in csv.DictReader(fh)}
    iv = score_intervals(rows)
    for s in composite_scores(rows):
        p = scores[s.algo]
        assert float(p["final_score_fixed"]) == pytest.approx(s.final_score_fixed, abs=1e-9)
        lo, hi = iv[s.algo].final_score_fixed
        assert (float(p["final_score_fixed_lo"]), float(p["final_score_fixed_hi"])) == (
            pytest.approx(lo, abs=1e-9), pytest.approx(hi, abs=1e-9))  # fmt: skip


SLATE = TABLE_II / "results" / "slate"


def test_slate_rows_are_complete_capped_and_carry_the_committed_ones():
    """The slate report (experiments/flyingtrust/table-ii/run.py): every planner flew the same 2,520
    trials, none over the cap and none an error; straight and mapper rows are the committed
    full-protocol rows unchanged."""
    rows = committed_rows(SLATE)
    algos = {r.algo for r in rows}
    assert {"straight", "mapper"} < algos
    trials = {a: {(r.scenario, r.config, r.trial, r.platform) for r in rows if r.algo == a}
              for a in algos}  # fmt: skip
    assert all(len(t) == 2520 for t in trials.values())
    assert len({frozenset(t) for t in trials.values()}) == 1
    assert max(r.max_speed for r in rows) <= ProtocolSettings().speed_cap
    assert not any(r.cause == "error" for r in rows)
    old = {r.key: r for r in committed_rows()}
    for r in rows:
        if r.algo in ("straight", "mapper"):
            o = old[r.key]
            same = (r.success, r.cause, repr(r.flight_time))
            assert same == (o.success, o.cause, repr(o.flight_time)), r.key
