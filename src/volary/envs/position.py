"""Position tasks: fly to a goal and hold it (``hover``: start near a fixed goal; ``reach``: a
new goal every episode). The Aerial Gym position-setpoint task family on volary's simulator.

Observation (float32; ``observation`` picks the layout, :data:`OBS_LAYOUTS`):

- ``volary`` (default, 18 + A): goal - position (3, world, m), velocity (3, world, m/s), the
  body-to-world rotation matrix (9, row-major; no quaternion sign ambiguity), body rates
  (3, rad/s) and the previous action (A).
- ``aerial_gym`` (15): Aerial Gym's motor-control state (paper 003, Sec. V-C):
  s = [e^W, R_6, R^T v, Omega]: goal - position (3, world), the 6-D rotation representation
  of Zhou et al. 2019 (the first two columns of the body-to-world R, 6), the velocity in the
  body frame (3; the paper writes "R v" with R world-to-body) and body rates (3).
- ``volary_twr`` (19 + A): ``volary`` and the airframe's hover thrust fraction m g / T_max
  (1 / its thrust-to-weight ratio, a spec-sheet figure: FLYINGTRUST Table I lists it for all
  36 platforms), so one policy can fly airframes of any TWR (``random_airframes``).
- ``body`` (12 + A): everything in the body frame (FLU): R^T (goal - position) (3), R^T v (3),
  the world's up axis R^T e_z (3), body rates (3) and the previous action (A). Heading drops
  out: the hover dynamics are the same at every yaw, and so is this observation, where the
  world-frame layouts make the policy learn each heading (issue 22's hover recipe).

Action in [-1, 1]^A, mapped to the simulator's control level (``PositionTask._setpoint``):
``ctbr`` (default, A = 4): collective thrust (a0 + 1) / 2 x max thrust, body rates a1..3 x
``max_rates``; ``velocity`` / ``acceleration`` (A = 4): a0..2 x ``max_speed`` / ``max_acc``
(world), yaw a3 x pi; ``rotor_thrusts`` (A = rotors): (a + 1) / 2 x each rotor's max thrust.

Rate response (``rate_model``, ctbr only): ``"loop"`` (default) flies the commanded body rates
through the simulator's FlightGoggles rate loop on the rigid body (a ~0.1 s response);
``"lag"`` replaces it with a measured one, e.g. a flight controller's (issue 58, Betaflight's
fitted in experiments/rl/betaflight-transfer/policy.py): each body axis (FLU) follows its
commanded rate after a dead time ``rate_delay`` through a first-order lag ``rate_lag`` (per
axis, s), on the thrust-rate model (collective thrust applied directly, body rates set each
control step to the lag's exact mean over the step, so attitude integrates as under the
continuous response; the observation's body rates are the lag's value at the step's end, as a
gyro reads them).
``rate_lag_spread`` > 0 draws each episode's lags and delays x U(1 +- spread) (domain
randomization around the fit); the other draws of an episode stay those without it.
``thrust_spread`` > 0 (ctbr) delivers each episode's collective thrust x U(1 +- spread): an
uncalibrated thrust map (a flight controller's throttle), randomized; default off.

Reward per step (shaping documented, not from a paper): r = exp(-|e_p|) + 0.5 exp(-|e_p|)
exp(-|v|) - 0.02 |omega| - 0.05 |a - a_prev|^2 [+ ``precision_weight`` exp(-|e_p| /
``precision_scale``), off by default: ten times the slope near the goal, against the steady
offset a policy otherwise keeps]; a termination (crash, out of bounds, flipped, diverged) adds
``crash_penalty``. Success: the episode ends by time with |e_p| <
``success_radius`` and |v| < 0.5 m/s.

Setpoint sequences (``goal_hold_s`` > 0): every ``goal_hold_s`` seconds the goal jumps to a new
draw of goal + U(+-goal_range), as in Aerial Gym's setpoint-tracking experiments (Fig. 7).
Tracking error, reported at the end of every episode flown to its time limit (NaN for one that
terminated early): ``mean_error``, the mean |e_p| over all its steps, and ``settled_error``,
the mean over the steps at least ``settle_s`` after the goal last changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from volary.dynamics import GRAVITY
from volary.envs.base import TorchVectorEnv, replace_options
from volary.errors import ConfigError, not_one_of
from volary.math.quaternion import quat_from_euler, quat_to_rotmat
from volary.platforms.randomize import random_quads
from volary.sim import World, terms

if TYPE_CHECKING:
    from volary.envs.policy import MlpPolicy

OBS_LAYOUTS = {
    "volary": (("goal_error", 3), ("vel", 3), ("rotmat", 9), ("omega", 3), ("prev_action", -1)),
    "aerial_gym": (("goal_error", 3), ("rot6d", 6), ("body_vel", 3), ("omega", 3)),
    "volary_twr": (
        ("goal_error", 3),
        ("vel", 3),
        ("rotmat", 9),
        ("omega", 3),
        ("prev_action", -1),
        ("hover_thrust_fraction", 1),
    ),
    "body": (
        ("body_goal_error", 3),
        ("body_vel", 3),
        ("body_up", 3),
        ("omega", 3),
        ("prev_action", -1),
    ),
}
OBS_LAYOUT = OBS_LAYOUTS["volary"]  # the default layout (-1: the action's size)
ACTION_MODES = ("ctbr", "velocity", "acceleration", "rotor_thrusts")
REWARD_TERMS = ("close", "close_and_slow", "body_rates", "action_change", "precision", "crash")
RATE_MODELS = ("loop", "lag")


@dataclass(frozen=True)
class PositionTaskConfig:
    """Every knob of a position task (SI units; ranges are half-widths of uniform draws)."""

    platform: str | tuple[str, ...] = "research_quad_1kg"  # catalogue name(s), tiled over envs
    random_airframes: bool = False  # env i flies random_quad(seed, i) instead of ``platform``
    control: str = "ctbr"  # ACTION_MODES
    observation: str = "volary"  # OBS_LAYOUTS
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
    precision_weight: float = 0.0  # weight of the precision term exp(-|e_p| / precision_scale)
    precision_scale: float = 0.1  # m
    success_radius: float = 0.2  # m
    goal_hold_s: float = 0.0  # s a goal is held before the next is drawn; 0: one per episode
    settle_s: float = 2.0  # s after a goal change before its error counts as settled
    rate_model: str = "loop"  # RATE_MODELS: the rate loop, or a lag + delay (module docstring)
    rate_lag: tuple[float, float, float] = (0.0, 0.0, 0.0)  # s, per body axis ("lag")
    rate_delay: tuple[float, float, float] = (0.0, 0.0, 0.0)  # s, per body axis ("lag")
    rate_lag_spread: float = 0.0  # lag and delay x U(1 +- spread) per episode ("lag"), < 1
    thrust_spread: float = 0.0  # ctbr: delivered thrust x U(1 +- spread) per episode, < 1
    stochastic: bool = True  # FlightGoggles force/moment noise in the physics
    seed: int = 0
    device: str = "cpu"
    compile: bool | str = False  # the Simulator's fused step (see volary.sim)

    def __post_init__(self) -> None:
        if self.control not in ACTION_MODES:
            raise not_one_of("control", self.control, ACTION_MODES)
        if self.observation not in OBS_LAYOUTS:
            raise not_one_of("observation", self.observation, OBS_LAYOUTS)
        for name in ("goal_hold_s", "settle_s"):
            v = getattr(self, name)
            if not _finite_number(v) or v < 0:
                raise ConfigError(f"{name}: expected a finite number >= 0, got {v!r}")
        if not _finite_number(self.precision_weight) or self.precision_weight < 0:
            raise ConfigError(f"precision_weight: expected a finite number >= 0, "
                              f"got {self.precision_weight!r}")  # fmt: skip
        for name in ("control_hz", "physics_hz", "episode_s", "max_speed", "max_acc",
                     "max_distance", "success_radius", "max_tilt",
                     "precision_scale"):  # fmt: skip
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
        self._check_rate_model()

    def _check_rate_model(self) -> None:
        if self.rate_model not in RATE_MODELS:
            raise not_one_of("rate_model", self.rate_model, RATE_MODELS)
        for name in ("rate_lag", "rate_delay"):
            v = getattr(self, name)
            if len(v) != 3 or not all(_finite_number(x) and 0 <= x <= 1 for x in v):
                raise ConfigError(f"{name}: expected three numbers in [0, 1] s, got {v!r}")
        for name in ("rate_lag_spread", "thrust_spread"):
            spread = getattr(self, name)
            if not _finite_number(spread) or not 0 <= spread < 1:
                raise ConfigError(f"{name}: expected a number in [0, 1), got {spread!r}")
        if self.thrust_spread > 0 and self.control != "ctbr":
            raise ConfigError(f"thrust_spread: expected 0 with control {self.control!r} "
                              "(it scales ctbr's collective thrust)")  # fmt: skip
        if self.rate_model == "lag" and self.control != "ctbr":
            raise ConfigError(
                f"rate_model: expected 'loop' with control {self.control!r} "
                "('lag' lags commanded body rates: control 'ctbr')"
            )

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
        if cfg.random_airframes:
            platforms: Any = random_quads(n_envs, cfg.seed)
        else:
            platforms = cfg.platform if isinstance(cfg.platform, str) else list(cfg.platform)
        world = World(
            platforms,
            n_envs=n_envs, control=cfg.control, control_hz=cfg.control_hz,
            physics_hz=cfg.physics_hz, stochastic=cfg.stochastic,
            model="thrust_rate" if cfg.rate_model == "lag" else "rigid_body",
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
        obs_dim = sum(act_dim if k < 0 else k for _, k in OBS_LAYOUTS[cfg.observation])
        super().__init__(n_envs, obs_dim, act_dim, cfg.device, world=world, terms=ends,
                         max_steps=max_steps)  # fmt: skip
        self.goal = torch.tensor(cfg.goal, device=self.device).expand(n_envs, 3).clone()
        self._seed(cfg.seed)
        self._rotor_max = (p.k_f * p.w_max**2).to(torch.float32)  # (N, R) N
        self._max_thrust = p.max_thrust.to(torch.float32)  # (N,) N
        self._hover_fraction = (p.mass * GRAVITY / p.max_thrust).to(torch.float32)[:, None]
        self._rates = torch.tensor(cfg.max_rates, device=self.device)
        # the start distribution's constants, on the device once (a copy per reset would make
        # every GPU step wait for the host)
        self._goal_base = torch.tensor(cfg.goal, device=self.device)
        self._goal_range = torch.tensor(cfg.goal_range, device=self.device)
        self._start_range = torch.tensor(cfg.start_range, device=self.device)
        # tracking error per episode (module docstring), in control steps
        self._hold_steps = int(round(cfg.goal_hold_s * cfg.control_hz))
        self._settle_steps = int(round(cfg.settle_s * cfg.control_hz))
        zeros = torch.zeros(n_envs, dtype=torch.float64, device=self.device)
        self._err_sum = zeros.clone()
        self._settled_sum, self._settled_n = zeros.clone(), zeros.clone()
        self._since_goal = torch.zeros(n_envs, dtype=torch.int64, device=self.device)
        self._lag = RateLag(n_envs, cfg, self.device) if cfg.rate_model == "lag" else None
        self._thrust_gain = torch.ones(n_envs, device=self.device)  # thrust_spread's draw

    episode_metrics = ("final_distance", "mean_error", "settled_error")  # info fields, m

    def evaluate_mlp(self, policy: Any, seed: int) -> dict[str, Any] | None:
        """Reset with ``seed`` and fly every env's first episode under the deterministic MLP
        ``policy`` (:class:`volary.envs.policy.MlpPolicy`) in one numba call; per-env arrays
        of the end-of-episode info (:func:`first_episodes`), or
        None where that kernel does not apply (then step the env). Reset before stepping."""
        if self.sim.fused_loop is None or self._lag is not None or self.config.thrust_spread > 0:
            return None  # the kernel flies neither the lag nor the thrust draw
        if fused_unsupported(self, policy) is not None:
            return None
        return first_episodes(self, policy, seed)

    def _goal(self, world: World) -> Tensor:
        return self.goal

    # ---- hooks -------------------------------------------------------------------------------
    def _start(self, mask: Tensor) -> dict[str, Tensor]:
        cfg = self.config
        spread = self._lag is not None and cfg.rate_lag_spread > 0
        # draw j is the same whatever the count: 0-13 the start, 14-19 the lags, 20 the thrust
        u = self._draw(mask, 21 if cfg.thrust_spread > 0 else 20 if spread else 14)
        if self._lag is not None:
            self._lag.reset(mask, u[:, 14:20] * cfg.rate_lag_spread if spread else None)
        if cfg.thrust_spread > 0:
            gain = 1.0 + u[:, 20] * cfg.thrust_spread
            self._thrust_gain = torch.where(mask, gain, self._thrust_gain)
        goal = self._goal_base + u[:, 0:3] * self._goal_range
        pos = goal + u[:, 3:6] * self._start_range
        pos[:, 2] = pos[:, 2].clamp_min(cfg.min_height + 0.3)
        vel = u[:, 6:9] * cfg.start_speed
        tilt = u[:, 9:11] * cfg.start_tilt
        quat = quat_from_euler(tilt[:, 0], tilt[:, 1], u[:, 11] * math.pi)
        self.goal = torch.where(mask[:, None], goal, self.goal)
        for acc in (self._err_sum, self._settled_sum, self._settled_n):
            acc.masked_fill_(mask, 0.0)
        self._since_goal.masked_fill_(mask, 0)
        return {"pos": pos, "quat": quat, "vel": vel}

    def _next_goals(self) -> None:
        """Setpoint sequences: envs that have held their goal ``goal_hold_s`` get a new one."""
        self._since_goal += 1
        if self._hold_steps <= 0:
            return
        due = self._since_goal % self._hold_steps == 0
        u = self._draw(due, 3)  # the env's stream, so its goals do not depend on N either
        goal = self._goal_base + u * self._goal_range
        self.goal = torch.where(due[:, None], goal, self.goal)
        self._since_goal = torch.where(due, 0, self._since_goal)

    def _setpoint(self, a: Tensor) -> Tensor:
        """The controller setpoint for normalized actions ``a`` (the module docstring's map)."""
        cfg = self.config
        if cfg.control == "ctbr":
            thrust = (a[:, :1] + 1.0) * 0.5 * self._max_thrust[:, None]
            if cfg.thrust_spread > 0:
                thrust = thrust * self._thrust_gain[:, None]
            rates = a[:, 1:] * self._rates
            if self._lag is not None:
                rates = self._lag.step(rates)
            return torch.cat((thrust, rates), dim=-1)
        if cfg.control == "rotor_thrusts":
            return (a + 1.0) * 0.5 * self._rotor_max
        scale = cfg.max_speed if cfg.control == "velocity" else cfg.max_acc
        return torch.cat((a[:, :3] * scale, a[:, 3:] * math.pi), dim=-1)

    def _observe(self) -> Tensor:
        s = self.world.state
        rot = quat_to_rotmat(s.quat)  # (N, 3, 3) body to world
        omega = s.omega if self._lag is None else self._lag.y.to(s.omega.dtype)  # a gyro's
        if self.config.observation == "body":  # R^T x for world vectors x (R body to world)
            world = torch.stack((self.goal - s.pos, s.vel), dim=-1)  # (N, 3, 2)
            body = (rot.transpose(1, 2) @ world).transpose(1, 2).reshape(-1, 6)
            obs = torch.cat((body, rot[:, 2, :], omega, self.prev_action), dim=-1)
        elif self.config.observation == "aerial_gym":
            rot6 = rot[:, :, :2].transpose(1, 2).reshape(-1, 6)  # columns 1 and 2 of R
            body_vel = (rot.transpose(1, 2) @ s.vel[:, :, None])[:, :, 0]
            obs = torch.cat((self.goal - s.pos, rot6, body_vel, omega), dim=-1)
        else:
            parts = [self.goal - s.pos, s.vel, rot.reshape(-1, 9), omega, self.prev_action]
            if self.config.observation == "volary_twr":
                parts.append(self._hover_fraction)
            obs = torch.cat(parts, dim=-1)
        return torch.nan_to_num(obs.to(torch.float32), nan=0.0, posinf=1e3, neginf=-1e3)

    def reward_terms(
        self, state: Any, action: Tensor, prev_action: Tensor, terminated: Tensor
    ) -> dict[str, Tensor]:
        """The reward's terms (module docstring) for ``state`` after ``action`` (N, A) that
        followed ``prev_action``, each (N,), in :data:`REWARD_TERMS` order: the step's reward
        is their sum (``precision`` only when ``precision_weight`` > 0; NaN -> the crash
        penalty). ``envs/fused_position.py`` computes the same terms in its kernel."""
        cfg = self.config
        err = (self.goal - state.pos).norm(dim=-1)
        close = torch.exp(-err)
        return {
            "close": close,
            "close_and_slow": 0.5 * close * torch.exp(-state.vel.norm(dim=-1)),
            "body_rates": -0.02 * state.omega.norm(dim=-1),
            "action_change": -0.05 * ((action - prev_action) ** 2).sum(-1),
            "precision": cfg.precision_weight * torch.exp(-err / cfg.precision_scale),
            "crash": torch.zeros_like(err).masked_fill(terminated, cfg.crash_penalty),
        }

    def _reward(
        self, action: Tensor, terminated: Tensor, truncated: Tensor
    ) -> tuple[Tensor, dict[str, Tensor]]:
        cfg, s = self.config, self.world.state
        err = (self.goal - s.pos).norm(dim=-1)
        speed = s.vel.norm(dim=-1)
        t = self.reward_terms(s, action, self.prev_prev, terminated)
        reward = t["close"] + t["close_and_slow"] + t["body_rates"] + t["action_change"]
        if cfg.precision_weight > 0:
            reward = reward + t["precision"]
        reward = torch.where(terminated, reward + t["crash"], reward)
        reward = torch.nan_to_num(reward, nan=cfg.crash_penalty).to(torch.float32)
        success = truncated & (err < cfg.success_radius) & (speed < 0.5)
        end = {"success": success, "final_distance": torch.nan_to_num(err, nan=math.inf),
               **self._tracking(err, truncated)}  # fmt: skip
        self._next_goals()
        return reward, end

    def _tracking(self, err: Tensor, truncated: Tensor) -> dict[str, Tensor]:
        """Accumulate this step's |e_p|; the episode's mean and settled errors (NaN unless
        ``truncated``: only episodes flown to their time limit have a tracking error)."""
        e = err.to(torch.float64)
        settled = self._since_goal + 1 >= self._settle_steps  # this step ends >= settle_s in
        self._err_sum += e
        self._settled_sum += torch.where(settled, e, 0.0)
        self._settled_n += settled.to(torch.float64)
        nan = torch.full_like(e, math.nan)
        steps = (self.episode_length + 1).to(torch.float64)  # this step included
        mean = torch.where(truncated, self._err_sum / steps, nan)
        has = truncated & (self._settled_n > 0)
        tail = torch.where(has, self._settled_sum / self._settled_n.clamp_min(1.0), nan)
        return {"mean_error": mean, "settled_error": tail}


class RateLag:
    """Per-env, per-axis dead time + first-order lag of commanded body rates, stepped at the
    control rate (``rate_model="lag"``). The command is held over each control step (dt), so
    the delayed input is piecewise constant and the lag is integrated exactly: ``step`` returns
    each axis' mean response over the step (what turns the attitude) and keeps its end value.
    A delay of n + f steps feeds the step's first f dt with command k - n - 1 and the rest
    with command k - n."""

    def __init__(self, n_envs: int, cfg: PositionTaskConfig, device: Any) -> None:
        self.dt = 1.0 / cfg.control_hz
        self.base_tau = torch.tensor(cfg.rate_lag, dtype=torch.float64, device=device)
        self.base_delay = torch.tensor(cfg.rate_delay, dtype=torch.float64, device=device)
        top = max(cfg.rate_delay) * (1.0 + cfg.rate_lag_spread) / self.dt
        self.depth = int(math.floor(top)) + 2  # commands k - depth + 1 .. k
        z = torch.zeros(n_envs, 3, dtype=torch.float64, device=device)
        self.tau, self.delay = self.base_tau + z, self.base_delay + z
        self.y = z.clone()  # (N, 3) rad/s, the response at the end of the last step
        self.history = torch.zeros(n_envs, self.depth, 3, dtype=torch.float64, device=device)

    def reset(self, mask: Tensor, u: Tensor | None) -> None:
        """Rest (zero rates, zero past commands) in the masked envs; ``u`` (N, 6) in
        [-spread, spread]: their lags and delays x (1 + u) for the episode."""
        m = mask[:, None]
        if u is not None:
            u = u.to(torch.float64)
            self.tau = torch.where(m, self.base_tau * (1.0 + u[:, :3]), self.tau)
            self.delay = torch.where(m, self.base_delay * (1.0 + u[:, 3:]), self.delay)
        self.y = torch.where(m, 0.0, self.y)
        self.history = torch.where(mask[:, None, None], 0.0, self.history)

    def step(self, command: Tensor) -> Tensor:
        """(N, 3) rad/s commanded now -> the mean body rate over this control step."""
        self.history = torch.cat((self.history[:, 1:], command[:, None].to(torch.float64)), 1)
        steps = self.delay / self.dt
        n = steps.floor().long().clamp_max(self.depth - 2)
        f = (steps - n).clamp(0.0, 1.0)
        newest = self.depth - 1
        early = self.history.gather(1, (newest - n - 1)[:, None]).squeeze(1)  # (N, 3)
        late = self.history.gather(1, (newest - n)[:, None]).squeeze(1)
        area1, y1 = self._hold(self.y, early, f * self.dt)
        area2, self.y = self._hold(y1, late, (1.0 - f) * self.dt)
        return ((area1 + area2) / self.dt).to(command.dtype)

    def _hold(self, y0: Tensor, u: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        """The lag driven by constant ``u`` for ``h`` s from ``y0``: (integral, end value)."""
        tau = self.tau.clamp_min(1e-9)
        decay = torch.exp(-h / tau)
        return u * h + (y0 - u) * tau * (1.0 - decay), u + (y0 - u) * decay


# ---- the one-call evaluation: this task packed into volary.envs.fused_position's kernels ----


def fused_unsupported(env: PositionTask, policy: MlpPolicy) -> str | None:
    """Why ``env`` cannot evaluate ``policy`` in the kernel (None: it can)."""
    from volary.envs.fused_position import END_TERMS

    cfg = env.config
    if env.sim.fused_loop is None:
        return "the env does not step on the numba closed loop (compile='numba' on the CPU)"
    if env.term_names != END_TERMS or env.action_repeat != 1:
        return "end conditions or an action repeat other than PositionTask's"
    if cfg.goal_hold_s > 0:
        return "setpoint sequences (goal_hold_s > 0) draw goals during the episode"
    if env.world.scene is not None or env.sim.imu is not None:
        return "a scene or an IMU"
    obs_dim = int(env.observation_space.shape[-1])  # type: ignore[index]
    if policy.obs_dim != obs_dim or policy.act_dim != env.act_dim:
        return "the policy's sizes do not match the env's"
    if env.sim.controller.setpoint_size != env.act_dim:
        return "the action mode's setpoint is not one value per action"
    return None


def first_episodes(env: PositionTask, policy: MlpPolicy, seed: int) -> dict[str, np.ndarray]:
    """The one-call evaluation (:mod:`volary.envs.fused_position`): reset ``env`` with ``seed``
    and fly every env's first episode under ``policy`` in one kernel call; per env:
    ``episode_return`` (float32, summed in float32 as the env does), ``episode_length``,
    ``success`` and the task's ``episode_metrics`` (NaN where the env reports NaN). The env
    must be reset before it is stepped again. Raises ``ConfigError`` when
    :func:`fused_unsupported` names a reason."""
    import numba

    import volary.envs.fused_position as kernels
    from volary.cpu import step_threads

    why = fused_unsupported(env, policy)
    if why is not None:
        raise ConfigError(f"first_episodes: the kernel cannot evaluate this: {why}")
    env.reset(seed=seed)
    cfg, n, loop = env.config, env.num_envs, env.sim.fused_loop
    b = loop.buffers()
    sizes, flat, norm, clip = policy.packed()
    scale, offset = _action_map(env)
    task = task_constants(env)
    ints = np.array([kernels.LAYOUT_CODES[cfg.observation], env.max_steps, env._settle_steps,
                     env.sim.params.n_rotors], np.int64)  # fmt: skip
    goal = env.goal.numpy().astype(np.float64)
    hover = env._hover_fraction[:, 0].numpy().astype(np.float64)
    out_f = np.zeros((4, n), np.float64)
    out_i = np.zeros((2, n), np.int64)
    threads = torch.get_num_threads()
    kernel = kernels.episodes
    if n >= kernels.PARALLEL_MIN and threads > 1:
        top = int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
        threads = step_threads(min(threads, top))  # less the cores others are busy on
    if n >= kernels.PARALLEL_MIN and threads > 1:
        numba.set_num_threads(threads)
        kernel = kernels.episodes_parallel
    kernel(b.p, b.pc, b.c, b.d, b.x, b.tick, b.flags, b.keys, b.rate, b.imu, b.mode, b.cdt, b.phys,
           b.iphys, sizes, flat, norm, clip, scale, offset, goal, hover, task, ints, out_f,
           out_i)  # fmt: skip
    loop.publish(b)
    env._started = False  # the task's episode counters no longer match the World: reset first
    return {
        "episode_return": out_f[0].astype(np.float32),
        "episode_length": out_i[0],
        "success": out_i[1].astype(bool),
        "final_distance": out_f[1],
        "mean_error": out_f[2],
        "settled_error": out_f[3],
    }


def task_constants(env: PositionTask) -> np.ndarray:
    """The task's constants as the kernel reads them: [max_distance, min_height,
    cos(max_tilt), crash_penalty, precision_weight, precision_scale, success_radius]."""
    cfg = env.config
    return np.array([cfg.max_distance, cfg.min_height, math.cos(cfg.max_tilt), cfg.crash_penalty,
                     cfg.precision_weight, cfg.precision_scale, cfg.success_radius],
                    np.float64)  # fmt: skip


def _action_map(env: PositionTask) -> tuple[np.ndarray, np.ndarray]:
    """setpoint_j = (a_j + offset_j) * scale[n, j] (:meth:`PositionTask._setpoint`)."""
    cfg, n, a = env.config, env.num_envs, env.act_dim
    scale = np.zeros((n, a), np.float64)
    offset = np.zeros(a, np.float64)
    if cfg.control == "ctbr":
        scale[:, 0] = 0.5 * env._max_thrust.numpy()
        scale[:, 1:] = env._rates.numpy()[None, :]
        offset[0] = 1.0
    elif cfg.control == "rotor_thrusts":
        scale[:] = 0.5 * env._rotor_max.numpy()
        offset[:] = 1.0
    else:  # velocity, acceleration
        lim = cfg.max_speed if cfg.control == "velocity" else cfg.max_acc
        scale[:, :3] = lim
        scale[:, 3:] = math.pi
    return scale, offset
