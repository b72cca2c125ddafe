"""Minimum-snap piecewise 7th-order polynomials through waypoints, solved in closed form.

One segment (BoundaryPredictor, paper 002 Sec. III-A, eq. 1-2): the boundary conditions
b = [x, x', x'', x'''] at t = 0 and t = T fix the 8 coefficients of a 7th-order polynomial
through the linear system A p = [b_0; b_f] (:func:`single_segment`).

Many segments (Mellinger & Kumar, ICRA 2011, Sec. IV): minimize sum_i int_0^T_i (p_i'''')^2 dt
over piecewise 7th-order polynomials through the waypoints. We solve the QP in closed form in
the unconstrained form of Richter, Bry & Roy (ISRR 2013, Sec. 3): the unknowns are the
derivatives d_j = [p, p', p'', p'''] at every waypoint j, shared by the two segments meeting
there (so position through jerk are continuous by construction); each segment's coefficients
are eq. 2 applied to (d_j, d_j+1), so the cost is a quadratic form d^T H d; fixed entries
(positions, boundary conditions, user-fixed derivatives) move to the right-hand side and the
free ones solve H_FF d_F = -H_FP d_P. At every joint whose jerk is free the optimality
condition makes snap continuous too (and the 5th and 6th derivatives where acceleration and
velocity are free): the natural boundary conditions of int (p'''')^2 are continuity of
p'''' , p^(5), p^(6) wherever p''', p'', p' may vary.

Numerics: float64; each segment is mapped to unit time (tau = s T), so the per-segment cost
is T^-7 S H_1 S with H_1 a fixed 8x8 matrix and S = diag(T^k); the system is Jacobi-scaled,
batched over independent problems and the four flat axes [x, y, z, yaw] (which share the
segment times), and solved densely by Cholesky (the reference; small problems) or by block
elimination over the waypoints on its block-tridiagonal structure (O(W); large problems and
batches); a test checks that both agree. The two round differently in the last bits, so a
problem's trajectory depends on which one solved it: ``method="auto"`` picks by the whole
batch's size, and a problem solved alone and the same problem solved among many can differ in
the last bits (1e-9 in a 13-waypoint problem's coefficients: enough for a closed loop that
replans to fly differently after seconds). Pass
``method="dense"`` or ``"banded"`` where a problem must come out the same in any batch.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch
from torch import Tensor

from volary.errors import ConfigError
from volary.planning.trajectory import N_AXES, PolyTrajectory

N_COEFFS = 8  # 7th-order polynomial
N_BC = 4  # boundary conditions per end: position, velocity, acceleration, jerk (eq. 1)
DUPLICATE_TOL = 1e-9  # m (and rad): consecutive waypoints closer than this are duplicates
DENSE_MAX_ELEMENTS = 32 * 32  # problems x waypoints^2 up to which the dense solve is used
SOLVE_METHODS = ("auto", "dense", "banded")  # min_snap(method=...)


@lru_cache(maxsize=1)
def _unit_matrices() -> tuple[np.ndarray, np.ndarray]:
    """(A_1^-1, H_1) for the unit segment s in [0, 1] (ascending coefficients).

    A_1 is eq. 2's boundary matrix at T = 1; H_1 = A_1^-T Q_1 A_1^-1 is the snap cost of a unit
    segment as a quadratic form in its scaled boundary conditions [b_0; b_1].
    """
    a = np.zeros((2 * N_BC, N_COEFFS))
    for r in range(N_BC):
        a[r, r] = math.factorial(r)
        for k in range(r, N_COEFFS):
            a[N_BC + r, k] = math.factorial(k) / math.factorial(k - r)
    a_inv = np.linalg.inv(a)
    f = np.array([math.factorial(k) / math.factorial(k - 4) if k >= 4 else 0.0 for k in range(8)])
    e = np.maximum(np.add.outer(np.arange(8), np.arange(8)) - 7, 1)
    q = np.outer(f, f) / e
    return a_inv, a_inv.T @ q @ a_inv


def _unit(dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor]:
    a_inv, h1 = _unit_matrices()
    return (
        torch.as_tensor(a_inv, dtype=dtype, device=device),
        torch.as_tensor(h1, dtype=dtype, device=device),
    )


def _bc_powers(durations: Tensor) -> Tensor:
    """(..., 8) T^k for the scaled boundary vector [b_0; b_f] (k = derivative order 0..3 twice)."""
    k = torch.arange(N_BC, dtype=durations.dtype, device=durations.device).repeat(2)
    return durations[..., None] ** k


def single_segment(b0: Tensor, bf: Tensor, duration: Tensor | float) -> Tensor:
    """Coefficients (..., 8), ascending powers of t, of the 7th-order polynomial with boundary
    conditions ``b0`` at t = 0 and ``bf`` at t = T (BoundaryPredictor eq. 1-2).

    ``b0``, ``bf``: (..., 4) [x, x', x'', x'''] in SI units; ``duration`` T > 0 s, (...,).
    The paper orders coefficients [p_7, ..., p_0]; this returns [p_0, ..., p_7] (flip to
    compare). Solved in unit time: p = diag(T^-k) A_1^-1 S [b0; bf], S = diag(T^k).
    """
    b0, bf = torch.as_tensor(b0), torch.as_tensor(bf)
    t = torch.as_tensor(duration, dtype=b0.dtype, device=b0.device)
    if not bool(torch.isfinite(t).all()) or bool((t <= 0).any()):
        raise ConfigError(f"duration: expected finite values > 0 s, got {t.tolist()}")
    a_inv, _ = _unit(b0.dtype, b0.device)
    b = torch.cat((b0, bf), dim=-1) * _bc_powers(t)
    k = torch.arange(N_COEFFS, dtype=b0.dtype, device=b0.device)
    return (b @ a_inv.T) / t[..., None] ** k


def snap_hessian(durations: Tensor) -> Tensor:
    """H (..., 4(M+1), 4(M+1)): total snap cost sum_i int (p_i'''')^2 = d^T H d for the stacked
    waypoint derivatives d = [p_0, p_0', p_0'', p_0''', p_1, ...] (Richter et al. 2013, Sec. 3)."""
    m = durations.shape[-1]
    n = N_BC * (m + 1)
    _, h1 = _unit(durations.dtype, durations.device)
    kk = torch.arange(N_BC, device=durations.device).repeat(2).to(durations.dtype)
    expo = kk[:, None] + kk[None, :] - 7
    seg = h1 * durations[..., None, None] ** expo  # (..., M, 8, 8)
    local = torch.arange(2 * N_BC, device=durations.device)
    rows = N_BC * torch.arange(m, device=durations.device)[:, None] + local  # (M, 8)
    flat = (rows[:, :, None] * n + rows[:, None, :]).reshape(-1)
    h = torch.zeros(*durations.shape[:-1], n * n, dtype=durations.dtype, device=durations.device)
    h = h.index_add(-1, flat, seg.reshape(*durations.shape[:-1], -1))
    return h.reshape(*durations.shape[:-1], n, n)


def solve_derivatives(h: Tensor, values: Tensor, fixed: Tensor) -> Tensor:
    """Minimize d^T H d with d_i = values_i where ``fixed``; returns d (..., A, n).

    H: (..., n, n) shared by the A axes; values, fixed: (..., A, n). Rows of fixed entries
    become identity rows, so every axis may fix a different set; Jacobi-scaled Cholesky.
    """
    free = ~fixed
    hb = h[..., None, :, :]
    pair = free[..., :, None] & free[..., None, :]
    eye = torch.diag_embed(fixed.to(h.dtype))
    k = torch.where(pair, hb, torch.zeros_like(hb)) + eye
    vals = torch.where(fixed, values, torch.zeros_like(values))
    rhs = torch.where(free, -(hb @ vals[..., None])[..., 0], vals)
    scale = torch.diagonal(k, dim1=-2, dim2=-1).clamp_min(1e-300).rsqrt()
    ks = k * scale[..., :, None] * scale[..., None, :]
    chol, info = torch.linalg.cholesky_ex(ks)
    if bool((info != 0).any()):
        y = torch.linalg.solve(ks, (rhs * scale)[..., None])
    else:
        y = torch.cholesky_solve((rhs * scale)[..., None], chol)
    return y[..., 0] * scale


def snap_blocks(durations: Tensor) -> tuple[Tensor, Tensor]:
    """Block-tridiagonal form of :func:`snap_hessian`: diagonal blocks (..., W, 4, 4) coupling a
    waypoint's derivatives with themselves, off-diagonal blocks (..., M, 4, 4) coupling waypoint
    j with j + 1 (H[j, j+1]; H[j+1, j] is its transpose)."""
    _, h1 = _unit(durations.dtype, durations.device)
    kk = torch.arange(N_BC, device=durations.device).repeat(2).to(durations.dtype)
    seg = h1 * durations[..., None, None] ** (kk[:, None] + kk[None, :] - 7)  # (..., M, 8, 8)
    zero = torch.zeros_like(seg[..., :1, :N_BC, :N_BC])
    diag = torch.cat((seg[..., :N_BC, :N_BC], zero), -3) + torch.cat(
        (zero, seg[..., N_BC:, N_BC:]), -3
    )
    return diag, seg[..., :N_BC, N_BC:]


def _neighbour_sum(diag: Tensor, off: Tensor, v: Tensor) -> Tensor:
    """(H v) for block-tridiagonal H: D_j v_j + O_j v_j+1 + O_j-1^T v_j-1, v (..., W, 4)."""
    out = (diag @ v[..., None])[..., 0]
    up = (off @ v[..., 1:, :, None])[..., 0]
    down = (off.transpose(-1, -2) @ v[..., :-1, :, None])[..., 0]
    pad = torch.zeros_like(v[..., :1, :])
    return out + torch.cat((up, pad), -2) + torch.cat((pad, down), -2)


def solve_derivatives_banded(durations: Tensor, values: Tensor, fixed: Tensor) -> Tensor:
    """The solve of :func:`solve_derivatives` by block elimination over the waypoints (block
    Thomas algorithm on the SPD block-tridiagonal system), O(W) instead of O(W^3): the fast
    path; ``values``, ``fixed``: (..., A, W, 4); returns d (..., A, W, 4)."""
    diag, off = snap_blocks(durations)
    diag, off = diag[..., None, :, :, :], off[..., None, :, :, :]  # broadcast over axes A
    free = (~fixed).to(values.dtype)
    vals = torch.where(fixed, values, torch.zeros_like(values))
    rhs = torch.where(fixed, vals, -_neighbour_sum(diag, off, vals))
    eye = torch.diag_embed(fixed.to(values.dtype))
    dk = diag * free[..., :, None] * free[..., None, :] + eye
    ok = off * free[..., :-1, :, None] * free[..., 1:, None, :]
    scale = torch.diagonal(dk, dim1=-2, dim2=-1).clamp_min(1e-300).rsqrt()
    dk = dk * scale[..., :, None] * scale[..., None, :]
    ok = ok * scale[..., :-1, :, None] * scale[..., 1:, None, :]
    rhs = rhs * scale
    w = values.shape[-2]
    s_j, y_j = dk[..., 0, :, :], rhs[..., 0, :]
    ok_t = ok.transpose(-1, -2)
    eliminated = []
    for j in range(1, w):
        xz = torch.linalg.solve(s_j, torch.cat((ok[..., j - 1, :, :], y_j[..., None]), -1))
        eliminated.append(xz)
        upd = ok_t[..., j - 1, :, :] @ xz
        s_j = dk[..., j, :, :] - upd[..., :N_BC]
        y_j = rhs[..., j, :] - upd[..., N_BC]
    x = [torch.linalg.solve(s_j, y_j[..., None])[..., 0]]
    for xz in reversed(eliminated):
        x.append(xz[..., N_BC] - (xz[..., :N_BC] @ x[-1][..., None])[..., 0])
    return torch.stack(x[::-1], dim=-2) * scale


def coefficients_from_derivatives(d: Tensor, durations: Tensor) -> Tensor:
    """Segment coefficients (..., M, A, 8) from waypoint derivatives d (..., A, M+1, 4): eq. 2
    applied to every segment's boundary conditions (d_i, d_i+1)."""
    a_inv, _ = _unit(durations.dtype, durations.device)
    b = torch.cat((d[..., :-1, :], d[..., 1:, :]), dim=-1)  # (..., A, M, 8)
    b = b * _bc_powers(durations)[..., None, :, :]
    k = torch.arange(N_COEFFS, dtype=d.dtype, device=d.device)
    c = (b @ a_inv.T) / durations[..., None, :, None] ** k
    return c.transpose(-3, -2)


