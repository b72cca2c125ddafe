"""Where volary's frames meet the NED firmwares (PX4, ArduPilot): the one conversion, and a
volary vehicle read and commanded in the firmware's frames and units.

volary (DESIGN.md, Conventions): world z up with x east and y north (ENU), body FLU (x forward,
y left, z up), quaternions [w, x, y, z] body-to-world, SI units. PX4's simulator messages and
ArduPilot's JSON backend use a world NED (x north, y east, z down) and a body FRD (x forward,
y right, z down); their quaternions are [w, x, y, z] FRD-to-NED.

- Vectors: :func:`enu_to_ned` (world: positions, velocities, accelerations, the magnetic field)
  and :func:`flu_to_frd` (body: angular rates, specific force, a body-frame field); each is its
  own inverse, the ``*_from_*`` names are there so a call says which way it goes.
- Attitude: :func:`quat_to_ned` / :func:`quat_from_ned`. R_ned_frd = R_ne R_enu_flu R_lf with
  R_ne the swap of x and y with z negated (a half turn about (1, 1, 0)/sqrt 2) and R_lf =
  diag(1, -1, -1) (a half turn about x); in components
  q_ned = (w + z, x + y, x - y, w - z) / sqrt 2.
  A level vehicle with its nose along volary's +x (east) has NED yaw +90 deg.
- Every function takes numpy arrays or torch tensors with any leading batch dims (``(..., 3)``,
  ``(..., 4)``) and returns the same kind, dtype and device.
- Geodesy: :func:`ned_to_geodetic` (latitude, longitude, altitude of a NED offset from a
  :class:`Home`; locally flat, WGS-84 equatorial radius: within 1 mm of an ellipsoidal answer
  over a few hundred metres, well under GPS noise over kilometres), the ISA barometer
  (:func:`pressure_hpa`, :func:`temperature_c`), and the Earth's field at the home point.
- :class:`NedVehicle`: one volary ``Simulator`` vehicle (rotor-speed commands, volary's IMU
  model) whose readings come out in NED/FRD and whose rotors take the firmware's motor outputs
  (0..1, in the firmware's motor order, :func:`quad_x_order`).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import numpy as np
from pydantic import Field, field_validator, model_validator

from volary.errors import ConfigError
from volary.inputs import Finite, Strict, Text, Vec3

G = 9.81  # m/s^2, volary's gravity (DESIGN.md)
EARTH_RADIUS = 6_378_137.0  # m, WGS-84 equatorial
_H = math.sqrt(0.5)
# ISA troposphere: sea-level pressure (Pa), temperature (K), lapse rate (K/m), g M / (R L).
_P0, _T0, _LAPSE, _EXP = 101_325.0, 288.15, 0.0065, 5.25588


# ----------------------------------------------------------------------------- vectors
def _is_torch(v: Any) -> bool:
    return type(v).__module__.startswith("torch")


def _stack(parts: Sequence[Any], like: Any) -> Any:
    if not _is_torch(like):
        return np.stack(parts, axis=-1)
    import torch

    return torch.stack(tuple(parts), dim=-1)


def _arr(v: Any) -> Any:
    if isinstance(v, np.ndarray) or _is_torch(v):
        return v
    return np.asarray(v, dtype=np.float64)


def enu_to_ned(v: Any) -> Any:
    """World vector(s) (..., 3) from volary's ENU (x east, y north, z up) to NED."""
    v = _arr(v)
    return _stack((v[..., 1], v[..., 0], -v[..., 2]), v)


ned_to_enu = enu_to_ned  # the swap is its own inverse


def flu_to_frd(v: Any) -> Any:
    """Body vector(s) (..., 3) from volary's FLU (forward, left, up) to FRD."""
    v = _arr(v)
    return _stack((v[..., 0], -v[..., 1], -v[..., 2]), v)


frd_to_flu = flu_to_frd


def quat_to_ned(q: Any) -> Any:
    """volary attitude(s) [w, x, y, z] (FLU body to ENU world, ..., 4) as the FRD-to-NED
    quaternion(s) [w, x, y, z] of the same rotation of the vehicle."""
    q = _arr(q)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return _stack(((w + z) * _H, (x + y) * _H, (x - y) * _H, (w - z) * _H), q)


