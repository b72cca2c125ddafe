"""A cheap reactive planner: depth-image gap following (a third data point beside ``straight``
and ``mapper``).

Every call (planner rate, no memory besides the last command):

1. Back-project the depth image to world points (pinhole, ``DepthCameraInfo``) and keep those in
   the vehicle's flight slab (|z - z_vehicle| < ``r_safe`` + ``slab_margin``, above the floor):
   the floor and whatever the vehicle flies over or under are ignored.
2. Per image column keep the nearest slab point: a polar obstacle profile (bearing, horizontal
   distance) over the camera's field of view, in the spirit of the vector field histogram
   (Borenstein & Koren, IEEE T-RA 1991).
3. For C candidate headings across the field of view, the free distance is how far a disc of
   radius ``r_safe`` = ``safety`` x the vehicle radius can travel before it touches a profile
   point (along - sqrt(r_safe^2 - lateral^2)); unseen space counts as free to ``max_range``.
4. Pick the heading closest to the goal bearing among those free for ``need`` m (the braking
   distance plus a margin, at most the distance to the goal); the goal bearing outside the
   field of view is clamped to its edge, so the vehicle turns toward it while it flies.
5. Speed: the cap, lowered so that the vehicle can stop within the free distance
   (v = sqrt(2 a (free - margin)), a = half the platform's max_acc) and at the goal; the
   command changes by at most max_acc / rate per call.
6. The reference: a constant-velocity segment of ``horizon`` s from the current position along
   the heading (altitude steered to the goal's, inside the floor/ceiling), yaw along the
   heading so the camera looks where the vehicle flies. No free heading: brake to a hover and
   turn toward the freer side of the image (recovery).
"""

from __future__ import annotations

import math

import numpy as np

from volary.errors import ConfigError
from volary.planning.navigation import NavObservation, NavReference, NavTask


