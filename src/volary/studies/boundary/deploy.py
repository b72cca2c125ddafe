"""BoundaryPredictor deployment (paper 002 Sec. IV): a three-gate window slides along a course,
the network predicts (v_i, t_0) at each gate, the boundary conditions are chained into a
min-snap trajectory (eq. 1-2 segments) and flown with the Mellinger tracking controller.

Windows (the frame of ``sampling.py``): for gate k the previous "gate" is gate k-1 (the start
pose for k = 0, with v = 0) and the next is gate k+1; the last gate gets a virtual next gate
straight ahead (``end_distance`` m, same height), where the vehicle comes to rest as in
Algorithm 1 (t_f = 2 d_f / v). E_k = (v_{k-1}, z_{k-1}, d_0, theta_0, z_k, d_f, theta_f,
z_{k+1}) with theta_0 measured from gate k-1's normal and theta_f from gate k's; v_{k-1} is the
speed predicted at gate k-1. Inputs outside Table II (e.g. a course leg longer than 1.5 m) are
clipped into it and counted. Velocities at gates are perpendicular to the gate (eq. 5); yaw
follows eq. 4 (R = 0.25) from gate normal to gate normal.

A run counts gate passages with ``volary.worlds.GateTracker`` (passage rule of the sampling
config) and collisions with ``volary.worlds.CollisionMonitor`` (gate frames, bounds, ceiling)
plus the ground (the collision sphere below z = 0) and divergence, until the final gate.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from volary.errors import ConfigError, UnknownNameError
from volary.planning import single_segment
from volary.studies.boundary.grid import TABLE_II
from volary.studies.boundary.model import BoundaryPredictor
from volary.studies.boundary.sampling import (
    YAW_RATIO,
    SamplingConfig,
    gate_velocity,
    interpolated_yaw,
    simulator_compile,
)
from volary.worlds import CollisionMonitor, GateTracker, Scene, SceneSpec
from volary.worlds import boundary_predictor_course as _course
from volary.worlds.gates import gate_planes

COURSES = ("circular", "straight", "snaked")


@dataclass(frozen=True)
class DeployConfig:
    """How a course is planned and flown."""

    end_distance: float = 1.2  # m, virtual gate after the last one
    physics_hz: float = 960.0
    control_hz: float = 240.0
    grace_s: float = 1.0  # s flown after the plan ends
    stochastic: bool = False
    yaw_ratio: float = YAW_RATIO
    time_limit_s: float = 120.0  # s, a flight stops here even if its plan is longer
    randomize: bool = False  # Table I draw for the flight (flight.table_i_randomization)
    compile: str = "auto"  # Simulator fast path (sampling.simulator_compile)

    def __post_init__(self) -> None:
        simulator_compile(self.compile, "cpu")
        for name in ("end_distance", "physics_hz", "control_hz", "grace_s", "time_limit_s"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ConfigError(f"{name}: expected a value > 0, got {v}")


@dataclass(frozen=True)
class CoursePlan:
    """The chained trajectory of one course."""

    coeffs: Tensor  # (M, 3, 8) float64, segment-local ascending powers
    durations: Tensor  # (M,) s
    headings: Tensor  # (M + 1,) rad, yaw at each knot
    inputs: Tensor  # (G, 8) E_k used
    speeds: Tensor  # (G,) m/s predicted
    times: Tensor  # (G,) s predicted
    clipped: int  # inputs clipped into the Table II ranges

    @property
    def duration(self) -> float:
        return float(self.durations.sum())

    def setpoint(self, t: float) -> Tensor:
        """(14,) ``mellinger`` setpoint [p, v, a, j, yaw, yaw rate] at time ``t`` s."""
        knots = torch.cat((self.durations.new_zeros(1), self.durations.cumsum(0)))
        m = self.durations.shape[0]
        i = int(min(max(int(torch.searchsorted(knots, torch.tensor(t), right=True)) - 1, 0), m - 1))
        tau = min(max(t - float(knots[i]), 0.0), float(self.durations[i]))
        moving = 1.0 if t < float(knots[-1]) else 0.0
        c = self.coeffs[i]
        k = torch.arange(8, dtype=c.dtype)
        out = []
        for r in range(4):
            fall = torch.ones_like(k)
            for j in range(r):
                fall = fall * (k - j)
            basis = torch.where(k >= r, fall * tau ** (k - r).clamp_min(0), torch.zeros_like(k))
            out.append((c * basis).sum(-1) * (1.0 if r == 0 else moving))
        tt, dur = torch.tensor(tau, dtype=c.dtype), self.durations[i]
        yaw, rate = interpolated_yaw(tt, dur, self.headings[i], self.headings[i + 1], self.yaw_r)
        return torch.cat((*out, yaw[None], (rate * moving)[None]))

    yaw_r: float = YAW_RATIO


def _wrap(a: np.ndarray) -> np.ndarray:
    return (a + np.pi) % (2 * np.pi) - np.pi


def course_gates(spec: SceneSpec) -> tuple[np.ndarray, np.ndarray]:
    """Centres (G, 3) and normal headings (G,) of the course gates in order, each normal along
    the direction of travel."""
    order = spec.meta.get("order_index", list(range(len(spec.gates))))
    if not order:
        raise ConfigError(f"spec: course {spec.name!r} has no gates")
    corners = torch.as_tensor(np.stack([np.asarray(spec.gates[i].corners) for i in order]))
    if not bool(torch.isfinite(corners).all()):
        raise ConfigError(f"spec: course {spec.name!r} has non-finite gate corners")
    c, n = (x.double().numpy() for x in gate_planes(corners))
    prev = np.concatenate([np.asarray(spec.start, dtype=float)[None], c[:-1]])
    if np.any(np.linalg.norm(c - prev, axis=-1) < 1e-6):
        raise ConfigError(f"spec: course {spec.name!r} has duplicate consecutive gates")
    sign = np.sign(np.einsum("ij,ij->i", n, c - prev))
    n = n * np.where(sign == 0, 1.0, sign)[:, None]
    return c, np.arctan2(n[:, 1], n[:, 0])


def window_input(prev, prev_heading, v_prev, gate, heading, nxt) -> np.ndarray:
    """E (eq. 6) of one window from world-frame centres (3,) and headings (rad)."""
    d0v, dfv = gate[:2] - prev[:2], nxt[:2] - gate[:2]
    th0 = _wrap(np.arctan2(d0v[1], d0v[0]) - prev_heading)
    thf = _wrap(np.arctan2(dfv[1], dfv[0]) - heading)
    return np.array(
        [v_prev, prev[2], np.hypot(*d0v), th0, gate[2], np.hypot(*dfv), thf, nxt[2]], float
    )


def _clip(e: np.ndarray) -> tuple[np.ndarray, bool]:
    lo, hi = TABLE_II.low, TABLE_II.high
    out = np.clip(e, lo, hi)
    return out, bool(np.any(np.abs(out - e) > 1e-6))


def plan_course(
    model: BoundaryPredictor, spec: SceneSpec, cfg: DeployConfig | None = None
) -> CoursePlan:
    """Slide the window along ``spec`` and chain the predicted boundary conditions."""
    c = cfg or DeployConfig()
    centres, heads = course_gates(spec)
    g = len(centres)
    last = centres[-1] + c.end_distance * np.array([np.cos(heads[-1]), np.sin(heads[-1]), 0.0])
    nxt = np.concatenate([centres[1:], last[None]])
    prev_pos, prev_head, v_prev = np.asarray(spec.start, float), float(spec.start_yaw), 0.0
    inputs, speeds, times, clipped = [], [], [], 0
    for k in range(g):
        e = window_input(prev_pos, prev_head, v_prev, centres[k], heads[k], nxt[k])
        e, was = _clip(e)
        clipped += int(was)
        v, t = model.predict(torch.as_tensor(e[None]))
        inputs.append(e)
        speeds.append(float(v[0]))
        times.append(max(float(t[0]), 1e-2))
        prev_pos, prev_head, v_prev = centres[k], float(heads[k]), float(v[0])
    return _chain(spec, centres, heads, last, speeds, times, inputs, clipped, c)


def _chain(spec, centres, heads, last, speeds, times, inputs, clipped, c) -> CoursePlan:
    pos = np.concatenate([np.asarray(spec.start, float)[None], centres, last[None]])
    head = np.concatenate([[spec.start_yaw], heads, [heads[-1]]])
    sp = torch.tensor([0.0, *speeds, 0.0], dtype=torch.float64)
    vel = gate_velocity(sp, torch.as_tensor(head))
    p = torch.as_tensor(pos)
    zero = torch.zeros_like(p)
    b = torch.stack((p, vel, zero, zero), dim=-1)  # (G + 2, 3, 4)
    v_last = speeds[-1]
    t_end = 2 * c.end_distance / v_last if v_last > 1e-10 else 2 * c.end_distance
    dur = torch.tensor([*times, t_end], dtype=torch.float64)
    coeffs = single_segment(b[:-1], b[1:], dur[:, None].expand(-1, 3))
    return CoursePlan(
        coeffs,
        dur,
        torch.as_tensor(head),
        torch.as_tensor(np.stack(inputs)),
        torch.tensor(speeds),
        torch.tensor(times),
        clipped,
        yaw_r=c.yaw_ratio,
    )


@dataclass(frozen=True)
class FlightResult:
    """Outcome of one course."""

    course: str
    gates: int
    gates_passed: int
    finished: bool  # every gate passed in order
    collided: bool
    time_s: float | None  # time to the final gate
    plan_time_s: float
    clipped_inputs: int
    speeds: list[float]
    times: list[float]
    path: np.ndarray  # (K, 3) m

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "path"}
        return d


def fly_course(
    model: BoundaryPredictor,
    spec: SceneSpec,
    cfg: DeployConfig | None = None,
    *,
    platform: str = "crazyflie",
    seed: int = 0,
    sampling: SamplingConfig | None = None,
) -> FlightResult:
    """Plan ``spec`` with the network and fly it on CPU (one vehicle; module docstring)."""
    from volary.sim import Simulator, World, rollout  # layer 4
    from volary.sim.terms import gates_done

    c, s = cfg or DeployConfig(), sampling or SamplingConfig()
    plan = plan_course(model, spec, c)
    sim = Simulator(
        platform,
        control="mellinger",
        physics_hz=c.physics_hz,
        control_hz=c.control_hz,
        stochastic=c.stochastic or c.randomize,
        seed=seed,
        compile=simulator_compile(c.compile, "cpu"),
    )
    if c.randomize:
        from volary.control import make_controller
        from volary.math import random as vrandom
        from volary.studies.boundary.flight import table_i_randomization

        p, force = table_i_randomization(sim.params, vrandom.env_keys(seed, torch.arange(1)), s)
        sim.params, sim.controller = p, make_controller("mellinger", p)  # as in sampling
        sim.apply_wrench(force=force)
    y = float(spec.start_yaw)
    sim.reset(
        pos=torch.tensor(spec.start), quat=torch.tensor([math.cos(y / 2), 0, 0, math.sin(y / 2)])
    )
    scene = Scene.stack([spec])
    order = spec.meta.get("order_index", list(range(len(spec.gates))))
    tracker = GateTracker(
        scene, order=order, gate_width=s.passage_width, inflation=s.passage_inflation
    )
    world = World(sim=sim, gates=tracker)
    horizon = min(plan.duration + c.grace_s, c.time_limit_s)
    ep = rollout(
        world,
        lambda w, k: plan.setpoint(k * w.dt).float()[None],
        (gates_done, _Crash(scene, sim.params.radius)),  # the final gate counts first
        steps=int(math.ceil(horizon * c.control_hz)),
        record=("pos",),
    )
    path = ep.records["pos"][:, 0].double().numpy()
    finished = ep.causes()[0] == "gates_done"
    collided = ep.causes()[0] == _Crash.name
    t_final = float(sim.state.time[0]) if finished else None
    n = len(order)
    passed = int(tracker.passed[0].sum())
    return FlightResult(
        spec.name, n, passed, passed == n and t_final is not None, collided, t_final,
        plan.duration, plan.clipped, plan.speeds.tolist(), plan.times.tolist(), path,
    )  # fmt: skip


class _Crash:
    """End condition of a deployment flight: the collision sphere touches a gate frame, leaves
    the bounds or the ceiling (``CollisionMonitor``), the vehicle crashed on the ground or its
    simulation diverged, or its centre is below z = 0 or more than 1 mm below its radius."""

    name = "collided"
    time_out = False  # an end condition, not a time limit (volary.sim.terms)

    def __init__(self, scene: Scene, radius: Tensor) -> None:
        self.monitor, self.low = CollisionMonitor(scene, radius), radius.double() - 1e-3

    def __call__(self, world: Any) -> Tensor:
        st = world.state
        ev = self.monitor.update(st)
        z = st.pos[:, 2].double()
        return ev.any | st.crashed | world.sim.last_reset | (z < 0) | (z < self.low)


def named_course(kind: str, n_gates: int | None = None) -> SceneSpec:
    """The BoundaryPredictor lab course ``kind`` (``volary.worlds.boundary_predictor_course``),
    with its default number of gates unless ``n_gates`` is given."""
    if kind not in COURSES:
        raise UnknownNameError("BoundaryPredictor course", kind, COURSES)
    return _course(kind, n_gates=n_gates)


def plot_flights(results: list[FlightResult], specs: list[SceneSpec], path: str | Path) -> Path:
    """Top-down views of the flown courses (gates green when passed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 5), squeeze=False)
    for ax, r, spec in zip(axes[0], results, specs, strict=True):
        for i, gate in enumerate(spec.gates):
            xy = np.asarray(gate.corners)[:, :2]
            ax.plot(
                xy[:, 0],
                xy[:, 1],
                "-",
                color="tab:green" if i < r.gates_passed else "tab:red",
                lw=3,
            )
        ax.plot(r.path[:, 0], r.path[:, 1], "b-", lw=1)
        ax.plot(*spec.start[:2], "k^")
        status = "finished" if r.finished else ("collided" if r.collided else "incomplete")
        ax.set(aspect="equal", title=f"{r.course}: {r.gates_passed}/{r.gates} {status}")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return out


def fly_courses(
    model: BoundaryPredictor,
    kinds: list[str] | tuple[str, ...] = COURSES,
    out: str | Path | None = None,
    cfg: DeployConfig | None = None,
    seed: int = 0,
    n_gates: int | None = None,
) -> list[FlightResult]:
    """Fly the named courses; with ``out``, write ``fly.json`` and ``fly.png`` there."""
    if not kinds:
        raise ConfigError(f"kinds: expected at least one course of {COURSES}")
    specs = [named_course(k, n_gates) for k in kinds]
    results = [fly_course(model, s, cfg, seed=seed) for s in specs]
    if out is not None:
        o = Path(out)
        o.mkdir(parents=True, exist_ok=True)
        (o / "fly.json").write_text(json.dumps([r.to_dict() for r in results], indent=2))
        plot_flights(results, specs, o / "fly.png")
    return results


__all__ = [
    "COURSES",
    "CoursePlan",
    "DeployConfig",
    "FlightResult",
    "course_gates",
    "fly_course",
    "fly_courses",
    "named_course",
    "plan_course",
    "plot_flights",
    "window_input",
]
