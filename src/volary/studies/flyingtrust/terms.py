"""The navigation benchmark's end conditions, as :mod:`volary.sim.terms` objects for ``rollout``.

Both keep the protocol's own clocks so a row does not depend on how the World counts time:
``ClearanceCollisions`` ends on the simulator's clock (``state.time`` of env 0 minus the
take-off, as the benchmark has always measured a collision), ``GoalDwell`` on the 40 Hz track
grid (k / control rate, k = control steps since t = 0). Each records, per vehicle, the time it
ended it (``ended_at``, s since t = 0; NaN: not by this term).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
import torch
from torch import Tensor

from volary.worlds.primitives import SceneSpec


class ClearanceCollisions:
    """Collision, floor, ceiling, flight-volume, ground-crash and divergence ends, queried on an
    adaptive schedule.

    A vehicle is queried when it could have used up its clearance since the last query: next
    query after ``min(max_gap, margin / (|v| + a_max max_gap / 2))`` s, ``margin`` the distance
    its sphere may move before any event (obstacles, floor, ceiling, bounds). The signed
    distance is 1-Lipschitz, so no contact between queries is missed. A ground crash or a
    divergence reset is queried at once; ``force_tick`` (a ``world.tick``) queries every vehicle
    still flying. ``notes[b]`` says what ended vehicle b ("collision: obstacle 42", ...).

    With the box collider (``half``: (N, 3) half extents; ``radius`` then the box's bounding
    radius) the schedule runs on the bounding sphere's clearance, which no rotation can use up,
    and the events are the box's: obstacles and ceiling from the World's events, the floor by
    the box's lowest corner.
    """

    name = "collision"

    def __init__(
        self, spec: SceneSpec, radius: np.ndarray, acc_bound: np.ndarray, t0: float,
        max_gap: float, half: np.ndarray | None = None,
    ) -> None:  # fmt: skip
        self.spec, self.radius, self.acc_bound, self.half = spec, radius, acc_bound, half
        self.t0, self.max_gap = t0, max_gap  # t0: simulator time of t = 0
        n = len(radius)
        self.next_check = np.full(n, -math.inf)  # simulator time of the next query
        self.notes = [""] * n
        self.ended_at = np.full(n, math.nan)
        self.force_tick = -1

    def __call__(self, world: Any) -> Tensor:
        st = world.state
        t = float(st.time[0])
        crash = (st.crashed | world.sim.last_reset).numpy()
        due = world.active.numpy() & (
            (world.tick == self.force_tick) | (t >= self.next_check) | crash
        )
        if not due.any():
            return _none(world.b)
        ev = world.collision_events()
        pos = st.pos.double().numpy()
        speed = np.linalg.norm(st.vel.double().numpy(), axis=1)
        margin = self._margin(ev.sphere_clearance.double().numpy(), pos)
        hit = (ev.collided | ev.out_of_bounds | ev.above_ceiling).numpy() | crash
        hit |= (margin < 0) if self.half is None else self._box_floor(st, pos)
        hit &= due
        for i in np.flatnonzero(due).tolist():
            if hit[i]:
                self.notes[i] = _note(ev, i, crash[i], bool(world.sim.last_reset[i]))
                self.ended_at[i] = max(0.0, t - self.t0)
                continue
            gap = margin[i] / (speed[i] + self.acc_bound[i] * self.max_gap / 2)
            self.next_check[i] = t + min(self.max_gap, max(gap, 0.0))
        return torch.from_numpy(hit)

    def _box_floor(self, st: Any, pos: np.ndarray) -> np.ndarray:
        """(N,) bool: the box's lowest corner is below the flight volume's floor."""
        from volary.math.quaternion import quat_to_rotmat

        rot = quat_to_rotmat(st.quat.double()).numpy()
        low = pos[:, 2] - (self.half * np.abs(rot[:, 2, :])).sum(axis=1)
        return low < self.spec.bounds_min[2]

    def _margin(self, clearance: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """Distance (m) each sphere may move before any event: obstacles, floor, ceiling, bounds."""
        lo, hi = np.array(self.spec.bounds_min), np.array(self.spec.bounds_max)
        floor = pos[:, 2] - self.radius - lo[2]
        ceil = self.spec.flight_ceiling - pos[:, 2] - self.radius
        box = np.minimum(pos - lo, hi - pos).min(axis=1)
        return np.minimum.reduce([clearance, floor, ceil, box])


class GoalDwell:
    """Success: within ``radius`` of ``goal`` continuously for ``dwell`` s with speed below
    ``speed`` m/s, checked every ``every`` control steps (the track's samples).

    Like :class:`volary.sim.terms.reached`, but on the track grid: the time of the k-th control
    step since t = 0 is ``k / control_hz`` (so the dwell and ``ended_at`` are those of the
    recorded track, not of the simulator's float32 clock). :meth:`check` takes a sample at an
    explicit k (k = 0 before the first step).
    """

    name = "success"

    def __init__(self, goal: np.ndarray, radius: float, dwell: float, speed: float, every: int):
        self.goal, self.radius, self.dwell, self.speed = goal, radius, dwell, speed
        self.every = every
        self.inside_since: np.ndarray | None = None  # s; NaN: outside
        self.ended_at: np.ndarray | None = None

    def __call__(self, world: Any) -> Tensor:
        k = world.tick - world.tick0
        if k % self.every:
            return _none(world.b)
        return self.check(world, k)

    def check(self, world: Any, k: int) -> Tensor:
        """The vehicles that succeed at the sample of control step ``k`` since t = 0."""
        if self.inside_since is None or self.ended_at is None:
            self.inside_since = np.full(world.b, math.nan)
            self.ended_at = np.full(world.b, math.nan)
        t = k / world.sim.config.control_hz
        st = world.state
        dist = np.linalg.norm(st.pos.double().numpy() - self.goal, axis=1)
        speed = np.linalg.norm(st.vel.double().numpy(), axis=1)
        active = world.active.numpy()
        inside = active & ~(dist > self.radius)  # NaN distance: not outside (as ever)
        self.inside_since[active & ~inside] = math.nan
        self.inside_since[inside & np.isnan(self.inside_since)] = t
        done = inside & (t - self.inside_since >= self.dwell - 1e-9) & (speed < self.speed)
        self.ended_at[done] = t
        return torch.from_numpy(done)


@lru_cache(maxsize=8)
def _none(n: int) -> Tensor:
    """(n,) bool, all False: "no vehicle ends now" (shared, never written to)."""
    return torch.zeros(n, dtype=torch.bool)


def _note(ev: Any, i: int, crash: bool, diverged: bool) -> str:
    if diverged:
        return "collision: the simulation diverged (state reset)"
    if crash:
        return "collision: ground crash"
    if bool(ev.collided[i]):
        return f"collision: obstacle {int(ev.object_id[i])}"
    if bool(ev.above_ceiling[i]):
        return "collision: ceiling"
    if bool(ev.out_of_bounds[i]):
        return "collision: left the flight volume"
    return "collision: floor or volume boundary"


__all__ = ["ClearanceCollisions", "GoalDwell"]
