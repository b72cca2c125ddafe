"""Closed-loop evaluation of SOUS VIDE policies with the paper's metrics and disturbances
(paper 000, Sec. VI, Tables I and II).

A *policy* is any object with ``reset(n_envs)`` and ``act(obs) -> (N, 4)`` thrust-rate
commands [f_th in 0..1, W rad/s], called at 20 Hz with

- ``obs["image"]``: (N, H, W, 3) uint8 onboard RGB (after the disturbance's visual effect);
- ``obs["state"]``: (N, 10) true [p, v, q]. A SOUS VIDE policy must only use p_z, v and q
  (``history.observable``): the paper's policy never sees lateral position (Sec. VI). The full
  vector is passed so privileged baselines (:class:`ExpertPolicy`) share the interface;
- ``obs["time"]``: (N,) s since the start (= reference time of the desired trajectory);
- ``obs["objective"]``: (N, 7) first waypoint, last waypoint, total time.

Commands are clamped to the MPC's input limits (f_th in [0, 1], |W| <= (10, 10, 6) rad/s) as a
flight controller would. The drones fly the thrust-rate model (eq. 1 + drag) for the trajectory
duration from x_des(0) plus a small seeded start offset, all trials batched.

Disturbances (Table II):

- ``baseline``: nothing changed.
- ``lighting``: every frame scaled to ``lighting`` (40 %) of its brightness
  (:func:`volary.sensors.effects.brightness`), the paper's 40 % of the original lumens.
- ``dynamic``: four person-sized boxes (0.4 x 0.3 x 1.7 m, splats from ``synthesize``) walk back
  and forth across the route (sinusoids in y, periods 3.1-5.3 s) -- *visual only*: they are
  rendered but are not in the collision world (the paper's people stayed out of the path).
- ``static``: the gate, ladder and monitor are removed from the splat *and* from the collision
  world (the paper removed the objects physically, so flying through the ladder's space is no
  collision). The paper also occluded the pillars beside the gate; that part is not modelled.
- ``payload``: mass x (1 + ``payload``) (+30 %, the paper's 350 g) with the nominal k_th;
  ``payload`` > -1, so a negative value flies a lighter vehicle (mass-variation sweeps).
- ``wind``: from t = 4 s to 9 s a lateral gust: mean wind ``wind`` m/s along +y plus a
  Gauss-Markov gust (std 1 m/s, 0.5 s correlation) through the model's body drag (the paper's
  leaf blower; its 40 m/s is at the nozzle, not at the drone). Outside the window still air.

Metrics (Sec. VI), per trial then aggregated per run (:func:`summarize`):

- the flown path is sampled at every control step; *distance to the desired path* is the l2
  distance to the nearest of ``path_samples`` points of the desired trajectory (dense: 1 cm
  spacing at the 0.9 m/s peak speed);
- trajectory tracking error: mean of that distance over the flight (m);
- proximity percentile: % of samples with that distance <= 0.3 m;
- hits: rising edges of "the vehicle sphere (collider radius) penetrates an obstacle";
  collision rate = hits / metres flown (summed over the trials of a run);
- outcome, in this order: *failure, no recovery* -- a collision deeper than ``crash_depth``
  (the centre comes within radius - crash_depth of a surface, a crash the airframe would not
  survive; the trial is frozen there); *failure, off-course* -- the distance to the desired path
  exceeds ``off_course`` (1 m) at any time, the state diverged, or the end position is more
  than ``goal_tol`` (0.5 m) from the last waypoint; *partial success* -- the end position is
  reached but the final heading is off by more than ``heading_tol`` (30 deg; "tracks the
  position but not orientation"); *success, recovery* -- end reached with >= 1 (shallow) hit;
  *success, no collision* -- otherwise.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor

from volary.errors import ConfigError, UnknownNameError
from volary.math.quaternion import quat_from_euler, quat_mul, quat_to_euler
from volary.sensors.splat import GaussianSplats
from volary.sim import World, rollout
from volary.sim.metrics import count_hits, path_distance, path_length, proximity, tracking_error
from volary.studies.sousvide.generate import (
    desired_state,
    make_simulator,
    nominal_params,
    state_rows,
    to_uint8,
)
from volary.studies.sousvide.scene import LANDMARK_IDS, SousVideScene, make_scene
from volary.worlds.primitives import Scene, SceneSpec

DISTURBANCES = ("baseline", "lighting", "dynamic", "static", "payload", "wind")
OUTCOMES = ("success", "recovery", "partial", "crash", "off_course")
MAX_BODY_RATE = (10.0, 10.0, 6.0)  # rad/s, the MPC's limits (MpcConfig.max_body_rate)
WIND_WINDOW = (4.0, 9.0)  # s, when the gust blows


class SousVidePolicy(Protocol):
    """What :func:`evaluate` flies."""

    def reset(self, n_envs: int) -> None: ...

    def act(self, obs: dict[str, Tensor]) -> Tensor: ...


@dataclass(frozen=True)
class EvalConfig:
    """One evaluation run: N trials under one disturbance. Lengths m, times s, angles rad."""

    disturbance: str = "baseline"
    trials: int = 5  # the paper flew 5 per row (Tables I, II)
    seed: int = 0
    start_pos: float = 0.05  # +- m per axis around x_des(0)
    start_yaw: float = 0.05  # +- rad
    control_hz: float = 20.0
    physics_hz: float = 100.0
    platform: str = "sous_vide"
    lighting: float = 0.4  # brightness factor of the lighting disturbance
    payload: float = 0.3  # mass increase (fraction) of the payload disturbance
    wind: float = 5.0  # m/s mean lateral gust of the wind disturbance
    proximity_radius: float = 0.3  # r of the proximity percentile (Sec. VI)
    off_course: float = 1.0  # m from the desired path: failure, off-course
    goal_tol: float = 0.5  # m from the last waypoint at the end: reached
    heading_tol: float = math.radians(30.0)  # final yaw error above it: partial success
    crash_depth: float = 0.1  # m of sphere penetration that ends a trial
    path_samples: int = 1501
    steps: int | None = None  # control steps flown; None: the whole trajectory (duration x rate)
    device: str = "cpu"
    backend: str = "auto"

    def __post_init__(self) -> None:
        if self.disturbance not in DISTURBANCES:
            raise UnknownNameError("disturbance", self.disturbance, DISTURBANCES)
        for name in ("trials", "path_samples", "steps"):
            v = getattr(self, name)
            if name == "steps" and v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name}: expected an integer >= 1, got {v!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"seed: expected an integer >= 0, got {self.seed!r}")
        for f in ("start_pos", "start_yaw", "lighting", "wind", "crash_depth"):
            _finite(self, f, lo=0.0, strict=False)
        _finite(self, "payload", lo=-1.0, strict=True)  # a negative payload lightens the vehicle
        for f in ("control_hz", "physics_hz", "proximity_radius", "off_course", "goal_tol",
                  "heading_tol"):  # fmt: skip
            _finite(self, f, lo=0.0, strict=True)
        ratio = self.physics_hz / self.control_hz
        if abs(ratio - round(ratio)) > 1e-9:
            raise ConfigError(f"physics_hz: expected a multiple of control_hz, got {ratio:.3f}x")


def _finite(cfg: Any, name: str, lo: float, strict: bool) -> None:
    v = getattr(cfg, name)
    ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    if not ok or (v <= lo if strict else v < lo):
        raise ConfigError(
            f"{name}: expected a finite value {'>' if strict else '>='} {lo}, got {v!r}"
        )


# ---- metrics (Sec. VI): volary.sim.metrics ------------------------------------------------------
proximity_percentile = proximity  # the paper's name for the proximity metric


def wrap_angle(a: Tensor) -> Tensor:
    """Angle in (-pi, pi]."""
    return torch.remainder(a + math.pi, 2 * math.pi) - math.pi


def classify(
    crashed: Tensor,
    off_course: Tensor,
    goal_error: Tensor,
    heading_error: Tensor,
    hits: Tensor,
    cfg: EvalConfig,
) -> list[str]:
    """Outcome per trial (module docstring order): crash, off_course, partial, recovery, success."""
    out = []
    for c, o, g, h, n in zip(crashed, off_course, goal_error, heading_error, hits, strict=True):
        if bool(c):
            out.append("crash")
        elif bool(o) or float(g) > cfg.goal_tol:
            out.append("off_course")
        elif abs(float(h)) > cfg.heading_tol:
            out.append("partial")
        else:
            out.append("recovery" if int(n) > 0 else "success")
    return out


# ---- disturbances -------------------------------------------------------------------------------
def without_objects(splats: GaussianSplats, ids: tuple[int, ...]) -> GaussianSplats:
    """The splats minus every Gaussian whose ``extra["object_id"]`` is in ``ids``."""
    oid = splats.extra.get("object_id")
    if oid is None:
        raise ConfigError("splats: no extra['object_id'] (synthesize the scene with volary)")
    keep_np = ~np.isin(oid, ids)
    keep = torch.from_numpy(keep_np).to(splats.means.device)
    return replace(
        splats,
        means=splats.means[keep],
        quats=splats.quats[keep],
        log_scales=splats.log_scales[keep],
        opacity_logits=splats.opacity_logits[keep],
        sh=splats.sh[keep],
        extra={k: v[keep_np] for k, v in splats.extra.items()},
    )


def spec_without(spec: SceneSpec, ids: tuple[int, ...]) -> SceneSpec:
    """``spec`` minus the obstacles and gates whose object id is in ``ids``."""
    return replace(
        spec,
        obstacles=tuple(o for o in spec.obstacles if o.object_id not in ids),
        gates=tuple(g for g in spec.gates if g.object_id not in ids),
    )


class MovingPeople:
    """The ``dynamic`` disturbance: person-sized boxes walking across the route (visual only)."""

    X = (2.0, 4.5, 7.0, 10.0)  # m, the lines they walk along (across the route, in y)
    PERIOD = (3.1, 4.3, 5.3, 3.7)  # s
    PHASE = (0.0, 1.3, 2.1, 0.7)  # rad

    def __init__(self, spacing: float = 0.12) -> None:
        from volary.sensors.splat import synthesize
        from volary.worlds.primitives import Box

        spec = SceneSpec(
            "person",
            (-1.0, -1.0, -1.0),
            (1.0, 1.0, 1.0),
            obstacles=(Box((0.0, 0.0, 0.0), (0.4, 0.3, 1.7), object_id=20),),
        )
        self.body = synthesize(spec, 7, spacing=spacing, ground=False)

    def positions(self, t: float) -> Tensor:
        """(4, 3) centres at time t s: y = 2.2 sin(2 pi t / period + phase), feet on the floor."""
        out = torch.zeros(len(self.X), 3, dtype=torch.float64)
        for i, (x, p, ph) in enumerate(zip(self.X, self.PERIOD, self.PHASE, strict=True)):
            out[i] = torch.tensor([x, 2.2 * math.sin(2 * math.pi * t / p + ph), 0.85])
        return out

    def scene_at(self, splats: GaussianSplats, t: float) -> GaussianSplats:
        """The scene's splats (G, ...) with the people appended where they are at time t."""
        from volary.sensors.effects import place_object, with_objects

        poses = torch.eye(4, dtype=torch.float64).repeat(len(self.X), 1, 1)
        poses[:, :3, 3] = self.positions(t)
        body = self.body.to(splats.means.device)
        people = [place_object(body, poses[i : i + 1]) for i in range(len(self.X))]
        both = with_objects(splats, *people)
        return GaussianSplats(
            both.means[0], both.quats[0], both.log_scales[0], both.opacity_logits[0], both.sh[0]
        )


