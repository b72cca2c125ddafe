"""Betaflight through ``volary serve``: a ZeroMQ client flies a served vehicle whose CTBR
commands Betaflight 4.6.0 SITL's rate loop turns into motor outputs (``ServeConfig.firmware``),
lock-step and repeatable; a killed firmware is the vehicle's event; the ideal loop stays the
default; the World's ``sim_steps``/``inner`` hook underneath.

The flights need the built SITL (``python -m volary.fc.betaflight build``; make test does it)
and skip, saying so, without it. Packets go to 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import threading

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from volary.errors import ConfigError, UnknownNameError
from volary.fc.betaflight import find
from volary.platforms import get
from volary.serve.world import ServeConfig, SlotSpec
from volary.sim import Sensing, World

zmq = pytest.importorskip("zmq")

from volary.client import Client, ServerError  # noqa: E402
from volary.serve.server import Server  # noqa: E402

needs_sitl = pytest.mark.skipif(
    find() is None,
    reason="Betaflight SITL not built: run `python -m volary.fc.betaflight build`",
)
PLATFORM = "fpv_racer_250"  # the airframe Betaflight's default PIDs are tuned for
HOVER_TICKS, YAW_TICKS = 180, 60  # 3 s of hover, then 1 s of a 1 rad/s yaw-rate step (60 Hz)
YAW_RATE = 1.0  # rad/s, +z FLU: counter-clockwise seen from above


def _config(**kw) -> ServeConfig:
    return ServeConfig(slots=(SlotSpec("vehicle", PLATFORM),), scene=None, firmware="betaflight",
                       **kw)  # fmt: skip


@contextlib.contextmanager
def serving(config: ServeConfig):
    srv = Server(config, bind="tcp://127.0.0.1:*")
    stop = threading.Event()
    th = threading.Thread(target=srv.serve, args=(stop,), daemon=True)
    th.start()
    try:
        yield srv
    finally:
        stop.set()
        th.join(10)
        srv.close()


def _yaw(q: np.ndarray) -> float:
    w, x, y, z = (float(v) for v in q)
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def _ctbr(obs: dict, yaw_rate: float) -> np.ndarray:
    """A client's hover: thrust holds 1 m, body rates level the vehicle (FLU), ``yaw_rate``."""
    st = obs["state"]
    w, x, y, z = (float(v) for v in st["quat"])
    up = np.array([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)])  # body
    m = get(PLATFORM).mass
    thrust = m * (9.81 + 4.0 * (1.0 - float(st["pos"][2])) - 3.0 * float(st["vel"][2]))
    return np.array([thrust / max(up[2], 0.5), -8.0 * up[1], 8.0 * up[0], yaw_rate])


def _fly(address: str, ticks: int = HOVER_TICKS + YAW_TICKS) -> tuple[np.ndarray, list[dict]]:
    """One client's flight: rows of (pos, vel, quat, omega) after each step, and its obs."""
    rows, seen = [], []
    with Client(address, timeout=60) as c:  # closing it says bye: the slot is free again
        assert c.control == "ctbr" and c.setpoint_size == 4 and c.dt == pytest.approx(1 / 60)
        obs = c.obs
        for k in range(ticks):
            obs = c.step(_ctbr(obs, 0.0 if k < HOVER_TICKS else YAW_RATE))
            st = obs["state"]
            rows.append(np.concatenate([st["pos"], st["vel"], st["quat"], st["omega"]]))
            seen.append(obs)
    return np.array(rows), seen


@needs_sitl
def test_a_client_hovers_and_yaws_a_served_betaflight_vehicle_the_same_way_twice():
    """CTBR from a ZeroMQ client through Betaflight's acro rate loop: the vehicle holds ~1 m
    for 3 s, then turns counter-clockwise under a +1 rad/s yaw-rate command; the next client
    of the slot (a fresh firmware, armed at its hello) flies it bit for bit the same."""
    with serving(_config()) as srv:
        first, seen = _fly(srv.address)
        second, _ = _fly(srv.address)
        assert not srv.firmware.events and not srv.faults
    z = first[:, 2]
    assert np.abs(z[60:HOVER_TICKS] - 1.0).max() < 0.1, "altitude not held"
    assert np.abs(z[HOVER_TICKS:] - 1.0).max() < 0.15, "altitude lost in the yaw step"
    turned = _yaw(first[-1, 6:10]) - _yaw(first[HOVER_TICKS - 1, 6:10])
    assert 0.5 < turned < 1.5, f"heading changed by {turned:.2f} rad for 1 rad commanded"
    assert np.mean(first[-30:, 12]) > 0.5 * YAW_RATE  # yaw rate (+z FLU) has the sign
    assert all(o["events"] == {"firmware_lost": False} for o in seen)
    assert np.array_equal(first, second)  # lock-step: the same inputs, the same flight


