"""Warp kernel of the fused rigid-body physics step (imported only when a warp stepper is built:
it imports warp).

One thread per env runs ``substeps`` physics steps with the state held in registers: the
parameters, the disturbance and the state are read once and written once per call, so at large
batches a call moves about 550 bytes per env whatever the number of substeps (the eager step
moves ~633 bytes per env-step). Equation for equation this follows
:mod:`volary.dynamics.numba_kernels` (and so ``models.py`` and ``step.py``):

- command: non-finite rows zeroed and flagged, then clamped to [w_min, w_max] (step.sanitize);
- noise (FlightGoggles IV-C): Box-Muller normals of the counter-based stream of
  :mod:`volary.math.random` (same 32-bit hash in uint32 arithmetic, same draws), force/moment
  ``sigma n / sqrt(dt)``, gust ``a g + std sqrt(1 - a^2) n``, ``a = exp(-dt / tau)``;
- derivative (FlightGoggles IV, EQUATIONS.md): thrust ``k_f w|w|`` through the allocation
  matrix, body drag ``-(D_lin + D_quad |v_b|) v_b`` on the air-relative velocity, aero moment
  ``-|W| C_a W``, Euler's equation with the full inertia, ``dq/dt = q (x) [0, W] / 2``, motor lag
  ``(w_cmd - w) / tau`` with ``tau_up`` when speeding up;
- Euler or classic RK4, quaternion renormalization, ground contact, divergence guard (an env
  with a non-finite state or command keeps its last finite state and is flagged).

Every value is in the buffer dtype (float32 or float64), like torch's eager reference. The
rotor count, the dtype and the integrator/noise/ground switches are compile-time constants of a
kernel built per combination (Warp compiles each once and caches it on disk).
"""

# mypy: ignore-errors
# (Warp's kernel language is Python syntax with its own types; mypy cannot check it.)

# No ``from __future__ import annotations``: Warp reads the wp.func annotations, which name
# types built in ``build``'s closure.
import functools
import math

import warp as wp

import volary.dynamics.aero as _aero
from volary.dynamics.models import GRAVITY

wp.set_module_options({"enable_backward": False})

# uint32 constants of math.random (as literals in a kernel they would be int32 and wrap)
_H1 = wp.constant(wp.uint32(0x21F0AAAD))
_H2 = wp.constant(wp.uint32(0x735A2D97))
_TICK = wp.constant(wp.uint32(0x85EBCA6B))
_DRAW = wp.constant(wp.uint32(0xC2B2AE35))


@wp.func
def hash32(x: wp.uint32):
    """math.random.hash32 (lowbias32 constants), exact in uint32 arithmetic."""
    a = x ^ (x >> wp.uint32(16))
    b = a * _H1
    c = b ^ (b >> wp.uint32(15))
    d = c * _H2
    return d ^ (d >> wp.uint32(15))


# the one source of the rotor aerodynamics (aero.py), a generic Warp function of the kernel dtype
rotor_aero = wp.func(_aero.rotor_aero)