# ---- the expert as a policy ---------------------------------------------------------------------
class _Body:
    """The fields of a MultirotorState the MPC reads."""

    def __init__(self, state: Tensor) -> None:
        self.pos, self.vel, self.quat = state[:, :3], state[:, 3:6], state[:, 6:10]


class ExpertPolicy:
    """The MPC expert behind the policy interface: privileged full state, the nominal theta of
    ``platform`` (it does not know a payload), the scene's desired trajectory, reference time
    = ``obs["time"]``. Evaluates the pipeline end to end before a learned policy exists."""

    def __init__(
        self,
        scene: SousVideScene,
        platform: str = "sous_vide",
        mpc_iters: int = 2,
        control_hz: float = 20.0,
        device: str = "cpu",
    ) -> None:
        self.scene, self.platform, self.device = scene, platform, device
        self.mpc_iters, self.control_hz = mpc_iters, control_hz
        self._mpc: Any = None

    def reset(self, n_envs: int) -> None:
        from volary.control.mpc import BatchedMpcController, MpcConfig

        if isinstance(n_envs, bool) or not isinstance(n_envs, int) or n_envs < 1:
            raise ConfigError(f"n_envs: expected an integer >= 1, got {n_envs!r}")
        from volary.dynamics import VehicleParams
        from volary.platforms import get

        params = VehicleParams.from_airframes([get(self.platform)], n_envs, device=self.device)
        cfg = MpcConfig(
            dt=1.0 / self.control_hz, horizon=round(self.control_hz), max_iter=self.mpc_iters
        )
        self._mpc = BatchedMpcController(params, self.scene.trajectory.to(self.device), cfg)

    def act(self, obs: dict[str, Tensor]) -> Tensor:
        state = obs["state"]
        if self._mpc is None or self._mpc.params.n_envs != state.shape[0]:
            self.reset(int(state.shape[0]))
        return self._mpc(_Body(state), obs["time"][:, None], 1.0 / self.control_hz)


