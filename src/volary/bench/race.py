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

The racers (:class:`Racer`, :class:`MinSnapRacer`, the default :class:`MinTimeRacer`,
:func:`make_racer`) live in :mod:`volary.planning.racing` and are re-exported here; the
``volary race`` command (JSON, plots) is :mod:`volary.cli.race`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from volary.bench.threads import one_thread
from volary.errors import ConfigError
from volary.planning.racing import (
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

POINTS_PER_GATE = 10.0  # 001 Sec. V-C1
BEST_OF = 5  # leaderboard: mean of the five best scores of 25 courses
TOP_2019_SCORE = 91.39  # 001 Table III, best team
RACE_PLATFORM = "flightgoggles"  # the AlphaPilot 2019 vehicle (flightgoggles_vehicle.toml)
PATH_EVERY = 4  # control steps between recorded positions (plots)

if TYPE_CHECKING:
    from volary.sim import Episode, World


# ---- score --------------------------------------------------------------------------------------
def race_score(
    gates_passed: Tensor,
    time: Tensor,
    finished: Tensor,
    collided: Tensor,
    timeout_s: float | Tensor,
) -> Tensor:
    """AlphaPilot score (001 Sec. V-C1): 10 n - t when the final gate is reached (``finished``)
    at ``time`` t <= ``timeout_s`` without collision, else 0. Shapes (N,)."""
    ok = finished & ~collided & (torch.nan_to_num(time, nan=math.inf) <= timeout_s)
    raw = POINTS_PER_GATE * gates_passed.to(time.dtype) - time
    return torch.where(ok, raw, torch.zeros_like(raw))


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


# ---- the race loop ------------------------------------------------------------------------------
@dataclass(frozen=True)
class RaceResult:
    """Outcome per env (one course each)."""

    courses: tuple[str, ...]  # course names
    gates_passed: Tensor  # (N,) int64, gates passed in order
    gate_times: Tensor  # (N, L) s, time each course gate was passed; NaN if not
    finished: Tensor  # (N,) bool, the final gate was reached
    collided: Tensor  # (N,) bool, collision/out of bounds/ground before the final gate
    timed_out: Tensor  # (N,) bool, the final gate was not reached (and no collision)
    time: Tensor  # (N,) s to the final gate; NaN if not reached
    score: Tensor  # (N,) AlphaPilot score
    plan_time: Tensor  # (N,) s, the racer's planned duration
    path: Tensor  # (K, N, 3) m, positions every PATH_EVERY control steps
    path_time: Tensor  # (K,) s

    def to_dict(self) -> dict:
        """JSON-ready per-course results."""

        def f(x: Tensor) -> list:
            return [None if isinstance(v, float) and math.isnan(v) else v for v in x.tolist()]

        return {
            "courses": [
                {
                    "course": name,
                    "gates_passed": int(self.gates_passed[i]),
                    "gate_times_s": f(self.gate_times[i]),
                    "finished": bool(self.finished[i]),
                    "collided": bool(self.collided[i]),
                    "timed_out": bool(self.timed_out[i]),
                    "time_s": f(self.time[i : i + 1])[0],
                    "score": float(self.score[i]),
                    "plan_time_s": float(self.plan_time[i]),
                }
                for i, name in enumerate(self.courses)
            ]
        }


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

    ``seed`` seeds the vehicle's process noise (``stochastic``); the courses carry their own.
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


def crashed_out(world: World) -> Tensor:
    """The race's collision rule: the vehicle's sphere touches a gate frame (any gate of the
    arena) or the ceiling, its centre leaves the arena volume, it hits the ground, or its
    simulation diverged and was reset."""
    return world.collision_events().any | world.state.crashed | world.sim.last_reset


crashed_out.time_out = False  # type: ignore[attr-defined]  # not a time limit (sim.terms)


RACE_RECORDS = {  # sampled before the first step and after every step (rollout record_initial)
    "pos": lambda w: w.state.pos.clone(),
    "time": lambda w: w.state.time.clone(),
    "passed": lambda w: w.gates.passed.clone(),  # stands still once the env ended (World.step)
}


def yaw_quat(yaw: float) -> list[float]:
    return [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]


def _gate_times(records: dict[str, Tensor]) -> Tensor:
    """(N, L) s: the time of the step on which each course gate was passed (``World.step``
    counts gates only for the envs still racing, so none after a crash or the finish); NaN if
    never. ``records`` start with the state before the first step."""
    passed = records["passed"]  # (K + 1, N, L)
    new = passed[1:] & ~passed[:-1]  # (K, N, L), at most one step each
    t = records["time"][1:].to(torch.float64)  # (K, N)
    step = new.to(torch.int8).argmax(0)  # (N, L) the step it was passed
    at = t.T.gather(1, step)
    return torch.where(new.any(0), at, torch.full_like(at, math.nan))


def race_result(
    specs: Sequence[SceneSpec], tracker: GateTracker, ep: Episode, plan_time: Tensor
) -> RaceResult:
    """The race's outcome per env from a rollout that recorded ``RACE_RECORDS`` (with the initial
    sample) and ended with ``crashed_out`` as its collision term; ``plan_time`` (N,) s is the
    racer's planned duration (NaN when it had none)."""
    rec = ep.records
    gt = _gate_times(rec).cpu()
    last = (tracker.n_gates - 1).clamp_min(0).cpu()
    final = gt.gather(1, last[:, None])[:, 0]
    finished = ~torch.isnan(final)
    collided = torch.tensor([c == "crashed_out" for c in ep.causes()])
    time = torch.where(finished, final, math.nan)
    passed = (~torch.isnan(gt)).sum(-1)
    timeout = torch.tensor([s.meta.get("timeout_s", 300.0) for s in specs], dtype=torch.float64)
    score = race_score(passed, time, finished, collided, timeout)
    return RaceResult(
        courses=tuple(s.name for s in specs),
        gates_passed=passed,
        gate_times=gt,
        finished=finished,
        collided=collided,
        timed_out=~finished & ~collided,
        time=time,
        score=score,
        plan_time=plan_time.cpu().double(),
        path=rec["pos"][1::PATH_EVERY].detach().cpu().clone(),
        path_time=torch.tensor(rec["time"][1::PATH_EVERY, 0].tolist()),
    )


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
    "RacePlan",
    "RaceResult",
    "Racer",
    "TOP_2019_SCORE",
    "TrajectoryPlan",
    "balance_segment_times",
    "course_gates",
    "crashed_out",
    "leaderboard",
    "make_racer",
    "race_result",
    "race_score",
    "run_race",
    "segment_load",
]
