"""PX4's simulator MAVLink API, conformance-tested against a fake PX4 built here from the
protocol documents (PX4 "Simulation" page, MAVLink common.xml), with pymavlink packets over
loopback TCP: every field, unit and frame of HIL_SENSOR, HIL_GPS and HIL_STATE_QUATERNION,
HIL_ACTUATOR_CONTROLS to rotor speeds, and the lock-step handshake."""

from __future__ import annotations

import math
import select
import socket
import threading
import time
from collections import deque
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pymavlink")
from pymavlink.dialects.v20 import common as mavlink  # noqa: E402

from volary.errors import ConfigError  # noqa: E402
from volary.fc.ned import MAG_NED_GAUSS, Report  # noqa: E402
from volary.fc.px4 import Px4Link  # noqa: E402

H = math.sqrt(0.5)
G = 9.81
ARMED_LOCKSTEP = (128 | 1, 1)  # (mode: armed + custom, flags: lock-step)
DT_US = 4000  # 250 Hz


class FakePx4:
    """PX4's side of the link as the documents describe it: a TCP client on the simulator's
    port that reads the simulator's messages and answers with HIL_ACTUATOR_CONTROLS."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5.0)
        self.mav = mavlink.MAVLink(None, srcSystem=1, srcComponent=1)
        self.mav.robust_parsing = True
        self.queue: deque[Any] = deque()
        self.closed = False

    def pump(self, timeout: float) -> None:
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            return
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            data = b""
        if not data:
            self.closed = True
            return
        self.queue.extend(self.mav.parse_buffer(data) or [])

    def next(self, kind: str, timeout: float = 5.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            while self.queue:
                msg = self.queue.popleft()
                if msg.get_type() == kind:
                    return msg
            if self.closed or time.monotonic() > deadline:
                raise AssertionError(f"no {kind} from volary")
            self.pump(0.05)

    def exchange(self, gps: bool = False) -> dict[str, Any]:
        """One exchange's messages, in the order they are sent."""
        out = {"HIL_SENSOR": self.next("HIL_SENSOR")}
        out["HIL_STATE_QUATERNION"] = self.next("HIL_STATE_QUATERNION")
        if gps:
            out["HIL_GPS"] = self.next("HIL_GPS")
        return out

    def act(self, controls: list[float], mode: int = 129, flags: int = 1, t: int = 0) -> None:
        c = (list(controls) + [0.0] * 16)[:16]
        self.sock.sendall(self.mav.hil_actuator_controls_encode(t, c, mode, flags).pack(self.mav))

    def sensors_waiting(self, wait: float) -> int:
        """HIL_SENSOR messages that arrive within ``wait`` seconds (nothing is answered)."""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and not self.closed:
            self.pump(0.01)
        return sum(m.get_type() == "HIL_SENSOR" for m in self.queue)

    def close(self) -> None:
        self.sock.close()


class Running:
    """A link's ``run`` in a thread; ``join`` returns its Report (and re-raises its error)."""

    def __init__(self, link: Px4Link, duration: float | None) -> None:
        self.report: Report | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(link, duration), daemon=True)
        self.thread.start()

    def _run(self, link: Px4Link, duration: float | None) -> None:
        try:
            self.report = link.run(duration)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            self.error = e

    def join(self) -> Report:
        self.thread.join(10.0)
        assert not self.thread.is_alive(), "the link did not stop"
        if self.error is not None:
            raise self.error
        assert self.report is not None
        return self.report


def make_link(**cfg: Any) -> Px4Link:
    # speed 0.01: until PX4's first answer volary sends a sensor every 0.4 s of wall time, so
    # each test's first answer engages lock-step before a second boot-phase sensor is due
    base = {"port": 0, "imu": "ideal", "timeout_s": 2.0, "connect_timeout_s": 5.0, "speed": 0.01}
    return Px4Link("research_quad_1kg", {**base, **cfg})