# ---- the closed loop ----------------------------------------------------------------------------
@dataclass(frozen=True)
class EvalResult:
    """One run: per-trial records and metrics."""

    config: EvalConfig
    outcome: list[str]  # per trial, one of OUTCOMES
    tracking_error: np.ndarray  # (N,) m
    proximity: np.ndarray  # (N,) %
    hits: np.ndarray  # (N,) int
    distance: np.ndarray  # (N,) m flown
    goal_error: np.ndarray  # (N,) m at the end
    heading_error: np.ndarray  # (N,) rad at the end
    positions: np.ndarray  # (N, K + 1, 3) m flown path (frozen after a crash)
    image_mean: np.ndarray  # (K,) mean pixel value of the policy's frames, 0..255
    mass: np.ndarray  # (N,) kg flown

    def summary(self) -> dict[str, Any]:
        return summarize(self)


def summarize(r: EvalResult) -> dict[str, Any]:
    """A Table I/II row: outcome counts, collision rate (hits/m), mean tracking error (m) and
    mean proximity percentile (%) over the trials."""
    counts = {k: r.outcome.count(k) for k in OUTCOMES}
    dist = float(r.distance.sum())
    return {
        "disturbance": r.config.disturbance,
        "trials": len(r.outcome),
        **counts,
        "collision_rate": float(r.hits.sum()) / dist if dist > 0 else math.nan,
        "tracking_error": float(r.tracking_error.mean()),
        "proximity": float(r.proximity.mean()),
    }


