"""A PPOConfig trained by rsl_rl's learner (rsl-rl-lib 5.x, ``OnPolicyRunner``), returned as
volary's :class:`~volary.studies.rl.ppo.ActorCritic` so checkpoints, ``volary rl eval`` and
``volary rl export`` are the same whatever the learner (``volary rl train --learner rsl_rl``).

The env is an rsl_rl ``VecEnv`` (``volary.envs.adapters.to_rsl_rl``; this package does not
import ``volary.envs``). The config maps onto rsl_rl's PPO field by field
(:func:`rsl_rl_config`); reward scaling is volary's :class:`RewardScale` on the env's rewards
(rsl_rl has none). Observation normalization (``cfg.normalize_obs``) is rsl_rl's: its models
normalize their input and update the statistics from each rollout after the PPO update; the
normalizer module they hold is volary's :class:`RunningNorm` (moments, ``eps``,
``cfg.obs_clip``), so the trained policy carries exactly the normalization it was trained with.
rsl_rl draws from torch's global generator: it is seeded with ``cfg.seed`` inside
``torch.random.fork_rng``, so a run depends on ``cfg.seed`` alone and leaves the caller's
generators as they were; the one departure from volary's explicit generators.
"""

from __future__ import annotations

import contextlib
import io
import math
import time
from typing import Any

import torch

from volary.errors import ConfigError
from volary.studies.rl.ppo import (
    ActorCritic,
    EarlyStop,
    PPOConfig,
    Progress,
    RewardScale,
    RunningNorm,
    _Episodes,
    _Selection,
    learning_rate,
)


def rsl_rl_config(cfg: PPOConfig) -> dict[str, Any]:
    """rsl_rl's ``OnPolicyRunner`` config for ``cfg`` (classes resolved; a linear schedule runs
    as rsl_rl's fixed one, its step size set by :func:`train_rsl_rl` before every iteration;
    :func:`make_runner` builds the runner); ``ConfigError`` for what rsl_rl cannot do the same
    way."""
    from rsl_rl.algorithms import PPO
    from rsl_rl.models import MLPModel
    from rsl_rl.modules.distribution import GaussianDistribution

    if not cfg.normalize_advantages:
        raise ConfigError("learner rsl_rl: rsl_rl always standardizes advantages; set "
                          "normalize_advantages=true")  # fmt: skip
    net = {"class_name": MLPModel, "hidden_dims": list(cfg.hidden), "activation": "tanh",
           "obs_normalization": cfg.normalize_obs}  # fmt: skip
    gaussian = {"class_name": GaussianDistribution, "init_std": math.exp(cfg.init_log_std),
                "std_type": "log"}  # fmt: skip
    return {
        "num_steps_per_env": cfg.rollout_steps,
        "save_interval": 1_000_000_000,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "algorithm": {
            "class_name": PPO, "learning_rate": cfg.lr,
            "schedule": "adaptive" if cfg.lr_schedule == "adaptive" else "fixed",
            "desired_kl": cfg.desired_kl, "num_learning_epochs": cfg.epochs,
            "num_mini_batches": cfg.minibatches, "gamma": cfg.gamma, "lam": cfg.gae_lambda,
            "clip_param": cfg.clip, "value_loss_coef": cfg.value_coef,
            "entropy_coef": cfg.entropy_coef, "max_grad_norm": cfg.max_grad_norm,
            "use_clipped_value_loss": False, "normalize_advantage_per_mini_batch": True,
        },
        "actor": {**net, "distribution_cfg": gaussian},
        "critic": net,
    }  # fmt: skip


class _Tally:
    """The venv's ``step`` wrapped: episode returns/lengths of the env's own rewards for the
    history rows (PPO's ``_Episodes``), and (``cfg.normalize_rewards``) the scaled rewards
    rsl_rl trains on."""

    def __init__(self, venv: Any, cfg: PPOConfig) -> None:
        n, dev = int(venv.num_envs), torch.device(venv.device)
        self.scale = RewardScale(n, cfg.gamma, dev) if cfg.normalize_rewards else None
        self.episodes = _Episodes(n, dev)
        self.step = venv.step
        venv.step = self

    def __call__(self, actions: torch.Tensor) -> Any:
        obs, reward, dones, extras = self.step(actions)
        done = dones.bool()
        self.episodes.add(reward, done, {})  # rsl_rl's extras carry no episode sums
        if self.scale is not None:
            reward = self.scale(reward, done)
        return obs, reward, dones, extras

    def pop(self) -> dict[str, Any]:
        count, ret, length = self.episodes.pop()
        return {"episodes": count, "mean_return": ret, "mean_length": length}


def make_runner(venv: Any, cfg: PPOConfig) -> Any:
    """rsl_rl's ``OnPolicyRunner`` for ``cfg`` on the rsl_rl ``VecEnv`` ``venv`` (quiet). With
    ``cfg.normalize_obs`` its actor and critic each normalize with a volary
    :class:`RunningNorm` in place of rsl_rl's own module (same calls: ``update`` from rsl_rl's
    PPO update, then ``forward``), so :func:`to_actor_critic` copies the statistics exactly."""
    from rsl_rl.runners import OnPolicyRunner

    with contextlib.redirect_stdout(io.StringIO()):  # rsl_rl prints its models
        runner = OnPolicyRunner(venv, rsl_rl_config(cfg), log_dir=None, device=str(venv.device))
    if cfg.normalize_obs:
        for model in (runner.alg.actor, runner.alg.critic):
            dim = int(model.obs_dim)
            model.obs_normalizer = RunningNorm(dim, clip=cfg.obs_clip).to(venv.device)
    return runner


