"""Named training recipes: the task, env count, iterations, task options and PPO fields a
published result was trained with, so one name reproduces it
(``volary rl train --recipe NAME``; options given on the command line override the recipe's).

A recipe is data only (this package never imports ``volary.envs``); the CLI builds the env.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from volary.errors import ConfigError


@dataclass(frozen=True)
class Recipe:
    """What ``volary rl train`` runs for a recipe name."""

    task: str  # a volary.envs task name
    envs: int
    iterations: int
    description: str  # one line: what it is for and where its figures are
    env: dict[str, Any] = field(default_factory=dict)  # task config fields (--env)
    ppo: dict[str, Any] = field(default_factory=dict)  # PPOConfig fields (--set)
    learner: str = "volary"  # volary's PPO or rsl_rl (--learner)


RECIPES: dict[str, Recipe] = {
    # Issue 22's "time to a hover policy": benchmarks/rl_hover.py times this whole command.
    # Why these values (benchmarks/results/rl/table.md): no observation normalization
    # (its running mean of the goal error settles on the policy's own hover offset and keeps
    # it there), reward scaling, short rollouts for many updates, the KL-adaptive step size,
    # a 0.98 discount (0.8 s at 60 Hz), the fused numba physics and two threads.
    "hover-fast": Recipe(
        task="hover",
        envs=512,
        iterations=80,
        description="hover in seconds on a 2-core CPU (ctbr actions, default hover task; "
        "rsl_rl's learner, from the rl extra)",
        env={"compile": "numba"},
        learner="rsl_rl",  # first to 95 % in benchmarks/rl_trainers.py; --learner volary works
        ppo={
            "rollout_steps": 16,
            "epochs": 5,
            "minibatches": 4,
            "lr": 1e-3,
            "lr_schedule": "adaptive",
            "desired_kl": 0.02,
            "gamma": 0.98,
            "normalize_obs": False,
            "normalize_rewards": True,
            "threads": 2,
        },
    ),
}


def get_recipe(name: str) -> Recipe:
    """The recipe ``name``; ``ConfigError`` listing the known ones otherwise."""
    try:
        return RECIPES[name]
    except KeyError:
        raise ConfigError(
            f"recipe: unknown {name!r}; expected one of {', '.join(sorted(RECIPES))}"
        ) from None


__all__ = ["RECIPES", "Recipe", "get_recipe"]
