"""Small minimum-snap problems in numpy, for planners that refit a short trajectory at every
call (the ``mapper`` planner refits 2-10 segments at 10 Hz per vehicle).

:func:`volary.planning.minsnap.min_snap` is the batched torch implementation (reference); for
one problem of a few segments its per-call overhead (input checks, tensor set-up, evaluation)
is several ms. Here the same problem is solved as one equality-constrained QP on the raw
coefficients (Mellinger & Kumar, ICRA 2011, Sec. IV): per axis and segment i,
p_i(tau) = sum_k c_ik tau^k (k = 0..7, local time tau in [0, T_i]), minimize
sum_i int_0^T_i (p_i'''')^2 dtau = sum_i c_i^T Q_i c_i with

    Q_i[k, l] = k!/(k-4)! l!/(l-4)! T_i^(k+l-7) / (k+l-7)   (k, l >= 4, else 0),

subject to the waypoint positions, derivatives 1..4 continuous at interior waypoints, and the
fixed derivatives at the ends (NaN = free). The KKT system [2Q A^T; A 0] [c; lambda] = [0; b]
is solved once for the three axes (same matrix, three right-hand sides). Positions through snap
are continuous by construction; the optimum is continuous through the 6th derivative (the
Euler-Lagrange conditions of the snap functional), as in the reference. Parity with ``min_snap``
is tested (tests/test_nav_mapper.py).
"""

from __future__ import annotations

import math

import numpy as np

from volary.errors import ConfigError

ORDER = 8  # coefficients per segment (7th-order polynomial)
_FACT = np.array([math.factorial(k) for k in range(ORDER)], dtype=np.float64)


_K = np.arange(ORDER)
# _DCOEF[r, k] = k! / (k - r)! for k >= r (else 0); _DEXP[r, k] = max(k - r, 0)
_DCOEF = np.array([[_FACT[k] / _FACT[k - r] if k >= r else 0.0 for k in _K] for r in range(5)])
_DEXP = np.maximum(_K[None, :] - np.arange(5)[:, None], 0)
_QCOEF = np.outer(_DCOEF[4], _DCOEF[4])  # k!/(k-4)! l!/(l-4)!
_QEXP = np.maximum(_K[:, None] + _K[None, :] - 7, 1)


def _deriv_rows(tau: float) -> np.ndarray:
    """Rows (5, 8): d^r/dtau^r tau^k = k!/(k-r)! tau^(k-r) at tau, r = 0..4, k = 0..7 (one
    set of powers tau^k serves every r)."""
    return _DCOEF * (tau**_K)[_DEXP]


_ROWS0 = _deriv_rows(0.0)  # at the start of a segment


def _snap_hessian(t: float) -> np.ndarray:
    """Q_i of the module docstring (8, 8) for a segment of duration t (s)."""
    return _QCOEF * t**_QEXP / _QEXP


def min_snap_coefficients(
    waypoints: np.ndarray, durations: np.ndarray, start: np.ndarray, end: np.ndarray
) -> np.ndarray:
    """Coefficients (M, 8, 3), ascending powers of local time, of the min-snap trajectory.

    waypoints (W, 3) m, durations (W-1,) s > 0; start / end (3, 3): [velocity, acceleration,
    jerk] x [x, y, z] fixed at the first / last waypoint, NaN = free (a row is free or fixed
    for all three axes together)."""
    wp = np.asarray(waypoints, dtype=np.float64)
    dur = np.asarray(durations, dtype=np.float64)
    m = len(dur)
    if wp.ndim != 2 or wp.shape[1] != 3 or len(wp) != m + 1 or m < 1:
        raise ConfigError(f"waypoints: expected (W >= 2, 3) with W-1 durations, got {wp.shape}")
    if not np.all(np.isfinite(dur)) or np.any(dur <= 0):
        raise ConfigError(f"durations: expected finite values > 0 s, got {dur}")
    n = ORDER * m
    free_start = [bool(np.isnan(start[r]).any()) for r in range(3)]
    free_end = [bool(np.isnan(end[r]).any()) for r in range(3)]
    n_con = 2 + 6 * (m - 1) + free_start.count(False) + free_end.count(False)
    # the KKT system [2Q A^T; A 0] [c; lambda] = [0; b], assembled in place (row c of A is
    # written to row n + c and, transposed, to column n + c)
    kkt = np.zeros((n + n_con, n + n_con))
    rhs_all = np.zeros((n + n_con, 3))
    for i in range(m):
        kkt[ORDER * i : ORDER * (i + 1), ORDER * i : ORDER * (i + 1)] = 2.0 * _snap_hessian(dur[i])
    con = n

    def put(seg: int, row: np.ndarray) -> None:
        kkt[con, ORDER * seg : ORDER * (seg + 1)] = row
        kkt[ORDER * seg : ORDER * (seg + 1), con] = row

    def fix(seg: int, row: np.ndarray, value: np.ndarray) -> None:
        nonlocal con
        put(seg, row)
        rhs_all[con] = value
        con += 1

    fix(0, _ROWS0[0], wp[0])
    for r in range(1, 4):
        if not free_start[r - 1]:
            fix(0, _ROWS0[r], start[r - 1])
    for i in range(m - 1):  # interior waypoint i + 1
        rows = _deriv_rows(dur[i])
        fix(i, rows[0], wp[i + 1])
        fix(i + 1, _ROWS0[0], wp[i + 1])
        for r in range(1, 5):
            put(i, rows[r])
            put(i + 1, -_ROWS0[r])
            con += 1
    rows = _deriv_rows(dur[-1])
    fix(m - 1, rows[0], wp[-1])
    for r in range(1, 4):
        if not free_end[r - 1]:
            fix(m - 1, rows[r], end[r - 1])
    try:
        sol = np.linalg.solve(kkt, rhs_all)
    except np.linalg.LinAlgError:
        sol = np.linalg.lstsq(kkt, rhs_all, rcond=None)[0]
    return sol[:n].reshape(m, ORDER, 3)


def evaluate(
    coeffs: np.ndarray, durations: np.ndarray, times: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Position, velocity, acceleration (K, 3) at ``times`` (K,) s from the start (clamped to
    [0, sum(durations)])."""
    dur = np.asarray(durations, dtype=np.float64)
    knots = np.concatenate([[0.0], np.cumsum(dur)])
    t = np.clip(np.asarray(times, dtype=np.float64), 0.0, knots[-1])
    seg = np.clip(np.searchsorted(knots, t, side="right") - 1, 0, len(dur) - 1)
    tau = t - knots[seg]
    c = coeffs[seg]  # (K, 8, 3)
    k = np.arange(ORDER)
    powers = tau[:, None] ** k  # (K, 8)
    pos = np.einsum("kn,kna->ka", powers, c)
    dp = np.zeros_like(powers)
    dp[:, 1:] = k[1:] * powers[:, :-1]
    vel = np.einsum("kn,kna->ka", dp, c)
    ddp = np.zeros_like(powers)
    ddp[:, 2:] = (k[2:] * (k[2:] - 1)) * powers[:, :-2]
    acc = np.einsum("kn,kna->ka", ddp, c)
    return pos, vel, acc
