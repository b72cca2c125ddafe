"""Gymnasium vector envs and tasks on the batched simulator (layer 4, see DESIGN.md here).

    >>> from volary.envs import make_env
    >>> env = make_env("hover", n_envs=256, seed=0)      # torch tensors, SAME_STEP autoreset
    >>> obs, info = env.reset(seed=0)
    >>> obs, reward, terminated, truncated, info = env.step(torch.zeros(256, 4))

:data:`ENVS` names the registered tasks; ``make_env(name, **options)`` takes the task config's
fields as keyword options (unknown ones raise, listing the valid ones).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from volary.envs.adapters import NumpyVectorEnv, to_numpy, to_sb3
from volary.envs.base import TorchVectorEnv
from volary.envs.navigate import NavigateTask, NavigateTaskConfig
from volary.envs.position import ACTION_MODES, PositionTask, PositionTaskConfig
from volary.errors import UnknownNameError

# name -> (task class, its config class, preset options, one-line description)
_REGISTRY: dict[str, tuple[Callable[..., TorchVectorEnv], Any, dict[str, Any], str]] = {
    "hover": (PositionTask, PositionTaskConfig, {},
              "hold a fixed goal from a random start (pose, velocity, tilt)"),
    "reach": (PositionTask, PositionTaskConfig,
              {"goal_range": (2.0, 2.0, 0.5), "start_range": (0.3, 0.3, 0.2)},
              "fly to a new random goal every episode (4 x 4 x 1 m box)"),
    "navigate": (NavigateTask, NavigateTaskConfig, {},
                 "cross a forest to a goal from a forward depth camera (velocity commands)"),
}  # fmt: skip
ENVS: tuple[str, ...] = tuple(_REGISTRY)


def describe_envs() -> dict[str, str]:
    """Registered env name -> one-line description."""
    return {k: v[3] for k, v in _REGISTRY.items()}


def make_env(name: str, n_envs: int = 64, **options: Any) -> TorchVectorEnv:
    """The registered task ``name`` with ``n_envs`` envs; ``options`` override its config."""
    if name not in _REGISTRY:
        raise UnknownNameError("env", str(name), ENVS)
    task, config, preset, _ = _REGISTRY[name]
    return task(n_envs, config().replace(**{**preset, **options}))


__all__ = [
    "ACTION_MODES",
    "ENVS",
    "NavigateTask",
    "NumpyVectorEnv",
    "NavigateTaskConfig",
    "PositionTask",
    "PositionTaskConfig",
    "TorchVectorEnv",
    "describe_envs",
    "make_env",
    "to_numpy",
    "to_sb3",
]