def test_first_exchange_every_field() -> None:
    """At rest, level, nose east (volary's +x), on the ground at PX4's default home."""
    with make_link() as link:
        run = Running(link, duration=0.0)
        px4 = FakePx4(link.port)
        m = px4.exchange(gps=True)
        report = run.join()
        px4.close()
    s = m["HIL_SENSOR"]
    assert s.time_usec == 1_000_000  # boot_us + t = 0
    assert np.allclose([s.xacc, s.yacc, s.zacc], [0, 0, -G], atol=1e-5)  # FRD specific force
    assert np.allclose([s.xgyro, s.ygyro, s.zgyro], 0, atol=1e-7)
    # body x = east, y (right) = south, z = down: the NED field (N, E, D) reads (E, -N, D)
    n, e, d = MAG_NED_GAUSS
    assert np.allclose([s.xmag, s.ymag, s.zmag], [e, -n, d], atol=1e-6)
    assert s.abs_pressure == pytest.approx(955.98, abs=0.01)  # hPa, ISA at 488 m
    assert s.pressure_alt == pytest.approx(488.0) and s.diff_pressure == 0.0
    assert s.temperature == pytest.approx(15.0 - 0.0065 * 488, abs=1e-4)  # deg C
    updated = mavlink.HIL_SENSOR_UPDATED_XACC | mavlink.HIL_SENSOR_UPDATED_ZGYRO
    updated |= mavlink.HIL_SENSOR_UPDATED_ZMAG | mavlink.HIL_SENSOR_UPDATED_ABS_PRESSURE
    updated |= mavlink.HIL_SENSOR_UPDATED_PRESSURE_ALT | mavlink.HIL_SENSOR_UPDATED_TEMPERATURE
    assert s.fields_updated & updated == updated
    assert s.fields_updated == 0b1_1011_1111_1111  # IMU, mag, baro; no airspeed, no reset
    q = m["HIL_STATE_QUATERNION"]
    assert q.time_usec == s.time_usec
    assert np.allclose(q.attitude_quaternion, [H, 0, 0, H], atol=1e-7)  # NED yaw +90 deg
    assert (q.lat, q.lon, q.alt) == (473977420, 85455940, 488000)  # degE7, mm
    assert (q.vx, q.vy, q.vz) == (0, 0, 0)
    assert (q.xacc, q.yacc, q.zacc) == (0, 0, -1000)  # milli-g
    gps = m["HIL_GPS"]
    assert (gps.fix_type, gps.lat, gps.lon, gps.alt) == (3, 473977420, 85455940, 488000)
    assert (gps.eph, gps.epv) == (30, 40)  # cm, as PX4 reads them
    assert (gps.vel, gps.vn, gps.ve, gps.vd) == (0, 0, 0, 0)
    assert gps.cog == 65535 and gps.satellites_visible == 10  # course unknown at rest
    assert report.stopped == "duration reached" and report.exchanges == 0


def test_lockstep_never_sends_ahead() -> None:
    """After PX4's first answer (lock-step flag set), sensor N+1 only after the actuators
    answering sensor N, however fast volary may pace itself (speed 1000): held answers hold
    the simulator, and each answer advances its clock by exactly 1/rate_hz."""
    with make_link(speed=1000.0) as link:
        run = Running(link, duration=None)
        px4 = FakePx4(link.port)
        px4.next("HIL_SENSOR")
        px4.act([0.0] * 4, *ARMED_LOCKSTEP)
        px4.sensors_waiting(0.2)  # the boot phase's sensors sent before the answer arrived
        last = max(m.time_usec for m in px4.queue if m.get_type() == "HIL_SENSOR")
        px4.queue.clear()
        for _ in range(15):
            assert px4.sensors_waiting(0.03) == 0, "a sensor before the actuators"
            px4.act([0.0] * 4, *ARMED_LOCKSTEP)
            now = px4.next("HIL_SENSOR").time_usec
            assert now == last + DT_US
            last = now
        px4.close()
        report = run.join()
    assert report.lockstep is True
    assert any(e.startswith("PX4 lock-step on") for e in report.events)