def _start_states(scene: SousVideScene, cfg: EvalConfig, n: int) -> Tensor:
    """x_des(0) with a seeded position offset (+-start_pos) and yaw offset (+-start_yaw)."""
    gen = torch.Generator().manual_seed(cfg.seed)
    r = 2.0 * torch.rand(n, 4, generator=gen, dtype=torch.float64) - 1.0
    x = desired_state(
        scene, torch.zeros(n, dtype=torch.float64), nominal_params(cfg.platform, "cpu")
    )
    z = torch.zeros(n, dtype=torch.float64)
    q = quat_mul(x[:, 6:10], quat_from_euler(z, z, r[:, 3] * cfg.start_yaw))
    return torch.cat((x[:, :3] + r[:, :3] * cfg.start_pos, x[:, 3:6], q), dim=-1)


def _world(scene: SousVideScene, cfg: EvalConfig) -> tuple[GaussianSplats, SceneSpec]:
    if cfg.disturbance == "static":
        return without_objects(scene.splats, LANDMARK_IDS), spec_without(
            scene.collision, LANDMARK_IDS
        )
    return scene.splats, scene.collision


def _set_wind(sim: Any, cfg: EvalConfig, t: float) -> None:
    on = WIND_WINDOW[0] <= t < WIND_WINDOW[1]
    sim.set_wind((0.0, cfg.wind if on else 0.0, 0.0), gust_std=1.0 if on else 0.0, gust_tau=0.5)