def min_snap(
    waypoints: Tensor,
    durations: Tensor,
    *,
    yaw: Tensor | None = None,
    derivatives: Tensor | None = None,
    unwrap_yaw: bool = True,
    method: str = "auto",
) -> PolyTrajectory:
    """Minimum-snap trajectory through ``waypoints`` in the given segment ``durations``.

    Args:
        waypoints: (..., W, 3) m, W >= 2; no NaN/inf, no two consecutive equal waypoints.
        durations: (..., W-1) s, every segment > 0 (see :mod:`volary.planning.timing`).
        yaw: (..., W) rad at the waypoints (default 0); unwrapped so consecutive waypoints
            differ by at most pi unless ``unwrap_yaw=False``.
        derivatives: (..., W, 3, 4) fixed [velocity, acceleration, jerk] x [x, y, z, yaw] at each
            waypoint; NaN marks a free derivative. Default (:func:`rest_to_rest`): zero at the
            first and last waypoint, free in between.
        method: the linear solve (:data:`SOLVE_METHODS`): ``"auto"`` (dense while the batch's
            problems x W^2 <= DENSE_MAX_ELEMENTS, else banded: fastest, but a problem's last
            bits then depend on the batch it is in), ``"dense"`` or ``"banded"`` (each gives a
            problem the same bits in any batch; module docstring).

    Returns a float64 :class:`PolyTrajectory` (degree 7) on the waypoints' device, continuous
    through jerk everywhere and through snap at every waypoint whose jerk is free. With every
    derivative fixed it is the chain of BoundaryPredictor eq. 2 segments (002 Sec. III-A).
    """
    if method not in SOLVE_METHODS:
        raise ConfigError(f"method: expected one of {SOLVE_METHODS}, got {method!r}")
    wp, dur, yw, der = _validated(waypoints, durations, yaw, derivatives, unwrap_yaw)
    values = torch.cat((torch.cat((wp, yw[..., None]), -1)[..., None, :], der), dim=-2)
    fixed = ~torch.isnan(values)  # (..., W, 4 orders, 4 axes)
    vals = torch.nan_to_num(values, nan=0.0)
    perm = (*range(vals.dim() - 3), -1, -3, -2)  # (..., W, 4 orders, A) -> (..., A, W, 4)
    d = solve_waypoint_derivatives(dur, vals.permute(*perm), fixed.permute(*perm), method)
    return PolyTrajectory(coefficients_from_derivatives(d, dur), dur)


