"""PX4 SITL flies a volary vehicle through PX4's simulator MAVLink API (TCP, lock-step).

>>> link = Px4Link("research_quad_1kg")        # listens on 127.0.0.1:4560
>>> report = link.run(duration=60.0)           # start PX4 SITL (e.g. `make px4_sitl none_iris`)
>>> print(report.line())

Written from PX4's "Simulation" page (Simulator MAVLink API) and the MAVLink message
definitions; not flown against a PX4 build here (docs/firmware.md). What passes:

- The simulator (volary) is the TCP server, on 4560 by default; PX4 connects as the client.
- volary -> PX4 each exchange (``rate_hz``, default 250 Hz): ``HIL_SENSOR`` with
  ``time_usec`` = ``boot_us`` + the simulated time (it drives PX4's clock), the IMU's specific
  force (m/s^2) and rates (rad/s) in FRD, the magnetometer (gauss, FRD), the ISA barometer
  (``abs_pressure`` hPa, ``pressure_alt`` m, ``temperature`` deg C; ``diff_pressure`` 0 and not
  flagged) and ``fields_updated`` naming what was sampled this time (IMU every exchange,
  magnetometer at ``mag_hz``, barometer at ``baro_hz``); ``HIL_STATE_QUATERNION`` (the true
  state: FRD-to-NED quaternion, FRD rates, position in degE7 and mm, NED velocity cm/s, the
  true specific force in milli-g); ``HIL_GPS`` at ``gps_hz`` (3D fix, degE7, mm AMSL, NED
  velocity cm/s, ground speed, course over ground in cdeg or 65535 when standing still,
  ``eph``/``epv`` in cm as PX4 reads them, satellites).
- PX4 -> volary: ``HIL_ACTUATOR_CONTROLS``: ``controls`` (motor outputs 0..1 on PX4 >= 1.13;
  ``motor_range="symmetric"`` maps the -1..1 of older versions), ``mode`` (bit 128: armed; a
  disarmed PX4 stops the rotors), ``flags`` (bit 1: PX4 runs lock-step).
- Lock-step: until PX4's first ``HIL_ACTUATOR_CONTROLS`` arrives volary sends sensors paced
  at ``speed`` (real time by default; PX4 boots on them). From then on, if its lock-step flag
  is set, volary sends sensor N+1 only after the actuator message answering sensor N arrived:
  PX4's clock follows volary's, and the run goes as fast as both allow. Without the flag volary
  paces itself and flies the latest outputs.
- A closed connection, a stall longer than ``timeout_s`` or Ctrl-C ends the run with an event
  in the :class:`Report`, never a traceback.
"""

from __future__ import annotations

import math
import select
import socket
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

from volary.errors import ConfigError, MissingDependencyError
from volary.fc.ned import NedReading, NedVehicle, Report, VehicleConfig
from volary.inputs import validated

ARMED = 128  # MAV_MODE_FLAG_SAFETY_ARMED
LOCKSTEP = 1  # HIL_ACTUATOR_CONTROLS_FLAGS_LOCKSTEP
IMU_FIELDS = 0b111111  # XACC YACC ZACC XGYRO YGYRO ZGYRO
MAG_FIELDS = 0b111 << 6  # XMAG YMAG ZMAG
BARO_FIELDS = (1 << 9) | (1 << 11) | (1 << 12)  # ABS_PRESSURE PRESSURE_ALT TEMPERATURE
UNKNOWN_U16 = 65535
SYSTEM_ID, COMPONENT_ID = 1, 51  # volary's MAVLink identity on the simulator link

_HZ = Annotated[float, Field(gt=0, le=10_000, strict=True, allow_inf_nan=False)]


