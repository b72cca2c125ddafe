"""``volary bench run --algo ros1:NAME`` (volary.studies.flyingtrust.ros1): a ROS 1 planner, started
from its launch description, flies FLYINGTRUST's protocol on sim time; a planner that crashes, hangs
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
    from volary.studies.flyingtrust.protocol import Suite

    return Suite("ros1", (PLATFORM,), (SCENARIO,), (CONFIG,), trials)


@needs_ros1
@pytest.mark.ros1  # make test ROS1=skip leaves it out
def test_the_standin_flies_a_two_trial_suite_and_faulty_planners_are_error_rows(
    planners: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from volary.studies.flyingtrust.ros1 import _RELAYS
    from volary.studies.flyingtrust.run import load_results, run_suite

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
    for mode, why in (("crash", "crashed: the command exited with code 3"),
                      ("hang", "hung: no PositionCommand on /planning/pos_cmd for 1 s"),
                      ("silent", "published nothing")):  # fmt: skip
        r = rows[f"ros1:standin_{mode}"]
        assert r.cause == "error" and why in r.error, r.error
    # every trial's timing line is written when its unit ends (the relays still run: a pool
    # worker may exit right after its last unit, with its relays)
    log = (planners.parent / "logs" / "timing.jsonl").read_text().splitlines()
    timing = [json.loads(x) for x in log]
    _RELAYS.stop()
    assert len(timing) == 5 and all(0 <= t["wait_share"] <= 1 for t in timing)
    assert all(t["commands"] > 100 for t in timing if t["planner"] == "ros1:standin_ok")


def test_bad_launch_descriptions_are_refused_in_one_line(tmp_path: Path) -> None:
    from volary.studies.flyingtrust.ros1 import check_algo, load_description

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
        "nan_goal_height": (good + "goal_height = nan\n", "goal_height:"),
        "bad_goal_message": (good + 'goal_message = "twist"\n', "goal_message: input should be"),
        "bad_origin": (good + 'origin = "start"\n', "origin: input should be"),
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
    from volary.studies.flyingtrust.ros1 import _reference

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


# ---- what EGO-Planner and Fast-Planner need of the relay (issue 56) ----------------------------
# A stand-in that speaks as they do: the goal arrives as a nav_msgs/Path on
# /waypoint_generator/waypoints, its z is replaced by 1.0 m, and it records the goal and the
# first odometry it received (in its own frame) to --record.
EGO_LIKE = """
import json, math, sys
sys.path.insert(0, sys.argv[1])
from nav_standin import profile
import rospy
from nav_msgs.msg import Odometry, Path
from quadrotor_msgs.msg import PositionCommand

rospy.init_node("ego_like")
state = {"odom": None, "plan": None, "goal": None}
pub = rospy.Publisher("/planning/pos_cmd", PositionCommand, queue_size=100, tcp_nodelay=True)

def on_odom(m):
    p = m.pose.pose.position
    state["odom"] = state["odom"] or (p.x, p.y, p.z)
    state["now"] = (p.x, p.y, p.z)

def on_goal(m):
    if state["now"] is None or state["plan"] is not None:
        return
    g = m.poses[0].pose.position
    goal = (g.x, g.y, 1.0)  # as ego_replan_fsm.cpp:119 and kino_replan_fsm.cpp:74
    with open(sys.argv[2], "w") as f:
        json.dump({"goal": [g.x, g.y, g.z], "odom": state["odom"]}, f)
    start = state["now"]
    d = [b - a for a, b in zip(start, goal)]
    n = math.sqrt(sum(x * x for x in d)) or 1e-9
    state["plan"] = (rospy.Time.now().to_sec(), start, [x / n for x in d], n)

def on_timer(event):
    if state["plan"] is None:
        return
    t0, start, u, n = state["plan"]
    now = rospy.Time.now()
    s, v, a = profile(n, 3.0, 2.0, now.to_sec() - t0)
    c = PositionCommand()
    c.header.stamp, c.header.frame_id = now, "world"
    c.position.x, c.position.y, c.position.z = (p + s * k for p, k in zip(start, u))
    c.velocity.x, c.velocity.y, c.velocity.z = (v * k for k in u)
    c.acceleration.x, c.acceleration.y, c.acceleration.z = (a * k for k in u)
    c.yaw, c.trajectory_flag = math.atan2(u[1], u[0]), 1
    pub.publish(c)

