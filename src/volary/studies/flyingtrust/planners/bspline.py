"""Uniform cubic B-splines for the gradient-based local planners (``kinodynamic``, ``ego``,
``topo``): evaluation, fitting, the cost terms with their gradients, the optimizer, and the
planner base class that turns an optimized spline into a reference.

**The spline** (de Boor; the uniform form both Fast-Planner and EGO-Planner use): control
points Q_0..Q_N (N+1, 3), knot spacing dt; on span i (t in [i dt, (i+1) dt], u = t/dt - i)

    p(u) = [1 u u^2 u^3] M [Q_i Q_i+1 Q_i+2 Q_i+3]^T,
    M = 1/6 [[1, 4, 1, 0], [-3, 0, 3, 0], [3, -6, 3, 0], [-1, 3, -3, 1]],

defined for t in [0, (N-2) dt]. At the knots p = (Q_i + 4 Q_i+1 + Q_i+2)/6,
v = (Q_i+2 - Q_i)/(2 dt), a = (Q_i - 2 Q_i+1 + Q_i+2)/dt^2, and by the convex-hull property
the velocity, acceleration and jerk are bounded by those of the *difference* control points
V_i = (Q_i+1 - Q_i)/dt, A_i = (V_i+1 - V_i)/dt, J_i = (A_i+1 - A_i)/dt (Zhou et al., RA-L
2019, Sec. IV-A), which is why the costs below act on control points, not on samples.

**Boundary**: the first three control points are fixed by the start state (p0, v0, a0) (solve
the knot relations above: Q_1 = p0 - a0 dt^2/6, Q_0 + Q_2 = a0 dt^2 + 2 Q_1,
Q_2 - Q_0 = 2 dt v0); the last three sit at the end point (rest there: a safe stop inside the
known map, as the ``mapper`` does). The interior points are the decision variables.

**Costs** (each returns the value and its gradient over all control points):

- ``smoothness``: sum_i |Q_i+3 - 3 Q_i+2 + 3 Q_i+1 - Q_i|^2 (the jerk of the difference
  points times dt^3; Fast-Planner's J_s; EGO-Planner's J_s uses the same elastic-band jerk
  term);
- ``feasibility``: squared excess of |V_i| over v_max, of |A_i|_xy over the horizontal and
  A_i,z over the vertical limits (Fast-Planner's J_v + J_a, on norms instead of per axis: the
  protocol caps the speed's norm);
- ``esdf``: sum_i max(0, d_thr - d(Q_i))^2 with d the grid's distance field, trilinearly
  interpolated (Fast-Planner's J_c);
- ``pairs``: EGO-Planner's ESDF-free collision term: for anchor pairs {p_ij, v_ij}, the
  distance d_ij = (Q_i - p_ij) . v_ij, c = s_f - d_ij and the penalty 0 (c <= 0), c^3
  (0 < c <= s_f), 3 s_f c^2 - 3 s_f^2 c + s_f^3 (c > s_f) (Zhou et al., RA-L 2021, eq. 2-3).

The optimizer is L-BFGS, as both papers use. The fast path is a compiled (numba) L-BFGS over
one fused objective (:class:`Objective`): the problems are small (20-150 variables) and solved
hundreds of times per flight, so scipy's per-evaluation Python overhead (about 140 us, against
about 10 us for the costs themselves) made an optimization take 30-50 ms; compiled it takes
1-2 ms (Fast-Planner and EGO-Planner likewise ship their own L-BFGS). scipy's L-BFGS-B over the
separate terms stays as the reference (``optimize(..., reference=True)``, planner option
``optimizer="scipy"``); the tests check the fused objective against the terms, the terms'
gradients against finite differences, and the compiled optimizer against scipy's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numba
import numpy as np
from scipy.optimize import minimize

from volary.planning.navigation import NavReference
from volary.studies.flyingtrust.planners.mapper import MapperOptions, MapperPlanner
from volary.studies.flyingtrust.planners.occupancy import FAR_CM, OccupancyGrid

_M = np.array([[1, 4, 1, 0], [-3, 0, 3, 0], [3, -6, 3, 0], [-1, 3, -3, 1]], dtype=np.float64) / 6


# ---------------------------------------------------------------------------- the spline
def evaluate(ctrl: np.ndarray, dt: float, ts: np.ndarray) -> tuple[np.ndarray, ...]:
    """Position, velocity, acceleration (K, 3) of the spline at times ``ts`` (clamped to
    [0, (N-2) dt])."""
    q = np.asarray(ctrl, dtype=np.float64)
    n_span = q.shape[0] - 3
    t = np.clip(np.asarray(ts, dtype=np.float64) / dt, 0.0, n_span)
    i = np.minimum(np.floor(t).astype(np.int64), n_span - 1)
    u = (t - i)[:, None]
    win = np.stack([q[i], q[i + 1], q[i + 2], q[i + 3]], 1)  # (K, 4, 3)
    c = np.einsum("rk,nkd->nrd", _M, win)  # polynomial coefficients per sample
    pos = c[:, 0] + u * (c[:, 1] + u * (c[:, 2] + u * c[:, 3]))
    vel = (c[:, 1] + u * (2 * c[:, 2] + 3 * u * c[:, 3])) / dt
    acc = (2 * c[:, 2] + 6 * u * c[:, 3]) / dt**2
    return pos, vel, acc


def duration(ctrl: np.ndarray, dt: float) -> float:
    return float((len(ctrl) - 3) * dt)


def start_points(p0: np.ndarray, v0: np.ndarray, a0: np.ndarray, dt: float) -> np.ndarray:
    """The three control points (3, 3) that start the spline at (p0, v0, a0) (module doc)."""
    q1 = p0 - a0 * dt**2 / 6.0
    s = a0 * dt**2 + 2.0 * q1
    d = 2.0 * dt * v0
    return np.stack([(s - d) / 2.0, q1, (s + d) / 2.0])


def fit(knots: np.ndarray, v0: np.ndarray, a0: np.ndarray, dt: float) -> np.ndarray:
    """Control points (K+3, 3) of the spline through knot positions ``knots`` (K+1, 3), K >= 1,
    one every ``dt`` s: starting at (knots[0], v0, a0), at rest at knots[-1], the interior
    points by least squares on the interior knot positions (Fast-Planner's parameterization
    of its kinodynamic path)."""
    pts = np.asarray(knots, dtype=np.float64)
    k = len(pts) - 1
    q = np.empty((k + 3, 3))
    q[:3] = start_points(pts[0], v0, a0, dt)
    q[k:] = pts[-1]
    free = np.arange(3, k)
    if free.size == 0:
        return q
    rows = np.arange(1, k)  # interior knots: (Q_r + 4 Q_r+1 + Q_r+2) / 6 = knots[r]
    a = np.zeros((rows.size, k + 3))
    for w, off in ((1.0, 0), (4.0, 1), (1.0, 2)):
        a[np.arange(rows.size), rows + off] = w / 6.0
    fixed = np.setdiff1d(np.arange(k + 3), free)
    rhs = pts[rows] - a[:, fixed] @ q[fixed]
    q[free] = np.linalg.lstsq(a[:, free], rhs, rcond=None)[0]
    return q


def knots_along(positions: np.ndarray, times: np.ndarray, dt: float) -> tuple[np.ndarray, float]:
    """Knot positions every ~``dt`` s along a timed path (times from 0, increasing): the
    spacing is adjusted to divide the duration evenly, with at least 3 spans (so the start's
    three control points and the end's three do not overlap); returns (knots, spacing)."""
    total = float(times[-1])
    k = max(int(math.ceil(total / dt - 1e-9)), 3)
    ts = np.linspace(0.0, total, k + 1)
    knots = np.stack([np.interp(ts, times, positions[:, i]) for i in range(3)], -1)
    return knots, max(total / k, 1e-3)


# ---------------------------------------------------------------------------- cost terms
@numba.njit(cache=True, nogil=True)
def _smoothness(q):  # pragma: no cover - compiled
    cost = 0.0
    grad = np.zeros_like(q)
    for i in range(q.shape[0] - 3):
        for d in range(3):
            j = q[i + 3, d] - 3.0 * q[i + 2, d] + 3.0 * q[i + 1, d] - q[i, d]
            cost += j * j
            grad[i + 3, d] += 2.0 * j
            grad[i + 2, d] -= 6.0 * j
            grad[i + 1, d] += 6.0 * j
            grad[i, d] -= 2.0 * j
    return cost, grad


def smoothness(q: np.ndarray) -> tuple[float, np.ndarray]:
    """sum_i |Q_i+3 - 3 Q_i+2 + 3 Q_i+1 - Q_i|^2 and its gradient (module doc)."""
    c, g = _smoothness(np.ascontiguousarray(q, dtype=np.float64))
    return float(c), g


@numba.njit(cache=True, nogil=True)
def _feasibility(q, dt, v_max, a_xy, a_up, a_down):  # pragma: no cover - compiled
    n = q.shape[0]
    cost = 0.0
    grad = np.zeros_like(q)
    vm2 = v_max * v_max
    for i in range(n - 1):  # V_i = (Q_i+1 - Q_i) / dt
        vx = (q[i + 1, 0] - q[i, 0]) / dt
        vy = (q[i + 1, 1] - q[i, 1]) / dt
        vz = (q[i + 1, 2] - q[i, 2]) / dt
        ex = (vx * vx + vy * vy + vz * vz - vm2) / vm2
        if ex > 0:
            cost += ex * ex
            k = 4.0 * ex / vm2 / dt
            for d, vd in ((0, vx), (1, vy), (2, vz)):
                grad[i + 1, d] += k * vd
                grad[i, d] -= k * vd
    ax2 = a_xy * a_xy
    for i in range(n - 2):  # A_i = (Q_i - 2 Q_i+1 + Q_i+2) / dt^2
        ax = (q[i, 0] - 2.0 * q[i + 1, 0] + q[i + 2, 0]) / dt**2
        ay = (q[i, 1] - 2.0 * q[i + 1, 1] + q[i + 2, 1]) / dt**2
        az = (q[i, 2] - 2.0 * q[i + 1, 2] + q[i + 2, 2]) / dt**2
        gx = gy = gz = 0.0
        e = (ax * ax + ay * ay - ax2) / ax2
        if e > 0:
            cost += e * e
            gx, gy = 4.0 * e / ax2 * ax, 4.0 * e / ax2 * ay
        e = (az - a_up) / a_up
        if e > 0:
            cost += e * e
            gz = 2.0 * e / a_up
        e = (-az - a_down) / a_down
        if e > 0:
            cost += e * e
            gz = -2.0 * e / a_down
        for d, gd in ((0, gx), (1, gy), (2, gz)):
            gd /= dt**2
            grad[i, d] += gd
            grad[i + 1, d] -= 2.0 * gd
            grad[i + 2, d] += gd
    return cost, grad


def feasibility(
    q: np.ndarray, dt: float, v_max: float, a_xy: float, a_up: float, a_down: float
) -> tuple[float, np.ndarray]:
    """Squared relative excess of the difference points over the limits: of |V_i|^2 over
    v_max^2, of |A_i,xy|^2 over a_xy^2, of A_i,z over a_up and of -A_i,z over a_down (module
    doc); scale-free."""
    c, g = _feasibility(np.ascontiguousarray(q, dtype=np.float64), float(dt), float(v_max),
                        float(a_xy), float(a_up), float(a_down))  # fmt: skip
    return float(c), g


@numba.njit(cache=True, nogil=True)
def _clearance_gradient(dist, lo, hi, res, p):  # pragma: no cover - compiled
    nx, ny, nz = dist.shape
    n = p.shape[0]
    val = np.zeros(n)
    grad = np.zeros((n, 3))
    far = FAR_CM / 100.0 - 1e-9
    for m in range(n):
        g = np.empty(3)
        i0 = np.empty(3, np.int64)
        f = np.empty(3)
        dims = (nx, ny, nz)
        for a in range(3):
            g[a] = (p[m, a] - lo[a]) / res - 0.5
            i0[a] = min(max(int(math.floor(g[a])), 0), dims[a] - 2)
            f[a] = min(max(g[a] - i0[a], 0.0), 1.0)
        v = 0.0
        gx = gy = gz = 0.0
        for cx in range(2):
            wx = f[0] if cx else 1.0 - f[0]
            sx = 1.0 if cx else -1.0
            for cy in range(2):
                wy = f[1] if cy else 1.0 - f[1]
                sy = 1.0 if cy else -1.0
                for cz in range(2):
                    wz = f[2] if cz else 1.0 - f[2]
                    sz = 1.0 if cz else -1.0
                    c = dist[i0[0] + cx, i0[1] + cy, i0[2] + cz] / 100.0
                    v += c * wx * wy * wz
                    gx += c * sx * wy * wz
                    gy += c * wx * sy * wz
                    gz += c * wx * wy * sz
        if v >= far:
            gx = gy = gz = 0.0
        else:
            gx, gy, gz = gx / res, gy / res, gz / res
        # the faces of the volume
        best, axis, sign = v, -1, 0.0
        for a in range(3):
            d_lo = p[m, a] - lo[a]
            d_hi = hi[a] - p[m, a]
            if d_lo < best:
                best, axis, sign = d_lo, a, 1.0
            if d_hi < best:
                best, axis, sign = d_hi, a, -1.0
        if axis >= 0:
            val[m] = best
            grad[m, axis] = sign
        else:
            val[m] = v
            grad[m, 0], grad[m, 1], grad[m, 2] = gx, gy, gz
    return val, grad


def clearance_gradient(grid: OccupancyGrid, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Clearance (P,) m and its gradient (P, 3): the grid's distance field trilinearly
    interpolated between voxel centres (clamped at the border; zero gradient where every corner
    is beyond the truncation), then the minimum with the analytic distance to the faces of the
    volume (whose gradient is a unit axis). Compiled with numba; the tests check it against
    scipy's ``RegularGridInterpolator`` and finite differences."""
    p = np.ascontiguousarray(np.atleast_2d(np.asarray(points, dtype=np.float64)))
    return _clearance_gradient(grid.dist_cm, grid.lo, grid.hi, float(grid.res), p)


def esdf_cost(grid: OccupancyGrid, q: np.ndarray, d_thr: float) -> tuple[float, np.ndarray]:
    """sum max(0, d_thr - d(Q_i))^2 over the control points and its gradient."""
    d, gd = clearance_gradient(grid, q)
    ex = np.maximum(d_thr - d, 0.0)
    return float((ex**2).sum()), (-2.0 * ex)[:, None] * gd


def pair_cost(
    q: np.ndarray, idx: np.ndarray, anchors: np.ndarray, dirs: np.ndarray, s_f: float
) -> tuple[float, np.ndarray]:
    """EGO-Planner's collision penalty over anchor pairs (module doc): control point
    ``idx[m]`` against anchor ``anchors[m]`` with repulsive unit direction ``dirs[m]``."""
    grad = np.zeros_like(q)
    if len(idx) == 0:
        return 0.0, grad
    d = ((q[idx] - anchors) * dirs).sum(-1)
    c = s_f - d
    cubic = (c > 0) & (c <= s_f)
    quad = c > s_f
    cost = np.where(cubic, c**3, 0.0) + np.where(quad, 3 * s_f * c**2 - 3 * s_f**2 * c + s_f**3, 0)
    dc = np.where(cubic, 3 * c**2, 0.0) + np.where(quad, 6 * s_f * c - 3 * s_f**2, 0.0)
    np.add.at(grad, idx, (-dc)[:, None] * dirs)  # dc/dQ = -v
    return float(cost.sum()), grad


def guide_cost(q: np.ndarray, targets: np.ndarray) -> tuple[float, np.ndarray]:
    """sum_i |Q_i - G_i|^2 over all control points and its gradient (Path-Guided PGO's first
    stage pulls the spline toward its guide)."""
    d = q - targets
    return float((d**2).sum()), 2.0 * d


Term = Callable[[np.ndarray], tuple[float, np.ndarray]]


# ---------------------------------------------------------------------------- the objective
@numba.njit(cache=True, nogil=True)
def _esdf_kernel(dist, lo, hi, res, q, d_thr):  # pragma: no cover - compiled
    d, gd = _clearance_gradient(dist, lo, hi, res, q)
    cost = 0.0
    grad = np.zeros_like(q)
    for i in range(q.shape[0]):
        ex = d_thr - d[i]
        if ex > 0:
            cost += ex * ex
            for a in range(3):
                grad[i, a] = -2.0 * ex * gd[i, a]
    return cost, grad


@numba.njit(cache=True, nogil=True)
def _pair_kernel(q, idx, anchors, dirs, s_f):  # pragma: no cover - compiled
    cost = 0.0
    grad = np.zeros_like(q)
    for m in range(idx.shape[0]):
        i = idx[m]
        d = 0.0
        for a in range(3):
            d += (q[i, a] - anchors[m, a]) * dirs[m, a]
        c = s_f - d
        if c <= 0:
            continue
        if c <= s_f:
            cost += c * c * c
            dc = 3.0 * c * c
        else:
            cost += 3.0 * s_f * c * c - 3.0 * s_f * s_f * c + s_f**3
            dc = 6.0 * s_f * c - 3.0 * s_f * s_f
        for a in range(3):
            grad[i, a] -= dc * dirs[m, a]
    return cost, grad


@numba.njit(cache=True, nogil=True)
def _objective(  # pragma: no cover - compiled
    q, w, limits, dist, lo, hi, res, d_thr, idx, anchors, dirs, s_f, targets
):
    """sum_k w[k] term_k(Q) and its gradient; w = (smoothness, feasibility, esdf, pairs,
    guide), a zero weight skips its term; limits = (dt, v_max, a_xy, a_up, a_down)."""
    cost = 0.0
    grad = np.zeros_like(q)
    if w[0] != 0:
        c, g = _smoothness(q)
        cost += w[0] * c
        grad += w[0] * g
    if w[1] != 0:
        c, g = _feasibility(q, limits[0], limits[1], limits[2], limits[3], limits[4])
        cost += w[1] * c
        grad += w[1] * g
    if w[2] != 0:
        c, g = _esdf_kernel(dist, lo, hi, res, q, d_thr)
        cost += w[2] * c
        grad += w[2] * g
    if w[3] != 0:
        c, g = _pair_kernel(q, idx, anchors, dirs, s_f)
        cost += w[3] * c
        grad += w[3] * g
    if w[4] != 0:
        d = q - targets
        cost += w[4] * (d * d).sum()
        grad += 2.0 * w[4] * d
    return cost, grad


_NO_GRID = np.full((2, 2, 2), FAR_CM, dtype=np.uint8)
_NO_PAIRS = (np.zeros(0, np.int64), np.zeros((0, 3)), np.zeros((0, 3)))


@dataclass(frozen=True)
class Objective:
    """A weighted sum of the cost terms above, as one compiled function (the optimizer's inner
    loop evaluates it a hundred times per call; one numba call instead of one Python call per
    term). ``terms()`` gives the same sum as separate Python terms: the reference the fused
    form is tested against and the one :func:`optimize`'s ``reference`` path (scipy) uses.

    Weights: ``w_smooth`` (smoothness), ``w_feasibility`` (feasibility at knot spacing ``dt``
    within ``limits`` = (v_max, a_xy, a_up, a_down)), ``w_esdf`` (ESDF penalty below
    ``d_thr`` on ``grid``), ``w_pairs`` (EGO pairs ``pairs`` = (idx, anchors, dirs) with
    ``s_f``), ``w_guide`` (pull toward ``targets``, one per control point). Zero: no term."""

    dt: float = 1.0
    limits: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 1.0)
    w_smooth: float = 0.0
    w_feasibility: float = 0.0
    w_esdf: float = 0.0
    grid: OccupancyGrid | None = None
    d_thr: float = 0.0
    w_pairs: float = 0.0
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray] = _NO_PAIRS
    s_f: float = 0.0
    w_guide: float = 0.0
    targets: np.ndarray | None = None

    def args(self, n: int) -> tuple:
        """The compiled objective's arguments after Q, for ``n`` control points."""
        if self.w_esdf and self.grid is None:
            raise ValueError("Objective: w_esdf needs a grid")
        if self.w_guide and (self.targets is None or len(self.targets) != n):
            raise ValueError(f"Objective: w_guide needs targets of shape ({n}, 3)")
        g = self.grid
        dist, lo, hi, res = (g.dist_cm, g.lo, g.hi, g.res) if g is not None else (
            _NO_GRID, np.zeros(3), np.ones(3), 1.0)  # fmt: skip
        idx, anc, dirs = self.pairs
        w = np.array([self.w_smooth, self.w_feasibility, self.w_esdf,
                      self.w_pairs if len(idx) else 0.0, self.w_guide])  # fmt: skip
        targets = np.zeros((n, 3)) if self.targets is None else self.targets
        return (w, np.array([self.dt, *self.limits], dtype=np.float64), dist,
                np.asarray(lo, np.float64), np.asarray(hi, np.float64), float(res),
                float(self.d_thr), np.asarray(idx, np.int64), np.ascontiguousarray(anc, np.float64),
                np.ascontiguousarray(dirs, np.float64), float(self.s_f),
                np.ascontiguousarray(targets, np.float64))  # fmt: skip

    def __call__(self, q: np.ndarray) -> tuple[float, np.ndarray]:
        qq = np.ascontiguousarray(q, dtype=np.float64)
        c, g = _objective(qq, *self.args(len(qq)))
        return float(c), g

    def terms(self) -> list[tuple[float, Term]]:
        """The same sum as (weight, Python term) pairs (nonzero weights only)."""
        out: list[tuple[float, Term]] = []
        if self.w_smooth:
            out.append((self.w_smooth, smoothness))
        if self.w_feasibility:
            out.append((self.w_feasibility, lambda q: feasibility(q, self.dt, *self.limits)))
        if self.w_esdf:
            grid = self.grid
            assert grid is not None
            out.append((self.w_esdf, lambda q: esdf_cost(grid, q, self.d_thr)))
        if self.w_pairs and len(self.pairs[0]):
            out.append((self.w_pairs, lambda q: pair_cost(q, *self.pairs, self.s_f)))
        if self.w_guide:
            targets = self.targets
            assert targets is not None
            out.append((self.w_guide, lambda q: guide_cost(q, targets)))
        return out


