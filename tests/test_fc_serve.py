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
import signal
import threading

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from volary.errors import ConfigError, UnknownNameError
from volary.fc.betaflight import find
from volary.platforms import get
from volary.serve.world import ServeConfig, SlotSpec
from volary.sim import Sensing, World

zmq = pytest.importorskip("zmq")

from volary.client import Client  # noqa: E402
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
