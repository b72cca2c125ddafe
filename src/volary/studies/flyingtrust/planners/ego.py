"""``ego``: EGO-Planner's family (Zhou, Wang, Xu & Gao, "EGO-Planner: An ESDF-free
Gradient-based Local Planner for Quadrotors", RA-L 2021), written from the paper for volary's
benchmark; no code was ported.

Per call, on the ``mapper``'s voxel map (:mod:`volary.studies.flyingtrust.planners.occupancy`;
EGO needs only occupancy, the distance field is used here as an occupancy test with the vehicle's
inflation):

1. **Local target**: the point ``horizon`` m ahead along the guiding path to the goal (the
   ``mapper``'s grid A*, re-searched when it is blocked within the horizon or every
   ``search_period`` s, as EGO-Planner replans on collision or time; not when the vehicle is
   off the path, ``deviation=0``, since the optimized spline leaves the guide by design), or
   the goal when nearer.
2. **Initial trajectory** (paper Sec. III-A): a straight line from the current reference state
   to the local target, obstacles ignored (a min-snap segment within the limits), as a uniform
   cubic B-spline (:mod:`volary.studies.flyingtrust.planners.bspline`).
3. **Collision term without an ESDF** (Sec. III-B): control points whose clearance is below the
   vehicle's (radius + ``hard_margin``) form colliding runs; for each run a grid A* path Gamma
   joins the free control points around it; each colliding Q_i gets the point of Gamma on the
   plane through Q_i normal to the spline's tangent, the repulsive direction v_ij toward it,
   and the anchor p_ij on the obstacle surface along v_ij (where the voxel map turns free).
   The penalty on d_ij = (Q_i - p_ij) . v_ij is eq. 2-3 of the paper, with safety clearance
   s_f = radius + margin.
4. **Optimization** (Sec. III-C): L-BFGS over smoothness, the {p, v}-pair collision term and
   feasibility; after each run, control points newly in collision get their own pairs and the
   optimization repeats (at most ``pair_rounds`` times).
5. **Time re-allocation** (Sec. III-D) when the limits are exceeded: the knot spacing is
   stretched uniformly and the spline re-optimized (the paper re-allocates and refits with an
   anisotropic fitness term; with a uniform stretch the shape is unchanged, so no refit is
   needed).

Where it differs from EGO-Planner: the local target comes from a grid A* path over the known
map rather than from a global reference trajectory (with a goal only, EGO's global reference
is the straight line, whose local target can lie inside an obstacle); the map is volary's
(optimistic, no free-space clearing); recovery (hover and turn when stuck) is the ``mapper``'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from volary.planning.navigation import NavReference
from volary.studies.flyingtrust.planners import bspline
from volary.studies.flyingtrust.planners.bspline import BsplineOptions, BsplinePlanner
from volary.studies.flyingtrust.planners.mapper import MapperPlanner
from volary.studies.flyingtrust.planners.search import search

Pairs = tuple[np.ndarray, np.ndarray, np.ndarray]  # control index (P,), anchors, directions


@dataclass(frozen=True)
class EgoOptions(BsplineOptions):
    """Options of :class:`EgoPlanner` beyond :class:`BsplineOptions`."""

    pair_rounds: int = 3  # optimizations with new {p, v} pairs
    deviation: float = 0.0  # the spline leaves the guide by design: re-search on collision or time


def plane_crossing(path: np.ndarray, q: np.ndarray, tangent: np.ndarray) -> np.ndarray:
    """The point of polyline ``path`` (K, 3) on the plane through ``q`` with normal
    ``tangent`` nearest to q; the path's nearest vertex when it does not cross the plane."""
    s = (path - q) @ tangent
    best, best_d = None, np.inf
    for k in np.nonzero(np.sign(s[:-1]) != np.sign(s[1:]))[0]:
        w = s[k] / (s[k] - s[k + 1]) if s[k] != s[k + 1] else 0.0
        p = path[k] + w * (path[k + 1] - path[k])
        d = float(np.linalg.norm(p - q))
        if d < best_d:
            best, best_d = p, d
    if best is None:
        best = path[int(np.argmin(np.linalg.norm(path - q, axis=1)))]
    return best


