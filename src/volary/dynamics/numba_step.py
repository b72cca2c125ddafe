"""The rigid-body physics step as a numba kernel: the small-batch CPU fast path of ``rollout``.

At a handful of envs, a torch step is all dispatch overhead (tens of microseconds per op
graph), whatever the compiler. Here the same equations as :mod:`volary.dynamics.step` run as a
scalar loop, env by env, substep by substep, inside one machine-code call, on the same
structure-of-arrays buffers ``(K, N)`` as the inductor path (:mod:`volary.dynamics.compiled`
packs them). Equation for equation it follows ``compiled.py`` (and so ``models.py``):

- command: non-finite -> 0 and flagged, then clamped into ``[w_min, w_max]``
  (step.sanitize_command, clamp_command);
- noise (FlightGoggles IV-C): nine Box-Muller normals from the counter-based stream of
  :mod:`volary.math.random` (same hash, same draws), force/moment ``sigma n / sqrt(dt)``,
  gust ``a g + std sqrt(1 - a^2) n``, ``a = exp(-dt / tau)``;
- derivative (FlightGoggles IV, EQUATIONS.md): thrust ``k_f w|w|`` through the allocation
  matrix, body drag ``-(D_lin + D_quad |v_b|) v_b`` on the air-relative velocity, aero moment
  ``-|W| C_a W``, Euler's equation with the full inertia, ``dq/dt = q (x) [0, W] / 2``, motor lag
  ``(w_cmd - w) / tau`` with ``tau_up`` when speeding up;
- Euler or classic RK4, quaternion renormalization, ground contact, divergence guard (an env
  with a non-finite result or command keeps its previous state and is flagged).

Parity with the reference (``tests/test_numba_step.py``): stage values are rounded to the
buffer dtype like torch's, but scalar temporaries are float64, so float32 results agree to
float32 rounding, not bit for bit. ``numba`` is imported on first use; the kernel is compiled
once per dtype (about 10 s, cached on disk by numba afterwards).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import numpy as np
import torch
from torch import Tensor

from volary.dynamics.models import GRAVITY
from volary.dynamics.step import DynamicsConfig
from volary.errors import ConfigError, MissingDependencyError
from volary.math.integrators import Integrator

# Row offsets of the packed buffers (compiled._widths order), R = rotor count.
_P_MASS, _P_J, _P_JINV, _P_KF = 0, 1, 10, 19  # then alloc 6R, w_min R, w_max R, tau_up R, ...
_D_WIND, _D_GSTD, _D_GTAU, _D_F, _D_M = 0, 3, 4, 5, 8
_MASK = 0xFFFFFFFF


def _kernels() -> Callable:
    """Compile (on first use) and return the rollout kernel."""
    try:
        import numba
    except ImportError as e:  # pragma: no cover - numba is a core dependency
        raise MissingDependencyError("numba", "fast") from e
    return _build(numba)


@lru_cache(maxsize=1)
def _build(numba) -> Callable:  # noqa: C901 - one kernel, kept together on purpose
    njit = numba.njit(cache=True, nogil=True, fastmath=False, error_model="numpy")
    g = GRAVITY

    @njit
    def hash32(x):
        x = x & _MASK
        x = x ^ (x >> 16)
        x = (x * 0x21F0AAAD) & _MASK
        x = x ^ (x >> 15)
        x = (x * 0x735A2D97) & _MASK
        return x ^ (x >> 15)

    @njit
    def normals(key, tick, u, c, out):
        """random.normal(keys, tick, 9): 10 hashed uniforms, Box-Muller pairs (r cos, r sin).

        ``u`` and the constants ``c = [-2, 2 pi]`` have the buffer dtype, so the uniforms round
        like torch's ``h.to(dtype) + 0.5`` and log/sqrt/cos/sin run in that precision, as in
        torch (float32 libm calls are also several times cheaper than float64 ones)."""
        h0 = hash32(key ^ (tick * 0x85EBCA6B))
        for j in range(10):
            u[j] = hash32(h0 + j * 0xC2B2AE35)
            u[j] = u[j] + 0.5
            u[j] = u[j] / 2.0**32
        for i in range(5):
            r = math.sqrt(c[0] * math.log(u[i]))
            th = c[1] * u[5 + i]
            out[i] = r * math.cos(th)
            if 5 + i < 9:
                out[5 + i] = r * math.sin(th)

    @njit
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

    @njit
    def deriv(p, n, r, x, cmd, ext, f, out):
        """Rigid-body derivative of x = [pos 3, vel 3, quat 4, omega 3, rotor R] (models.py);
        ``f`` (6,) float64 scratch for the rotor wrench."""
        a0 = _P_KF + r
        wmin0 = a0 + 6 * r
        tup0, tdn0 = wmin0 + 2 * r, wmin0 + 3 * r
        dl0 = wmin0 + 4 * r
        f[:] = 0.0
        for j in range(r):
            w = x[13 + j]
            t = p[_P_KF + j, n] * w * abs(w)
            for i in range(6):
                f[i] += p[a0 + i * r + j, n] * t
        qw, qx, qy, qz = x[6], x[7], x[8], x[9]
        vb = rotate(qw, qx, qy, qz, x[3] - ext[0], x[4] - ext[1], x[5] - ext[2], True)
        sp = math.sqrt(vb[0] * vb[0] + vb[1] * vb[1] + vb[2] * vb[2])
        fb0 = f[0] - (p[dl0, n] + p[dl0 + 3, n] * sp) * vb[0]
        fb1 = f[1] - (p[dl0 + 1, n] + p[dl0 + 4, n] * sp) * vb[1]
        fb2 = f[2] - (p[dl0 + 2, n] + p[dl0 + 5, n] * sp) * vb[2]
        fw = rotate(qw, qx, qy, qz, fb0, fb1, fb2, False)
        m = p[_P_MASS, n]
        out[0], out[1], out[2] = x[3], x[4], x[5]
        out[3] = (fw[0] + ext[3]) / m
        out[4] = (fw[1] + ext[4]) / m
        out[5] = -g + (fw[2] + ext[5]) / m
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
        jx = p[_P_J, n] * ox + p[_P_J + 1, n] * oy + p[_P_J + 2, n] * oz
        jy = p[_P_J + 3, n] * ox + p[_P_J + 4, n] * oy + p[_P_J + 5, n] * oz
        jz = p[_P_J + 6, n] * ox + p[_P_J + 7, n] * oy + p[_P_J + 8, n] * oz
        bx = mx - (oy * jz - oz * jy)
        by = my - (oz * jx - ox * jz)
        bz = mz - (ox * jy - oy * jx)
        for i in range(3):
            k = _P_JINV + 3 * i
            out[10 + i] = p[k, n] * bx + p[k + 1, n] * by + p[k + 2, n] * bz
        for j in range(r):
            w = x[13 + j]
            tau = p[tup0 + j, n] if abs(cmd[j]) > abs(w) else p[tdn0 + j, n]
            out[13 + j] = (cmd[j] - w) / tau

    @njit
    def step_env(p, d, x, cmd, ext, gust, key, tick, n, r, dt, rk4, stochastic, sc, ks, tmp):
        """One physics step of env n: noise, wind/wrench, integration; x updated in place."""
        fn0 = _P_KF + 11 * r + 9  # force_noise row
        noise, f = sc[0:9], sc[9:15]
        if stochastic:
            normals(key, tick, sc[15:25], sc[25:27], noise)
            sq = math.sqrt(dt)
            a = math.exp(-dt / d[_D_GTAU, n])
            s = d[_D_GSTD, n] * math.sqrt(1.0 - a * a)
            for i in range(3):
                ext[3 + i] = d[_D_F + i, n] + p[fn0, n] * noise[i] / sq
                ext[6 + i] = d[_D_M + i, n] + p[fn0 + 1, n] * noise[3 + i] / sq
                gust[i] = a * gust[i] + s * noise[6 + i]
        else:
            for i in range(3):
                ext[3 + i] = d[_D_F + i, n]
                ext[6 + i] = d[_D_M + i, n]
        for i in range(3):
            ext[i] = d[_D_WIND + i, n] + gust[i]
        k = x.size
        if not rk4:
            deriv(p, n, r, x, cmd, ext, f, ks[0])
            for i in range(k):
                x[i] = x[i] + dt * ks[0, i]
            return
        deriv(p, n, r, x, cmd, ext, f, ks[0])
        for s, h in ((1, 0.5 * dt), (2, 0.5 * dt), (3, dt)):
            for i in range(k):
                tmp[i] = x[i] + h * ks[s - 1, i]
            deriv(p, n, r, tmp, cmd, ext, f, ks[s])
        for i in range(k):
            x[i] = x[i] + (dt / 6.0) * (ks[0, i] + 2.0 * ks[1, i] + 2.0 * ks[2, i] + ks[3, i])

    @njit
    def rollout(
        p,
        d,
        xin,
        u,
        tick,
        flags,
        keys,
        substeps,
        dt,
        rk4,
        stochastic,
        ground,
        gh,
        vcrash,
    ):
        """``substeps`` physics steps of every env with the command held (step.rollout);
        returns the new (x, tick, flags) buffers."""
        xout = np.empty_like(xin)
        tick_out = np.empty_like(tick)
        flags_out = np.empty_like(flags)
        r = u.shape[1]
        nk = 13 + r
        dtype = xin.dtype
        x = np.empty(nk, dtype)
        cmd = np.empty(r, dtype)
        ks = np.empty((4, nk), dtype)
        tmp = np.empty(nk, dtype)
        ext = np.empty(9, dtype)
        gust = np.empty(3, dtype)
        sc = np.empty(27, dtype)  # scratch: noise 9, wrench 6, uniforms 10, constants 2
        sc[25], sc[26] = -2.0, 2.0 * math.pi
        wmin0 = _P_KF + 7 * r
        for n in range(xin.shape[1]):
            for i in range(xin.shape[0]):
                xout[i, n] = xin[i, n]
            t = tick[n]
            landed, crashed, diverged = flags[0, n], flags[1, n], flags[2, n]
            bad_cmd = False
            for j in range(r):
                c = u[n, j]
                bad_cmd = bad_cmd or not math.isfinite(c)
            for j in range(r):
                c = u[n, j] if not bad_cmd else 0.0
                cmd[j] = min(max(c, p[wmin0 + j, n]), p[wmin0 + r + j, n])
            for _ in range(substeps):
                if diverged:
                    break
                for i in range(nk):
                    x[i] = xout[i, n]
                for i in range(3):
                    gust[i] = xout[nk + i, n]
                step_env(
                    p, d, x, cmd, ext, gust, keys[n], t, n, r, dt, rk4, stochastic, sc, ks, tmp
                )
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
                    xout[i, n] = x[i]
                for i in range(3):
                    xout[nk + i, n] = gust[i]
                xout[nk + 3, n] = xout[nk + 3, n] + dt
                t += 1
                landed, crashed = new_landed, new_crashed
            tick_out[n] = t
            flags_out[0, n], flags_out[1, n], flags_out[2, n] = landed, crashed, diverged
        return xout, tick_out, flags_out

    return rollout


class _NumpyViews:
    """``tensor.numpy()`` of recently seen tensors: parameters, disturbances and keys are the
    same tensors call after call, and the state passed in is usually the last call's output
    (``.numpy()`` costs about half a microsecond, a tenth of a small step)."""

    SIZE = 8

    def __init__(self) -> None:
        self.items: list[tuple[Tensor, np.ndarray]] = []

    def get(self, t: Tensor) -> np.ndarray:
        for k, a in self.items:
            if k is t:
                return a
        a = t.numpy()
        self.put(t, a)
        return a

    def put(self, t: Tensor, a: np.ndarray) -> None:
        self.items = [(t, a), *self.items[: self.SIZE - 1]]


def soa_rollout(cfg: DynamicsConfig, substeps: int) -> Callable:
    """``run(pbuf, dbuf, xbuf, command, tick, flags, keys) -> (x, tick, flags)`` on CPU SoA
    buffers (``compiled._soa_rollout``'s signature, but the command stays ``(N, R)``),
    ``substeps`` steps in one kernel call."""
    kernel = _kernels()
    rk4 = Integrator(cfg.integrator) == Integrator.RK4
    consts = (
        int(substeps),
        float(cfg.dt),
        rk4,
        bool(cfg.stochastic),
        bool(cfg.ground),
        float(cfg.ground_height),
        float(cfg.crash_speed),
    )
    views = _NumpyViews()

    def run(
        pbuf: Tensor,
        dbuf: Tensor,
        xbuf: Tensor,
        command: Tensor,
        tick: Tensor,
        flags: Tensor,
        keys: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor]:
        if xbuf.device.type != "cpu":
            raise ConfigError(f"compile='numba': expected CPU tensors, got {xbuf.device}")
        g = views.get
        out = kernel(g(pbuf), g(dbuf), g(xbuf), g(command), g(tick), g(flags), g(keys), *consts)
        x, t, fl = (torch.from_numpy(a) for a in out)
        for tensor, array in zip((x, t, fl), out, strict=True):
            views.put(tensor, array)
        return x, t, fl

    return run
