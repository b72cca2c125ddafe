"""numba kernels of the rigid-body physics step, defined at module level so numba caches them.

Importing this module imports numba; :mod:`volary.dynamics.numba_step` and the fused closed
loop (:mod:`volary.sim.fused`) import it on first use. Kernels compiled with ``cache=True`` at
module level are written to numba's on-disk cache (``__pycache__`` beside this file, or numba's
user cache directory when that is read-only) and loaded by later processes in well under a
second; functions built inside a closure are not cached by numba, which is why nothing here is.

Equation for equation this follows :mod:`volary.dynamics.compiled` (and so ``models.py`` and
``step.py``):

- noise (FlightGoggles IV-C): Box-Muller normals from the counter-based stream of
  :mod:`volary.math.random` (same hash, same draws), force/moment ``sigma n / sqrt(dt)``,
  gust ``a g + std sqrt(1 - a^2) n``, ``a = exp(-dt / tau)``;
- derivative (FlightGoggles IV, EQUATIONS.md): thrust ``k_f w|w|`` through the allocation
  matrix, body drag ``-(D_lin + D_quad |v_b|) v_b`` on the air-relative velocity, aero moment
  ``-|W| C_a W``, Euler's equation with the full inertia, ``dq/dt = q (x) [0, W] / 2``, motor lag
  ``(w_cmd - w) / tau`` with ``tau_up`` when speeding up;
- Euler or classic RK4, quaternion renormalization, ground contact, divergence guard.

Stage values are rounded to the buffer dtype like torch's; scalar temporaries are float64.
"""

from __future__ import annotations

import math

import numba
import numpy as np

import volary.dynamics.aero as aero
from volary.dynamics.models import GRAVITY
from volary.numba_cache import guard

NUMBA_SOURCES = guard(__file__, aero)  # drop cached kernels built from an older aero.py

# Row offsets of the packed parameter and disturbance buffers (compiled._widths order), with
# R the rotor count: mass, inertia 9, inertia_inv 9, k_f R, alloc 6R, w_min R, w_max R,
# tau_up R, tau_down R, drag_lin 3, drag_quad 3, drag_moment 3, force_noise, moment_noise,
# aero 6, rotor_pos 3R, rotor_axis 3R.
P_MASS, P_J, P_JINV, P_KF = 0, 1, 10, 19
D_WIND, D_GSTD, D_GTAU, D_F, D_M, D_SURF, D_WAKE = 0, 3, 4, 5, 8, 11, 12
_MASK = 0xFFFFFFFF
_G = GRAVITY

jit = numba.njit(cache=True, nogil=True, fastmath=False, error_model="numpy")
# inlined into the caller by numba itself (its IR), whatever LLVM's inlining budget decides
jit_inline = numba.njit(
    cache=True, nogil=True, fastmath=False, error_model="numpy", inline="always"
)
rotor_aero = jit(aero.rotor_aero)  # the one source of the rotor aerodynamics (aero.py)
H_MIN, H_MAX = aero.H_MIN, aero.H_MAX


@jit
def hash32(x):
    """math.random.hash32 (lowbias32 constants)."""
    x = x & _MASK
    x = x ^ (x >> 16)
    x = (x * 0x21F0AAAD) & _MASK
    x = x ^ (x >> 15)
    x = (x * 0x735A2D97) & _MASK
    return x ^ (x >> 15)


@jit
def normals(key, tick, count, u, c, out):
    """math.random.normal(keys, tick, count) for one key: 2m hashed uniforms (m = ceil(count/2)),
    Box-Muller pairs, cosines first then sines.

    ``u`` (>= 2m) and the constants ``c = [-2, 2 pi]`` have the buffer dtype, so the uniforms
    round like torch's ``h.to(dtype) + 0.5`` and log/sqrt/cos/sin run in that precision."""
    m = (count + 1) // 2
    h0 = hash32(key ^ (tick * 0x85EBCA6B))
    for j in range(2 * m):
        u[j] = hash32(h0 + j * 0xC2B2AE35)
        u[j] = u[j] + 0.5
        u[j] = u[j] / 2.0**32
    for i in range(m):
        r = math.sqrt(c[0] * math.log(u[i]))
        th = c[1] * u[m + i]
        out[i] = r * math.cos(th)
        if m + i < count:
            out[m + i] = r * math.sin(th)


@jit
def rotate(qw, qx, qy, qz, vx, vy, vz, inverse):
    """R(q) v (or R(q)^T v): v + 2w (u x v) + u x (2 u x v)."""
    if inverse:
        qx, qy, qz = -qx, -qy, -qz
    tx = 2.0 * (qy * vz - qz * vy)
    ty = 2.0 * (qz * vx - qx * vz)
    tz = 2.0 * (qx * vy - qy * vx)
    return (
        vx + qw * tx + (qy * tz - qz * ty),
        vy + qw * ty + (qz * tx - qx * tz),
        vz + qw * tz + (qx * ty - qy * tx),
    )