# ---------------------------------------------------------------------------- the optimizer
@numba.njit(cache=True, nogil=True)
def _interior(x, head, tail, obj):  # pragma: no cover - compiled
    """The objective over the flat interior x (the first and last three points fixed)."""
    n = x.shape[0] // 3 + 6
    q = np.empty((n, 3))
    q[:3] = head
    q[3 : n - 3] = x.reshape(-1, 3)
    q[n - 3 :] = tail
    c, g = _objective(q, *obj)
    return c, g[3 : n - 3].copy().reshape(-1)


@numba.njit(cache=True, nogil=True)
def _lbfgs(x, head, tail, obj, max_iter, memory, gtol, ftol, max_ls):  # pragma: no cover - compiled
    """Limited-memory BFGS (Nocedal & Wright, Alg. 7.4/7.5: two-loop recursion, m pairs,
    H0 = s.y / y.y) with a weak-Wolfe bisection line search (Lewis & Overton 2013; c1 = 1e-4,
    c2 = 0.9; the first trial step 1, the very first 1/|g|_inf). Stops after ``max_iter``
    iterations, at |g|_inf <= gtol, at a relative decrease <= ftol (scipy's L-BFGS-B tests),
    or when a line search finds no decrease. Returns (x, f, iterations, evaluations)."""
    n = x.shape[0]
    s_hist = np.zeros((memory, n))
    y_hist = np.zeros((memory, n))
    rho = np.zeros(memory)
    alpha_h = np.zeros(memory)
    f, g = _interior(x, head, tail, obj)
    evals, k, stored, newest = 1, 0, 0, -1
    while k < max_iter:
        if np.abs(g).max() <= gtol:
            break
        d = -g.copy()  # two-loop recursion: d = -H g
        for j in range(stored):
            i = (newest - j) % memory
            alpha_h[i] = rho[i] * np.dot(s_hist[i], d)
            d -= alpha_h[i] * y_hist[i]
        if stored > 0:
            yy = np.dot(y_hist[newest], y_hist[newest])
            d *= 1.0 / (rho[newest] * yy)
        for j in range(stored - 1, -1, -1):
            i = (newest - j) % memory
            beta = rho[i] * np.dot(y_hist[i], d)
            d += (alpha_h[i] - beta) * s_hist[i]
        gd = np.dot(g, d)
        if gd >= 0:  # not a descent direction (numerical): restart from steepest descent
            d = -g.copy()
            gd = np.dot(g, d)
            stored = 0
        step = 1.0 if stored > 0 else 1.0 / max(np.abs(g).max(), 1e-12)
        lo_s, hi_s = 0.0, np.inf
        ok = False
        x_new, f_new, g_new = x, f, g
        for _ in range(max_ls):
            x_try = x + step * d
            f_try, g_try = _interior(x_try, head, tail, obj)
            evals += 1
            if not (f_try <= f + 1e-4 * step * gd):  # Armijo fails (or NaN): shrink
                hi_s = step
            elif np.dot(g_try, d) < 0.9 * gd:  # curvature fails: grow
                lo_s = step
                x_new, f_new, g_new = x_try, f_try, g_try
            else:
                x_new, f_new, g_new = x_try, f_try, g_try
                ok = True
                break
            step = 0.5 * (lo_s + hi_s) if hi_s < np.inf else 2.0 * lo_s
        if not (f_new < f):
            break
        s = x_new - x
        y = g_new - g
        sy = np.dot(s, y)
        if ok and sy > 1e-12 * np.dot(y, y):
            newest = (newest + 1) % memory
            s_hist[newest], y_hist[newest], rho[newest] = s, y, 1.0 / sy
            stored = min(stored + 1, memory)
        k += 1
        stop = (f - f_new) <= ftol * max(abs(f), abs(f_new), 1.0)
        x, f, g = x_new, f_new, g_new
        if stop:
            break
    return x, f, k, evals


