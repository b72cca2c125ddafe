"""ArduPilot SITL flies a volary vehicle through ArduPilot's JSON physics backend (UDP).

>>> link = ArduPilotLink("research_quad_1kg")  # listens on 127.0.0.1:9002
>>> report = link.run(duration=60.0)          # start `sim_vehicle.py -v ArduCopter -f JSON`
>>> print(report.line())

Written from ArduPilot's ``libraries/SITL/examples/JSON/readme.md``; not flown against an
ArduPilot build here (docs/firmware.md). What passes:

- ArduPilot sends a binary servo packet to volary's UDP port (9002 by default), little-endian:
  ``uint16 magic`` (18458 with 16 channels, 29569 with 32: ``SERVO_32_ENABLE``), ``uint16
  frame_rate`` (Hz, its ``SIM_RATE_HZ``), ``uint32 frame_count``, ``uint16 pwm[16 or 32]`` (us).
- volary answers each new frame with one JSON object, preceded and followed by ``\\n``, sent to
  the packet's source address: ``timestamp`` (s, the physics time after the step),
  ``imu.gyro`` (rad/s, FRD) and ``imu.accel_body`` (m/s^2, FRD specific force: (0, 0, -9.81)
  at rest, level) from volary's IMU model, ``position`` (m, NED from the world origin),
  ``velocity`` (m/s, NED) and ``quaternion`` ([w, x, y, z], FRD-to-NED).
- Lock-step: ArduPilot blocks until the answer arrives; volary steps the physics once per new
  frame with that frame's PWM held, so ArduPilot's clock follows volary's timestamps.
- Frame counts: the same count again (ArduPilot re-sends a frame it got no answer to) gets the
  same answer again, without a step; a lower count means ArduPilot restarted: the vehicle is
  reset to its spawn and time 0 (an event in the report); a jump forward counts the lost frames
  and steps once.
- Motors: channel k (SERVO1, 2, ...) is motor k of ArduPilot's frame; ``(pwm - pwm_min) /
  (pwm_max - pwm_min)`` clipped to 0..1 is the motor output (a disabled channel's 0 us is 0).
- The exchange rate follows the first packet's ``frame_rate`` unless ``rate_hz`` is given.
  Datagrams that are not servo packets are counted and dropped.
"""

from __future__ import annotations

import json
import math
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
from pydantic import Field, model_validator

from volary.errors import ConfigError
from volary.fc.ned import NedReading, NedVehicle, Report, VehicleConfig
from volary.inputs import validated

MAGIC_16 = 18458
MAGIC_32 = 29569
SERVO_16 = struct.Struct("<HHI16H")  # 40 bytes
SERVO_32 = struct.Struct("<HHI32H")  # 72 bytes
_HZ = Annotated[float, Field(gt=0, le=10_000, strict=True, allow_inf_nan=False)]
_PWM = Annotated[int, Field(ge=0, le=65_535, strict=True)]
MIN_PHYSICS_HZ = 1000.0  # when the rate follows the firmware: physics at a multiple >= this


@dataclass(frozen=True)
class ServoPacket:
    """One output frame of ArduPilot SITL."""

    magic: int
    frame_rate: int
    frame_count: int
    pwm: tuple[int, ...]


def parse_servo(data: bytes) -> ServoPacket | None:
    """A servo packet of 16 or 32 channels, or None when ``data`` is not one (size, magic)."""
    for layout, magic in ((SERVO_16, MAGIC_16), (SERVO_32, MAGIC_32)):
        if len(data) == layout.size:
            fields = layout.unpack(data)
            if fields[0] == magic:
                return ServoPacket(fields[0], fields[1], fields[2], tuple(fields[3:]))
    return None


def state_json(r: NedReading) -> bytes:
    """The JSON answer of one reading, framed by newlines."""

    def vec(a: np.ndarray) -> list[float]:
        return [float(v) + 0.0 for v in a]  # no -0.0

    doc = {
        "timestamp": float(r.t),
        "imu": {"gyro": vec(r.gyro), "accel_body": vec(r.accel)},
        "position": vec(r.pos),
        "velocity": vec(r.vel),
        "quaternion": vec(r.quat),
    }
    return b"\n" + json.dumps(doc, separators=(",", ":")).encode() + b"\n"