def evaluate(
    policy: SousVidePolicy,
    config: EvalConfig | None = None,
    *,
    scene: SousVideScene | None = None,
) -> EvalResult:
    """Fly ``policy`` for the desired trajectory's duration, ``config.trials`` trials batched."""
    cfg = EvalConfig() if config is None else config
    if not isinstance(cfg, EvalConfig):
        raise ConfigError(f"config: expected an EvalConfig, got {type(cfg).__name__}")
    if not (callable(getattr(policy, "act", None)) and callable(getattr(policy, "reset", None))):
        raise ConfigError(
            f"policy: expected reset(n_envs) and act(obs), got {type(policy).__name__}"
        )
    sc = scene or make_scene()
    n, dev = cfg.trials, cfg.device
    mass_frac = torch.full((n,), 1.0 + cfg.payload) if cfg.disturbance == "payload" else None
    sim = make_simulator(cfg.platform, n, control_hz=cfg.control_hz, physics_hz=cfg.physics_hz,
                         device=dev, mass_frac=mass_frac, stochastic=cfg.disturbance == "wind",
                         seed=cfg.seed)  # fmt: skip
    x0 = _start_states(sc, cfg, n).float().to(dev)
    sim.reset(pos=x0[:, :3], vel=x0[:, 3:6], quat=x0[:, 6:10])
    sc_dev = sc.to(dev)  # rendering runs on ``dev``; metrics use the CPU scene ``sc``
    splats, spec = _world(sc_dev, cfg)
    world = World(sim=sim, scene=Scene.stack(spec, n, device=dev))
    steps = int(round(sc.duration * cfg.control_hz)) if cfg.steps is None else cfg.steps
    pilot = _Pilot(policy, cfg, sc, sc_dev, splats, n)
    first = sim.state.pos.clone()
    crash = _Crash(cfg.crash_depth, first)
    ep = rollout(world, pilot, (crash,), steps=steps, stop_when_done=False,
                 record={"pos": crash.frozen_pos, "inside": lambda w: crash.inside})  # fmt: skip
    crashed = ~world.active
    flown = torch.cat((first[None], ep.records["pos"]), dim=0).transpose(0, 1).cpu()
    inside = ep.records["inside"].transpose(0, 1).cpu()
    return _result(cfg, sc, sim, flown, inside, crashed.cpu(), pilot.img_mean)


