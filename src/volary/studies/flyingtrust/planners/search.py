"""Grid path search for the ``mapper`` planner: weighted A* over 26-connected voxels,
line-of-sight checks and path shortcutting (numba, compiled on first use and cached).

A voxel is *free* when its clearance (:meth:`OccupancyGrid.clearance` in cm: distance to the
nearest occupied voxel centre or face of the volume) is at least ``thr_cm``. Step cost
(Hart, Nilsson & Raphael 1968; weighted A* of Pohl 1970, f = g + eps h):

    c(a, b) = res |D (b - a)| (1 + w max(0, soft - clear(b)) / soft),   D = diag(1, 1, kz)

so the search prefers horizontal moves (kz >= 1: the forward camera sees little above and
below) and keeps away from obstacles up to ``soft`` cm (the clearance cost of ESDF planners such
as Fast-Planner's kinodynamic search, here on the grid). h is |D (goal - a)| res (admissible
for eps = 1). A start voxel inside the inflation may be left through voxels of strictly
increasing clearance (escape). When the goal is not reached within ``max_expand`` expansions,
or every reachable voxel is explored, the path to the expanded voxel nearest to the goal is
returned with ``reached = False`` (a receding-horizon partial plan).

Reuse: the search is a pure function of the distance field and its arguments, so ``search``
keeps the last results of each grid (``OccupancyGrid.search_cache``, emptied when the grid's
``version`` changes) and answers a repeated query from them: the same path, bit for bit. A
vehicle hovering before a wall it cannot pass (a failed search exhausts its expansion budget)
then stops paying for the same failure at every planning call. :func:`reuse` is that cache;
the kinodynamic search keeps its results there too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import numba
import numpy as np

from volary.studies.flyingtrust.planners.occupancy import OccupancyGrid

SEARCH_CACHE = 8  # results kept per grid (module docstring: reuse)
T = TypeVar("T")


@numba.njit(cache=True, nogil=True, inline="always")
def _clear_cm(dist, i, j, k, face_cm, nx, ny, nz):  # pragma: no cover - compiled
    c = np.int64(dist[i, j, k])
    # distance (cm) of the voxel centre to the six faces of the volume, in units of res
    f = min(min(i, nx - 1 - i), min(min(j, ny - 1 - j), min(k, nz - 1 - k)))
    fc = np.int64(face_cm * (f + 0.5))
    return min(c, fc)


# The open list: a binary min-heap of (key, node) pairs stored interleaved in one float64
# array (hp[2 i] the key, hp[2 i + 1] the node; node indices < 2^26 are exact). A sift step
# then reads and swaps one cache line, not one in each of two arrays (a search that exhausts
# its 250,000-expansion budget leaves millions of stale entries in the heap). Pops, and the
# order of equal keys, are those of the two-array heap it replaced (tests/test_nav_search.py).
# The kinodynamic search uses it too.


@numba.njit(cache=True, nogil=True)
def _grow(a, size):  # pragma: no cover - compiled
    """``a`` with twice the room, its first ``size`` entries kept."""
    out = np.empty(a.shape[0] * 2, a.dtype)
    out[:size] = a[:size]
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def _pair_push(hp, size, key, node):  # pragma: no cover - compiled
    """Append (key, node) and sift it up; ``hp`` must have room for ``size + 1`` pairs."""
    i = size
    hp[2 * i] = key
    hp[2 * i + 1] = node
    while i > 0:
        p = (i - 1) // 2
        if hp[2 * p] <= hp[2 * i]:
            break
        hp[2 * p], hp[2 * i] = hp[2 * i], hp[2 * p]
        hp[2 * p + 1], hp[2 * i + 1] = hp[2 * i + 1], hp[2 * p + 1]
        i = p


@numba.njit(cache=True, nogil=True, inline="always")
def _pair_pop(hp, size):  # pragma: no cover - compiled
    """Remove the least pair; returns its node (the heap then holds ``size - 1`` pairs)."""
    node = np.int64(hp[1])
    size -= 1
    hp[0], hp[1] = hp[2 * size], hp[2 * size + 1]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        c = left
        if left + 1 < size and hp[2 * left + 2] < hp[2 * left]:
            c = left + 1
        if hp[2 * i] <= hp[2 * c]:
            break
        hp[2 * c], hp[2 * i] = hp[2 * i], hp[2 * c]
        hp[2 * c + 1], hp[2 * i + 1] = hp[2 * i + 1], hp[2 * c + 1]
        i = c
    return node


@numba.njit(cache=True, nogil=True)
def _astar(
    dist, g, parent, closed, start, goal, thr_cm, goal_tol, face_cm, soft_cm, w_clear, kz, eps,
    max_expand,
):  # pragma: no cover - compiled  # fmt: skip
    """Weighted A* (module docstring). ``g`` (inf), ``parent`` (-1) and ``closed`` (0) are
    caller-owned buffers over the grid, left as they were found (only touched nodes reset)."""
    nx, ny, nz = dist.shape
    hp = np.empty(2 * 4096, np.float64)
    touched = np.empty(4096, np.int64)
    s = (start[0] * ny + start[1]) * nz + start[2]
    g[s] = 0.0
    touched[0] = s
    n_touched = 1
    _pair_push(hp, 0, 0.0, s)
    size = 1
    best, best_h = s, np.inf
    found = False
    expanded = 0
    while size > 0 and expanded < max_expand:
        u = _pair_pop(hp, size)
        size -= 1
        if closed[u]:
            continue
        closed[u] = 1
        expanded += 1
        ui = u // (ny * nz)
        uj = (u // nz) % ny
        uk = u % nz
        dx, dy, dz = goal[0] - ui, goal[1] - uj, (goal[2] - uk) * kz
        hu = np.sqrt(dx * dx + dy * dy + dz * dz)
        if hu < best_h:
            best, best_h = u, hu
        ex, ey, ez = goal[0] - ui, goal[1] - uj, goal[2] - uk
        if np.sqrt(ex * ex + ey * ey + ez * ez) <= goal_tol:
            found = True
            best = u
            break
        cu = _clear_cm(dist, ui, uj, uk, face_cm, nx, ny, nz)
        for a in range(-1, 2):
            vi = ui + a
            if vi < 0 or vi >= nx:
                continue
            for b in range(-1, 2):
                vj = uj + b
                if vj < 0 or vj >= ny:
                    continue
                for c in range(-1, 2):
                    if a == 0 and b == 0 and c == 0:
                        continue
                    vk = uk + c
                    if vk < 0 or vk >= nz:
                        continue
                    v = (vi * ny + vj) * nz + vk
                    if closed[v]:
                        continue
                    cv = _clear_cm(dist, vi, vj, vk, face_cm, nx, ny, nz)
                    if cv < thr_cm and not (cu < thr_cm and cv > cu):
                        continue
                    step = np.sqrt(a * a + b * b + (c * kz) ** 2)
                    pen = 0.0
                    if cv < soft_cm:
                        pen = w_clear * (soft_cm - cv) / soft_cm
                    gv = g[u] + step * (1.0 + pen)
                    if gv < g[v]:
                        if g[v] == np.inf:
                            if n_touched >= touched.shape[0]:
                                touched = _grow(touched, n_touched)
                            touched[n_touched] = v
                            n_touched += 1
                        g[v] = gv
                        parent[v] = u
                        fx, fy, fz = goal[0] - vi, goal[1] - vj, (goal[2] - vk) * kz
                        hv = np.sqrt(fx * fx + fy * fy + fz * fz)
                        if 2 * size + 2 > hp.shape[0]:
                            hp = _grow(hp, 2 * size)
                        _pair_push(hp, size, gv + eps * hv, v)
                        size += 1
    # walk back from the goal (or the best partial node)
    count = 0
    v = best
    while v != -1:
        count += 1
        v = parent[v]
    path = np.empty((count, 3), np.int64)
    v = best
    for m in range(count - 1, -1, -1):
        path[m, 0] = v // (ny * nz)
        path[m, 1] = (v // nz) % ny
        path[m, 2] = v % nz
        v = parent[v]
    for m in range(n_touched):
        v = touched[m]
        g[v] = np.inf
        parent[v] = -1
        closed[v] = 0
    return path, found, expanded


@numba.njit(cache=True, nogil=True)
def _segment_clear(dist, a, b, thr_cm, face_cm):  # pragma: no cover - compiled
    """True when every sample (every 1/2 voxel) of the segment a -> b (voxel coordinates,
    continuous: voxel centres at integer + 0.5) lies in a voxel with clearance >= thr_cm."""
    nx, ny, nz = dist.shape
    d = np.sqrt(((b - a) ** 2).sum())
    steps = int(np.ceil(d * 2.0)) + 1
    for s in range(steps + 1):
        t = s / steps
        p0 = a[0] + t * (b[0] - a[0])
        p1 = a[1] + t * (b[1] - a[1])
        p2 = a[2] + t * (b[2] - a[2])
        i, j, k = int(np.floor(p0)), int(np.floor(p1)), int(np.floor(p2))
        if i < 0 or j < 0 or k < 0 or i >= nx or j >= ny or k >= nz:
            return False
        if _clear_cm(dist, i, j, k, face_cm, nx, ny, nz) < thr_cm:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _shortcut(dist, pts, thr_cm, face_cm):  # pragma: no cover - compiled
    """Indices of a greedy line-of-sight subsequence of ``pts`` (continuous voxel coords): from
    each kept point, extend while the segment to the next point stays clear."""
    n = pts.shape[0]
    keep = np.empty(n, np.int64)
    m = 0
    keep[m] = 0
    m += 1
    i = 0
    while i < n - 1:
        j = i + 1
        while j + 1 < n and _segment_clear(dist, pts[i], pts[j + 1], thr_cm, face_cm):
            j += 1
        keep[m] = j
        m += 1
        i = j
    return keep[:m]


_POOL = threading.local()


def _buffers(shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Search buffers for a grid of ``shape``, one set per thread, shared by every planner of
    the thread (planners of a batch are called in turn) and reused across searches: ``_astar``
    resets the nodes it touched, so no O(grid) initialisation per search."""
    n = int(np.prod(shape))
    cached = getattr(_POOL, "buffers", None)
    if cached is None or cached[0].shape[0] != n:
        cached = (
            np.full(n, np.inf, np.float32),
            np.full(n, -1, np.int64),
            np.zeros(n, np.uint8),
        )
        _POOL.buffers = cached
    return cached