class ArduPilotConfig(VehicleConfig):
    """:class:`~volary.fc.ned.VehicleConfig` plus the JSON backend's link: ``port`` (UDP,
    9002 is ArduPilot's default; 0 picks a free one); ``rate_hz`` None follows ArduPilot's
    ``frame_rate`` (physics at its smallest multiple >= 1000 Hz); ``pwm_min``/``pwm_max``
    (us): the PWM of motor output 0 and 1 (ArduPilot's ``MOT_PWM_MIN``/``MOT_PWM_MAX``);
    ``connect_timeout_s``: how long to wait for the first packet."""

    rate_hz: _HZ | None = None  # type: ignore[assignment]
    physics_hz: _HZ | None = None  # type: ignore[assignment]
    port: Annotated[int, Field(ge=0, le=65_535, strict=True)] = 9002
    pwm_min: _PWM = 1000
    pwm_max: _PWM = 2000
    connect_timeout_s: Annotated[float, Field(gt=0, le=86_400, strict=True)] = 300.0

    @model_validator(mode="after")
    def _pwm_range(self) -> ArduPilotConfig:
        if self.pwm_max <= self.pwm_min:
            raise ValueError(
                f"pwm_max: expected more than pwm_min ({self.pwm_min} us), got {self.pwm_max}"
            )
        if self.rate_hz is None and self.physics_hz is not None:
            raise ValueError("physics_hz: expected rate_hz too (or neither: follow ArduPilot)")
        return self


def _rates_for(frame_rate: float) -> tuple[float, float]:
    return frame_rate, frame_rate * math.ceil(MIN_PHYSICS_HZ / frame_rate - 1e-9)


class _Stop(Exception):
    """Ends a run: the reason is the message."""