class Px4Config(VehicleConfig):
    """:class:`~volary.fc.ned.VehicleConfig` plus PX4's link: ``port`` (TCP, 4560 is PX4's
    default; 0 picks a free one), ``boot_us`` (PX4's clock at volary's t = 0), the sensor
    rates, the GPS's declared accuracy (``eph_m``, ``epv_m``) and satellites, ``motor_range``,
    ``speed`` (simulated seconds per wall second while volary paces: before lock-step and
    without it; 0 = unpaced, the boot phase then runs at real time) and
    ``connect_timeout_s`` (how long to wait for PX4 to connect)."""

    rate_hz: _HZ = 250.0
    physics_hz: _HZ = 1000.0
    port: Annotated[int, Field(ge=0, le=65_535, strict=True)] = 4560
    boot_us: Annotated[int, Field(ge=1, le=2**40, strict=True)] = 1_000_000
    gps_hz: _HZ = 10.0
    mag_hz: _HZ = 100.0
    baro_hz: _HZ = 50.0
    eph_m: Annotated[float, Field(gt=0, le=600, strict=True, allow_inf_nan=False)] = 0.3
    epv_m: Annotated[float, Field(gt=0, le=600, strict=True, allow_inf_nan=False)] = 0.4
    satellites: Annotated[int, Field(ge=0, le=254, strict=True)] = 10
    motor_range: Literal["unit", "symmetric"] = "unit"
    speed: Annotated[float, Field(ge=0, le=1000, strict=True, allow_inf_nan=False)] = 1.0
    connect_timeout_s: Annotated[float, Field(gt=0, le=86_400, strict=True)] = 300.0


class _Stop(Exception):
    """Ends a run: the reason is the message (an event, not an error)."""


def _mavlink() -> Any:
    try:
        from pymavlink.dialects.v20 import common
    except ImportError:
        raise MissingDependencyError("pymavlink", "fc") from None
    return common


def _i16(v: float) -> int:
    return int(max(-32768, min(32767, round(v))))


def _every(rate_hz: float, hz: float) -> int:
    return max(1, round(rate_hz / hz))