@jit
def aero_wrench(p, n, r, x, vb, gh, f):
    """The rotor wrench with aero.rotor_aero (A1-A6) per rotor into ``f`` (models.py with
    ``params.has_aero``): thrusts through the allocation plus H-forces and moments; ``gh`` the
    height of the surface under the vehicle (-inf: none)."""
    a0 = P_KF + r
    ae0 = a0 + 10 * r + 11
    rp0, ra0 = ae0 + 6, ae0 + 6 + 3 * r
    kd, kz, kfl, kax, ktl, rho = p[ae0, n], p[ae0 + 1, n], p[ae0 + 2, n], p[ae0 + 3, n], \
        p[ae0 + 4, n], p[ae0 + 5, n]  # fmt: skip
    lo = max(0.5 * rho, H_MIN)
    qw, qx, qy, qz = x[6], x[7], x[8], x[9]
    f[:] = 0.0
    e0 = e1 = e2 = e3 = e4 = e5 = 0.0
    for j in range(r):
        rx, ry, rz = p[rp0 + 3 * j, n], p[rp0 + 3 * j + 1, n], p[rp0 + 3 * j + 2, n]
        hub = rotate(qw, qx, qy, qz, rx, ry, rz, False)
        h = min(max(x[2] + hub[2] - gh, lo), H_MAX)
        w = x[13 + j]
        out = rotor_aero(
            w, p[P_KF + j, n] * w * abs(w), vb[0], vb[1], vb[2], x[10], x[11], x[12],
            rx, ry, rz, p[ra0 + 3 * j, n], p[ra0 + 3 * j + 1, n], p[ra0 + 3 * j + 2, n],
            h, kd, kz, kfl, kax, ktl, rho,
        )  # fmt: skip
        for i in range(6):
            f[i] += p[a0 + i * r + j, n] * out[0]
        e0, e1, e2 = e0 + out[1], e1 + out[2], e2 + out[3]
        e3, e4, e5 = e3 + out[4], e4 + out[5], e5 + out[6]
    f[0], f[1], f[2] = f[0] + e0, f[1] + e1, f[2] + e2
    f[3], f[4], f[5] = f[3] + e3, f[4] + e4, f[5] + e5


@jit
def has_aero(p, n, r):
    """Whether env n has a rotor-aerodynamics coefficient (VehicleParams.aero)."""
    ae0 = P_KF + 11 * r + 11
    on = False
    for i in range(6):
        on = on or p[ae0 + i, n] != 0.0
    return on


@jit_inline
def deriv(p, n, r, x, cmd, ext, f, out):
    """Rigid-body derivative of x = [pos 3, vel 3, quat 4, omega 3, rotor R] (models.py) with
    ideal rotors; ``f`` (6,) float64 scratch for the rotor wrench; ``ext`` = [wind 3, force 3,
    moment 3, surface height for the ground effect (-inf: none), rotor aerodynamics on (1) or
    off (0), wind + wake 3], the last five set once per :func:`advance`."""
    a0 = P_KF + r
    f[:] = 0.0
    for j in range(r):
        w = x[13 + j]
        t = p[P_KF + j, n] * w * abs(w)
        for i in range(6):
            f[i] += p[a0 + i * r + j, n] * t
    vb = rotate(x[6], x[7], x[8], x[9], x[3] - ext[0], x[4] - ext[1], x[5] - ext[2], True)
    body_deriv(p, n, r, x, cmd, ext, f, vb, out)


@jit
def deriv_aero(p, n, r, x, cmd, ext, f, out):
    """:func:`deriv` with the rotor aerodynamics (aero.py) in the rotor wrench. A function of
    its own: with the aero branch inside :func:`deriv` the ideal-rotor kernel ran ~30 % slower
    (64 envs, 8 substeps), the code the compiler made for it no longer as tight."""
    vb = rotate(x[6], x[7], x[8], x[9], x[3] - ext[0], x[4] - ext[1], x[5] - ext[2], True)
    aero_wrench(p, n, r, x, vb, ext[9], f)
    body_deriv(p, n, r, x, cmd, ext, f, vb, out)