class _Pilot:
    """The policy under test as rollout's ``act``: render, observe, act, clip; wind schedule."""

    def __init__(self, policy: Any, cfg: EvalConfig, sc: SousVideScene, sc_dev: SousVideScene,
                 splats: GaussianSplats, n: int) -> None:  # fmt: skip
        self.policy, self.cfg, self.sc, self.n = policy, cfg, sc_dev, n
        dev = cfg.device
        self.splats = splats
        self.people = MovingPeople() if cfg.disturbance == "dynamic" else None
        self.objective = sc.objective.to(dev)[None].expand(n, 7)
        self.lo = torch.tensor([0.0, *(-r for r in MAX_BODY_RATE)], device=dev)
        self.hi = torch.tensor([1.0, *MAX_BODY_RATE], device=dev)
        self.img_mean: list[float] = []
        policy.reset(n)

    def __call__(self, world: World, k: int) -> Tensor:
        cfg, n, dev = self.cfg, self.n, self.cfg.device
        t = k * world.dt
        st = world.state
        view = self.people.scene_at(self.splats, t) if self.people is not None else self.splats
        rgb = self.sc.render(st.pos, st.quat, view, backend=cfg.backend)
        if cfg.disturbance == "lighting":
            from volary.sensors.effects import brightness

            rgb = brightness(rgb, cfg.lighting)
        img = to_uint8(rgb)
        self.img_mean.append(float(img.float().mean()))
        obs = {
            "image": img,
            "state": state_rows(st),
            "time": torch.full((n,), t, device=dev),
            "objective": self.objective,
        }
        u = _checked_action(self.policy.act(obs), n)
        u = torch.minimum(torch.maximum(u.to(dev, torch.float32), self.lo), self.hi)
        if cfg.disturbance == "wind":
            _set_wind(world.sim, cfg, t)
        return u


class _Crash:
    """End condition "crash": a collision deeper than ``depth`` (m). Keeps the step's shallow
    in-collision flags of the vehicles not crashed before it, and freezes crashed vehicles'
    positions where they crashed (nothing counts after a crash)."""

    name = "crash"
    time_out = False  # an end condition, not a time limit (volary.sim.terms)

    def __init__(self, depth: float, start: Tensor) -> None:
        self.depth, self.frozen = depth, start.clone()
        self.inside = torch.zeros_like(start[:, 0], dtype=torch.bool)

    def __call__(self, world: World) -> Tensor:
        ev = world.collision_events()
        self.inside = ev.collided & world.active
        return ev.clearance < -self.depth

    def frozen_pos(self, world: World) -> Tensor:
        self.frozen = torch.where(world.active[:, None], world.state.pos, self.frozen)
        return self.frozen.clone()


def _checked_action(u: Any, n: int) -> Tensor:
    if not isinstance(u, Tensor) or tuple(u.shape) != (n, 4):
        got = tuple(u.shape) if isinstance(u, Tensor) else type(u).__name__
        raise ConfigError(f"policy.act: expected a (N={n}, 4) tensor, got {got}")
    return torch.nan_to_num(u, nan=0.0)


def _result(
    cfg: EvalConfig,
    sc: SousVideScene,
    sim: Any,
    flown: Tensor,
    inside: Tensor,
    crashed: Tensor,
    img_mean: list[float],
) -> EvalResult:
    t = torch.linspace(0.0, sc.duration, cfg.path_samples, dtype=torch.float64)
    desired = sc.trajectory.evaluate(t).pos
    dist = path_distance(flown, desired)
    end = flown[:, -1].double()
    goal = (end - sc.waypoints[-1]).norm(dim=-1)
    yaw = quat_to_euler(sim.state.quat.double().cpu())[:, 2]
    heading = wrap_angle(yaw - sc.yaws[-1])
    bad = (dist > cfg.off_course).any(-1) | sim.state.diverged.cpu() | ~torch.isfinite(end).all(-1)
    hits = count_hits(inside)
    return EvalResult(
        config=cfg,
        outcome=classify(crashed, bad, goal, heading, hits, cfg),
        tracking_error=tracking_error(dist).numpy(),
        proximity=proximity_percentile(dist, cfg.proximity_radius).numpy(),
        hits=hits.numpy(),
        distance=path_length(flown.double()).numpy(),
        goal_error=goal.numpy(),
        heading_error=heading.numpy(),
        positions=flown.numpy(),
        image_mean=np.asarray(img_mean),
        mass=sim.params.mass.cpu().numpy(),
    )


