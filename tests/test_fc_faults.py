"""Several Betaflight vehicles in one World, and the faults a firmware in the loop meets
(issue 58): a killed firmware, a stalled one, garbage on its ports, the radio link lost.

Every run flies the same script: on the ground, arm at 0.5 s, climb toward 1 m under a
throttle pilot. The vehicles' IMU noise differs (env k of the seed), so their motors differ.
Without the SITL build these tests skip and say so. Packets go to 127.0.0.1 only.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable

import numpy as np
import pytest

from volary.fc.betaflight import BetaflightFleet, LinkConfig, Profile, Sticks, find

pytestmark = pytest.mark.skipif(
    find() is None,
    reason="Betaflight SITL not built: run `python -m volary.fc.betaflight build`",
)

N = 4
STEPS = 1900  # 1.9 s at 1 kHz
FAULT_STEP = 1200  # 1.2 s: the vehicles are climbing


def _pilot(t: float, z: float, vz: float) -> Sticks:
    throttle = 0.0 if t < 0.7 else min(1.0, max(0.0, 0.38 + 0.25 * (1.0 - z) - 0.15 * vz))
    return Sticks(throttle=throttle, arm=t >= 0.5)


class Run:
    """A flight's per-step record: motors (T, N, 4), positions (T, N, 3), wall seconds per
    step, the fleet's events."""

    def __init__(self, motors, pos, wall, events):
        self.motors, self.pos, self.wall, self.events = motors, pos, wall, events


def _fly(
    hook: Callable[[int, BetaflightFleet], None] | None = None,
    config: LinkConfig | None = None,
    steps: int = STEPS,
    sticks: Callable[[float, np.ndarray, np.ndarray], list[Sticks | None]] | None = None,
    n: int = N,
) -> Run:
    motors, pos, wall = [], [], []
    with BetaflightFleet("fpv_racer_250", n, config) as fleet:
        z, vz = np.zeros(n), np.zeros(n)
        for k in range(steps):
            if hook is not None:
                hook(k, fleet)
            t = k * fleet.dt
            frame = sticks(t, z, vz) if sticks else [_pilot(t, z[i], vz[i]) for i in range(n)]
            t0 = time.perf_counter()
            r = fleet.step(frame)
            wall.append(time.perf_counter() - t0)
            motors.append(r.motors)
            pos.append(r.pos)
            z, vz = r.pos[:, 2], r.vel[:, 2]
        events = list(fleet.events)
    return Run(np.asarray(motors), np.asarray(pos), np.asarray(wall), events)


@pytest.fixture(scope="module")
def reference() -> Run:
    return _fly()


def test_four_vehicles_two_lockstep_runs_give_identical_motor_outputs(reference):
    again = _fly()
    assert reference.motors[-1].min() > 0.2  # all four armed and flying
    assert np.all(reference.pos[-1, :, 2] > 0.2)
    assert not np.array_equal(reference.motors[:, 0], reference.motors[:, 1])  # own IMU noise
    np.testing.assert_array_equal(again.motors, reference.motors)
    np.testing.assert_array_equal(again.pos, reference.pos)


def test_a_different_imu_seed_gives_different_motor_outputs(reference):
    """The determinism test can fail: another IMU noise stream changes every vehicle's motors."""
    other = _fly(config=LinkConfig(seed=1))
    for i in range(N):
        assert not np.array_equal(other.motors[:, i], reference.motors[:, i])


def _others_unchanged(run: Run, reference: Run, lost: int) -> None:
    for i in range(N):
        if i != lost:
            np.testing.assert_array_equal(run.motors[:, i], reference.motors[:, i])
            np.testing.assert_array_equal(run.pos[:, i], reference.pos[:, i])


