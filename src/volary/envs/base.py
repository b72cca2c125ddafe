"""Batched, torch-native Gymnasium vector env: the episode bookkeeping every task shares.

A :class:`TorchVectorEnv` holds N envs on one device and returns torch tensors (as Isaac Gym and
Aerial Gym do; wrap it for numpy learners). Autoreset is Gymnasium's ``SAME_STEP`` mode: an env
that terminates or truncates is reset inside that ``step``; the returned observation is already
the first one of its next episode, and ``info["final_obs"]`` holds the last one of the ended
episode (rows of envs that did not end are undefined). ``info`` also carries, valid where
``info["done"]``: ``episode_return``, ``episode_length`` and the task's end-of-episode fields.

A task subclass implements four pure-ish hooks over masks of envs:
``_reset_envs(mask)``, ``_apply(action)``, ``_observe()``, ``_evaluate(action)``.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from torch import Tensor

from volary.errors import ConfigError

C = TypeVar("C")


def replace_options(config: C, **options: Any) -> C:
    """A copy of the task config dataclass ``config`` with ``options``; unknown ones raise,
    listing the valid ones (``make_env``'s keyword check for every task)."""
    valid = {f.name for f in fields(config)}  # type: ignore[arg-type]
    bad = sorted(set(options) - valid)
    if bad:
        raise ConfigError(f"unknown task options {bad}; valid: {sorted(valid)}")
    return replace(config, **options)  # type: ignore[type-var]


class TorchVectorEnv(gym.vector.VectorEnv):
    """N envs stepped together on ``device``; subclasses define the task."""

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, num_envs: int, obs_dim: int, act_dim: int, device: str | torch.device):
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ConfigError(f"n_envs: expected an integer >= 1, got {num_envs!r}")
        self.num_envs = num_envs
        self.act_dim = act_dim
        self.device = torch.device(device)
        inf = np.float32(np.inf)
        self.single_observation_space = gym.spaces.Box(-inf, inf, (obs_dim,), np.float32)
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (act_dim,), np.float32)
        self.observation_space = gym.vector.utils.batch_space(
            self.single_observation_space, num_envs
        )
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self.episode_return = torch.zeros(num_envs, device=self.device)
        self.episode_length = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self._started = False

    # ---- hooks (tasks) -------------------------------------------------------------------------
    def _reset_envs(self, mask: Tensor) -> None:
        """Start a new episode in the masked envs (draws come from the task's seeded streams)."""
        raise NotImplementedError

    def _apply(self, action: Tensor) -> None:
        """Advance every env by one step under ``action`` (N, A) in [-1, 1]."""
        raise NotImplementedError

    def _observe(self) -> Tensor:
        """(N, obs_dim) float32 observation of every env."""
        raise NotImplementedError

    def _evaluate(self, action: Tensor) -> tuple[Tensor, Tensor, Tensor, dict[str, Tensor]]:
        """(reward (N,), terminated (N,), truncated (N,), end-of-episode info) after a step."""
        raise NotImplementedError

    def _seed(self, seed: int) -> None:
        """Restart the task's random streams from ``seed``."""
        raise NotImplementedError

    # ---- Gymnasium API ---------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Tensor, dict[str, Any]]:
        """Reset every env (``options={"mask": bool (N,)}`` resets only those); ``seed``
        restarts the random streams, so the same seed gives the same episodes."""
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
                raise ConfigError(f"seed: expected an int >= 0, got {seed!r}")
            self._seed(seed)
        mask = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        if options and "mask" in options:
            mask = _mask(options["mask"], self.num_envs, self.device)
        self._reset_envs(mask)
        self.episode_return = torch.where(mask, 0.0, self.episode_return)
        self.episode_length = torch.where(mask, 0, self.episode_length)
        self._started = True
        return self._observe(), {}

    def step(self, actions: Any) -> tuple[Tensor, Tensor, Tensor, Tensor, dict[str, Any]]:
        """One step of every env; ended envs are reset in the same call (``SAME_STEP``)."""
        if not self._started:
            raise ConfigError("step: call reset() first")
        a = self._action(actions)
        self._apply(a)
        reward, terminated, truncated, end = self._evaluate(a)
        self.episode_return = self.episode_return + reward
        self.episode_length = self.episode_length + 1
        done = terminated | truncated
        info: dict[str, Any] = {
            "done": done,
            "episode_return": self.episode_return.clone(),
            "episode_length": self.episode_length.clone(),
            **end,
        }
        if bool(done.any()):
            info["final_obs"] = self._observe()
            self._reset_envs(done)
            self.episode_return = torch.where(done, 0.0, self.episode_return)
            self.episode_length = torch.where(done, 0, self.episode_length)
        obs = self._observe()
        if "final_obs" not in info:
            info["final_obs"] = obs
        return obs, reward, terminated, truncated, info

    def _action(self, actions: Any) -> Tensor:
        a = torch.as_tensor(actions, dtype=torch.float32, device=self.device)
        want = (self.num_envs, self.act_dim)
        if tuple(a.shape) != want:
            raise ConfigError(f"actions: expected shape {want} in [-1, 1], got {tuple(a.shape)}")
        # NaN/inf actions are treated as 0 (the env is not corrupted); out-of-range ones clipped
        return torch.nan_to_num(a, nan=0.0, posinf=1.0, neginf=-1.0).clamp(-1.0, 1.0)

    def close(self, **kwargs: Any) -> None:  # nothing to release
        return None


def _mask(mask: Any, n: int, device: torch.device) -> Tensor:
    m = torch.as_tensor(mask, device=device)
    if m.dtype != torch.bool or tuple(m.shape) != (n,):
        raise ConfigError(f"options['mask']: expected a bool tensor of shape ({n},)")
    return m
