"""The built-in control laws as numba functions of one env: the fused closed loop's controller.

Every mode of :class:`volary.control.controller.MultirotorController` for the rigid-body model,
equation for equation (the torch code is the reference; ``tests/test_fused.py`` checks parity):
Lee geometric control with the Mellinger feed-forward (:mod:`volary.control.geometric`, Aerial
Gym III-C, Lee eqs. 10-15, Mellinger & Kumar 2011 Sec. III), the FlightGoggles acro loop
(:mod:`volary.control.rate`, paper 001 IV-F) and allocation with yaw-first saturation
(:mod:`volary.dynamics.allocation`, Aerial Gym eqs. 6-7). Vectors are float64 tuples, matrices
row-major 9-tuples; nothing allocates.

The controller buffer ``c`` is (K_c, N), structure of arrays (:func:`controller_rows`): the
allocation pseudo-inverse, the collective thrust limit, the fully-actuated flag, then the gains.
Importing this module imports numba (the fused loop imports it on first use).
"""

from __future__ import annotations

import math

import numpy as np

from volary.dynamics import numba_kernels
from volary.dynamics.models import GRAVITY
from volary.dynamics.numba_kernels import P_J, P_KF, P_MASS, jit
from volary.numba_cache import guard

NUMBA_SOURCES = guard(__file__, numba_kernels)

# Mode codes (ControlMode order).
ROTOR_SPEEDS, ROTOR_THRUSTS, WRENCH, CTBR, ATTITUDE = 0, 1, 2, 3, 4
ACCELERATION, VELOCITY, POSITION, POSE, MELLINGER = 5, 6, 7, 8, 9
MODE_CODES = {
    "rotor_speeds": ROTOR_SPEEDS,
    "rotor_thrusts": ROTOR_THRUSTS,
    "wrench": WRENCH,
    "ctbr": CTBR,
    "attitude": ATTITUDE,
    "acceleration": ACCELERATION,
    "velocity": VELOCITY,
    "position": POSITION,
    "pose": POSE,
    "mellinger": MELLINGER,
}
# Gains, in this order after the 6R pseudo-inverse rows, max_thrust and the actuation flag.
GAIN_ROWS = (
    ("lpf_stiffness", 1),
    ("lpf_damping", 1),
    ("rate_p", 3),
    ("rate_i", 3),
    ("rate_d", 3),
    ("rate_i_bound", 3),
    ("k_R", 3),
    ("k_W", 3),
    ("k_x", 3),
    ("k_v", 3),
    ("k_v_vel", 3),
    ("max_tilt", 1),
)
_OFFSETS = {name: sum(w for _, w in GAIN_ROWS[:i]) for i, (name, _) in enumerate(GAIN_ROWS)}
N_GAIN_ROWS = sum(w for _, w in GAIN_ROWS)
_LS, _LD, _RP, _RI, _RD, _RB = (
    _OFFSETS[k]
    for k in ("lpf_stiffness", "lpf_damping", "rate_p", "rate_i", "rate_d", "rate_i_bound")
)
_KR, _KW, _KX, _KV, _KVV, _TILT = (
    _OFFSETS[k] for k in ("k_R", "k_W", "k_x", "k_v", "k_v_vel", "max_tilt")
)
_G = GRAVITY


def controller_rows(n_rotors: int) -> int:
    """Rows of the controller buffer for ``n_rotors`` rotors."""
    return 6 * n_rotors + 2 + N_GAIN_ROWS


# ---- small vector algebra ---------------------------------------------------------------------

f64 = np.float64  # numba's float() keeps float32 scalars float32


@jit
def _cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


@jit
def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@jit
def _unit(a):
    """a / max(|a|, 1e-9)."""
    s = max(math.sqrt(_dot(a, a)), 1e-9)
    return (a[0] / s, a[1] / s, a[2] / s)


