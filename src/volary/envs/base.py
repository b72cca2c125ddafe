"""Batched, torch-native Gymnasium vector env over a :class:`volary.sim.World`: the episode
bookkeeping and the end conditions every task shares.

A :class:`TorchVectorEnv` holds N envs on one device and returns torch tensors (as Isaac Gym and
Aerial Gym do; wrap it for numpy learners). Autoreset is Gymnasium's ``SAME_STEP`` mode: an env
that terminates or truncates is reset inside that ``step``; the returned observation is already
the first one of its next episode, and ``info["final_obs"]`` holds the last one of the ended
episode (rows of envs that did not end are undefined). ``info`` also carries, valid where
``info["done"]``: ``episode_return``, ``episode_length`` and the task's end-of-episode fields.

One step: the task maps the action to a setpoint, the World flies it for ``action_repeat``
control steps (:func:`volary.sim.rollout`), the end conditions (the task's terms,
:mod:`volary.sim.terms`, then :class:`StepLimit` for ``max_steps``) decide which envs end and
why, the task scores the step. Each end condition declares whether it is a time-out
(:func:`volary.sim.terms.is_time_out`, Isaac Lab's ``DoneTerm(time_out=True)``): an env that
only time-outs ended is truncated, one that any other term ended is terminated. A task
subclass builds the World and its terms and implements four hooks: ``_start(mask)`` (its reset
distribution), ``_setpoint(action)`` (its action map), ``_observe()`` and ``_reward(...)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from torch import Tensor

from volary.device import host_sync_is_cheap, resolve
from volary.errors import ConfigError, did_you_mean
from volary.math import random as vrandom
from volary.sim import World, rollout
from volary.sim.terms import is_time_out, term_name

C = TypeVar("C")


def replace_options(config: C, **options: Any) -> C:
    """A copy of the task config dataclass ``config`` with ``options``; unknown ones raise,
    listing the valid ones (``make_env``'s keyword check for every task)."""
    valid = {f.name for f in fields(config)}  # type: ignore[arg-type]
    bad = sorted(set(options) - valid)
    if bad:
        hint = did_you_mean(bad[0], sorted(valid))
        raise ConfigError(f"unknown task options {bad}{hint}; valid: {sorted(valid)}")
    return replace(config, **options)  # type: ignore[type-var]


class StepLimit:
    """The episode-length end condition of a :class:`TorchVectorEnv`: fires on the step that
    completes ``env.max_steps`` steps of the env's episode. A time-out (truncation)."""

    name = "step_limit"
    time_out = True

    def __init__(self, env: TorchVectorEnv) -> None:
        self.env = env

    def __call__(self, world: Any) -> Tensor:
        return self.env.episode_length + 1 >= self.env.max_steps


class TorchVectorEnv(gym.vector.VectorEnv):
    """N envs stepped together on ``device``; subclasses define the task (module docstring).

    ``world``: the World the envs fly (one vehicle per env); ``terms``: the task's end
    conditions, evaluated in order after every step, followed by :class:`StepLimit` (the first
    that fires is the env's :attr:`cause`); ``max_steps``: steps before an episode is
    truncated; ``action_repeat``: control steps per env step (the setpoint is held).
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(
        self,
        num_envs: int,
        obs_dim: int,
        act_dim: int,
        device: str | torch.device,
        *,
        world: World,
        terms: Sequence[Any],
        max_steps: int,
        action_repeat: int = 1,
    ) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ConfigError(f"n_envs: expected an integer >= 1, got {num_envs!r}")
        self.num_envs = num_envs
        self.act_dim = act_dim
        self.device = resolve(device)  # cuda -> cuda:0, as the env's tensors report it
        inf = np.float32(np.inf)
        self.single_observation_space = gym.spaces.Box(-inf, inf, (obs_dim,), np.float32)
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (act_dim,), np.float32)
        self.observation_space = gym.vector.utils.batch_space(
            self.single_observation_space, num_envs
        )
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        if world.b != num_envs:
            raise ConfigError(f"world: expected one vehicle per env ({num_envs}), got {world.b}")
        for name, v in (("max_steps", max_steps), ("action_repeat", action_repeat)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name}: expected an int >= 1, got {v!r}")
        self.world = world
        self.terms = (*terms, StepLimit(self))
        self.term_names = tuple(term_name(t) for t in self.terms)
        self._stateful = [t for t in self.terms if callable(getattr(t, "reset", None))]
        self.max_steps = max_steps
        self.action_repeat = action_repeat
        dev = self.device
        self._fired = torch.zeros(len(self.terms), num_envs, dtype=torch.bool, device=dev)
        self.prev_action = torch.zeros(num_envs, act_dim, device=dev)
        self.prev_prev = torch.zeros(num_envs, act_dim, device=dev)  # the one before it
        self.episode_return = torch.zeros(num_envs, device=dev)
        self.episode_length = torch.zeros(num_envs, dtype=torch.int64, device=dev)
        self._started = False

    @property
    def cause(self) -> Tensor:
        """(N,) int64 index into :attr:`term_names` of the term that ended the env's episode at
        the last step (the first that fired, a time-out too); -1: it did not end."""
        first = self._fired.to(torch.uint8).argmax(0)
        return torch.where(self._fired.any(0), first, -1)

    @property
    def sim(self) -> Any:
        """The World's Simulator (vehicles, controller, physics)."""
        return self.world.sim

    # ---- hooks (tasks) -------------------------------------------------------------------------
    def _start(self, mask: Tensor) -> dict[str, Tensor]:
        """Draw the masked envs' next episode (from the seeded streams, :meth:`_draw`); returns
        their start pose for :meth:`World.reset` (``pos``, ``quat``, ``vel``: (N, .) rows)."""
        raise NotImplementedError

    def _setpoint(self, action: Tensor) -> Tensor:
        """The controller setpoint (N, S) for ``action`` (N, A) in [-1, 1]."""
        raise NotImplementedError

    def _observe(self) -> Tensor:
        """(N, obs_dim) float32 observation of every env."""
        raise NotImplementedError

    def _reward(
        self, action: Tensor, terminated: Tensor, truncated: Tensor
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """(reward (N,) float32, end-of-episode info) after a step (:attr:`cause` is set)."""
        raise NotImplementedError

    # ---- randomness ----------------------------------------------------------------------------
    def _seed(self, seed: int) -> None:
        """Restart the per-env random streams from ``seed`` (env i's stream is keyed by (seed,
        i), its counter is its episode number, so env i's episodes do not depend on N)."""
        ids = torch.arange(self.num_envs, device=self.device)
        self._keys = vrandom.env_keys(seed, ids)
        self._episode = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)

    def _draw(self, mask: Tensor, k: int) -> Tensor:
        """(N, k) uniform(-1, 1) draws for the masked envs' next episode."""
        u = vrandom.uniform(self._keys, self._episode, k) * 2.0 - 1.0
        self._episode = self._episode + mask.to(torch.int64)
        return u

    # ---- the shared step -----------------------------------------------------------------------
    def _reset_envs(self, mask: Tensor) -> None:
        """Start a new episode in the masked envs."""
        self.world.reset(mask, **self._start(mask))
        for term in self._stateful:
            term.reset(mask)
        keep = ~mask[:, None]
        self.prev_action = torch.where(keep, self.prev_action, 0.0)
        self.prev_prev = torch.where(keep, self.prev_prev, 0.0)

    def _fly(self, setpoint: Tensor) -> None:
        """Hold ``setpoint`` for ``action_repeat`` control steps."""
        if self.action_repeat == 1:
            self.world.step(setpoint)
        else:
            rollout(self.world, setpoint, steps=self.action_repeat, begin=False,
                    stop_when_done=False)  # fmt: skip

    def _ends(self) -> tuple[Tensor, Tensor]:
        """(terminated, truncated), (N,) bool each: a term that is not a time-out fired, or only
        time-outs did (tensor ops only, no host sync; :attr:`cause` says which term)."""
        fired = [term(self.world) for term in self.terms]
        self._fired = torch.stack(fired)  # (T, N)
        none = torch.zeros_like(self._fired[0])
        terminated, timed_out = none, none
        for term, f in zip(self.terms, fired, strict=True):
            if is_time_out(term):
                timed_out = timed_out | f
            else:
                terminated = terminated | f
        return terminated, timed_out & ~terminated

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
        self.prev_prev, self.prev_action = self.prev_action, a
        self._fly(self._setpoint(a))
        terminated, truncated = self._ends()
        reward, end = self._reward(a, terminated, truncated)
        self.episode_return = self.episode_return + reward
        self.episode_length = self.episode_length + 1
        done = terminated | truncated
        info: dict[str, Any] = {
            "done": done,
            "episode_return": self.episode_return.clone(),
            "episode_length": self.episode_length.clone(),
            **end,
        }
        if not host_sync_is_cheap(self.device) or bool(done.any()):  # no GPU sync per step
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
