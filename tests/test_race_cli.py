"""``volary race`` options: the racer is picked by name and a wrong name is refused, naming the
option and the valid racers, before anything is flown."""

from __future__ import annotations

from typer.testing import CliRunner

from volary.cli.main import app

runner = CliRunner()


def test_race_rejects_an_unknown_racer(tmp_path):
    r = runner.invoke(app, ["race", "--mode", "oracle", "--racer", "fastest", "--courses", "0",
                            "--out", str(tmp_path)])  # fmt: skip
    assert r.exit_code == 2
    assert "--racer" in r.output and "minsnap" in r.output and "mintime" in r.output
    assert not tmp_path.exists() or not list(tmp_path.iterdir())


def test_race_help_lists_the_racers():
    r = runner.invoke(app, ["race", "--help"])
    assert r.exit_code == 0
    assert "--racer" in r.output and "mintime" in r.output and "minsnap" in r.output


def test_race_rejects_an_unknown_mode_sensor_set_or_fault_before_flying(tmp_path):
    for args, option in (
        (["--mode", "fast"], "--mode"),
        (["--sensors", "imu+lidar"], "--sensors"),
        (["--faults", "fire"], "--faults"),
    ):
        r = runner.invoke(app, ["race", *args, "--out", str(tmp_path)])
        assert r.exit_code == 2, r.output
        assert option in r.output
    assert not tmp_path.exists() or not list(tmp_path.iterdir())


def test_race_help_names_both_modes_and_the_oracle_as_an_upper_bound():
    r = runner.invoke(app, ["race", "--help"])
    assert r.exit_code == 0
    assert "challenge" in r.output and "oracle" in r.output and "upper bound" in r.output