def test_a_killed_firmware_stops_its_vehicle_and_the_others_fly_on(reference):
    """SIGKILL to vehicle 1's firmware mid-climb: noticed in the same step (the process exit,
    not the 10 s timeout), reported with the firmware's log, its motors stop and it falls to
    the ground; the other three fly bit for bit as without the fault."""
    seen = []

    def kill(k: int, fleet: BetaflightFleet) -> None:
        if k == FAULT_STEP:
            fleet.on_event = seen.append
            os.kill(fleet.firmwares[1].pid, signal.SIGKILL)

    run = _fly(kill)
    assert len(run.events) == 1 and seen == run.events
    event = run.events[0]
    assert event.vehicle == 1 and "SIGKILL" in event.cause
    assert event.time == pytest.approx(FAULT_STEP * 1e-3)
    assert "[SITL]" in event.log_tail  # the firmware's own log
    assert run.wall[FAULT_STEP] < 2.0  # prompt: the default stall timeout is 10 s
    assert np.all(run.motors[FAULT_STEP:, 1] == 0.0)
    z = run.pos[:, 1, 2]
    assert z[FAULT_STEP] > 0.2 and z[-1] < 0.01  # it fell to the ground
    np.testing.assert_array_equal(run.motors[:FAULT_STEP, 1], reference.motors[:FAULT_STEP, 1])
    _others_unchanged(run, reference, lost=1)


def test_a_stalled_firmware_is_declared_lost_after_its_timeout(reference):
    """SIGSTOP to vehicle 2's firmware: after ``timeout_s`` (2 s here; 10 s by default) of no
    answer the vehicle is declared lost the same way; the others are unchanged."""

    def stop(k: int, fleet: BetaflightFleet) -> None:
        if k == FAULT_STEP:
            os.kill(fleet.firmwares[2].pid, signal.SIGSTOP)

    run = _fly(stop, LinkConfig(timeout_s=2.0))
    assert [(e.vehicle, e.cause) for e in run.events] == [(2, "stalled: no answer within 2 s")]
    assert 2.0 <= run.wall[FAULT_STEP] < 5.0
    assert np.all(run.motors[FAULT_STEP:, 2] == 0.0)
    assert run.pos[-1, 2, 2] < run.pos[FAULT_STEP, 2, 2] - 0.05  # falling
    _others_unchanged(run, reference, lost=2)