@jit
def rotmat(qw, qx, qy, qz):
    """quaternion.quat_to_rotmat: body-to-world R, row-major."""
    return (
        1 - 2 * (qy * qy + qz * qz),
        2 * (qx * qy - qw * qz),
        2 * (qx * qz + qw * qy),
        2 * (qx * qy + qw * qz),
        1 - 2 * (qx * qx + qz * qz),
        2 * (qy * qz - qw * qx),
        2 * (qx * qz - qw * qy),
        2 * (qy * qz + qw * qx),
        1 - 2 * (qx * qx + qy * qy),
    )


@jit
def euler_rotmat(roll, pitch, yaw):
    """quaternion.quat_from_euler (Z-Y-X, R = Rz Ry Rx) followed by quat_to_rotmat."""
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    return rotmat(
        cr * cp * cy + sr * sp * sy,
        sr * cp * cy - cr * sp * sy,
        cr * sp * cy + sr * cp * sy,
        cr * cp * sy - sr * sp * cy,
    )


@jit
def _col(m, j):
    return (m[j], m[3 + j], m[6 + j])


@jit
def _mtv(m, v):
    """M^T v."""
    return (
        m[0] * v[0] + m[3] * v[1] + m[6] * v[2],
        m[1] * v[0] + m[4] * v[1] + m[7] * v[2],
        m[2] * v[0] + m[5] * v[1] + m[8] * v[2],
    )


@jit
def _mv(m, v):
    """M v."""
    return (
        m[0] * v[0] + m[1] * v[1] + m[2] * v[2],
        m[3] * v[0] + m[4] * v[1] + m[5] * v[2],
        m[6] * v[0] + m[7] * v[1] + m[8] * v[2],
    )


@jit
def _mtm(a, b, i, j):
    """(A^T B)_ij for row-major 3x3 A, B."""
    return a[i] * b[j] + a[3 + i] * b[3 + j] + a[6 + i] * b[6 + j]


@jit
def _inertia(p, n):
    return (
        f64(p[P_J, n]),
        f64(p[P_J + 1, n]),
        f64(p[P_J + 2, n]),
        f64(p[P_J + 3, n]),
        f64(p[P_J + 4, n]),
        f64(p[P_J + 5, n]),
        f64(p[P_J + 6, n]),
        f64(p[P_J + 7, n]),
        f64(p[P_J + 8, n]),
    )


@jit
def _g3(c, row, n):
    return (f64(c[row, n]), f64(c[row + 1, n]), f64(c[row + 2, n]))


# ---- allocation (dynamics.allocation) -----------------------------------------------------------


@jit
def allocate(p, c, n, r, w, cmd):
    """Rotor speeds for the body wrench w = [f; m] (Aerial Gym eq. 6-7): thrusts B^+ w with the
    yaw part scaled down first until every rotor fits, then k_f w|w| = T inverted; into cmd."""
    wmin0 = P_KF + 7 * r
    s = 1.0
    for j in range(r):
        kf = f64(p[P_KF + j, n])
        wl, wh = f64(p[wmin0 + j, n]), f64(p[wmin0 + r + j, n])
        lo, hi = kf * wl * abs(wl), kf * wh * abs(wh)
        base = 0.0
        for i in range(5):
            base += c[6 * j + i, n] * w[i]
        base = min(max(base, lo), hi)
        step = c[6 * j + 5, n] * w[5]
        room = hi - base if step > 0 else base - lo
        ratio = room / max(abs(step), 1e-12) if abs(step) > 1e-12 else 1.0
        s = min(s, min(max(ratio, 0.0), 1.0))
    for j in range(r):
        kf = f64(p[P_KF + j, n])
        wl, wh = f64(p[wmin0 + j, n]), f64(p[wmin0 + r + j, n])
        lo, hi = kf * wl * abs(wl), kf * wh * abs(wh)
        base = 0.0
        for i in range(5):
            base += c[6 * j + i, n] * w[i]
        t = min(max(min(max(base, lo), hi) + s * c[6 * j + 5, n] * w[5], lo), hi)
        cmd[j] = _speed(t, kf, wl, wh)


