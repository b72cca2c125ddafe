"""SOUS VIDE expert data generation (paper 000, Sec. IV, Algorithm 1 "FiGS domain randomization").

For every desired point i (time t_i of the desired trajectory) and sample j, unit
u = i * n_smp + j:

- line 5: draw theta_s = [k_th, m] uniformly in the configured fractions of the platform's
  nominal values and a start state x_s uniformly within +-delta_x of x_des(t_i) (position,
  velocity, roll/pitch/yaw), from a ``torch.Generator`` seeded by (seed, u) only;
- line 6: GenerateDynamics -- the thrust-rate model (eq. 1 + body drag) with mass m and max
  thrust k_th set per env in the Simulator's ``VehicleParams``;
- line 7: TMPC -- :class:`volary.control.mpc.BatchedMpcController` built on the same sampled
  params (the expert knows theta: privileged information) tracks the desired trajectory from
  reference time t_i for t_smp seconds at the control rate (20 Hz, the MPC stage length);
- line 8: GenerateImage -- at every control step the onboard camera (T_BC of the scene) is
  rendered from the scene's splat, one batched render for all envs;
- line 9: the rollout (images, state, reference time, expert action, theta, objective, eq. 3
  history windows) is written to the HDF5 dataset (:mod:`.dataset`) as its batch finishes.

Units are flown in batches of ``envs``: batch b holds units [b envs, (b + 1) envs), so a resumed
run flies exactly the batches an uninterrupted one would (the iLQR picks its Jacobian method by
batch size, so batch composition is kept). Rows from the first collision (vehicle sphere
against the scene, floor and walls included), divergence or a position error above
``max_error`` on are invalid (the expert is not imitated through an obstacle).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from volary.errors import ConfigError
from volary.math.quaternion import quat_from_euler, quat_mul, quat_normalize
from volary.math.random import env_keys
from volary.studies.sousvide import dataset as ds
from volary.studies.sousvide.history import history_windows, observable
from volary.studies.sousvide.scene import SousVideScene, make_scene

Progress = Callable[[int, int], None]  # (units done, units total)


@dataclass(frozen=True)
class GenerateConfig:
    """Algorithm 1's inputs (lengths m, times s, angles rad) and how the work is batched."""

    n_des: int = 60  # desired points t_i = i * duration / n_des, i = 0..n_des-1
    n_smp: int = 10  # samples (rollouts) per desired point
    t_smp: float = 2.0  # s flown per rollout
    control_hz: float = 20.0  # policy / MPC rate (stage length 1 / control_hz)
    physics_hz: float = 100.0  # RK4 physics rate, a multiple of control_hz
    mass_range: tuple[float, float] = (0.65, 1.35)  # theta: m as fractions of nominal
    thrust_range: tuple[float, float] = (0.85, 1.15)  # theta: k_th as fractions of nominal
    pos_range: tuple[float, float, float] = (0.3, 0.3, 0.2)  # delta_x: +- m per axis
    vel_range: tuple[float, float, float] = (0.3, 0.3, 0.2)  # delta_x: +- m/s per axis
    att_range: tuple[float, float, float] = (0.1, 0.1, 0.2)  # delta_x: +- roll, pitch, yaw
    width: int = 64  # image px
    height: int = 64
    window: int = 10  # T, eq. 3 history entries (0.5 s at 20 Hz)
    duration: float = 15.0  # s of the desired trajectory (scene.make_scene)
    platform: str = "sous_vide"  # catalogue airframe of the nominal theta and collider radius
    mpc_iters: int = 2  # iLQR iterations per control step (benchmarks/mpc.py: 2 suffice)
    max_error: float = 1.5  # m from x_des(t) beyond which a rollout is off-course (invalid)
    seed: int = 0
    envs: int = 64  # units flown at once (execution only: not part of the dataset identity)
    device: str = "cpu"  # execution only
    backend: str = "auto"  # splat render backend (execution only)

    def __post_init__(self) -> None:
        for name in ("n_des", "n_smp", "width", "height", "window", "mpc_iters", "envs"):
            _positive_int(self, name)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"seed: expected an integer >= 0, got {self.seed!r}")
        for name in ("t_smp", "control_hz", "physics_hz", "duration", "max_error"):
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, int | float)
                or not (math.isfinite(v) and v > 0)
            ):
                raise ConfigError(f"{name}: expected a finite value > 0, got {v!r}")
        ratio = self.physics_hz / self.control_hz
        if abs(ratio - round(ratio)) > 1e-9:
            raise ConfigError(
                f"physics_hz: expected a multiple of control_hz={self.control_hz}, "
                f"got {self.physics_hz}"
            )
        if self.steps < 2:
            raise ConfigError(f"t_smp: expected >= 2 control periods, got {self.t_smp} s")
        for name in ("mass_range", "thrust_range"):
            lo, hi = _floats(self, name, 2)
            if not 0 < lo <= hi:
                raise ConfigError(f"{name}: expected fractions 0 < lo <= hi, got {(lo, hi)}")
        for name in ("pos_range", "vel_range", "att_range"):
            if min(_floats(self, name, 3)) < 0:
                raise ConfigError(f"{name}: expected 3 half-widths >= 0, got {getattr(self, name)}")
        if self.duration < 5.0:
            raise ConfigError(f"duration: expected >= 5 s, got {self.duration}")
        try:
            torch.device(self.device)
        except (RuntimeError, TypeError) as e:
            raise ConfigError(f"device: expected a torch device name, got {self.device!r}") from e

    @property
    def steps(self) -> int:
        """Control steps per rollout."""
        return int(round(self.t_smp * self.control_hz))

    @property
    def units(self) -> int:
        return self.n_des * self.n_smp

    @property
    def dt(self) -> float:
        return 1.0 / self.control_hz

    def identity(self) -> dict[str, Any]:
        """The settings that define the data (stored in the file; resuming must match them)."""
        d = asdict(self)
        for k in ("envs", "device", "backend"):
            d.pop(k)
        return {"generator": "volary.sousvide.generate/1", **d}