def optimize(
    q: np.ndarray, objective: Objective, max_iter: int = 80, reference: bool = False
) -> np.ndarray:
    """Minimize ``objective`` over the interior control points (the first and last three stay)
    with L-BFGS; returns the new control points (the input if nothing is free).

    The fast path is the compiled L-BFGS above on the fused objective; ``reference=True`` runs
    scipy's L-BFGS-B on the separate Python terms (the slow reference the tests compare it
    with: same minimizer on convex problems, a cost no worse on the planners' problems)."""
    q = np.asarray(q, dtype=np.float64)
    if len(q) <= 6:
        return q.copy()
    head, tail = np.ascontiguousarray(q[:3]), np.ascontiguousarray(q[-3:])
    x0 = np.ascontiguousarray(q[3:-3]).reshape(-1)
    if reference:
        return _optimize_scipy(q, objective.terms(), max_iter)
    x, _, _, _ = _lbfgs(x0, head, tail, objective.args(len(q)), int(max_iter), 10, 1e-6,
                        2.220446049250313e-09, 20)  # fmt: skip
    return np.vstack([head, x.reshape(-1, 3), tail])


def _optimize_scipy(q: np.ndarray, terms: list[tuple[float, Term]], max_iter: int) -> np.ndarray:
    fixed_head, fixed_tail = q[:3], q[-3:]

    def full(x: np.ndarray) -> np.ndarray:
        return np.vstack([fixed_head, x.reshape(-1, 3), fixed_tail])

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        qq = full(x)
        total, grad = 0.0, np.zeros_like(qq)
        for w, term in terms:
            c, g = term(qq)
            total += w * c
            grad += w * g
        return total, grad[3:-3].reshape(-1)

    res = minimize(fun, q[3:-3].reshape(-1), jac=True, method="L-BFGS-B",
                   options={"maxiter": int(max_iter), "gtol": 1e-6})  # fmt: skip
    return full(res.x)


