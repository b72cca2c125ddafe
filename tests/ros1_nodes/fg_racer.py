#!/usr/bin/env python3
"""A FlightGoggles (AlphaPilot 2019) racer, written only against FlightGoggles' ROS interface.

Run with Debian's /usr/bin/python3 (rospy, no numpy) and the message packages on PYTHONPATH;
it imports nothing of volary. What it uses, all of it published by FlightGoggles:

- parameters: ``/uav/gate_names`` (the course), ``/uav/GateN/nominal_location`` of every gate
  (IR marker k is corner k-1), ``/uav/flightgoggles_uav_dynamics/init_pose`` and
  ``vehicle_mass``;
- ``/tf_static`` (uav/imu -> uav/camera/left, the camera mount) and ``camera_info``;
- ``/uav/sensors/imu``: propagates the state estimate (attitude from the gyro, velocity and
  position from the specific force), closing each control step;
- ``/uav/camera/left/ir_beacons``: the pose, by a Gauss-Newton fit of the beacons' pixels to
  the gates' nominal corners around the predicted pose (any number of beacons: the prediction
  is the prior), which corrects position, velocity, attitude and the gyro bias;
- ``/uav/sensors/downward_laser_rangefinder`` (range < 0 by FlightGoggles' convention):
  altitude above the floor, used while no beacon fit is recent.

It never reads ``/tf`` (the true pose) unless run with ``--watch-truth``, and then only to log
how far its estimate is off.

Guidance: a smooth path through each gate's centre along its normal (cubic Hermite pieces
from gate to gate); the desired velocity follows it (speed limited by the path's curvature, at
the gates and by braking ahead) with a cross-track correction, the path's centripetal
acceleration and the drag (``drag_coefficient``) fed forward; acceleration -> collective thrust
and attitude -> body rates, sent as ``mav_msgs/RateThrust`` once per IMU message (lock-step)
and, before the first IMU message, 10 N on each ``/clock`` message (FlightGoggles arms at
9.9 N). It exits 1 s of sim time after the last gate, or when /clock stops.
"""

from __future__ import annotations

import argparse
import math
import sys
import threading
import time

G = 9.81
BIAS_MAX = 0.2  # rad/s: a gyro bias estimate beyond this is an estimation error

# ---- small vector algebra (3-vectors as tuples, 3x3 matrices as tuples of rows) ----------------


def add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def scale(a, s):
    return (a[0] * s, a[1] * s, a[2] * s)


def dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def norm(a):
    return math.sqrt(dot(a, a))


def unit(a):
    n = norm(a)
    return scale(a, 1.0 / n) if n > 1e-12 else (0.0, 0.0, 0.0)


def mv(m, v):
    return (dot(m[0], v), dot(m[1], v), dot(m[2], v))


def mtv(m, v):
    """m^T v."""
    return (
        m[0][0] * v[0] + m[1][0] * v[1] + m[2][0] * v[2],
        m[0][1] * v[0] + m[1][1] * v[1] + m[2][1] * v[2],
        m[0][2] * v[0] + m[1][2] * v[1] + m[2][2] * v[2],
    )


def mm(a, b):
    bt = tuple(zip(*b, strict=True))
    return tuple(tuple(dot(r, c) for c in bt) for r in a)


def mt(a):
    return tuple(zip(*a, strict=True))


def cols(x, y, z):
    """The matrix whose columns are x, y, z."""
    return ((x[0], y[0], z[0]), (x[1], y[1], z[1]), (x[2], y[2], z[2]))


def exp_so3(w):
    """Rodrigues: the rotation by angle |w| about w."""
    th = norm(w)
    if th < 1e-9:
        k = ((0.0, -w[2], w[1]), (w[2], 0.0, -w[0]), (-w[1], w[0], 0.0))
        return tuple(tuple((1.0 if i == j else 0.0) + k[i][j] for j in range(3)) for i in range(3))
    x, y, z = scale(w, 1.0 / th)
    c, s = math.cos(th), math.sin(th)
    v = 1.0 - c
    return (
        (c + x * x * v, x * y * v - z * s, x * z * v + y * s),
        (y * x * v + z * s, c + y * y * v, y * z * v - x * s),
        (z * x * v - y * s, z * y * v + x * s, c + z * z * v),
    )


