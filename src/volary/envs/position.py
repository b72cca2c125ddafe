"""Position tasks: fly to a goal and hold it (``hover``: start near a fixed goal; ``reach``: a
new goal every episode). The Aerial Gym position-setpoint task family on volary's simulator.

Observation (float32, 18 + A; :data:`OBS_LAYOUT`): goal - position (3, world, m), velocity
(3, world, m/s), the body-to-world rotation matrix (9, row-major; no quaternion sign
ambiguity), body rates (3, rad/s) and the previous action (A).

Action in [-1, 1]^A, mapped to the simulator's control level (``PositionTask._setpoint``):
``ctbr`` (default, A = 4): collective thrust (a0 + 1) / 2 x max thrust, body rates a1..3 x
``max_rates``; ``velocity`` / ``acceleration`` (A = 4): a0..2 x ``max_speed`` / ``max_acc``
(world), yaw a3 x pi; ``rotor_thrusts`` (A = rotors): (a + 1) / 2 x each rotor's max thrust.

Reward per step (shaping documented, not from a paper): r = exp(-|e_p|) + 0.5 exp(-|e_p|)
exp(-|v|) - 0.02 |omega| - 0.05 |a - a_prev|^2; a termination (crash, out of bounds, flipped,
diverged) adds ``crash_penalty``. Success: the episode ends by time with |e_p| <
``success_radius`` and |v| < 0.5 m/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from volary.envs.base import TorchVectorEnv, replace_options
from volary.errors import ConfigError
from volary.math.quaternion import quat_from_euler, quat_to_rotmat
from volary.sim import World, terms

OBS_LAYOUT = (("goal_error", 3), ("vel", 3), ("rotmat", 9), ("omega", 3), ("prev_action", -1))
ACTION_MODES = ("ctbr", "velocity", "acceleration", "rotor_thrusts")


@dataclass(frozen=True)
class PositionTaskConfig:
    """Every knob of a position task (SI units; ranges are half-widths of uniform draws)."""

    platform: str | tuple[str, ...] = "research_quad_1kg"  # catalogue name(s), tiled over envs
    control: str = "ctbr"  # ACTION_MODES
    control_hz: float = 60.0
    physics_hz: float = 240.0  # RK4, 4 substeps per control step (Aerial Gym steps at 100 Hz)
    episode_s: float = 10.0
    goal: tuple[float, float, float] = (0.0, 0.0, 1.5)  # m, the fixed goal (goal_range 0)
    goal_range: tuple[float, float, float] = (0.0, 0.0, 0.0)  # m, goal = goal + U(+-range)
    start_range: tuple[float, float, float] = (1.0, 1.0, 0.5)  # m, start = goal + U(+-range)
    start_speed: float = 0.5  # m/s, initial velocity U(+-) per axis
    start_tilt: float = 0.3  # rad, initial roll and pitch U(+-); yaw U(+-pi)
    max_rates: tuple[float, float, float] = (4.0, 4.0, 2.0)  # rad/s (ctbr)
    max_speed: float = 2.0  # m/s (velocity)
    max_acc: float = 4.0  # m/s^2 (acceleration)
    max_distance: float = 4.0  # m from the goal before the episode terminates
    min_height: float = 0.1  # m, below it the episode terminates (ground)
    max_tilt: float = 1.4  # rad between body z and world z before it terminates
    crash_penalty: float = -10.0
    success_radius: float = 0.2  # m
    stochastic: bool = True  # FlightGoggles force/moment noise in the physics
    seed: int = 0
    device: str = "cpu"
    compile: bool | str = False  # the Simulator's fused step (see volary.sim)

    def __post_init__(self) -> None:
        if self.control not in ACTION_MODES:
            raise ConfigError(
                f"control: expected one of {', '.join(ACTION_MODES)}, got {self.control!r}"
            )
        for name in ("control_hz", "physics_hz", "episode_s", "max_speed", "max_acc",
                     "max_distance", "success_radius", "max_tilt"):  # fmt: skip
            v = getattr(self, name)
            if not _finite_number(v) or v <= 0:
                raise ConfigError(f"{name}: expected a finite number > 0, got {v!r}")
        for name in ("goal", "goal_range", "start_range", "max_rates"):
            v = getattr(self, name)
            if len(v) != 3 or not all(_finite_number(x) for x in v):
                raise ConfigError(f"{name}: expected three finite numbers, got {v!r}")
        for name in ("goal_range", "start_range", "max_rates"):
            if any(x < 0 for x in getattr(self, name)):
                raise ConfigError(f"{name}: expected values >= 0, got {getattr(self, name)!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"seed: expected an int >= 0, got {self.seed!r}")

    def replace(self, **kw: Any) -> PositionTaskConfig:
        return replace_options(self, **kw)


def _finite_number(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v)


class PositionTask(TorchVectorEnv):
    """N multirotors, each flying to its goal; see the module docstring for obs/action/reward.

    Terminations (:mod:`volary.sim.terms`, in this order): ``diverged`` (a NaN state),
    ``crashed`` (the ground), ``too_far`` from the goal, ``below`` the minimum height,
    ``tilted`` beyond the maximum tilt.
    """

    def __init__(self, n_envs: int, config: PositionTaskConfig | None = None) -> None:
        cfg = config or PositionTaskConfig()
        self.config = cfg
        world = World(
            cfg.platform if isinstance(cfg.platform, str) else list(cfg.platform),
            n_envs=n_envs, control=cfg.control, control_hz=cfg.control_hz,
            physics_hz=cfg.physics_hz, stochastic=cfg.stochastic,
            on_divergence="terminate",  # frozen, flagged; the env ends and resets it
            device=cfg.device, seed=cfg.seed, compile=cfg.compile,
        )  # fmt: skip
        p = world.params
        act_dim = p.n_rotors if cfg.control == "rotor_thrusts" else 4
        ends = (
            terms.diverged,
            terms.crashed,
            terms.too_far(self._goal, cfg.max_distance),
            terms.below(cfg.min_height),
            terms.tilted(cfg.max_tilt),
        )
        max_steps = max(1, int(round(cfg.episode_s * cfg.control_hz)))
        super().__init__(n_envs, 18 + act_dim, act_dim, cfg.device, world=world, terms=ends,
                         max_steps=max_steps)  # fmt: skip
        self.goal = torch.tensor(cfg.goal, device=self.device).expand(n_envs, 3).clone()
        self._seed(cfg.seed)
        self._rotor_max = (p.k_f * p.w_max**2).to(torch.float32)  # (N, R) N
        self._max_thrust = p.max_thrust.to(torch.float32)  # (N,) N
        self._rates = torch.tensor(cfg.max_rates, device=self.device)
        # the start distribution's constants, on the device once (a copy per reset would make
        # every GPU step wait for the host)
        self._goal_base = torch.tensor(cfg.goal, device=self.device)
        self._goal_range = torch.tensor(cfg.goal_range, device=self.device)
        self._start_range = torch.tensor(cfg.start_range, device=self.device)

    def _goal(self, world: World) -> Tensor:
        return self.goal

    # ---- hooks -------------------------------------------------------------------------------
    def _start(self, mask: Tensor) -> dict[str, Tensor]:
        cfg = self.config
        u = self._draw(mask, 14)
        goal = self._goal_base + u[:, 0:3] * self._goal_range
        pos = goal + u[:, 3:6] * self._start_range
        pos[:, 2] = pos[:, 2].clamp_min(cfg.min_height + 0.3)
        vel = u[:, 6:9] * cfg.start_speed
        tilt = u[:, 9:11] * cfg.start_tilt
        quat = quat_from_euler(tilt[:, 0], tilt[:, 1], u[:, 11] * math.pi)
        self.goal = torch.where(mask[:, None], goal, self.goal)
        return {"pos": pos, "quat": quat, "vel": vel}

    def _setpoint(self, a: Tensor) -> Tensor:
        """The controller setpoint for normalized actions ``a`` (the module docstring's map)."""
        cfg = self.config
        if cfg.control == "ctbr":
            thrust = (a[:, :1] + 1.0) * 0.5 * self._max_thrust[:, None]
            return torch.cat((thrust, a[:, 1:] * self._rates), dim=-1)
        if cfg.control == "rotor_thrusts":
            return (a + 1.0) * 0.5 * self._rotor_max
        scale = cfg.max_speed if cfg.control == "velocity" else cfg.max_acc
        return torch.cat((a[:, :3] * scale, a[:, 3:] * math.pi), dim=-1)

    def _observe(self) -> Tensor:
        s = self.world.state
        rot = quat_to_rotmat(s.quat).reshape(-1, 9)
        obs = torch.cat((self.goal - s.pos, s.vel, rot, s.omega, self.prev_action), dim=-1)
        return torch.nan_to_num(obs.to(torch.float32), nan=0.0, posinf=1e3, neginf=-1e3)

    def _reward(
        self, action: Tensor, terminated: Tensor, truncated: Tensor
    ) -> tuple[Tensor, dict[str, Tensor]]:
        cfg, s = self.config, self.world.state
        err = (self.goal - s.pos).norm(dim=-1)
        speed = s.vel.norm(dim=-1)
        close = torch.exp(-err)
        reward = (
            close
            + 0.5 * close * torch.exp(-speed)
            - 0.02 * s.omega.norm(dim=-1)
            - 0.05 * ((action - self.prev_prev) ** 2).sum(-1)
        )
        reward = torch.where(terminated, reward + cfg.crash_penalty, reward)
        reward = torch.nan_to_num(reward, nan=cfg.crash_penalty).to(torch.float32)
        success = truncated & (err < cfg.success_radius) & (speed < 0.5)
        end = {"success": success, "final_distance": torch.nan_to_num(err, nan=math.inf)}
        return reward, end
