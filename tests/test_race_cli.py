"""``volary race`` options: the racer is picked by name and a wrong name is refused, naming the
option and the valid racers, before anything is flown."""

from __future__ import annotations

from typer.testing import CliRunner

from volary.cli.main import app

runner = CliRunner()


def test_race_rejects_an_unknown_racer(tmp_path):
    r = runner.invoke(app, ["race", "--racer", "fastest", "--courses", "0", "--out", str(tmp_path)])
    assert r.exit_code == 2
    assert "--racer" in r.output and "minsnap" in r.output and "mintime" in r.output
    assert not tmp_path.exists() or not list(tmp_path.iterdir())


def test_race_help_lists_the_racers():
    r = runner.invoke(app, ["race", "--help"])
    assert r.exit_code == 0
    assert "--racer" in r.output and "mintime" in r.output and "minsnap" in r.output
