"""PPO trainers side by side on ``hover``: volary's own PPO, rsl_rl, skrl and Stable-Baselines3.

Same task (``hover`` with the recipe's options: ctbr actions, the body-frame observation, the
fused numba physics), same env count, the same PPO
recipe (``volary rl train --recipe hover-fast``'s, :data:`RECIPE`: rollout length, epochs,
minibatches, discount, GAE lambda, clip, loss weights, gradient clip, 64-64 tanh networks,
initial action std, no observation normalization, reward scaling, the KL-adaptive step size)
and the same training wall budget. Where a library lacks a piece it gets the nearest thing:
reward scaling is volary's ``RewardScale`` applied to the env's rewards for rsl_rl, skrl and
SB3 (none scales rewards on its own the same way); the KL-adaptive step is rsl_rl's
``schedule="adaptive"`` and skrl's ``KLAdaptiveLR`` (the same 2x / 0.5x, 1.5 rule; rsl_rl
measures the exact Gaussian KL); SB3 has none and keeps the initial rate. At fixed points of
training time the deterministic policy flies 1,024 held-out episodes (eval seed 7, one per
env); the table gives the training time and samples to >= 95 % success and the success at the
budget. Evaluation time is not training time.

Unit of replication: the training seed. Each (trainer, seed) runs in its own process, one at a
time, interleaved by seed, with torch and numba on ``--threads`` threads.

    .venv/bin/python benchmarks/rl_trainers.py --seeds 0,1,2 --budget 30

Writes ``benchmarks/results/rl/trainers.json`` and ``trainers.png`` (or ``--out``) and prints
a table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TRAINERS = ("volary", "rsl_rl", "skrl", "sb3")
TARGET = 0.95


def _recipe() -> dict[str, Any]:
    """hover-fast's PPO fields, named once for every trainer (adapters below translate)."""
    from volary.studies.rl.ppo import PPOConfig
    from volary.studies.rl.recipes import RECIPES

    rec = RECIPES["hover-fast"]
    cfg = PPOConfig(**rec.ppo)
    return {
        "envs": rec.envs, "rollout_steps": cfg.rollout_steps, "epochs": cfg.epochs,
        "minibatches": cfg.minibatches, "lr": cfg.lr, "desired_kl": cfg.desired_kl,
        "gamma": cfg.gamma, "gae_lambda": cfg.gae_lambda, "clip": cfg.clip,
        "value_coef": cfg.value_coef, "entropy_coef": cfg.entropy_coef,
        "max_grad_norm": cfg.max_grad_norm, "hidden": list(cfg.hidden),
        "init_std": math.exp(cfg.init_log_std), "ppo": dict(rec.ppo), "env": dict(rec.env),
    }  # fmt: skip


RECIPE = _recipe()


def _scale_rewards(env: Any, gamma: float) -> Any:
    """``env`` whose ``step`` returns scaled rewards (volary's ``RewardScale``), for the
    libraries that do not scale rewards themselves; the instance's own ``step`` is wrapped so
    the adapters still see the TorchVectorEnv they check for."""
    from volary.studies.rl.ppo import RewardScale

    scale = RewardScale(env.num_envs, gamma, env.device)
    step = env.step

    def scaled(action: Any) -> Any:
        obs, reward, terminated, truncated, info = step(action)
        return obs, scale(reward, terminated | truncated), terminated, truncated, info

    env.step = scaled
    return env


# ---- one trainer, one seed (runs in a child process) --------------------------------------------
class _Volary:
    def __init__(self, env: Any, seed: int) -> None:
        from volary.studies.rl.ppo import PPOConfig, PPOTrainer

        cfg = PPOConfig(**{**RECIPE["ppo"], "seed": seed})
        self.trainer = PPOTrainer(env, cfg, iterations=1_000_000)  # (a linear-schedule horizon)

    def iterate(self) -> None:
        self.trainer.iterate()

    def act(self, obs: Any) -> Any:
        return self.trainer.policy.act(obs, deterministic=True)