state["now"] = None
rospy.Subscriber("/volary/odom", Odometry, on_odom, tcp_nodelay=True)
rospy.Subscriber("/waypoint_generator/waypoints", Path, on_goal, tcp_nodelay=True)
rospy.Timer(rospy.Duration(0.01), on_timer)
rospy.spin()
"""


@needs_ros1
@pytest.mark.ros1
def test_a_planner_that_takes_a_path_goal_at_1m_flies_to_the_trials_goal_height(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``goal_message = "path"``, ``origin = "centre"``, ``goal_height = 1.0``: the goal reaches
    the planner as EGO's waypoint Path, in a frame centred on the flight volume and lowered so
    the goal is at 1.0 m; its commands come back into volary's world, so the vehicle ends at
    the trial's goal height (urban: 2.0 m), not at 1.0 m."""
    from volary.studies.flyingtrust.ros1 import _RELAYS
    from volary.studies.flyingtrust.run import load_results, run_suite
    from volary.worlds import make_scenario

    node, record = tmp_path / "ego_like.py", tmp_path / "record.json"
    node.write_text(EGO_LIKE)
    planners = tmp_path / "planners.toml"
    planners.write_text(
        f'[ego_like]\ncommand = ["/usr/bin/python3", "{node}", "{NODE.parent}", "{record}"]\n'
        f'goal_message = "path"\norigin = "centre"\ngoal_height = 1.0\ntwist_frame = "world"\n'
        f'clock_hz = 50.0\nstep_wait = 0.1\nlog_dir = "{tmp_path / "logs"}"\n'
        '[ego_like.topics]\ngoal = "/waypoint_generator/waypoints"\n'
    )
    monkeypatch.setenv("VOLARY_ROS1_PLANNERS", str(planners))
    run_suite(_suite(1), ["ros1:ego_like"], tmp_path / "run.sqlite", workers=0, progress=False)
    _RELAYS.stop()
    (row,) = load_results(tmp_path / "run.sqlite")
    assert row.cause == "success", row.error
    spec = make_scenario(SCENARIO, CONFIG)
    goal, lo, hi = (np.array(x, dtype=float) for x in (spec.goal, spec.bounds_min, spec.bounds_max))
    assert goal[2] == 2.0
    off = np.array([*(0.5 * (lo[:2] + hi[:2])), goal[2] - 1.0])
    seen = json.loads(record.read_text())
    assert seen["goal"] == pytest.approx((goal - off).tolist(), abs=1e-6)
    assert seen["odom"] == pytest.approx((np.array(spec.start) - off).tolist(), abs=0.05)
    track = np.array(json.loads(row.track))
    assert track[-1, 3] == pytest.approx(goal[2], abs=0.2)  # [t, x, y, z]: at the goal's height


def test_the_planners_frame_offset_uses_only_the_flight_volume_and_the_goal() -> None:
    from types import SimpleNamespace

    from volary.studies.flyingtrust.ros1 import LaunchDescription, frame_offset, task_values

    task = SimpleNamespace(bounds_min=np.array([0.0, -10.0, 0.0]), goal=np.array([5, 6, 2.5]),
                           bounds_max=np.array([60.0, 30.0, 14.0]))  # fmt: skip
    plain = LaunchDescription(command=["x"])
    assert frame_offset(plain, task).tolist() == [0.0, 0.0, 0.0]
    both = LaunchDescription(command=["x"], origin="centre", goal_height=1.0)
    assert frame_offset(both, task).tolist() == [30.0, 10.0, 1.5]
    lim = SimpleNamespace(max_speed=3.8, max_acc=5.0, max_vertical_acc=9.0, plan_radius=0.3)
    cam = SimpleNamespace(fx=32.0, fy=32.0, cx=32.0, cy=24.0, width=64, height=48,
                          max_range=10.0, rate_hz=10.0)  # fmt: skip
    values = task_values(SimpleNamespace(**vars(task), limits=lim, depth=cam, seed=1))
    assert (values["extent_x"], values["extent_y"], values["extent_z"]) == (60.0, 40.0, 14.0)
    assert (values["cx"], values["cy"]) == (31.5, 23.5)  # ROS's pixel-centre convention


def test_ending_a_trial_ends_the_nodes_a_launcher_started_in_sessions_of_their_own(
    tmp_path: Path,
) -> None:
    """roslaunch starts each node with ``setsid``: killing the command's process group left
    EGO-Planner's node running into the next trial (two nodes of one name on one master; the
    master shut the new one down). The trial's end must end every descendant."""
    import os
    import subprocess
    import time

    from volary.studies.flyingtrust.ros1 import _kill_group

    _alive = _running
    pidfile = tmp_path / "pid"
    script = f"setsid sleep 300 & echo $! > {pidfile}; wait"
    proc = subprocess.Popen(["bash", "-c", script], start_new_session=True)
    end = time.monotonic() + 10
    while not (pidfile.is_file() and pidfile.read_text().strip()) and time.monotonic() < end:
        time.sleep(0.02)
    node = int(pidfile.read_text())
    while os.getsid(node) == os.getsid(proc.pid) and time.monotonic() < end:
        time.sleep(0.02)  # $! is written before setsid(1) has run in the child: wait for it
    assert _alive(node) and os.getsid(node) != os.getsid(proc.pid)
    try:
        _kill_group(proc, grace=1.0)
        end = time.monotonic() + 5
        while _alive(node) and time.monotonic() < end:
            time.sleep(0.02)
        assert not _alive(node), "the node in its own session outlived the trial"
    finally:
        if _alive(node):
            os.kill(node, 9)