@needs_sitl
def test_a_killed_firmware_is_the_vehicles_event_and_the_next_client_gets_a_fresh_one():
    """SIGKILL to the slot's firmware mid-flight: the obs says ``firmware_lost``, the vehicle
    loses its motors and falls, the server goes on; a new client's hello restarts it."""
    with serving(_config()) as srv:
        with Client(srv.address, timeout=60) as c:
            obs = c.obs
            for _ in range(30):
                obs = c.step(_ctbr(obs, 0.0))
            z0 = float(obs["state"]["pos"][2])
            os.kill(srv.firmware.banks[0].firmwares[0].pid, signal.SIGKILL)
            for _ in range(20):
                obs = c.step(_ctbr(obs, 0.0))
            assert obs["events"]["firmware_lost"]
            assert float(obs["state"]["pos"][2]) < z0 - 0.3  # a third of a second of free fall
        (event,) = srv.firmware.events
        assert event.vehicle == 0 and "SIGKILL" in event.cause
        again, seen = _fly(srv.address, 30)
        assert not seen[-1]["events"]["firmware_lost"]
        assert abs(again[-1, 2] - 1.0) < 0.1


def test_betaflight_serve_configs_are_checked_before_anything_starts():
    with pytest.raises(ConfigError, match="firmware: expected one of"):
        ServeConfig(firmware="px4")
    with pytest.raises(ConfigError, match="control: firmware 'betaflight' flies ctbr"):
        ServeConfig(firmware="betaflight", control="position")
    with pytest.raises(ConfigError, match="imu: firmware 'betaflight' reads the IMU"):
        ServeConfig(firmware="betaflight", imu=None)
    with pytest.raises(UnknownNameError, match="flightgoggles"):
        ServeConfig(slots=(SlotSpec("vehicle", "flightgoggles"),), firmware="betaflight")
    with pytest.raises(ConfigError, match="at most 64"):
        ServeConfig(slots=(SlotSpec(),) * 65, firmware="betaflight")
    ServeConfig(slots=(SlotSpec("in_loop", "flightgoggles"),), firmware="betaflight")  # no fw


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--firmware", "px4"], "--firmware: expected one of betaflight, ideal"),
        (["--firmware", "betaflight", "--control", "position"], "flies ctbr commands"),
        (["--firmware", "betaflight", "--imu", "none"], "reads the IMU"),
        (["--firmware", "betaflight", "--platform", "flightgoggles"], "rate profile"),
    ],
)
def test_volary_serve_refuses_bad_firmware_options_in_one_line(args, says):
    from volary.cli.main import app

    r = CliRunner().invoke(app, ["serve", "--scene", "none", "--ticks", "1", *args])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and says in lines[0], r.output


# ---- the World's hook ---------------------------------------------------------------------------
def _speeds(k: int) -> torch.Tensor:
    return torch.full((1, 4), 2000.0 + 40.0 * k)