def search(
    grid: OccupancyGrid,
    start: np.ndarray,
    goal: np.ndarray,
    thr: float,
    *,
    goal_tol: float = 0.3,
    soft: float = 1.0,
    w_clear: float = 2.0,
    kz: float = 1.5,
    eps: float = 1.5,
    max_expand: int = 400_000,
) -> tuple[np.ndarray, bool, int]:
    """Path (K, 3) of world voxel centres from ``start`` toward ``goal`` (m), free at
    clearance ``thr`` (m); returns (path, reached, expansions). See the module docstring."""
    s = grid.clamp(grid.index(np.asarray(start)[None]))[0].astype(np.int64)
    g = grid.clamp(grid.index(np.asarray(goal)[None]))[0].astype(np.int64)
    args = (
        int(round(thr * 100.0)),
        float(goal_tol / grid.res),
        float(grid.res * 100.0),
        float(max(soft, 1e-3) * 100.0),
        float(w_clear),
        float(kz),
        float(eps),
        int(max_expand),
    )

    def run() -> tuple[np.ndarray, bool, int]:
        g_buf, parent, closed = _buffers(grid.shape)
        return _astar(grid.dist_cm, g_buf, parent, closed, s, g, *args)

    path, found, expanded = reuse(grid, ("grid", *s.tolist(), *g.tolist(), *args), run)
    return grid.center(path), bool(found), int(expanded)


