"""Issue 54: volary as FlightGoggles on ROS 1 (:mod:`volary.ros1`).

The integration test starts Debian's rosmaster on a free loopback port, the bridge
(``python -m volary.ros1 serve``, lock-step), a probe and the FlightGoggles racer
(tests/ros1_nodes, Debian's /usr/bin/python3, nothing of volary), and checks the lap, the
parameters, the sensor conventions and a refused command in one run (one bridge, whichever
xdist worker runs it). The other tests need no ROS master; those that need ROS 1 at all are
skipped, with the missing package named, when Debian's ROS 1 is not installed.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import threading
import time
import xmlrpc.client
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from _procs import Procs
from volary.errors import ConfigError
from volary.ros1.env import (
    Ros1Error,
    check_loopback,
    client_env,
    free_port,
    master_uri,
    missing_ros1,
    ros_env,
    start_master,
)
from volary.ros1.lap import COLLISION, COMPLETED, TIMED_OUT, Lap
from volary.ros1.msgs import EXPECTED_MD5

NODES = Path(__file__).parent / "ros1_nodes"
WHY = missing_ros1()
needs_ros1 = pytest.mark.skipif(WHY is not None, reason=str(WHY))
SPEED = 7.0  # the racer's cruise speed, m/s
CONTROL_HZ = 60  # ticks per sim s in the test (the bridge's default is 120)
LAP_TIMEOUT = 150.0  # wall s


# ---- without a ROS master -------------------------------------------------------------------
def _spec() -> Any:
    from volary.worlds import alphapilot_2019

    return alphapilot_2019()


def test_lap_record_and_score_follow_the_reporter_and_race_rules() -> None:
    from volary.bench.gate_race import race_score

    names = ["Gate10", "Gate21", "Gate2"]
    lap = Lap(names, timeout_s=300.0)
    lap.passed(0, 1.0, (0.0, 0.0, 0.0))  # not armed yet: ignored
    lap.start(2.0)
    lap.passed(1, 7.0, (1.0, 2.0, 3.0))  # gate 0 skipped
    lap.passed(2, 12.5, (4.0, 5.0, 6.0))
    doc = lap.results()
    assert doc["Gate0"] == {"Name": "Gate10", "Success": "False"}
    assert doc["Gate1"] == {"Name": "Gate21", "Success": "True", "Time": 5.0,
                            "Location": [1.0, 2.0, 3.0]}  # fmt: skip
    assert doc["Result"] == COMPLETED and list(doc)[-1] == "Result"
    want = race_score(torch.tensor([2]), torch.tensor([10.5], dtype=torch.float64),
                      torch.tensor([True]), torch.tensor([False]), 300.0)  # fmt: skip
    assert lap.score() == pytest.approx(float(want[0])) == pytest.approx(20.0 - 10.5)
    assert yaml.safe_load(lap.results_yaml()) == doc

    crashed = Lap(names, timeout_s=300.0)
    crashed.start(0.0)
    crashed.passed(0, 3.0, (0.0, 0.0, 0.0))
    crashed.collided()
    crashed.passed(1, 4.0, (0.0, 0.0, 0.0))  # the run is over
    assert crashed.result == COLLISION and crashed.gates_passed == 1 and crashed.score() == 0.0

    slow = Lap(names, timeout_s=10.0)
    slow.start(1.0)
    slow.check_time(11.0)
    assert slow.result is None
    slow.check_time(11.5)
    assert slow.result == TIMED_OUT and slow.score() == 0.0


def test_parameters_are_flightgoggles_values_for_the_course() -> None:
    from volary.ros1.bridge import CAMERA, RANGER, Ros1Options, serve_config
    from volary.ros1.params import fg_params
    from volary.sensors import camera_config, rangefinder_config
    from volary.serve.host import WorldHost

    host = WorldHost(serve_config(Ros1Options()))
    spec = host.world.specs[0]
    p = fg_params(host.world, spec, camera_config(CAMERA), rangefinder_config(RANGER), "r.yaml")
    _check_params(p.__getitem__, spec)


def _check_params(get: Any, spec: Any) -> None:
    """The parameters (read with ``get(name)``) against FlightGoggles 2019's values and the
    course ``spec``."""
    dyn = "/uav/flightgoggles_uav_dynamics/"
    assert get("/use_sim_time") is True
    assert get("/uav/gate_names") == spec.meta["order"]
    for gate in spec.gates:
        np.testing.assert_allclose(get(f"/uav/{gate.name}/nominal_location"), gate.corners)
        assert get(f"/uav/{gate.name}/perturbation_bound") == list(
            spec.meta["perturbation"][gate.name]
        )
    np.testing.assert_allclose(get(dyn + "init_pose"),
                               [18.0, -23.0, 5.3, 0.0, 0.0, math.sqrt(0.5), math.sqrt(0.5)],
                               atol=1e-6)  # fmt: skip
    expected = {
        dyn + "vehicle_mass": 1.0, dyn + "vehicle_inertia_xx": 0.0049,
        dyn + "vehicle_inertia_zz": 0.0049, dyn + "max_prop_speed": 2200.0,
        dyn + "moment_arm": 0.08, dyn + "thrust_coefficient": 1.91e-6,
        dyn + "torque_coefficient": 2.6e-7, dyn + "motor_time_constant": 0.02,
        dyn + "drag_coefficient": 0.1, dyn + "min_arming_thrust": 9.9,
        dyn + "reset_timeout": 0.1, dyn + "angular_process_noise": 0.00025,
        dyn + "linear_process_noise": 0.0005,
        "/uav/flightgoggles_imu/accelerometer_variance": 0.005,
        "/uav/flightgoggles_imu/gyroscope_variance": 0.003,
        "/uav/flightgoggles_lpf/gain_p": 35530.5758439217,
        "/uav/flightgoggles_lpf/gain_q": 266.572976289502,
        "/uav/flightgoggles_pid/gain_p_roll": 9.0, "/uav/flightgoggles_pid/gain_i_pitch": 3.0,
        "/uav/flightgoggles_pid/gain_d_yaw": 0.3, "/uav/flightgoggles_pid/int_bound_yaw": 1000.0,
        "/uav/flightgoggles_ros_bridge/image_width": 1024,
        "/uav/flightgoggles_ros_bridge/image_height": 768,
        "/uav/flightgoggles_ros_bridge/collider_radius": 0.15,
        "/uav/timeout": 300.0, "/uav/gate_width": 0.3, "/uav/inflation": 0.1,
    }  # fmt: skip
    for name, value in expected.items():
        assert get(name) == pytest.approx(value, rel=1e-6), name


def test_options_name_the_bad_argument() -> None:
    from volary.ros1.bridge import Ros1Options

    for kw, name in (({"control_hz": 100.0}, "control_hz"), ({"course": "forest"}, "course"),
                     ({"speed": 0.0}, "speed"), ({"input_timeout": -1.0}, "input_timeout"),
                     ({"ticks": -3}, "ticks")):  # fmt: skip
        with pytest.raises(ConfigError, match=name):
            Ros1Options(**kw)


class _SteppingClock:
    """A wall clock that moves on ``step`` s at every read (a loaded machine) and whose
    ``sleep`` refuses a negative length as ``time.sleep`` does."""

    def __init__(self, step: float) -> None:
        self.t, self.step = 0.0, step

    def monotonic(self) -> float:
        self.t += self.step
        return self.t

    def sleep(self, s: float) -> None:
        if s < 0:
            raise ValueError("sleep length must be non-negative")
        self.t += s


def test_realtime_wait_survives_the_clock_passing_the_deadline(monkeypatch: Any) -> None:
    """Real time: when the wall clock passes the tick's deadline between the bridge's reads of
    it (a loaded machine), the tick goes on at once with the newest command (it used to die
    with 'sleep length must be non-negative'), and it never starts before its deadline."""
    from types import SimpleNamespace

    from volary.ros1 import bridge as B

    clock = _SteppingClock(0.03)
    monkeypatch.setattr(B, "time", clock)
    commands = B._Commands()
    commands.put(np.array([9.81, 0.0, 0.0, 0.0]))
    fake = SimpleNamespace(options=B.Ros1Options(realtime=True), commands=commands,
                           stop_event=threading.Event())  # fmt: skip
    for deadline in (0.05, 0.5, 0.0):  # passed between reads, ahead, passed already
        start = clock.t
        wait = B.Ros1Bridge._await_command
        got = wait(fake, commands.count, start + deadline)  # type: ignore[arg-type]
        np.testing.assert_array_equal(got, commands.latest)
        assert clock.monotonic() >= start + deadline


def test_stop_processes_ends_a_node_that_ignores_terminate() -> None:
    """The bridge, the racer node and the relay stop their children with one helper: SIGTERM,
    then SIGKILL after the grace period, last started first."""
    from volary.ros1.env import stop_processes

    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(60)"
    )
    quiet = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    procs = [quiet, subprocess.Popen([sys.executable, "-c", stubborn], stdout=subprocess.PIPE)]
    assert procs[1].stdout is not None and procs[1].stdout.readline().strip() == b"ready"
    t0 = time.monotonic()
    stop_processes(procs, grace_s=0.5)
    assert all(p.poll() is not None for p in procs)
    assert procs[1].returncode == -9 and procs[0].returncode == -15
    assert time.monotonic() - t0 < 5.0


def test_nothing_leaves_loopback() -> None:
    check_loopback("http://127.0.0.1:11311")
    with pytest.raises(Ros1Error, match="loopback"):
        check_loopback("http://192.168.1.5:11311")
    env = ros_env("http://127.0.0.1:5", {"ROS_HOSTNAME": "example.org", "PATH": "/bin"})
    assert env["ROS_IP"] == "127.0.0.1" and "ROS_HOSTNAME" not in env
    assert env["ROS_MASTER_URI"] == "http://127.0.0.1:5"


# ---- with Debian's ROS 1 --------------------------------------------------------------------
@needs_ros1
def test_generated_messages_have_flightgoggles_md5s(tmp_path: Path) -> None:
    """Our .msg files, generated by genpy, give the MD5 sums of the upstream definitions (the
    sums ROS 1 compares when a FlightGoggles client connects)."""
    done = subprocess.run([sys.executable, "-m", "volary.ros1", "msgs", "--msg-cache",
                           str(tmp_path)], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    dirs = dict(line.split("=", 1) for line in done.stdout.split())
    code = (
        "import json, pathlib, genmsg, genmsg.msg_loader as L, importlib\n"
        f"msg = pathlib.Path({dirs['msg']!r})\n"
        "sp = {'std_msgs': ['/usr/share/std_msgs/msg'], 'geometry_msgs': "
        "['/usr/share/geometry_msgs/msg'], 'mav_msgs': [str(msg / 'mav_msgs')], "
        "'flightgoggles': [str(msg / 'flightgoggles')]}\n"
        "out = {}\n"
        f"for t in {sorted(EXPECTED_MD5)!r}:\n"
        "    ctx = genmsg.MsgContext.create_default()\n"
        "    spec = L.load_msg_by_type(ctx, t, sp); L.load_depends(ctx, spec, sp)\n"
        "    cls = getattr(importlib.import_module(t.split('/')[0] + '.msg'), t.split('/')[1])\n"
        "    out[t] = [genmsg.compute_md5(ctx, spec), cls._md5sum, cls._type]\n"
        "print(json.dumps(out))\n"
    )
    env = client_env("http://127.0.0.1:11311", [Path(dirs["pythonpath"])])
    got = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True,
                         env=env, timeout=60)  # fmt: skip
    assert got.returncode == 0, got.stderr
    for t, (from_msg, from_class, name) in json.loads(got.stdout).items():
        assert from_msg == from_class == EXPECTED_MD5[t] and name == t
    assert (Path(dirs["include"]) / "mav_msgs" / "RateThrust.h").is_file()


def _lines(proc: subprocess.Popen) -> list[str]:
    """``proc``'s stdout lines, collected by a thread as they come."""
    lines: list[str] = []

    def pump() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _wait_for(proc: subprocess.Popen, lines: list[str], prefix: str, timeout: float) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = [x for x in lines if x.startswith(prefix)]
        if found:
            return found[0]
        if proc.poll() is not None and not any(x.startswith(prefix) for x in lines):
            time.sleep(0.2)
            break
        time.sleep(0.05)
    raise AssertionError(f"no {prefix!r} line (exit {proc.poll()}):\n{''.join(lines)[-3000:]}")