def orthonormal(r):
    """Re-orthonormalise a rotation matrix (Gram-Schmidt on its columns)."""
    x, y, _ = mt(r)
    x = unit(x)
    z = unit(cross(x, y))
    return cols(x, cross(z, x), z)


def quat_to_rot(x, y, z, w):
    return (
        (1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)),
        (2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)),
        (2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)),
    )


def solve(a, b):
    """x with a x = b (Gaussian elimination with partial pivoting; a is n x n lists)."""
    n = len(b)
    m = [list(a[i]) + [b[i]] for i in range(n)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        if abs(m[c][c]) < 1e-12:
            raise ZeroDivisionError("singular")
        for r in range(c + 1, n):
            f = m[r][c] / m[c][c]
            if f:
                for k in range(c, n + 1):
                    m[r][k] -= f * m[c][k]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (m[r][n] - sum(m[r][k] * x[k] for k in range(r + 1, n))) / m[r][r]
    return x


# ---- the course -------------------------------------------------------------------------------


def gate_geometry(corners, came_from):
    """(centre, unit normal pointing along the way through, from ``came_from``)."""
    c = scale(add(add(corners[0], corners[1]), add(corners[2], corners[3])), 0.25)
    n = unit(cross(sub(corners[1], corners[0]), sub(corners[2], corners[0])))
    if dot(n, sub(c, came_from)) < 0:
        n = scale(n, -1.0)
    return c, n


def hermite(p0, t0, p1, t1, u):
    """The cubic Hermite curve from p0 (tangent t0) to p1 (tangent t1) at u in [0, 1]."""
    u2, u3 = u * u, u * u * u
    h = (2 * u3 - 3 * u2 + 1, u3 - 2 * u2 + u, -2 * u3 + 3 * u2, u3 - u2)
    return tuple(h[0] * p0[k] + h[1] * t0[k] + h[2] * p1[k] + h[3] * t1[k] for k in range(3))


def course_path(start, gates, step=0.25, stretch=1.0, exit_run=3.0):
    """A smooth path from ``start`` through the centre of each gate (4 corners, course order),
    crossing it along its normal: cubic Hermite pieces between consecutive gate centres whose
    tangents are the gate normals, ``stretch`` times the chord long. Returns points about
    ``step`` m apart, each with the course index of the gate whose centre it is, else -1."""
    knots = [(tuple(start), None)]
    prev = tuple(start)
    for corners in gates:
        c, n = gate_geometry(corners, prev)
        knots.append((c, n))
        prev = c
    knots[0] = (knots[0][0], unit(sub(knots[1][0], knots[0][0])))
    path = [(knots[0][0], -1)]
    for i in range(1, len(knots)):
        (a, da), (b, db) = knots[i - 1], knots[i]
        chord = norm(sub(b, a))
        ta, tb = scale(da, stretch * chord), scale(db, stretch * chord)
        dense = [hermite(a, ta, b, tb, k / 400.0) for k in range(1, 401)]
        path += _resample(path[-1][0], dense, step)
        path.append((b, i - 1))
    c, n = knots[-1]
    path.append((add(c, scale(n, exit_run)), -1))
    return path


def _resample(last, dense, step):
    """Points of the polyline ``dense`` every ``step`` m of arc from ``last`` (its end
    excluded)."""
    out, run, prev = [], 0.0, last
    for q in dense[:-1]:
        run += norm(sub(q, prev))
        prev = q
        if run >= step:
            out.append((q, -1))
            run = 0.0
    if out and norm(sub(dense[-1], out[-1][0])) < 0.5 * step:
        out.pop()
    return out


class Guidance:
    """Velocity along the path (a dense polyline) with cross-track correction and the
    path's centripetal acceleration fed forward (module docstring).

    Speed: at most ``cruise``, at most sqrt(a_turn / curvature), at most ``gate_speed`` through
    a gate, reached braking at ``brake`` and left accelerating as fast (from rest at the
    start)."""

    def __init__(self, path, cruise=7.0, brake=3.5, a_turn=4.0, k_ct=1.2, gate_speed=5.5):
        self.points = [p for p, _ in path]
        self.gate_at = [g for _, g in path]
        n = len(self.points)
        self.dirs = [unit(sub(self.points[i + 1], self.points[i])) for i in range(n - 1)]
        self.lengths = [norm(sub(self.points[i + 1], self.points[i])) for i in range(n - 1)]
        self.curv = [0.0] * n  # 1/m at each point
        for i in range(1, n - 1):
            ds = 0.5 * (self.lengths[i - 1] + self.lengths[i])
            phi = math.acos(max(-1.0, min(1.0, dot(self.dirs[i - 1], self.dirs[i]))))
            self.curv[i] = phi / max(ds, 1e-6)
        lim = [min(cruise, math.sqrt(a_turn / max(k, 1e-6))) for k in self.curv]
        for i, g in enumerate(self.gate_at):  # through a gate no faster than gate_speed
            if g >= 0:
                lim[i] = min(lim[i], gate_speed)
        lim[0], lim[-1] = 0.0, 0.0
        for i in range(n - 2, -1, -1):  # brake in time for what is ahead
            lim[i] = min(lim[i], math.sqrt(lim[i + 1] ** 2 + 2 * brake * self.lengths[i]))
        for i in range(1, n):  # accelerate out of corners (and the start) no faster
            lim[i] = min(lim[i], math.sqrt(lim[i - 1] ** 2 + 2 * brake * self.lengths[i - 1]))
        self.limits = [max(v, 1.0) for v in lim[:-1]] + [0.0]
        self.seg = 0  # segment index: points[seg] -> points[seg + 1]
        self.k_ct = k_ct  # 1/s: cross-track error -> velocity toward the path

    def done(self):
        return self.seg >= len(self.points) - 1

    def target_gate(self):
        """The course index of the next gate centre ahead (None past the last)."""
        for i in range(self.seg + 1, len(self.points)):
            if self.gate_at[i] >= 0:
                return self.gate_at[i]
        return None

    def velocity(self, p):
        """(desired velocity m/s, feed-forward acceleration m/s^2) at position p; advances
        past finished segments."""
        while not self.done():
            a = self.points[self.seg]
            if dot(sub(p, a), self.dirs[self.seg]) < self.lengths[self.seg]:
                break
            self.seg += 1
        if self.done():
            return scale(sub(self.points[-1], p), 1.0), (0.0, 0.0, 0.0)
        i = self.seg
        a, d = self.points[i], self.dirs[i]
        along = min(max(0.0, dot(sub(p, a), d)), self.lengths[i])
        u = along / max(self.lengths[i], 1e-9)
        speed = (1 - u) * self.limits[i] + u * self.limits[i + 1]
        cross_track = sub(add(a, scale(d, along)), p)
        corr = scale(cross_track, self.k_ct)
        if norm(corr) > 3.0:
            corr = scale(unit(corr), 3.0)
        a_ff = (0.0, 0.0, 0.0)
        if i + 1 < len(self.dirs):
            ds = 0.5 * (self.lengths[i] + self.lengths[i + 1])
            a_ff = scale(sub(self.dirs[i + 1], d), speed * speed / max(ds, 1e-6))
        v_des = add(scale(d, speed), corr)
        if norm(v_des) > speed:  # the correction steers; it does not speed up
            v_des = scale(unit(v_des), max(speed, 1.0))
        return v_des, a_ff

    def heading(self, p):
        """Yaw (rad) looking at the next gate centre (the camera sees the beacons ahead)."""
        for i in range(self.seg + 1, len(self.points)):
            if self.gate_at[i] >= 0:
                d = sub(self.points[i], p)
                if math.hypot(d[0], d[1]) > 1.5:
                    return math.atan2(d[1], d[0])
        d = self.dirs[-1]
        return math.atan2(d[1], d[0])


# ---- estimation -------------------------------------------------------------------------------


class Camera:
    """Pinhole intrinsics and the mount (R_bc: camera -> body, t_bc in m)."""

    def __init__(self, fx, fy, cx, cy, r_bc, t_bc):
        self.fx, self.fy, self.cx, self.cy = fx, fy, cx, cy
        self.r_bc, self.t_bc = r_bc, t_bc

    def project(self, r_wb, p_wb, x_w):
        """(u, v, camera point, body point) of world point x_w, or None behind the camera."""
        xb = mtv(r_wb, sub(x_w, p_wb))
        xc = mtv(self.r_bc, sub(xb, self.t_bc))
        if xc[2] < 0.1:
            return None
        return self.fx * xc[0] / xc[2] + self.cx, self.fy * xc[1] / xc[2] + self.cy, xc, xb


def fit_pose(cam, r0, p0, obs, sigma_px=1.0, sigma_th=0.2, sigma_p=1.0, iters=4):
    """MAP pose from beacon pixels ``obs`` [(u, v, world point)] around the prior (r0, p0):
    (R, p, rms px, beacons used) or None. The increment (dtheta world, dp) minimises the
    pixel error plus the prior's penalty (Gauss-Newton)."""
    wp = [1.0 / sigma_th**2] * 3 + [1.0 / sigma_p**2] * 3
    inc = [0.0] * 6
    r, p, used = r0, p0, obs
    for it in range(iters):
        h = [[0.0] * 6 for _ in range(6)]
        g = [0.0] * 6
        sq, n, keep = 0.0, 0, []
        for u, v, xw in used:
            pr = cam.project(r, p, xw)
            if pr is None:
                continue
            pu, pv, xc, _ = pr
            ru, rv = u - pu, v - pv
            if it >= 2 and ru * ru + rv * rv > 30.0**2:
                continue
            keep.append((u, v, xw))
            jrow = _jacobian(cam, r, p, xw, xc)
            for res, j in ((ru, jrow[0]), (rv, jrow[1])):
                for a in range(6):
                    g[a] += j[a] * res
                    for b in range(a, 6):
                        h[a][b] += j[a] * j[b]
            sq += ru * ru + rv * rv
            n += 1
        if n < 2:
            return None
        s2 = 1.0 / sigma_px**2
        for a in range(6):
            g[a] = g[a] * s2 - wp[a] * inc[a]
            for b in range(a, 6):
                h[a][b] = h[a][b] * s2 + (wp[a] if a == b else 0.0)
                h[b][a] = h[a][b]
        step = solve(h, g)
        inc = [inc[a] + step[a] for a in range(6)]
        r = orthonormal(mm(exp_so3(tuple(step[:3])), r))
        p = add(p, tuple(step[3:]))
        used = keep
        if max(abs(x) for x in step) < 1e-5:
            break
    return r, p, math.sqrt(sq / max(n, 1)), n


def _jacobian(cam, r, p, xw, xc):
    """d(u, v)/d(dtheta (world, left), dp) at pose (r, p) for world point xw."""
    d = sub(xw, p)
    # x_b = R^T (d - dtheta x d - dp): d x_b/d dtheta = R^T [d]x, d x_b/d dp = -R^T
    dx = ((0.0, -d[2], d[1]), (d[2], 0.0, -d[0]), (-d[1], d[0], 0.0))
    rt = mt(r)
    jb_th = mm(rt, dx)
    jc_th = mm(mt(cam.r_bc), jb_th)
    jc_p = mm(mt(cam.r_bc), tuple(tuple(-v for v in row) for row in rt))
    x, y, z = xc
    du = (cam.fx / z, 0.0, -cam.fx * x / (z * z))
    dv = (0.0, cam.fy / z, -cam.fy * y / (z * z))
    out = []
    for dd in (du, dv):
        th = tuple(sum(dd[k] * jc_th[k][j] for k in range(3)) for j in range(3))
        pp = tuple(sum(dd[k] * jc_p[k][j] for k in range(3)) for j in range(3))
        out.append(th + pp)
    return out


class Estimator:
    """IMU-propagated state corrected by beacon fits (module docstring)."""

    def __init__(self, p, r):
        self.p, self.v, self.r = tuple(p), (0.0, 0.0, 0.0), r
        self.bg = (0.0, 0.0, 0.0)
        self.t = None  # stamp of the last IMU sample
        self.last = ((0.0, 0.0, 0.0), (0.0, 0.0, G))  # its (gyro, accel)
        self.history = []  # (stamp, R, p) of recent samples, for delayed beacon frames
        self.last_fix = None  # stamp of the last accepted beacon fit
        self.fixes = 0

    def propagate(self, t, gyro, accel):
        """Integrate from the last sample to this one (t, body rates, specific force), with the
        mean of the two samples over the interval (trapezoidal: the samples are its ends)."""
        if self.t is not None:
            dt = t - self.t
            if 0.0 < dt < 0.1:
                w = sub(scale(add(gyro, self.last[0]), 0.5), self.bg)
                r_mid = mm(self.r, exp_so3(scale(w, 0.5 * dt)))
                a_w = add(mv(r_mid, scale(add(accel, self.last[1]), 0.5)), (0.0, 0.0, -G))
                self.p = add(self.p, add(scale(self.v, dt), scale(a_w, 0.5 * dt * dt)))
                self.v = add(self.v, scale(a_w, dt))
                self.r = orthonormal(mm(self.r, exp_so3(scale(w, dt))))
        self.t, self.last = t, (gyro, accel)
        self.history.append((t, self.r, self.p))
        del self.history[:-40]

    def pose_at(self, t):
        for ts, r, p in reversed(self.history):
            if abs(ts - t) < 1e-4:
                return r, p
        return None

    def correct(self, t, r_meas, p_meas):
        """Apply a fit of the pose at stamp t to the current state."""
        then = self.pose_at(t)
        if then is None:
            return
        r_then, p_then = then
        dp = sub(p_meas, p_then)
        dth = _vee_log(mm(r_meas, mt(r_then)))
        gap = 1.0 / 60.0 if self.last_fix is None else max(t - self.last_fix, 1.0 / 240.0)
        self.p = add(self.p, dp)
        dv = scale(dp, 0.3 / max(gap, 1e-3))
        if norm(dv) > 1.0:  # a fit after a long gap corrects the position, not a velocity
            dv = scale(unit(dv), 1.0)
        self.v = add(self.v, dv)
        self.r = orthonormal(mm(exp_so3(dth), self.r))
        db = mtv(self.r, dth)  # body frame: what the gyro's bias turned the estimate by
        bg = sub(self.bg, scale(db, 0.05 / max(gap, 1e-3)))
        self.bg = tuple(max(-BIAS_MAX, min(BIAS_MAX, b)) for b in bg)
        self.history = [(ts, mm(exp_so3(dth), r), add(p, dp)) for ts, r, p in self.history]
        self.last_fix = t
        self.fixes += 1

    def altitude(self, t, height):
        """A rangefinder altitude (m above the floor) while no recent beacon fit."""
        if self.last_fix is not None and t - self.last_fix < 0.3:
            return
        err = height - self.p[2]
        if abs(err) < 0.6:
            self.p = (self.p[0], self.p[1], self.p[2] + 0.3 * err)
            self.v = (self.v[0], self.v[1], self.v[2] + 0.5 * err)


def _vee_log(r):
    """The rotation vector of R (small and moderate angles)."""
    c = max(-1.0, min(1.0, (r[0][0] + r[1][1] + r[2][2] - 1.0) / 2.0))
    th = math.acos(c)
    w = (r[2][1] - r[1][2], r[0][2] - r[2][0], r[1][0] - r[0][1])
    if th < 1e-6:
        return scale(w, 0.5)
    return scale(w, th / (2.0 * math.sin(th)))


# ---- control ----------------------------------------------------------------------------------


def command(
    r,
    v,
    v_des,
    yaw,
    mass,
    drag=0.0,
    a_ff=(0.0, 0.0, 0.0),
    k_v=3.5,
    a_max=12.0,
    tilt=0.96,
    gains=(6.0, 6.0, 3.0),
):
    """(thrust N, body rates rad/s) tracking v_des (plus the feed-forward acceleration a_ff)
    with heading yaw from attitude r; ``drag`` (N/(m/s)^2, quadratic) is fed forward at the
    desired velocity; tilt at most ``tilt`` rad."""
    a = add(add(scale(sub(v_des, v), k_v), scale(v_des, drag / mass * norm(v_des))), a_ff)
    ah = math.hypot(a[0], a[1])
    if ah > a_max:
        a = (a[0] * a_max / ah, a[1] * a_max / ah, a[2])
    a = (a[0], a[1], max(-5.0, min(8.0, a[2])))
    f = add(a, (0.0, 0.0, G))
    h = math.hypot(f[0], f[1])
    if h > f[2] * math.tan(tilt):
        k = f[2] * math.tan(tilt) / h
        f = (f[0] * k, f[1] * k, f[2])
    zd = unit(f)
    xc = (math.cos(yaw), math.sin(yaw), 0.0)
    yd = unit(cross(zd, xc))
    xd = cross(yd, zd)
    rd = cols(xd, yd, zd)
    e = mm(mt(rd), r)
    e = mm(
        ((0.5, 0, 0), (0, 0.5, 0), (0, 0, 0.5)),
        tuple(tuple(e[i][j] - e[j][i] for j in range(3)) for i in range(3)),
    )
    e_r = (e[2][1], e[0][2], e[1][0])
    rates = tuple(max(-8.0, min(8.0, -gains[i] * e_r[i])) for i in range(3))
    # the desired force along the present thrust axis: while the attitude lags, the vehicle
    # does not accelerate the wrong way
    zb = (r[0][2], r[1][2], r[2][2])
    thrust = mass * dot(f, zb)
    return max(1.0, min(thrust, 30.0)), rates


# ---- the node ---------------------------------------------------------------------------------


class Racer:
    def __init__(self, rospy, msgs, args):
        self.rospy, self.m, self.args = rospy, msgs, args
        self.lock = threading.Lock()
        uav = rospy.get_param("/uav")
        names = list(uav["gate_names"])
        self.corners = {
            k: [tuple(map(float, c)) for c in v["nominal_location"]]
            for k, v in uav.items()
            if isinstance(v, dict) and "nominal_location" in v
        }
        dyn = uav["flightgoggles_uav_dynamics"]
        x, y, z, qx, qy, qz, qw = map(float, dyn["init_pose"])
        self.mass = float(dyn.get("vehicle_mass", 1.0))
        self.drag = float(dyn.get("drag_coefficient", 0.0))
        self.start = (x, y, z)
        path = course_path(self.start, [self.corners[n] for n in names])
        self.guidance = Guidance(path, cruise=args.speed)
        self.names = names
        self.est = Estimator(self.start, quat_to_rot(qx, qy, qz, qw))
        self.cam = None
        # FlightGoggles' camera mount if /tf_static is late: the optical frame at the body
        # origin (z along body x, x along body -y, y along body -z)
        self.mount = (((0.0, 0.0, 1.0), (-1.0, 0.0, 0.0), (0.0, -1.0, 0.0)), (0.0, 0.0, 0.0))
        self.pending = []  # beacon frames (stamp, observations) waiting for their IMU sample
        self.truth = None
        self.imu_count = 0
        self.started = False
        self.last_log = None
        self.fit_log = []
        self.last_clock = time.monotonic()
        self.finished_at = None  # sim s when the last gate's waypoints were flown
        self.trace = open(args.trace, "w") if args.trace else None  # noqa: SIM115
        self.pub = rospy.Publisher(
            "/uav/input/rateThrust", msgs.RateThrust, queue_size=10, tcp_nodelay=True
        )

    # ---- callbacks --------------------------------------------------------------------------
    def on_tf_static(self, msg):
        for tr in msg.transforms:
            if tr.child_frame_id.lstrip("/") == "uav/camera/left":
                q, t = tr.transform.rotation, tr.transform.translation
                self.mount = (quat_to_rot(q.x, q.y, q.z, q.w), (t.x, t.y, t.z))

    def on_camera_info(self, msg):
        if self.cam is None:
            k = msg.K
            self.cam = Camera(k[0], k[4], k[2], k[5], *self.mount)

    def on_clock(self, msg):
        self.last_clock = time.monotonic()
        if not self.started:
            self.send(10.0, (0.0, 0.0, 0.0))

    def on_truth(self, msg):
        for tr in msg.transforms:
            if tr.child_frame_id.lstrip("/") == "uav/imu":
                q, t = tr.transform.rotation, tr.transform.translation
                self.truth = (quat_to_rot(q.x, q.y, q.z, q.w), (t.x, t.y, t.z))

    def on_imu(self, msg):
        with self.lock:
            self.started = True
            t = msg.header.stamp.to_sec()
            g, a = msg.angular_velocity, msg.linear_acceleration
            self.est.propagate(t, (g.x, g.y, g.z), (a.x, a.y, a.z))
            self.fit_pending()
            self.imu_count += 1
            thrust, rates = self.control(t)
        self.send(thrust, rates)

    def on_beacons(self, msg):
        if self.cam is None:
            return
        obs = []
        for mk in msg.markers:
            c = self.corners.get(mk.landmarkID.data)
            k = int(mk.markerID.data) - 1 if mk.markerID.data.isdigit() else -1
            if c is not None and 0 <= k < 4:
                obs.append((mk.x, mk.y, c[k]))
        with self.lock:
            self.pending.append((msg.header.stamp.to_sec(), obs))
            self.fit_pending()

    def fit_pending(self):
        """Fit the beacon frames whose IMU sample (same stamp) has arrived; frames and IMU
        come on separate connections, in either order."""
        keep = []
        for t, obs in self.pending:
            then = self.est.pose_at(t)
            if then is None:
                if self.est.t is None or t > self.est.t - 0.5:
                    keep.append((t, obs))
                continue
            if len(obs) < 3:
                continue
            lost = self.est.last_fix is None or t - self.est.last_fix > 0.5
            if lost and len(obs) < 6:
                continue  # re-finding the pose wants beacons of more than one gate
            prior = {"sigma_p": 10.0, "sigma_th": 1.0, "iters": 12} if lost else {}
            fit = fit_pose(self.cam, then[0], then[1], obs, **prior)
            self.fit_log.append((t, len(obs), None if fit is None else (round(fit[2], 4), fit[3])))
            del self.fit_log[:-10]
            if fit is not None and fit[2] < 3.0 and fit[3] >= 3 and self.plausible(t, then, fit):
                self.est.correct(t, fit[0], fit[1])
        self.pending = keep

    def plausible(self, t, then, fit):
        """Whether a fit moves the estimate no more than its drift since the last fit could
        (0.5 m and 0.15 rad, plus 2 m and 0.5 rad per s without one)."""
        if self.est.last_fix is None or t - self.est.last_fix > 0.5:
            return True  # lost (or starting): a good fit of many beacons is the pose
        since = max(0.0, t - self.est.last_fix)
        dp = norm(sub(fit[1], then[1]))
        dth = norm(_vee_log(mm(fit[0], mt(then[0]))))
        return dp < 0.5 + 2.0 * since and dth < 0.15 + 0.5 * since

    def on_range(self, msg):
        rng = -msg.range  # FlightGoggles: negative, measured along -z of uav/imu
        if not 0.2 < rng < 15.0:
            return
        with self.lock:
            r = self.est.r
            if r[2][2] > 0.8:  # nearly level: the ray meets the floor close to straight down
                self.est.altitude(msg.header.stamp.to_sec(), rng * r[2][2])

    # ---- control ----------------------------------------------------------------------------
    def control(self, t):
        r, p, v = self.est.r, self.est.p, self.est.v
        v_des, a_ff = self.guidance.velocity(p)
        yaw = self.guidance.heading(p)
        self.log(t, p)
        out = command(r, v, v_des, yaw, self.mass, self.drag, a_ff)
        if self.trace is not None:
            true = self.truth[1] if self.truth is not None else (math.nan,) * 3
            row = (t, *p, *true, *v, *v_des, yaw, self.guidance.seg, out[0], *out[1])
            self.trace.write(" ".join(f"{x:.4f}" for x in row) + "\n")
        return out

    def log(self, t, p):
        gate = self.guidance.target_gate()
        if gate != self.last_log:
            self.last_log = gate
            err = ""
            if self.truth is not None:
                err = f" est-err={norm(sub(p, self.truth[1])):.3f}m"
            nxt = self.names[gate] if gate is not None else "none (course done)"
            if gate is None:
                self.finished_at = t
            fits = [(round(ts, 3), n, f) for ts, n, f in self.fit_log[-2:]]
            print(
                f"fg_racer t={t:.2f} next={nxt} fixes={self.est.fixes}{err} last fits "
                f"(stamp, beacons, (rms px, used))={fits}",
                flush=True,
            )

    def send(self, thrust, rates):
        m = self.m.RateThrust()
        m.header.stamp = self.rospy.Time.now()
        m.thrust.z = thrust
        m.angular_rates.x, m.angular_rates.y, m.angular_rates.z = rates
        self.pub.publish(m)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--speed", type=float, default=7.0, help="cruise speed, m/s")
    ap.add_argument(
        "--watch-truth",
        action="store_true",
        help="debug: read /tf (the true pose) to log the estimate's error",
    )
    ap.add_argument("--trace", help="write the state, estimate and command per IMU message")
    ap.add_argument(
        "--linger",
        type=float,
        default=1.0,
        help="sim s to keep flying (hovering) after the last gate, then exit",
    )
    ap.add_argument(
        "--clock-timeout",
        type=float,
        default=5.0,
        help="exit when /clock has been silent this many wall s",
    )
    ap.add_argument("--max-wall", type=float, default=600.0, help="give up after this many s")
    args = ap.parse_args(argv)

    import rospy
    from flightgoggles.msg import IRMarkerArray
    from mav_msgs.msg import RateThrust
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import CameraInfo, Imu, Range
    from tf2_msgs.msg import TFMessage

    class Msgs:
        pass

    Msgs.RateThrust = RateThrust
    rospy.init_node("fg_racer")
    racer = Racer(rospy, Msgs, args)
    sub = rospy.Subscriber
    sub("/tf_static", TFMessage, racer.on_tf_static)
    sub("/uav/camera/left/camera_info", CameraInfo, racer.on_camera_info, tcp_nodelay=True)
    sub("/uav/camera/left/ir_beacons", IRMarkerArray, racer.on_beacons, tcp_nodelay=True)
    sub("/uav/sensors/downward_laser_rangefinder", Range, racer.on_range, tcp_nodelay=True)
    sub("/uav/sensors/imu", Imu, racer.on_imu, tcp_nodelay=True)
    sub("/clock", Clock, racer.on_clock, tcp_nodelay=True)
    if args.watch_truth:
        sub("/tf", TFMessage, racer.on_truth, tcp_nodelay=True)
    end = time.monotonic() + args.max_wall
    while not rospy.is_shutdown() and time.monotonic() < end:
        time.sleep(0.1)
        if time.monotonic() - racer.last_clock > args.clock_timeout:
            print("fg_racer: no /clock for a while, the simulator is gone", flush=True)
            break
        if racer.finished_at is not None and racer.est.t - racer.finished_at > args.linger:
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