def to_actor_critic(runner: Any, obs_dim: int, act_dim: int, cfg: PPOConfig) -> ActorCritic:
    """volary's ActorCritic holding the runner's trained actor, critic, log std and (with
    ``cfg.normalize_obs``) the actor's observation statistics (the MLPs have the same layers:
    Linear, Tanh, ..., Linear; the critic's statistics are the same, from the same batches)."""
    policy = ActorCritic(obs_dim, act_dim, cfg)
    actor, critic = runner.alg.actor, runner.alg.critic
    policy.actor.load_state_dict(actor.mlp.state_dict())
    policy.critic.load_state_dict(critic.mlp.state_dict())
    if cfg.normalize_obs:
        if not isinstance(actor.obs_normalizer, RunningNorm):
            raise ConfigError("to_actor_critic: the runner's normalizer is rsl_rl's own; build "
                              "the runner with volary.studies.rl.rsl.make_runner")  # fmt: skip
        policy.obs_norm.load_state_dict(actor.obs_normalizer.state_dict())
    with torch.no_grad():
        policy.log_std.copy_(actor.distribution.log_std_param.detach().cpu())
    return policy.eval()


def _set_lr(alg: Any, lr: float) -> None:
    """rsl_rl's PPO steps with ``lr`` from now on (its attribute and its optimizer's groups)."""
    alg.learning_rate = lr
    for group in alg.optimizer.param_groups:
        group["lr"] = lr


def train_rsl_rl(
    venv: Any,
    cfg: PPOConfig,
    iterations: int,
    progress: Progress | None = None,
    stop: EarlyStop | None = None,
) -> tuple[ActorCritic, dict[str, Any]]:
    """Train with rsl_rl's ``OnPolicyRunner`` for ``iterations`` (at most, with ``stop``:
    :class:`~volary.studies.rl.ppo.EarlyStop`); (policy, report) as
    :func:`~volary.studies.rl.ppo.train_ppo` returns them (history: episodes, mean return and
    length per iteration; rsl_rl keeps its losses to itself)."""
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise ConfigError(f"train_rsl_rl: iterations expected an int >= 1, got {iterations!r}")
    rsl_rl_config(cfg)  # refuse what rsl_rl cannot do before touching threads or generators
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    t_run = time.perf_counter()
    selection = _Selection(stop) if stop is not None else None
    obs_dim, act_dim = 0, int(venv.num_actions)
    dev = torch.device(venv.device)
    with contextlib.ExitStack() as restore:
        restore.callback(torch.set_num_threads, threads)
        # rsl_rl samples from the global generator: seeded here, the caller's left as it was
        restore.enter_context(torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []))
        torch.manual_seed(cfg.seed)
        tally = _Tally(venv, cfg)
        runner = make_runner(venv, cfg)
        quiet = io.StringIO()  # rsl_rl prints a block per iteration
        n = int(venv.num_envs)
        obs_dim = int(venv.get_observations()["policy"].shape[-1])
        done = 0
        history: dict[str, list[Any]] = {}
        timing: dict[str, list[float]] = {"samples_per_s": [], "wall_s": []}
        for it in range(iterations):
            t0 = time.perf_counter()
            if cfg.lr_schedule == "linear":
                _set_lr(runner.alg, learning_rate(cfg, it, iterations))
            with contextlib.redirect_stdout(quiet):
                runner.learn(num_learning_iterations=1)
            quiet.seek(0)
            quiet.truncate()
            dt = time.perf_counter() - t0
            row = tally.pop()
            for k, v in row.items():
                history.setdefault(k, []).append(v)
            timing["samples_per_s"].append(n * cfg.rollout_steps / dt)
            timing["wall_s"].append(dt)
            done = it + 1
            if progress is not None:
                progress(it, {**row, "samples_per_s": timing["samples_per_s"][-1], "wall_s": dt})
            if selection is not None and stop is not None and stop.due(done, iterations):
                if selection.check(done, to_actor_critic(runner, obs_dim, act_dim, cfg)):
                    break
        policy = to_actor_critic(runner, obs_dim, act_dim, cfg)
    report: dict[str, Any] = {
        "learner": "rsl_rl", "config": cfg.to_dict(), "num_envs": n,
        "device": str(venv.device), "iterations": done,
        "samples": done * n * cfg.rollout_steps, "history": history,
        "timing": {**timing, "total_wall_s": sum(timing["wall_s"])},
    }  # fmt: skip
    if selection is not None:
        policy = selection.chosen(policy)
        report["validation"] = selection.report()
        report["timing"]["run_wall_s"] = time.perf_counter() - t_run
    return policy, report


__all__ = ["make_runner", "rsl_rl_config", "to_actor_critic", "train_rsl_rl"]