def _positive_int(cfg: Any, name: str) -> None:
    v = getattr(cfg, name)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ConfigError(f"{name}: expected an integer >= 1, got {v!r}")


def _floats(cfg: Any, name: str, n: int) -> tuple[float, ...]:
    v = getattr(cfg, name)
    try:
        out = tuple(float(x) for x in v)
    except (TypeError, ValueError):
        out = ()
    if len(out) != n or not all(math.isfinite(x) for x in out):
        raise ConfigError(f"{name}: expected {n} finite numbers, got {v!r}")
    return out


# ---- line 5: draws ------------------------------------------------------------------------------
@dataclass(frozen=True)
class UnitDraws:
    """Algorithm 1 line 5 for B units: fractions of nominal theta and start-state offsets."""

    t0: Tensor  # (B,) s, t_i of each unit's desired point
    mass_frac: Tensor  # (B,) fraction of nominal m
    thrust_frac: Tensor  # (B,) fraction of nominal k_th
    dpos: Tensor  # (B, 3) m
    dvel: Tensor  # (B, 3) m/s
    datt: Tensor  # (B, 3) rad roll, pitch, yaw (body frame)


def unit_generator(seed: int, unit: int) -> torch.Generator:
    """The unit's own stream: a hash of (seed, unit), so a unit's draws do not depend on which
    other units run, in which batch, or whether the run was resumed."""
    key = int(env_keys(seed, torch.tensor([unit]))[0])
    return torch.Generator().manual_seed(key)