class _RslRl:
    def __init__(self, env: Any, seed: int) -> None:
        import torch
        from rsl_rl.algorithms import PPO
        from rsl_rl.models import MLPModel
        from rsl_rl.modules.distribution import GaussianDistribution
        from rsl_rl.runners import OnPolicyRunner

        from volary.envs.adapters import to_rsl_rl

        torch.manual_seed(seed)
        r = RECIPE
        net = {"class_name": MLPModel, "hidden_dims": r["hidden"], "activation": "tanh"}
        cfg = {
            "num_steps_per_env": r["rollout_steps"],
            "save_interval": 1_000_000_000,
            "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
            "algorithm": {
                "class_name": PPO, "learning_rate": r["lr"], "schedule": "adaptive",
                "desired_kl": r["desired_kl"],
                "num_learning_epochs": r["epochs"], "num_mini_batches": r["minibatches"],
                "gamma": r["gamma"], "lam": r["gae_lambda"], "clip_param": r["clip"],
                "value_loss_coef": r["value_coef"], "entropy_coef": r["entropy_coef"],
                "max_grad_norm": r["max_grad_norm"], "use_clipped_value_loss": False,
                "normalize_advantage_per_mini_batch": True,
            },
            "actor": {**net, "distribution_cfg": {"class_name": GaussianDistribution,
                                                  "init_std": r["init_std"]}},
            "critic": net,
        }  # fmt: skip
        env = _scale_rewards(env, r["gamma"])
        self.runner = OnPolicyRunner(to_rsl_rl(env), cfg, log_dir=None, device="cpu")
        self._policy: Any = None

    def iterate(self) -> None:
        self.runner.learn(num_learning_iterations=1)  # train mode on entry
        self._policy = None

    def act(self, obs: Any) -> Any:
        from tensordict import TensorDict

        if self._policy is None:
            self._policy = self.runner.get_inference_policy()
        return self._policy(TensorDict({"policy": obs}, batch_size=[obs.shape[0]]))


class _Skrl:
    def __init__(self, env: Any, seed: int) -> None:
        import torch
        from skrl.agents.torch.ppo import PPO, PPO_CFG
        from skrl.memories.torch import RandomMemory
        from skrl.models.torch import DeterministicMixin, GaussianMixin, Model
        from skrl.resources.schedulers.torch import KLAdaptiveLR
        from skrl.trainers.torch import SequentialTrainer

        from volary.envs.adapters import to_skrl

        torch.manual_seed(seed)
        r = RECIPE
        venv = to_skrl(_scale_rewards(env, r["gamma"]))
        spaces = {"observation_space": venv.observation_space, "action_space": venv.action_space}

        def mlp(n_in: int, n_out: int) -> torch.nn.Module:
            sizes = [n_in, *r["hidden"]]
            layers: list[torch.nn.Module] = []
            for a, b in zip(sizes[:-1], sizes[1:], strict=True):
                layers += [torch.nn.Linear(a, b), torch.nn.Tanh()]
            return torch.nn.Sequential(*layers, torch.nn.Linear(sizes[-1], n_out))

        class Policy(GaussianMixin, Model):
            def __init__(self) -> None:
                Model.__init__(self, device=venv.device, **spaces)
                GaussianMixin.__init__(self)
                self.net = mlp(self.num_observations, self.num_actions)
                self.log_std = torch.nn.Parameter(
                    torch.full((self.num_actions,), math.log(r["init_std"]))
                )

            def compute(self, inputs: dict, role: str = "") -> tuple:
                return self.net(inputs["observations"]), {"log_std": self.log_std}

        class Value(DeterministicMixin, Model):
            def __init__(self) -> None:
                Model.__init__(self, device=venv.device, **spaces)
                DeterministicMixin.__init__(self)
                self.net = mlp(self.num_observations, 1)

            def compute(self, inputs: dict, role: str = "") -> tuple:
                return self.net(inputs["observations"]), {}

        cfg = PPO_CFG(
            rollouts=r["rollout_steps"], learning_epochs=r["epochs"],
            mini_batches=r["minibatches"], learning_rate=r["lr"], discount_factor=r["gamma"],
            gae_lambda=r["gae_lambda"], ratio_clip=r["clip"], grad_norm_clip=r["max_grad_norm"],
            value_loss_scale=r["value_coef"], entropy_loss_scale=r["entropy_coef"],
            learning_rate_scheduler=KLAdaptiveLR,
            learning_rate_scheduler_kwargs={"kl_threshold": r["desired_kl"]},
            time_limit_bootstrap=True,
        )  # fmt: skip
        cfg.experiment.directory = tempfile.mkdtemp(prefix="skrl-")
        cfg.experiment.write_interval = 0
        cfg.experiment.checkpoint_interval = 0
        self.agent = PPO(
            models={"policy": Policy(), "value": Value()}, device=venv.device, cfg=cfg,
            memory=RandomMemory(memory_size=r["rollout_steps"], num_envs=venv.num_envs),
            observation_space=venv.observation_space, action_space=venv.action_space,
        )  # fmt: skip
        # one PPO iteration per train() call; the adapter's reset() after the first returns the
        # current observations, so consecutive calls continue the same episodes
        self.trainer = SequentialTrainer(
            env=venv, agents=self.agent,
            cfg={"timesteps": r["rollout_steps"], "headless": True, "disable_progressbar": True,
                 "close_environment_at_exit": False},
        )  # fmt: skip

    def iterate(self) -> None:
        self.trainer.train()

    def act(self, obs: Any) -> Any:
        return self.agent.policy.act({"observations": obs}, role="policy")[1]["mean_actions"]