@jit_inline
def body_deriv(p, n, r, x, cmd, ext, f, vb, out):
    """The derivative given the body-frame rotor wrench ``f`` and air velocity ``vb``: drag,
    gravity, external wrench, Euler's equation, quaternion kinematics, motor lag."""
    wmin0 = P_KF + 7 * r
    tup0, tdn0 = wmin0 + 2 * r, wmin0 + 3 * r
    dl0 = wmin0 + 4 * r
    qw, qx, qy, qz = x[6], x[7], x[8], x[9]
    sp = math.sqrt(vb[0] * vb[0] + vb[1] * vb[1] + vb[2] * vb[2])
    fb0 = f[0] - (p[dl0, n] + p[dl0 + 3, n] * sp) * vb[0]
    fb1 = f[1] - (p[dl0 + 1, n] + p[dl0 + 4, n] * sp) * vb[1]
    fb2 = f[2] - (p[dl0 + 2, n] + p[dl0 + 5, n] * sp) * vb[2]
    fw = rotate(qw, qx, qy, qz, fb0, fb1, fb2, False)
    m = p[P_MASS, n]
    out[0], out[1], out[2] = x[3], x[4], x[5]
    out[3] = (fw[0] + ext[3]) / m
    out[4] = (fw[1] + ext[4]) / m
    out[5] = -_G + (fw[2] + ext[5]) / m
    ox, oy, oz = x[10], x[11], x[12]
    out[6] = 0.5 * (-qx * ox - qy * oy - qz * oz)
    out[7] = 0.5 * (qw * ox + qy * oz - qz * oy)
    out[8] = 0.5 * (qw * oy - qx * oz + qz * ox)
    out[9] = 0.5 * (qw * oz + qx * oy - qy * ox)
    on = math.sqrt(ox * ox + oy * oy + oz * oz)
    cm0 = dl0 + 6
    mx = f[3] - on * p[cm0, n] * ox + ext[6]
    my = f[4] - on * p[cm0 + 1, n] * oy + ext[7]
    mz = f[5] - on * p[cm0 + 2, n] * oz + ext[8]
    jx = p[P_J, n] * ox + p[P_J + 1, n] * oy + p[P_J + 2, n] * oz
    jy = p[P_J + 3, n] * ox + p[P_J + 4, n] * oy + p[P_J + 5, n] * oz
    jz = p[P_J + 6, n] * ox + p[P_J + 7, n] * oy + p[P_J + 8, n] * oz
    bx = mx - (oy * jz - oz * jy)
    by = my - (oz * jx - ox * jz)
    bz = mz - (ox * jy - oy * jx)
    for i in range(3):
        k = P_JINV + 3 * i
        out[10 + i] = p[k, n] * bx + p[k + 1, n] * by + p[k + 2, n] * bz
    for j in range(r):
        w = x[13 + j]
        tau = p[tup0 + j, n] if abs(cmd[j]) > abs(w) else p[tdn0 + j, n]
        out[13 + j] = (cmd[j] - w) / tau


@jit
def step_env(p, d, x, cmd, ext, gust, key, tick, n, r, dt, rk4, stochastic, sc, ks, tmp):
    """One physics step of env n: noise, wind/wrench, integration; x updated in place.

    ``sc`` (27,) buffer-dtype scratch: noise 9, wrench 6 (float64 use), uniforms 10,
    constants [-2, 2 pi] at 25..26."""
    fn0 = P_KF + 11 * r + 9  # force_noise row
    noise, f = sc[0:9], sc[9:15]
    if stochastic:
        normals(key, tick, 9, sc[15:25], sc[25:27], noise)
        sq = math.sqrt(dt)
        a = math.exp(-dt / d[D_GTAU, n])
        s = d[D_GSTD, n] * math.sqrt(1.0 - a * a)
        for i in range(3):
            ext[3 + i] = d[D_F + i, n] + p[fn0, n] * noise[i] / sq
            ext[6 + i] = d[D_M + i, n] + p[fn0 + 1, n] * noise[3 + i] / sq
            gust[i] = a * gust[i] + s * noise[6 + i]
    else:
        for i in range(3):
            ext[3 + i] = d[D_F + i, n]
            ext[6 + i] = d[D_M + i, n]
    for i in range(3):
        ext[i] = ext[11 + i] + gust[i]  # (wind + wake) + gust
    k = x.size
    aero = ext[10] != 0.0  # the env has rotor aerodynamics (has_aero, once per advance)
    if not rk4:
        if aero:
            deriv_aero(p, n, r, x, cmd, ext, f, ks[0])
        else:
            deriv(p, n, r, x, cmd, ext, f, ks[0])
        for i in range(k):
            x[i] = x[i] + dt * ks[0, i]
        return
    if aero:
        deriv_aero(p, n, r, x, cmd, ext, f, ks[0])
    else:
        deriv(p, n, r, x, cmd, ext, f, ks[0])
    for s, h in ((1, 0.5 * dt), (2, 0.5 * dt), (3, dt)):
        for i in range(k):
            tmp[i] = x[i] + h * ks[s - 1, i]
        if aero:
            deriv_aero(p, n, r, tmp, cmd, ext, f, ks[s])
        else:
            deriv(p, n, r, tmp, cmd, ext, f, ks[s])
    for i in range(k):
        x[i] = x[i] + (dt / 6.0) * (ks[0, i] + 2.0 * ks[1, i] + 2.0 * ks[2, i] + ks[3, i])


