"""``topo``: Path-Guided PGO's family (Zhou, Gao, Pan & Shen, "Robust Real-time UAV Replanning
Using Guided Gradient-based Optimization and Topological Paths", ICRA 2020), written from the
paper for volary's benchmark; no code was ported.

Per call, on the ``mapper``'s map (:mod:`volary.studies.flyingtrust.planners.occupancy`):

1. **Local target**: ``horizon`` m ahead along the guiding grid A* path to the goal (the
   ``mapper``'s search, on its collision and time triggers but not for being off the path,
   ``deviation=0``: the optimized spline leaves the guide by design; PGO replans on collision
   or time).
2. **Topologically distinct guiding paths** (paper Sec. IV): the A* path to the local target,
   then up to ``n_paths - 1`` more, each searched with a tube around the middle of the
   earlier ones blocked (radius ``tube``), so it passes the obstacles on another side; a path
   longer than ``max_ratio`` times the shortest, or running within ``tube`` of an earlier one
   on average, is dropped. The paper builds a topological roadmap by sampling and keeps the
   shortest paths of distinct homotopy; blocking tubes around found paths is a cheaper way to
   the same kind of set on a voxel grid.
3. **Path-guided optimization** for each guide, in parallel in the paper and in turn here
   (Sec. III): from the straight line to the local target (the paper starts from the previous,
   colliding trajectory), a first L-BFGS stage pulls the control points toward the guide
   (J_g = sum |Q_i - G_i|^2, G_i the guide's point at Q_i's share of the arc length) with
   smoothness, so the spline takes the guide's side of each obstacle; a second stage optimizes
   smoothness, ESDF collision and feasibility (Fast-Planner's costs,
   :mod:`volary.studies.flyingtrust.planners.bspline`), with uniform time re-allocation.
4. **Selection**: the candidate with the lowest final cost (smoothness + collision +
   feasibility, plus ``time_weight`` times its duration) among those whose samples keep the
   hard clearance.

Where it differs from the paper: guides from blocked-tube A* rather than a sampled
topological roadmap; candidates optimized sequentially; the map and the recovery are the
``mapper``'s.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import numpy as np

from volary.planning.navigation import NavReference
from volary.studies.flyingtrust.planners import bspline
from volary.studies.flyingtrust.planners.bspline import BsplineOptions, BsplinePlanner
from volary.studies.flyingtrust.planners.mapper import MapperPlanner
from volary.studies.flyingtrust.planners.search import search


@dataclass(frozen=True)
class TopoOptions(BsplineOptions):
    """Options of :class:`TopoPlanner` beyond :class:`BsplineOptions`."""

    n_paths: int = 3  # guiding paths at most
    tube: float = 0.8  # m, radius blocked around earlier guides
    max_ratio: float = 1.6  # longest guide kept, relative to the shortest
    w_guide: float = 5.0
    time_weight: float = 1.0  # per second of duration in the selection cost
    guide_expansions: int = 30_000
    deviation: float = 0.0  # the spline leaves the guide by design: re-search on collision or time


def _arc(path: np.ndarray) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(path, axis=0), axis=1))])


def resample(path: np.ndarray, n: int) -> np.ndarray:
    """``n`` points evenly spaced by arc length along polyline ``path`` (K, 3)."""
    cum = _arc(path)
    s = np.linspace(0.0, cum[-1], n)
    return np.stack([np.interp(s, cum, path[:, i]) for i in range(3)], -1)


class TopoPlanner(BsplinePlanner):
    """Path-Guided PGO's family (module docstring). Keyword options: :class:`TopoOptions`."""

    name = "topo"
    options_type = TopoOptions

    def reset(self, task) -> None:
        super().reset(task)
        self.stats["guides"] = 0
        self.stats["guide_s"] = 0.0

    def _guides(self, first: np.ndarray) -> list[np.ndarray]:
        """The first guide and up to n_paths - 1 distinct ones (module docstring, step 2)."""
        o: TopoOptions = self.options  # type: ignore[assignment]
        t1 = time.perf_counter()
        guides = [first]
        start, target = first[0], first[-1]
        base = _arc(first)[-1]
        grid = self.grid.scratch()
        for _ in range(int(o.n_paths) - 1):
            self._block_tube(grid, guides[-1])
            cand, reached, _ = search(grid, start, target, self.radius + self.margin,
                                      goal_tol=0.3, max_expand=int(o.guide_expansions))  # fmt: skip
            if not reached or len(cand) < 2:
                break
            cand = np.vstack([start[None], cand[1:], target[None]])
            if _arc(cand)[-1] > o.max_ratio * base:
                break
            if any(_mean_distance(cand, g) < o.tube for g in guides):
                break
            guides.append(cand)
        self.stats["guides"] += len(guides)
        self.stats["guide_s"] += time.perf_counter() - t1
        return guides

    def _block_tube(self, grid, path: np.ndarray) -> None:
        """Mark the voxels within ``tube`` of the middle of ``path`` (1 m kept free at either
        end) as obstacles in the copied grid."""
        o: TopoOptions = self.options  # type: ignore[assignment]
        cum = _arc(path)
        keep = (cum > 1.0) & (cum < cum[-1] - 1.0)
        if not keep.any():
            return
        mid = resample(path[keep], max(int(np.ceil((cum[keep][-1] - cum[keep][0]) / 0.1)), 2))
        grid.block(grid.index(mid), _ball(o.tube, grid.res))

    def _fit_spline(self, p0: np.ndarray, v0: np.ndarray, a0: np.ndarray, t: float) -> NavReference:
        self._fitted = False
        local = self._local_path(p0)
        target = local[-1]
        if np.linalg.norm(target - p0) < 1.0:
            return MapperPlanner._fit(self, p0, v0, a0, t)
        guides = self._guides(local)
        ts, pos, _, _ = self._min_snap(np.stack([p0, target]), v0, a0)
        knots, dt = bspline.knots_along(pos, ts, self._knot_dt())
        o: TopoOptions = self.options  # type: ignore[assignment]
        d_thr = self.radius + self.margin
        esdf = bspline.Objective(w_esdf=1.0, grid=self.grid, d_thr=d_thr)

        def build(w: float) -> tuple[np.ndarray, float] | None:
            best, best_cost = None, np.inf
            for guide in guides:
                q = bspline.fit(knots, v0, a0, dt)
                pull = bspline.Objective(w_smooth=1.0 / len(q), w_guide=o.w_guide,
                                         targets=resample(guide, len(q)))  # fmt: skip
                q = self._optimize(q, pull)
                q, step = self._time_scaled(q, dt, v0, a0, esdf, w)
                if self._clear_samples(q, step, p0) is None:
                    continue
                cost = self._objective(q, step, esdf, w)(q)[0]
                cost += o.time_weight * bspline.duration(q, step)
                if cost < best_cost:
                    best, best_cost = (q, step), cost
            return best

        return self._spline_or_fallback(build, p0, v0, a0, t)


@functools.lru_cache(maxsize=8)
def _ball(radius: float, res: float) -> np.ndarray:
    """Voxel offsets (M, 3) within ``radius`` m (voxel edge ``res``)."""
    r = int(np.ceil(radius / res))
    ax = np.arange(-r, r + 1)
    off = np.stack(np.meshgrid(ax, ax, ax, indexing="ij"), -1).reshape(-1, 3)
    off = off[(off**2).sum(-1) * res**2 <= radius**2]
    off.setflags(write=False)  # shared by the cache
    return off


def _mean_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Mean distance from the points of polyline ``a`` (resampled) to polyline ``b``'s points."""
    pa = resample(a, 32)
    pb = resample(b, 64)
    return float(np.linalg.norm(pa[:, None] - pb[None], axis=-1).min(1).mean())
