"""``volary bench run --algo ros1:NAME`` (volary.bench.nav.ros1): a ROS 1 planner, started from
its launch description, flies FLYINGTRUST's protocol on sim time; a planner that crashes, hangs
or publishes nothing is an ``error`` row and the run goes on; bad descriptions are refused in
one line. The planner is tests/ros1_nodes/nav_standin.py (Debian's rospy, nothing of volary)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from volary.errors import ConfigError, FileFormatError, UnknownNameError
from volary.ros1.env import missing_ros1

NODE = Path(__file__).parent / "ros1_nodes" / "nav_standin.py"
WHY = missing_ros1()
needs_ros1 = pytest.mark.skipif(WHY is not None, reason=str(WHY))
PLATFORM = "1.00kg-SunnySky"
SCENARIO, CONFIG = "urban", 17  # a configuration whose straight line to the goal is clear


def _planners(path: Path, log_dir: Path) -> Path:
    """A planners file: the stand-in flying, and its crash, hang and silent variants."""
    text = ""
    for mode in ("ok", "crash", "hang", "silent"):
        text += (
            f'[standin_{mode}]\ncommand = ["/usr/bin/python3", "{NODE}", "--mode", "{mode}", '
            f'"--speed", "{{max_speed}}"]\nclock_hz = 50.0\nhang_timeout = 1.0\n'
            f'log_dir = "{log_dir}"\nstep_wait = 0.1\n'
            f'params = {{ "/standin/radius" = "{{radius}}" }}\n\n'
        )
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def planners(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("ros1bench")
    return _planners(d / "planners.toml", d / "logs")


def _suite(trials: int) -> object:
    """``trials`` trials (noise seeds) of one configuration."""
    from volary.bench.nav.protocol import Suite

    return Suite("ros1", (PLATFORM,), (SCENARIO,), (CONFIG,), trials)


@needs_ros1
@pytest.mark.ros1  # make test ROS1=skip leaves it out
def test_the_standin_flies_a_two_trial_suite_and_faulty_planners_are_error_rows(
    planners: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from volary.bench.nav.ros1 import _RELAYS
    from volary.bench.nav.runner import load_results, run_suite

    monkeypatch.setenv("VOLARY_ROS1_PLANNERS", str(planners))
    run_suite(_suite(2), ["ros1:standin_ok"], tmp_path / "ok.sqlite", workers=0, progress=False)
    ok = load_results(tmp_path / "ok.sqlite")
    assert [r.cause for r in ok] == ["success", "success"], [r.error for r in ok]
    for r in ok:
        assert r.max_speed <= 4.0 and r.final_distance <= 2.0
    # the crash comes first: the run goes on to the hang and the silent one (same relay)
    faulty = ["ros1:standin_crash", "ros1:standin_hang", "ros1:standin_silent"]
    run_suite(_suite(1), faulty, tmp_path / "bad.sqlite", workers=0, progress=False)
    rows = {r.algo: r for r in load_results(tmp_path / "bad.sqlite")}
    _RELAYS.stop()  # ends the last trial (the episode drops its planners without a close)
    for mode, why in (("crash", "crashed: the command exited with code 3"),
                      ("hang", "hung: no PositionCommand on /planning/pos_cmd for 1 s"),
                      ("silent", "published nothing")):  # fmt: skip
        r = rows[f"ros1:standin_{mode}"]
        assert r.cause == "error" and why in r.error, r.error
    log = (planners.parent / "logs" / "timing.jsonl").read_text().splitlines()
    timing = [json.loads(x) for x in log]
    assert len(timing) == 5 and all(0 <= t["wait_share"] <= 1 for t in timing)
    assert all(t["commands"] > 100 for t in timing if t["planner"] == "ros1:standin_ok")


def test_bad_launch_descriptions_are_refused_in_one_line(tmp_path: Path) -> None:
    from volary.bench.nav.ros1 import check_algo, load_description

    good = 'command = ["/usr/bin/true"]\n'
    cases = {
        "missing_command": ("clock_hz = 100.0\n", "command: field required"),
        "empty_command": ("command = []\n", "command: list should have at least 1 item"),
        "bad_topic": (
            good + '[bad_topic.topics]\nodom = "not a topic"\n',
            "topics.odom: value error, expected a ROS graph name",
        ),
        "bad_rate": (good + "clock_hz = 0.0\n", "clock_hz: input should be greater than 0"),
        "nan_timeout": (good + "hang_timeout = nan\n", "hang_timeout:"),
        "string_rate": (good + 'clock_hz = "100"\n', "clock_hz: input should be a valid number"),
        "unknown_key": (good + "speed = 3.0\n", "speed: extra inputs are not permitted"),
        "bad_placeholder": ('command = ["x", "{maxspeed}"]\n', "unknown placeholder {maxspeed}"),
        "bad_encoding": (good + 'depth_encoding = "8UC1"\n', "depth_encoding: input should be"),
    }
    for name, (body, want) in cases.items():
        text = f"[{name}]\n" + body.replace("[bad_topic.", f"[{name}.")
        path = tmp_path / f"{name}.toml"
        path.write_text(text)
        with pytest.raises(FileFormatError) as e:
            load_description(name, path)
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(f"{path}: {name}: ") and want in msg, msg
    path = tmp_path / "ok.toml"
    path.write_text("[ego]\n" + good)
    assert load_description("ego", path).command == ["/usr/bin/true"]
    with pytest.raises(UnknownNameError, match="ego"):
        load_description("fast", path)
    with pytest.raises(ConfigError, match="no planners file"):
        load_description("ego", tmp_path / "absent.toml")
    check_algo("straight")  # not a ROS 1 planner: nothing to check


def test_commands_become_the_ticks_reference() -> None:
    """Commands at their stamps (a repeated stamp: the newer), the last carried at its velocity
    to the next tick; none: no reference (the episode holds the position)."""
    from volary.bench.nav.ros1 import _reference

    def cmd(p: float, v: float) -> np.ndarray:
        return np.array([p, 0, 1, v, 0, 0, 0.5, 0, 0, 0.3])

    ref = _reference([(0.02, cmd(0.2, 2.0)), (0.0, cmd(0.0, 1.0)), (0.02, cmd(0.25, 2.0))],
                     0.0, 0.1)  # fmt: skip
    assert ref.times.tolist() == [0.0, 0.02, 0.1]
    assert ref.positions[:, 0].tolist() == pytest.approx([0.0, 0.25, 0.25 + 2.0 * 0.08])
    assert ref.velocities[-1, 0] == 2.0 and ref.yaws.tolist() == [0.3] * 3
    assert _reference([], 0.0, 0.1) is None


def test_bench_run_refuses_an_unknown_ros1_planner_before_the_run(tmp_path: Path) -> None:
    """``volary bench run --algo ros1:NAME`` reads the planners file first: a name it lacks is
    one ``error:`` line, exit 2, and no database is created."""
    import os
    import subprocess
    import sys

    planners = tmp_path / "planners.toml"
    planners.write_text('[ego]\ncommand = ["true"]\n')
    env = dict(os.environ, VOLARY_ROS1_PLANNERS=str(planners))
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "volary.cli.main", "bench", "run", "--algo", "ros1:nosuch",
           "--out", str(out)]  # fmt: skip
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stdout == "" and r.stderr.count("\n") == 1, (r.stdout, r.stderr)
    assert r.stderr.startswith("error:") and "nosuch" in r.stderr and "ego" in r.stderr
    assert not out.exists()