@jit
def _speed(t, kf, wl, wh):
    """allocation.thrusts_to_speeds of one rotor."""
    if kf > 0:
        v = math.copysign(math.sqrt(abs(t) / max(kf, 1e-30)), t) if t != 0 else 0.0
    else:
        v = 0.0
    return min(max(v, wl), wh)


# ---- geometric control (control.geometric) ------------------------------------------------------


@jit
def limit_force(F, m, tmax, tilt):
    """geometric.limit_force: vertical part in [0.1 m g, T_max], tilt and total capped."""
    fz = min(max(F[2], 0.1 * m * _G), tmax)
    room = math.sqrt(max(tmax * tmax - fz * fz, 0.0))
    lim = min(fz * math.tan(tilt), room)
    nrm = math.sqrt(F[0] * F[0] + F[1] * F[1])
    s = lim / max(nrm, 1e-9) if nrm > lim else 1.0
    return (F[0] * s, F[1] * s, fz)


@jit
def rotation_from_thrust_yaw(F, yaw):
    """geometric.rotation_from_thrust_yaw: R_d = [b1 b2 b3] (columns), row-major."""
    b3 = _unit(F)
    b2 = _unit(_cross(b3, (math.cos(yaw), math.sin(yaw), 0.0)))
    b1 = _cross(b2, b3)
    return (b1[0], b2[0], b3[0], b1[1], b2[1], b3[1], b1[2], b2[2], b3[2])


@jit
def flat_body_rates(Rd, thrust, m, jerk, yaw_rate):
    """geometric.flat_body_rates (Mellinger & Kumar 2011 Sec. III)."""
    xb, yb, zb = _col(Rd, 0), _col(Rd, 1), _col(Rd, 2)
    k = _dot(zb, jerk)
    h = m / max(thrust, 1e-6)
    hw = (h * (jerk[0] - k * zb[0]), h * (jerk[1] - k * zb[1]), h * (jerk[2] - k * zb[2]))
    return (-_dot(hw, yb), _dot(hw, xb), yaw_rate * zb[2])


@jit
def attitude_wrench(p, c, n, R, om, Rd, omd, force):
    """Lee attitude moment M = -k_R e_R - k_W e_W + W x J W (geometric.attitude_error,
    rate_error, lee_moment) and the body wrench [force; M]."""
    # e_R = 0.5 vee(Rd^T R - R^T Rd), with (Rd^T R)_ij = sum_k Rd_ki R_kj
    e_r = (
        0.5 * (_mtm(Rd, R, 2, 1) - _mtm(Rd, R, 1, 2)),
        0.5 * (_mtm(Rd, R, 0, 2) - _mtm(Rd, R, 2, 0)),
        0.5 * (_mtm(Rd, R, 1, 0) - _mtm(Rd, R, 0, 1)),
    )
    rdw = _mv(Rd, omd)
    ff = _mtv(R, rdw)
    e_w = (om[0] - ff[0], om[1] - ff[1], om[2] - ff[2])
    jw = _cross(om, _mv(_inertia(p, n), om))
    kr, kw = _g3(c, c_gains(c, n) + _KR, n), _g3(c, c_gains(c, n) + _KW, n)
    return (
        force[0],
        force[1],
        force[2],
        -kr[0] * e_r[0] - kw[0] * e_w[0] + jw[0],
        -kr[1] * e_r[1] - kw[1] * e_w[1] + jw[1],
        -kr[2] * e_r[2] - kw[2] * e_w[2] + jw[2],
    )


@jit
def c_gains(c, n):
    """First gain row: after the 6R pseudo-inverse rows, max_thrust and the actuation flag."""
    return c.shape[0] - N_GAIN_ROWS