class ArduPilotLink:
    """The physics side of ArduPilot's JSON SITL backend for one volary vehicle.

    Binds its UDP port when made (``port`` 0 picks a free one: see :attr:`port`); ``run``
    answers servo packets until ``duration`` simulated seconds (None: until ArduPilot goes
    silent for ``timeout_s``) or Ctrl-C and returns a :class:`~volary.fc.ned.Report`."""

    def __init__(
        self, platform: str = "research_quad_1kg", config: ArduPilotConfig | dict | None = None
    ) -> None:
        self.config = cfg = (
            config
            if isinstance(config, ArduPilotConfig)
            else validated(ArduPilotConfig, config or {}, "ardupilot link", error=ConfigError)
        )
        self.platform = platform
        self.follow_rate = cfg.rate_hz is None
        rate, physics = _rates_for(cfg.rate_hz or 400.0)
        physics = cfg.physics_hz or physics
        self.vehicle = NedVehicle(platform, self._vehicle_config(rate, physics), "ArduPilot")
        self.sock = socket.socket(socket.AF_INET6 if ":" in cfg.bind else socket.AF_INET,
                                  socket.SOCK_DGRAM)  # fmt: skip
        try:
            self.sock.bind((cfg.bind, cfg.port))
        except OSError as e:
            self.sock.close()
            raise ConfigError(
                f"--port: cannot listen on {cfg.bind}:{cfg.port} ({e.strerror or e})"
            ) from None
        self.port = self.sock.getsockname()[1]
        self.last_count: int | None = None
        self.last_reply = b""
        self.counts = {"frames": 0, "duplicates": 0, "lost": 0, "restarts": 0, "garbage": 0}
        self._frame_rate: int | None = None

    def _vehicle_config(self, rate: float, physics: float) -> VehicleConfig:
        data = self.config.model_dump(include=set(VehicleConfig.model_fields))
        data.update(rate_hz=float(rate), physics_hz=float(physics))
        return VehicleConfig.model_validate(data)

    def motor_outputs(self, pwm: tuple[int, ...]) -> np.ndarray:
        """Motor outputs 0..1 of a packet's PWM channels."""
        lo, hi = self.config.pwm_min, self.config.pwm_max
        a = np.asarray(pwm, dtype=np.float64)
        return np.where(a > 0, np.clip((a - lo) / (hi - lo), 0.0, 1.0), 0.0)

    # ---- one packet ----------------------------------------------------------------------
    def handle(self, pkt: ServoPacket, report: Report) -> bytes:
        """The answer to one servo packet (the frame-count rules of the module docstring)."""
        v = self.vehicle
        fc = pkt.frame_count
        if self.last_count is not None and fc == self.last_count:
            self.counts["duplicates"] += 1
            return self.last_reply
        if self.last_count is not None and fc < self.last_count:
            self.counts["restarts"] += 1
            report.events.append(
                f"ArduPilot restarted (frame {fc} after {self.last_count}) at t={v.t:.4f} s: "
                "vehicle reset"
            )
            v.reset()
            self.last_count = None
        if self.last_count is None:
            self._first_frame(pkt, report)
            v = self.vehicle
        elif fc > self.last_count + 1:
            self.counts["lost"] += fc - self.last_count - 1
        if pkt.frame_rate != self._frame_rate and self._frame_rate is not None:
            report.events.append(
                f"ArduPilot frame_rate changed to {pkt.frame_rate} Hz at t={v.t:.4f} s; volary "
                f"keeps {1 / v.dt:g} Hz"
            )
        self._frame_rate = pkt.frame_rate
        v.step(self.motor_outputs(pkt.pwm[: len(v.order)]), True)
        self.counts["frames"] += 1
        self.last_count = fc
        self.last_reply = state_json(v.reading())
        return self.last_reply

    def _first_frame(self, pkt: ServoPacket, report: Report) -> None:
        if not self.follow_rate:
            return
        fr = pkt.frame_rate
        if not 1 <= fr <= 10_000:
            report.events.append(f"ArduPilot frame_rate {fr} Hz ignored; volary steps at 400 Hz")
            fr = 400
        if abs(1.0 / self.vehicle.dt - fr) > 1e-9:
            self.vehicle = NedVehicle(
                self.platform, self._vehicle_config(*_rates_for(float(fr))), "ArduPilot"
            )
        self.follow_rate = False  # a restart keeps the rate

    # ---- the run -------------------------------------------------------------------------
    def run(
        self,
        duration: float | None = None,
        on_step: Callable[[NedReading], None] | None = None,
    ) -> Report:
        """Answer ArduPilot's frames until ``duration`` simulated seconds (None: until it is
        silent for ``timeout_s``) or Ctrl-C. ``on_step`` sees each new reading."""
        report = Report("ardupilot", counts=self.counts)
        t0 = time.monotonic()
        try:
            self._loop(duration, on_step, report)
        except _Stop as stop:
            report.stopped = str(stop)
            report.events.append(str(stop))
        except KeyboardInterrupt:
            report.stopped = "interrupted"
        report.wall_s = time.monotonic() - t0
        report.sim_s = self.vehicle.t
        report.exchanges = self.counts["frames"]
        report.lockstep = True if self.counts["frames"] else None
        return report

    def _loop(
        self,
        duration: float | None,
        on_step: Callable[[NedReading], None] | None,
        report: Report,
    ) -> None:
        cfg = self.config
        peer: Any = None
        while True:
            wait = cfg.connect_timeout_s if self.last_count is None else cfg.timeout_s
            self.sock.settimeout(wait)
            try:
                data, addr = self.sock.recvfrom(4096)
            except TimeoutError:
                if self.last_count is None and not self.counts["frames"]:
                    raise _Stop(
                        f"no ArduPilot packet on {cfg.bind}:{self.port} within {wait:g} s"
                    ) from None
                raise _Stop(
                    f"ArduPilot silent for {wait:g} s at t={self.vehicle.t:.4f} s"
                ) from None
            pkt = parse_servo(data)
            if pkt is None:
                self.counts["garbage"] += 1
                if self.counts["garbage"] == 1:
                    report.events.append(
                        f"a {len(data)}-byte datagram that is not a servo packet from "
                        f"{addr[0]}:{addr[1]} dropped"
                    )
                continue
            if peer is None:
                report.events.append(f"ArduPilot at {addr[0]}:{addr[1]}")
            peer = addr
            steps = self.counts["frames"]
            reply = self.handle(pkt, report)
            if on_step is not None and self.counts["frames"] != steps:
                on_step(self.vehicle.reading())
            try:
                self.sock.sendto(reply, addr)
            except OSError as e:
                raise _Stop(f"answer to {addr[0]}:{addr[1]} failed ({e.strerror or e})") from None
            if duration is not None and self.vehicle.t >= duration - 1e-9:
                report.stopped = "duration reached"
                return

    def close(self) -> None:
        """Release the UDP port."""
        self.sock.close()

    def __enter__(self) -> ArduPilotLink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
