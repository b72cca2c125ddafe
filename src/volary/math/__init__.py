"""Layer 0 math: quaternions and SO(3) helpers, integrators. Written for any leading batch dims."""

from volary.math import random
from volary.math.integrators import Integrator, euler_step, integrate, rk4_step
from volary.math.quaternion import (
    hat,
    quat_conj,
    quat_from_axis_angle,
    quat_from_euler,
    quat_from_rotmat,
    quat_identity,
    quat_integrate,
    quat_mul,
    quat_normalize,
    quat_rotate,
    quat_rotate_inverse,
    quat_to_euler,
    quat_to_rotmat,
    vee,
    wxyz_to_xyzw,
    xyzw_to_wxyz,
)

__all__ = [
    "random",
    "Integrator",
    "euler_step",
    "integrate",
    "rk4_step",
    "hat",
    "quat_conj",
    "quat_from_axis_angle",
    "quat_from_euler",
    "quat_from_rotmat",
    "quat_identity",
    "quat_integrate",
    "quat_mul",
    "quat_normalize",
    "quat_rotate",
    "quat_rotate_inverse",
    "quat_to_euler",
    "quat_to_rotmat",
    "vee",
    "wxyz_to_xyzw",
    "xyzw_to_wxyz",
]
