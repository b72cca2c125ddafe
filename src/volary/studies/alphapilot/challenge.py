"""The AlphaPilot 2019 challenge as it was posed (paper 001 Sec. V-C): race from sensors.

The race, its rules and its score are the oracle race's (:mod:`.race`, with the core rules of
:mod:`volary.bench.gate_race`: the same World, gate tracker, collision rule and
``race_result``); what changes is what the racer gets. A contestant
(:class:`volary.studies.alphapilot.interface.Contestant`) is briefed with the *nominal* course,
the perturbation bounds, the vehicle and its sensors, and then, every control step, receives
only a :class:`~volary.studies.alphapilot.interface.ChallengeObservation`: the clock, the IMU
sample, and the IR beacon frame and downward range when those sensors read. It answers with
collective thrust and body rates for the FlightGoggles acro loop (control mode ``ctbr``). It
never holds the World, the state or the perturbed courses: observations are copies built here
from the sensor readings, with the simulator-only fields (corner depths, which reports are
false) left out.

Sensors (:class:`ChallengeSensors`; defaults from FlightGoggles where it published them):
IMU ``flightgoggles`` (noise, turn-on bias and bias walk of the FlightGoggles vehicle config),
sampled every control step; IR beacons seen by the forward camera (``flightgoggles`` camera,
60 Hz, the renderer's nominal rate), FlightGoggles' occlusion rule, 1 px noise and 5 % dropped
reports (our assumption: the paper gives no detector noise); the downward single-point ranger
(LightWare SF11/B noise, 20 Hz); optionally the stereo camera as the depth image its matcher gives
(``flightgoggles_stereo``: 320 x 240 at 15 Hz, noise growing with the square of the depth; no
object ids: the contestant finds the gates itself). Faults for robustness runs: ``dropout``,
``false_rate`` (a report at a random pixel under a real corner's id), ``mislabel_rate`` (a
report at its true pixel under a wrong label: another corner of the gate or another gate's id),
``imu_bias_scale``.

Scoring exactly as the challenge (:func:`challenge_summary`): 10 n - t per course, 0 on collision
or no finish; the leaderboard is the mean of the best 5 of the 25 courses; completion rate and the
mean +- std of all scores beside Table IV. The unit of replication is the course x noise-seed
pair (issue 57): :func:`run_challenge_seeds` flies every course under several noise seeds in one
batch (or split over worker processes), every pair's noise keyed by :func:`noise_key` alone, and
:func:`seeds_summary` gives the leaderboard per noise seed, its median over seeds with a 90 %
bootstrap interval (:data:`INTERVAL_METHOD`), and the completion rate likewise. A run ends at
``time_limit_s`` (default 60 s: every 2019 finish took well under it; the rule's 300 s would
only spend CPU on hovering vehicles): a course not finished by then scores 0 as a timeout.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import torch
from torch import Tensor

from volary.bench.gate_race import (
    PATH_EVERY,
    RACE_PLATFORM,
    RACE_RECORDS,
    RaceResult,
    crashed_out,
    race_result,
    yaw_quat,
)
from volary.bench.threads import one_thread
from volary.errors import ConfigError
from volary.math.quaternion import quat_conj, quat_mul
from volary.sensors import DepthCamera, IrBeacons, Rangefinder, camera_config, rangefinder_config
from volary.sensors.imu import ImuConfig, imu_config
from volary.studies.alphapilot.interface import (
    DEFAULT_CONTESTANT,
    BeaconReport,
    Briefing,
    ChallengeObservation,
    Contestant,
    DepthReport,
    PublishedImu,
    RangeReport,
    make_contestant,
)
from volary.studies.alphapilot.race import BEST_OF, TOP_2019_SCORE, leaderboard, noise_key
from volary.worlds import GateTracker, Scene, SceneSpec, alphapilot_2019, unperturbed

# Table IV of paper 001: sensor set -> (teams, completed runs %, mean score, std of scores)
TABLE_IV: dict[str, tuple[int, float, float, float]] = {
    "IMU + IR": (12, 48.67, 35.32, 37.72),
    "IMU + IR + Camera": (4, 36.0, 26.72, 35.87),
    "IMU + IR + Ranger": (3, 24.0, 15.04, 27.43),
    "IMU + IR + Ranger + Camera": (1, 60.0, 41.39, 34.55),
}


@dataclass(frozen=True)
class ChallengeSensors:
    """The contestant's sensors and their faults (module docstring)."""

    beacons: bool = True
    rangefinder: bool = True
    stereo: bool = False  # the stereo camera's depth images
    camera: str = "flightgoggles"  # beacon camera preset (intrinsics, mount)
    stereo_camera: str = "flightgoggles_stereo"  # depth camera preset (intrinsics, noise)
    beacon_rate_hz: float = 60.0
    range_rate_hz: float = 20.0
    stereo_rate_hz: float = 15.0  # a stereo matcher's rate on the contestant's CPU (assumed)
    pixel_std: float = 1.0  # px
    dropout: float = 0.05
    false_rate: float = 0.0
    mislabel_rate: float = 0.0  # a report's label wrong (its pixel true)
    imu: str = "flightgoggles"
    imu_bias_scale: float = 1.0

    def __post_init__(self) -> None:
        for name in ("beacon_rate_hz", "range_rate_hz", "stereo_rate_hz", "imu_bias_scale"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ConfigError(f"sensors.{name}: expected a value > 0, got {v!r}")
        for name in ("dropout", "false_rate", "mislabel_rate"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and 0.0 <= v < 1.0):
                raise ConfigError(f"sensors.{name}: expected a probability in [0, 1), got {v!r}")
        if not (math.isfinite(self.pixel_std) and self.pixel_std >= 0):
            raise ConfigError(f"sensors.pixel_std: expected px >= 0, got {self.pixel_std!r}")

    @property
    def label(self) -> str:
        """Table IV's name of the set ("IMU + IR + Ranger", ...)."""
        parts = (
            ["IMU"]
            + (["IR"] if self.beacons else [])
            + (["Ranger"] if self.rangefinder else [])
            + (["Camera"] if self.stereo else [])
        )
        return " + ".join(parts)  # fmt: skip

    def imu_config(self) -> ImuConfig:
        c, k = imu_config(self.imu), self.imu_bias_scale
        return replace(
            c, accel_bias_init=c.accel_bias_init * k, gyro_bias_init=c.gyro_bias_init * k
        )


SENSOR_SETS: dict[str, ChallengeSensors] = {
    "imu+ir+ranger": ChallengeSensors(),
    "imu+ir": ChallengeSensors(rangefinder=False),
    "imu+camera+ranger": ChallengeSensors(beacons=False, stereo=True),
}
DEFAULT_ARENA = "factory"  # the challenge's arena (``volary race --arena``; tracks.ARENAS)
FAULTS: dict[str, dict[str, Any]] = {
    "none": {},
    "dropout30": {"dropout": 0.3},
    "false10": {"false_rate": 0.1},
    "mislabel10": {"mislabel_rate": 0.1},
    "bias3x": {"imu_bias_scale": 3.0},
}


@dataclass(frozen=True)
class ChallengeResult:
    """A challenge run: the race outcome and the contestant's estimation errors over time."""

    race: RaceResult
    sensors: ChallengeSensors
    contestant: str
    est_time: Tensor  # (K,) s, samples every PATH_EVERY control steps
    pos_err: Tensor  # (K, N) m, |estimated - true position|; NaN after the env ended
    att_err: Tensor  # (K, N) rad, attitude error angle
    gate_err: Tensor  # (K, N, L) m, mean corner distance of each course gate's estimate
    flying: Tensor  # (K, N) bool, the env had not ended at that sample
    reset_s: float  # s of wall time in the contestant's reset (its pre-race planning)
    wall_s: float  # s of wall time of the whole run
    noise_seeds: tuple[int, ...] = ()  # (N,) each env's noise seed (its course: race.courses)


def run_challenge(
    courses: Sequence[SceneSpec] | None = None,
    contestant: str | Contestant = DEFAULT_CONTESTANT,
    seed: int = 0,
    *,
    sensors: ChallengeSensors | None = None,
    device: str = "cpu",
    stochastic: bool = True,
    control_hz: float = 240.0,
    time_limit_s: float = 60.0,
) -> ChallengeResult:
    """Fly ``contestant`` on ``courses`` (default: the nominal course in the factory arena),
    one env per course.

    ``seed`` seeds the vehicle's process noise and every sensor's noise; the courses carry
    their own perturbations. Runs with one torch/BLAS/OpenMP thread (:mod:`volary.bench.threads`).
    """
    specs = [alphapilot_2019(arena=DEFAULT_ARENA)] if courses is None else list(courses)
    if not specs:
        raise ConfigError("courses: expected at least one course")
    if len({s.name for s in specs}) != len(specs):
        raise ConfigError("courses: expected distinct course names (they seed the noise)")
    if not (math.isfinite(time_limit_s) and time_limit_s > 0):
        raise ConfigError(f"time_limit_s: expected a time > 0 s, got {time_limit_s!r}")
    cfg = sensors if sensors is not None else ChallengeSensors()
    name = contestant if isinstance(contestant, str) else type(contestant).__name__
    racer = make_contestant(contestant)
    pairs = [(s, seed) for s in specs]
    with one_thread():
        return _run(pairs, racer, name, cfg, device, stochastic, control_hz, time_limit_s)


def run_challenge_seeds(
    courses: Sequence[SceneSpec],
    contestant: str | Contestant = DEFAULT_CONTESTANT,
    noise_seeds: Sequence[int] = tuple(range(10)),
    *,
    sensors: ChallengeSensors | None = None,
    workers: int = 1,
    device: str = "cpu",
    control_hz: float = 240.0,
    time_limit_s: float = 60.0,
) -> ChallengeResult:
    """Fly every course x noise-seed pair: one env per pair (seed-major: the pairs of
    ``noise_seeds[0]`` first), all pairs of a worker in one batched World. Every noise stream
    is keyed by the pair (:func:`noise_key`), so a pair flies bit-identically to
    ``run_challenge([course], seed=noise_seed)``, in any batch and in any worker, when the
    contestant's own computations do not depend on the batch: the reference racer's do with
    ``snap_method="dense"``; its default ``"auto"`` solves a replan of seven or more envs
    another way (last bits; DESIGN.md, "Same course, same run"). ``workers``: processes, each
    flying a contiguous share of the noise seeds (the contestant is pickled to each); with a
    batch-independent contestant it changes the wall time only (with ``"auto"`` it changes
    which pairs replan together, so a run reproduces with the same ``workers``).
    ``ChallengeResult.noise_seeds`` names each env's."""
    specs, seeds = list(courses), list(noise_seeds)
    if not specs or not seeds:
        raise ConfigError("courses, noise_seeds: expected at least one course and one seed")
    if len({s.name for s in specs}) != len(specs):
        raise ConfigError("courses: expected distinct course names (they seed the noise)")
    if len(set(seeds)) != len(seeds) or not all(_is_seed(v) for v in seeds):
        raise ConfigError(f"noise_seeds: expected distinct ints >= 0, got {seeds!r:.80}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers: expected an int >= 1, got {workers!r}")
    if not (math.isfinite(time_limit_s) and time_limit_s > 0):
        raise ConfigError(f"time_limit_s: expected a time > 0 s, got {time_limit_s!r}")
    cfg = sensors if sensors is not None else ChallengeSensors()
    name = contestant if isinstance(contestant, str) else type(contestant).__name__
    make_contestant(contestant)  # a bad name fails here, before any worker starts
    groups = [g.tolist() for g in np.array_split(np.array(seeds), min(workers, len(seeds)))]
    jobs = [([(s, n) for n in g for s in specs], contestant, name, cfg, device, control_hz,
             time_limit_s) for g in groups]  # fmt: skip
    if len(jobs) == 1:
        return _merged([_job(*jobs[0])])
    from loky import get_reusable_executor

    pool = get_reusable_executor(max_workers=len(jobs), reuse=False, env=_ONE_THREAD_ENV)
    t0 = time.perf_counter()
    parts = list(pool.map(_job, *zip(*jobs, strict=True)))
    return replace(_merged(parts), wall_s=time.perf_counter() - t0)


_ONE_THREAD_ENV = {k: "1" for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


def _is_seed(v: Any) -> bool:
    return bool(isinstance(v, int | np.integer) and not isinstance(v, bool) and 0 <= v < 2**31)


def _job(
    pairs: list[tuple[SceneSpec, int]],
    contestant: str | Contestant,
    name: str,
    cfg: ChallengeSensors,
    device: str,
    control_hz: float,
    time_limit_s: float,
) -> ChallengeResult:
    """One worker's share: its pairs in one batch (also run in-process for one worker)."""
    racer = make_contestant(contestant)
    with one_thread():
        return _run(pairs, racer, name, cfg, device, True, control_hz, time_limit_s)


def _merged(parts: list[ChallengeResult]) -> ChallengeResult:
    """The workers' results as one, envs concatenated in order; series that ended earlier are
    padded (paths hold their last position, estimation errors NaN, ``flying`` False)."""
    if len(parts) == 1:
        return parts[0]
    k = max(p.race.path.shape[0] for p in parts)
    ke = max(p.est_time.shape[0] for p in parts)

    def pad(x: Tensor, n: int, fill: float | bool | None) -> Tensor:
        if x.shape[0] == n:
            return x
        tail = x[-1:] if fill is None else torch.full_like(x[:1], fill)
        return torch.cat([x, tail.expand(n - x.shape[0], *x.shape[1:])])

    races = [p.race for p in parts]
    race = RaceResult(
        courses=tuple(c for r in races for c in r.courses),
        **{f: torch.cat([getattr(r, f) for r in races]) for f in _RACE_ROWS},
        path=torch.cat([pad(r.path, k, None) for r in races], dim=1),
        path_time=max((r.path_time for r in races), key=len),
    )
    nan = math.nan
    return ChallengeResult(
        race=race,
        sensors=parts[0].sensors,
        contestant=parts[0].contestant,
        est_time=max((p.est_time for p in parts), key=len),
        pos_err=torch.cat([pad(p.pos_err, ke, nan) for p in parts], dim=1),
        att_err=torch.cat([pad(p.att_err, ke, nan) for p in parts], dim=1),
        gate_err=torch.cat([pad(p.gate_err, ke, nan) for p in parts], dim=1),
        flying=torch.cat([pad(p.flying, ke, False) for p in parts], dim=1),
        reset_s=max(p.reset_s for p in parts),
        wall_s=max(p.wall_s for p in parts),
        noise_seeds=tuple(v for p in parts for v in p.noise_seeds),
    )


_RACE_ROWS = ("gates_passed", "gate_times", "finished", "collided", "timed_out", "time", "score",
              "plan_time")  # fmt: skip


def _nominal(specs: Sequence[SceneSpec]) -> SceneSpec:
    """The one nominal course every course was drawn from (the briefing's course): its gates
    whole (corners, frame bars, ids), so the briefing never depends on which course of a batch
    comes first."""
    base = unperturbed(specs[0])
    for s in specs[1:]:
        if unperturbed(s).gates != base.gates:
            raise ConfigError("courses: expected perturbations of one nominal course")
    return base


NOT_BRIEFED = ("source", "arena")  # course meta a 2019 team did not get (the file's path)


def _briefed(nominal: SceneSpec) -> SceneSpec:
    """The nominal course as a contestant is told it: the gates, start and rules, without
    volary's own meta entries (:data:`NOT_BRIEFED`) and without the arena's structure (the
    factory's geometry was not published: a contestant sees it in its sensors only)."""
    meta = {k: v for k, v in nominal.meta.items() if k not in NOT_BRIEFED}
    return replace(nominal, obstacles=(), meta=meta)


def _run(
    pairs: list[tuple[SceneSpec, int]],
    racer: Contestant,
    name: str,
    cfg: ChallengeSensors,
    device: str,
    stochastic: bool,
    control_hz: float,
    time_limit_s: float,
) -> ChallengeResult:
    from volary.sim import OnCaster, Sensing, World, rollout  # layer 4, imported on use
    from volary.sim.terms import gates_done

    t_start = time.perf_counter()
    specs = [s for s, _ in pairs]
    nominal = _nominal(specs)
    cam = camera_config(cfg.camera)
    ids = [noise_key(s, n) for s, n in pairs]  # every stream follows the pair, not its slot
    seed = 0  # the sensors' streams are keyed by ``ids`` alone
    rig: dict[str, Any] = {}
    if cfg.beacons:
        rig["beacons"] = Sensing(
            OnCaster(lambda caster: IrBeacons(
                cam, caster, specs, seed=seed, pixel_noise_std=cfg.pixel_std,
                dropout=cfg.dropout, false_rate=cfg.false_rate,
                mislabel_rate=cfg.mislabel_rate, env_ids=ids,
            )),
            rate_hz=cfg.beacon_rate_hz,
        )  # fmt: skip
    ranger = rangefinder_config("flightgoggles")
    if cfg.rangefinder:
        rig["range"] = Sensing(
            OnCaster(lambda caster: Rangefinder(ranger, caster, seed=seed, env_ids=ids)),
            rate_hz=cfg.range_rate_hz,
        )
    stereo = camera_config(cfg.stereo_camera)
    if cfg.stereo:
        rig["stereo"] = Sensing(
            OnCaster(lambda caster: DepthCamera(stereo, caster, seed=seed, env_ids=ids)),
            rate_hz=cfg.stereo_rate_hz,
        )
    scene = Scene.stack(specs, device=device)
    world = World(
        [RACE_PLATFORM] * len(specs),
        specs,
        gates=GateTracker.for_courses(scene, specs),
        sensors=rig,
        control="ctbr",
        device=device,
        stochastic=stochastic,
        seed=seed,
        control_hz=control_hz,
        imu=cfg.imu_config(),
        noise_seeds=ids,
    )
    quat = [yaw_quat(s.start_yaw) for s in specs]
    world.reset(pos=torch.tensor([s.start for s in specs]), quat=torch.tensor(quat))
    brief = Briefing(
        course=_briefed(nominal),
        n_envs=world.b,
        vehicle=world.params.to(dtype=torch.float64),
        dt=world.dt,
        imu=PublishedImu.of(imu_config(cfg.imu)),  # as published: no bias model, no fault
        camera=cam if cfg.beacons else None,
        beacon_rate_hz=cfg.beacon_rate_hz if cfg.beacons else None,
        rangefinder=ranger if cfg.rangefinder else None,
        range_rate_hz=cfg.range_rate_hz if cfg.rangefinder else None,
        start_pos=tuple(float(v) for v in nominal.start),  # type: ignore[arg-type]
        start_yaw=float(nominal.start_yaw),
        floor_z=0.0,
        stereo=stereo if cfg.stereo else None,
        stereo_rate_hz=cfg.stereo_rate_hz if cfg.stereo else None,
    )
    t0 = time.perf_counter()
    racer.reset(brief)
    reset_s = time.perf_counter() - t0
    log = _EstimateLog(specs, racer)
    steps = int(math.ceil(time_limit_s * world.sim.config.control_hz))

    def act(w: Any, k: int) -> Tensor:
        obs = observe(w, k)
        cmd = _checked(racer.act(obs), w.b, name)
        if k % PATH_EVERY == 0:
            log.take(w, k)
        return cmd

    ep = rollout(world, act, (crashed_out, gates_done), steps=steps, record=RACE_RECORDS,
                 record_initial=True)  # fmt: skip
    race = race_result(specs, world.gates, ep, torch.full((world.b,), math.nan))
    res = log.result(race, cfg, name, ep.end_time, reset_s, time.perf_counter() - t_start)
    return replace(res, noise_seeds=tuple(int(n) for _, n in pairs))


def observe(world: Any, k: int) -> ChallengeObservation:
    """The contestant's observation at control step k: copies of the sensor readings due now."""
    readings = world.readings()
    imu = world.sim.imu_reading
    beacons = None
    if "beacons" in readings:
        r = readings["beacons"]
        beacons = BeaconReport(
            r.pixels.clone(), r.visible.clone(), r.object_id.clone(), r.corner.clone()
        )
    rng = None
    if "range" in readings:
        r = readings["range"]
        rng = RangeReport(r.range.clone(), r.valid.clone())
    depth = None
    if "stereo" in readings:
        r = readings["stereo"]
        depth = DepthReport(r.depth.clone(), r.valid.clone())
    return ChallengeObservation(
        step=k,
        time=world.elapsed.clone(),
        accel=None if imu is None or k == 0 else imu.accel.clone(),
        gyro=None if imu is None or k == 0 else imu.gyro.clone(),
        beacons=beacons,
        range=rng,
        depth=depth,
    )


def _checked(cmd: Any, n: int, name: str) -> Tensor:
    if not isinstance(cmd, Tensor) or tuple(cmd.shape) != (n, 4):
        shape = tuple(cmd.shape) if isinstance(cmd, Tensor) else type(cmd).__name__
        raise ConfigError(
            f"contestant {name!r}: act() must return a (N={n}, 4) tensor [thrust N, "
            f"w_x, w_y, w_z rad/s], got {shape}"
        )
    if not bool(torch.isfinite(cmd).all()):
        raise ConfigError(f"contestant {name!r}: act() returned a non-finite command")
    return cmd


class _EstimateLog:
    """The contestant's own estimate beside the truth, every PATH_EVERY steps (when it offers
    ``estimate()``); the true course gates come from the specs, never from the contestant."""

    def __init__(self, specs: Sequence[SceneSpec], racer: Contestant) -> None:
        self.racer = racer
        self.true_gates = torch.stack(
            [
                torch.as_tensor(
                    np.stack([np.asarray(s.gates[i].corners) for i in s.meta["order_index"]])
                )
                for s in specs
            ]
        ).double()  # (N, L, 4, 3) fmt: skip
        self.rows: list[tuple[float, Tensor, Tensor, Tensor, Tensor]] = []

    def take(self, world: Any, k: int) -> None:
        est = getattr(self.racer, "estimate", None)
        if est is None:
            return
        e = est()
        st = world.state
        pos_err = (e["pos"].double() - st.pos.double()).norm(dim=-1)
        dq = quat_mul(quat_conj(st.quat.double()), e["quat"].double())
        att = 2 * torch.atan2(dq[:, 1:].norm(dim=-1), dq[:, 0].abs())
        gate = (e["gate_corners"].double() - self.true_gates).norm(dim=-1).mean(-1)
        self.rows.append((k * world.dt, pos_err, att, gate, world.active.clone()))

    def result(
        self,
        race: RaceResult,
        cfg: ChallengeSensors,
        name: str,
        end_time: Tensor,
        reset_s: float,
        wall_s: float,
    ) -> ChallengeResult:
        n, L = self.true_gates.shape[:2]
        if not self.rows:
            empty = torch.zeros(0, n)
            return ChallengeResult(race, cfg, name, torch.zeros(0), empty, empty,
                                   torch.zeros(0, n, L), empty.bool(), reset_s, wall_s)  # fmt: skip
        t = torch.tensor([r[0] for r in self.rows], dtype=torch.float64)
        flying = torch.stack([r[4] for r in self.rows])
        nan = torch.tensor(math.nan, dtype=torch.float64)
        pos = torch.where(flying, torch.stack([r[1] for r in self.rows]), nan)
        att = torch.where(flying, torch.stack([r[2] for r in self.rows]), nan)
        gate = torch.where(flying[..., None], torch.stack([r[3] for r in self.rows]), nan)
        return ChallengeResult(race, cfg, name, t, pos, att, gate, flying, reset_s, wall_s)


def challenge_summary(res: ChallengeResult, best: int = BEST_OF) -> dict[str, Any]:
    """The challenge's figures: leaderboard (best ``best`` mean), completion rate, mean +- std
    of all scores, and the estimation errors: median and 95th percentile along the course (up
    to 2 s after each course's last gate passage; position also over every flying sample, which
    includes vehicles hovering on after missing a gate) and each course gate's error at the
    moment it was passed."""
    r = res.race
    score = r.score.double()
    done = r.finished & ~r.collided
    out: dict[str, Any] = {
        "contestant": res.contestant,
        "sensors": res.sensors.label,
        "sensor_settings": asdict(res.sensors),
        "courses": len(r.courses),
        "leaderboard": leaderboard(score, best),
        "completed_pct": 100.0 * float(done.double().mean()),
        "mean_score": float(score.mean()),
        "std_score": float(score.std(unbiased=False)) if score.numel() > 1 else 0.0,
        "collided": int(r.collided.sum()),
        "timed_out": int(r.timed_out.sum()),
        "reset_s": res.reset_s,
        "wall_s": res.wall_s,
        "top_2019_score": TOP_2019_SCORE,
    }
    if res.pos_err.numel():
        out["estimation"] = _error_stats(res)
    return out


CONFIDENCE = 0.9  # the interval's coverage
RESAMPLES = 9999  # bootstrap resamples
BOOTSTRAP_SEED = 2026  # the resampling's own seed: the same run reports the same interval
INTERVAL_METHOD = (
    "percentile bootstrap over the course x noise-seed pairs (scipy.stats.bootstrap, "
    f"method='percentile', {RESAMPLES} resamples, seed {BOOTSTRAP_SEED}): each noise seed's "
    "course scores resampled with replacement (so every resampled evaluation keeps its course "
    "count, as the leaderboard rule needs), the statistic recomputed as the median over the "
    "noise seeds; it does not resample the noise seeds themselves (see min/max over seeds)"
)


def seeds_summary(
    res: ChallengeResult,
    best: int = BEST_OF,
    confidence: float = CONFIDENCE,
    n_resamples: int = RESAMPLES,
) -> dict[str, Any]:
    """The challenge's figures over course x noise-seed pairs (:func:`run_challenge_seeds`):
    per noise seed, the leaderboard (best ``best`` of its courses), the completion rate and the
    mean +- std of its scores (``per_seed``); over seeds, the median of the leaderboard and of
    the completion rate with a ``confidence`` interval (:data:`INTERVAL_METHOD`) and their
    min/max; pooled over all pairs, the completion rate and mean +- std of the scores; and the
    estimation errors over all pairs (as :func:`challenge_summary`)."""
    table = _by_seed(res)
    per_seed = []
    for seed, (score, done, collided, timed_out) in table.items():
        per_seed.append({
            "noise_seed": seed,
            "leaderboard": leaderboard(torch.from_numpy(score), best),
            "completed_pct": 100.0 * float(done.mean()),
            "mean_score": float(score.mean()),
            "std_score": float(score.std()),
            "collided": int(collided.sum()),
            "timed_out": int(timed_out.sum()),
        })  # fmt: skip
    scores = [v[0] for v in table.values()]
    dones = [v[1].astype(float) for v in table.values()]
    r = res.race
    pooled = r.score.double().numpy()
    out: dict[str, Any] = {
        "contestant": res.contestant,
        "sensors": res.sensors.label,
        "sensor_settings": asdict(res.sensors),
        "courses": len(scores[0]),
        "noise_seeds": list(table),
        "pairs": int(pooled.size),
        "interval_method": INTERVAL_METHOD,
        "leaderboard": _spread(scores, lambda x: _top_mean(x, best), confidence, n_resamples),
        "completed_pct": _spread(dones, lambda x: 100.0 * x.mean(-1), confidence, n_resamples),
        "pooled": {
            "completed_pct": 100.0 * float((r.finished & ~r.collided).double().mean()),
            "mean_score": float(pooled.mean()),
            "std_score": float(pooled.std()),
            "collided": int(r.collided.sum()),
            "timed_out": int(r.timed_out.sum()),
        },
        "per_seed": per_seed,
        "reset_s": res.reset_s,
        "wall_s": res.wall_s,
        "top_2019_score": TOP_2019_SCORE,
    }
    if res.pos_err.numel():
        out["estimation"] = _error_stats(res)
    return out


def _by_seed(res: ChallengeResult) -> dict[int, tuple[np.ndarray, ...]]:
    """Per noise seed (in flight order): its courses' scores, completed, collided, timed out;
    every seed must have flown the same courses."""
    r = res.race
    seeds = res.noise_seeds or (0,) * len(r.courses)
    if len(seeds) != len(r.courses):
        raise ConfigError("result: expected one noise seed per env")
    out: dict[int, tuple[np.ndarray, ...]] = {}
    cols = (r.score.double(), r.finished & ~r.collided, r.collided, r.timed_out)
    for seed in dict.fromkeys(seeds):
        idx = [i for i, v in enumerate(seeds) if v == seed]
        if [r.courses[i] for i in idx] != [r.courses[i] for i, v in enumerate(seeds)
                                           if v == seeds[0]]:  # fmt: skip
            raise ConfigError("result: expected every noise seed to fly the same courses")
        out[int(seed)] = tuple(c[idx].numpy() for c in cols)
    return out


def _top_mean(x: np.ndarray, best: int) -> np.ndarray:
    """The leaderboard along the last axis: mean of the ``best`` highest values."""
    k = min(best, x.shape[-1])
    return np.sort(x, axis=-1)[..., -k:].mean(-1)


def _spread(
    samples: list[np.ndarray], stat: Any, confidence: float, n_resamples: int
) -> dict[str, Any]:
    """Median over seeds of ``stat`` of each seed's sample, its bootstrap interval and the
    min/max over seeds. One course per seed gives no interval (None)."""
    from scipy.stats import bootstrap

    per = np.array([float(stat(x)) for x in samples])
    out: dict[str, Any] = {
        "median": float(np.median(per)),
        "interval": None,
        "confidence": confidence,
        "min": float(per.min()),
        "max": float(per.max()),
    }
    if min(len(x) for x in samples) < 2:
        return out

    def median_of(*xs: np.ndarray, axis: int = -1) -> np.ndarray:
        vals = [stat(np.moveaxis(x, axis, -1)) for x in xs]
        return np.median(np.stack(vals, axis=-1), axis=-1)

    ci = bootstrap(
        tuple(samples), median_of, n_resamples=n_resamples, confidence_level=confidence,
        method="percentile", vectorized=True, batch=500,
        rng=np.random.default_rng(BOOTSTRAP_SEED),
    ).confidence_interval  # fmt: skip
    out["interval"] = [float(ci.low), float(ci.high)]
    return out


def _error_stats(res: ChallengeResult) -> dict[str, Any]:
    def q(x: Tensor) -> dict[str, float]:
        v = x[torch.isfinite(x)]
        if not v.numel():
            return {"median": math.nan, "p95": math.nan}
        return {"median": float(v.median()), "p95": float(torch.quantile(v, 0.95))}

    gt = res.race.gate_times  # (N, L) s when passed
    at_pass = torch.full(gt.shape, math.nan, dtype=torch.float64)
    for i in range(gt.shape[0]):
        for j in range(gt.shape[1]):
            t = float(gt[i, j])
            if math.isfinite(t):
                kk = int(torch.searchsorted(res.est_time, torch.tensor([t]).double())[0]) - 1
                at_pass[i, j] = float(res.gate_err[max(kk, 0), i, j])
    on = on_course(res)
    nan = torch.tensor(math.nan, dtype=torch.float64)
    pos, att = torch.where(on, res.pos_err, nan), torch.where(on, res.att_err, nan)
    gate = torch.where(on[..., None], res.gate_err, nan)
    return {
        "along_the_course": "samples up to 2 s after each course's last gate passage",
        "position_m": q(pos),
        "attitude_deg": {k: math.degrees(v) for k, v in q(att).items()},
        "gate_m": q(gate),
        "position_all_flying_m": q(res.pos_err),
        "gate_at_passage_m": q(at_pass.flatten()),
        "gate_at_passage_by_gate_m": [q(at_pass[:, j])["median"] for j in range(gt.shape[1])],
    }


def on_course(res: ChallengeResult) -> Tensor:
    """(K, N) bool: the estimation samples "along the course", up to 2 s after each course's
    last gate passage (all of them when it passed none); a vehicle that missed a gate and
    hovers on past its plan is not racing any more."""
    last = torch.nan_to_num(res.race.gate_times, nan=-math.inf).amax(-1)  # (N,) s
    limit = torch.where(torch.isfinite(last), last + 2.0, torch.full_like(last, math.inf))
    return res.est_time[:, None] <= limit[None, :]


def plot_estimation(res: ChallengeResult, path: Any, env: int | None = None) -> Any:
    """Estimation error along the course (:func:`on_course`): position, attitude and the course
    gates' mean corner error over time (median over the courses still racing, shaded 5-95 %,
    while at least 3 race; or one env)."""
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    on = on_course(res)
    keep = on.sum(1) >= min(3, on.shape[1])  # samples where at least 3 courses still race
    t = res.est_time[keep].numpy()
    nan = torch.tensor(math.nan, dtype=torch.float64)
    series = [
        (torch.where(on, res.pos_err, nan)[keep], "position error [m]", 1.0),
        (torch.where(on, res.att_err, nan)[keep], "attitude error [deg]", 180.0 / math.pi),
        (torch.where(on, res.gate_err.nanmean(-1), nan)[keep], "gate estimate error [m]", 1.0),
    ]
    for ax, (x, label, scale) in zip(axes, series, strict=True):
        v = (x * scale).numpy()
        if env is not None:
            ax.plot(t, v[:, env], lw=1.2)
        else:
            with warnings.catch_warnings():  # all-NaN samples: no course racing there
                warnings.simplefilter("ignore", RuntimeWarning)
                med = np.nanmedian(v, 1)
                lo, hi = np.nanpercentile(v, 5, 1), np.nanpercentile(v, 95, 1)
            ax.fill_between(t, lo, hi, alpha=0.3, label="5-95 % of courses")
            ax.plot(t, med, lw=1.5, label="median")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper right")
    axes[-1].set_xlabel("time since start [s]")
    axes[0].set_title(f"{res.contestant}, {res.sensors.label}: estimation error along the course")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out


__all__ = [
    "DEFAULT_ARENA",
    "FAULTS",
    "SENSOR_SETS",
    "TABLE_IV",
    "ChallengeResult",
    "ChallengeSensors",
    "challenge_summary",
    "observe",
    "on_course",
    "plot_estimation",
    "noise_key",
    "run_challenge",
    "run_challenge_seeds",
    "seeds_summary",
]
