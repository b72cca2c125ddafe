"""Betaflight 4.6.0 SITL flies a volary vehicle in lock-step (issue 58).

The firmware is built by `python -m volary.fc.betaflight build` (make does it); without the
build these tests skip and say so. Packets go to 127.0.0.1 only.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from volary.errors import ConfigError, FileFormatError
from volary.fc import frames
from volary.fc.betaflight import BetaflightLink, Sticks, find, fly, read_sticks
from volary.platforms import get

needs_sitl = pytest.mark.skipif(
    find() is None,
    reason="Betaflight SITL not built: run `python -m volary.fc.betaflight build`",
)


def test_state_packet_carries_the_firmware_frames():
    """A vehicle pitched nose-down 30 deg, rolling right, climbing east-north: the packet has
    FRD rates, the negated FLU specific force, the FRD-body quaternion (pitch nose-up
    positive, as the firmware's angle loop wants), ENU velocity and GPS."""
    half = math.radians(30) / 2
    quat = (math.cos(half), 0.0, math.sin(half), 0.0)  # +30 deg about FLU y: nose down
    pkt = frames.FDM.unpack(
        frames.fdm_packet(
            1.5, (0.1, 0.2, 0.3), (0.0, 0.0, 9.81), quat, (1.0, 2.0, 3.0), (0.0, 0.0, 10.0)
        )
    )
    assert pkt[0] == 1.5
    assert pkt[1:4] == (0.1, -0.2, -0.3)  # FRD body rates
    assert pkt[4:7] == (-0.0, -0.0, -9.81)  # the firmware negates: +1 g on its z at rest
    w, x, y, z = pkt[7:11]
    assert (w, x, y, z) == pytest.approx((quat[0], 0.0, -quat[2], 0.0))
    assert math.degrees(math.asin(2 * (w * y - x * z))) == pytest.approx(-30.0)  # nose down
    assert pkt[11:14] == (1.0, 2.0, 3.0)
    lon, lat, alt = pkt[14:17]
    assert (lat, lon) == pytest.approx((47.3977, 8.5456)) and alt == pytest.approx(498.0)
    assert pkt[17] < frames.pressure_at(488.0)  # higher: lower pressure


def test_motor_order_maps_the_quad_x_corners_and_refuses_wrong_spin():
    a = get("fpv_racer_250")  # FLU: front-left, rear-left, rear-right, front-right
    assert frames.motor_order(a.rotor_positions, a.rotor_directions) == [3, 1, 0, 2]
    flipped = tuple(-d for d in a.rotor_directions)
    with pytest.raises(ConfigError, match="rotor_directions"):
        frames.motor_order(a.rotor_positions, flipped)


def test_rc_channels_are_aetr_then_arm_and_angle():
    ch = Sticks(roll=1.0, pitch=-1.0, yaw=0.5, throttle=0.25, arm=True, angle=False).channels()
    assert ch == [2000, 1000, 1250, 1750, 2000, 1000]


def _body_up_z(q: np.ndarray) -> float:
    """World z of the body's up axis (negative: upside down)."""
    w, x, y, _ = q
    return 1.0 - 2.0 * (x * x + y * y)


class _Pilot:
    """Scripted sticks: throttle from altitude error (a pilot holding height)."""

    hover = 0.38  # stick at hover, measured (fpv_racer_250)

    def throttle(self, z_ref: float, z: float, vz: float) -> float:
        return min(1.0, max(0.0, self.hover + 0.25 * (z_ref - z) - 0.15 * vz))


@needs_sitl
def test_betaflight_flies_takeoff_roll_land_disarm(tmp_path):
    """Arm, take off in angle mode to ~1 m, climb, a full roll in acro, land, disarm."""
    pilot, path, phases = _Pilot(), [], {}
    with BetaflightLink("fpv_racer_250") as link:
        r = None

        def run(seconds: float, sticks_of, phase: str) -> None:
            nonlocal r
            for _ in range(int(round(seconds / link.dt))):
                z, vz = (r.pos[2], r.vel[2]) if r is not None else (0.0, 0.0)
                r = link.step(sticks_of(z, vz))
                path.append((r.time, *r.pos, _body_up_z(r.quat), *r.motors))
                phases.setdefault(phase, []).append(len(path) - 1)

        run(0.5, lambda z, vz: Sticks(throttle=0.0), "ground")
        run(0.5, lambda z, vz: Sticks(throttle=0.0, arm=True), "armed")
        run(3.5, lambda z, vz: Sticks(throttle=pilot.throttle(1.0, z, vz), arm=True), "takeoff")
        run(2.5, lambda z, vz: Sticks(throttle=pilot.throttle(3.0, z, vz), arm=True), "climb")
        rolled = 0.0
        while rolled < math.radians(330):  # full right roll stick in acro
            run(
                link.dt, lambda z, vz: Sticks(roll=1.0, throttle=0.4, arm=True, angle=False), "roll"
            )
            rolled += r.omega[0] * link.dt
            assert len(phases["roll"]) < 2000, "the roll did not complete in 2 s"
        run(1.5, lambda z, vz: Sticks(throttle=pilot.throttle(3.0, z, vz), arm=True), "recover")
        t0 = r.time
        run(
            8.0,
            lambda z, vz: Sticks(
                throttle=pilot.throttle(max(-0.3, 3.0 - 0.6 * (r.time - t0)), z, vz), arm=True
            ),
            "descend",
        )
        run(0.5, lambda z, vz: Sticks(throttle=0.0, arm=True), "cut")
        run(0.5, lambda z, vz: Sticks(throttle=0.0), "disarmed")
    p = np.asarray(path)
    _plot(p, tmp_path / "betaflight_flight.png")
    zs = p[:, 3]
    assert np.all(p[phases["ground"], 5:9] == 0.0)  # disarmed: motors off
    assert np.all(p[phases["armed"][10:], 5:9] > 0.0)  # armed: idle
    assert zs[phases["takeoff"]].max() > 0.8  # angle-mode takeoff to ~1 m
    assert abs(zs[phases["takeoff"][-1]] - 1.0) < 0.3
    assert p[phases["roll"], 4].min() < -0.5  # upside down during the roll
    assert p[phases["recover"][-1], 4] > 0.95  # level again in angle mode
    landed = phases["disarmed"]  # on the ground, upright (the roll left it drifting sideways)
    assert zs[landed].max() < 0.05 and p[landed, 4].min() > 0.95
    assert np.all(p[phases["disarmed"][-100:], 5:9] == 0.0)  # disarmed
    assert (tmp_path / "betaflight_flight.png").stat().st_size > 0


def _plot(p: np.ndarray, out) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    ax[0].plot(p[:, 0], p[:, 3], label="z (m)")
    ax[0].plot(p[:, 0], p[:, 1], label="x (m)")
    ax[0].plot(p[:, 0], p[:, 2], label="y (m)")
    ax[0].plot(p[:, 0], p[:, 4], label="body up . world z")
    ax[0].legend()
    ax[1].plot(p[:, 0], p[:, 5:9])
    ax[1].set_ylabel("motor (0..1)")
    ax[1].set_xlabel("sim time (s)")
    fig.savefig(out)
    plt.close(fig)


def _takeoff_motors() -> np.ndarray:
    out = []
    with BetaflightLink("fpv_racer_250") as link:
        for k in range(1500):
            sticks = Sticks(throttle=0.0 if k < 800 else 0.45, arm=k >= 500)
            out.append(link.step(sticks).motors)
    return np.asarray(out)


@needs_sitl
def test_two_lockstep_runs_give_identical_motor_outputs():
    a, b = _takeoff_motors(), _takeoff_motors()
    assert a[-700:].max() > 0.3  # it flew: the comparison covers armed flight
    np.testing.assert_array_equal(a, b)


def test_sticks_files_are_checked_naming_the_line_and_column(tmp_path):
    good = tmp_path / "sticks.csv"
    good.write_text("time,roll,pitch,yaw,throttle,arm,angle\n0,0,0,0,0,0,1\n0.5,0.2,0,0,0.4,1,1\n")
    rows = read_sticks(good)
    assert [(r.time, r.roll, r.arm, r.vehicle) for r in rows] == [
        (0, 0, 0, None),
        (0.5, 0.2, 1, None),
    ]
    cases = {
        "time,roll,pitch,yaw,throttle,arm\n": "line 1: expected the columns",
        "time,roll,pitch,yaw,throttle,arm,angle\n0,1.5,0,0,0,0,1\n": "line 2: roll",
        "time,roll,pitch,yaw,throttle,arm,angle\n0,0,0,0,nan,0,1\n": "line 2: throttle",
        "time,roll,pitch,yaw,throttle,arm,angle\n0,0,0,0,0,2,1\n": "line 2: arm",
        "time,roll,pitch,yaw,throttle,arm,angle\n0,0,0,0,0,x,1\n": "line 2: arm: expected a number",
        "time,roll,pitch,yaw,throttle,arm,angle\n1,0,0,0,0,0,1\n0,0,0,0,0,0,1\n": "time order",
    }
    for text, message in cases.items():
        bad = tmp_path / "bad.csv"
        bad.write_text(text)
        with pytest.raises(FileFormatError, match=message):
            read_sticks(bad)


def test_fly_refuses_bad_options_before_starting_a_firmware(tmp_path):
    with pytest.raises(ConfigError, match="--vehicles"):
        fly(n=0, out=tmp_path)
    with pytest.raises(ConfigError, match="--vehicles"):
        fly(n=65, out=tmp_path)
    with pytest.raises(ConfigError, match="--duration"):
        fly(duration=float("nan"), out=tmp_path)
    assert not any(tmp_path.iterdir())


@needs_sitl
def test_fly_two_vehicles_writes_the_csv_and_the_path_plot(tmp_path):
    """``fly`` (what ``volary fc betaflight`` calls): the built-in hover script, two vehicles
    1 m apart, each near 1 m high after 3 s; CSV rows per vehicle, the plot, no events."""
    f = fly("fpv_racer_250", 2, 3.0, None, tmp_path / "out", every=50)
    assert f.events == [] and f.sim_s == pytest.approx(3.0)
    assert np.allclose(f.final_pos[:, 2], 1.0, atol=0.4)
    assert f.final_pos[1, 0] - f.final_pos[0, 0] == pytest.approx(1.0, abs=0.2)
    table = np.loadtxt(f.csv, delimiter=",", skiprows=1)
    assert table.shape[1] == 17 and set(table[:, 1]) == {0.0, 1.0}
    assert np.all(table[:, 16] == 1.0)  # alive throughout
    assert f.plot.stat().st_size > 10_000
