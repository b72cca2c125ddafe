"""FLYINGTRUST kinodynamic indicators P = [TWR_max, alpha_xy_max, alpha_z_max] for any airframe.

FLYINGTRUST (paper 004, Sec. III-A) defines them for quadrotors only: eq. 1-2 (thrust-to-weight),
eq. 3-5 (control torques of the "plus" and "cross" layouts), eq. 6-9 (alpha = J^-1 tau) and
eq. 10-11 (the roll acceleration alpha_x stands for the horizontal metric alpha_xy).

The generalisation used here: each rotor thrust T_i may take any value in [T_min_i, T_max_i]
(T = k_f w|w|, eq. 1), so the largest angular acceleration about body axis k is

    alpha_k,max = max_T [J^-1 M T]_k = sum_i max(c_ki T_max_i, c_ki T_min_i),  C = J^-1 M,

with M the (3, R) moment rows of :meth:`Airframe.allocation_matrix`. For a quadrotor with
T_min = 0 and diagonal J this is exactly eq. 4-5 with eq. 9: the rotors on the positive side
of the axis at full speed and those on the negative side stopped, i.e. d c_T w_max^2 / J_xx
for "plus" and 2 (sqrt(2)/2) d c_T w_max^2 / J_xx for "cross" (both rotors of the pushing side
count), and 2 c_M w_max^2 / J_zz about z.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from volary.dynamics import GRAVITY, Airframe

__all__ = ["Indicators", "indicators", "rotor_thrust_limits", "max_angular_acceleration"]


@dataclass(frozen=True)
class Indicators:
    """FLYINGTRUST kinodynamic profile (eq. 11)."""

    twr_max: float  # 1, largest collective thrust over weight (eq. 2)
    alpha_xy_max: float  # rad/s^2, largest roll acceleration alpha_x,max (eq. 9, Sec. III-A)
    alpha_z_max: float  # rad/s^2, largest yaw acceleration (eq. 9)

    def as_tuple(self) -> tuple[float, float, float]:
        return (self.twr_max, self.alpha_xy_max, self.alpha_z_max)


def rotor_thrust_limits(airframe: Airframe) -> tuple[np.ndarray, np.ndarray]:
    """Per-rotor thrust range (T_min, T_max) in N, T = k_f w|w| (FLYINGTRUST eq. 1)."""
    k_f = np.asarray(airframe.k_f)
    w_lo, w_hi = np.asarray(airframe.min_rotor_speed), np.asarray(airframe.max_rotor_speed)
    return k_f * w_lo * np.abs(w_lo), k_f * w_hi * np.abs(w_hi)


def thrust_to_weight(airframe: Airframe) -> float:
    """TWR_max = T_max / (m g), T_max the body-z thrust with every rotor at full speed (eq. 2)."""
    return airframe.max_thrust / (airframe.mass * GRAVITY)


def max_angular_acceleration(airframe: Airframe) -> np.ndarray:
    """(3,) largest body angular acceleration about x, y, z (rad/s^2), each axis on its own.

    alpha_k = sum_i max(c_ki T_max_i, c_ki T_min_i) with C = J^-1 M (eq. 4-5 and 9 generalised
    to any geometry and non-diagonal inertia; gyroscopic terms are zero at rest).
    """
    moments = airframe.allocation_matrix()[3:]  # (3, R) N m per N of rotor thrust
    c = np.linalg.solve(np.asarray(airframe.inertia), moments)
    t_min, t_max = rotor_thrust_limits(airframe)
    return np.maximum(c * t_max, c * t_min).sum(axis=1)


def indicators(airframe: Airframe) -> Indicators:
    """FLYINGTRUST indicators of ``airframe`` (eq. 2, 9 and 11; alpha_xy is roll, Sec. III-A)."""
    alpha = max_angular_acceleration(airframe)
    return Indicators(
        twr_max=thrust_to_weight(airframe),
        alpha_xy_max=float(alpha[0]),
        alpha_z_max=float(alpha[2]),
    )