@jit
def track(p, c, n, R, om, F, yaw, jerk, yaw_rate, feedforward):
    """Desired world force -> (thrust, R_d, W_d) -> Lee attitude wrench (controller._track)."""
    g0 = c_gains(c, n)
    m, tmax = f64(p[P_MASS, n]), f64(c[g0 - 2, n])
    F = limit_force(F, m, tmax, f64(c[g0 + _TILT, n]))
    Rd = rotation_from_thrust_yaw(F, yaw)
    thrust = min(max(F[0] * R[2] + F[1] * R[5] + F[2] * R[8], 0.0), tmax)
    omd = (0.0, 0.0, 0.0)
    if feedforward:
        omd = flat_body_rates(Rd, math.sqrt(_dot(F, F)), m, jerk, yaw_rate)
    return attitude_wrench(p, c, n, R, om, Rd, omd, (0.0, 0.0, thrust))


@jit
def desired_force(m, e_x, e_v, acc, kx, kv):
    """F = -k_x e_x - k_v e_v + m (g e3 + a_d) (geometric.desired_force, Lee eq. 12)."""
    return (
        -kx[0] * e_x[0] - kv[0] * e_v[0] + m * acc[0],
        -kx[1] * e_x[1] - kv[1] * e_v[1] + m * acc[1],
        -kx[2] * e_x[2] - kv[2] * e_v[2] + m * (_G + acc[2]),
    )


# ---- the acro loop (control.rate) ---------------------------------------------------------------


@jit
def rate_moment(p, c, n, om, rate_cmd, rs, dt):
    """FlightGoggles acro loop: backward-Euler low-pass of the measured rate, PID with a
    bounded integral, moment J alpha + W x J W (rate.lowpass_step, rate_pid, rate_moment).
    ``rs`` = [y 3, dy/dt 3, integral 3, fresh] of env n, updated in place."""
    g0 = c_gains(c, n)
    ks, kd = f64(c[g0 + _LS, n]), f64(c[g0 + _LD, n])
    fresh = rs[9] > 0.5
    det = 1.0 + kd * dt + ks * dt * dt
    a0 = _rate_axis(c, g0, n, 0, om[0], rate_cmd[0], rs, fresh, ks, det, dt)
    a1 = _rate_axis(c, g0, n, 1, om[1], rate_cmd[1], rs, fresh, ks, det, dt)
    a2 = _rate_axis(c, g0, n, 2, om[2], rate_cmd[2], rs, fresh, ks, det, dt)
    rs[9] = 0.0
    alpha = (a0, a1, a2)
    J = _inertia(p, n)
    ja = _mv(J, alpha)
    jw = _cross(om, _mv(J, om))
    return (ja[0] + jw[0], ja[1] + jw[1], ja[2] + jw[2])


@jit
def _rate_axis(c, g0, n, i, om, cmd, rs, fresh, ks, det, dt):
    """Axis i of the acro loop: filter update, bounded integral, alpha; rs updated."""
    y = om if fresh else f64(rs[i])
    yd = 0.0 if fresh else f64(rs[3 + i])
    integ = 0.0 if fresh else f64(rs[6 + i])
    yd = (yd + ks * dt * (om - y)) / det
    y = y + dt * yd
    err = cmd - y
    b = f64(c[g0 + _RB + i, n])
    integ = min(max(integ + dt * err, -b), b)
    rs[i], rs[3 + i], rs[6 + i] = y, yd, integ
    return c[g0 + _RP + i, n] * err + c[g0 + _RI + i, n] * integ - c[g0 + _RD + i, n] * yd


# ---- one control step ---------------------------------------------------------------------------