quat_from_ned = quat_to_ned  # the map is an involution (its matrix squares to the identity)


# ----------------------------------------------------------------------------- geodesy
@dataclass(frozen=True)
class Home:
    """The geodetic point of volary's world origin: latitude and longitude (deg, WGS-84),
    altitude (m above mean sea level). Default: PX4's default SITL home (Zurich)."""

    lat_deg: float = 47.397742
    lon_deg: float = 8.545594
    alt_m: float = 488.0


# The Earth's field at the default home (gauss, NED): WMM 2020 near Zurich, F 0.480 G,
# inclination 63.3 deg, declination 2.9 deg east; rounded. Another home needs its own field
# (``mag_ned``), or the firmware's own WMM table disagrees with the magnetometer.
MAG_NED_GAUSS = (0.2154, 0.0109, 0.4288)


def ned_to_geodetic(pos_ned: Any, home: Home) -> tuple[Any, Any, Any]:
    """(latitude deg, longitude deg, altitude m AMSL) of NED offset(s) (..., 3) from ``home``."""
    p = _arr(pos_ned)
    lat = home.lat_deg + np.degrees(1.0) * p[..., 0] / EARTH_RADIUS
    lon = home.lon_deg + np.degrees(1.0) * p[..., 1] / (
        EARTH_RADIUS * math.cos(math.radians(home.lat_deg))
    )
    return lat, lon, home.alt_m - p[..., 2]


def geodetic_to_ned(lat: Any, lon: Any, alt: Any, home: Home) -> Any:
    """The NED offset(s) from ``home`` of (latitude deg, longitude deg, altitude m AMSL)."""
    lat, lon, alt = _arr(lat), _arr(lon), _arr(alt)
    n = (lat - home.lat_deg) * EARTH_RADIUS / np.degrees(1.0)
    e = (lon - home.lon_deg) * EARTH_RADIUS * math.cos(math.radians(home.lat_deg)) / np.degrees(1.0)
    return _stack((n, e, home.alt_m - alt), n)


def pressure_hpa(alt_m: float) -> float:
    """ISA static pressure (hPa) at an altitude (m AMSL, troposphere)."""
    return _P0 * (1.0 - _LAPSE * alt_m / _T0) ** _EXP / 100.0


def temperature_c(alt_m: float) -> float:
    """ISA temperature (deg C) at an altitude (m AMSL, troposphere)."""
    return _T0 - _LAPSE * alt_m - 273.15


# ----------------------------------------------------------------------------- motors
# A quad-X as PX4 (airframe 4001) and ArduPilot (FRAME_CLASS 1, FRAME_TYPE 1) number it, as
# (forward, left) signs in FLU: motor 1 front-right, 2 rear-left, 3 front-left, 4 rear-right;
# 1 and 2 spin counter-clockwise seen from above, 3 and 4 clockwise (volary: +1 clockwise).
QUAD_X_CORNERS = ((1, -1), (-1, 1), (1, 1), (-1, -1))
QUAD_X_SPIN = (-1.0, -1.0, 1.0, 1.0)


def quad_x_order(
    positions: Sequence[Sequence[float]], directions: Sequence[float], firmware: str
) -> tuple[int, ...]:
    """For firmware motors 1..4 of a quad-X, the index of the platform's rotor at that corner;
    ConfigError (naming ``firmware``) when the platform is not a quad-X spinning that way."""
    if len(positions) != 4:
        raise ConfigError(
            f"--motor-map: {firmware}'s quad-X needs 4 rotors and the platform has "
            f"{len(positions)}; give the map of firmware outputs to rotors"
        )
    return corner_order(positions, directions, firmware)