def draw_units(cfg: GenerateConfig, units: np.ndarray) -> UnitDraws:
    """theta_s ~ U(theta_min, theta_max), x_s ~ U(x_des - delta_x, x_des + delta_x) (line 5)."""
    u01 = torch.stack(
        [
            torch.rand(11, generator=unit_generator(cfg.seed, int(u)), dtype=torch.float64)
            for u in units
        ]
    )
    sym = 2.0 * u01 - 1.0  # U(-1, 1)

    def lerp(r: tuple[float, float], x: Tensor) -> Tensor:
        return r[0] + (r[1] - r[0]) * x

    half = lambda r: torch.tensor(r, dtype=torch.float64)  # noqa: E731
    i = torch.as_tensor(np.asarray(units) // cfg.n_smp, dtype=torch.float64)
    return UnitDraws(
        t0=i * (cfg.duration / cfg.n_des),
        mass_frac=lerp(cfg.mass_range, u01[:, 0]),
        thrust_frac=lerp(cfg.thrust_range, u01[:, 1]),
        dpos=sym[:, 2:5] * half(cfg.pos_range),
        dvel=sym[:, 5:8] * half(cfg.vel_range),
        datt=sym[:, 8:11] * half(cfg.att_range),
    )


def desired_state(scene: SousVideScene, t: Tensor, params: Any) -> Tensor:
    """x_des(t) (B, 10) [p, v, q] by differential flatness (drag-compensated) of the scene's
    trajectory with the nominal ``params`` (one env or B)."""
    from volary.planning.flatness import flat_to_state

    fs = flat_to_state(scene.trajectory.evaluate(t[:, None]), params.to(dtype=torch.float64))
    return torch.cat((fs.pos, fs.vel, fs.quat), dim=-1)[:, 0]


def perturbed_start(x_des: Tensor, d: UnitDraws) -> Tensor:
    """x_s = x_des (+) delta: position and velocity added, attitude turned in the body frame
    q_s = q_des (x) q(roll, pitch, yaw)."""
    dq = quat_from_euler(d.datt[:, 0], d.datt[:, 1], d.datt[:, 2])
    q = quat_normalize(quat_mul(x_des[:, 6:10], dq))
    return torch.cat((x_des[:, :3] + d.dpos, x_des[:, 3:6] + d.dvel, q), dim=-1)


# ---- line 6: dynamics and the flight shell ------------------------------------------------------
class HoldCommand:
    """Controller that applies the setpoint as the thrust-rate command [f_th, W] (N, 4): the
    caller (the MPC expert here, a policy in evaluation) computes it outside the Simulator."""

    mode = "thrust_rate_command"
    setpoint_size = 4

    def __init__(self, params: Any) -> None:
        self.params = params

    def __call__(self, state: Any, setpoint: Tensor, dt: float) -> Tensor:
        return setpoint.to(self.params.dtype)

    def reset(self, mask: Tensor | None = None) -> None:
        return None


def make_simulator(
    platform: str,
    n: int,
    *,
    control_hz: float,
    physics_hz: float,
    device: str,
    mass_frac: Tensor | None = None,
    thrust_frac: Tensor | None = None,
    stochastic: bool = False,
    seed: int = 0,
) -> Any:
    """GenerateDynamics (line 6): a thrust-rate Simulator of ``n`` envs whose per-env mass and
    max thrust k_th are the nominal ones times the given fractions (N,)."""
    from volary.sim import Simulator

    sim = Simulator(
        platform,
        n_envs=n,
        model="thrust_rate",
        control_hz=control_hz,
        physics_hz=physics_hz,
        stochastic=stochastic,
        on_divergence="terminate",
        device=device,
        seed=seed,
        controller=HoldCommand,
    )
    p = sim.params
    changes = {}
    if mass_frac is not None:
        changes["mass"] = p.mass * mass_frac.to(p.mass)
    if thrust_frac is not None:
        changes["max_thrust"] = p.max_thrust * thrust_frac.to(p.mass)
    sim.params = p.replace(**changes) if changes else p
    sim.controller = HoldCommand(sim.params)
    return sim


def nominal_params(platform: str, device: str) -> Any:
    """The platform's catalogue VehicleParams (one env): the nominal theta."""
    from volary.dynamics import VehicleParams
    from volary.platforms import get

    return VehicleParams.from_airframes([get(platform)], 1, device=device)


def state_rows(state: Any) -> Tensor:
    """(N, 10) float32 [p, v, q] of a MultirotorState."""
    return torch.cat((state.pos, state.vel, state.quat), dim=-1).float()


def to_uint8(rgb: Tensor) -> Tensor:
    """[0, 1] float image -> uint8 (round to nearest)."""
    return (rgb.clamp(0.0, 1.0) * 255.0 + 0.5).to(torch.uint8)


# ---- lines 7-8: one batch of rollouts -----------------------------------------------------------
@dataclass
class Timings:
    """Wall time split of a generation run (s)."""

    mpc: float = 0.0
    render: float = 0.0
    physics: float = 0.0  # simulator step + collision checks
    write: float = 0.0


@dataclass
class Rollouts:
    """B expert rollouts of ``steps`` control steps (numpy, the dataset's row fields)."""

    data: dict[str, np.ndarray]  # name -> (B, steps, ...)
    error: np.ndarray  # (B, steps) m, |p - p_des(t)|
    timings: Timings = field(default_factory=Timings)


def fly_expert(
    cfg: GenerateConfig, scene: SousVideScene, units: np.ndarray, timings: Timings | None = None
) -> Rollouts:
    """Algorithm 1 lines 5-8 for a batch of units: sample, fly the MPC expert, render."""
    from volary.control.mpc import BatchedMpcController, MpcConfig
    from volary.sim import World, rollout

    tm = Timings() if timings is None else timings
    b, dev, dt = len(units), cfg.device, cfg.dt
    d = draw_units(cfg, units)
    sim = make_simulator(
        cfg.platform,
        b,
        control_hz=cfg.control_hz,
        physics_hz=cfg.physics_hz,
        device=dev,
        mass_frac=d.mass_frac,
        thrust_frac=d.thrust_frac,
    )
    x_des = desired_state(scene, d.t0, nominal_params(cfg.platform, "cpu"))
    x0 = perturbed_start(x_des, d).float().to(dev)  # drawn on the CPU, any device flies it
    scene = scene.to(dev)
    sim.reset(pos=x0[:, :3], vel=x0[:, 3:6], quat=x0[:, 6:10])
    mpc_cfg = MpcConfig(dt=dt, horizon=max(1, round(cfg.control_hz)), max_iter=cfg.mpc_iters)
    expert = BatchedMpcController(sim.params, scene.trajectory, mpc_cfg)
    world = World(sim=sim, scene=scene.collision_scene(b, device=dev))
    out = _empty_rows(cfg, b)
    err = np.full((b, cfg.steps), np.nan, np.float32)
    theta = torch.stack((sim.params.max_thrust, sim.params.mass), dim=-1).float().cpu().numpy()
    expert_act = _Expert(cfg, scene, expert, d.t0.to(dev), out, err, tm)
    rollout(world, expert_act, (expert_act.collided,), steps=cfg.steps)
    out["theta"][:] = theta[:, None]
    out["objective"][:] = scene.objective.numpy()
    out["history"][:] = _histories(out["time"], out["state"], cfg.window)
    return Rollouts(out, err, tm)


class _Expert:
    """rollout's ``act`` for Algorithm 1 lines 7-8: render, MPC command, one dataset row per
    step; a vehicle off its reference by more than ``max_error`` (or non-finite) is ended
    before the step, one that collides or diverges after it (:meth:`collided`)."""

    def __init__(self, cfg: GenerateConfig, scene: SousVideScene, expert: Any, t0: Tensor,
                 out: dict[str, np.ndarray], err: np.ndarray, tm: Timings) -> None:  # fmt: skip
        self.cfg, self.scene, self.expert, self.t0 = cfg, scene, expert, t0
        self.out, self.err, self.tm = out, err, tm
        self.sync = torch.device(cfg.device).type == "cuda"  # timers wait for the GPU's queue
        self.c2 = 0.0

    def __call__(self, world: Any, k: int) -> Tensor:
        cfg, out = self.cfg, self.out
        dt = cfg.dt
        t_ref = self.t0 + k * dt
        st = world.state
        x = state_rows(st)
        c0 = _clock(self.sync)
        img = to_uint8(self.scene.render(st.pos, st.quat, backend=cfg.backend))
        c1 = _clock(self.sync)
        u = self.expert(st, t_ref[:, None], dt)
        self.c2 = _clock(self.sync)
        p_des = self.scene.trajectory.evaluate(t_ref[:, None].double()).pos[:, 0]
        e = (x[:, :3].double() - p_des).norm(dim=-1)
        world.end(~(torch.isfinite(x).all(-1) & (e <= cfg.max_error)), "off_reference")
        out["images"][:, k] = img.cpu().numpy()
        out["state"][:, k] = x.cpu().numpy()
        out["time"][:, k] = t_ref.cpu().numpy()
        out["action"][:, k] = u.float().cpu().numpy()
        out["valid"][:, k] = world.active.cpu().numpy()
        self.err[:, k] = e.float().cpu().numpy()
        self.tm.render += c1 - c0
        self.tm.mpc += self.c2 - c1
        return u

    def collided(self, world: Any) -> Tensor:
        """Collision with the room or a diverged state, after the step (times the physics)."""
        ev = world.collision_events()
        hit = ev.any | world.state.diverged
        self.tm.physics += _clock(self.sync) - self.c2
        return hit


def _clock(sync: bool) -> float:
    if sync:
        torch.cuda.synchronize()
    return time.perf_counter()


def _empty_rows(cfg: GenerateConfig, b: int) -> dict[str, np.ndarray]:
    k = cfg.steps
    out = {}
    for name, (_, dtype) in ds.ROW_FIELDS.items():
        if name in ("unit", "step"):
            continue
        shape = ds._row_shape(name, cfg.height, cfg.width, cfg.window)
        out[name] = np.zeros((b, k, *shape), dtype=dtype)
    return out


def _histories(t: np.ndarray, state: np.ndarray, window: int) -> np.ndarray:
    """Eq. 3 windows (B, K, T, 11) of each rollout (rows after an early end are padding-only
    garbage and flagged invalid anyway)."""
    tt, ss = torch.from_numpy(t), torch.from_numpy(state)
    return torch.stack(
        [history_windows(tt[i], observable(ss[i]), window) for i in range(len(tt))]
    ).numpy()


# ---- line 9 and the resumable driver -----------------------------------------------------------
@dataclass(frozen=True)
class GenerateSummary:
    """What a generation call did (this call only, except ``units_total``)."""

    path: Path
    units_total: int
    units_flown: int  # in this call
    units_skipped: int  # already done (resume)
    rows: int  # rows written in this call
    valid_rows: int
    crashed_units: int  # rollouts that ended early (collision, divergence, off-course)
    seconds: float
    samples_per_s: float  # valid rows / s
    tracking_error: float  # m, mean |p - p_des| over valid rows
    timings: dict[str, float]

    def lines(self) -> list[str]:
        t = self.timings
        return [
            f"dataset {self.path}: {self.units_total} units, {self.units_flown} flown now, "
            f"{self.units_skipped} already done",
            f"rows {self.rows} ({self.valid_rows} valid), early ends {self.crashed_units}, "
            f"expert tracking error {self.tracking_error:.3f} m",
            f"{self.seconds:.1f} s, {self.samples_per_s:.1f} samples/s "
            f"(render {t['render']:.1f} s, mpc {t['mpc']:.1f} s, "
            f"physics {t['physics']:.1f} s, write {t['write']:.1f} s)",
        ]


def generate(
    out: str | Path,
    config: GenerateConfig | None = None,
    *,
    scene: SousVideScene | None = None,
    progress: Progress | None = None,
    max_units: int | None = None,
) -> GenerateSummary:
    """Algorithm 1 into the dataset at ``out`` (created, or resumed when it holds the same
    config). ``max_units`` stops after that many units are flown in this call (whole batches
    only, for tests and time-boxed runs); ``progress(done, total)`` is called after each batch."""
    cfg = GenerateConfig() if config is None else config
    if not isinstance(cfg, GenerateConfig):
        raise ConfigError(f"config: expected a GenerateConfig, got {type(cfg).__name__}")
    if max_units is not None and (not isinstance(max_units, int) or max_units < 1):
        raise ConfigError(f"max_units: expected an integer >= 1 or None, got {max_units!r}")
    sc = scene or make_scene(duration=cfg.duration, width=cfg.width, height=cfg.height)
    if (sc.width, sc.height) != (cfg.width, cfg.height) or abs(sc.duration - cfg.duration) > 1e-9:
        raise ConfigError("scene: its image size and duration must match the config's")
    path = ds.create(out, cfg.identity(), units=cfg.units, steps=cfg.steps, height=cfg.height,
                     width=cfg.width, window=cfg.window)  # fmt: skip
    pending = ds.pending_units(path)
    skipped = cfg.units - len(pending)
    batches = [pending[pending // cfg.envs == b] for b in np.unique(pending // cfg.envs)]
    tm, start = Timings(), time.perf_counter()
    flown = rows = valid = crashed = 0
    err_sum = 0.0
    for units in batches:
        if max_units is not None and flown >= max_units:
            break
        r = fly_expert(cfg, sc, units, tm)
        w0 = time.perf_counter()
        ds.write_units(path, units, r.data)
        tm.write += time.perf_counter() - w0
        ok = r.data["valid"]
        flown, rows, valid = flown + len(units), rows + ok.size, valid + int(ok.sum())
        crashed += int((~ok[:, -1]).sum())
        err_sum += float(r.error[ok].astype(np.float64).sum())
        if progress is not None:
            progress(skipped + flown, cfg.units)
    secs = time.perf_counter() - start
    return GenerateSummary(
        path=path,
        units_total=cfg.units,
        units_flown=flown,
        units_skipped=skipped,
        rows=rows,
        valid_rows=valid,
        crashed_units=crashed,
        seconds=secs,
        samples_per_s=valid / secs if secs > 0 else 0.0,
        tracking_error=err_sum / valid if valid else math.nan,
        timings=asdict(tm),
    )


__all__ = [
    "GenerateConfig",
    "GenerateSummary",
    "HoldCommand",
    "Rollouts",
    "Timings",
    "UnitDraws",
    "desired_state",
    "draw_units",
    "fly_expert",
    "generate",
    "make_simulator",
    "perturbed_start",
    "unit_generator",
]
