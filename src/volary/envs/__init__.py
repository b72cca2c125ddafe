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

from volary.envs.base import TorchVectorEnv
from volary.envs.position import ACTION_MODES, PositionTask, PositionTaskConfig
from volary.errors import UnknownNameError

# name -> (factory(n_envs, **options), one-line description)
_PRESETS: dict[str, tuple[dict[str, Any], str]] = {
    "hover": ({}, "hold a fixed goal from a random start (pose, velocity, tilt)"),
    "reach": (
        {"goal_range": (2.0, 2.0, 0.5), "start_range": (0.3, 0.3, 0.2)},
        "fly to a new random goal every episode (4 x 4 x 1 m box)",
    ),
}
ENVS: tuple[str, ...] = tuple(_PRESETS)


def describe_envs() -> dict[str, str]:
    """Registered env name -> one-line description."""
    return {k: v[1] for k, v in _PRESETS.items()}


def make_env(name: str, n_envs: int = 64, **options: Any) -> TorchVectorEnv:
    """The registered task ``name`` with ``n_envs`` envs; ``options`` override its config."""
    if name not in _PRESETS:
        raise UnknownNameError("env", str(name), ENVS)
    preset, _ = _PRESETS[name]
    factory: Callable[..., TorchVectorEnv] = PositionTask
    return factory(n_envs, PositionTaskConfig().replace(**{**preset, **options}))


__all__ = [
    "ACTION_MODES",
    "ENVS",
    "PositionTask",
    "PositionTaskConfig",
    "TorchVectorEnv",
    "describe_envs",
    "make_env",
]
