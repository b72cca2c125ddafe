"""The ``volary`` command line: what a user types, what files appear, what errors say."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from volary.cli.main import app

runner = CliRunner()


def test_platforms_list_and_show():
    r = runner.invoke(app, ["platforms", "list"])
    assert r.exit_code == 0, r.output
    assert "TWR_max" in r.output and "crazyflie" in r.output
    r = runner.invoke(app, ["platforms", "show", "tilted_hexa"])
    assert r.exit_code == 0, r.output
    assert "fully actuated" in r.output and "True" in r.output


@pytest.mark.parametrize("group", [[], ["bench"], ["rl"]])
def test_the_command_lists_flow_each_summary_as_one_paragraph(group):
    """`volary --help` (and a group's): each command's summary is its docstring's first
    paragraph reflowed to the terminal, not broken where the source's lines break (on a wide
    terminal every command is one row)."""
    r = runner.invoke(app, [*group, "--help"], env={"COLUMNS": "400"}, terminal_width=400)
    assert r.exit_code == 0, r.output
    panel = r.output.split("Commands")[1].splitlines()[1:]
    rows = panel[: next(i for i, ln in enumerate(panel) if ln.startswith("╰"))]
    assert len(rows) >= 4 and all(ln.startswith("│ ") for ln in rows), r.output
    broken = [ln for ln in rows if ln[2] == " "]  # a row without a command name
    assert not broken, r.output
    if not group:  # race's summary is three source lines long
        race = next(ln for ln in rows if ln.startswith("│ race "))
        assert "from IMU, IR beacons and the downward ranger;" in race, race
        assert "(an upper bound)." in race, race


def test_unknown_platform_lists_valid_names():
    r = runner.invoke(app, ["platforms", "show", "blimp"])
    assert r.exit_code == 2
    assert "unknown" in r.output and "crazyflie" in r.output


def test_fly_writes_csv_and_png(tmp_path):
    r = runner.invoke(
        app,
        [
            "fly",
            "--platform",
            "crazyflie",
            "--mode",
            "position",
            "--to",
            "0.5",
            "0",
            "1.2",
            "--duration",
            "3",
            "--out",
            str(tmp_path),
        ],
    )
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader((tmp_path / "fly.csv").open()))
    assert len(rows) == 720
    assert abs(float(rows[-1]["x"]) - 0.5) < 0.02 and abs(float(rows[-1]["z"]) - 1.2) < 0.02
    assert (tmp_path / "fly.png").stat().st_size > 10_000
    assert "final position [m]" in r.output


@pytest.mark.parametrize("drawer", ["none", "broken"])
def test_fly_draws_in_process_when_the_drawer_process_is_missing_or_fails(
    tmp_path, monkeypatch, drawer
):
    """The figure is drawn by a second process (matplotlib loads while torch does); without
    it, or when it fails, the command still writes the PNG itself."""
    import subprocess
    import sys

    import volary.cli.main as cli

    def start():
        if drawer == "none":
            return None
        return subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read(); sys.exit(3)"],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    monkeypatch.setattr(cli, "_start_drawer", start)
    r = runner.invoke(app, ["fly", "--platform", "crazyflie", "--duration", "0.5",
                            "--out", str(tmp_path)])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert (tmp_path / "fly.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    "args,match",
    [
        (["--mode", "warp"], "--mode"),
        (["--duration", "0"], "--duration"),
        (["--device", "tpu"], "--device"),
    ],
)
def test_fly_bad_arguments_name_the_option(tmp_path, args, match):
    r = runner.invoke(app, ["fly", "--platform", "crazyflie", "--out", str(tmp_path), *args])
    assert r.exit_code == 2 and match in r.output


def _demo_page_checks(out, n_trials: int) -> None:
    from volary.studies.flyingtrust.db import load_results

    page = (out / "index.html").read_text()
    assert "<table>" in page and "data:image/png;base64," in page
    rows = load_results(out / "run.sqlite")
    assert len(rows) == n_trials and {r.algo for r in rows} == {"straight", "mapper"}
    assert not [r for r in rows if r.cause == "error"], [r.error for r in rows]


def test_demo_runs_a_suite_file_and_writes_the_report(tmp_path):
    """`volary demo --suite FILE`: the same path as the README's main job on a tiny suite
    (the full quick suite is the slow test below)."""
    toml = tmp_path / "tiny.toml"
    toml.write_text(
        'name = "tiny"\nplatforms = ["0.60kg-EMAX", "1.00kg-SunnySky"]\n'
        'scenarios = ["random_cylinders"]\nconfigs = [1]\n'
    )
    out = tmp_path / "demo"
    r = runner.invoke(app, ["demo", "--out", str(out), "--suite", str(toml)])
    assert r.exit_code == 0, r.output
    assert "tiny suite: 4 trials" in r.output
    _demo_page_checks(out, 4)


def test_demo_with_a_bad_suite_names_it(tmp_path):
    r = runner.invoke(app, ["demo", "--out", str(tmp_path), "--suite", "nope"])
    assert r.exit_code == 2 and "nope" in r.output and "quick" in r.output, r.output


@pytest.mark.slow
def test_demo_writes_an_html_page(tmp_path):
    """The README's main job as it is: the tour (about a minute on 2 cores): the demo suite's
    24 trials and report, an AlphaPilot lap, a depth and an RGB frame, on one page."""
    r = runner.invoke(app, ["demo", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    for said in ("24 benchmark trials", "benchmark: 24 trials in", "AlphaPilot lap"):
        assert said in r.output, r.output  # it says what it is doing, not only a bar
    _demo_page_checks(tmp_path, 24)
    page = (tmp_path / "index.html").read_text()
    for part in (
        "1. A small navigation benchmark",
        "2. An AlphaPilot 2019 lap",
        "3. One scene, two sensors",
        "4. Next",
        "volary bench run --suite quick",
    ):
        assert part in page, part  # fmt: skip
    assert (tmp_path / "bench" / "index.html").is_file()
    for name in ("race.png", "depth.png", "rgb.png"):
        assert (tmp_path / name).stat().st_size > 5_000, name


def test_bench_physics_measures_each_size_and_backend_and_writes_json(tmp_path, monkeypatch):
    import functools

    from volary.sim import throughput

    short = functools.partial(throughput.measure_volary, repeats=2, min_time=0.02)
    monkeypatch.setattr(throughput, "measure_volary", short)  # the same measurement, shorter
    args = ["bench", "physics", "--n", "1", "--n", "8", "--backend", "eager", "--threads", "1"]
    r = runner.invoke(app, [*args, "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    rows = json.loads((tmp_path / "physics-volary.json").read_text())
    assert [(row["impl"], row["n_envs"]) for row in rows] == [
        ("volary-eager", 1),
        ("volary-eager", 8),
    ]
    assert all(row["env_steps_per_s"] > 0 for row in rows) and "env-steps/s" in r.output


def test_scene_list_preview_export(tmp_path):
    r = runner.invoke(app, ["scene", "list"])
    assert r.exit_code == 0 and "forest" in r.output and "perlin" in r.output
    r = runner.invoke(app, ["scene", "preview", "maze", "--seed", "1", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "maze-1.png").stat().st_size > 10_000
    for fmt in ("ply", "obj", "pcd"):
        r = runner.invoke(
            app,
            ["scene", "export", "forest", "--seed", "2", "--format", fmt, "--out", str(tmp_path)],
        )
        assert r.exit_code == 0, r.output
        assert (tmp_path / f"forest-2.{fmt}").stat().st_size > 1000


def test_scene_export_out_may_name_the_file_itself(tmp_path):
    """`--out maze.obj` made a directory maze.obj holding maze-2.ply; a file name with a format's
    suffix is now the file, in that format (a --format that disagrees is refused)."""
    r = runner.invoke(
        app, ["scene", "export", "maze", "--seed", "2", "--out", str(tmp_path / "m.obj")]
    )
    assert r.exit_code == 0, r.output
    assert (tmp_path / "m.obj").is_file()
    assert (tmp_path / "m.obj").read_text().lstrip().startswith(("#", "v ", "o "))
    bad = ["scene", "export", "maze", "--out", str(tmp_path / "x.obj"), "--format", "stl"]
    r = runner.invoke(app, bad)
    assert r.exit_code == 2 and "disagrees with --out x.obj" in r.output
    assert not (tmp_path / "x.obj").exists()
    (tmp_path / "d.ply").mkdir()  # an existing directory stays a directory, whatever its name
    r = runner.invoke(app, ["scene", "export", "maze", "--out", str(tmp_path / "d.ply")])
    assert r.exit_code == 0 and (tmp_path / "d.ply" / "maze-0.ply").is_file(), r.output


def test_scene_errors_name_the_problem(tmp_path):
    r = runner.invoke(app, ["scene", "preview", "moon"])
    assert r.exit_code == 2 and "valid names" in r.output
    r = runner.invoke(app, ["scene", "preview", "hall.PLY"])  # a file where a type goes
    assert r.exit_code == 2 and "custom --set path=hall.PLY" in r.output
    r = runner.invoke(app, ["scene", "export", "forest", "--format", "xyz", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "format" in r.output


def test_race_rejects_a_negative_course_count(tmp_path):
    r = runner.invoke(app, ["race", "--courses", "-1", "--out", str(tmp_path)])
    assert r.exit_code == 2
    assert "--courses" in r.output
    r = runner.invoke(app, ["race", "--contestant", "my_racerz:Racer", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "--contestant: contestant 'my_racerz:Racer': cannot import" in (
        r.output
    )
    assert not any(tmp_path.iterdir())  # refused before anything was flown or written


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "files"),
    [([], {"challenge.json", "race_best.png"}),  # the default: the sensors-only challenge
     (["--mode", "oracle"], {"race.json", "race_nominal.png"})],
)  # fmt: skip
def test_race_writes_results_and_plots(tmp_path, mode, files):
    r = runner.invoke(app, ["race", *mode, "--courses", "1", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "leaderboard" in r.output
    assert {p.name for p in tmp_path.iterdir()} >= files


@pytest.mark.parametrize(
    "args, message",
    [
        (["--sensor", "depth"], "expected NAME=KIND:PRESET[@HZ]"),
        (["--sensor", "d=sonar:x"], "kind expected one of"),
        (["--vehicles", "0"], "at least one slot"),
        (["--bind", "tcp://0.0.0.0:5599"], "give a token"),
        (["--scene", "none", "--sensor", "b=beacons:aerial_gym_64"], "need a scene with gates"),
        (["--control", "warp"], "control"),
    ],
)
def test_serve_rejects_bad_options_with_a_clear_message(args, message):
    r = runner.invoke(app, ["serve", "--ticks", "0", *args])
    assert r.exit_code == 2, r.output
    assert message in " ".join(r.output.split()), r.output


def test_a_suite_named_like_rich_markup_is_printed_not_interpreted(tmp_path):
    """Issue 18: a suite called "[/red]" (user text) used to raise rich's MarkupError."""
    suite = tmp_path / "s.toml"
    suite.write_text(
        'name = "[/red]"\nplatforms = ["0.60kg-EMAX"]\nscenarios = ["forest"]\nconfigs = [0]\n'
        "[settings]\ntime_limit = 2.0\n"
    )
    res = runner.invoke(app, ["bench", "run", "--suite", str(suite), "--out",
                              str(tmp_path / "run"), "--workers", "0", "--quiet"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "suite [/red]: 1 trials" in res.output