def solve_waypoint_derivatives(
    durations: Tensor, values: Tensor, fixed: Tensor, method: str = "auto"
) -> Tensor:
    """d (..., A, W, 4) minimizing the snap cost with the ``fixed`` entries of ``values``.

    ``method="auto"`` picks the dense Cholesky solve (:func:`solve_derivatives`) while the dense
    matrices are small (problems x W^2 <= DENSE_MAX_ELEMENTS: one problem up to 32 waypoints)
    and the block elimination (:func:`solve_derivatives_banded`) above; both solve the same
    system, rounding differently (``"dense"`` / ``"banded"`` force one).
    """
    w = values.shape[-2]
    big = math.prod(durations.shape[:-1]) * w * w > DENSE_MAX_ELEMENTS
    if method == "banded" or (method == "auto" and big):
        return solve_derivatives_banded(durations, values, fixed)
    n = N_BC * w
    d = solve_derivatives(
        snap_hessian(durations),
        values.reshape(*values.shape[:-2], n),
        fixed.reshape(*fixed.shape[:-2], n),
    )
    return d.reshape(values.shape)


def rest_to_rest(n_waypoints: int, *, dtype=torch.float64, device=None) -> Tensor:
    """(W, 3, 4) derivative constraints: zero velocity, acceleration and jerk at the first and
    last waypoint, free (NaN) in between."""
    d = torch.full((n_waypoints, 3, N_AXES), float("nan"), dtype=dtype, device=device)
    d[0] = 0.0
    d[-1] = 0.0
    return d


