"""Fakes of the episode for the runner tests: module-level unit functions (so spawned pool
workers and dask workers can import them) that return rows derived from the trial seeds."""

from __future__ import annotations

import os
import random
import time

from volary.studies.flyingtrust.schema import TrialResult, WorkUnit


def _option(unit: WorkUnit, name: str, default: float) -> float:
    return float(dict(unit.algo_options).get(name, default))


def fake_unit(unit: WorkUnit) -> list[TrialResult]:
    """Sleeps ``sleep`` s (an algo option), then one deterministic row per trial."""
    time.sleep(_option(unit, "sleep", 0.0))
    rows = []
    for t in unit.trials():
        rng = random.Random(t.trial_seed)
        ok = rng.random() < 0.4
        cause = "success" if ok else rng.choice(("collision", "timeout", "outside_goal"))
        length = rng.uniform(20.0, 60.0)
        rows.append(
            TrialResult(
                t.algo,
                t.platform,
                t.scenario,
                t.config,
                t.trial,
                t.seed,
                success=ok,
                cause=cause,
                time_to_goal=length / 3.0 if ok else float("nan"),
                flight_time=length / 3.0,
                path_length=length,
                mean_speed=3.0,
                max_speed=rng.uniform(3.0, 4.0),
                collisions=int(cause == "collision"),
                collisions_per_m=int(cause == "collision") / length,
                final_distance=rng.uniform(0.0, 1.9) if ok else rng.uniform(2.0, 40.0),
                sim_time=length / 3.0 + 2.0,
                wall_time=time.perf_counter() % 1.0,
            )  # fmt: skip
        )
    return rows


def crashy_unit(unit: WorkUnit) -> list[TrialResult]:
    """fake_unit, except configuration 1 of three types: the worker dies (maze), hangs
    (perlin) or the unit raises (narrow_gap)."""
    if unit.config == 1 and unit.scenario == "maze":
        os._exit(3)
    if unit.config == 1 and unit.scenario == "perlin":
        time.sleep(600)
    if unit.config == 1 and unit.scenario == "narrow_gap":
        raise RuntimeError("planner exploded")
    return fake_unit(unit)


def wrong_rows_unit(unit: WorkUnit) -> list[TrialResult]:
    """Returns one row too few."""
    return fake_unit(unit)[1:]


# -- planners that misbehave, for the runs with the real episode (``_nav_fakes:Class``) -------
class RaisingPlanner:
    name = "raises"
    needs: frozenset[str] = frozenset()

    def reset(self, task) -> None:
        self.task = task

    def plan(self, obs):
        raise RuntimeError("planner exploded")


class HangingPlanner(RaisingPlanner):
    name = "hangs"

    def plan(self, obs):
        time.sleep(3600)


class NaNPlanner(RaisingPlanner):
    name = "nan"

    def plan(self, obs):
        import numpy as np

        from volary.planning.navigation import NavReference

        t = np.array([obs.t, obs.t + 1.0])
        p = np.full((2, 3), np.nan)
        return NavReference(obs.t, t, p, p, p, np.zeros(2))


class ExitPlanner(RaisingPlanner):
    """Kills its process, as a segfault in native planner code would."""

    name = "exits"

    def plan(self, obs):
        os._exit(11)


class TooFastPlanner(RaisingPlanner):
    """A reference to the goal at 10 m/s, 2.5 times the protocol's cap: the runner must retime
    it."""

    name = "too_fast"
    speed = 10.0

    def plan(self, obs):
        import numpy as np

        from volary.planning.navigation import NavReference

        d = self.task.goal - obs.position
        dist = float(np.linalg.norm(d))
        u = d / max(dist, 1e-9)
        s = np.linspace(0.0, dist, 50)
        t = obs.t + s / self.speed
        p = obs.position + s[:, None] * u
        v = np.repeat((self.speed * u)[None], 50, 0)
        v[-1] = 0.0
        return NavReference(obs.t, t, p, v, np.zeros_like(p), np.zeros(50))


class CarrotPlanner(RaisingPlanner):
    """A setpoint 30 m ahead toward the goal at rest: the controller alone would sprint at its
    full acceleration; the runner's speed guard must hold the flown speed under the cap."""

    name = "carrot"

    def plan(self, obs):
        import numpy as np

        from volary.planning.navigation import NavReference

        d = self.task.goal - obs.position
        p = obs.position + d / max(float(np.linalg.norm(d)), 1e-9) * min(30.0, np.linalg.norm(d))
        return NavReference(obs.t, np.array([obs.t]), p[None], np.zeros((1, 3)),
                            np.zeros((1, 3)), np.zeros(1))  # fmt: skip


_HELD: list = []


def hold_memory(nbytes: int) -> int:
    """Keep ``nbytes`` of written memory alive in this worker, as a unit whose freed pages the
    allocator has not handed back yet would; returns the worker's pid. Sleeps past loky's one
    second between leak checks first, so the check after this task runs."""
    import numpy as np

    time.sleep(1.1)
    _HELD.append(np.ones(nbytes // 8))
    return os.getpid()
