"""The navigation HTML report: self-contained, complete exports, sensible for tiny runs."""

from __future__ import annotations

import base64
import csv
import math
import re

import pytest

from test_nav_stats import TYPES, synthetic_results
from volary.errors import ConfigError
from volary.studies.flyingtrust.report import findings, make_report, sample_failures
from volary.studies.flyingtrust.schema import ROW_FIELDS, TrialResult
from volary.studies.flyingtrust.score import composite_scores
from volary.studies.flyingtrust.stats import summarize


def read_csv(path):
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def embedded_pngs(page: str) -> list[bytes]:
    return [
        base64.b64decode(m) for m in re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page)
    ]


def assert_self_contained(page: str) -> None:
    assert "<script" not in page.lower()
    assert not re.search(r"(src|href)\s*=\s*['\"]?(https?:)?//", page, re.I)  # nothing fetched
    assert "@import" not in page and "url(" not in page
    pngs = embedded_pngs(page)
    assert pngs and all(p.startswith(b"\x89PNG\r\n\x1a\n") for p in pngs)


@pytest.mark.slow  # 10-30 s on 2 cores; make test-slow
def test_full_report_three_algorithms(tmp_path):
    rows = synthetic_results(configs=2)
    hosts = [
        {"cpu": "Test CPU", "cores": 2, "workers": "2 processes", "started": t}
        for t in ("2026-01-01T10:00:00Z", "2026-01-02T09:00:00Z")
    ]
    index = make_report(rows, tmp_path / "rep", title="synthetic <run>", suite="quick", hosts=hosts)
    assert index == tmp_path / "rep" / "index.html"
    page = index.read_text(encoding="utf-8")
    assert_self_contained(page)
    assert "synthetic &lt;run&gt;" in page  # escaped
    # the machine that flew the rows, once, with both sittings
    assert "Test CPU (2 cores, 2 processes): 2026-01-01T10:00:00Z, 2026-01-02T09:00:00Z" in page
    for text in ("Headline", "FLYINGTRUST Table II", "Fast-Planner", "Methods", "mapper",
                 "Highest FinalScore", "Hardest scenario type", "quick",
                 "Sample failures", "unit of replication", "paired sign-flip test",
                 "Comparisons (paired over configurations)", "Ranking: what the data separate",
                 "FinalScore ranking, ties where", "Holding mass and size fixed",
                 "What this design can detect", "detectable [points]"):  # fmt: skip
        assert text in page, text
    # the ranking's letters, the paired FinalScore differences, the power table
    letters = {
        r["algo"]: r["letters_final_score"] for r in read_csv(tmp_path / "rep" / "scores.csv")
    }
    assert set(letters) == {"mapper", "straight", "reactive"} and all(letters.values())
    diffs = read_csv(tmp_path / "rep" / "score_differences.csv")
    assert len(diffs) == 3 and all(float(d["ci_lo"]) <= float(d["ci_hi"]) for d in diffs)
    assert all(float(d["p_value"]) <= float(d["p_holm"]) <= 1 for d in diffs)
    power = read_csv(tmp_path / "rep" / "power.csv")
    assert {r["scenario"] for r in power} == set(TYPES) and {r["n_configs"] for r in power} == {
        "10",
        "30",
    }
    figs = tmp_path / "rep" / "figures"
    names = {p.name for p in figs.glob("*.png")}
    assert {"success_by_scenario.png", "success_vs_indicators.png", "platform_grid.png",
            "failure_causes.png", "composite_scores.png", "heatmap_mapper.png",
            "heatmap_straight.png", "heatmap_reactive.png", "failure_00.png"} <= names  # fmt: skip
    assert len(embedded_pngs(page)) == len(names)  # every PNG file is also in the page
    trials = read_csv(tmp_path / "rep" / "trials.csv")
    assert len(trials) == len(rows)
    assert set(trials[0]) == set(ROW_FIELDS) - {"track"}
    cells = read_csv(tmp_path / "rep" / "summary_by_cell.csv")
    assert len(cells) == 3 * 5 * 7
    assert sum(int(c["n"]) for c in cells) == len(rows)
    scores = read_csv(tmp_path / "rep" / "scores.csv")
    best = composite_scores(rows)[0]
    assert scores[0]["algo"] == best.algo
    assert float(scores[0]["final_score"]) == pytest.approx(best.final_score)
    assert float(scores[0]["score_lo"]) <= float(scores[0]["score"]) <= float(scores[0]["score_hi"])
    for k in ("final_score", "final_score_fixed"):  # percentile intervals of a biased statistic
        assert float(scores[0][f"{k}_lo"]) < float(scores[0][f"{k}_hi"])
    assert len(read_csv(tmp_path / "rep" / "paper_table_ii.csv")) == 5
    tests = read_csv(tmp_path / "rep" / "paired_tests.csv")
    assert len(tests) == 3 * (1 + 7)  # three pairs, pooled and per type
    assert all(0.0 < float(t["p_value"]) <= 1.0 for t in tests)
    corr = read_csv(tmp_path / "rep" / "correlations.csv")
    assert {c["algo"] for c in corr} == {"mapper", "straight", "reactive"}