def corner_order(
    positions: Sequence[Sequence[float]], directions: Sequence[float], firmware: str
) -> tuple[int, ...]:
    """The rotor at each quad-X corner of :data:`QUAD_X_CORNERS` (motor 1 front-right, 2
    rear-left, 3 front-left, 4 rear-right: PX4, ArduPilot and Betaflight's SITL motor packet
    alike), its spin checked against :data:`QUAD_X_SPIN`; ConfigError naming the rotor."""
    order = []
    for k, (fwd, left) in enumerate(QUAD_X_CORNERS):
        hits = [i for i, p in enumerate(positions) if p[0] * fwd > 0 and p[1] * left > 0]
        if len(hits) != 1:
            raise ConfigError(
                f"platform.rotor_positions: expected one rotor in each quad-X corner, found "
                f"{len(hits)} at (forward {fwd:+d}, left {left:+d})"
            )
        i = hits[0]
        if float(directions[i]) != QUAD_X_SPIN[k]:
            raise ConfigError(
                f"platform.rotor_directions.{i}: expected {QUAD_X_SPIN[k]:+.0f} for {firmware}'s "
                f"quad-X motor {k + 1}, got {float(directions[i]):+.0f}"
            )
        order.append(i)
    return tuple(order)


@dataclass
class Report:
    """How a firmware run went: ``stopped`` says why it ended; ``events`` what happened on the
    way (lock-step on or off, a restart, garbage, the firmware gone); counts and times."""

    firmware: str
    stopped: str = ""
    exchanges: int = 0
    sim_s: float = 0.0
    wall_s: float = 0.0
    lockstep: bool | None = None
    events: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        """One summary line, e.g. ``volary-fc px4 stopped: duration reached exchanges=...``."""
        counts = " ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
        return (
            f"volary-fc {self.firmware} stopped: {self.stopped} exchanges={self.exchanges} "
            f"sim_s={self.sim_s:.4f} wall_s={self.wall_s:.3f} lockstep={self.lockstep} {counts}"
        ).rstrip()


# ----------------------------------------------------------------------------- config
_RATE = Annotated[float, Field(gt=0, le=10_000, allow_inf_nan=False, strict=True)]
_PORT = Annotated[int, Field(ge=0, le=65_535, strict=True)]


class VehicleConfig(Strict):
    """What shapes the vehicle a firmware flies (checked once, when the link is made).

    ``rate_hz``: sensor/actuator exchanges per simulated second (the IMU's output rate);
    ``physics_hz``: a whole multiple of it; ``imu``: a volary IMU preset (noise, bias);
    ``home``: (latitude deg, longitude deg, altitude m AMSL) of the world origin; ``mag_ned``:
    the Earth's field there (gauss, NED); ``spawn``: the vehicle's start position (m, volary's
    world, z up; on the ground at z = 0); ``spawn_yaw``: its heading (rad about z up, 0 = nose
    east); ``motor_map``: rotor index (platform order) driven by firmware output 1, 2, ...
    (default: the quad-X of :func:`quad_x_order`); ``timeout_s``: wall time to wait for the
    firmware before the run ends with a reported event."""

    rate_hz: _RATE = 400.0
    physics_hz: _RATE = 1200.0
    imu: Text = "bmi085"
    seed: Annotated[int, Field(ge=0, le=2**32 - 1, strict=True)] = 0
    home: tuple[
        Annotated[float, Field(ge=-90, le=90, strict=True, allow_inf_nan=False)],
        Annotated[float, Field(ge=-180, le=180, strict=True, allow_inf_nan=False)],
        Annotated[float, Field(ge=-500, le=10_000, strict=True, allow_inf_nan=False)],
    ] = (47.397742, 8.545594, 488.0)
    mag_ned: tuple[Finite, Finite, Finite] = MAG_NED_GAUSS
    spawn: Vec3 = (0.0, 0.0, 0.0)
    spawn_yaw: Annotated[float, Field(ge=-1e3, le=1e3, strict=True, allow_inf_nan=False)] = 0.0
    motor_map: tuple[Annotated[int, Field(ge=0, le=63, strict=True)], ...] | None = None
    timeout_s: Annotated[float, Field(gt=0, le=3600, strict=True, allow_inf_nan=False)] = 10.0
    bind: Text = "127.0.0.1"
    port: _PORT = 0

    @field_validator("bind")
    @classmethod
    def _ip(cls, v: str) -> str:
        try:
            ipaddress.ip_address(v)
        except ValueError:
            raise ValueError("expected an IP address such as 127.0.0.1") from None
        return v

    @model_validator(mode="after")
    def _rates(self) -> VehicleConfig:
        if self.rate_hz is None or self.physics_hz is None:  # set later (from the firmware)
            return self
        ratio = self.physics_hz / self.rate_hz
        if abs(ratio - round(ratio)) > 1e-9 or round(ratio) < 1:
            raise ValueError(
                f"physics_hz: expected a whole multiple of rate_hz ({self.rate_hz:g} Hz), "
                f"got {self.physics_hz:g}"
            )
        return self

    @property
    def home_point(self) -> Home:
        return Home(*self.home)