class _Sb3:
    def __init__(self, env: Any, seed: int) -> None:
        from stable_baselines3 import PPO

        from volary.envs.adapters import to_sb3

        r = RECIPE
        self.per_iter = r["rollout_steps"] * r["envs"]
        self.model = PPO(
            "MlpPolicy", to_sb3(_scale_rewards(env, r["gamma"])), n_steps=r["rollout_steps"],
            batch_size=self.per_iter // r["minibatches"], n_epochs=r["epochs"],
            learning_rate=r["lr"], gamma=r["gamma"], gae_lambda=r["gae_lambda"],
            clip_range=r["clip"], vf_coef=r["value_coef"], ent_coef=r["entropy_coef"],
            max_grad_norm=r["max_grad_norm"],
            policy_kwargs={"net_arch": list(r["hidden"]), "log_std_init": math.log(r["init_std"])},
            seed=seed, device="cpu",
        )  # fmt: skip
        self.first = True

    def iterate(self) -> None:
        self.model.learn(total_timesteps=self.per_iter, reset_num_timesteps=self.first)
        self.first = False

    def act(self, obs: Any) -> Any:
        import torch

        return torch.as_tensor(self.model.predict(obs.numpy(), deterministic=True)[0])


ADAPTERS = {"volary": _Volary, "rsl_rl": _RslRl, "skrl": _Skrl, "sb3": _Sb3}


class _Policy:
    """What ``evaluate_policy`` calls: a deterministic action from the trainer's live model."""

    def __init__(self, trainer: Any, obs_dim: int) -> None:
        self.trainer, self.obs_dim = trainer, obs_dim

    def to(self, device: Any) -> _Policy:
        return self

    def eval(self) -> _Policy:
        return self

    def act(self, obs: Any, deterministic: bool = True, generator: Any = None) -> Any:
        import torch

        with torch.no_grad():
            return self.trainer.act(obs).clamp(-1.0, 1.0)


def run_one(trainer: str, seed: int, budget: float, every: float, threads: int) -> dict:
    """Train ``trainer`` from ``seed`` for ``budget`` s of training wall, evaluating every
    ``every`` s; the rows and the setup time (imports, env, models)."""
    t_proc = time.perf_counter()
    import torch

    torch.set_num_threads(threads)
    from volary.envs import make_env
    from volary.studies.rl.ppo import evaluate_policy

    env = make_env("hover", n_envs=RECIPE["envs"], seed=seed, **RECIPE["env"])
    held_out = make_env("hover", n_envs=1024, seed=7, **RECIPE["env"])
    model = ADAPTERS[trainer](env, seed)
    policy = _Policy(model, env.single_observation_space.shape[0])
    setup_s = time.perf_counter() - t_proc
    rows: list[dict[str, Any]] = []
    trained, iterations, next_eval = 0.0, 0, every
    while True:
        t0 = time.perf_counter()
        model.iterate()
        trained += time.perf_counter() - t0
        iterations += 1
        if trained >= next_eval or trained >= budget:
            ev = evaluate_policy(held_out, policy, 1024, seed=7)
            rows.append({
                "train_s": trained, "iterations": iterations,
                "samples": iterations * RECIPE["envs"] * RECIPE["rollout_steps"],
                "success": ev["success_rate"], "mean_length": ev["mean_length"],
            })  # fmt: skip
            print(f"  {trainer} seed {seed}: {trained:5.1f} s, {iterations} it, "
                  f"success {ev['success_rate']:.3f}", file=sys.stderr, flush=True)  # fmt: skip
            next_eval += every
            if trained >= budget:
                break
    hit = next((r for r in rows if r["success"] >= TARGET), None)
    return {
        "trainer": trainer, "seed": seed, "setup_s": setup_s, "rows": rows,
        "time_to_target_s": hit["train_s"] if hit else None,
        "samples_to_target": hit["samples"] if hit else None,
        "success_at_budget": rows[-1]["success"],
        "samples_per_s": rows[-1]["samples"] / rows[-1]["train_s"],
    }  # fmt: skip