class Px4Link:
    """The simulator side of PX4's simulator MAVLink API for one volary vehicle.

    Binds its TCP server when made (``port`` 0 picks a free one: see :attr:`port`); ``run``
    waits for PX4 to connect and flies until ``duration`` simulated seconds (None: until PX4
    goes), the connection closes, PX4 stalls or Ctrl-C, and returns a :class:`Report`."""

    def __init__(
        self, platform: str = "research_quad_1kg", config: Px4Config | dict | None = None
    ) -> None:
        self.config = cfg = (
            config
            if isinstance(config, Px4Config)
            else validated(Px4Config, config or {}, "px4 link", error=ConfigError)
        )
        self.mav_module = _mavlink()
        self.vehicle = NedVehicle(platform, cfg, "PX4")
        self.mav = self.mav_module.MAVLink(None, srcSystem=SYSTEM_ID, srcComponent=COMPONENT_ID)
        self.mav.robust_parsing = True
        try:
            self.server = socket.create_server((cfg.bind, cfg.port), backlog=1)
        except OSError as e:
            raise ConfigError(
                f"--port: cannot listen on {cfg.bind}:{cfg.port} ({e.strerror or e})"
            ) from None
        self.port = self.server.getsockname()[1]
        self.controls = np.zeros(16)
        self.armed = False
        self.lockstep: bool | None = None
        self.counts = {"sensor_msgs": 0, "actuator_msgs": 0, "other_msgs": 0, "bad_data": 0}
        self._gps_every = _every(cfg.rate_hz, cfg.gps_hz)
        self._mag_every = _every(cfg.rate_hz, cfg.mag_hz)
        self._baro_every = _every(cfg.rate_hz, cfg.baro_hz)

    # ---- messages --------------------------------------------------------------------------
    def time_usec(self, r: NedReading) -> int:
        """PX4's clock for a reading: ``boot_us`` + the simulated time, in microseconds."""
        return self.config.boot_us + int(round(r.t * 1e6))

    def sensor_messages(self, r: NedReading, step: int) -> list[Any]:
        """The messages of one exchange: HIL_SENSOR, HIL_STATE_QUATERNION and, every
        ``rate_hz / gps_hz`` exchanges, HIL_GPS."""
        cfg, mav = self.config, self.mav
        us = self.time_usec(r)
        fields = IMU_FIELDS
        if step % self._mag_every == 0:
            fields |= MAG_FIELDS
        if step % self._baro_every == 0:
            fields |= BARO_FIELDS
        out = [
            mav.hil_sensor_encode(
                us,
                *(float(v) for v in r.accel),
                *(float(v) for v in r.gyro),
                *(float(v) for v in r.mag),
                r.pressure,
                0.0,
                r.alt,
                r.temperature,
                fields,
                0,
            ),  # fmt: skip
            mav.hil_state_quaternion_encode(
                us,
                [float(v) for v in r.quat],
                *(float(v) for v in r.rates),
                int(round(r.lat * 1e7)),
                int(round(r.lon * 1e7)),
                int(round(r.alt * 1000)),
                *(_i16(v * 100) for v in r.vel),
                0,
                0,
                *(_i16(v * 1000 / 9.81) for v in r.specific_force),
            ),
        ]
        if step % self._gps_every == 0:
            vn, ve, vd = (float(v) for v in r.vel)
            ground = math.hypot(vn, ve)
            cog = UNKNOWN_U16
            if round(ground * 100) > 0:
                cog = int(round(math.degrees(math.atan2(ve, vn)) * 100)) % 36000
            out.append(
                mav.hil_gps_encode(
                    us,
                    3,
                    int(round(r.lat * 1e7)),
                    int(round(r.lon * 1e7)),
                    int(round(r.alt * 1000)),
                    int(round(cfg.eph_m * 100)),
                    int(round(cfg.epv_m * 100)),
                    min(UNKNOWN_U16 - 1, int(round(ground * 100))),
                    _i16(vn * 100),
                    _i16(ve * 100),
                    _i16(vd * 100),
                    cog,
                    cfg.satellites,
                    0,
                    0,
                )  # fmt: skip
            )
        return out

    def motor_outputs(self) -> np.ndarray:
        """The latest motor outputs as 0..1 commands (``motor_range`` applied)."""
        c = self.controls
        return (c + 1.0) / 2.0 if self.config.motor_range == "symmetric" else c.copy()

    # ---- the run -----------------------------------------------------------------------------
    def run(
        self,
        duration: float | None = None,
        on_step: Callable[[NedReading], None] | None = None,
    ) -> Report:
        """Wait for PX4, then exchange sensors for actuators until ``duration`` simulated
        seconds (None: until PX4 disconnects), a stall, or Ctrl-C. ``on_step`` sees each
        reading before it is sent."""
        report = Report("px4")
        t0 = time.monotonic()
        try:
            conn = self._accept(report)
            if conn is not None:
                with conn:
                    self._loop(conn, duration, on_step, report)
        except KeyboardInterrupt:
            report.stopped = "interrupted"
        report.wall_s = time.monotonic() - t0
        report.sim_s = self.vehicle.t
        report.lockstep = self.lockstep
        return report

    def _accept(self, report: Report) -> socket.socket | None:
        self.server.settimeout(self.config.connect_timeout_s)
        try:
            conn, peer = self.server.accept()
        except TimeoutError:
            report.stopped = (
                f"no PX4 connected to {self.config.bind}:{self.port} within "
                f"{self.config.connect_timeout_s:g} s"
            )
            return None
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        report.events.append(f"PX4 connected from {peer[0]}:{peer[1]}")
        report.counts = self.counts
        return conn

    def _loop(
        self,
        conn: socket.socket,
        duration: float | None,
        on_step: Callable[[NedReading], None] | None,
        report: Report,
    ) -> None:
        v = self.vehicle
        next_tick = time.monotonic()
        try:
            while True:
                r = v.reading()
                if on_step is not None:
                    on_step(r)
                self._send(conn, self.sensor_messages(r, v.steps))
                if duration is not None and v.t >= duration - 1e-9:
                    report.stopped = "duration reached"
                    return
                if self.lockstep:
                    deadline = time.monotonic() + self.config.timeout_s
                    if not self._receive(conn, deadline, report, want_actuators=True):
                        raise _Stop(
                            f"PX4 stalled: no HIL_ACTUATOR_CONTROLS for the sensors at "
                            f"t={v.t:.4f} s within {self.config.timeout_s:g} s"
                        )
                else:
                    speed = self.config.speed or (1.0 if self.lockstep is None else 0.0)
                    next_tick = (next_tick + v.dt / speed) if speed > 0 else time.monotonic()
                    next_tick = max(next_tick, time.monotonic() - 1.0)  # no catch-up burst
                    self._receive(conn, next_tick, report, want_actuators=self.lockstep is None)
                v.step(self.motor_outputs(), self.armed)
                report.exchanges += 1
        except _Stop as stop:
            report.stopped = str(stop)
            report.events.append(str(stop))

    def _send(self, conn: socket.socket, msgs: list[Any]) -> None:
        data = b"".join(m.pack(self.mav) for m in msgs)
        try:
            conn.sendall(data)
        except OSError as e:
            raise _Stop(self._gone(f"sending failed ({e.strerror or e})")) from None
        self.counts["sensor_msgs"] += len(msgs)

    def _gone(self, how: str) -> str:
        return f"PX4 closed the connection at t={self.vehicle.t:.4f} s: {how}"

    def _receive(
        self, conn: socket.socket, deadline: float, report: Report, want_actuators: bool
    ) -> bool:
        """Read and handle PX4's messages until ``deadline`` (monotonic s); with
        ``want_actuators`` return as soon as one HIL_ACTUATOR_CONTROLS was handled. True when
        one was."""
        got = False
        while True:
            wait = deadline - time.monotonic()
            if wait <= 0:
                ready, _, _ = select.select([conn], [], [], 0)
                if not ready:
                    return got
            else:
                ready, _, _ = select.select([conn], [], [], wait)
                if not ready:
                    return got
            try:
                data = conn.recv(65536)
            except OSError as e:
                raise _Stop(self._gone(f"receiving failed ({e.strerror or e})")) from None
            if not data:
                raise _Stop(self._gone("end of stream"))
            for msg in self.mav.parse_buffer(data) or []:
                if self._handle(msg, report):
                    got = True
            if got and want_actuators:
                return True

    def _handle(self, msg: Any, report: Report) -> bool:
        kind = msg.get_type()
        if kind == "BAD_DATA":
            self.counts["bad_data"] += 1
            if self.counts["bad_data"] == 1:
                report.events.append(f"garbage on the MAVLink stream at t={self.vehicle.t:.4f} s")
            return False
        if kind != "HIL_ACTUATOR_CONTROLS":
            self.counts["other_msgs"] += 1
            return False
        self.counts["actuator_msgs"] += 1
        controls = np.asarray(msg.controls, dtype=np.float64)
        self.controls = np.where(np.isfinite(controls), controls, 0.0)
        armed = bool(msg.mode & ARMED)
        if armed != self.armed:
            report.events.append(
                f"PX4 {'armed' if armed else 'disarmed'} at t={self.vehicle.t:.4f} s"
            )
        self.armed = armed
        lockstep = bool(msg.flags & LOCKSTEP)
        if lockstep != self.lockstep:
            report.events.append(
                f"PX4 lock-step {'on' if lockstep else 'off'} at t={self.vehicle.t:.4f} s"
            )
        self.lockstep = lockstep
        return True

    def close(self) -> None:
        """Stop listening."""
        self.server.close()

    def __enter__(self) -> Px4Link:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