class EgoPlanner(BsplinePlanner):
    """EGO-Planner's family (module docstring). Keyword options: :class:`EgoOptions`."""

    name = "ego"
    options_type = EgoOptions

    def reset(self, task) -> None:
        super().reset(task)
        self.stats["pairs"] = 0
        self.stats["guide_searches"] = 0

    def _fit_spline(self, p0: np.ndarray, v0: np.ndarray, a0: np.ndarray, t: float) -> NavReference:
        self._fitted = False
        target = self._local_path(p0)[-1]
        if np.linalg.norm(target - p0) < 1.0:
            return MapperPlanner._fit(self, p0, v0, a0, t)  # near the end: the mapper's fit
        ts, pos, _, _ = self._min_snap(np.stack([p0, target]), v0, a0)
        knots, dt = bspline.knots_along(pos, ts, self._knot_dt())
        s_f = self.radius + self.margin

        def build(w: float) -> tuple[np.ndarray, float]:
            q, step = bspline.fit(knots, v0, a0, dt), dt
            pairs: Pairs = (np.zeros(0, np.int64), np.zeros((0, 3)), np.zeros((0, 3)))
            for r in range(int(self.options.pair_rounds)):  # type: ignore[attr-defined]
                new = self._new_pairs(q, set(pairs[0].tolist()))
                if new[0].size == 0 and r > 0:
                    break
                pairs = tuple(np.concatenate([a, b]) for a, b in zip(pairs, new, strict=True))  # type: ignore[assignment]
                idx, anc, dirs = pairs
                term = bspline.Objective(w_pairs=1.0, pairs=(idx, anc, dirs), s_f=s_f)
                q, step = self._time_scaled(q, step, v0, a0, term, w)
            return q, step

        return self._spline_or_fallback(build, p0, v0, a0, t)

    def _new_pairs(self, q: np.ndarray, have: set[int]) -> Pairs:
        """{p, v} pairs for the interior control points in collision that have none yet."""
        o = self.options
        clear = self.grid.clearance(q)
        bad = [i for i in range(3, len(q) - 3) if clear[i] < self.radius + o.hard_margin]
        bad = [i for i in bad if i not in have]
        idx, anchors, dirs = [], [], []
        for run in _runs(bad):
            a, b = run[0] - 1, run[-1] + 1
            gamma, reached, _ = search(self.grid, q[a], q[b], self.radius + self.margin,
                                       goal_tol=0.5, max_expand=20_000)  # fmt: skip
            self.stats["guide_searches"] += 1
            if len(gamma) < 2:
                continue
            gamma = np.vstack([q[a][None], gamma, q[b][None]]) if reached else gamma
            for i in run:
                tangent = q[i + 1] - q[i - 1]
                n = float(np.linalg.norm(tangent))
                if n < 1e-9:
                    continue
                target = plane_crossing(gamma, q[i], tangent / n)
                v = target - q[i]
                dv = float(np.linalg.norm(v))
                if dv < 1e-6:
                    continue
                v /= dv
                idx.append(i)
                anchors.append(self._anchor(q[i], v, dv))
                dirs.append(v)
        self.stats["pairs"] += len(idx)
        if not idx:
            return np.zeros(0, np.int64), np.zeros((0, 3)), np.zeros((0, 3))
        return np.asarray(idx, np.int64), np.asarray(anchors), np.asarray(dirs)

    def _anchor(self, q: np.ndarray, v: np.ndarray, reach: float) -> np.ndarray:
        """The obstacle surface near q along v: inside an occupied voxel, the first free point
        toward Gamma; outside, the first occupied point behind q (-v); none within reach
        (or s_f behind): q - s_f v, which leaves the pair inactive."""
        res = self.grid.res
        surface = 0.5 * res  # clearance to occupied centres at an occupied voxel's face
        s_f = self.radius + self.margin
        steps = np.arange(0.0, max(reach, s_f) + res, 0.5 * res)
        if self.grid.clearance(q[None])[0] < surface:
            pts = q + steps[:, None] * v
            free = np.nonzero(self.grid.clearance(pts) >= surface)[0]
            return pts[free[0]] if free.size else pts[-1]
        back = steps[steps <= s_f + res]
        pts = q - back[:, None] * v
        occ = np.nonzero(self.grid.clearance(pts) < surface)[0]
        return pts[occ[0]] if occ.size else q - s_f * v


def _runs(indices: list[int]) -> list[list[int]]:
    """Consecutive runs of sorted integers."""
    out: list[list[int]] = []
    for i in indices:
        if out and i == out[-1][-1] + 1:
            out[-1].append(i)
        else:
            out.append([i])
    return out