@jit
def sanitize(p, n, r, u, cmd):
    """step.sanitize_command + clamp_command of env n's command row ``u`` into ``cmd``;
    returns whether it was non-finite (then it is zeroed before clamping)."""
    wmin0 = P_KF + 7 * r
    bad = False
    for j in range(r):
        bad = bad or not math.isfinite(u[j])
    for j in range(r):
        c = u[j] if not bad else 0.0
        cmd[j] = min(max(c, p[wmin0 + j, n]), p[wmin0 + r + j, n])
    return bad


@jit
def advance(p, d, xb, flags, tick, keys, n, r, cmd, bad_cmd, phys, iphys, scratch):
    """``substeps`` physics steps of env n with ``cmd`` held, in place on the (K, N) state
    buffer ``xb``, the (3, N) flags [landed, crashed, diverged] and the (N,) ticks.

    ``phys`` = [dt, ground height, crash speed]; ``iphys`` = [substeps, rk4, stochastic,
    ground]; ``scratch`` = (x, ks, tmp, ext, gust, sc) of the buffer dtype."""
    x, ks, tmp, ext, gust, sc = scratch
    dt, gh, vcrash = phys[0], phys[1], phys[2]
    substeps, rk4, stochastic, ground = iphys[0], iphys[1] != 0, iphys[2] != 0, iphys[3] != 0
    nk = 13 + r
    t = tick[n]
    landed, crashed, diverged = flags[0, n], flags[1, n], flags[2, n]
    ext[9] = max(gh, d[D_SURF, n]) if ground else d[D_SURF, n]  # the ground effect's surface
    ext[10] = 1.0 if has_aero(p, n, r) else 0.0
    for i in range(3):  # read once per call, not per substep
        ext[11 + i] = d[D_WIND + i, n] + d[D_WAKE + i, n]
    for _ in range(substeps):
        if diverged:
            break
        for i in range(nk):
            x[i] = xb[i, n]
        for i in range(3):
            gust[i] = xb[nk + i, n]
        step_env(p, d, x, cmd, ext, gust, keys[n], t, n, r, dt, rk4, stochastic, sc, ks, tmp)
        qn = max(math.sqrt(x[6] ** 2 + x[7] ** 2 + x[8] ** 2 + x[9] ** 2), 1e-12)
        for i in range(6, 10):
            x[i] = x[i] / qn
        new_landed, new_crashed = landed, crashed
        if ground:
            below = x[2] < gh
            new_crashed = crashed or (below and x[5] < -vcrash)
            new_landed = below or (landed and x[2] <= gh + 1e-6)
            if below:
                x[2] = gh
                for i in (3, 4, 5, 10, 11, 12):
                    x[i] = 0.0
        finite = True
        for i in range(nk):
            finite = finite and math.isfinite(x[i])
        if not finite or bad_cmd:
            diverged = True
            break
        for i in range(nk):
            xb[i, n] = x[i]
        for i in range(3):
            xb[nk + i, n] = gust[i]
        xb[nk + 3, n] = xb[nk + 3, n] + dt
        t += 1
        landed, crashed = new_landed, new_crashed
    tick[n] = t
    flags[0, n], flags[1, n], flags[2, n] = landed, crashed, diverged


@jit
def make_scratch(nk, dtype_like):
    """Per-thread scratch of :func:`advance` in the dtype of ``dtype_like``."""
    dt = dtype_like.dtype
    sc = np.empty(27, dt)
    sc[25], sc[26] = -2.0, 2.0 * math.pi
    return (
        np.empty(nk, dt),
        np.empty((4, nk), dt),
        np.empty(nk, dt),
        np.empty(14, dt),
        np.empty(3, dt),
        sc,
    )


@jit
def advance_all(p, d, x, u, tick, flags, keys, phys, iphys):
    """``substeps`` physics steps of every env with the command ``u`` (N, R) held, in place on
    the (K, N) state ``x``, the (N,) ticks and the (3, N) flags (step.rollout)."""
    r = u.shape[1]
    scratch = make_scratch(13 + r, x)
    cmd = np.empty(r, x.dtype)
    for n in range(x.shape[1]):
        bad = sanitize(p, n, r, u[n], cmd)
        advance(p, d, x, flags, tick, keys, n, r, cmd, bad, phys, iphys, scratch)
