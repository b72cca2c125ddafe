"""``kinodynamic``: Fast-Planner's family (Zhou, Gao, Wang, Liu & Shen, "Robust and Efficient
Quadrotor Trajectory Generation for Fast Autonomous Flight", RA-L 2019), written from the
paper for volary's benchmark; no code was ported.

Per call, on the ``mapper``'s map (depth fusion into a voxel grid with a truncated Euclidean
distance field, :mod:`volary.studies.flyingtrust.planners.occupancy`):

1. **Kinodynamic A*** (paper Sec. III) when a new path is needed (the ``mapper``'s triggers:
   none yet, blocked ahead, off the path, ``search_period`` elapsed). The state is position and
   velocity; a node is expanded by constant-acceleration motion primitives
   p' = p + v tau + u tau^2 / 2, v' = v + u tau with u from a discretized set (5 levels per
   horizontal axis within the horizontal limit, {down, 0, up} vertically) and tau in
   {tau_max / 2, tau_max}. Edge cost (|u|^2 + rho) tau (control effort and time, eq. 3).
   Heuristic: lambda_h times the optimal cost of the unconstrained two-point boundary problem
   to the goal at rest, min_T rho T + int |u|^2 (Pontryagin; a cubic per axis; the paper
   solves the quartic in T, here the minimum over a geometric grid of 16 durations). A
   primitive is valid when its samples (every half voxel) keep the inflation clearance (radius +
   margin; a start already inside may not go deeper) and its end speed is within v_max; one
   node per voxel (a cheaper arrival replaces it), primitives ending in their parent's voxel are
   pruned. **Analytic expansion**: within ``shot_range`` of the goal every expanded node tries
   the boundary problem's cubic to the goal; a collision-free, speed-feasible one ends the
   search. The search also ends at a node ``horizon`` m from the start (a receding-horizon
   partial plan), or after ``kino_expansions`` (the expanded node nearest to the goal by the
   heuristic then ends the partial path).
2. **B-spline optimization** (paper Sec. IV): the path, sampled every knot spacing, is
   parameterized as a uniform cubic B-spline (least squares, start state fixed, rest at the
   end of the ``horizon``) and optimized with L-BFGS over smoothness, ESDF collision and
   feasibility (:mod:`volary.studies.flyingtrust.planners.bspline`).
3. **Time adjustment** (paper Sec. V): where the limits are exceeded the knot spacing is
   stretched and the spline re-optimized (uniformly here; the paper adjusts each span).

Where it differs from Fast-Planner: the map is volary's optimistic voxel grid with a
truncated field (no raycast free-space clearing); the heuristic's duration comes from a grid
rather than the quartic's roots; time adjustment is uniform; recovery (hover and turn when
stuck, reduced margin) is the ``mapper``'s; the path is refitted at every call (10 Hz) from the
current reference state rather than only on collision. The search is compiled with numba.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numba
import numpy as np

from volary.planning.navigation import NavReference
from volary.studies.flyingtrust.planners import bspline
from volary.studies.flyingtrust.planners.bspline import BsplineOptions, BsplinePlanner
from volary.studies.flyingtrust.planners.mapper import MapperPlanner
from volary.studies.flyingtrust.planners.search import (
    _clear_cm,
    _grow,
    _pair_pop,
    _pair_push,
    reuse,
)

_N_T = 16  # durations tried by the heuristic's minimum


@numba.njit(cache=True, nogil=True, inline="always")
def _obvp(dx, dy, dz, vx, vy, vz, t, rho):  # pragma: no cover - compiled
    """rho T + int_0^T |u|^2 of the cubic from (0, v) to (d, 0) in time T; also c2, c3."""
    cost = rho * t
    for d, v in ((dx, vx), (dy, vy), (dz, vz)):
        e = d - v * t  # position left after coasting
        dv = -v
        c3 = (dv * t - 2.0 * e) / t**3
        c2 = (3.0 * e - dv * t) / t**2
        cost += 4.0 * c2 * c2 * t + 12.0 * c2 * c3 * t * t + 12.0 * c3 * c3 * t**3
    return cost


@numba.njit(cache=True, nogil=True)
def _best_t(dx, dy, dz, vx, vy, vz, rho, v_max):  # pragma: no cover - compiled
    """(min cost, its T) of :func:`_obvp` over a geometric grid of durations."""
    dist = math.sqrt(dx * dx + dy * dy + dz * dz)
    t0 = max(dist / v_max, 0.1) * 0.6
    best, best_t = np.inf, t0
    t = t0
    for _ in range(_N_T):
        c = _obvp(dx, dy, dz, vx, vy, vz, t, rho)
        if c < best:
            best, best_t = c, t
        t *= 1.25
    return best, best_t


@numba.njit(cache=True, nogil=True, inline="always")
def _clear_at(dist, lo, res, face_cm, x, y, z):  # pragma: no cover - compiled
    """Clearance (cm) of the voxel holding world point (x, y, z); -1 outside the grid."""
    nx, ny, nz = dist.shape
    i = int(math.floor((x - lo[0]) / res))
    j = int(math.floor((y - lo[1]) / res))
    k = int(math.floor((z - lo[2]) / res))
    if i < 0 or j < 0 or k < 0 or i >= nx or j >= ny or k >= nz:
        return -1
    return _clear_cm(dist, i, j, k, face_cm, nx, ny, nz)


@numba.njit(cache=True, nogil=True)
def _shot_ok(dist, lo, res, face_cm, p, v, goal, t, thr_cm, v_max):  # pragma: no cover
    """The boundary problem's cubic from (p, v) to (goal, 0) in time t keeps the clearance
    (no deeper than it starts) and the speed limit (5 % slack); returns (ok, c2, c3)."""
    c2 = np.empty(3)
    c3 = np.empty(3)
    for a in range(3):
        e = goal[a] - p[a] - v[a] * t
        dv = -v[a]
        c3[a] = (dv * t - 2.0 * e) / t**3
        c2[a] = (3.0 * e - dv * t) / t**2
    c_start = _clear_at(dist, lo, res, face_cm, p[0], p[1], p[2])
    thr = min(thr_cm, c_start)
    n = min(max(int(math.ceil(t * v_max / (0.5 * res))), 4), 400)
    for s in range(1, n + 1):
        ts = t * s / n
        sp2 = 0.0
        q = np.empty(3)
        for a in range(3):
            q[a] = p[a] + v[a] * ts + c2[a] * ts * ts + c3[a] * ts**3
            va = v[a] + 2.0 * c2[a] * ts + 3.0 * c3[a] * ts * ts
            sp2 += va * va
        if sp2 > (1.05 * v_max) ** 2:
            return False, c2, c3
        if _clear_at(dist, lo, res, face_cm, q[0], q[1], q[2]) < thr:
            return False, c2, c3
    return True, c2, c3


@numba.njit(cache=True, nogil=True)
def _kino_astar(
    dist, node_of, lo, res, face_cm, p0, v0, goal, thr_cm, v_max, inputs, taus, rho, lam,
    horizon, shot_range, max_expand, nodes,
):  # pragma: no cover - compiled  # fmt: skip
    """Kinodynamic A* (module docstring). ``node_of`` (-1) is a caller-owned buffer over the
    grid, left as found; ``nodes`` the caller-owned node arrays (:func:`_node_arrays`, their
    ``closed`` flags 0), left with the flags 0. Returns the path's node arrays, the shot (T,
    c2, c3), whether the goal was reached and the number of expansions."""
    nx, ny, nz = dist.shape
    pos, vel, acc, dur, parent, g, f, cell, closed = nodes
    max_nodes = pos.shape[0]
    acc[0] = 0.0  # the root's incoming primitive: none
    dur[0] = 0.0
    parent[0] = -1
    hp = np.empty(2 * 4096, np.float64)  # the open list: search.py's interleaved heap
    shot_c2 = np.zeros(3)
    shot_c3 = np.zeros(3)
    shot_t = 0.0
    # root
    pos[0] = p0
    vel[0] = v0
    g[0] = 0.0
    h0, _ = _best_t(goal[0] - p0[0], goal[1] - p0[1], goal[2] - p0[2],
                    v0[0], v0[1], v0[2], rho, v_max)  # fmt: skip
    f[0] = lam * h0
    i0 = int(math.floor((p0[0] - lo[0]) / res))
    j0 = int(math.floor((p0[1] - lo[1]) / res))
    k0 = int(math.floor((p0[2] - lo[2]) / res))
    i0, j0, k0 = min(max(i0, 0), nx - 1), min(max(j0, 0), ny - 1), min(max(k0, 0), nz - 1)
    cell[0] = (i0 * ny + j0) * nz + k0
    node_of[cell[0]] = 0
    n_nodes = 1
    _pair_push(hp, 0, f[0], 0)
    size = 1
    best, best_h = 0, h0
    last, reached, expanded = 0, False, 0
    while size > 0 and expanded < max_expand:
        key = hp[0]
        n = _pair_pop(hp, size)
        size -= 1
        if closed[n] or key > f[n] + 1e-12:
            continue  # expanded already, or a stale heap entry of a replaced node
        closed[n] = 1
        expanded += 1
        p = pos[n]
        v = vel[n]
        dgx, dgy, dgz = goal[0] - p[0], goal[1] - p[1], goal[2] - p[2]
        dgoal = math.sqrt(dgx * dgx + dgy * dgy + dgz * dgz)
        h_n = (f[n] - g[n]) / lam
        if h_n < best_h:
            best, best_h = n, h_n
        if dgoal < shot_range:
            _, t_shot = _best_t(dgx, dgy, dgz, v[0], v[1], v[2], rho, v_max)
            ok, c2, c3 = _shot_ok(dist, lo, res, face_cm, p, v, goal, t_shot, thr_cm, v_max)
            if ok:
                last, reached, shot_t = n, True, t_shot
                shot_c2[:] = c2
                shot_c3[:] = c3
                break
        dsx, dsy, dsz = p[0] - p0[0], p[1] - p0[1], p[2] - p0[2]
        if math.sqrt(dsx * dsx + dsy * dsy + dsz * dsz) >= horizon:
            last = n
            break
        c_par = _clear_at(dist, lo, res, face_cm, p[0], p[1], p[2])
        thr = min(thr_cm, c_par)
        for ui in range(inputs.shape[0]):
            ux, uy, uz = inputs[ui, 0], inputs[ui, 1], inputs[ui, 2]
            for ti in range(taus.shape[0]):
                tau = taus[ti]
                nvx, nvy, nvz = v[0] + ux * tau, v[1] + uy * tau, v[2] + uz * tau
                if nvx * nvx + nvy * nvy + nvz * nvz > v_max * v_max:
                    continue
                px = p[0] + v[0] * tau + 0.5 * ux * tau * tau
                py = p[1] + v[1] * tau + 0.5 * uy * tau * tau
                pz = p[2] + v[2] * tau + 0.5 * uz * tau * tau
                ci = int(math.floor((px - lo[0]) / res))
                cj = int(math.floor((py - lo[1]) / res))
                ck = int(math.floor((pz - lo[2]) / res))
                if ci < 0 or cj < 0 or ck < 0 or ci >= nx or cj >= ny or ck >= nz:
                    continue
                c = (ci * ny + cj) * nz + ck
                if c == cell[n]:
                    continue
                other = node_of[c]
                if other >= 0 and closed[other]:
                    continue
                gn = g[n] + (ux * ux + uy * uy + uz * uz + rho) * tau
                if other >= 0 and gn >= g[other]:
                    continue
                # collision check along the primitive
                length = math.sqrt((px - p[0]) ** 2 + (py - p[1]) ** 2 + (pz - p[2]) ** 2)
                m = max(int(math.ceil(length / (0.5 * res))), 2)
                free = True
                for s in range(1, m + 1):
                    ts = tau * s / m
                    qx = p[0] + v[0] * ts + 0.5 * ux * ts * ts
                    qy = p[1] + v[1] * ts + 0.5 * uy * ts * ts
                    qz = p[2] + v[2] * ts + 0.5 * uz * ts * ts
                    if _clear_at(dist, lo, res, face_cm, qx, qy, qz) < thr:
                        free = False
                        break
                if not free:
                    continue
                if other >= 0:
                    k = other
                else:
                    if n_nodes >= max_nodes:
                        continue
                    k = n_nodes
                    n_nodes += 1
                    cell[k] = c
                    node_of[c] = k
                pos[k, 0], pos[k, 1], pos[k, 2] = px, py, pz
                vel[k, 0], vel[k, 1], vel[k, 2] = nvx, nvy, nvz
                acc[k, 0], acc[k, 1], acc[k, 2] = ux, uy, uz
                dur[k] = tau
                parent[k] = n
                g[k] = gn
                hc, _ = _best_t(goal[0] - px, goal[1] - py, goal[2] - pz, nvx, nvy, nvz,
                                rho, v_max)  # fmt: skip
                f[k] = gn + lam * hc
                if 2 * size + 2 > hp.shape[0]:
                    hp = _grow(hp, 2 * size)
                _pair_push(hp, size, f[k], k)
                size += 1
    if not reached and last == 0:
        last = best
    for k in range(n_nodes):  # leave the buffers as found
        node_of[cell[k]] = -1
        closed[k] = 0
    chain = np.empty(n_nodes, np.int64)
    m = 0
    k = last
    while k >= 0:
        chain[m] = k
        m += 1
        k = parent[k]
    chain = chain[:m][::-1].copy()
    return (pos[chain], vel[chain], acc[chain], dur[chain], reached, shot_t, shot_c2,
            shot_c3, expanded)  # fmt: skip


_POOL = threading.local()


def _node_buffer(n: int) -> np.ndarray:
    buf = getattr(_POOL, "node_of", None)
    if buf is None or buf.shape[0] != n:
        buf = np.full(n, -1, np.int64)
        _POOL.node_of = buf
    return buf


def _node_arrays(n: int) -> tuple[np.ndarray, ...]:
    """The search's node arrays for ``n`` nodes (position, velocity, input, duration, parent,
    g, f, voxel, closed), one set per thread, reused across searches (as ``_node_buffer``:
    allocating and clearing them cost a tenth of a search)."""
    arrays = getattr(_POOL, "nodes", None)
    if arrays is None or arrays[0].shape[0] != n:
        arrays = (np.empty((n, 3)), np.empty((n, 3)), np.empty((n, 3)), np.empty(n),
                  np.empty(n, np.int64), np.empty(n), np.empty(n), np.empty(n, np.int64),
                  np.zeros(n, np.uint8))  # fmt: skip
        _POOL.nodes = arrays
    return arrays


def input_set(a_xy: float, a_up: float, a_down: float) -> np.ndarray:
    """The acceleration inputs (U, 3): 5 levels per horizontal axis (the four corners, whose
    norm exceeds the horizontal limit by 41 %, left out) times {-a_down, 0, a_up}."""
    lv = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    xy = np.array([(a, b) for a in lv for b in lv if a * a + b * b <= 1.26])
    z = np.array([-a_down, 0.0, a_up])
    return np.array([(x * a_xy, y * a_xy, w) for x, y in xy for w in z])


@dataclass(frozen=True)
class KinoPath:
    """A kinodynamic search result, sampled: times (K,) from 0, positions, velocities (K, 3)."""

    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray
    reached: bool
    expansions: int


def kino_search(
    grid,
    p0: np.ndarray,
    v0: np.ndarray,
    goal: np.ndarray,
    thr: float,
    *,
    v_max: float,
    a_xy: float,
    a_up: float,
    a_down: float,
    rho: float = 10.0,
    tau: float = 0.5,
    lam: float = 2.0,
    horizon: float = 10.0,
    shot_range: float = 8.0,
    max_expand: int = 4000,
    max_nodes: int = 60_000,
    sample_dt: float = 0.05,
) -> KinoPath:
    """Kinodynamic A* from (p0, v0) toward the goal at rest (module docstring), sampled every
    ``sample_dt`` s. A repeated query on an unchanged map (a vehicle holding still before a
    wall) is answered from the grid's search cache
    (:func:`volary.studies.flyingtrust.planners.search.reuse`): the same result, bit for bit,
    shared (do not modify its arrays)."""
    p0 = np.asarray(p0, dtype=np.float64)
    v0 = np.asarray(v0, dtype=np.float64)
    sp = float(np.linalg.norm(v0))
    if sp > v_max:
        v0 = v0 * (v_max / sp)
    goal = np.asarray(goal, dtype=np.float64)
    scalars = (int(round(thr * 100.0)), float(v_max), float(a_xy), float(a_up), float(a_down),
               float(rho), float(tau), float(lam), float(horizon), float(shot_range),
               int(max_expand), int(max_nodes), float(sample_dt))  # fmt: skip
    query = ("kino", p0.tobytes(), v0.tobytes(), goal.tobytes(), *scalars)
    return reuse(grid, query, lambda: _kino_path(grid, p0, v0, goal, *scalars))


def _kino_path(grid, p0, v0, goal, thr_cm, v_max, a_xy, a_up, a_down, rho, tau, lam, horizon,
               shot_range, max_expand, max_nodes, sample_dt) -> KinoPath:  # fmt: skip
    """:func:`kino_search`'s search and sampling, uncached."""
    out = _kino_astar(
        grid.dist_cm, _node_buffer(int(np.prod(grid.shape))), grid.lo, float(grid.res),
        float(grid.res * 100.0), p0, v0, goal, thr_cm, v_max, input_set(a_xy, a_up, a_down),
        np.array([0.5 * tau, tau]), rho, lam, horizon, shot_range, max_expand,
        _node_arrays(max_nodes),
    )  # fmt: skip
    pos, vel, acc, dur, reached, shot_t, c2, c3, expanded = out
    # sample: each node's incoming primitive, then the shot
    ts_all, ps_all, vs_all = [np.zeros(1)], [pos[:1]], [vel[:1]]
    t_off = 0.0
    for k in range(1, len(pos)):
        tau_k = float(dur[k])
        n = max(int(math.ceil(tau_k / sample_dt)), 1)
        s = np.linspace(0.0, tau_k, n + 1)[1:, None]
        pa, va, ua = pos[k - 1], vel[k - 1], acc[k]
        ps_all.append(pa + va * s + 0.5 * ua * s * s)
        vs_all.append(va + ua * s)
        ts_all.append(t_off + s[:, 0])
        t_off += tau_k
    if reached and shot_t > 0:
        n = max(int(math.ceil(shot_t / sample_dt)), 1)
        s = np.linspace(0.0, shot_t, n + 1)[1:, None]
        pa, va = pos[-1], vel[-1]
        ps_all.append(pa + va * s + c2 * s * s + c3 * s**3)
        vs_all.append(va + 2 * c2 * s + 3 * c3 * s * s)
        ts_all.append(t_off + s[:, 0])
    arrays = np.concatenate(ts_all), np.vstack(ps_all), np.vstack(vs_all)
    for a in arrays:
        a.flags.writeable = False  # shared by the cache
    return KinoPath(*arrays, bool(reached), int(expanded))