def _rpy_quat(yaw: float) -> list[float]:
    return [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]


# ----------------------------------------------------------------------------- the vehicle
@dataclass(frozen=True)
class NedReading:
    """One state of the vehicle as a NED firmware reads it (float64 numpy, SI, unless named).

    ``t`` s; ``pos`` m and ``vel`` m/s NED from the world origin; ``quat`` [w, x, y, z]
    FRD-to-NED; ``gyro`` rad/s and ``accel`` m/s^2 (specific force) FRD from volary's IMU
    model (noise, bias); ``rates`` and ``specific_force``: the same without the IMU's errors;
    ``lat``, ``lon`` deg, ``alt`` m AMSL; ``mag`` gauss FRD; ``pressure`` hPa; ``temperature``
    deg C (ISA at the vehicle's altitude)."""

    t: float
    pos: np.ndarray
    vel: np.ndarray
    quat: np.ndarray
    gyro: np.ndarray
    accel: np.ndarray
    rates: np.ndarray
    specific_force: np.ndarray
    lat: float
    lon: float
    alt: float
    mag: np.ndarray
    pressure: float
    temperature: float


class NedVehicle:
    """One volary vehicle flown by a NED firmware's motor outputs.

    ``step(u, armed)`` holds the motor outputs ``u`` (0..1, firmware output order) for one
    exchange period: output k drives rotor ``order[k]`` at ``w_min + u (w_max - w_min)``
    (the platform's rotor speed range; the motors' lag is the platform's); a disarmed firmware
    stops the rotors. ``reading()`` is the state the firmware is sent."""

    def __init__(self, platform: str, config: VehicleConfig, firmware: str) -> None:
        import torch

        from volary.platforms import get
        from volary.sensors.imu import imu_config
        from volary.sim import SimConfig, Simulator

        self.config = cfg = config
        self.firmware = firmware
        airframe = get(platform)
        if cfg.motor_map is None:
            self.order = quad_x_order(airframe.rotor_positions, airframe.rotor_directions, firmware)
        else:
            self.order = _checked_map(cfg.motor_map, airframe.n_rotors)
        self.w_min = np.asarray(airframe.min_rotor_speed, dtype=np.float64)
        self.w_max = np.asarray(airframe.max_rotor_speed, dtype=np.float64)
        imu = dataclasses.replace(imu_config(cfg.imu), rate_hz=cfg.rate_hz)
        self.sim = Simulator(
            airframe,
            SimConfig(
                physics_hz=cfg.physics_hz,
                control_hz=cfg.rate_hz,
                control="rotor_speeds",
                dtype=torch.float64,
                imu=imu,
                seed=cfg.seed,
            ),
        )
        self.dt = 1.0 / cfg.rate_hz
        self.home = cfg.home_point
        self.mag_ned = np.asarray(cfg.mag_ned, dtype=np.float64)
        self.n_rotors = airframe.n_rotors
        self.reset()
        self.step(np.zeros(len(self.order)), armed=False)  # load the compiled step now, not
        self.reset()  # in the firmware's first exchange

    def reset(self) -> None:
        """The vehicle at rest at the configured spawn point and heading, time 0."""
        cfg = self.config
        self.place(cfg.spawn, _rpy_quat(cfg.spawn_yaw))
        self.t = 0.0
        self.steps = 0
        self._truth_accel = np.zeros(3)  # world ENU acceleration over the last step
        self.rotor_cmd = np.zeros(self.n_rotors)

    def place(
        self,
        pos: Sequence[float],
        quat: Sequence[float],
        rotor_speed: Sequence[float] | None = None,
    ) -> None:
        """Put the vehicle at rest at ``pos`` (m, volary's world) with attitude ``quat``
        ([w, x, y, z], volary's) and its rotors at ``rotor_speed`` (rad/s; default stopped),
        without changing the time: a script's or a test's set-up."""
        import torch

        self.sim.reset(
            pos=torch.tensor([list(pos)], dtype=torch.float64),
            quat=torch.tensor([list(quat)], dtype=torch.float64),
        )
        speed = np.zeros(self.n_rotors) if rotor_speed is None else np.asarray(rotor_speed)
        state = self.sim.state
        self.sim.state = state.replace(
            rotor_speed=torch.tensor(speed[None, :], dtype=state.rotor_speed.dtype)
        )
        self._truth_accel = np.zeros(3)
        self.steps = 0

    def rotor_speeds(self, u: Sequence[float], armed: bool) -> np.ndarray:
        """Rotor speed commands (rad/s, platform order) of firmware motor outputs ``u``."""
        cmd = np.zeros(self.n_rotors)
        if not armed:
            return cmd
        vals = np.clip(np.nan_to_num(np.asarray(u, dtype=np.float64), nan=0.0), 0.0, 1.0)
        for k, rotor in enumerate(self.order):
            if k < vals.size:
                cmd[rotor] = self.w_min[rotor] + vals[k] * (self.w_max[rotor] - self.w_min[rotor])
        return cmd

    def step(self, u: Sequence[float], armed: bool) -> None:
        """Advance one exchange period with motor outputs ``u`` held."""
        import torch

        cmd = self.rotor_speeds(u, armed)
        prev = self.sim.state.vel[0].numpy().copy()
        self.sim.step(torch.tensor(cmd[None, :]))
        self._truth_accel = (self.sim.state.vel[0].numpy() - prev) / self.dt
        self.rotor_cmd = cmd
        self.t += self.dt
        self.steps += 1

    def reading(self) -> NedReading:
        """The current state in the firmware's frames and units."""
        s = self.sim.state
        q = s.quat[0].numpy().astype(np.float64)
        omega = s.omega[0].numpy().astype(np.float64)
        f_flu = _specific_force(q, self._truth_accel)
        imu = self.sim.imu_reading
        if imu is None or self.steps == 0:  # no IMU sample since the reset: the truth at rest
            gyro, accel = omega, f_flu
        else:
            gyro, accel = imu.gyro[0].numpy(), imu.accel[0].numpy()
        pos = enu_to_ned(s.pos[0].numpy().astype(np.float64))
        lat, lon, alt = ned_to_geodetic(pos, self.home)
        q_ned = quat_to_ned(q)
        mag = _rotate_inverse(q_ned, self.mag_ned)
        return NedReading(
            t=self.t,
            pos=pos,
            vel=enu_to_ned(s.vel[0].numpy().astype(np.float64)),
            quat=q_ned,
            gyro=flu_to_frd(np.asarray(gyro, dtype=np.float64)),
            accel=flu_to_frd(np.asarray(accel, dtype=np.float64)),
            rates=flu_to_frd(omega),
            specific_force=flu_to_frd(f_flu),
            lat=float(lat),
            lon=float(lon),
            alt=float(alt),
            mag=mag,
            pressure=pressure_hpa(float(alt)),
            temperature=temperature_c(float(alt)),
        )


def _checked_map(motor_map: Sequence[int], n_rotors: int) -> tuple[int, ...]:
    bad = [i for i in motor_map if i >= n_rotors]
    if bad or len(set(motor_map)) != len(motor_map) or not motor_map:
        raise ConfigError(
            f"--motor-map: expected distinct rotor indices in [0, {n_rotors - 1}], got "
            f"{','.join(str(i) for i in motor_map) or 'nothing'}"
        )
    return tuple(motor_map)


def _rotmat(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip


def _rotate_inverse(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    return _rotmat(q).T @ v


def _specific_force(q_flu_enu: np.ndarray, accel_enu: np.ndarray) -> np.ndarray:
    """R^T (a - g) in FLU: what an ideal accelerometer reads (g = (0, 0, -9.81) ENU)."""
    return _rotate_inverse(q_flu_enu, accel_enu - np.array([0.0, 0.0, -G]))