def test_world_sim_steps_run_the_inner_setpoints_as_single_simulator_steps():
    """A World of ``sim_steps=4`` over a 240 Hz Simulator: a 60 Hz control period whose four
    Simulator steps take ``inner``'s setpoints, bit for bit the World stepped at 240 Hz."""
    kw = {"control": "rotor_speeds", "control_hz": 240.0, "physics_hz": 960.0, "imu": "bmi085"}
    fine = World("crazyflie", **kw)
    coarse = World("crazyflie", sim_steps=4, **kw)
    calls = []

    def inner(world, command, k):
        calls.append((world.sim.state.tick.clone(), k))
        return command + _speeds(k)

    coarse.inner = inner
    assert coarse.dt == pytest.approx(1 / 60) and coarse.control_hz == pytest.approx(60.0)
    for period in range(3):
        base = torch.full((1, 4), 100.0 * period)
        coarse.step(base)
        for k in range(4):
            fine.step(base + _speeds(k))
        for name in ("pos", "vel", "quat", "omega", "rotor_speed"):
            assert torch.equal(getattr(coarse.state, name), getattr(fine.state, name)), name
        assert torch.equal(coarse.sim.imu_reading.gyro, fine.sim.imu_reading.gyro)
    assert [k for _, k in calls] == [0, 1, 2, 3] * 3 and coarse.tick == 3 and fine.tick == 12
    assert len({int(t[0]) for t, _ in calls}) == 12  # each call saw the state after the last


def test_world_sensor_rates_are_checked_against_the_control_period():
    cam = Sensing("flightgoggles", rate_hz=120.0)  # a rangefinder preset
    with pytest.raises(ConfigError, match="control_hz=60"):
        World("crazyflie", sensors={"r": cam}, control="rotor_speeds", control_hz=240.0,
              physics_hz=960.0, sim_steps=4)  # fmt: skip


# ---- raw sticks (issue 58): control "sticks" -----------------------------------------------------
HOVER_STICK = 0.38  # throttle stick at hover, measured (fpv_racer_250; test_fc_betaflight.py)


def _throttle(z_ref: float, state: dict) -> float:
    """A pilot holding a height with the throttle stick (angle mode keeps the vehicle level)."""
    z, vz = float(state["pos"][2]), float(state["vel"][2])
    return min(1.0, max(0.0, HOVER_STICK + 0.25 * (z_ref - z) - 0.15 * vz))


def _up(q) -> float:
    """World z of the body's up axis (-1: upside down)."""
    w, x, y, _ = (float(v) for v in q)
    return 1.0 - 2.0 * (x * x + y * y)


@needs_sitl
def test_a_client_arms_takes_off_rolls_lands_and_disarms_betaflight_with_raw_sticks():
    """The issue's scripted flight as RC frames through ``volary serve`` (control ``sticks``,
    ``[roll, pitch, yaw, throttle, arm, angle]``): the firmware does not arm by itself; the
    client arms it, lands from the open-space start (1 m), takes off in angle mode to ~1 m,
    climbs, rolls in acro, lands and disarms: on the ground, at rest, rotors stopped. A stick
    out of range is refused in one line naming it, and not flown."""
    cfg = _config(control="sticks")
    log: dict[str, list] = {}
    with serving(cfg) as srv, Client(srv.address, timeout=60) as c:
        assert c.control == "sticks" and c.setpoint_size == 6
        bank = srv.firmware.banks[0]
        obs = c.obs

        def fly(ticks: int, frame, phase: str) -> None:
            nonlocal obs
            for _ in range(ticks):
                obs = c.step(np.array(frame(obs["state"]), dtype=np.float64))
                now = obs["state"]
                row = (float(now["pos"][2]), _up(now["quat"]), float(now["omega"][0]),
                       float(bank.motors[0].max()))  # fmt: skip
                log.setdefault(phase, []).append(row)

        fly(6, lambda s: [0, 0, 0, 0, 0, 1], "disarmed")  # valid RC, arm switch off
        fly(12, lambda s: [0, 0, 0, 0, 1, 1], "arm")
        fly(120, lambda s: [0, 0, 0, _throttle(-0.5, s), 1, 1], "down")
        fly(150, lambda s: [0, 0, 0, _throttle(1.0, s), 1, 1], "takeoff")
        fly(90, lambda s: [0, 0, 0, _throttle(2.5, s), 1, 1], "climb")
        rolled = 0.0
        while rolled < math.radians(330):  # full right roll stick in acro (angle switch off)
            fly(1, lambda s: [1, 0, 0, 0.4, 1, 0], "roll")
            rolled += log["roll"][-1][2] * c.dt
            assert len(log["roll"]) < 120, "the roll did not complete in 2 s"
        fly(60, lambda s: [0, 0, 0, _throttle(2.5, s), 1, 1], "recover")
        start = obs["clock"]
        fly(300, lambda s: [0, 0, 0, _throttle(max(-0.3, 2.5 - 0.6 * (obs["clock"] - start)),
                                                s), 1, 1], "descend")  # fmt: skip
        fly(30, lambda s: [0, 0, 0, 0, 1, 1], "cut")
        fly(30, lambda s: [0, 0, 0, 0, 0, 1], "disarmed again")
        tick = obs["tick"]
        refused = r"command\[3\] \(throttle\): expected .* in \[0, 1\]"
        with pytest.raises(ServerError, match=refused):
            c.step([0.0, 0.0, 0.0, 1.5, 1.0, 1.0])
        assert srv.world.tick == tick  # refused: not flown
        final = obs["state"]
        rotors = srv.world.state.rotor_speed[0].abs().max().item()
        assert not srv.firmware.events
    z = {k: np.array([r[0] for r in v]) for k, v in log.items()}
    motors = {k: np.array([r[3] for r in v]) for k, v in log.items()}
    assert np.all(motors["disarmed"] == 0.0), "armed without the client's arm switch"
    assert np.all(motors["arm"][-6:] > 0.0), "the arm switch did not arm it"
    assert z["down"][-1] < 0.05  # landed from the start height
    assert 0.7 < z["takeoff"].max() < 1.3 and abs(z["takeoff"][-1] - 1.0) < 0.3
    assert min(r[1] for r in log["roll"]) < -0.5, "never upside down: no roll"
    assert log["recover"][-1][1] > 0.95  # level again in angle mode
    assert z["disarmed again"].max() < 0.05 and np.all(motors["disarmed again"][-10:] == 0.0)
    assert float(final["pos"][2]) < 0.05 and np.abs(final["vel"]).max() < 1e-3
    assert rotors < 1.0  # rad/s: the motors have stopped