# ---------------------------------------------------------------------------- planner base
@dataclass(frozen=True)
class BsplineOptions(MapperOptions):
    """Options shared by the B-spline planners, beyond :class:`MapperOptions`."""

    ctrl_spacing: float = 0.5  # m between control points at full speed (knot dt = this / v)
    w_smooth: float = 1.0
    w_collision: float = 10.0
    w_feasibility: float = 1.0
    opt_iterations: int = 80
    rescale_rounds: int = 3  # uniform time re-allocations (each re-optimizes)
    replan_period: float = 1.0  # s a spline is kept while it stays clear and tracked
    # "lbfgs": the compiled L-BFGS on the fused objective; "scipy": the slow reference path
    optimizer: str = field(default="lbfgs", metadata={"choices": ("lbfgs", "scipy")})


class BsplinePlanner(MapperPlanner):
    """A ``mapper`` (map, guiding search, recovery, yaw) whose trajectory step is a uniform
    cubic B-spline optimized by gradient descent. Subclasses give the initial knots and the
    collision term; this class fixes the start, optimizes, re-allocates time uniformly when
    the limits are exceeded, checks the samples' clearance and emits the reference."""

    name = "bspline"
    options_type: type[MapperOptions] = BsplineOptions

    def reset(self, task) -> None:
        super().reset(task)
        self._path_version = 0
        self._spline: tuple[int, float] | None = None  # (path version, t0) of the kept spline
        self._tracking = False
        self.stats["fits"] = 0

    def _accept_path(self, path: np.ndarray, reached: bool) -> None:
        super()._accept_path(path, reached)
        self._path_version += 1

    def _start_state(self, obs, pos):
        p0, v0, a0 = super()._start_state(obs, pos)
        self._tracking = False
        if self._ref is not None:  # the start state came from the previous reference
            p_ref = self._ref.sample(np.array([self._t]))[0][0]
            self._tracking = bool(np.linalg.norm(p_ref - pos) < 0.4)
        return p0, v0, a0

    def _fit(self, p0: np.ndarray, v0: np.ndarray, a0: np.ndarray, t: float) -> NavReference:
        """Keep the current spline while the path is the same, it is younger than
        ``replan_period``, the vehicle tracks it and it stays clear of the map (Fast-Planner's
        and EGO-Planner's replanning: on collision, or periodically); else fit a new one."""
        ref = self._kept(t)
        if ref is not None:
            return ref
        ref = self._fit_spline(p0, v0, a0, t)
        self.stats["fits"] += 1
        self._spline = (self._path_version, t) if self._fitted else None
        return ref

    def _kept(self, t: float) -> NavReference | None:
        ref, kept = self._ref, self._spline
        o = self.options
        if ref is None or kept is None or not self._tracking:
            return None
        if kept[0] != self._path_version or t - kept[1] >= o.replan_period:  # type: ignore[attr-defined]
            return None
        ahead = ref.times >= t
        if ahead.sum() < 2:
            return None
        clear = self.grid.clearance(ref.positions[ahead])
        if (clear < min(self.radius + o.hard_margin, clear[0] - 0.02)).any():
            return None
        task = self.task
        assert task is not None  # set by reset()
        k = min(int(np.searchsorted(ref.times, t + 1.0 / task.planner_rate_hz)), len(ref.times) - 1)
        self._yaw = float(ref.yaws[k])
        return ref

    def _fit_spline(self, p0: np.ndarray, v0: np.ndarray, a0: np.ndarray, t: float) -> NavReference:
        raise NotImplementedError

    def _local_path(self, p0: np.ndarray) -> np.ndarray:
        """The guiding path from p0 (its first point), cut at ``horizon`` m of arc length; its
        last point is the local target."""
        path = self._path
        assert path is not None
        pts = np.vstack([p0[None], path[1:]])
        cum = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(pts, axis=0), axis=1))])
        h = self.options.horizon
        if cum[-1] <= h:
            return pts
        k = int(np.searchsorted(cum, h))
        end = np.array([np.interp(h, cum, pts[:, i]) for i in range(3)])
        return np.vstack([pts[:k], end[None]])

    def _knot_dt(self) -> float:
        o = self.options
        return max(o.ctrl_spacing / self.v_max, 0.08)  # type: ignore[attr-defined]

    def _objective(self, q: np.ndarray, dt: float, collision: Objective, w: float) -> Objective:
        """The planners' objective: smoothness (scaled by 1 / #points) + feasibility at spacing
        ``dt`` + ``collision`` (an Objective holding only its collision term) weighted by w."""
        o = self.options
        return replace(
            collision,
            dt=dt,
            limits=(self.v_max, self.a_xy, self.a_up, self.a_down),
            w_smooth=o.w_smooth / max(len(q), 1),  # type: ignore[attr-defined]
            w_feasibility=o.w_feasibility,  # type: ignore[attr-defined]
            w_esdf=collision.w_esdf * w,
            w_pairs=collision.w_pairs * w,
        )

    def _optimize(self, q: np.ndarray, objective: Objective) -> np.ndarray:
        o = self.options
        return optimize(q, objective, int(o.opt_iterations), reference=o.optimizer == "scipy")  # type: ignore[attr-defined]

    def _time_scaled(
        self,
        q: np.ndarray,
        dt: float,
        v0: np.ndarray,
        a0: np.ndarray,
        collision: Objective,
        w_collision: float,
    ) -> tuple[np.ndarray, float]:
        """Optimize, then stretch the knot spacing uniformly while the samples exceed the
        limits (velocity ~ 1/alpha, acceleration ~ 1/alpha^2), re-fixing the start state and
        re-optimizing each time (Fast-Planner's time adjustment, uniform here)."""
        o = self.options
        for _ in range(int(o.rescale_rounds) + 1):  # type: ignore[attr-defined]
            q = self._optimize(q, self._objective(q, dt, collision, w_collision))
            ts = np.arange(0.0, duration(q, dt) + 1e-9, min(o.sample_dt, dt / 2))
            _, vel, acc = evaluate(q, dt, ts)
            alpha = self._time_scale(vel, acc)
            if alpha <= 1.02:
                break
            dt *= min(alpha, 2.0)
            q = q.copy()
            q[:3] = start_points((q[0] + 4 * q[1] + q[2]) / 6.0, v0, a0, dt)
        return q, dt

    def _clear_samples(
        self, q: np.ndarray, dt: float, p0: np.ndarray
    ) -> tuple[np.ndarray, ...] | None:
        """Samples (times, pos, vel, acc) of the spline every ``sample_dt``, or None when one
        comes closer than the hard clearance (radius + hard_margin; no deeper than the start
        where it already is)."""
        o = self.options
        ts = np.arange(0.0, duration(q, dt) + 1e-9, o.sample_dt)
        if ts[-1] < duration(q, dt) - 1e-9:
            ts = np.append(ts, duration(q, dt))
        pos, vel, acc = evaluate(q, dt, ts)
        hard = self.radius + o.hard_margin
        c0 = float(self.grid.clearance(p0[None])[0])
        if (self.grid.clearance(pos) < min(hard, c0 - 0.02)).any():
            return None
        return ts, pos, vel, acc

    def _spline_or_fallback(
        self,
        build: Callable[[float], tuple[np.ndarray, float] | None],
        p0: np.ndarray,
        v0: np.ndarray,
        a0: np.ndarray,
        t: float,
    ) -> NavReference:
        """Try ``build(w_collision)`` with the collision weight, then 10x it; fall back to the
        ``mapper``'s slow path-following reference (counted in ``stats['fallbacks']``)."""
        t1 = time.perf_counter()
        o = self.options
        for w in (o.w_collision, 10.0 * o.w_collision):  # type: ignore[attr-defined]
            out = build(w)
            if out is None:
                break
            samples = self._clear_samples(out[0], out[1], p0)
            if samples is not None:
                self.stats["fit_s"] += time.perf_counter() - t1
                self._fitted = True
                return self._reference(t, *samples)
        self._fitted = False
        self.stats["fallbacks"] += 1
        hard = self.radius + o.hard_margin
        if self._path is not None:
            ref = self._follow_path(p0, v0, a0, t, hard)
        else:
            ref = self._brake(p0, v0, a0, t)
        self.stats["fit_s"] += time.perf_counter() - t1
        return ref