@jit
def command(p, c, n, r, x, sp, rs, mode, dt, cmd):
    """The rigid-body command (rotor speeds, into ``cmd``) of ``mode`` for env n in state
    x = [pos, vel, quat, omega, rotor] and setpoint row ``sp`` (controller.MultirotorController)."""
    g0 = c_gains(c, n)
    wmin0 = P_KF + 7 * r
    if mode == ROTOR_SPEEDS:
        for j in range(r):
            cmd[j] = min(max(f64(sp[j]), p[wmin0 + j, n]), p[wmin0 + r + j, n])
        return
    if mode == ROTOR_THRUSTS:
        for j in range(r):
            kf = f64(p[P_KF + j, n])
            cmd[j] = _speed(f64(sp[j]), kf, f64(p[wmin0 + j, n]), f64(p[wmin0 + r + j, n]))
        return
    if mode == WRENCH:
        w6 = (f64(sp[0]), f64(sp[1]), f64(sp[2]), f64(sp[3]), f64(sp[4]), f64(sp[5]))
        allocate(p, c, n, r, w6, cmd)
        return
    pos = (f64(x[0]), f64(x[1]), f64(x[2]))
    vel = (f64(x[3]), f64(x[4]), f64(x[5]))
    om = (f64(x[10]), f64(x[11]), f64(x[12]))
    if mode == CTBR:
        mom = rate_moment(p, c, n, om, (f64(sp[1]), f64(sp[2]), f64(sp[3])), rs, dt)
        allocate(p, c, n, r, (0.0, 0.0, f64(sp[0]), mom[0], mom[1], mom[2]), cmd)
        return
    R = rotmat(f64(x[6]), f64(x[7]), f64(x[8]), f64(x[9]))
    m = f64(p[P_MASS, n])
    tmax = f64(c[g0 - 2, n])
    zero = (0.0, 0.0, 0.0)
    if mode == ATTITUDE:
        Rd = euler_rotmat(f64(sp[1]), f64(sp[2]), f64(sp[3]))
        thrust = min(max(f64(sp[0]), 0.0), tmax)
        allocate(p, c, n, r, attitude_wrench(p, c, n, R, om, Rd, zero, (0.0, 0.0, thrust)), cmd)
        return
    kx, kv = _g3(c, g0 + _KX, n), _g3(c, g0 + _KV, n)
    s3 = (f64(sp[0]), f64(sp[1]), f64(sp[2]))
    if mode == VELOCITY:
        e_v = (vel[0] - s3[0], vel[1] - s3[1], vel[2] - s3[2])
        F = desired_force(m, zero, e_v, zero, zero, _g3(c, g0 + _KVV, n))
        wr = track(p, c, n, R, om, F, f64(sp[3]), zero, 0.0, False)
    elif mode == ACCELERATION:
        F = desired_force(m, zero, zero, s3, kx, kv)
        wr = track(p, c, n, R, om, F, f64(sp[3]), zero, 0.0, False)
    elif mode == MELLINGER:
        e_x = (pos[0] - s3[0], pos[1] - s3[1], pos[2] - s3[2])
        e_v = (vel[0] - sp[3], vel[1] - sp[4], vel[2] - sp[5])
        acc = (f64(sp[6]), f64(sp[7]), f64(sp[8]))
        jerk = (f64(sp[9]), f64(sp[10]), f64(sp[11]))
        F = desired_force(m, e_x, e_v, acc, kx, kv)
        wr = track(p, c, n, R, om, F, f64(sp[12]), jerk, f64(sp[13]), True)
    else:  # POSITION, POSE
        e_x = (pos[0] - s3[0], pos[1] - s3[1], pos[2] - s3[2])
        F = desired_force(m, e_x, vel, zero, kx, kv)
        yaw = f64(sp[5]) if mode == POSE else f64(sp[3])
        if mode == POSE and c[g0 - 1, n] > 0.5:  # fully actuated: body force + attitude
            f_b = _mtv(R, F)
            Rd = euler_rotmat(f64(sp[3]), f64(sp[4]), yaw)
            wr = attitude_wrench(p, c, n, R, om, Rd, zero, f_b)
        else:
            wr = track(p, c, n, R, om, F, yaw, zero, 0.0, False)
    allocate(p, c, n, r, wr, cmd)