def test_sticks_are_a_firmware_control_level_only():
    with pytest.raises(ConfigError, match=r"^control: 'sticks' \(raw RC frames\) needs a"):
        ServeConfig(control="sticks")
    with pytest.raises(ConfigError, match="control: firmware 'betaflight' flies ctbr .* or sticks"):
        ServeConfig(firmware="betaflight", control="velocity")
    ServeConfig(slots=(SlotSpec("in_loop", "flightgoggles"),), firmware="betaflight",
                control="sticks")  # fmt: skip


@pytest.mark.parametrize("cmd", [["serve"], ["ros2", "serve"]])
def test_volary_serve_takes_control_sticks_only_with_a_firmware(cmd):
    from volary.cli.main import app

    r = CliRunner().invoke(app, [*cmd, "--scene", "none", "--ticks", "1", "--control", "sticks"])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "control: 'sticks' (raw RC frames) needs a" in lines[0], r.output


@needs_sitl
def test_volary_serve_starts_with_control_sticks_and_betaflight():
    from volary.cli.main import app

    args = ["serve", "--scene", "none", "--platform", PLATFORM, "--control", "sticks",
            "--firmware", "betaflight", "--bind", "tcp://127.0.0.1:*", "--ticks", "0"]  # fmt: skip
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "sticks at 60 Hz" in r.output and "served 0 control periods" in r.output


_STICK = st.floats(-1.0, 1.0)
_UNIT = st.floats(0.0, 1.0)
_FRAMES = st.tuples(_STICK, _STICK, _STICK, _UNIT, _UNIT, _UNIT).map(list)


@given(frame=_FRAMES)
def test_a_sticks_step_takes_every_frame_in_range(frame):
    from volary.serve.server import SticksStep, checked

    msg = {"v": 1, "op": "step", "command": frame}
    assert checked(SticksStep, msg).command.tolist() == frame
    as_array = dict(msg, command=np.array(frame, dtype="<f4"))  # as a data frame
    assert checked(SticksStep, as_array).command.shape == (6,)