def _as_float64(name: str, x: object, device: torch.device | None) -> Tensor:
    try:
        t = torch.as_tensor(x, dtype=torch.float64, device=device)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name}: expected a numeric array, got {type(x).__name__}") from exc
    return t


def _validated(
    waypoints: object,
    durations: object,
    yaw: object,
    derivatives: object,
    unwrap_yaw: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Check the inputs once, at the public boundary; returns float64 tensors, batch-broadcast."""
    wp = _checked_waypoints(waypoints)
    w = wp.shape[-2]
    dur = _checked_durations(durations, w, wp.device)
    yw = torch.zeros(wp.shape[:-1], dtype=wp.dtype, device=wp.device)
    if yaw is not None:
        yw = _checked_yaw(yaw, w, wp.device)
        yw = unwrap(yw) if unwrap_yaw else yw
    der = rest_to_rest(w, device=wp.device)
    if derivatives is not None:
        der = _checked_derivatives(derivatives, w, wp.device)
    try:
        shape = torch.broadcast_shapes(wp.shape[:-2], dur.shape[:-1], yw.shape[:-1], der.shape[:-3])
    except RuntimeError as exc:
        raise ConfigError(
            f"batch dims: expected broadcastable leading dims, got waypoints {tuple(wp.shape)}, "
            f"durations {tuple(dur.shape)}, yaw {tuple(yw.shape)}, derivatives {tuple(der.shape)}"
        ) from exc
    wp, yw = wp.expand(*shape, w, 3), yw.expand(*shape, w)
    dur, der = dur.expand(*shape, w - 1), der.expand(*shape, w, 3, N_AXES)
    _check_duplicates(wp, yw)
    return wp, dur, yw, der


def _checked_waypoints(waypoints: object) -> Tensor:
    dev = waypoints.device if isinstance(waypoints, Tensor) else None
    wp = _as_float64("waypoints", waypoints, dev)
    if wp.dim() < 2 or wp.shape[-1] != 3 or wp.shape[-2] < 2:
        raise ConfigError(f"waypoints: expected shape (..., W >= 2, 3), got {tuple(wp.shape)}")
    if not bool(torch.isfinite(wp).all()):
        bad = torch.nonzero(~torch.isfinite(wp).all(-1))[0].tolist()
        raise ConfigError(f"waypoints: expected finite values, got NaN/inf at index {bad}")
    return wp


def _checked_durations(durations: object, w: int, device: torch.device) -> Tensor:
    dur = _as_float64("durations", durations, device)
    if dur.dim() == 0 or dur.shape[-1] != w - 1:
        raise ConfigError(f"durations: expected shape (..., {w - 1}), got {tuple(dur.shape)}")
    good = torch.isfinite(dur) & (dur > 0)
    if not bool(good.all()):
        raise ConfigError(
            f"durations: expected finite segment times > 0 s, got {dur[~good][0].item()}"
        )
    return dur


def _checked_yaw(yaw: object, w: int, device: torch.device) -> Tensor:
    yw = _as_float64("yaw", yaw, device)
    if yw.dim() == 0 or yw.shape[-1] != w:
        raise ConfigError(f"yaw: expected shape (..., {w}), got {tuple(yw.shape)}")
    if not bool(torch.isfinite(yw).all()):
        raise ConfigError("yaw: expected finite values, got NaN/inf")
    return yw


def _checked_derivatives(derivatives: object, w: int, device: torch.device) -> Tensor:
    der = _as_float64("derivatives", derivatives, device)
    if der.dim() < 3 or der.shape[-3:] != (w, 3, N_AXES):
        raise ConfigError(f"derivatives: expected shape (..., {w}, 3, 4), got {tuple(der.shape)}")
    if bool(torch.isinf(der).any()):
        raise ConfigError("derivatives: expected finite values or NaN (free), got inf")
    return der


def _check_duplicates(wp: Tensor, yw: Tensor) -> None:
    step = torch.cat(
        (wp[..., 1:, :] - wp[..., :-1, :], (yw[..., 1:] - yw[..., :-1])[..., None]), -1
    )
    same = step.abs().amax(-1) < DUPLICATE_TOL
    if bool(same.any()):
        i = int(torch.nonzero(same)[0, -1])
        raise ConfigError(
            f"waypoints: expected consecutive waypoints to differ, got waypoints {i} and {i + 1} "
            "equal (position and yaw); drop one, or fix zero derivatives there to stop"
        )


def unwrap(yaw: Tensor) -> Tensor:
    """Yaw (..., W) with each step wrapped into [-pi, pi): the short way round between waypoints."""
    step = torch.remainder(yaw[..., 1:] - yaw[..., :-1] + math.pi, 2 * math.pi) - math.pi
    return torch.cat((yaw[..., :1], yaw[..., :1] + step.cumsum(-1)), dim=-1)
