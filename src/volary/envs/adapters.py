"""volary's torch vector envs for learners: a numpy Gymnasium ``VectorEnv`` and a
Stable-Baselines3 ``VecEnv`` (an I/O boundary: tensors become numpy arrays here, nowhere else),
and torch-native adapters for rsl_rl (:func:`to_rsl_rl`) and skrl (:func:`to_skrl`) that keep
tensors on the env's device.

    >>> from volary.envs import make_env
    >>> from volary.envs.adapters import to_numpy, to_rsl_rl, to_sb3, to_skrl
    >>> np_env = to_numpy(make_env("hover", n_envs=16))     # Gymnasium VectorEnv, numpy I/O
    >>> sb3_env = to_sb3(make_env("hover", n_envs=16))      # for stable_baselines3.PPO(...)
    >>> rsl_env = to_rsl_rl(make_env("hover", n_envs=16))   # for rsl_rl's OnPolicyRunner
    >>> skrl_env = to_skrl(make_env("hover", n_envs=16))    # for skrl's agents and trainers

All keep the wrapped env's ``SAME_STEP`` autoreset. SB3 receives its conventions: ``dones`` =
terminated or truncated, ``info["terminal_observation"]`` and ``info["TimeLimit.truncated"]``
for ended envs, and ``info["episode"] = {"r", "l"}`` (so no VecMonitor is needed), plus
``info["is_success"]`` where the task reports success.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from volary.envs.base import TorchVectorEnv
from volary.errors import ConfigError, MissingDependencyError


def _np(x: Any) -> Any:
    return x.detach().cpu().numpy() if isinstance(x, Tensor) else x


class NumpyVectorEnv(gym.vector.VectorEnv):
    """A :class:`TorchVectorEnv` with numpy in and out (float32 obs, bool flags)."""

    def __init__(self, env: TorchVectorEnv) -> None:
        if not isinstance(env, TorchVectorEnv):
            raise ConfigError(f"env: expected a volary TorchVectorEnv, got {type(env).__name__}")
        self.env = env
        self.num_envs = env.num_envs
        self.metadata = env.metadata
        self.single_observation_space = env.single_observation_space
        self.single_action_space = env.single_action_space
        self.observation_space = env.observation_space
        self.action_space = env.action_space

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if options and "mask" in options:
            options = {**options, "mask": torch.as_tensor(options["mask"], device=self.env.device)}
        obs, info = self.env.reset(seed=seed, options=options)
        return _np(obs), {k: _np(v) for k, v in info.items()}

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        a = torch.as_tensor(np.asarray(actions, dtype=np.float32), device=self.env.device)
        obs, rew, term, trunc, info = self.env.step(a)
        return _np(obs), _np(rew), _np(term), _np(trunc), {k: _np(v) for k, v in info.items()}

    def close(self, **kwargs: Any) -> None:
        self.env.close()


def to_numpy(env: TorchVectorEnv) -> NumpyVectorEnv:
    """``env`` behind numpy I/O (a Gymnasium ``VectorEnv``)."""
    return NumpyVectorEnv(env)


def to_sb3(env: TorchVectorEnv) -> Any:
    """``env`` as a Stable-Baselines3 ``VecEnv`` (``pip install volary[rl]``)."""
    try:
        from stable_baselines3.common.vec_env import VecEnv
    except ImportError as err:
        raise MissingDependencyError("Stable-Baselines3", "rl") from err
    inner = NumpyVectorEnv(env)

    class Sb3VecEnv(VecEnv):
        """SB3's VecEnv over a volary env (see the module docstring for the info keys)."""

        def __init__(self) -> None:
            super().__init__(inner.num_envs, inner.single_observation_space,
                             inner.single_action_space)  # fmt: skip
            self.volary_env = env
            self._actions: np.ndarray | None = None

        def reset(self) -> np.ndarray:
            """Resets every env; a seed set with ``seed(s)`` (SB3: env i gets s + i; volary
            seeds all envs from env 0's, since each env's stream is keyed by its index)."""
            seed = self._seeds[0]
            obs, _ = inner.reset(seed=None if seed is None else int(seed))
            self._reset_seeds()
            return obs

        def step_async(self, actions: np.ndarray) -> None:
            self._actions = actions

        def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]:
            if self._actions is None:
                raise ConfigError("step_wait: call step_async(actions) first")
            obs, rew, term, trunc, info = inner.step(self._actions)
            done = term | trunc
            infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
            for i in np.flatnonzero(done):
                infos[i] = {
                    "terminal_observation": info["final_obs"][i],
                    "TimeLimit.truncated": bool(trunc[i] and not term[i]),
                    "episode": {"r": float(info["episode_return"][i]),
                                "l": int(info["episode_length"][i])},
                }  # fmt: skip
                if "success" in info:
                    infos[i]["is_success"] = bool(info["success"][i])
            return obs, rew.astype(np.float32), done, infos

        def close(self) -> None:
            inner.close()

        def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
            return [getattr(env, attr_name)] * len(self._indices(indices))

        def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
            raise ConfigError("set_attr: volary envs are batched; set the attribute on the env")

        def env_method(self, method_name: str, *args: Any, indices: Any = None, **kw: Any) -> list:
            raise ConfigError("env_method: volary envs are batched; call the method on the env")

        def env_is_wrapped(self, wrapper_class: Any, indices: Any = None) -> list[bool]:
            return [False] * len(self._indices(indices))

        def _indices(self, indices: Any) -> list[int]:
            if indices is None:
                return list(range(self.num_envs))
            return [indices] if isinstance(indices, int) else list(indices)

    return Sb3VecEnv()