def test_garbage_on_the_ports_leaves_the_flight_unchanged(reference):
    """A third socket on 127.0.0.1 sends random bytes of every size, including the exact sizes
    and tags of the state, RC, motor, acknowledgement and no-RC packets, to each firmware's
    state and RC ports and to volary's receiving sockets: every vehicle flies bit for bit as
    without it, and nothing is reported."""
    rng = np.random.default_rng(7)
    sizes = (0, 1, 12, 16, 40, 144, 145, 600)
    sent = [0]

    def garbage(k: int, fleet: BetaflightFleet, intruder: socket.socket) -> None:
        if k % 25:
            return
        t = k * fleet.dt
        for fw in fleet.firmwares:
            ports = fw.ports
            for size in sizes:
                junk = bytearray(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
                if size == 12:
                    junk[:4] = b"VLNR" if k % 50 else b"VLAK"
                    junk[4:12] = np.float64(t).tobytes()
                for port in (ports["state"], ports["rc"], ports["simulator"]):
                    intruder.sendto(bytes(junk), ("127.0.0.1", port))
                    sent[0] += 1

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as intruder:
        intruder.bind(("127.0.0.1", 0))
        run = _fly(lambda k, fleet: garbage(k, fleet, intruder))
    assert sent[0] > 1000
    assert run.events == []
    np.testing.assert_array_equal(run.motors, reference.motors)
    np.testing.assert_array_equal(run.pos, reference.pos)


def test_rc_loss_follows_betaflight_failsafe_and_does_not_rearm_by_itself():
    """The radio link of vehicles 0 and 1 is lost at 1.3 s (sticks None), back at 2.5 s with
    the arm switch still on; vehicle 2 keeps its radio.

    Vehicle 0's receiver outputs no pulses (``rc_loss="no_pulses"``): Betaflight holds the last
    values 300 ms, then stage 1 (sticks centred, throttle low: motors at idle) for
    ``failsafe_delay`` (0.5 s here), then stage 2 ``DROP``: disarmed, motors off, it falls
    (measured: motors 0 from exactly 1.3 + 0.3 + 0.5 s). With the radio back and the
    arm switch still on it stays disarmed; the switch cycled off and on, it arms again.
    Vehicle 1's receiver sends nothing (``"no_frames"``): 4.6.0's SITL receiver reports every
    check as a complete frame, so the firmware flies the last sticks on, no failsafe."""
    lost, back, cycle_off, cycle_on = 1.3, 2.5, 3.3, 3.5
    hold, delay = 0.3, 0.5

    def sticks(t: float, z: np.ndarray, vz: np.ndarray) -> list[Sticks | None]:
        frame = [_pilot(t, z[i], vz[i]) for i in range(3)]
        for i in (0, 1):
            if lost <= t < back:
                frame[i] = None
            elif t >= back:
                arm = not (i == 0 and cycle_off <= t < cycle_on)
                frame[i] = Sticks(throttle=0.0 if i == 0 else frame[i].throttle, arm=arm)
        return frame

    profile = Profile(failsafe_delay=5, failsafe_procedure="DROP", failsafe_recovery_delay=5)
    cfg = LinkConfig(profile=profile, rc_loss=("no_pulses", "no_frames", "no_pulses"))
    run = _fly(config=cfg, steps=3700, sticks=sticks, n=3)
    m = run.motors
    ms = lambda a, b: slice(int(round(a * 1000)), int(round(b * 1000)))  # noqa: E731
    v0 = m[:, 0]
    assert v0[ms(lost, lost + hold - 0.01)].min() > 0.2  # the last values held 300 ms
    stage1 = v0[ms(lost + hold + 0.02, lost + hold + delay - 0.01)]
    assert stage1.min() > 0.0 and stage1.max() < 0.1  # stage 1: throttle low, still armed
    assert np.all(v0[ms(lost + hold + delay + 0.01, cycle_on)] == 0.0)  # stage 2: DROP
    z0 = run.pos[:, 0, 2]
    assert z0[ms(back, back + 0.001)][0] < z0[int(lost * 1000)] - 0.1  # it fell
    assert v0[ms(cycle_on + 0.05, 3.7)].min() > 0.0  # armed again after the switch cycled
    assert np.all(m[ms(lost, back), 1] > 0.0) and run.pos[int(back * 1000), 1, 2] > 0.5
    assert np.all(m[ms(0.75, 3.7), 2] > 0.0)  # its radio kept: flies on
    assert run.events == []


def _squat_on(which: int, monkeypatch) -> tuple[socket.socket, list[list[int]]]:
    """Make the first UDP port pick hand over a port another socket holds (the race a busy
    machine can lose: ports are picked free, then bound by the firmware later)."""
    import volary.fc.betaflight as bf

    squatter = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    squatter.bind(("127.0.0.1", 0))
    picks: list[list[int]] = []
    real = bf._free_ports

    def first_taken(n: int, kind: int) -> list[int]:
        ports = real(n, kind)
        if not picks:
            ports[which] = squatter.getsockname()[1]
        picks.append(ports)
        return ports

    monkeypatch.setattr(bf, "_free_ports", first_taken)
    return squatter, picks


@pytest.mark.parametrize("which", [0, 2], ids=["state-port", "send-port"])
def test_a_firmware_whose_port_was_taken_starts_again_on_fresh_ports(which, monkeypatch):
    squatter, picks = _squat_on(which, monkeypatch)
    with squatter, BetaflightFleet("fpv_racer_250", 1) as fleet:
        (fw,) = fleet.firmwares
        assert fw.starts == 2 and len(picks) == 2
        assert squatter.getsockname()[1] not in fw.ports.values()
        r = fleet.step([_pilot(0.0, 0.0, 0.0)])
        assert fleet.alive.all() and not fleet.events
        assert np.isfinite(r.motors).all()


def test_a_port_taken_on_every_start_is_reported_as_such(monkeypatch):
    import volary.fc.betaflight as bf
    from volary.fc.betaflight import FirmwareError

    squatter = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    squatter.bind(("127.0.0.1", 0))
    real = bf._free_ports

    def always_taken(n: int, kind: int) -> list[int]:
        ports = real(n, kind)
        ports[0] = squatter.getsockname()[1]
        return ports

    monkeypatch.setattr(bf, "_free_ports", always_taken)
    with squatter, pytest.raises(FirmwareError, match="port volary chose for it was taken"):
        BetaflightFleet("fpv_racer_250", 1)
