"""One physics step composed of named stages; the Simulator builds it once and may compile it.

Stages, in order: sanitize the command, draw the step's noise, integrate (Euler or RK4) with the
command held, renormalize quaternions, resolve ground contact, guard against divergence.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import torch
from torch import Tensor

import volary.dynamics.models as models
from volary.dynamics.params import VehicleParams
from volary.dynamics.state import MultirotorState
from volary.errors import ConfigError
from volary.math import random as vrandom
from volary.math.integrators import Integrator, integrate
from volary.math.quaternion import quat_normalize
from volary.registry import parse_enum


class Model(StrEnum):
    """Vehicle models sharing one step interface."""

    RIGID_BODY = "rigid_body"  # command: rotor speeds (N, R) rad/s
    THRUST_RATE = "thrust_rate"  # command: [f_th in 0..1, W_x, W_y, W_z rad/s] (N, 4)


class OnDivergence(StrEnum):
    """What happens to an env whose state or command turns NaN/inf."""

    RESET = "reset"  # the Simulator resets it at the end of the step
    TERMINATE = "terminate"  # frozen at its last finite state until the user resets it


@dataclass(frozen=True)
class DynamicsConfig:
    """Static settings of the physics step."""

    model: Model | str = Model.RIGID_BODY
    integrator: Integrator | str = Integrator.RK4
    dt: float = 1.0 / 960.0  # s, physics step (FlightGoggles runs 960 Hz)
    stochastic: bool = True  # draw the stochastic force/moment and gusts
    ground: bool = True  # a ground plane the vehicle cannot fall through
    ground_height: float = 0.0  # m
    crash_speed: float = 2.0  # m/s, vertical impact speed above which the env is 'crashed'
    on_divergence: OnDivergence | str = OnDivergence.RESET

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", parse_enum(Model, self.model, "model"))
        object.__setattr__(
            self, "integrator", parse_enum(Integrator, self.integrator, "integrator")
        )
        object.__setattr__(
            self, "on_divergence", parse_enum(OnDivergence, self.on_divergence, "on_divergence")
        )
        if not (math.isfinite(self.dt) and self.dt > 0):
            raise ConfigError(f"dt: expected a finite time step > 0 s, got {self.dt}")
        if not self.crash_speed > 0:
            raise ConfigError(f"crash_speed: expected > 0 m/s, got {self.crash_speed}")


@dataclass(frozen=True)
class Disturbance:
    """Per-env wind, gusts and external wrenches (all zero by default)."""

    wind: Tensor  # (N, 3) m/s, constant wind in the world frame
    gust_std: Tensor  # (N,) m/s, stationary standard deviation of the gust per axis
    gust_tau: Tensor  # (N,) s, gust correlation time
    force: Tensor  # (N, 3) N, external force in the world frame
    moment: Tensor  # (N, 3) N m, external moment in the body frame
    # (N,) m, height of the surface under each vehicle for the rotor ground effect (aero.py A4),
    # besides the ground plane; -inf (the default): none. A World sets it from its scene.
    surface: Tensor | None = None
    # (N, 3) m/s, world frame: air moved by other vehicles (their downwash), added to the wind.
    # Zero by default; a World with several vehicles per env sets it.
    wake: Tensor | None = None

    def __post_init__(self) -> None:
        if self.surface is None:
            object.__setattr__(self, "surface", torch.full_like(self.gust_std, -math.inf))
        if self.wake is None:
            object.__setattr__(self, "wake", torch.zeros_like(self.wind))

    @staticmethod
    def create(n_envs: int, *, device="cpu", dtype=torch.float32) -> Disturbance:
        z3 = torch.zeros(n_envs, 3, device=device, dtype=dtype)
        return Disturbance(
            wind=z3,
            gust_std=torch.zeros(n_envs, device=device, dtype=dtype),
            gust_tau=torch.ones(n_envs, device=device, dtype=dtype),
            force=z3.clone(),
            moment=z3.clone(),
        )


def effect_ground(cfg: DynamicsConfig, dist: Disturbance) -> Tensor:
    """(N,) height of the surface under each vehicle the ground effect sees: the higher of the
    ground plane (if any) and ``dist.surface``."""
    assert dist.surface is not None
    return dist.surface.clamp_min(cfg.ground_height) if cfg.ground else dist.surface


def sanitize_command(command: Tensor) -> tuple[Tensor, Tensor]:
    """Replace non-finite commands by 0; returns (command, bad (N,) bool)."""
    bad = ~torch.isfinite(command).all(dim=-1)
    return torch.where(bad[..., None], torch.zeros_like(command), command), bad


def clamp_command(params: VehicleParams, cfg: DynamicsConfig, command: Tensor) -> Tensor:
    """Rotor speeds into [w_min, w_max]; normalized thrust into [0, 1]."""
    if cfg.model == Model.THRUST_RATE:
        return torch.cat((command[..., :1].clamp(0.0, 1.0), command[..., 1:]), dim=-1)
    return torch.minimum(torch.maximum(command, params.w_min), params.w_max)


def draw_noise(
    params: VehicleParams,
    state: MultirotorState,
    dist: Disturbance,
    keys: Tensor,
    dt: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """Stochastic force (world), moment (body) and the next gust (FlightGoggles IV-C).

    White noise of intensity sigma is sampled per step as N(0, sigma^2 / dt); the gust is a
    Gauss-Markov process dg = -g/tau dt + std sqrt(2/tau) dW.
    """
    n = vrandom.normal(keys, state.tick, 9, dtype=state.pos.dtype)
    force = params.force_noise[..., None] * n[..., 0:3] / math.sqrt(dt)
    moment = params.moment_noise[..., None] * n[..., 3:6] / math.sqrt(dt)
    a = torch.exp(-dt / dist.gust_tau)[..., None]
    gust = a * state.gust + dist.gust_std[..., None] * torch.sqrt(1 - a * a) * n[..., 6:9]
    return force, moment, gust


def ground_contact(cfg: DynamicsConfig, s: MultirotorState) -> MultirotorState:
    """Keep the centre of mass above the ground plane; a fast impact marks the env crashed."""
    below = s.pos[..., 2] < cfg.ground_height
    impact = below & (s.vel[..., 2] < -cfg.crash_speed)
    pos = torch.cat((s.pos[..., :2], s.pos[..., 2:].clamp_min(cfg.ground_height)), dim=-1)
    vel = torch.where(below[..., None], torch.zeros_like(s.vel), s.vel)
    omega = torch.where(below[..., None], torch.zeros_like(s.omega), s.omega)
    landed = below | (s.landed & (s.pos[..., 2] <= cfg.ground_height + 1e-6))
    return s.replace(pos=pos, vel=vel, omega=omega, landed=landed, crashed=s.crashed | impact)


def divergence_guard(prev: MultirotorState, s: MultirotorState, bad_cmd: Tensor) -> MultirotorState:
    """Envs whose new state is non-finite (or whose command was) keep their previous state and
    are flagged ``diverged``; envs already flagged stay frozen. Other envs are untouched."""
    finite = torch.ones_like(bad_cmd)
    for t in (s.pos, s.vel, s.quat, s.omega, s.rotor_speed):
        finite = finite & torch.isfinite(t).all(dim=-1)
    bad = ~finite | bad_cmd | prev.diverged
    return s.where(bad, prev.replace(diverged=bad)).replace(diverged=bad)


def physics_step(
    params: VehicleParams,
    state: MultirotorState,
    command: Tensor,
    dist: Disturbance,
    keys: Tensor,
    cfg: DynamicsConfig,
) -> MultirotorState:
    """Advance every env by ``cfg.dt`` with ``command`` held (zero-order hold)."""
    command, bad_cmd = sanitize_command(command)
    command = clamp_command(params, cfg, command)
    if cfg.stochastic:
        f_noise, m_noise, gust = draw_noise(params, state, dist, keys, cfg.dt)
    else:
        f_noise, m_noise, gust = (
            torch.zeros_like(dist.force),
            torch.zeros_like(dist.moment),
            state.gust,
        )
    wind = dist.wind + dist.wake + gust  # + 0 leaves a float as it is: no wake, no change
    force, moment = dist.force + f_noise, dist.moment + m_noise
    omega = state.omega
    deriv: Callable[..., tuple[Tensor, ...]]
    if cfg.model == Model.THRUST_RATE:
        omega = models.thrust_rate_apply_rates(params, omega, command)
        deriv = models.thrust_rate_derivative
    else:
        deriv = models.rigid_body_derivative

    extra = {}
    if cfg.model == Model.RIGID_BODY and params.has_aero:  # rotor aerodynamics (aero.py)
        extra["ground"] = effect_ground(cfg, dist)

    def f(x):
        return deriv(params, x, command, wind, force, moment, **extra)

    x0 = (state.pos, state.vel, state.quat, omega, state.rotor_speed)
    pos, vel, quat, omega, w = integrate(cfg.integrator, f, x0, cfg.dt)
    if cfg.model == Model.THRUST_RATE:
        w = models.thrust_rate_rotor_speed(params, command)
    new = state.replace(
        pos=pos,
        vel=vel,
        quat=quat_normalize(quat),
        omega=omega,
        rotor_speed=w,
        gust=gust,
        time=state.time + cfg.dt,
        tick=state.tick + 1,
    )
    if cfg.ground:
        new = ground_contact(cfg, new)
    return divergence_guard(state, new, bad_cmd)


def rollout(
    params: VehicleParams,
    state: MultirotorState,
    command: Tensor,
    dist: Disturbance,
    keys: Tensor,
    cfg: DynamicsConfig,
    substeps: int,
) -> MultirotorState:
    """``substeps`` physics steps with the command held (fused into one call for compiling)."""
    for _ in range(substeps):
        state = physics_step(params, state, command, dist, keys, cfg)
    return state