# ---- tables -------------------------------------------------------------------------------------
PAPER_TABLE_I = {  # SOUS VIDE Table I (real flights, 5 trials): no-coll, recov, partial, crash,
    # off-course, collision rate hits/m, tracking error m, proximity %
    "SV no RMA": (3, 0, 1, 0, 1, 0.00, 0.646, 37.7),
    "SV no pre-train": (0, 0, 1, 4, 0, 0.10, 0.392, 51.4),
    "SV no latent": (1, 2, 1, 1, 0, 0.05, 0.434, 42.0),
    "SV-Net": (5, 0, 0, 0, 0, 0.00, 0.173, 96.0),
}
PAPER_TABLE_II = {  # SOUS VIDE Table II (SV-Net, real flights, 5 trials), same columns
    "baseline": (5, 0, 0, 0, 0, 0.00, 0.173, 96.0),
    "lighting": (4, 0, 1, 0, 0, 0.00, 0.237, 64.2),
    "dynamic": (5, 0, 0, 0, 0, 0.00, 0.188, 86.3),
    "static": (0, 0, 4, 0, 1, 0.06, 0.488, 25.3),
    "payload": (5, 0, 0, 0, 0, 0.00, 0.202, 80.1),
    "wind": (5, 0, 0, 0, 0, 0.00, 0.197, 81.7),
}
_HEAD = ("row", "no-coll", "recov", "partial", "crash", "off-crs", "hits/m", "err m", "prox %")


def format_table(
    rows: list[tuple[str, dict[str, Any]]], paper: dict[str, tuple] | None = None
) -> str:
    """A Markdown table of :func:`summarize` rows, each followed by the paper's row of the same
    name (``paper`` = :data:`PAPER_TABLE_I` or :data:`PAPER_TABLE_II`) when it has one."""
    lines = ["| " + " | ".join(_HEAD) + " |", "|" + " --- |" * len(_HEAD)]
    for name, s in rows:
        vals = [s[k] for k in OUTCOMES] + [s["collision_rate"], s["tracking_error"], s["proximity"]]
        lines.append(_row(f"{name} (volary)", vals))
        if paper is not None and name in paper:
            lines.append(_row(f"{name} (paper)", list(paper[name])))
    return "\n".join(lines)


def _row(name: str, vals: list[Any]) -> str:
    cells = [str(int(v)) for v in vals[:5]] + [f"{vals[5]:.2f}", f"{vals[6]:.3f}", f"{vals[7]:.1f}"]
    return "| " + " | ".join([name, *cells]) + " |"


def result_json(r: EvalResult) -> dict[str, Any]:
    """A JSON-ready record of a run (config, summary, per-trial metrics)."""
    return {
        "config": asdict(r.config),
        "summary": summarize(r),
        "trials": {
            "outcome": r.outcome,
            "tracking_error": r.tracking_error.tolist(),
            "proximity": r.proximity.tolist(),
            "hits": r.hits.tolist(),
            "distance": r.distance.tolist(),
            "goal_error": r.goal_error.tolist(),
            "heading_error": r.heading_error.tolist(),
            "mass": r.mass.tolist(),
        },
    }


__all__ = [
    "DISTURBANCES",
    "OUTCOMES",
    "PAPER_TABLE_I",
    "PAPER_TABLE_II",
    "EvalConfig",
    "EvalResult",
    "ExpertPolicy",
    "MovingPeople",
    "SousVidePolicy",
    "classify",
    "count_hits",
    "evaluate",
    "format_table",
    "path_distance",
    "path_length",
    "proximity_percentile",
    "result_json",
    "spec_without",
    "summarize",
    "tracking_error",
    "without_objects",
]