@functools.cache
def build(scalar, r: int, rk4: bool, stochastic: bool, ground: bool, aero: bool = False):
    """The kernel ``advance(p, d, u, x_in, tick_in, flags_in, keys, x, tick, flags, dt, gh,
    vcrash, substeps)`` for one dtype (``wp.float32``/``wp.float64``), rotor count and switch
    set. ``p`` (Kp, N), ``d`` (Kd, N) and the state ``x`` (K, N) are the packed SoA buffers of
    :mod:`volary.dynamics.compiled`; ``u`` is the (N, R) command; flags are
    [landed, crashed, diverged]. ``x`` may be ``x_in`` (in place). ``aero``: with the rotor
    aerodynamics of aero.py (A1-A6) per rotor."""
    vec3 = wp.types.vector(3, scalar)
    vec4 = wp.types.vector(4, scalar)
    vec9 = wp.types.vector(9, scalar)
    vecr = wp.types.vector(r, scalar)
    mat3 = wp.types.matrix((3, 3), scalar)
    mata = wp.types.matrix((6, r), scalar)
    vec6 = wp.types.vector(6, scalar)
    matr = wp.types.matrix((r, 3), scalar)
    nk = 13 + r
    kf0, a0 = 19, 19 + r
    wmin0 = a0 + 6 * r
    wmax0, tup0, tdn0, dl0 = wmin0 + r, wmin0 + 2 * r, wmin0 + 3 * r, wmin0 + 4 * r
    dq0, cm0, fn0 = dl0 + 3, dl0 + 6, dl0 + 9
    ae0 = fn0 + 2
    rp0, ra0 = ae0 + 6, ae0 + 6 + 3 * r
    h_min, h_max = _aero.H_MIN, _aero.H_MAX
    g = GRAVITY
    two_pi = 2.0 * math.pi

    @wp.func
    def uniform(h0: wp.uint32, j: int):
        """(hash + 0.5) / 2^32 in the buffer dtype, like torch's ``h.to(dtype) + 0.5``."""
        h = hash32(h0 + wp.uint32(j) * _DRAW)
        return (scalar(h) + scalar(0.5)) / scalar(4294967296.0)

    @wp.func
    def normals9(key: wp.int64, tick: wp.int64):
        """math.random.normal(key, tick, 9): 10 uniforms, Box-Muller, cosines then sines."""
        h0 = hash32(wp.uint32(key) ^ (wp.uint32(tick) * _TICK))
        out = vec9()
        for i in range(5):
            rr = wp.sqrt(scalar(-2.0) * wp.log(uniform(h0, i)))
            th = scalar(two_pi) * uniform(h0, 5 + i)
            out[i] = rr * wp.cos(th)
            if i < 4:
                out[5 + i] = rr * wp.sin(th)
        return out

    @wp.func
    def rotate(q: vec4, v: vec3):
        """R(q) v: v + 2w (u x v) + u x (2 u x v), q = [w, x, y, z]."""
        u = vec3(q[1], q[2], q[3])
        t = scalar(2.0) * wp.cross(u, v)
        return v + q[0] * t + wp.cross(u, t)

    @wp.func
    def rotate_inv(q: vec4, v: vec3):
        """R(q)^T v."""
        u = vec3(-q[1], -q[2], -q[3])
        t = scalar(2.0) * wp.cross(u, v)
        return v + q[0] * t + wp.cross(u, t)

    @wp.func
    def rigid(
        pos: vec3,
        q: vec4,
        vel: vec3,
        om: vec3,
        w: vecr,
        kf: vecr,
        alloc: mata,
        mass: scalar,
        inertia: mat3,
        inertia_inv: mat3,
        d_lin: vec3,
        d_quad: vec3,
        c_moment: vec3,
        wind: vec3,
        force: vec3,
        moment: vec3,
        ae: vec6,
        rp: matr,
        ra: matr,
        gs: scalar,
    ):
        """(dvel, dquat, domega) of the rigid body (models.py): rotor wrench, drag, aero moment,
        Euler's equation, quaternion kinematics."""
        vb = rotate_inv(q, vel - wind)
        t = vecr()
        for j in range(r):
            t[j] = kf[j] * w[j] * wp.abs(w[j])
        ex = vec6()
        if wp.static(aero):  # aero.rotor_aero per rotor: thrust through the allocation + wrench
            lo = wp.max(scalar(0.5) * ae[5], scalar(h_min))
            for j in range(r):
                rj = vec3(rp[j, 0], rp[j, 1], rp[j, 2])
                h = wp.min(wp.max(pos[2] + rotate(q, rj)[2] - gs, lo), scalar(h_max))
                tj, fx, fy, fz, mx, my, mz = rotor_aero(
                    w[j], t[j], vb[0], vb[1], vb[2], om[0], om[1], om[2], rj[0], rj[1], rj[2],
                    ra[j, 0], ra[j, 1], ra[j, 2], h, ae[0], ae[1], ae[2], ae[3], ae[4], ae[5],
                )  # fmt: skip
                t[j] = tj
                ex = ex + vec6(fx, fy, fz, mx, my, mz)
        f = alloc @ t  # [force 3, moment 3] in the body frame
        if wp.static(aero):
            f = f + ex
        sp = wp.length(vb)
        fb = vec3(
            f[0] - (d_lin[0] + d_quad[0] * sp) * vb[0],
            f[1] - (d_lin[1] + d_quad[1] * sp) * vb[1],
            f[2] - (d_lin[2] + d_quad[2] * sp) * vb[2],
        )
        acc = (rotate(q, fb) + force) / mass - vec3(scalar(0.0), scalar(0.0), scalar(g))
        h = scalar(0.5)
        dq = vec4(
            h * (-q[1] * om[0] - q[2] * om[1] - q[3] * om[2]),
            h * (q[0] * om[0] + q[2] * om[2] - q[3] * om[1]),
            h * (q[0] * om[1] - q[1] * om[2] + q[3] * om[0]),
            h * (q[0] * om[2] + q[1] * om[1] - q[2] * om[0]),
        )
        on = wp.length(om)
        mom = vec3(f[3], f[4], f[5]) - on * wp.cw_mul(c_moment, om) + moment
        dom = inertia_inv @ (mom - wp.cross(om, inertia @ om))
        return acc, dq, dom

    @wp.func
    def motor(w: vecr, cmd: vecr, tau_up: vecr, tau_down: vecr):
        """First-order motor lag, tau_up when speeding up."""
        dw = vecr()
        for j in range(r):
            tau = tau_down[j]
            if wp.abs(cmd[j]) > wp.abs(w[j]):
                tau = tau_up[j]
            dw[j] = (cmd[j] - w[j]) / tau
        return dw

    @wp.kernel(enable_backward=False, module="unique")
    def advance(
        p: wp.array2d(dtype=scalar),
        d: wp.array2d(dtype=scalar),
        u: wp.array2d(dtype=scalar),
        x_in: wp.array2d(dtype=scalar),
        tick_in: wp.array(dtype=wp.int64),
        flags_in: wp.array2d(dtype=wp.bool),
        keys: wp.array(dtype=wp.int64),
        x: wp.array2d(dtype=scalar),
        tick: wp.array(dtype=wp.int64),
        flags: wp.array2d(dtype=wp.bool),
        dt: scalar,
        gh: scalar,
        vcrash: scalar,
        substeps: int,
    ):
        n = wp.tid()
        # parameters, read once
        mass = p[0, n]
        inertia = mat3()
        inertia_inv = mat3()
        for i in range(3):
            for j in range(3):
                inertia[i, j] = p[1 + 3 * i + j, n]
                inertia_inv[i, j] = p[10 + 3 * i + j, n]
        kf, tau_up, tau_down, cmd = vecr(), vecr(), vecr(), vecr()
        alloc = mata()
        bad_cmd = False
        for j in range(r):
            kf[j] = p[kf0 + j, n]
            tau_up[j] = p[tup0 + j, n]
            tau_down[j] = p[tdn0 + j, n]
            for i in range(6):
                alloc[i, j] = p[a0 + i * r + j, n]
            if not wp.isfinite(u[n, j]):
                bad_cmd = True
        for j in range(r):  # step.sanitize_command + clamp_command
            c = scalar(0.0)
            if not bad_cmd:
                c = u[n, j]
            cmd[j] = wp.min(wp.max(c, p[wmin0 + j, n]), p[wmax0 + j, n])
        d_lin = vec3(p[dl0, n], p[dl0 + 1, n], p[dl0 + 2, n])
        d_quad = vec3(p[dq0, n], p[dq0 + 1, n], p[dq0 + 2, n])
        c_moment = vec3(p[cm0, n], p[cm0 + 1, n], p[cm0 + 2, n])
        ae, rp, ra = vec6(), matr(), matr()
        if wp.static(aero):
            for i in range(6):
                ae[i] = p[ae0 + i, n]
            for j in range(r):
                for i in range(3):
                    rp[j, i] = p[rp0 + 3 * j + i, n]
                    ra[j, i] = p[ra0 + 3 * j + i, n]
        f_sigma, m_sigma = p[fn0, n], p[fn0 + 1, n]
        wind0 = vec3(d[0, n], d[1, n], d[2, n]) + vec3(d[12, n], d[13, n], d[14, n])  # + wake
        gust_std, gust_tau = d[3, n], d[4, n]
        gs = d[11, n]  # the surface the ground effect sees: the higher of it and the ground
        if wp.static(ground):
            gs = wp.max(gs, gh)
        force0 = vec3(d[5, n], d[6, n], d[7, n])
        moment0 = vec3(d[8, n], d[9, n], d[10, n])
        # state, read once
        pos = vec3(x_in[0, n], x_in[1, n], x_in[2, n])
        vel = vec3(x_in[3, n], x_in[4, n], x_in[5, n])
        q = vec4(x_in[6, n], x_in[7, n], x_in[8, n], x_in[9, n])
        om = vec3(x_in[10, n], x_in[11, n], x_in[12, n])
        w = vecr()
        for j in range(r):
            w[j] = x_in[13 + j, n]
        gust = vec3(x_in[nk, n], x_in[nk + 1, n], x_in[nk + 2, n])
        time = x_in[nk + 3, n]
        t = tick_in[n]
        landed = bool(flags_in[0, n])
        crashed = bool(flags_in[1, n])
        diverged = bool(flags_in[2, n])
        zero3 = vec3()
        sq = wp.sqrt(dt)
        a = wp.exp(-dt / gust_tau)
        s_g = gust_std * wp.sqrt(scalar(1.0) - a * a)
        for _ in range(substeps):
            if diverged:
                break
            # disturbance of this step (step.draw_noise)
            force, moment, g_new = force0, moment0, gust
            if wp.static(stochastic):
                nz = normals9(keys[n], t)
                force = force0 + f_sigma * vec3(nz[0], nz[1], nz[2]) / sq
                moment = moment0 + m_sigma * vec3(nz[3], nz[4], nz[5]) / sq
                g_new = a * gust + s_g * vec3(nz[6], nz[7], nz[8])
            wind = wind0 + g_new
            # integration (math.integrators): Euler or classic RK4 over [pos, vel, q, om, w]
            a1, q1, o1 = rigid(
                pos, q, vel, om, w, kf, alloc, mass, inertia, inertia_inv,
                d_lin, d_quad, c_moment, wind, force, moment, ae, rp, ra, gs,
            )  # fmt: skip
            w1 = motor(w, cmd, tau_up, tau_down)
            p_n, v_n, q_n, o_n, w_n = pos, vel, q, om, w
            if wp.static(rk4):  # classic RK4: k1 + 2 k2 + 2 k3 + k4, stages at dt/2, dt/2, dt
                acc_v, acc_a, acc_q, acc_o, acc_w = (
                    vel,
                    a1,
                    q1,
                    o1,
                    w1,
                )  # the weighted sums of the stages
                ka, kq, ko, kw = a1, q1, o1, w1  # the last stage's derivative
                kv = vel  # and its position derivative
                for s in range(3):
                    hs = scalar(0.5) * dt
                    c = scalar(2.0)
                    if s == 2:
                        hs = dt
                        c = scalar(1.0)
                    v_s, q_s, o_s, w_s = vel + hs * ka, q + hs * kq, om + hs * ko, w + hs * kw
                    p_s = pos + hs * kv
                    ka, kq, ko = rigid(
                        p_s, q_s, v_s, o_s, w_s, kf, alloc, mass, inertia, inertia_inv,
                        d_lin, d_quad, c_moment, wind, force, moment, ae, rp, ra, gs,
                    )  # fmt: skip
                    kv = v_s
                    kw = motor(w_s, cmd, tau_up, tau_down)
                    acc_v, acc_a, acc_q = acc_v + c * v_s, acc_a + c * ka, acc_q + c * kq
                    acc_o, acc_w = acc_o + c * ko, acc_w + c * kw
                c6 = dt / scalar(6.0)
                p_n, v_n, q_n = pos + c6 * acc_v, vel + c6 * acc_a, q + c6 * acc_q
                o_n, w_n = om + c6 * acc_o, w + c6 * acc_w
            else:
                p_n, v_n = pos + dt * vel, vel + dt * a1
                q_n, o_n, w_n = q + dt * q1, om + dt * o1, w + dt * w1
            q_n = q_n / wp.max(wp.length(q_n), scalar(1e-12))
            l_n, c_n = landed, crashed
            if wp.static(ground):  # step.ground_contact
                below = p_n[2] < gh
                c_n = crashed or (below and v_n[2] < -vcrash)
                l_n = below or (landed and p_n[2] <= gh + scalar(1e-6))
                if below:
                    p_n = vec3(p_n[0], p_n[1], gh)
                    v_n = zero3
                    o_n = zero3
            finite = wp.isfinite(p_n) and wp.isfinite(v_n) and wp.isfinite(q_n)
            finite = finite and wp.isfinite(o_n) and wp.isfinite(w_n)
            if not finite or bad_cmd:  # step.divergence_guard
                diverged = True
                break
            pos, vel, q, om, w, gust = p_n, v_n, q_n, o_n, w_n, g_new
            landed, crashed = l_n, c_n
            time = time + dt
            t = t + wp.int64(1)
        for i in range(3):
            x[i, n] = pos[i]
            x[3 + i, n] = vel[i]
            x[10 + i, n] = om[i]
            x[nk + i, n] = gust[i]
        for i in range(4):
            x[6 + i, n] = q[i]
        for j in range(r):
            x[13 + j, n] = w[j]
        x[nk + 3, n] = time
        tick[n] = t
        flags[0, n] = landed
        flags[1, n] = crashed
        flags[2, n] = diverged

    return advance
