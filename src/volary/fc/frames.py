"""volary's state in Betaflight SITL's packets: the one place frames, units and orders change.

volary: world z-up (x east, y north), body FLU, quaternion [w, x, y, z] body-to-world, SI.
Betaflight 4.6.0 SITL (``src/platform/SIMULATOR/sitl.c``, ``target/SITL/target.h``), as its
code reads the ``fdm_packet`` (little-endian float64 throughout, 144 bytes):

- ``timestamp`` s;
- ``imu_angular_velocity_rpy`` rad/s in FRD body axes: the firmware keeps x and negates y and
  z, so its gyro axes are FLU (``GYRO_SCALE`` 16.4 LSB per deg/s);
- ``imu_linear_acceleration_xyz``: the firmware negates all three axes and scales
  ``256 / 9.80665`` per m/s^2, and expects +1 g on its z axis at rest; its axes are the gyro's
  (FLU), so the packet carries the *negated* FLU specific force;
- ``imu_orientation_quat`` [w, x, y, z]: the firmware's ``imuSetAttitudeQuat`` reads roll
  ``atan2(R21, R22)`` and pitch ``asin(-R20)`` of it and its angle loop wants pitch positive
  nose-up (flown: volary's own quaternion as is pitched the vehicle up without bound), so the
  packet carries FRD body to a world turned 180 deg about east (east, south, down):
  ``[w, x, -y, -z]`` of volary's. Its heading (``-atan2(R10, R00)``) is then volary's yaw about
  z up; the heading is not used in acro or angle mode and was not checked further;
- ``velocity_xyz`` (east, north, up) m/s and ``position_xyz`` (longitude deg, latitude deg,
  altitude m): the virtual GPS reading (``USE_VIRTUAL_GPS``);
- ``pressure`` Pa (virtual barometer).

Motor packet (``servo_packet``, 16 bytes): four float32, 0..1 (``(pulse - idle) / 1000``), in
the order of ArduPilot's quad-X (front-right, rear-left, front-left, rear-right): the firmware
writes its motor 2, 3, 4, 1 there. RC packet (``rc_packet``, 40 bytes): float64 timestamp and
16 uint16 channels in microseconds (AETR then AUX1..).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from volary.errors import ConfigError

FDM = struct.Struct("<18d")  # fdm_packet
MOTORS = struct.Struct("<4f")  # servo_packet
RC = struct.Struct("<d16H")  # rc_packet
ACK = struct.Struct("<4sd")  # volary's lock-step acknowledgement (lockstep.c)
EARTH_RADIUS = 6_378_137.0  # m, WGS-84 equatorial
SEA_LEVEL_PA = 101_325.0
# The packet's four motors sit on a quad-X as PX4 numbers its motors 1-4 (front-right,
# rear-left, front-left, rear-right: Betaflight motors 2, 3, 4, 1), and Betaflight's props-in
# spin (yaw_motors_reversed off) is PX4's: ned.QUAD_X_CORNERS and ned.QUAD_X_SPIN serve both.


def pressure_at(altitude_m: float) -> float:
    """ISA barometric pressure (Pa) at an altitude above sea level (troposphere)."""
    return SEA_LEVEL_PA * (1.0 - 2.25577e-5 * altitude_m) ** 5.25588


def fdm_packet(
    t: float,
    gyro_flu: Sequence[float] | np.ndarray[Any, Any],
    specific_force_flu: Sequence[float] | np.ndarray[Any, Any],
    quat_wxyz: Sequence[float] | np.ndarray[Any, Any],
    vel_enu: Sequence[float] | np.ndarray[Any, Any],
    pos_enu: Sequence[float] | np.ndarray[Any, Any],
    home: tuple[float, float, float] = (47.3977, 8.5456, 488.0),
) -> bytes:
    """The state packet of one step: IMU readings in the body frame (FLU), attitude, world
    velocity and position (z up, x east) in volary's frames, as Betaflight SITL reads them.
    ``home`` is (latitude deg, longitude deg, altitude m) of the world origin."""
    lat0, lon0, alt0 = home
    x, y, z = (float(v) for v in pos_enu)
    lat = lat0 + math.degrees(y / EARTH_RADIUS)
    lon = lon0 + math.degrees(x / (EARTH_RADIUS * math.cos(math.radians(lat0))))
    gx, gy, gz = (float(v) for v in gyro_flu)
    fx, fy, fz = (float(v) for v in specific_force_flu)
    return FDM.pack(
        float(t),
        gx,
        -gy,
        -gz,
        -fx,
        -fy,
        -fz,
        float(quat_wxyz[0]),
        float(quat_wxyz[1]),
        -float(quat_wxyz[2]),
        -float(quat_wxyz[3]),
        *(float(v) for v in vel_enu),
        lon,
        lat,
        alt0 + z,
        pressure_at(alt0 + z),
    )


def motor_order(positions: Sequence[Sequence[float]], directions: Sequence[float]) -> list[int]:
    """For each of the motor packet's four values, the index of the platform's rotor at that
    corner of a quad-X (by the sign of its FLU position); the rotors' spin must be Betaflight's
    props-in quad-X (ConfigError otherwise, naming the rotor)."""
    if len(positions) != 4:
        raise ConfigError(f"platform: Betaflight's quad-X needs 4 rotors, got {len(positions)}")
    from volary.fc.ned import corner_order  # the same corners and spins as PX4's quad-X

    return list(corner_order(positions, directions, "Betaflight"))


def rc_packet(t: float, channels: Sequence[int]) -> bytes:
    """An RC packet: 16 channels in microseconds (missing ones 1000), clamped to 1000..2000."""
    ch = [min(2000, max(1000, int(c))) for c in channels][:16]
    return RC.pack(float(t), *(ch + [1000] * (16 - len(ch))))


NO_RC = struct.Struct("<4sd")  # "VLNR" + timestamp: this step's RC without a frame (lockstep.c)


def rc_no_pulses(t: float) -> bytes:
    """An RC packet with every channel at 0 us: what a receiver in its no-pulses failsafe
    outputs; Betaflight finds the flight channels invalid (below ``rx_min_usec``)."""
    return RC.pack(float(t), *([0] * 16))