@dataclass(frozen=True)
class KinodynamicOptions(BsplineOptions):
    """Options of :class:`KinodynamicPlanner` beyond :class:`BsplineOptions`."""

    time_weight: float = 10.0  # rho, the search's cost per second
    tau: float = 0.5  # s, the longer primitive duration (the shorter is half)
    kino_heuristic: float = 2.0  # lambda_h
    kino_expansions: int = 4000
    shot_range: float = 8.0  # m, analytic expansion tried within this of the goal


class KinodynamicPlanner(BsplinePlanner):
    """Fast-Planner's family (module docstring). Keyword options:
    :class:`KinodynamicOptions`."""

    name = "kinodynamic"
    options_type = KinodynamicOptions

    def reset(self, task) -> None:
        super().reset(task)
        self._v_start = np.zeros(3)
        self._path_t: np.ndarray | None = None
        self._cand_t: np.ndarray | None = None
        self.stats["expansions"] = 0

    def _start_state(self, obs, pos):
        p0, v0, a0 = super()._start_state(obs, pos)
        self._v_start = v0
        return p0, v0, a0

    def _find_path(
        self, p0: np.ndarray, goal: np.ndarray, tol: float, margin: float
    ) -> tuple[np.ndarray, bool] | None:
        o: KinodynamicOptions = self.options  # type: ignore[assignment]
        res = kino_search(
            self.grid, p0, self._v_start, goal, self.radius + margin,
            v_max=self.v_max, a_xy=self.a_xy, a_up=self.a_up, a_down=self.a_down,
            rho=o.time_weight, tau=o.tau, lam=o.kino_heuristic,
            horizon=o.horizon + 2.0, shot_range=o.shot_range,
            max_expand=int(o.kino_expansions),
        )  # fmt: skip
        self.stats["expansions"] += res.expansions
        if len(res.positions) < 2:
            return None
        self._cand_t = res.times
        return res.positions, res.reached

    def _accept_path(self, path: np.ndarray, reached: bool) -> None:
        super()._accept_path(path, reached)
        self._path_t = self._cand_t

    def _trim_path(self, p0: np.ndarray) -> None:
        before = self._path
        super()._trim_path(p0)
        if self._path_t is not None and before is not None:
            self._path_t = self._path_t[len(before) - len(self._path) :]  # type: ignore[arg-type]

    def _fit_spline(self, p0: np.ndarray, v0: np.ndarray, a0: np.ndarray, t: float) -> NavReference:
        self._fitted = False
        path, pt = self._path, self._path_t
        assert path is not None
        if pt is None or len(pt) != len(path):
            return MapperPlanner._fit(self, p0, v0, a0, t)
        pts = np.vstack([p0[None], path[1:]])
        tt = pt - pt[0]
        cum = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(pts, axis=0), axis=1))])
        if cum[-1] < 1.0 or tt[-1] < 0.3:
            return MapperPlanner._fit(
                self, p0, v0, a0, t
            )  # a short remainder: the mapper's min-snap
        h = self.options.horizon
        if cum[-1] > h:
            t_cut = float(np.interp(h, cum, tt))
            keep = tt < t_cut
            end = np.array([np.interp(t_cut, tt, pts[:, i]) for i in range(3)])
            pts = np.vstack([pts[keep], end[None]])
            tt = np.append(tt[keep], t_cut)
        knots, dt = bspline.knots_along(pts, tt, self._knot_dt())
        d_thr = self.radius + self.margin

        def build(w: float) -> tuple[np.ndarray, float]:
            q = bspline.fit(knots, v0, a0, dt)
            esdf = bspline.Objective(w_esdf=1.0, grid=self.grid, d_thr=d_thr)
            return self._time_scaled(q, dt, v0, a0, esdf, w)

        return self._spline_or_fallback(build, p0, v0, a0, t)