def _ego_workspace() -> Path | None:
    """``$VOLARY_EGO_WS``, else the newest ``volary ros1 build`` of EGO-Planner in the cache."""
    import os

    env = os.environ.get("VOLARY_EGO_WS")
    found = (
        [Path(env)]
        if env
        else sorted(
            (Path.home() / ".cache/volary/ros1-planners").glob("ego-planner-*"),
            key=lambda p: p.stat().st_mtime,
        )
    )
    for ws in reversed(found):
        if (ws / "volary-build.json").is_file() and (ws / "devel/setup.bash").is_file():
            return ws
    return None


@needs_ros1
@pytest.mark.ros1
@pytest.mark.slow
@pytest.mark.skipif(_ego_workspace() is None, reason="no EGO-Planner workspace (volary ros1 build)")
def test_the_published_ego_planner_flies_a_trial_of_the_protocol(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """examples/ros1_planners.toml's ``ego``: EGO-Planner itself (planner node + traj_server)
    flies one trial and ends it as a flight (success, collision, timeout, ...), not an error:
    it started, took the goal, streamed commands that volary tracked, and was ended cleanly."""
    from volary.studies.flyingtrust.ros1 import _RELAYS
    from volary.studies.flyingtrust.run import load_results, run_suite

    example = Path(__file__).parents[1] / "examples" / "ros1_planners.toml"
    planners = tmp_path / "planners.toml"
    text = example.read_text().replace('log_dir = "out/ros1"', f'log_dir = "{tmp_path}/logs"')
    planners.write_text(text)
    monkeypatch.setenv("VOLARY_ROS1_PLANNERS", str(planners))
    monkeypatch.setenv("VOLARY_EGO_WS", str(_ego_workspace()))
    run_suite(_suite(1), ["ros1:ego"], tmp_path / "run.sqlite", workers=0, progress=False)
    _RELAYS.stop()
    (row,) = load_results(tmp_path / "run.sqlite")
    assert row.cause != "error", row.error
    assert row.path_length > 5.0, "the planner did not fly"
    (timing,) = [json.loads(x) for x in (tmp_path / "logs/timing.jsonl").read_text().splitlines()]
    assert timing["commands"] > 100


@needs_ros1
@pytest.mark.ros1
def test_a_launch_that_exits_while_starting_leaves_no_process_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command exits (code 3) before it subscribes, while a launcher it started lives on
    with a node in a session of its own (roslaunch's ``setsid``): the trial is an ``error``
    row and nothing it started outlives it (the host had no trial to close: the start failed)."""
    import os
    import time

    from volary.studies.flyingtrust.ros1 import _RELAYS
    from volary.studies.flyingtrust.run import load_results, run_suite

    pidfile = tmp_path / "pid"
    launcher = f"setsid sleep 300 & echo $! > {pidfile}; wait"
    planners = tmp_path / "planners.toml"
    planners.write_text(
        f'[dies]\ncommand = ["bash", "-c", "bash -c \'{launcher}\' & sleep 1; exit 3"]\n'
        f'log_dir = "{tmp_path / "logs"}"\n'
    )
    monkeypatch.setenv("VOLARY_ROS1_PLANNERS", str(planners))
    run_suite(_suite(1), ["ros1:dies"], tmp_path / "run.sqlite", workers=0, progress=False)
    (row,) = load_results(tmp_path / "run.sqlite")
    node = int(pidfile.read_text())
    try:
        assert row.cause == "error" and "crashed: the command exited with code 3" in row.error
        end = time.monotonic() + 10
        while _running(node) and time.monotonic() < end:
            time.sleep(0.05)
        assert not _running(node), "a process the failed start began outlived the trial"
    finally:
        _RELAYS.stop()
        if _running(node):
            os.kill(node, 9)


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (not gone, not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


EXAMPLE = Path(__file__).parents[1] / "examples" / "ros1_planners.toml"
VOLUME_DESCRIPTIONS = ("ego_volume", "fast_planner_volume")


def _volume_task() -> object:
    """A trial whose goal (2.5 m) lies 1.5 m above the 1 m the published planners fly at."""
    from types import SimpleNamespace

    lim = SimpleNamespace(max_speed=3.8, max_acc=5.0, max_vertical_acc=9.0, plan_radius=0.3)
    cam = SimpleNamespace(fx=32.0, fy=32.0, cx=32.0, cy=24.0, width=64, height=48,
                          max_range=10.0, rate_hz=10.0)  # fmt: skip
    return SimpleNamespace(bounds_min=np.array([0.0, -10.0, 0.0]), goal=np.array([5, 6, 2.5]),
                           bounds_max=np.array([60.0, 30.0, 4.0]), limits=lim, depth=cam,
                           seed=1)  # fmt: skip


@pytest.mark.parametrize("name", VOLUME_DESCRIPTIONS)
def test_the_published_planners_get_the_trials_floor_and_ceiling_in_their_frame(
    name: str,
) -> None:
    """Issue 56: EGO-Planner and Fast-Planner flew into the scene's ceiling and floor because
    their map's ground and virtual ceiling were fixed; the ``*_volume`` descriptions give them
    the trial's flight volume as {floor} and {ceiling}, in the planner's frame (the goal-height
    shift applied, as to every position the relay sends)."""
    from volary.studies.flyingtrust.ros1 import load_description, substitute, task_values

    desc = load_description(name, EXAMPLE)
    task = _volume_task()
    values = task_values(task, desc)
    assert (values["floor"], values["ceiling"]) == (-1.5, 2.5)  # volume 0..4 m, frame 1.5 m up
    assert (values["floor"], values["ceiling"]) == pytest.approx(
        (task.bounds_min[2] - (task.goal[2] - 1.0), task.bounds_max[2] - (task.goal[2] - 1.0))
    )
    plain = task_values(task)
    assert (plain["floor"], plain["ceiling"]) == (0.0, 4.0)  # no description: volary's frame
    script = " ".join(substitute(a, values) for a in desc.command)
    assert "floor:=-1.5 ceiling:=2.5 radius:=0.3 " in script
    assert "map_size_x_:=60.0 map_size_y_:=40.0 " in script
    assert f"examples/ros1_{name}.launch" in script


def _workspace(name: str) -> Path | None:
    """The planner's workspace: its environment variable, else the newest cached build."""
    import os

    var, glob = {
        "ego_volume": ("VOLARY_EGO_WS", "ego-planner-*"),
        "fast_planner_volume": ("VOLARY_FAST_PLANNER_WS", "fast-planner-*"),
    }[name]
    if os.environ.get(var):
        return Path(os.environ[var])
    found = sorted((Path.home() / ".cache/volary/ros1-planners").glob(glob))
    return found[-1] if found else None


@needs_ros1
@pytest.mark.ros1
@pytest.mark.parametrize("name", VOLUME_DESCRIPTIONS)
def test_the_volume_launch_files_override_the_upstream_floor_and_ceiling(name: str) -> None:
    """The node reads its map's ground_height, virtual_ceil_height and map_size_z once, at
    construction: roslaunch must hand it the trial's, not the fixed values of upstream's XML.
    Parses the example's own roslaunch line with ``--dump-params`` (no node is started)."""
    import subprocess

    import yaml

    from volary.studies.flyingtrust.ros1 import load_description, substitute, task_values

    ws = _workspace(name)
    if ws is None or not (ws / "devel/setup.bash").exists():
        pytest.skip(f"no built workspace for {name} (volary ros1 build)")
    desc = load_description(name, EXAMPLE)
    values = task_values(_volume_task(), desc)
    script = substitute(desc.command[2], values)
    launch = script[script.index("roslaunch") : script.index(" &\n")]
    launch = launch.replace("--skip-log-check", "--dump-params")
    out = subprocess.run(
        ["bash", "-c", f'source "{ws}/devel/setup.bash" && {launch}'],
        cwd=EXAMPLE.parents[1], capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    params = yaml.safe_load(out.stdout)
    node, grid = {"ego_volume": ("/ego_planner_node", "grid_map"),
                  "fast_planner_volume": ("/fast_planner_node", "sdf_map")}[name]  # fmt: skip
    got = {k: params[f"{node}/{grid}/{k}"] for k in
           ("ground_height", "virtual_ceil_height", "map_size_z", "map_size_x")}  # fmt: skip
    assert got == pytest.approx(
        {
            "ground_height": -1.5 + 0.3,
            "virtual_ceil_height": 2.5 - 0.3,
            "map_size_z": 2.5 + 1.5 + 1.0,
            "map_size_x": 60.0,
        }  # fmt: skip
    )