def test_parquet_exports_keep_the_track(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    rows = synthetic_results(algos={"mapper": 0.7}, configs=1)
    make_report(rows, tmp_path, max_failures=0)
    table = pq.read_table(tmp_path / "trials.parquet")
    assert table.num_rows == len(rows) and "track" in table.column_names
    assert pq.read_table(tmp_path / "summary_by_scenario.parquet").num_rows == 7


def test_tiny_run_one_algorithm_all_failures_nan_metrics(tmp_path):
    rows = [
        TrialResult("my.pkg:Planner", "0.60kg-EMAX", "forest", 0, 0, 3, False, "collision"),
        TrialResult("my.pkg:Planner", "0.60kg-EMAX", "maze", 1, 1, 3, False, "error",
                    error="Traceback ...\nValueError: nan"),
        TrialResult("my.pkg:Planner", "not-in-catalogue", "forest", 0, 0, 3, False, "timeout"),
    ]  # fmt: skip
    page = make_report(rows, tmp_path).read_text(encoding="utf-8")
    assert_self_contained(page)
    assert "not recorded" in page  # rows given as a list: no machine named
    visible = re.sub(r"<[^>]+>", " ", re.sub(r"data:image/png;base64,[^'\"]+", "", page))
    assert not re.search(r"\bnan\b", visible, re.I)  # NaN metrics print as a dash
    assert "succeeded in 0 of 3 trials" in page
    assert "planner error" in page
    assert "One algorithm" in page
    assert (tmp_path / "figures" / "heatmap_my_pkg_Planner.png").is_file()
    assert len(read_csv(tmp_path / "trials.csv")) == 3
    # failure plots without a track say so instead of failing
    assert (tmp_path / "figures" / "failure_00.png").is_file()


def test_missing_scenarios_and_custom_type(tmp_path):
    rows = synthetic_results(configs=1, types=("forest", "maze"))
    rows += synthetic_results(algos={"other": 0.5}, configs=1, types=("forest", "my_scene"))
    page = make_report(rows, tmp_path, max_failures=2).read_text(encoding="utf-8")
    assert "Scenario types missing" in page and "other: maze" in page
    assert "my_scene" in page
    heat = read_csv(tmp_path / "summary_by_scenario.csv")
    assert {r["scenario"] for r in heat} == {"forest", "maze", "my_scene"}


def test_all_successes(tmp_path):
    rows = [
        TrialResult("a", p, "urban", c, c, 0, True, "success", time_to_goal=20.0,
                    path_length=60.0, mean_speed=3.0, max_speed=3.9, collisions=0)
        for p in ("0.60kg-EMAX", "0.55kg-UAV-1") for c in range(2)
    ]  # fmt: skip
    page = make_report(rows, tmp_path).read_text(encoding="utf-8")
    assert "No failed trial." in page
    assert not list((tmp_path / "figures").glob("failure_0*.png"))


def test_rewriting_a_report_drops_stale_figures(tmp_path):
    rows = synthetic_results(algos={"x": 0.2, "y": 0.2}, configs=1, types=("forest",))
    make_report(rows, tmp_path, max_failures=3)
    assert len(list((tmp_path / "figures").glob("failure_0*.png"))) == 3
    (tmp_path / "keep.txt").write_text("mine")
    page = make_report([r for r in rows if r.algo == "x"], tmp_path, max_failures=1)
    assert len(list((tmp_path / "figures").glob("failure_0*.png"))) == 1
    assert not (tmp_path / "figures" / "heatmap_y.png").exists()
    assert (tmp_path / "keep.txt").read_text() == "mine"  # nothing else is touched
    assert len(embedded_pngs(page.read_text())) == len(list((tmp_path / "figures").glob("*.png")))


def test_sample_failures_spread_and_deterministic():
    rows = synthetic_results(configs=2)
    picked = sample_failures(rows, 6)
    assert len(picked) == 6 and not any(r.success for r in picked)
    assert len({(r.algo, r.cause, r.scenario) for r in picked}) == 6  # one per group first
    assert [r.key for r in sample_failures(list(reversed(rows)), 6)] == [r.key for r in picked]
    assert sample_failures(rows, 0) == []


def test_findings_name_best_and_hardest():
    rows = synthetic_results(algos={"good": 1.0, "bad": 0.1}, configs=2)
    s = summarize(rows)
    text = " ".join(findings(s, composite_scores(rows), rows))
    assert "Highest FinalScore: good" in text
    assert "good succeeds more often than bad over all types" in text  # paired test, p shown
    assert "p < 0.001" in text or "p = " in text
    means = {
        sc: sum(g.success_rate for g in s.by_scenario if g.scenario == sc) for sc in s.scenarios
    }
    hardest = [sc for sc, v in means.items() if v == min(means.values())]
    assert f"Hardest scenario type{'s' if len(hardest) > 1 else ''}: {', '.join(hardest)}" in text
    flat = [
        TrialResult("a", "0.60kg-EMAX", sc, 0, 0, 0, False, "timeout") for sc in ("forest", "maze")
    ]
    tied = findings(summarize(flat), composite_scores(flat), flat)
    assert not any("Hardest" in t for t in tied)  # no ranking of equal types
    assert not math.isnan(s.get("good").success_rate)


def test_bad_input(tmp_path):
    with pytest.raises(ConfigError, match="results"):
        make_report([], tmp_path)
    with pytest.raises(ConfigError, match="TrialResult"):
        make_report([{"algo": "a"}], tmp_path)
    rows = synthetic_results(algos={"a": 0.5}, configs=1)
    with pytest.raises(ConfigError, match="title"):
        make_report(rows, tmp_path, title="")
    with pytest.raises(ConfigError, match="max_failures"):
        make_report(rows, tmp_path, max_failures=-1)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="out_dir"):
        make_report(rows, blocker / "sub")


def test_failure_plot_outlines_the_obstacle_hit(tmp_path):
    from volary.studies.flyingtrust import figures
    from volary.worlds import make_scenario

    spec = make_scenario("forest", 0)
    tree = spec.obstacles[5]
    row = TrialResult("a", "0.60kg-EMAX", "forest", 0, 0, 0, False, "collision",
                      error=f"collision: obstacle {tree.object_id}",
                      track="[[0, 2, 22.7, 1.5], [1.0, 5, 22.0, 1.5]]")  # fmt: skip
    ring = figures._hit_obstacle(row, spec)
    assert ring is not None
    assert abs(ring - tree.center[:2]).max() < tree.radius + 0.2
    assert figures.failure_plot(row, tmp_path / "f.png").stat().st_size > 1000
    row.error = "collision: ceiling"
    assert figures._hit_obstacle(row, spec) is None
    assert figures.parse_track("not json") is None and figures.parse_track("[]") is None