def reuse(grid: OccupancyGrid, query: tuple, run: Callable[[], T]) -> T:
    """``run()``'s result for ``query`` on this map: from the grid's cache when the same query
    was answered since the map last changed (module docstring: reuse), else computed and kept.
    ``query`` must name every argument the result depends on besides the map; the result is
    shared, so callers must not modify it."""
    cache = grid.search_cache
    key = (grid.version, *query)
    if key in cache:
        return cache[key]
    hit = run()
    if next(iter(cache), key)[0] != grid.version:
        cache.clear()  # the map changed: older results are stale
    elif len(cache) >= SEARCH_CACHE:
        cache.pop(next(iter(cache)))
    cache[key] = hit
    return hit


def segment_clear(grid: OccupancyGrid, a: np.ndarray, b: np.ndarray, thr: float) -> bool:
    """True when the straight segment a -> b (world, m) keeps clearance >= ``thr`` m."""
    va = (np.asarray(a, dtype=np.float64) - grid.lo) / grid.res
    vb = (np.asarray(b, dtype=np.float64) - grid.lo) / grid.res
    return bool(_segment_clear(grid.dist_cm, va, vb, int(round(thr * 100.0)), grid.res * 100.0))


def shortcut(grid: OccupancyGrid, path: np.ndarray, thr: float) -> np.ndarray:
    """Indices into ``path`` (K, 3 world) of a line-of-sight subsequence (first and last kept)."""
    if len(path) <= 2:
        return np.arange(len(path))
    v = (np.asarray(path, dtype=np.float64) - grid.lo) / grid.res
    return _shortcut(grid.dist_cm, v, int(round(thr * 100.0)), grid.res * 100.0)