@given(
    frame=_FRAMES,
    i=st.integers(0, 5),
    bad=st.one_of(
        st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: not -1.0 <= x <= 1.0),
        st.floats(-1.0, -1e-9),
    ),
)
def test_a_sticks_step_refuses_a_stick_out_of_range_naming_it(frame, i, bad):
    from volary.fc.loop import STICKS
    from volary.serve import protocol as P
    from volary.serve.server import SticksStep, checked

    if i < 3 and -1.0 <= bad <= 1.0:  # (only the throttle and the switches stop at 0)
        bad = -1.5
    frame[i] = bad
    with pytest.raises(P.ProtocolError) as err:
        checked(SticksStep, {"v": 1, "op": "step", "command": frame})
    assert err.value.code == "bad_field"
    assert str(err.value).startswith(f"command[{i}] ({STICKS[i]}): expected ")
    assert "\n" not in str(err.value)


def test_a_sticks_step_refuses_the_wrong_count_and_non_numbers():
    from volary.serve import protocol as P
    from volary.serve.server import SticksStep, checked

    cases = [
        ([0.0] * 4, "command: expected 6 numbers, got 4 items"),
        ([0, 0, 0, 0, True, 0], "command[4]: expected a number, got bool"),
        ([0, 0, 0, "0.5", 0, 0], "command[3]: expected a number, got str"),
    ]
    for command, says in cases:
        with pytest.raises(P.ProtocolError, match=re.escape(says)):
            checked(SticksStep, {"v": 1, "op": "step", "command": command})


def test_ros2_joy_and_raw_commands_become_checked_stick_frames():
    """``volary ros2 serve --control sticks``: sensor_msgs/Joy (axes roll, pitch, yaw,
    throttle; buttons arm, angle) and ``cmd_raw`` become the RC frame, each stick checked."""
    sensor_msgs = pytest.importorskip("sensor_msgs.msg")
    std_msgs = pytest.importorskip("std_msgs.msg")
    from types import SimpleNamespace

    from volary.ros2 import topics
    from volary.serve.roscommon import CommandError

    config = ServeConfig(firmware="betaflight", control="sticks",
                         slots=(SlotSpec("vehicle", PLATFORM),))  # fmt: skip
    bridge = SimpleNamespace(config=config)
    v = SimpleNamespace(ns="vehicle0", index=0)
    joy = sensor_msgs.Joy(axes=[0.5, -0.25, 0.0, 0.75], buttons=[1, 0])
    read = topics.command_reader("sticks")
    assert read(joy, bridge, v).tolist() == [0.5, -0.25, 0.0, 0.75, 1.0, 0.0]
    with pytest.raises(CommandError, match=r"/vehicle0/cmd_joy\[3\] \(throttle\): expected"):
        read(sensor_msgs.Joy(axes=[0.0, 0.0, 0.0, -0.5], buttons=[1, 1]), bridge, v)
    with pytest.raises(CommandError, match="expected 4 axes .* and 2 buttons"):
        read(sensor_msgs.Joy(axes=[0.0] * 6, buttons=[1, 1]), bridge, v)
    raw = std_msgs.Float64MultiArray(data=[2.0, 0.0, 0.0, 0.5, 1.0, 1.0])
    with pytest.raises(CommandError, match=r"/vehicle0/cmd_raw\[0\] \(roll\): expected"):
        topics.raw_reader(raw, bridge, v)


@needs_sitl
@pytest.mark.parametrize(
    ("control", "row", "says"),
    [
        ("sticks", [0.0, 0.0, float("nan"), 0.2, 1.0, 0.0], r"^command\[0\]\[2\] \(yaw\)"),
        ("sticks", [0.0, 0.0, 0.0, 1.5, 1.0, 0.0], r"^command\[0\]\[3\] \(throttle\)"),
        ("ctbr", [float("inf"), 0.0, 0.0, 0.0], r"^command\[0\]: expected finite"),
    ],
)
def test_a_world_flown_with_a_firmware_loop_directly_refuses_bad_commands(control, row, says):
    """Without ``volary serve`` in front: a NaN stick would be a full stick in the RC frame."""
    from volary.fc.loop import FirmwareLoop
    from volary.serve.world import build_world

    world = build_world(_config(control=control))
    loop = world.inner
    try:
        assert isinstance(loop, FirmwareLoop)
        with pytest.raises(ConfigError, match=says):
            loop(world, torch.tensor([row], dtype=torch.float64), 0)
    finally:
        for bank in loop.banks.values():
            if bank is not None:
                bank.close()