def test_sensor_cadence() -> None:
    """The IMU every exchange; magnetometer (100 Hz), barometer (50 Hz) and GPS (10 Hz) at
    their rates out of 250 Hz, flagged in fields_updated only when sampled."""
    with make_link() as link:
        run = Running(link, duration=0.2)
        px4 = FakePx4(link.port)
        times, fields = [], []
        for k in range(51):
            m = px4.exchange(gps=k % 25 == 0)
            times.append(m["HIL_SENSOR"].time_usec)
            fields.append(m["HIL_SENSOR"].fields_updated)
            if k < 50:
                px4.act([0.0] * 4, *ARMED_LOCKSTEP)
        report = run.join()
        px4.close()
    assert np.all(np.diff(times) == DT_US)
    assert report.exchanges == 50 and report.counts["actuator_msgs"] == 50
    assert report.counts["sensor_msgs"] == 51 * 2 + 3  # + HIL_GPS at k = 0, 25, 50
    mag = [bool(f & mavlink.HIL_SENSOR_UPDATED_XMAG) for f in fields]
    baro = [bool(f & mavlink.HIL_SENSOR_UPDATED_ABS_PRESSURE) for f in fields]
    assert mag == [k % 2 == 0 for k in range(51)]  # 250 / 100 rounds to every 2nd
    assert baro == [k % 5 == 0 for k in range(51)]
    assert all(f & 0b111111 == 0b111111 for f in fields)


def _hover_fraction(link: Px4Link) -> float:
    from volary.platforms import get

    a = get("research_quad_1kg")
    return a.hover_rotor_speed / a.max_rotor_speed[0]


def test_hover_and_free_fall() -> None:
    """Armed at the hover output the vehicle holds 5 m and reads -g along FRD z; disarmed it
    falls: specific force about 0, the NED down velocity growing at g."""
    with make_link() as link:
        from volary.platforms import get

        w = get("research_quad_1kg").hover_rotor_speed
        link.vehicle.place([0.0, 0.0, 5.0], [1.0, 0.0, 0.0, 0.0], [w] * 4)
        run = Running(link, duration=0.1)
        px4 = FakePx4(link.port)
        u = _hover_fraction(link)
        for k in range(26):
            m = px4.exchange(gps=k % 25 == 0)
            if k < 25:
                px4.act([u] * 4, *ARMED_LOCKSTEP)
        run.join()
        px4.close()
    s, q = m["HIL_SENSOR"], m["HIL_STATE_QUATERNION"]
    assert np.allclose([s.xacc, s.yacc, s.zacc], [0, 0, -G], atol=1e-3)
    assert q.alt == pytest.approx(493_000, abs=2) and m["HIL_GPS"].alt == q.alt
    assert s.pressure_alt == pytest.approx(493.0, abs=1e-3)
    assert s.abs_pressure < 955.98  # higher, lower pressure

    with make_link() as link:
        link.vehicle.place([0.0, 0.0, 5.0], [1.0, 0.0, 0.0, 0.0])
        run = Running(link, duration=0.1)
        px4 = FakePx4(link.port)
        for k in range(26):
            m = px4.exchange(gps=k % 25 == 0)
            if k < 25:
                px4.act([0.5] * 4, mode=1, flags=1)  # disarmed: outputs ignored
        report = run.join()
        px4.close()
    s, q, gps = m["HIL_SENSOR"], m["HIL_STATE_QUATERNION"], m["HIL_GPS"]
    assert abs(s.zacc) < 0.1  # free fall
    assert q.vz == pytest.approx(98, abs=2) and gps.vd == q.vz  # cm/s, down positive
    assert gps.vel == 0 and gps.cog == 65535  # no ground speed
    assert q.alt < 488_000 + 5_000 - 40  # fell about 5 cm
    assert not any("armed" in e for e in report.events)


def test_rotated_vehicle() -> None:
    """Rolled +30 deg about volary's body x (right wing down), nose east: PX4 gets the NED
    quaternion yaw 90 deg then roll 30 deg, and the specific force and field in FRD."""
    a = math.radians(30)
    with make_link() as link:
        link.vehicle.place([0.0, 0.0, 5.0], [math.cos(a / 2), math.sin(a / 2), 0.0, 0.0])
        run = Running(link, duration=0.0)
        px4 = FakePx4(link.port)
        m = px4.exchange(gps=True)
        run.join()
        px4.close()
    c45, c15, s15 = H, math.cos(a / 2), math.sin(a / 2)
    expect = [c45 * c15, c45 * s15, c45 * s15, c45 * c15]  # qz(90) (x) qx(30), NED
    assert np.allclose(m["HIL_STATE_QUATERNION"].attitude_quaternion, expect, atol=1e-7)
    s = m["HIL_SENSOR"]
    assert np.allclose([s.xacc, s.yacc, s.zacc], [0, -G * 0.5, -G * math.cos(a)], atol=1e-5)
    n, e, d = MAG_NED_GAUSS  # body: x east; y, z rolled 30 deg about x from (south, down)
    mag_y = -n * math.cos(a) + d * math.sin(a)
    mag_z = n * math.sin(a) + d * math.cos(a)
    assert np.allclose([s.xmag, s.ymag, s.zmag], [e, mag_y, mag_z], atol=1e-6)


