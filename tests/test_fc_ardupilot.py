"""ArduPilot's JSON SITL backend, conformance-tested against a fake ArduPilot built here from
``libraries/SITL/examples/JSON/readme.md``: struct-packed servo packets (16 and 32 channels)
over loopback UDP, one newline-framed JSON answer per new frame, NED/FRD fields, frame-count
rules (duplicate, lost, restart), PWM to rotor speeds."""

from __future__ import annotations

import json
import math
import socket
import struct
import threading
from typing import Any

import numpy as np
import pytest

from volary.errors import ConfigError
from volary.fc.ardupilot import ArduPilotLink
from volary.fc.ned import Report

H = math.sqrt(0.5)
G = 9.81
PKT16 = struct.Struct("<HHI16H")
PKT32 = struct.Struct("<HHI32H")


class FakeArduPilot:
    """ArduPilot's side: servo packets to the physics backend's port, JSON lines back."""

    def __init__(self, port: int, rate: int = 400) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(5.0)
        self.addr = ("127.0.0.1", port)
        self.rate = rate

    def send(self, count: int, pwm: list[int] | None = None, channels: int = 16) -> bytes:
        pwm = ((pwm or []) + [1000] * channels)[:channels]
        layout, magic = (PKT16, 18458) if channels == 16 else (PKT32, 29569)
        self.sock.sendto(layout.pack(magic, self.rate, count, *pwm), self.addr)
        return self.sock.recv(65536)

    def frame(self, count: int, pwm: list[int] | None = None, channels: int = 16) -> dict:
        raw = self.send(count, pwm, channels)
        assert raw.startswith(b"\n") and raw.endswith(b"\n") and raw.count(b"\n") == 2
        return json.loads(raw)

    def close(self) -> None:
        self.sock.close()


class Running:
    def __init__(self, link: ArduPilotLink, duration: float | None) -> None:
        self.report: Report | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(link, duration), daemon=True)
        self.thread.start()

    def _run(self, link: ArduPilotLink, duration: float | None) -> None:
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


def make_link(**cfg: Any) -> ArduPilotLink:
    base = {"port": 0, "imu": "ideal", "timeout_s": 0.3, "connect_timeout_s": 5.0}
    return ArduPilotLink("research_quad_1kg", {**base, **cfg})


def test_answer_fields_and_frame_rate() -> None:
    """One JSON line per frame: physics time after the step at ArduPilot's frame rate, FRD
    IMU (at rest: -g along z), NED position and velocity, the FRD-to-NED quaternion."""
    with make_link() as link:
        run = Running(link, duration=None)
        ap = FakeArduPilot(link.port, rate=1200)
        doc = ap.frame(1)
        second = ap.frame(2)
        ap.close()
        report = run.join()
    assert set(doc) == {"timestamp", "imu", "position", "velocity", "quaternion"}
    assert doc["timestamp"] == pytest.approx(1 / 1200) and second["timestamp"] == pytest.approx(
        2 / 1200
    )
    assert np.allclose(doc["imu"]["accel_body"], [0, 0, -G], atol=1e-6)
    assert np.allclose(doc["imu"]["gyro"], 0, atol=1e-9)
    assert np.allclose(doc["position"], 0, atol=1e-9) and np.allclose(doc["velocity"], 0)
    assert np.allclose(doc["quaternion"], [H, 0, 0, H])  # level, nose east: NED yaw +90 deg
    assert report.stopped.startswith("ArduPilot silent for 0.3 s")
    assert report.exchanges == 2 and report.lockstep is True


def test_frame_counts_duplicate_lost_restart() -> None:
    with make_link(rate_hz=400.0) as link:
        run = Running(link, duration=None)
        ap = FakeArduPilot(link.port)
        first = ap.send(1)
        ap.send(2)
        again = ap.send(2)  # a re-sent frame: the same answer, no step
        assert again == ap.send(2)
        t3 = json.loads(ap.send(3))["timestamp"]
        t6 = json.loads(ap.send(6))["timestamp"]  # frames 4 and 5 lost: one step
        restarted = ap.send(1)  # a lower count: ArduPilot restarted
        ap.close()
        report = run.join()
    assert t3 == pytest.approx(3 / 400) and t6 == pytest.approx(4 / 400)
    assert restarted == first  # vehicle reset: the same first answer
    c = report.counts
    assert (c["frames"], c["duplicates"], c["lost"], c["restarts"]) == (5, 2, 2, 1)
    assert any(e.startswith("ArduPilot restarted (frame 1 after 6)") for e in report.events)


def test_32_channels_and_garbage() -> None:
    with make_link(rate_hz=400.0) as link:
        run = Running(link, duration=None)
        ap = FakeArduPilot(link.port)
        ap.sock.sendto(b"\x1bH" + b"\x00" * 38, ap.addr)  # 40 bytes, magic 18459
        ap.sock.sendto(b"hello", ap.addr)
        doc = ap.frame(1, channels=32)
        ap.close()
        report = run.join()
    assert doc["timestamp"] == pytest.approx(1 / 400)
    assert report.counts["garbage"] == 2 and report.counts["frames"] == 1


