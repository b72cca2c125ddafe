"""``volary bench run|resume|report|list``: what a user types, what appears, what errors say
(one line, exit code 2, no traceback)."""

from __future__ import annotations

import sqlite3

import pytest
from typer.testing import CliRunner

from _nav_fakes import fake_unit
from volary.cli.main import app
from volary.studies.flyingtrust.db import load_results
from volary.studies.flyingtrust.protocol import QUICK_PLATFORMS, SCENARIO_TYPES, Suite
from volary.studies.flyingtrust.run import run_suite

runner = CliRunner()
SUITE = Suite("cli", QUICK_PLATFORMS[:2], SCENARIO_TYPES[:3], (0,), 1)


def _fake_run(tmp_path, name: str = "cli-run"):
    db = tmp_path / "runs" / name / "run.sqlite"
    run_suite(SUITE, ["straight"], db, workers=0, seed=1, progress=False, unit_fn=fake_unit)
    return db


def _one_line_error(r, *needles: str) -> None:
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    assert r.output.startswith("error:") or "\nerror:" in r.output, r.output
    for n in needles:
        assert n in r.output, r.output


def test_list_shows_suites_planners_and_runs(tmp_path):
    _fake_run(tmp_path)
    r = runner.invoke(app, ["bench", "list", "--runs", str(tmp_path / "runs")])
    assert r.exit_code == 0, r.output
    for word in ("quick", "flyingtrust", "2,520", "straight", "mapper", "cli-run", "6/6"):
        assert word in r.output, (word, r.output)


def test_unknown_names_list_the_valid_ones(tmp_path):
    out = ["--out", str(tmp_path / "r")]
    r = runner.invoke(app, ["bench", "run", "--suite", "huge", *out])
    _one_line_error(r, "--suite: unknown suite 'huge'", "flyingtrust", "quick")
    r = runner.invoke(app, ["bench", "run", "--algo", "straight,teleport", *out])
    _one_line_error(r, "--algo: unknown algorithm 'teleport'", "mapper", "straight")
    assert len(r.output.strip().splitlines()) == 1, r.output  # no line naming a database
    r = runner.invoke(app, ["bench", "run", "--algo", "my_plannerz:Planner", *out])
    _one_line_error(r, "--algo: planner 'my_plannerz:Planner': cannot import 'my_plannerz'")
    toml = tmp_path / "s.toml"
    toml.write_text('platforms = ["blimp"]\nscenarios = ["forest"]\nconfigs = [0]\n')
    r = runner.invoke(app, ["bench", "run", "--suite", str(toml), *out])
    _one_line_error(r, "unknown platform 'blimp'", "crazyflie")
    toml.write_text('platforms = ["crazyflie"]\nscenarios = ["moon"]\nconfigs = [0]\n')
    r = runner.invoke(app, ["bench", "run", "--suite", str(toml), *out])
    _one_line_error(r, "unknown scenario type 'moon'", "forest", "maze")
    toml.write_text("platforms = [\n")
    r = runner.invoke(app, ["bench", "run", "--suite", str(toml), *out])
    _one_line_error(r, "not valid TOML")
    assert not (tmp_path / "r").exists()


def test_run_refuses_a_database_of_another_run(tmp_path):
    db = _fake_run(tmp_path)
    r = runner.invoke(app, ["bench", "run", "--suite", "quick", "--db", str(db)])
    _one_line_error(r, "other settings", "volary bench resume")
    assert len(load_results(db)) == 6


def test_resume_of_a_finished_run_and_missing_runs(tmp_path):
    db = _fake_run(tmp_path)
    r = runner.invoke(app, ["bench", "resume", str(db.parent), "--quiet"])
    assert r.exit_code == 0, r.output
    assert "complete: 6/6 trials" in r.output and "0 units" in r.output
    r = runner.invoke(app, ["bench", "resume", str(tmp_path / "nowhere")])
    _one_line_error(r, "RUN: no run database")


def test_report_and_incompatible_database(tmp_path):
    pytest.importorskip("volary.studies.flyingtrust.report")
    db = _fake_run(tmp_path)
    out = tmp_path / "rep"
    r = runner.invoke(app, ["bench", "report", str(db.parent), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert (out / "index.html").is_file() and "index.html" in r.output
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value = '2' WHERE name = 'schema_version'")
    con.commit()
    con.close()
    r = runner.invoke(app, ["bench", "report", str(db)])
    _one_line_error(r, "schema 2", "reads schema 1")


def test_long_report_path_is_printed_whole(tmp_path):
    """Paths are printed on one line whatever their length (copy-paste; the 80-column wrap had
    split 'index.html' on a machine with a long pytest tmp path)."""
    pytest.importorskip("volary.studies.flyingtrust.report")
    db = _fake_run(tmp_path)
    out = tmp_path / ("a_rather_long_directory_name_" * 3) / "rep"
    r = runner.invoke(app, ["bench", "report", str(db.parent), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert str(out / "index.html") in r.output


@pytest.mark.slow
def test_run_a_small_suite_file_with_straight_then_report(tmp_path):
    """The real episode: a two-platform, one-scene suite flown by `straight`."""
    toml = tmp_path / "tiny.toml"
    toml.write_text(
        'name = "tiny"\nplatforms = ["0.60kg-EMAX", "1.00kg-SunnySky"]\n'
        'scenarios = ["random_cylinders"]\nconfigs = [0]\n'
    )
    out = tmp_path / "run"
    args = ["bench", "run", "--suite", str(toml), "--algo", "straight", "--workers", "1"]
    r = runner.invoke(app, [*args, "--out", str(out), "--quiet"])
    assert r.exit_code == 0, r.output
    rows = load_results(out / "run.sqlite")
    assert len(rows) == 2 and all(r.cause != "error" for r in rows), rows
    assert "complete: 2/2 trials" in r.output
    pytest.importorskip("volary.studies.flyingtrust.report")
    r = runner.invoke(app, ["bench", "report", str(out)])
    assert r.exit_code == 0, r.output
    assert (out / "report" / "index.html").is_file()
