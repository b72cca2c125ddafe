"""The planners' grid A* (``volary.studies.flyingtrust.planners.search``) against a plain-Python
reference.

The compiled search keeps its open list as an interleaved (key, node) heap for speed; the
reference below is the textbook weighted A* of the module docstring with a list-based binary
heap that sifts by the same rules, so ties are broken identically and the two must agree on
the path, the reached flag and the expansion count, bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from volary.studies.flyingtrust.planners.occupancy import OccupancyGrid
from volary.studies.flyingtrust.planners.search import search


def _push(heap: list[tuple[float, int]], item: tuple[float, int]) -> None:
    heap.append(item)
    i = len(heap) - 1
    while i > 0:
        p = (i - 1) // 2
        if heap[p][0] <= heap[i][0]:
            break
        heap[p], heap[i] = heap[i], heap[p]
        i = p


def _pop(heap: list[tuple[float, int]]) -> int:
    node = heap[0][1]
    last = heap.pop()
    if heap:
        heap[0] = last
        i, size = 0, len(heap)
        while 2 * i + 1 < size:
            c = 2 * i + 1
            if c + 1 < size and heap[c + 1][0] < heap[c][0]:
                c += 1
            if heap[i][0] <= heap[c][0]:
                break
            heap[c], heap[i] = heap[i], heap[c]
            i = c
    return node


def reference_search(grid, start, goal, thr, *, goal_tol, soft, w_clear, kz, eps, max_expand):
    """search() in plain Python (module docstring of volary.studies.flyingtrust.planners.search)."""
    nx, ny, nz = grid.shape
    s = tuple(int(v) for v in grid.clamp(grid.index(np.asarray(start)[None]))[0])
    t = tuple(int(v) for v in grid.clamp(grid.index(np.asarray(goal)[None]))[0])
    thr_cm, tol, face_cm = int(round(thr * 100.0)), goal_tol / grid.res, grid.res * 100.0
    soft_cm = max(soft, 1e-3) * 100.0

    def clear(i: int, j: int, k: int) -> int:
        f = min(i, nx - 1 - i, j, ny - 1 - j, k, nz - 1 - k)
        return min(int(grid.dist_cm[i, j, k]), int(face_cm * (f + 0.5)))

    g = {s: 0.0}  # float32 storage, as the compiled search's buffer
    parent: dict = {s: None}
    closed: set = set()
    heap: list[tuple[float, int]] = [(0.0, (s[0] * ny + s[1]) * nz + s[2])]
    best, best_h, found, expanded = s, math.inf, False, 0
    while heap and expanded < max_expand:
        n = _pop(heap)
        u = (n // (ny * nz), (n // nz) % ny, n % nz)
        if u in closed:
            continue
        closed.add(u)
        expanded += 1
        d = (t[0] - u[0], t[1] - u[1], t[2] - u[2])
        dz = d[2] * kz
        h = math.sqrt(d[0] * d[0] + d[1] * d[1] + dz * dz)
        if h < best_h:
            best, best_h = u, h
        if math.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]) <= tol:
            found, best = True, u
            break
        cu = clear(*u)
        for a in (-1, 0, 1):
            for b in (-1, 0, 1):
                for c in (-1, 0, 1):
                    v = (u[0] + a, u[1] + b, u[2] + c)
                    if (a, b, c) == (0, 0, 0) or v in closed:
                        continue
                    if not (0 <= v[0] < nx and 0 <= v[1] < ny and 0 <= v[2] < nz):
                        continue
                    cv = clear(*v)
                    if cv < thr_cm and not (cu < thr_cm and cv > cu):
                        continue
                    pen = w_clear * (soft_cm - cv) / soft_cm if cv < soft_cm else 0.0
                    gv = g[u] + math.sqrt(a * a + b * b + (c * kz) * (c * kz)) * (1.0 + pen)
                    if gv < g.get(v, math.inf):
                        g[v] = float(np.float32(gv))
                        parent[v] = u
                        e = (t[0] - v[0], t[1] - v[1], (t[2] - v[2]) * kz)
                        hv = math.sqrt(e[0] * e[0] + e[1] * e[1] + e[2] * e[2])
                        _push(heap, (gv + eps * hv, (v[0] * ny + v[1]) * nz + v[2]))
    path = [best]
    while parent[path[-1]] is not None:
        path.append(parent[path[-1]])
    return grid.center(np.array(path[::-1])), found, expanded


@pytest.mark.parametrize("seed", range(4))
def test_compiled_search_matches_the_python_reference(seed):
    """Random small maps (some with a wall and a narrow gap), random queries and options:
    reached and failed searches, budgets hit, starts inside the inflation."""
    rng = np.random.default_rng(seed)
    hi = rng.uniform([3.0, 2.0, 1.0], [7.0, 4.0, 2.0])
    grid = OccupancyGrid(np.zeros(3), hi, 0.2)
    grid.insert_points(rng.uniform(0, hi, size=(int(rng.integers(5, 60)), 3)))
    if seed % 2:  # a wall across x with a square gap
        y, z = np.meshgrid(np.arange(0, hi[1], 0.1), np.arange(0, hi[2], 0.1))
        keep = ~((np.abs(y - hi[1] / 2) < 0.3) & (np.abs(z - hi[2] / 2) < 0.3))
        grid.insert_points(np.stack([np.full(keep.sum(), hi[0] / 2), y[keep], z[keep]], -1))
    outcomes = set()
    for q in range(7):
        start, goal = rng.uniform(0, hi), rng.uniform(0, hi)
        if q == 0:  # corner to corner on a budget of 5 expansions: a partial path
            start, goal = np.full(3, 0.3), hi - 0.3
        opts = dict(
            goal_tol=float(rng.choice([0.3, 0.6])),
            soft=float(rng.uniform(0.3, 1.2)),
            w_clear=float(rng.choice([0.0, rng.uniform(0.0, 3.0)])),  # 0: many equal keys
            kz=float(rng.choice([1.0, 1.5])),
            eps=float(rng.choice([1.0, 1.5])),
            max_expand=5 if q == 0 else int(rng.choice([300, 20_000])),
        )
        thr = float(rng.uniform(0.1, 0.5))
        grid.search_cache.clear()
        got = search(grid, start, goal, thr, **opts)
        want = reference_search(grid, start, goal, thr, **opts)
        assert np.array_equal(got[0], want[0]) and got[1:] == want[1:], (start, goal, opts)
        outcomes.add((got[1], got[2] == opts["max_expand"]))
    assert (False, True) in outcomes and len(outcomes) >= 2  # not only one kind of search


def test_equal_keys_are_broken_as_the_reference_breaks_them():
    """An empty map with unit costs (no clearance cost, eps = 1, kz = 1): many paths cost the
    same, so which one comes back depends on how the heap orders equal keys."""
    grid = OccupancyGrid(np.zeros(3), np.array([4.0, 3.0, 2.0]), 0.2)
    opts = dict(goal_tol=0.1, soft=0.5, w_clear=0.0, kz=1.0, eps=1.0, max_expand=20_000)
    for goal in ([3.5, 2.1, 1.7], [3.9, 0.5, 0.3], [2.0, 2.9, 1.1]):
        grid.search_cache.clear()
        got = search(grid, np.array([0.3, 0.5, 0.3]), np.array(goal), 0.05, **opts)
        want = reference_search(grid, np.array([0.3, 0.5, 0.3]), np.array(goal), 0.05, **opts)
        assert np.array_equal(got[0], want[0]) and got[1:] == want[1:]