@pytest.mark.parametrize("motor_range", ["unit", "symmetric"])
def test_motor_outputs_to_rotor_speeds(motor_range: str) -> None:
    """PX4's quad-X motors 1-4 (front-right, rear-left, front-left, rear-right) drive the
    rotors at those corners, linearly over the platform's speed range."""
    outputs = [0.1, 0.2, 0.3, 0.4]
    sent = outputs if motor_range == "unit" else [2 * u - 1 for u in outputs]
    with make_link(motor_range=motor_range) as link:
        run = Running(link, duration=0.004)
        px4 = FakePx4(link.port)
        px4.exchange(gps=True)
        px4.act(sent, *ARMED_LOCKSTEP)
        px4.exchange()
        run.join()
        px4.close()
        v = link.vehicle
    from volary.platforms import get

    a = get("research_quad_1kg")
    for k, u in enumerate(outputs):
        rotor = v.order[k]
        corner = np.sign(a.rotor_positions[rotor][:2]).tolist()
        assert corner == [[1, -1], [-1, 1], [1, 1], [-1, -1]][k]
        assert v.rotor_cmd[rotor] == pytest.approx(u * a.max_rotor_speed[rotor])


def test_closed_connection_is_an_event() -> None:
    with make_link() as link:
        run = Running(link, duration=None)
        px4 = FakePx4(link.port)
        for _ in range(5):
            px4.exchange(gps=False)
            px4.act([0.0] * 4, *ARMED_LOCKSTEP)
        px4.exchange()
        px4.close()
        report = run.join()
    assert report.stopped.startswith("PX4 closed the connection at t=0.0200 s")
    assert report.exchanges == 5 and report.sim_s == pytest.approx(0.02)


def test_stall_and_garbage() -> None:
    """Garbage on the stream is counted and skipped; a PX4 that stops answering in lock-step
    ends the run after timeout_s with an event."""
    with make_link(timeout_s=0.3) as link:
        run = Running(link, duration=None)
        px4 = FakePx4(link.port)
        px4.exchange(gps=True)
        px4.sock.sendall(b"\x00not mavlink\x01" * 8)
        px4.act([0.0] * 4, *ARMED_LOCKSTEP)
        px4.exchange()
        report = run.join()
        px4.close()
    assert report.stopped.startswith("PX4 stalled: no HIL_ACTUATOR_CONTROLS for the sensors")
    assert report.counts["bad_data"] >= 1 and report.exchanges == 1
    assert any(e.startswith("garbage on the MAVLink stream") for e in report.events)


def test_without_lockstep_flag_volary_paces_itself() -> None:
    """Actuators without the lock-step flag: volary does not wait for answers."""
    with make_link(speed=0.0) as link:
        run = Running(link, duration=0.1)
        px4 = FakePx4(link.port)
        px4.exchange(gps=True)
        px4.act([0.0] * 4, mode=129, flags=0)
        for _ in range(25):
            px4.exchange()  # no further answers
        report = run.join()
        px4.close()
    assert report.lockstep is False and report.exchanges == 25
    assert any(e.startswith("PX4 lock-step off") for e in report.events)


def test_no_connection_and_bad_options() -> None:
    with make_link(connect_timeout_s=0.2) as link:
        report = link.run(duration=1.0)
    assert report.stopped.startswith("no PX4 connected to 127.0.0.1:")
    with pytest.raises(ConfigError, match="^px4 link: motor_range: .*got 'both'$"):
        make_link(motor_range="both")
    with make_link() as held, pytest.raises(ConfigError, match="^--port: cannot listen on"):
        make_link(port=held.port)