def _serve(
    tmp_path: Path, procs: Procs, *args: str, before: Callable[[str], None] | None = None
) -> tuple[str, dict[str, str], list[str]]:
    """A rosmaster on a free loopback port and the bridge (``args`` added), serving: (the
    master's URI, a client node's environment, the bridge's output lines so far; the bridge
    is ``procs.procs[-1]``). ``before(uri)`` runs once the master answers, before the bridge
    starts."""
    log, home = tmp_path / "log", tmp_path / "ros"
    port = free_port()
    uri = master_uri(port)
    procs.procs.append(start_master(port, log))
    if before is not None:
        before(uri)
    bridge = procs.start(
        [sys.executable, "-m", "volary.ros1", "serve", "--results", str(tmp_path / "results.yaml"),
         "--msg-cache", str(tmp_path / "m"), "--log-dir", str(log), *args],
        env=ros_env(uri, ROS_HOME=str(home), ROS_LOG_DIR=str(log)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines = _lines(bridge)
    ready = _wait_for(bridge, lines, "volary-ros1 ready", 90.0)
    found = re.search(r"pythonpath=(\S+)", ready)
    assert found is not None, ready
    env = client_env(uri, [Path(found.group(1))], ROS_HOME=str(home), ROS_LOG_DIR=str(log))
    return uri, env, lines


@needs_ros1
def test_flightgoggles_racer_flies_the_course(tmp_path: Path) -> None:
    """The racer, written against FlightGoggles' interface only, passes all 11 gates; the
    results YAML (file and topic) is the reporter's, its score is race_score's; the parameters
    on the master are the course's; the sensors follow FlightGoggles' conventions; NaN and inf
    commands are refused with the field named while the World flies on."""
    from volary.bench.gate_race import race_score

    procs = Procs()
    t0 = time.monotonic()
    try:
        uri, env, b_lines = _serve(tmp_path, procs, "--control-hz", str(CONTROL_HZ))
        t_ready = time.monotonic()

        master = xmlrpc.client.ServerProxy(uri)

        def param(name: str) -> Any:
            reply: Any = master.getParam("/test_ros1", name)
            assert reply[0] == 1, f"{name}: {reply[1]}"
            return reply[2]

        _check_params(param, _spec())
        assert Path(param("/uav/results_location")) == tmp_path / "results.yaml"

        probe = procs.start(["/usr/bin/python3", str(NODES / "fg_probe.py"), "--out",
                             str(tmp_path / "probe.json")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
        p_lines = _lines(probe)
        _wait_for(probe, p_lines, "probe ready", 30.0)
        cmd = ["/usr/bin/python3", str(NODES / "fg_racer.py"), "--speed", str(SPEED),
               "--trace", str(tmp_path / "racer_trace.txt")]  # fmt: skip
        racer = procs.start(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)  # fmt: skip
        r_lines = _lines(racer)
        try:
            probe.wait(LAP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"no lap result in {LAP_TIMEOUT} s:\n{''.join(r_lines)[-2000:]}\n"
                        f"{''.join(b_lines)[-2000:]}")  # fmt: skip
        t_lap = time.monotonic()
    finally:
        procs.stop()

    rec = json.loads((tmp_path / "probe.json").read_text())
    doc = yaml.safe_load((tmp_path / "results.yaml").read_text())
    gates = [doc[f"Gate{k}"] for k in range(11)]
    context = "".join(r_lines)[-1500:] + "".join(b_lines)[-1500:]
    assert doc["Result"] == "Challenge Completed", context
    assert [g["Name"] for g in gates] == _spec().meta["order"]
    assert all(g["Success"] == "True" for g in gates), context
    times = [g["Time"] for g in gates]
    assert times == sorted(times) and 0 < times[-1] < 300.0
    want = race_score(torch.tensor([11]), torch.tensor([times[-1]], dtype=torch.float64),
                      torch.tensor([True]), torch.tensor([False]), 300.0)  # fmt: skip
    assert rec["score"] == pytest.approx(float(want[0]), abs=1e-9)
    assert yaml.safe_load(rec["results"]) == doc

    assert rec["md5"] == EXPECTED_MD5
    _check_conventions(rec)

    assert rec["injected_at"] is not None
    assert any("thrust.z is nan" in e for e in rec["errors"]), rec["errors"]
    assert any("angular_rates.y is inf" in e for e in rec["errors"]), rec["errors"]
    assert rec["clock_at_end"] > rec["injected_at"] + 5.0  # the World flew on
    print(f"fg_racer: {sum(g['Success'] == 'True' for g in gates)}/11 gates in {times[-1]:.3f} s "
          f"sim, score {rec['score']:.3f}; wall s: bridge start {t_ready - t0:.1f}, lap "
          f"{t_lap - t_ready:.1f}")  # fmt: skip


def _check_conventions(rec: dict[str, Any]) -> None:
    """FlightGoggles' sensor conventions, as the probe saw them."""
    imu = rec["imu"]
    assert imu["frame_id"] == "" and imu["orientation_covariance"][0] == -1.0
    assert imu["accel"][2] == pytest.approx(9.81, abs=1.5)  # specific force, hover-ish at arming
    assert imu["accel_cov"][0] == pytest.approx(0.005)
    assert imu["gyro_cov"][4] == pytest.approx(0.003)
    rng = rec["range"]
    assert rng["range"] < 0 and rng["max_range"] == 0.0 and rng["min_range"] < rng["range"]
    assert rng["frame_id"] == "uav/imu" and rng["radiation_type"] == 1
    info = rec["camera_info"]
    f = 384.0 / math.tan(math.radians(35.0))
    np.testing.assert_allclose(info["K"], [f, 0, 512.0, 0, f, 384.0, 0, 0, 1], rtol=1e-6)
    assert (info["width"], info["height"], info["frame_id"]) == (1024, 768, "uav/camera/left")
    ir = rec["ir"]
    assert ir["frame_id"] == "" and rec["ir_frames"] > 100
    for name, marker, x, y, z in ir["markers"]:
        assert re.fullmatch(r"Gate\d+", name) and marker in "1234" and z == 0.0
        assert 0 <= x < 1024 and 0 <= y < 768


@needs_ros1
def test_collision_resets_disarms_and_ends_the_lap(tmp_path: Path) -> None:
    """FlightGoggles 2019's collision rule: a client that cuts the thrust hits the floor;
    /uav/collision is published, the vehicle is back at its start, disarmed (no IMU; a zero or
    held command does not re-arm), the lap ends as "Collision" with score 0, and a fresh 10 N
    command more than 0.1 s after the reset arms it again. Both flights begin with the same
    commands after different numbers of held ticks, and with FlightGoggles' noisy IMU and
    vehicle they fly bit for bit the same (the held ticks draw no noise of the flight's)."""
    procs = Procs()
    quiet, ticks = 0.5, 12
    try:
        _, env, b_lines = _serve(tmp_path, procs)
        out = str(tmp_path / "crash.json")
        cmd = ["/usr/bin/python3", str(NODES / "fg_crash.py"), "--out", out, "--quiet", str(quiet),
               "--ticks", str(ticks)]  # fmt: skip
        client = procs.start(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)  # fmt: skip
        c_lines = _lines(client)
        try:
            client.wait(60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the crash client did not finish:\n{''.join(c_lines)[-2000:]}"
                        f"\n{''.join(b_lines)[-2000:]}")  # fmt: skip
    finally:
        procs.stop()
    rec = json.loads((tmp_path / "crash.json").read_text())
    armed, hit, again = rec["armed_at"], rec["collision_at"], rec["rearmed_at"]
    assert armed is not None and hit is not None and again is not None, rec
    assert hit > armed and again >= hit + quiet
    assert not [t for t in rec["imu"] if hit < t < again], "IMU messages while disarmed"
    poses = np.array(rec["poses"])
    before = poses[(poses[:, 0] > armed) & (poses[:, 0] < hit)]
    assert before[:, 3].min() < 0.5  # it fell to the floor
    reset = poses[(poses[:, 0] > hit + 0.05) & (poses[:, 0] < again)]
    assert len(reset) > 0
    np.testing.assert_allclose(reset[:, 1:], np.tile([18.0, -23.0, 5.3], (len(reset), 1)),
                               atol=1e-4)  # fmt: skip
    samples = np.array(rec["samples"])
    first = samples[samples[:, 0] >= armed][:ticks]
    second = samples[samples[:, 0] >= again][:ticks]
    assert len(first) == len(second) == ticks
    assert first[:, 1].std() > 1e-3  # the IMU is noisy
    np.testing.assert_array_equal(first[:, 1:], second[:, 1:])  # the same flight, bit for bit
    flown = [poses[(poses[:, 0] >= t - 1e-9) & (poses[:, 0] < t + (ticks - 0.5) / 120)][:, 1:]
             for t in (armed, again)]  # fmt: skip
    assert len(flown[0]) == ticks and np.abs(flown[0] - flown[0][0]).max() > 0  # it moved
    np.testing.assert_array_equal(flown[0], flown[1])
    doc = yaml.safe_load(rec["results"])
    assert doc["Result"] == "Collision" and rec["score"] == 0.0
    assert all(doc[f"Gate{k}"]["Success"] == "False" for k in range(11))
    assert yaml.safe_load((tmp_path / "results.yaml").read_text()) == doc


LISTENER = """
import json, rospy, sys, time
from rosgraph_msgs.msg import Clock
from std_msgs.msg import Float32
got = {"scale": [], "fps": [], "clock": []}
rospy.init_node("rate_listener")
rospy.Subscriber("/volary/clock_scale", Float32, lambda m: got["scale"].append(m.data))
rospy.Subscriber("/uav/camera/debug/fps", Float32, lambda m: got["fps"].append(m.data))
rospy.Subscriber("/clock", Clock,
                 lambda m: got["clock"].append((time.monotonic(), m.clock.to_sec())))
print("listener ready", flush=True)
final, end = float(sys.argv[1]), time.monotonic() + float(sys.argv[2])
while time.monotonic() < end and not (got["clock"] and got["clock"][-1][1] >= final - 1e-6):
    time.sleep(0.02)
got["clock"] = [c for c in got["clock"] if c[1] > 0]  # from tick 1: the clock runs from there
print("heard", json.dumps(got), flush=True)
"""


@pytest.mark.slow  # a wall-clock rate: it depends on the machine's load
@needs_ros1
@pytest.mark.parametrize("speed", [1.0, 0.5])  # what a loaded 2-core machine keeps up with
def test_realtime_runs_on_the_wall_clock(tmp_path: Path, speed: float) -> None:
    """--realtime: the World ticks at ``speed`` times the wall clock whether or not a node
    commands (FlightGoggles' behaviour): over 3.2 s of wall time the /clock a node receives
    runs at ``speed`` within 3 %, and every /volary/clock_scale and fps message, the first
    included (a listener subscribed before the bridge starts hears it), says so within 10 %."""
    procs = Procs()
    hz = 60  # ticks per sim s: the cheapest rate, so that a shared machine keeps up
    ticks = round(3.2 * speed * hz)
    final = ticks / hz
    listener: dict[str, Any] = {}

    def listen(uri: str) -> None:  # subscribed before the bridge starts
        (tmp_path / "listener.py").write_text(LISTENER)
        env = client_env(uri, [], ROS_HOME=str(tmp_path / "ros"), ROS_LOG_DIR=str(tmp_path))
        proc = procs.start(["/usr/bin/python3", str(tmp_path / "listener.py"), str(final), "60"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)  # fmt: skip
        listener.update(proc=proc, lines=_lines(proc))
        _wait_for(proc, listener["lines"], "listener ready", 30.0)

    try:
        _, _, b_lines = _serve(tmp_path, procs, "--realtime", "--speed", str(speed), "--ticks",
                               str(ticks), "--control-hz", str(hz), before=listen)  # fmt: skip
        line = _wait_for(procs.procs[-1], b_lines, "volary-ros1 stopped", 60.0)
        heard = _wait_for(listener["proc"], listener["lines"], "heard", 20.0)
    finally:
        procs.stop()
    stats = dict(kv.split("=") for kv in line.split()[2:])
    got = json.loads(heard.split(maxsplit=1)[1])
    assert int(stats["ticks"]) == ticks and float(stats["sim_s"]) == pytest.approx(final)
    assert float(stats["wall_s"]) == pytest.approx(final / speed, rel=0.03), (stats, got["scale"])
    wall, sim = np.array(got["clock"]).T  # when the node received each /clock, its time
    assert sim[-1] == pytest.approx(final) and wall[-1] - wall[0] >= 3.0, (wall, sim)
    rate = np.polyfit(wall, sim, 1)[0]  # a fit: one late delivery does not decide it
    assert rate == pytest.approx(speed, rel=0.03), (rate, stats, got["scale"])
    scale, fps = got["scale"], got["fps"]
    assert len(scale) >= 2 and len(fps) >= 2, (scale, fps)
    assert scale == pytest.approx([speed] * len(scale), rel=0.1), (scale, fps)
    assert fps == pytest.approx([60 * speed] * len(fps), rel=0.1), (scale, fps)
    print(f"realtime x{speed}: /clock {rate:.4f} sim s per wall s, wall_s {stats['wall_s']} "
          f"for {final:.1f} sim s, clock_scale {[round(x, 3) for x in scale]}, fps "
          f"{[round(x, 1) for x in fps]}")  # fmt: skip


@pytest.mark.slow
@needs_ros1
def test_racer_in_real_time(tmp_path: Path) -> None:
    """The racer passes every gate with the World on the wall clock (FlightGoggles' own mode,
    the newest command held): about a minute of wall time."""
    procs = Procs()
    try:
        _, env, b_lines = _serve(tmp_path, procs, "--realtime", "--exit-on-result")
        bridge = procs.procs[-1]
        cmd = ["/usr/bin/python3", str(NODES / "fg_racer.py")]
        racer = procs.start(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)  # fmt: skip
        r_lines = _lines(racer)
        line = _wait_for(bridge, b_lines, "volary-ros1 lap", LAP_TIMEOUT)
    finally:
        procs.stop()
    context = "".join(r_lines)[-1500:] + "".join(b_lines)[-1500:]
    assert "Challenge Completed" in line and "gates=11/11" in line, context
