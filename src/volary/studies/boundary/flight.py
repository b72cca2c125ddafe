"""Batched flights of BoundaryPredictor candidates and the terms of cost eq. 7 (paper 002).

Every candidate of a chunk is one env of one :class:`volary.sim.Simulator` (Mellinger mode,
float32): it starts at gate i-1's centre moving at v_{i-1}, level, and tracks its two-segment
plan (``sampling.candidate_coefficients``) with the eq. 4 yaw. Per env it records

- N_crash: the collision sphere touched a gate frame (the three gates of the window, bars as
  boxes, ``volary.worlds.sdf.sdf_box``) or the ground, or the state diverged, before the plan
  ended (+ ``grace_s``);
- N_skipped: gates i and i+1 not passed (``volary.worlds.GateTracker`` passage rule);
- E_tracking: the mean distance between the position after each control step and the position
  commanded for that step ("the previously commanded state", Sec. V-B), over the plan.

Table I randomization, per candidate from counter-based streams keyed by (seed, candidate id), so
a candidate's flight does not depend on its chunk: mass + U(+-0.01) kg, each principal moment +
U(+-1e-6) kg m^2, a constant world force U(+-1e-6) N per axis, and the motor thrust white noise
(std 1e-6 N per motor) as the simulator's stochastic body force with the same per-step std
(sigma = 2 std sqrt(dt), the four motors summed; applied on all three axes, an approximation).
The controller is given each env's randomized mass and inertia: volary's Mellinger law has no
integral term (the Crazyflie firmware's has), and a +-0.01 kg error on a ~0.03 kg vehicle would
otherwise leave a steady height error that no integrator removes.

Chunks: a batch is sorted by flight length and cut by ``length_buckets`` (each chunk flies until
its longest flight ends, so similar lengths waste few steps); each chunk gets its own Simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from volary.control import make_controller
from volary.dynamics import VehicleParams
from volary.errors import ConfigError
from volary.math import random as vrandom
from volary.sim import Episode, Simulator, World, rollout
from volary.studies.boundary.sampling import SamplingConfig, interpolated_yaw, simulator_compile
from volary.worlds import GateTracker


@dataclass(frozen=True)
class FlightBatch:
    """Candidates to fly, in their local frames."""

    coeffs: Tensor  # (C, 2, 3, 8) ascending powers of segment-local time, x/y/z
    durations: Tensor  # (C, 2) s, t_0 and t_f
    headings: Tensor  # (C, 3) rad, psi_{i-1}, psi_i, psi_{i+1}
    centres: Tensor  # (C, 3, 3) m, gates i-1, i, i+1
    ids: Tensor  # (C,) int64, global candidate ids (randomization streams)

    @property
    def size(self) -> int:
        return int(self.durations.shape[0])

    def pad(self, n: int) -> FlightBatch:
        """The batch repeated cyclically to ``n`` candidates (a fixed simulator size)."""
        idx = torch.arange(n) % self.size
        return FlightBatch(*(getattr(self, f)[idx] for f in _FIELDS))

    def index(self, idx: Tensor) -> FlightBatch:
        return FlightBatch(*(getattr(self, f)[idx] for f in _FIELDS))


_FIELDS = ("coeffs", "durations", "headings", "centres", "ids")


@dataclass(frozen=True)
class FlightOutcome:
    """The measured terms of eq. 7 per candidate."""

    crashed: Tensor  # (C,) bool
    skipped: Tensor  # (C,) int64, gates i and i+1 not passed
    tracking: Tensor  # (C,) m, mean position error


def frame_distance(pos: Tensor, centres: Tensor, headings: Tensor, sizes: Tensor) -> Tensor:
    """(N,) m, distance from ``pos (N, 3)`` to the nearest frame of upright square gates
    (``centres (N, G, 3)``, normals along ``headings (N, G)``; ``sizes`` = [half opening, bar
    width, half depth]): the frame is the square annulus half-opening <= max(|l|, |h|) <=
    half-opening + bar in the gate plane (l lateral, h vertical), thickened by the depth."""
    rel = pos[:, None, :] - centres
    c, s = torch.cos(headings), torch.sin(headings)
    normal = (rel[..., 0] * c + rel[..., 1] * s).abs()
    lateral = (-rel[..., 0] * s + rel[..., 1] * c).abs()
    vertical = rel[..., 2].abs()
    half, bar, depth = sizes[0], sizes[1], sizes[2]
    q = torch.stack((lateral, vertical), dim=-1) - (half + bar)
    outer = q.clamp_min(0.0).norm(dim=-1)  # outside the frame's outer square
    inner = (half - torch.maximum(lateral, vertical)).clamp_min(0.0)  # inside the opening
    d_plane = (normal - depth).clamp_min(0.0)
    return torch.hypot(d_plane, outer + inner).amin(-1)


def gate_frame_boxes(centres: Tensor, headings: Tensor, cfg: SamplingConfig):
    """Centres (..., G, 4, 3), half extents (..., G, 4, 3) and yaws (..., G, 4) of the four frame
    bars of upright gates (normal along ``headings``), in the layout of ``volary.worlds``."""
    w, b, d = cfg.gate_opening, cfg.gate_border, cfg.gate_depth
    u = torch.stack((-torch.sin(headings), torch.cos(headings), 0 * headings), dim=-1)
    up = torch.zeros_like(u)
    up[..., 2] = 1.0
    off = torch.stack((up, -up, u, -u), dim=-2) * (w + b) / 2
    bar = centres.new_tensor([d / 2, w / 2 + b, b / 2])
    side = centres.new_tensor([d / 2, b / 2, w / 2])
    half = torch.stack((bar, bar, side, side)).expand(*headings.shape, 4, 3)
    return centres[..., None, :] + off, half, headings[..., None].expand(*headings.shape, 4)


def gate_corners(centres: Tensor, headings: Tensor, opening: float) -> Tensor:
    """(..., G, 4, 3) corners of square upright openings (``volary.worlds.tracks.vertical_gate``
    layout: top bar first)."""
    u = torch.stack((-torch.sin(headings), torch.cos(headings), 0 * headings), dim=-1) * opening / 2
    z = torch.zeros_like(u)
    z[..., 2] = opening / 2
    return torch.stack((centres - u + z, centres + u + z, centres + u - z, centres - u - z), -2)


def length_buckets(lengths: Tensor, max_size: int, ratio: float, min_size: int) -> list[slice]:
    """Consecutive chunks of ascending flight ``lengths`` (K,): each holds at most ``max_size``
    flights no longer than ``ratio`` times its first one, but at least ``min_size`` (or what is
    left). A chunk is simulated until its longest flight ends, so this bounds the steps wasted on
    finished flights while keeping batches large."""
    if lengths.dim() != 1 or bool((lengths[1:] < lengths[:-1]).any()):
        raise ConfigError("lengths: expected a 1-D tensor sorted in ascending order")
    n, out, s = lengths.shape[0], [], 0
    while s < n:
        e = int(torch.searchsorted(lengths, lengths[s] * ratio, right=True))
        e = max(min(e, s + max_size, n), min(s + min_size, n), s + 1)
        out.append(slice(s, e))
        s = e
    return out


def table_i_randomization(
    params: VehicleParams, keys: Tensor, cfg: SamplingConfig
) -> tuple[VehicleParams, Tensor]:
    """Table I (paper 002): per env (stream ``keys (N,)``) mass + U(+-mass_range) kg, each
    principal moment + U(+-inertia_range) kg m^2, the motor thrust white noise as the stochastic
    body force (per-step std 2 thrust_noise_std, four motors summed), and a constant world force
    U(+-force_range) N per axis, returned as (params, force (N, 3)) for ``apply_wrench``."""
    u = 2.0 * vrandom.uniform(keys, torch.zeros_like(keys), 7) - 1.0  # (N, 7) in (-1, 1)
    u = u.to(params.dtype)
    inertia = params.inertia + torch.diag_embed(cfg.inertia_range * u[:, 1:4])
    noise = 2.0 * cfg.thrust_noise_std * math.sqrt(1.0 / cfg.physics_hz)
    p = params.replace(
        mass=params.mass + cfg.mass_range * u[:, 0],
        inertia=inertia,
        inertia_inv=torch.linalg.inv(inertia),
        force_noise=torch.full_like(params.force_noise, noise),
        moment_noise=torch.zeros_like(params.moment_noise),
    )
    return p, cfg.force_range * u[:, 4:7]


class CandidateFlyer:
    """Flies batches of candidates in length-bucketed chunks, one Simulator per chunk."""

    def __init__(self, cfg: SamplingConfig, seed: int = 0, device: str = "cpu") -> None:
        self.cfg, self.seed, self.device = cfg, int(seed), str(device)
        self._compile = simulator_compile(cfg.compile, self.device)
        self._sims: dict[int, Simulator] = {}
        self.nominal = self._simulator(1).params
        self.env_steps = 0  # env x control steps simulated (work done, for benchmarks)

    def _simulator(self, n: int) -> Simulator:
        """A Simulator of ``n`` envs (inductor: built once per size, as it compiles per shape;
        otherwise built fresh, which takes milliseconds)."""
        if n in self._sims:
            return self._sims[n]
        cfg = self.cfg
        sim = Simulator(
            cfg.platform,
            n_envs=n,
            control="mellinger",
            physics_hz=cfg.physics_hz,
            control_hz=cfg.control_hz,
            stochastic=cfg.randomize and cfg.thrust_noise_std > 0,
            compile=self._compile,
            device=self.device,
            seed=self.seed,
        )
        if self._compile is True:
            self._sims[n] = sim
        return sim

    def flight_length(self, durations: Tensor) -> Tensor:
        """(C,) s simulated per candidate: t_0, the scored part of t_f, and ``grace_s``."""
        tf = durations[:, 1]
        tail = tf if self.cfg.tail_s is None else tf.clamp_max(self.cfg.tail_s)
        return durations[:, 0] + tail + self.cfg.grace_s

    def fly(self, batch: FlightBatch) -> FlightOutcome:
        """Fly ``batch`` (any size) and measure eq. 7's terms, in the batch's order. Flights
        are sorted by length and flown in ``length_buckets`` chunks."""
        check_batch(batch)
        if batch.size == 0:
            z = torch.zeros(0)
            return FlightOutcome(z.bool(), z.long(), z.float())
        length = self.flight_length(batch.durations)
        order = length.argsort()
        chunks = length_buckets(
            length[order], self.cfg.chunk, self.cfg.bucket_ratio, self.cfg.min_chunk
        )
        outs = [self._fly_chunk(batch.index(order[c])) for c in chunks]
        inv = order.argsort()
        return FlightOutcome(*(torch.cat([getattr(o, f) for o in outs])[inv] for f in _OUT))

    # ---- one chunk -------------------------------------------------------------------------
    def _fly_chunk(self, part: FlightBatch) -> FlightOutcome:
        n, dev = part.size, self.device
        # inductor compiles per shape: pad to a power of two (few shapes); others fly as they are
        size = _padded(n, self.cfg.chunk) if self._compile is True else n
        b = part.pad(size)
        self.sim = self._simulator(size)
        self._prepare(b)
        plan = _Plan.create(b, self.cfg.yaw_ratio, dev)
        tracker, frames = self._gates(b)
        radius = self.sim.params.radius
        end, due = self._horizon(plan)
        crashed = torch.zeros(size, dtype=torch.bool, device=dev)
        err_sum = torch.zeros(size, dtype=torch.float64, device=dev)
        steps = torch.zeros_like(err_sum)
        dt, grace = self.sim.dt, self.cfg.grace_s
        n_steps = int(math.ceil((float(end.max()) + grace) / dt)) + 1
        self.env_steps += n_steps * size
        world = World(sim=self.sim, gates=tracker)  # freezes the gates of ended flights
        for k0 in range(0, n_steps, _TIME_BLOCK):
            # setpoints and scoring of a block of steps at once: fewer small torch calls per step
            t = torch.arange(k0, min(k0 + _TIME_BLOCK, n_steps), device=dev) * dt
            t = t.double()[:, None].expand(-1, size)  # (T, C)
            sp = plan.setpoint(t)
            live = t < end + grace  # (T, C): the flight is still scored at the step's start
            ep = _fly_block(world, sp.to(self.sim.params.dtype), live)
            p = ep.records["pos"]  # (T, C, 3)
            flying = t < end
            err = (p.double() - sp[..., :3]).norm(dim=-1)
            err_sum += torch.where(flying, err, 0.0).sum(0)
            steps += flying.double().sum(0)
            near = frame_distance(p.reshape(-1, 3), *_tile(frames, t.shape[0]))
            hit = (near.reshape(t.shape) < radius) | (p[..., 2] < radius) | ep.records["bad"]
            crashed |= (hit & live).any(0)
        skipped = (~tracker.passed & due).sum(-1)
        track = err_sum / steps.clamp_min(1)
        return FlightOutcome(crashed[:n].cpu(), skipped[:n].cpu(), track[:n].float().cpu())

    def _horizon(self, plan: _Plan) -> tuple[Tensor, Tensor]:
        """When each flight's scoring ends (s) and which of gates i, i+1 are due by then."""
        t0, tf = plan.durations[:, 0], plan.durations[:, 1]
        tail = tf if self.cfg.tail_s is None else tf.clamp_max(self.cfg.tail_s)
        end = t0 + tail
        due = torch.stack((torch.ones_like(t0, dtype=torch.bool), tail >= tf), dim=-1)
        return end, due

    def _prepare(self, b: FlightBatch) -> None:
        """Randomized parameters (Table I), noise streams and the start state of every env."""
        sim, cfg = self.sim, self.cfg
        keys = vrandom.env_keys(self.seed, b.ids.to(self.device))
        p = self.nominal.index(torch.zeros(b.size, dtype=torch.long, device=self.device))
        if cfg.randomize:
            p, force = table_i_randomization(p, keys, cfg)
            sim.apply_wrench(force=force)
        sim.params = p
        # the controller knows each env's true mass and inertia (module docstring)
        sim.controller = make_controller("mellinger", p)
        sim.keys = keys
        sim.state = sim.state.replace(tick=torch.zeros_like(sim.state.tick))
        v0 = b.coeffs[:, 0, :, 1]  # velocity at t = 0: the linear coefficient
        quat = torch.zeros(b.size, 4)
        quat[:, 0] = torch.cos(b.headings[:, 0] / 2)
        quat[:, 3] = torch.sin(b.headings[:, 0] / 2)
        sim.reset(pos=b.centres[:, 0].float(), vel=v0.float(), quat=quat)

    def _gates(self, b: FlightBatch) -> tuple[GateTracker, tuple[Tensor, Tensor, Tensor]]:
        cfg, dt = self.cfg, self.sim.params.dtype
        c, h = b.centres.to(self.device, dt), b.headings.to(self.device, dt)
        tracker = GateTracker(
            gate_corners(c, h, cfg.gate_opening),
            order=torch.tensor([1, 2]),
            gate_width=cfg.passage_width,
            inflation=cfg.passage_inflation,
        )
        sizes = c.new_tensor([cfg.gate_opening / 2, cfg.gate_border, cfg.gate_depth / 2])
        return tracker, (c, h, sizes)


