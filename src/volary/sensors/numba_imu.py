"""The IMU update of one env as a numba function: the fused closed loop's IMU.

Same model and noise stream as :class:`volary.sensors.imu.Imu` (the reference; FlightGoggles
IV-E, Aerial Gym III-D2, EQUATIONS.md): a_meas = R^T (dv/dt - g) + b_a + n_a, w_meas = W + b_w +
n_w, biases walking by N(0, sigma_b^2 dt) per update, white noise of density sigma sampled at
``rate_hz`` with std sigma sqrt(rate_hz), readings held between samples.

State of env n in the (12, N) buffer ``ib``: accel bias 0..2, gyro bias 3..5, held reading
(accel 6..8, gyro 9..11); ``clock`` (N,) seconds since the last sample (< 0: just reset);
``tick`` (N,) int64 noise counter. ``cfg`` = [accel bias walk, gyro bias walk, accel noise
density, gyro noise density, rate_hz]. Importing this module imports numba.
"""

from __future__ import annotations

import math

from volary.dynamics import numba_kernels
from volary.dynamics.numba_kernels import jit, normals, rotate
from volary.numba_cache import guard

NUMBA_SOURCES = guard(__file__, numba_kernels)

_G = 9.81  # sensors.imu's gravity


@jit
def imu_update(ib, clock, tick, key, n, q, om, acc_w, dt, cfg, u, cc, nz):
    """Advance env n's IMU by ``dt`` s given attitude ``q`` (4,), body rates ``om`` (3,) and the
    world acceleration ``acc_w`` (3,) of the period (Imu.__call__). ``u`` (12,) and ``cc``
    [-2, 2 pi] are buffer-dtype scratch for the draws, ``nz`` (12,) receives them."""
    normals(key, tick[n], 12, u, cc, nz)
    tick[n] += 1
    sdt = math.sqrt(dt)
    for i in range(3):
        ib[i, n] = ib[i, n] + cfg[0] * sdt * nz[i]
        ib[3 + i, n] = ib[3 + i, n] + cfg[1] * sdt * nz[3 + i]
    sq = math.sqrt(cfg[4])
    f = rotate(q[0], q[1], q[2], q[3], acc_w[0], acc_w[1], acc_w[2] + _G, True)
    period = 1.0 / cfg[4]
    fresh = clock[n] < 0
    tk = clock[n] + dt
    due = fresh or tk >= period - 1e-9
    clock[n] = 0.0 if fresh else (tk - period if due else tk)
    if due:
        for i in range(3):
            ib[6 + i, n] = (f[i] + ib[i, n]) + cfg[2] * sq * nz[6 + i]
            ib[9 + i, n] = (om[i] + ib[3 + i, n]) + cfg[3] * sq * nz[9 + i]
