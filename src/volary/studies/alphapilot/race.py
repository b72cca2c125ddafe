"""The AlphaPilot 2019 race (FlightGoggles, paper 001 Sec. V-C): rules, score and the flight.

Rules (001 Sec. V-C1, restated in ``alphapilot_2019.toml``):

- a gate counts when the vehicle position passes it with the official reporter's rule
  (inside the corner box inflated by ``inflation`` m and closer than ``gate_width`` m to the gate
  plane; :class:`volary.worlds.GateTracker`), in course order (a skipped gate is missed);
- score = 10 n - t, n the gates passed in order and t the seconds from the start to the final
  gate; 0 when the final gate is not reached within the time limit or the vehicle collides
  (:func:`race_score`);
- 25 perturbed courses; a contestant's result is the mean of its five best scores
  (:func:`leaderboard`). The top 2019 team scored 91.39 (001 Table III).

Here a collision is the vehicle's collision sphere touching any gate frame of its course
(all 23 gates stand in the arena; the 12 off the course are obstacles), leaving the arena
volume or its ceiling, or hitting the ground, before the final gate; what happens after the
final gate does not count (the race is over for that env). The simulation stops when every env
has finished or crashed, or ``grace_s`` after the longest plan ended: an env that has not reached
the final gate by then hovers at its plan's end and never will, and scores 0 as a timeout.

The flight (:func:`run_race`) is one :func:`volary.sim.rollout` of a :class:`volary.sim.World`
(one env per course, the courses' gates in a GateTracker) with two end conditions, in this
order: :func:`crashed_out` (the collision rule above) and ``volary.sim.terms.gates_done``
(the final gate passed). Gates passed and the crash on the same step both count: the env
finished but collided, and scores 0. ``World.step`` advances the gates of the envs still racing
only. Gate times, the path and the finish come from what the rollout records before the first
and after every step (positions, times, gates passed).

The rules every gate race shares (the score, the collision rule, the outcome of a rollout:
:func:`race_score`, :func:`crashed_out`, :func:`race_result`, :class:`RaceResult`) are core,
:mod:`volary.bench.gate_race` (the ROS 1 bridge and the viewer use them too), re-exported here
with the racers (:class:`Racer`, :class:`MinSnapRacer`, the default :class:`MinTimeRacer`,
:func:`make_racer`) of :mod:`volary.studies.alphapilot.racers`; the ``volary race`` files (JSON,
plots) are :mod:`volary.studies.alphapilot.reports`.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from volary.bench.gate_race import (
    PATH_EVERY,
    POINTS_PER_GATE,
    RACE_PLATFORM,
    RACE_RECORDS,
    RaceResult,
    crashed_out,
    race_result,
    race_score,
    yaw_quat,
)
from volary.bench.threads import one_thread
from volary.errors import ConfigError
from volary.studies.alphapilot.racers import (
    CONTROL_MAX_TILT,
    DEFAULT_RACER,
    RACERS,
    MinSnapRacer,
    MinTimeRacer,
    RacePlan,
    Racer,
    TrajectoryPlan,
    balance_segment_times,
    course_gates,
    make_racer,
    segment_load,
)
from volary.worlds import GateTracker, Scene, SceneSpec, alphapilot_2019

BEST_OF = 5  # leaderboard: mean of the five best scores of 25 courses
TOP_2019_SCORE = 91.39  # 001 Table III, best team


# ---- the leaderboard ----------------------------------------------------------------------------
def leaderboard(results: RaceResult | Tensor | Sequence[float], best: int = BEST_OF) -> float:
    """Mean of the ``best`` highest scores (001 Sec. V-C1: five of 25 courses)."""
    s = results.score if isinstance(results, RaceResult) else torch.as_tensor(results)
    s = s.double().flatten()
    if s.numel() < 1 or best < 1:
        raise ConfigError(
            f"results: expected at least one score and best >= 1, got "
            f"{s.numel()} scores, best={best}"
        )
    return float(s.topk(min(best, s.numel())).values.mean())


def course_id(spec: SceneSpec) -> int:
    """A course's noise-stream id: from its name, so a course draws the same sensor and process
    noise wherever it sits in the batch (the race's process noise, the challenge's sensors)."""
    return zlib.crc32(spec.name.encode()) & 0x7FFFFFFF


def noise_key(spec: SceneSpec, seed: int) -> int:
    """The noise streams of one course x noise-seed pair (process, IMU, beacons, ranger,
    stereo): from the course's name and the seed alone, so a pair draws the same noise in any
    batch, beside any other seeds, in any worker."""
    return (int(seed) * 0x9E3779B1 + course_id(spec)) & 0x7FFFFFFF


# ---- the race loop ------------------------------------------------------------------------------
def run_race(
    courses: Sequence[SceneSpec] | None = None,
    racer: Racer | None = None,
    seed: int = 0,
    *,
    device: str = "cpu",
    stochastic: bool = True,
    control_hz: float = 240.0,
    grace_s: float = 2.0,
) -> RaceResult:
    """Fly one env per course (default: the nominal course) with the AlphaPilot vehicle.

    ``seed`` seeds the vehicle's process noise (``stochastic``), keyed per course
    (:func:`noise_key`): a course flies the same alone or in any batch. The courses carry their
    own perturbations.
    Planning and flight run with one torch/BLAS/OpenMP thread (:mod:`volary.bench.threads`).
    """
    specs = [alphapilot_2019()] if courses is None else list(courses)
    if not specs:
        raise ConfigError("courses: expected at least one course")
    pilot: Racer = racer if racer is not None else make_racer(DEFAULT_RACER)
    with one_thread():  # the same result however the caller set its threads (bench.threads)
        return _run_race(specs, pilot, seed, device, stochastic, control_hz, grace_s)


def _run_race(
    specs: list[SceneSpec],
    pilot: Racer,
    seed: int,
    device: str,
    stochastic: bool,
    control_hz: float,
    grace_s: float,
) -> RaceResult:
    from volary.sim import World, rollout  # layer 4, imported on use
    from volary.sim.terms import gates_done

    scene = Scene.stack(specs, device=device)
    world = World(
        [RACE_PLATFORM] * len(specs),
        scene,
        gates=GateTracker.for_courses(scene, specs),
        control="mellinger",
        device=device,
        stochastic=stochastic,
        seed=seed,
        noise_seeds=[noise_key(s, seed) for s in specs],  # a course's noise, not its slot's
        control_hz=control_hz,
        gains=pilot.gains,
        compile="numba" if device == "cpu" else False,
    )
    plan = pilot.plan(specs, world.params)
    quat = [yaw_quat(s.start_yaw) for s in specs]
    world.reset(pos=torch.tensor([s.start for s in specs]), quat=torch.tensor(quat))
    n, dev = world.b, world.sim.config.device

    end = float(plan.duration.max()) + grace_s
    steps = int(math.ceil(end * world.sim.config.control_hz))
    act = _plan_act(plan, steps, n, world.dt, dev)
    ep = rollout(
        world,
        act,
        (crashed_out, gates_done),  # a crash on the final gate's step still counts
        steps=steps,
        record=RACE_RECORDS,
        record_initial=True,
    )
    return race_result(specs, world.gates, ep, plan.duration)


TABLE_CHUNK = 1024  # control steps of setpoints tabulated per batched plan evaluation


def _plan_act(plan: RacePlan, steps: int, n: int, dt: float, dev: Any) -> Any:
    """The rollout's command source: the plan's setpoint at step k's time k * dt. A plan with
    ``setpoints`` (every TrajectoryPlan) is tabulated a chunk of steps at a time, one batched
    evaluation instead of one per step (same times, same setpoints to rounding)."""

    def times(k0: int, k1: int) -> Tensor:
        ks = torch.arange(k0, k1, device=dev, dtype=torch.float64)
        return (ks * dt)[:, None].expand(k1 - k0, n)

    if not hasattr(plan, "setpoints"):
        return lambda world, k: plan.setpoint(times(k, k + 1)[0])
    chunk: list[Any] = [-1, None]  # (index of the tabulated chunk, its (C, N, 14) setpoints)

    def act(world: Any, k: int) -> Tensor:
        c, j = divmod(k, TABLE_CHUNK)
        if chunk[0] != c:
            k0 = c * TABLE_CHUNK
            chunk[:] = [c, plan.setpoints(times(k0, min(k0 + TABLE_CHUNK, steps)))]
        return chunk[1][j]

    return act


__all__ = [
    "BEST_OF",
    "CONTROL_MAX_TILT",
    "DEFAULT_RACER",
    "MinSnapRacer",
    "MinTimeRacer",
    "PATH_EVERY",
    "POINTS_PER_GATE",
    "RACERS",
    "RACE_PLATFORM",
    "RACE_RECORDS",
    "RacePlan",
    "RaceResult",
    "Racer",
    "TOP_2019_SCORE",
    "TrajectoryPlan",
    "balance_segment_times",
    "course_gates",
    "course_id",
    "crashed_out",
    "leaderboard",
    "make_racer",
    "noise_key",
    "race_result",
    "race_score",
    "run_race",
    "segment_load",
    "yaw_quat",
]