_OUT = ("crashed", "skipped", "tracking")


_TIME_BLOCK = 32  # control steps whose setpoints and scores are computed together


def _fly_block(world: World, setpoints: Tensor, live: Tensor) -> Episode:
    """Fly one block of ``T`` control steps: ``setpoints (T, C, 14)``; a flight is ended before
    the first step at which it is no longer ``live (T, C)`` (its gate passages freeze). Records
    the position and the crash/divergence flags after every step."""
    stop = ~live  # (T, C): live only turns False, so stop[k] holds every flight ended by step k
    before = torch.cat((world.active[None], live[:-1]))  # still flying before step k
    due = (stop & before).any(-1).tolist()  # steps at which some flight stops (one sync)

    def act(w: World, k: int) -> Tensor:
        if due[k]:
            w.end(stop[k], "flown")
        return setpoints[k]

    return rollout(
        world, act, steps=setpoints.shape[0], record=_RECORD, begin=False, stop_when_done=False
    )


_RECORD = {"pos": lambda w: w.state.pos, "bad": lambda w: w.state.crashed | w.sim.last_reset}


def _tile(frames: tuple[Tensor, Tensor, Tensor], t: int) -> tuple[Tensor, Tensor, Tensor]:
    """Gate frames (centres (C, G, 3), headings (C, G), sizes) repeated for T steps (T*C)."""
    c, h, sizes = frames
    return c.repeat(t, 1, 1), h.repeat(t, 1), sizes


