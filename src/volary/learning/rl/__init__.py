"""Reinforcement learning: a compact, batched, torch-native PPO trainer (``ppo.py``).

Trains against vector envs with same-step autoreset (``volary.envs`` or any object with the
interface in ``DESIGN.md`` beside this file).
"""

from volary.learning.rl.ppo import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_KIND,
    ActorCritic,
    EarlyStop,
    PPOConfig,
    PPOTrainer,
    RewardScale,
    evaluate_policy,
    gae,
    load_policy,
    save_policy,
    train_ppo,
)

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_KIND",
    "ActorCritic",
    "EarlyStop",
    "PPOConfig",
    "PPOTrainer",
    "RewardScale",
    "evaluate_policy",
    "gae",
    "load_policy",
    "save_policy",
    "train_ppo",
]