def _check_env(env: Any) -> TorchVectorEnv:
    if not isinstance(env, TorchVectorEnv):
        raise ConfigError(f"env: expected a volary TorchVectorEnv, got {type(env).__name__}")
    return env


def to_rsl_rl(env: TorchVectorEnv) -> Any:
    """``env`` as an rsl_rl ``VecEnv`` for ``rsl_rl.runners.OnPolicyRunner``
    (``pip install volary[rl]``; rsl-rl-lib 5.x).

    Tensors stay on ``env.device``. Observations are a ``TensorDict`` with one group,
    ``"policy"`` (N, obs_dim) (rsl_rl's ``obs_groups`` default maps actor and critic to it).
    ``step(actions)`` returns ``(obs, rewards (N,), dones (N,) int64, extras)`` with
    ``dones`` = terminated | truncated and ``extras["time_outs"]`` = truncated (bool), so PPO
    bootstraps truncated episodes; ``extras["info"]`` is volary's step info (``final_obs``...).
    Autoreset stays volary's ``SAME_STEP``: the obs returned for an ended env is the first of its
    next episode. The env is reset (unseeded: ``make_env(seed=...)`` fixes the draws) on the first
    ``get_observations()``, or call ``reset(seed=s)`` before training.
    """
    try:
        from rsl_rl.env import VecEnv
        from tensordict import TensorDict
    except ImportError as err:
        raise MissingDependencyError("rsl_rl (rsl-rl-lib)", "rl") from err
    inner = _check_env(env)

    class RslRlVecEnv(VecEnv):
        """rsl_rl's VecEnv over a volary env (see :func:`to_rsl_rl`)."""

        def __init__(self) -> None:
            self.volary_env = inner
            self.num_envs = inner.num_envs
            self.num_actions = inner.act_dim
            self.max_episode_length = inner.max_steps
            self.device = inner.device
            self.cfg = getattr(inner, "config", {})
            self._obs: Tensor | None = None

        @property
        def episode_length_buf(self) -> Tensor:
            """(N,) int64 steps into each env's episode (volary's ``episode_length``)."""
            return inner.episode_length

        @episode_length_buf.setter
        def episode_length_buf(self, value: Tensor) -> None:
            inner.episode_length = value.to(dtype=torch.int64, device=inner.device)

        def _wrap(self, obs: Tensor) -> Any:
            self._obs = obs
            return TensorDict({"policy": obs}, batch_size=[self.num_envs], device=self.device)

        def reset(self, seed: int | None = None) -> Any:
            """Reset every env (``seed``: restart volary's random streams); the observations."""
            obs, _ = inner.reset(seed=seed)
            return self._wrap(obs)

        def get_observations(self) -> Any:
            if self._obs is None:
                return self.reset()
            return self._wrap(self._obs)

        def step(self, actions: Tensor) -> tuple[Any, Tensor, Tensor, dict[str, Any]]:
            obs, rew, term, trunc, info = inner.step(actions)
            extras = {"time_outs": trunc, "info": info}
            return self._wrap(obs), rew, (term | trunc).to(torch.int64), extras

        def close(self) -> None:
            inner.close()

    return RslRlVecEnv()


def to_skrl(env: TorchVectorEnv) -> Any:
    """``env`` as a skrl (2.x, torch) env ``Wrapper`` for skrl's agents and trainers
    (``pip install volary[rl]``).

    Tensors stay on ``env.device``. ``observation_space`` / ``action_space`` are the single-env
    Boxes (as skrl expects); ``step(actions)`` returns ``(obs (N, obs_dim), reward (N, 1),
    terminated (N, 1), truncated (N, 1), info)`` with terminated and truncated kept apart (set
    skrl PPO's ``time_limit_bootstrap=True`` to bootstrap truncations) and ``info`` volary's.
    Autoreset stays volary's ``SAME_STEP``: the obs returned for an ended env is the first of its
    next episode (``info["final_obs"]`` holds the last). ``reset()`` resets the env once
    (unseeded: ``make_env(seed=...)`` fixes the draws) and afterwards returns the current
    observations, as skrl's Isaac Lab wrapper does.
    """
    try:
        from skrl.envs.wrappers.torch import Wrapper
    except ImportError as err:
        raise MissingDependencyError("skrl", "rl") from err
    inner = _check_env(env)

    class SkrlEnv(Wrapper):
        """skrl's Wrapper over a volary env (see :func:`to_skrl`)."""

        def __init__(self) -> None:
            super().__init__(inner)
            self.volary_env = inner
            self._obs: Tensor | None = None
            self._info: dict[str, Any] = {}

        @property
        def observation_space(self) -> gym.Space:
            return inner.single_observation_space

        @property
        def action_space(self) -> gym.Space:
            return inner.single_action_space

        def reset(self) -> tuple[Tensor, dict[str, Any]]:
            if self._obs is None:
                self._obs, self._info = inner.reset()
            return self._obs, self._info

        def step(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Any]:
            obs, rew, term, trunc, self._info = inner.step(actions)
            self._obs = obs
            return obs, rew.view(-1, 1), term.view(-1, 1), trunc.view(-1, 1), self._info

        def state(self) -> None:
            return None

        def render(self, *args: Any, **kwargs: Any) -> None:
            return None

        def close(self) -> None:
            inner.close()

    return SkrlEnv()