# ---- the driver ---------------------------------------------------------------------------------
def _child(trainer: str, seed: int, args: argparse.Namespace) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(args.threads),
        "OPENBLAS_NUM_THREADS": str(args.threads),
        "NUMBA_NUM_THREADS": str(args.threads),
    }
    cmd = [
        sys.executable,
        __file__,
        "--one",
        f"{trainer}:{seed}",
        "--budget",
        str(args.budget),
        "--every",
        str(args.every),
        "--threads",
        str(args.threads),
        "--one-out",
        path,
    ]
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)  # fmt: skip
    doc = json.loads(Path(path).read_text())
    os.unlink(path)
    return doc


def _fmt(v: float | None, spec: str, none: str = "not reached") -> str:
    return none if v is None else format(v, spec)


def summarize(runs: list[dict]) -> list[dict]:
    """Per trainer: the seeds reaching the target, median time/samples to it over those, and
    the median success at the budget."""
    out = []
    for name in dict.fromkeys(r["trainer"] for r in runs):
        mine = [r for r in runs if r["trainer"] == name]
        hits = [r for r in mine if r["time_to_target_s"] is not None]
        out.append({
            "trainer": name, "seeds": len(mine), "reached": len(hits),
            "median_time_to_target_s":
                statistics.median(r["time_to_target_s"] for r in hits) if hits else None,
            "median_samples_to_target":
                statistics.median(r["samples_to_target"] for r in hits) if hits else None,
            "median_success_at_budget": statistics.median(r["success_at_budget"] for r in mine),
            "median_samples_per_s": statistics.median(r["samples_per_s"] for r in mine),
            "median_setup_s": statistics.median(r["setup_s"] for r in mine),
        })  # fmt: skip
    return out


def plot(runs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    colors = dict(zip(TRAINERS, ("C0", "C1", "C2", "C3"), strict=True))
    seen: set[str] = set()
    for r in runs:
        name = r["trainer"]
        ax.plot([x["train_s"] for x in r["rows"]], [100 * x["success"] for x in r["rows"]],
                marker=".", color=colors.get(name, "k"), alpha=0.8,
                label=None if name in seen else name)  # fmt: skip
        seen.add(name)
    ax.axhline(100 * TARGET, color="k", lw=0.8, ls="--")
    ax.set(xlabel="training wall time (s, evaluation excluded)",
           ylabel="success, 1,024 held-out episodes (%)",
           title="PPO on hover: one recipe, four trainers (one line per seed)")  # fmt: skip
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trainers", default=",".join(TRAINERS))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--budget", type=float, default=30.0, help="training wall s per run")
    ap.add_argument("--every", type=float, default=5.0, help="training s between evaluations")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "rl" / "trainers.json")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # child mode: TRAINER:SEED
    ap.add_argument("--one-out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        trainer, seed = args.one.split(":")
        doc = run_one(trainer, int(seed), args.budget, args.every, args.threads)
        Path(args.one_out).write_text(json.dumps(doc))
        return 0
    trainers = [t for t in args.trainers.split(",") if t]
    unknown = sorted(set(trainers) - set(TRAINERS))
    if unknown:
        ap.error(f"--trainers: unknown {', '.join(unknown)}; expected some of {TRAINERS}")
    from _timing import cpu_model

    runs = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for trainer in trainers:  # interleaved: every trainer once per seed
            runs.append(_child(trainer, seed, args))
    summary = summarize(runs)
    doc = {
        "benchmark": "rl_trainers", "task": "hover", "recipe": RECIPE, "target": TARGET,
        "budget_s": args.budget, "every_s": args.every, "threads": args.threads,
        "eval": {"episodes": 1024, "seed": 7, "deterministic": True},
        "unit_of_replication": "training seed",
        "machine": cpu_model(), "summary": summary, "runs": runs,
    }  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2))
    plot(runs, args.out.with_suffix(".png"))
    print(
        f"| trainer | seeds at {TARGET:.0%} | median s to {TARGET:.0%} | median samples | "
        "median success at budget | samples/s | setup s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for s in summary:
        print(
            f"| {s['trainer']} | {s['reached']}/{s['seeds']} | "
            f"{_fmt(s['median_time_to_target_s'], '.1f')} | "
            f"{_fmt(s['median_samples_to_target'], ',.0f')} | "
            f"{s['median_success_at_budget']:.1%} | {s['median_samples_per_s']:,.0f} | "
            f"{s['median_setup_s']:.1f} |"
        )
    print("per seed (s to target):")
    for r in runs:
        print(
            f"  {r['trainer']:7s} seed {r['seed']}: {_fmt(r['time_to_target_s'], '.1f')}, "
            f"success at budget {r['success_at_budget']:.1%}"
        )
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
