"""``navigate``: fly through a forest to a goal from a forward depth camera (the Aerial Gym
navigation task family on volary's worlds and ray-cast sensors).

Env i flies scene ``make_scenario(scenario, scene_seed + i % scenes, **scene_options)``
(default one scene for all envs, a compact 20 x 10 m forest at 1 tree / 12 m^2, 3 m ceiling;
with one scene a policy can learn that scene's route instead of seeing: train with ``scenes``
> 1 and evaluate on other seeds) from a start near the scene's start to a goal near its goal
(both jittered per episode; the generator keeps 2 m around them clear). The policy decides
at ``control_hz / action_repeat`` (15 Hz by default); the Lee velocity controller runs at
``control_hz``.

Observation (float32, 22 + h x w): in the yaw-aligned body frame (x forward, y left, z up),
the goal vector (3, m, its length clipped to 10 m) and velocity (3, m/s); the body-to-world
rotation matrix (9); body rates (3, rad/s); the previous action (4); and the depth image
(``depth_obs`` = (h, w), default 12 x 16): the camera's z-depth (``camera`` = (H, W) px, 90 deg
hFOV, 10 m range, invalid pixels = range) min-pooled to (h, w) and divided by the range.
With ``depth_encoder`` (a frozen module, e.g. a deep collision encoder from
:func:`volary.studies.rl.dce.load_encoder`), the last part is instead its ``out_dim`` features of
the whole (H, W) image divided by the range (22 + out_dim values; Aerial Gym's DCE navigation).

Action in [-1, 1]^4: velocity in the yaw-aligned frame a0..2 x ``max_speed`` (a0 forward), and
a yaw step a3 x ``max_yaw_rate`` / decision rate added to the current yaw (the controller's yaw
setpoint).

Reward per decision (our shaping): ``progress_weight`` x (distance to goal before - after) -
0.01 |omega| - 0.02 |a - a_prev|^2; +``goal_bonus`` and termination (success) within
``goal_radius`` of the goal; ``crash_penalty`` and termination on a collision (the vehicle's
sphere against the obstacles or the floor), leaving the flight volume, a NaN state. Truncation
at ``episode_s``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from volary.envs.base import TorchVectorEnv, replace_options
from volary.errors import ConfigError
from volary.math.quaternion import quat_from_euler, quat_to_euler, quat_to_rotmat
from volary.sim import World, terms

N_STATE_OBS = 22  # goal (3) + velocity (3) + rotation (9) + body rates (3) + previous action (4)


@dataclass(frozen=True)
class NavigateTaskConfig:
    """Every knob of ``navigate`` (SI units)."""

    platform: str | tuple[str, ...] = "research_quad_1kg"
    scenario: str = "forest"  # a volary.worlds scenario type
    scene_seed: int = 0
    scenes: int = 1  # distinct scenes: env i flies scene_seed + i % scenes
    scene_options: dict[str, Any] = field(
        default_factory=lambda: {"length": 20.0, "width": 10.0, "density": 1.0 / 12.0}
    )
    camera: tuple[int, int] = (24, 32)  # (H, W) px of the ray-cast depth camera
    depth_obs: tuple[int, int] = (12, 16)  # (h, w) after min-pooling; must divide camera
    hfov: float = math.pi / 2  # rad
    depth_range: float = 10.0  # m
    control_hz: float = 60.0
    physics_hz: float = 240.0
    action_repeat: int = 4  # controller steps per policy decision (15 Hz)
    episode_s: float = 20.0
    max_speed: float = 2.0  # m/s
    max_yaw_rate: float = 1.5  # rad/s
    start_jitter: float = 0.5  # m, in y and z around the scene's start
    goal_jitter: float = 1.0  # m, in y around the scene's goal
    goal_radius: float = 1.0  # m
    progress_weight: float = 1.0
    goal_bonus: float = 10.0
    crash_penalty: float = -10.0
    stochastic: bool = True
    seed: int = 0
    device: str = "cpu"
    compile: bool | str = False
    # None: min-pooled depth; else a module (N, H, W) depth / range -> (N, out_dim), run frozen
    depth_encoder: Any = field(default=None, compare=False)

    def __post_init__(self) -> None:
        for name in ("hfov", "depth_range", "control_hz", "physics_hz", "episode_s",
                     "max_speed", "max_yaw_rate", "goal_radius"):  # fmt: skip
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
                raise ConfigError(f"{name}: expected a number > 0, got {v!r}")
        if isinstance(self.scenes, bool) or not isinstance(self.scenes, int) or self.scenes < 1:
            raise ConfigError(f"scenes: expected an int >= 1, got {self.scenes!r}")
        for name in ("scene_seed", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ConfigError(f"{name}: expected an int >= 0, got {v!r}")
        if (
            isinstance(self.action_repeat, bool)
            or not isinstance(self.action_repeat, int)
            or (self.action_repeat < 1)
        ):
            raise ConfigError(f"action_repeat: expected an int >= 1, got {self.action_repeat!r}")
        (hh, ww), (h, w) = self.camera, self.depth_obs
        if min(hh, ww, h, w) < 1 or hh % h or ww % w:
            raise ConfigError(
                f"depth_obs: expected (h, w) dividing camera {self.camera}, got {self.depth_obs}"
            )
        enc = self.depth_encoder
        if enc is not None:
            k = getattr(enc, "out_dim", None)
            if not callable(enc) or isinstance(k, bool) or not isinstance(k, int) or k < 1:
                raise ConfigError(
                    "depth_encoder: expected None or a module with an int out_dim >= 1 (load "
                    f"one with volary.studies.rl.dce.load_encoder), got {type(enc).__name__}"
                )

    def replace(self, **kw: Any) -> NavigateTaskConfig:
        return replace_options(self, **kw)


def deployment_layout(cfg: NavigateTaskConfig) -> dict[str, Any]:
    """What a deployment must know to rebuild this task's observation and act on its action
    (JSON-able): the depth grid and camera, the range, the speed and yaw-rate scales and the
    decision rate. The learned planner (``volary.studies.flyingtrust.planners.learned``) reads it
    from the exported weights."""
    if cfg.depth_encoder is not None:
        raise ConfigError("depth_encoder: a deployment layout covers min-pooled depth only")
    return {
        "task": "navigate",
        "obs_dim": N_STATE_OBS + cfg.depth_obs[0] * cfg.depth_obs[1],
        "depth_obs": list(cfg.depth_obs),
        "camera": list(cfg.camera),
        "hfov": float(cfg.hfov),
        "depth_range": float(cfg.depth_range),
        "max_speed": float(cfg.max_speed),
        "max_yaw_rate": float(cfg.max_yaw_rate),
        "decision_hz": float(cfg.control_hz) / cfg.action_repeat,
    }


def goal_follower_action(obs: Tensor) -> Tensor:
    """The no-depth baseline's action for navigate observations (N, D): velocity along the
    observed goal vector at 0.75 x max speed, yaw turned towards it (clamped to one full step)."""
    g = obs[:, :3]
    a = torch.zeros(obs.shape[0], 4, device=obs.device, dtype=obs.dtype)
    a[:, :3] = 0.75 * g / g.norm(dim=-1, keepdim=True).clamp_min(1e-6)
    a[:, 3] = torch.atan2(g[:, 1], g[:, 0]).clamp(-1.0, 1.0)
    return a


class NavigateTask(TorchVectorEnv):
    """N multirotors crossing one scene to a goal from depth images; see the module docstring.

    Terminations (:mod:`volary.sim.terms`, in this order): ``collided`` (an obstacle, the floor
    or a ground crash), ``out_of_bounds`` (the scene's box), ``diverged`` (a NaN state), and
    ``reached`` (within ``goal_radius`` of the goal: success, the only one that is not a crash).
    """

    def __init__(self, n_envs: int, config: NavigateTaskConfig | None = None) -> None:
        from volary.sensors.camera import CameraConfig
        from volary.worlds import make_scenario

        cfg = config or NavigateTaskConfig()
        self.config = cfg
        specs = [
            make_scenario(cfg.scenario, cfg.scene_seed + k, **cfg.scene_options)
            for k in range(min(cfg.scenes, n_envs))
        ]
        specs = [specs[i % len(specs)] for i in range(n_envs)]  # env i flies scene i % scenes
        camera = CameraConfig(
            width=cfg.camera[1], height=cfg.camera[0], hfov=cfg.hfov, max_range=cfg.depth_range,
            segmentation=False, normals=False,
        )  # fmt: skip
        world = World(
            cfg.platform if isinstance(cfg.platform, str) else list(cfg.platform), specs,
            n_envs=n_envs, sensors={"depth": camera}, control="velocity",
            control_hz=cfg.control_hz, physics_hz=cfg.physics_hz, stochastic=cfg.stochastic,
            on_divergence="terminate", device=cfg.device, seed=cfg.seed, compile=cfg.compile,
        )  # fmt: skip
        self.scene_specs: list[Any] = world.specs or []  # one per env
        ends = (
            terms.collided,
            terms.out_of_bounds,
            terms.diverged,
            terms.reached(self._goal, cfg.goal_radius),
        )
        h, w = cfg.depth_obs
        n_depth = h * w if cfg.depth_encoder is None else int(cfg.depth_encoder.out_dim)
        max_steps = max(1, int(round(cfg.episode_s * cfg.control_hz / cfg.action_repeat)))
        super().__init__(n_envs, N_STATE_OBS + n_depth, 4, cfg.device, world=world, terms=ends,
                         max_steps=max_steps, action_repeat=cfg.action_repeat)  # fmt: skip
        dev = self.device
        rows = {k: [getattr(sp, k) for sp in self.scene_specs] for k in ("start", "goal")}
        self._start0 = torch.tensor(rows["start"], device=dev, dtype=torch.float32)  # (N, 3)
        self._goal0 = torch.tensor(rows["goal"], device=dev, dtype=torch.float32)  # (N, 3)
        self.goal = self._goal0.clone()
        self._dist = torch.zeros(n_envs, device=dev)
        self._reached = self.term_names.index("reached")
        self._seed(cfg.seed)

    def _goal(self, world: World) -> Tensor:
        return self.goal

    # ---- hooks -------------------------------------------------------------------------------
    def _start(self, mask: Tensor) -> dict[str, Tensor]:
        cfg = self.config
        u = self._draw(mask, 4)
        zero = torch.zeros_like(u[:, 0])
        start = self._start0 + torch.stack(
            (zero, u[:, 0] * cfg.start_jitter, u[:, 1] * 0.5 * cfg.start_jitter), dim=-1
        )
        goal = self._goal0 + torch.stack((zero, u[:, 2] * cfg.goal_jitter, zero), dim=-1)
        to_goal = goal - start
        yaw = torch.atan2(to_goal[:, 1], to_goal[:, 0]) + u[:, 3] * 0.3
        self.goal = torch.where(mask[:, None], goal, self.goal)
        self._dist = torch.where(mask, (self.goal - start).norm(dim=-1), self._dist)
        return {"pos": start, "quat": quat_from_euler(zero, zero, yaw)}

    def _yaw(self) -> Tensor:
        return quat_to_euler(self.world.state.quat)[:, 2]

    def _setpoint(self, action: Tensor) -> Tensor:
        """Velocity (world) and yaw setpoint for ``action``, held for ``action_repeat`` steps."""
        cfg = self.config
        yaw = self._yaw()
        c, s = torch.cos(yaw), torch.sin(yaw)
        v = action[:, :3] * cfg.max_speed
        v_world = torch.stack((c * v[:, 0] - s * v[:, 1], s * v[:, 0] + c * v[:, 1], v[:, 2]), -1)
        decision_dt = cfg.action_repeat / cfg.control_hz
        yaw_sp = yaw + action[:, 3] * cfg.max_yaw_rate * decision_dt
        return torch.cat((v_world, yaw_sp[:, None]), dim=-1)

    def depth_image(self) -> Tensor:
        """(N, H, W) float32 z-depth of the World's camera now divided by the range, in [0, 1]
        (invalid pixels: 1)."""
        cfg = self.config
        frame = self.world.read("depth")
        d = torch.where(frame.valid, frame.depth, cfg.depth_range).clamp(0.0, cfg.depth_range)
        return (d / cfg.depth_range).to(torch.float32)

    def _depth(self) -> Tensor:
        """(N, h * w) min-pooled depth, or (N, out_dim) features of ``depth_encoder``."""
        cfg, d = self.config, self.depth_image()
        if cfg.depth_encoder is not None:
            with torch.no_grad():
                return cfg.depth_encoder(d).to(torch.float32).reshape(d.shape[0], -1)
        pooled = -F.adaptive_max_pool2d(-d[:, None], cfg.depth_obs)[:, 0]
        return pooled.flatten(1)

    def _observe(self) -> Tensor:
        s = self.world.state
        yaw = self._yaw()
        c, sn = torch.cos(yaw), torch.sin(yaw)

        def to_yaw_frame(v: Tensor) -> Tensor:
            return torch.stack(
                (c * v[:, 0] + sn * v[:, 1], -sn * v[:, 0] + c * v[:, 1], v[:, 2]), -1
            )

        g = to_yaw_frame(self.goal - s.pos)
        g = g * (10.0 / g.norm(dim=-1, keepdim=True).clamp_min(10.0))  # length clipped to 10 m
        rot = quat_to_rotmat(s.quat).reshape(-1, 9)
        obs = torch.cat(
            (g, to_yaw_frame(s.vel), rot, s.omega, self.prev_action, self._depth()),
            dim=-1,
        )
        return torch.nan_to_num(obs.to(torch.float32), nan=0.0, posinf=1e3, neginf=-1e3)

    def _reward(
        self, action: Tensor, terminated: Tensor, truncated: Tensor
    ) -> tuple[Tensor, dict[str, Tensor]]:
        cfg, s = self.config, self.world.state
        dist = (self.goal - s.pos).norm(dim=-1)
        progress = torch.nan_to_num(self._dist - dist, nan=0.0)
        self._dist = dist
        reached = self.cause == self._reached
        crashed = terminated & ~reached
        reward = (
            cfg.progress_weight * progress
            - 0.01 * s.omega.norm(dim=-1)
            - 0.02 * ((action - self.prev_prev) ** 2).sum(-1)
        )
        reward = reward + torch.where(reached, cfg.goal_bonus, 0.0)
        reward = reward + torch.where(crashed, cfg.crash_penalty, 0.0)
        reward = torch.nan_to_num(reward, nan=cfg.crash_penalty).to(torch.float32)
        end = {"success": reached, "collision": crashed, "final_distance": torch.nan_to_num(dist)}
        return reward, end
