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
from dataclasses import dataclass, field
from typing import Any

from volary.envs.adapters import NumpyVectorEnv, to_numpy, to_rsl_rl, to_sb3, to_skrl
from volary.envs.base import TorchVectorEnv
from volary.envs.navigate import NavigateTask, NavigateTaskConfig
from volary.envs.position import ACTION_MODES, PositionTask, PositionTaskConfig
from volary.registry import Registry


@dataclass(frozen=True)
class EnvSpec:
    """A registered task: its class, its config dataclass and the preset applied to that."""

    task: Callable[..., TorchVectorEnv]
    config: Any  # the task's config dataclass
    description: str  # one line
    preset: dict[str, Any] = field(default_factory=dict)  # config fields over its defaults


_REGISTRY: Registry[EnvSpec] = Registry(
    "env",
    {
        "hover": EnvSpec(PositionTask, PositionTaskConfig,
                         "hold a fixed goal from a random start (pose, velocity, tilt)"),
        "reach": EnvSpec(PositionTask, PositionTaskConfig,
                         "fly to a new random goal every episode (4 x 4 x 1 m box)",
                         {"goal_range": (2.0, 2.0, 0.5), "start_range": (0.3, 0.3, 0.2)}),
        "navigate": EnvSpec(NavigateTask, NavigateTaskConfig,
                            "cross a forest to a goal from a forward depth camera "
                            "(velocity commands)"),
    },
)  # fmt: skip
ENVS: tuple[str, ...] = _REGISTRY.names()


def describe_envs() -> dict[str, str]:
    """Registered env name -> one-line description."""
    return {name: spec.description for name, spec in _REGISTRY.items()}


def env_config(name: str, **options: Any) -> Any:
    """The config dataclass the task ``name`` runs with: its preset, then ``options``."""
    spec = _REGISTRY.get(name)
    return spec.config().replace(**{**spec.preset, **options})


def make_env(name: str, n_envs: int = 64, **options: Any) -> TorchVectorEnv:
    """The registered task ``name`` with ``n_envs`` envs; ``options`` override its config."""
    return _REGISTRY.get(name).task(n_envs, env_config(name, **options))


__all__ = [
    "ACTION_MODES",
    "ENVS",
    "EnvSpec",
    "NavigateTask",
    "NumpyVectorEnv",
    "NavigateTaskConfig",
    "PositionTask",
    "PositionTaskConfig",
    "TorchVectorEnv",
    "describe_envs",
    "env_config",
    "make_env",
    "to_numpy",
    "to_rsl_rl",
    "to_sb3",
    "to_skrl",
]
