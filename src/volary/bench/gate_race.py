"""A race through a course of gates, scored as FlightGoggles' reporter scores it: the rules the
AlphaPilot study, the ROS 1 bridge (FlightGoggles' interface) and the viewer share.

- a gate counts when the vehicle passes it in course order (:class:`volary.worlds.GateTracker`,
  the official reporter's rule);
- score = 10 n - t, n the gates passed in order and t the seconds from the start to the final
  gate; 0 when the final gate is not reached within the time limit or the vehicle collides
  (:func:`race_score`);
- a collision (:func:`crashed_out`) is the vehicle's sphere touching a gate frame or the
  ceiling, leaving the arena, hitting the ground, or a diverged simulation;
- :func:`race_result` turns a :func:`volary.sim.rollout` that recorded :data:`RACE_RECORDS`
  (with the initial sample) into a :class:`RaceResult`: gate times, finish, collision, score and
  the flown path, one row per env (course).

The AlphaPilot protocol around it (25 courses, best five, racers, the challenge from sensors) is
the study :mod:`volary.studies.alphapilot`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from volary.sim.terms import end_term
from volary.worlds import GateTracker, SceneSpec

POINTS_PER_GATE = 10.0  # 001 Sec. V-C1
RACE_PLATFORM = "flightgoggles"  # the AlphaPilot 2019 vehicle (flightgoggles_vehicle.toml)
PATH_EVERY = 4  # control steps between recorded positions (plots)

if TYPE_CHECKING:
    from volary.sim import Episode, World


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
    path: Tensor  # (K, N, 3) m, positions every PATH_EVERY control steps; after an env's end
    # (a crash, the finish) its last position before the end (race_result)
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


@end_term(time_out=False)
def crashed_out(world: World) -> Tensor:
    """The race's collision rule: the vehicle's sphere touches a gate frame (any gate of the
    arena) or the ceiling, its centre leaves the arena volume, it hits the ground, or its
    simulation diverged and was reset."""
    return world.collision_events().any | world.state.crashed | world.sim.last_reset


RACE_RECORDS = {  # sampled before the first step and after every step (rollout record_initial)
    "pos": lambda w: w.state.pos.clone(),
    "time": lambda w: w.state.time.clone(),
    "passed": lambda w: w.gates.passed.clone(),  # stands still once the env ended (World.step)
}


def yaw_quat(yaw: float) -> list[float]:
    """[w, x, y, z] of a rotation by ``yaw`` rad about z (a course's start attitude)."""
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
        path=_path_until_end(rec, ep.end_time.cpu()),
        path_time=torch.tensor(rec["time"][1::PATH_EVERY, 0].tolist()),
    )


def _path_until_end(records: dict[str, Tensor], end_time: Tensor) -> Tensor:
    """(K, N, 3) the recorded positions every PATH_EVERY steps, each env's held at its last
    sample before its end (``end_time`` (N,) s, NaN: still flying). The World goes on moving an
    env that ended while others fly (its rows then say nothing about the race: a crashed
    vehicle's rows drifted hundreds of metres), and a plot or a crash site must not read them."""
    pos = records["pos"][1::PATH_EVERY].detach().cpu()
    t = records["time"][1::PATH_EVERY].detach().cpu().to(torch.float64)  # (K, N)
    after = t > end_time.to(torch.float64)[None]  # NaN (still flying): never
    last = (~after).sum(0).sub(1).clamp_min(0)  # (N,) its last row before (rows are in time)
    held = pos[last, torch.arange(pos.shape[1])]
    return torch.where(after[..., None], held[None], pos)


__all__ = [
    "PATH_EVERY",
    "POINTS_PER_GATE",
    "RACE_PLATFORM",
    "RACE_RECORDS",
    "RaceResult",
    "crashed_out",
    "race_result",
    "race_score",
    "yaw_quat",
]