def _padded(n: int, cap: int) -> int:
    """The next power of two >= n (at least 256), at most max(cap, n)."""
    return max(n, min(cap, max(256, 1 << (n - 1).bit_length())))


@dataclass(frozen=True)
class _Plan:
    """Setpoints of a batch of two-segment plans (derivative coefficients precomputed)."""

    deriv: tuple[Tensor, ...]  # 4 x (C, 2, 3, 8): coefficients of d^r/dt^r, r = 0..3
    durations: Tensor  # (C, 2)
    headings: Tensor  # (C, 3)
    ratio: float

    @staticmethod
    def create(b: FlightBatch, ratio: float, device: str) -> _Plan:
        c = b.coeffs.to(device, torch.float64)
        k = torch.arange(c.shape[-1], dtype=c.dtype, device=device)
        out, cur = [c], c
        for _ in range(3):
            cur = torch.cat((cur[..., 1:] * k[1:], torch.zeros_like(cur[..., :1])), dim=-1)
            out.append(cur)
        d = b.durations.to(device, torch.float64)
        return _Plan(tuple(out), d, b.headings.to(device, torch.float64), ratio)

    @property
    def end(self) -> Tensor:
        return self.durations.sum(-1)

    def setpoint(self, t: Tensor) -> Tensor:
        """(..., C, 14) ``mellinger`` setpoints [p, v, a, j, yaw, yaw rate] at plan times
        ``t (..., C)``; after the end the end point is held at rest."""
        t0, tf = self.durations[:, 0], self.durations[:, 1]
        second = t >= t0
        tau = torch.where(second, torch.minimum(t - t0, tf), t.clamp_min(0.0))
        moving = (t < t0 + tf).double()[..., None]
        pw = tau[..., None] ** torch.arange(8, dtype=tau.dtype, device=tau.device)
        seg = second[..., None, None]
        vals = []
        for r, c in enumerate(self.deriv):
            coef = torch.where(seg, c[:, 1], c[:, 0])  # (..., C, 3, 8)
            v = (coef * pw[..., None, :]).sum(-1)
            vals.append(v if r == 0 else v * moving)
        h = self.headings
        y1, r1 = interpolated_yaw(tau, t0, h[:, 0], h[:, 1], self.ratio)
        y2, r2 = interpolated_yaw(tau, tf, h[:, 1], h[:, 2], self.ratio)
        yaw = torch.where(second, y2, y1)
        rate = torch.where(second, r2, r1) * moving[..., 0]
        return torch.cat((*vals, yaw[..., None], rate[..., None]), dim=-1)


def check_batch(batch: FlightBatch) -> None:
    """Raise ConfigError for non-finite plans or non-positive durations."""
    if not bool(torch.isfinite(batch.coeffs).all()):
        raise ConfigError("coeffs: expected finite trajectory coefficients")
    if not bool((batch.durations > 0).all()):
        raise ConfigError("durations: expected segment times > 0 s")


__all__ = [
    "CandidateFlyer",
    "FlightBatch",
    "FlightOutcome",
    "check_batch",
    "gate_corners",
    "gate_frame_boxes",
    "length_buckets",
    "table_i_randomization",
]