def test_pwm_to_rotor_speeds() -> None:
    """SERVO1-4 are ArduPilot's quad-X motors 1-4 (front-right, rear-left, front-left,
    rear-right); 1000-2000 us is 0..1 of the platform's rotor speed range; 0 us is off."""
    from volary.platforms import get

    a = get("research_quad_1kg")
    with make_link(rate_hz=400.0) as link:
        run = Running(link, duration=None)
        ap = FakeArduPilot(link.port)
        ap.frame(1, [1100, 1200, 1300, 0])
        ap.close()
        run.join()
        v = link.vehicle
    for k, u in enumerate([0.1, 0.2, 0.3, 0.0]):
        rotor = v.order[k]
        assert np.sign(a.rotor_positions[rotor][:2]).tolist() == [
            [1, -1], [-1, 1], [1, 1], [-1, -1]
        ][k]  # fmt: skip
        assert v.rotor_cmd[rotor] == pytest.approx(u * a.max_rotor_speed[rotor])


def test_hover_fall_and_rotated() -> None:
    """At the hover PWM the vehicle holds 5 m (NED down -5) reading -g; at 1000 us it falls
    (down velocity +g t, specific force about 0); a rolled vehicle's NED quaternion."""
    from volary.platforms import get

    a = get("research_quad_1kg")
    w = a.hover_rotor_speed
    pwm = round(1000 + 1000 * w / a.max_rotor_speed[0])
    with make_link(rate_hz=400.0) as link:
        link.vehicle.place([0.0, 0.0, 5.0], [1.0, 0.0, 0.0, 0.0], [w] * 4)
        run = Running(link, duration=0.1)
        ap = FakeArduPilot(link.port)
        for k in range(1, 41):
            doc = ap.frame(k, [pwm] * 4)
        assert doc["timestamp"] == pytest.approx(0.1)
        assert doc["position"][2] == pytest.approx(-5.0, abs=2e-3)
        assert np.allclose(doc["imu"]["accel_body"], [0, 0, -G], atol=0.02)
        report = run.join()
        assert report.stopped == "duration reached"

        link.vehicle.place([0.0, 0.0, 5.0], [1.0, 0.0, 0.0, 0.0])
        link.last_count = None
        run = Running(link, duration=0.2)
        for k in range(1, 41):
            doc = ap.frame(k)
        run.join()
        assert doc["velocity"][2] == pytest.approx(G * 0.1, rel=0.03)
        assert abs(doc["imu"]["accel_body"][2]) < 0.1

        r = math.radians(30)
        link.vehicle.place([0.0, 0.0, 5.0], [math.cos(r / 2), math.sin(r / 2), 0.0, 0.0])
        link.last_count = None
        run = Running(link, duration=None)
        doc = ap.frame(1)
        ap.close()
        run.join()
    c, s = math.cos(r / 2), math.sin(r / 2)
    assert np.allclose(doc["quaternion"], [H * c, H * s, H * s, H * c], atol=1e-5)


def test_no_firmware_and_bad_options() -> None:
    with make_link(connect_timeout_s=0.2) as link:
        report = link.run(duration=1.0)
    assert report.stopped.startswith("no ArduPilot packet on 127.0.0.1:")
    with pytest.raises(ConfigError, match=r"^ardupilot link: .*pwm_max: expected more than"):
        make_link(pwm_min=2000, pwm_max=1000)
    with pytest.raises(ConfigError, match="physics_hz"):
        make_link(physics_hz=1200.0)
    with make_link() as held, pytest.raises(ConfigError, match="^--port: cannot listen on"):
        make_link(port=held.port)


def test_cli_flies_to_duration() -> None:
    """``volary fc ardupilot`` answers a fake ArduPilot until --duration, prints the summary
    line and exits 0; a bad option is one line and exit code 2."""
    from typer.testing import CliRunner

    from volary.cli.fc import app

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args = ["ardupilot", "--port", str(port), "--duration", "0.01", "--rate-hz", "400"]
    args += ["--imu", "ideal", "--wait", "5"]
    result: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: result.update(r=CliRunner().invoke(app, args)), daemon=True
    )
    thread.start()
    ap = FakeArduPilot(port)
    docs = []
    for k in range(1, 5):
        for _ in range(50):  # until the command has bound its port
            try:
                ap.sock.settimeout(0.1)
                docs.append(ap.frame(k))
                break
            except TimeoutError:
                continue
    ap.close()
    thread.join(10.0)
    out = result["r"]
    assert out.exit_code == 0, out.output
    assert docs[-1]["timestamp"] == pytest.approx(0.01)
    assert "volary-fc ardupilot stopped: duration reached exchanges=4" in out.output
    bad = CliRunner().invoke(app, ["ardupilot", "--home", "1,2"])
    assert bad.exit_code == 2