class ReactivePlanner:
    """Depth-image gap follower; ``needs={"depth"}``."""

    name = "reactive"
    needs: frozenset[str] = frozenset({"depth"})

    def __init__(
        self,
        safety: float = 1.6,
        horizon: float = 1.0,
        candidates: int = 41,
        slab_margin: float = 0.3,
        turn_rate: float = 1.5,
    ) -> None:
        for key, val in (("safety", safety), ("horizon", horizon), ("slab_margin", slab_margin),
                         ("turn_rate", turn_rate)):  # fmt: skip
            if not (isinstance(val, int | float) and math.isfinite(val) and val > 0):
                raise ConfigError(f"reactive: {key}: expected a number > 0, got {val!r}")
        if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 3:
            raise ConfigError(f"reactive: candidates: expected an int >= 3, got {candidates!r}")
        self.safety, self.horizon, self.n_cand = float(safety), float(horizon), candidates
        self.slab_margin, self.turn_rate = float(slab_margin), float(turn_rate)
        self.task: NavTask | None = None
        self._vel = np.zeros(3)
        self._turn = 1.0

    def reset(self, task: NavTask) -> None:
        if task.depth is None:
            raise ConfigError("reactive: the task carries no depth camera (needs={'depth'})")
        self.task = task
        self._vel = np.zeros(3)
        cam = task.depth
        u = (np.arange(cam.width) + 0.5 - cam.cx) / cam.fx
        v = (np.arange(cam.height) + 0.5 - cam.cy) / cam.fy
        self._rays = np.stack(np.broadcast_arrays(u[None, :], v[:, None], 1.0), -1)  # (H, W, 3)
        self._r_bc = _rotmat(cam.q_body_cam)
        half = math.atan((cam.width / 2) / cam.fx)
        self._cand = np.linspace(-half, half, self.n_cand)  # rad, left positive (body yaw)

    def plan(self, obs: NavObservation) -> NavReference | None:
        task = self.task
        if task is None:
            raise ConfigError("reactive: plan() before reset()")
        if obs.depth is None:
            return None
        r_wb = _rotmat(obs.quat)
        yaw = math.atan2(r_wb[1, 0], r_wb[0, 0])
        bearing, dist = self._profile(obs, r_wb, yaw)
        free = self._free(bearing, dist)
        to_goal = task.goal - obs.position
        d_goal = float(np.linalg.norm(to_goal[:2]))
        goal_rel = _wrap(math.atan2(to_goal[1], to_goal[0]) - yaw)
        heading, v_max = self._choose(free, goal_rel, d_goal)
        return self._reference(obs, yaw, heading, v_max, d_goal)

    # ---- perception ---------------------------------------------------------------------
    def _profile(
        self, obs: NavObservation, r_wb: np.ndarray, yaw: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Nearest slab point per column: bearing (rad, body yaw frame) and horizontal range."""
        task = self.task
        assert task is not None and task.depth is not None
        depth = np.asarray(obs.depth, dtype=np.float64)
        ok = np.isfinite(depth)
        r_wc = r_wb @ self._r_bc
        origin = obs.position + r_wb @ task.depth.t_body_cam
        pts = origin + (self._rays * np.where(ok, depth, 0.0)[..., None]) @ r_wc.T  # (H, W, 3)
        r_safe = self.safety * task.limits.plan_radius
        dz = np.abs(pts[..., 2] - obs.position[2])
        keep = ok & (dz < r_safe + self.slab_margin) & (pts[..., 2] > task.bounds_min[2] + 0.05)
        rel = pts[..., :2] - obs.position[:2]
        rng = np.where(keep, np.hypot(rel[..., 0], rel[..., 1]), np.inf)
        col = np.argmin(rng, axis=0)
        j = np.arange(rng.shape[1])
        dist = rng[col, j]
        rel_c = rel[col, j]
        bearing = _wrap_array(np.arctan2(rel_c[:, 1], rel_c[:, 0]) - yaw)
        return bearing[np.isfinite(dist)], dist[np.isfinite(dist)]

    def _free(self, bearing: np.ndarray, dist: np.ndarray) -> np.ndarray:
        """(C,) m a disc of radius r_safe can travel along each candidate heading."""
        task = self.task
        assert task is not None and task.depth is not None
        free = np.full(self.n_cand, task.depth.max_range)
        if len(dist) == 0:
            return free
        r_safe = self.safety * task.limits.plan_radius
        ang = bearing[None, :] - self._cand[:, None]
        along, lat = dist * np.cos(ang), np.abs(dist * np.sin(ang))
        block = (along > 0) & (lat < r_safe)
        hit = along - np.sqrt(np.maximum(r_safe**2 - lat**2, 0.0))
        hit = np.where(block, np.maximum(hit, 0.0), np.inf)
        # an obstacle already inside the disc blocks every heading that moves toward it
        near = (dist < r_safe)[None, :] & (np.cos(ang) > 0)
        hit = np.where(near, 0.0, hit)
        return np.minimum(free, hit.min(axis=1))

    # ---- decision -----------------------------------------------------------------------
    def _choose(self, free: np.ndarray, goal_rel: float, d_goal: float) -> tuple[float, float]:
        task = self.task
        assert task is not None
        a = 0.5 * task.limits.max_acc
        margin = task.limits.plan_radius
        v_cap = task.limits.max_speed
        need = min(v_cap**2 / (2 * a) + margin + 0.5, d_goal + margin)
        target = float(np.clip(goal_rel, self._cand[0], self._cand[-1]))
        ok = free >= need
        if not ok.any():
            ok = free >= min(free.max(), margin + 1.0)
            if free.max() < margin + 1.0:
                self._turn = 1.0 if free[-1] >= free[0] else -1.0  # candidates run right to left
                return math.nan, 0.0
        idx = np.flatnonzero(ok)
        best = idx[np.argmin(np.abs(self._cand[idx] - target))]
        v = min(v_cap, math.sqrt(max(2 * a * (free[best] - margin), 0.0)))
        v = min(v, math.sqrt(2 * a * max(d_goal, 0.0)) + 0.2)
        return float(self._cand[best]), v

    def _reference(
        self, obs: NavObservation, yaw: float, heading: float, speed: float, d_goal: float
    ) -> NavReference:
        task = self.task
        assert task is not None
        dt = 1.0 / task.planner_rate_hz
        if math.isnan(heading):  # recovery: stop and turn toward the image's freer side
            want = np.zeros(3)
            yaw_ref = yaw + self._turn * self.turn_rate * self.horizon
        else:
            yaw_ref = yaw + heading
            want = speed * np.array([math.cos(yaw_ref), math.sin(yaw_ref), 0.0])
            want[2] = self._climb(obs)
        step = task.limits.max_acc * dt
        dv = want - self._vel
        n = float(np.linalg.norm(dv))
        self._vel = self._vel + (dv if n <= step else dv * step / n)
        t = obs.t + np.array([0.0, self.horizon])
        end = obs.position + self._vel * self.horizon
        if d_goal < self._vel[:2] @ self._vel[:2] / task.limits.max_acc + 0.5 and not math.isnan(
            heading
        ):
            end = np.array([task.goal[0], task.goal[1], end[2]])
        vel = (end - obs.position) / self.horizon
        return NavReference(
            t0=obs.t,
            times=t,
            positions=np.stack([obs.position, end]),
            velocities=np.stack([vel, vel]),
            accelerations=np.zeros((2, 3)),
            yaws=np.array([yaw, yaw_ref]),
        )

    def _climb(self, obs: NavObservation) -> float:
        """Vertical speed toward the goal altitude, kept inside floor and ceiling."""
        task = self.task
        assert task is not None
        r = task.limits.plan_radius + 0.3
        z = float(np.clip(task.goal[2], task.bounds_min[2] + r, task.bounds_max[2] - r))
        return float(np.clip(z - obs.position[2], -1.0, 1.0))


def _rotmat(q: np.ndarray) -> np.ndarray:
    """Rotation matrix of a unit quaternion [w, x, y, z]."""
    w, x, y, z = (float(v) for v in np.asarray(q, dtype=np.float64) / np.linalg.norm(q))
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def _wrap(a: float) -> float:
    """Angle wrapped to [-pi, pi)."""
    return (a + math.pi) % (2 * math.pi) - math.pi


def _wrap_array(a: np.ndarray) -> np.ndarray:
    return (a + np.pi) % (2 * np.pi) - np.pi
