"""The learner adapters of ``volary.envs.adapters``: rsl_rl (``to_rsl_rl``), skrl (``to_skrl``)
and Stable-Baselines3 (``to_sb3``). Per library: an interface test (shapes, device, dtype, the
reset obs after a done, the truncation flag) and a short PPO run on an easy ``hover`` task whose
deterministic policy must score a clearly higher return afterwards than before training."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest
import torch
from torch import Tensor

from volary.envs import make_env
from volary.envs.base import TorchVectorEnv
from volary.errors import ConfigError

# hover with velocity commands, one physics step per 30 Hz decision, 2 s (60-step) episodes: the
# easy task (a proportional controller scores about 52, zero commands 35, random ones 16)
EASY = {"control": "velocity", "physics_hz": 30.0, "control_hz": 30.0, "episode_s": 2.0}
TINY = {"control": "velocity", "physics_hz": 30.0, "control_hz": 30.0, "episode_s": 0.1}  # 3 steps
N_TRAIN, N_EVAL = 256, 256
RSL_ITERATIONS = 40
SKRL_ITERATIONS = 40
SB3_ITERATIONS = 25
MARGIN = 5.0  # required gain of the mean episode return after training


def _easy_env(seed: int, n_envs: int = N_TRAIN) -> TorchVectorEnv:
    return make_env("hover", n_envs=n_envs, seed=seed, **EASY)


def mean_return(policy: Callable[[Tensor], Tensor]) -> float:
    """Mean return of each eval env's first episode under ``policy`` (obs -> action tensors),
    on a fixed eval set (seed 1, 256 envs, one episode length)."""
    env = _easy_env(seed=1, n_envs=N_EVAL)
    obs, _ = env.reset()
    total = torch.zeros(N_EVAL)
    alive = torch.ones(N_EVAL, dtype=torch.bool)
    with torch.no_grad():
        for _ in range(env.max_steps):
            obs, rew, term, trunc, _ = env.step(policy(obs).clamp(-1.0, 1.0))
            total += torch.where(alive, rew, 0.0)
            alive &= ~(term | trunc)
    return float(total.mean())


def _walk_to_truncation(step: Callable[[Tensor], tuple], n: int) -> tuple:
    """Zero actions until the TINY episodes truncate (3 steps); the last step's outputs."""
    out: tuple = ()
    for _ in range(3):
        out = step(torch.zeros(n, 4))
    return out


def _second_start(n: int, device: str = "cpu") -> Tensor:
    """The first obs of every env's second TINY episode (what same-step autoreset returns)."""
    env = make_env("hover", n_envs=n, seed=0, device=device, **TINY)
    env.reset()
    return env.reset()[0]


# ---- rsl_rl -------------------------------------------------------------------------------------
def test_rsl_rl_adapter_interface(device: str) -> None:
    pytest.importorskip("rsl_rl")
    from volary.envs.adapters import to_rsl_rl

    env = make_env("hover", n_envs=4, seed=0, device=device, **TINY)
    venv = to_rsl_rl(env)
    assert (venv.num_envs, venv.num_actions, venv.max_episode_length) == (4, 4, 3)
    obs = venv.get_observations()
    assert obs["policy"].shape == (4, 22) and obs["policy"].dtype == torch.float32
    assert obs["policy"].device == env.device == torch.device(venv.device)
    first = obs["policy"].clone()
    obs, rew, dones, extras = _walk_to_truncation(venv.step, 4)
    assert rew.shape == (4,) and rew.dtype == torch.float32 and dones.shape == (4,)
    assert dones.all() and extras["time_outs"].dtype == torch.bool and extras["time_outs"].all()
    assert (venv.episode_length_buf == 0).all()  # every env started over in that step
    # the returned obs is the next episode's first one (the streams' second draw), not the end
    assert not torch.equal(obs["policy"], extras["info"]["final_obs"])
    assert not torch.equal(obs["policy"], first)
    torch.testing.assert_close(obs["policy"], _second_start(4, device))
    venv.episode_length_buf = torch.full((4,), 2)
    _, _, dones, extras = venv.step(torch.zeros(4, 4))
    assert dones.all() and extras["time_outs"].all()  # rsl_rl's random episode starts truncate
    with pytest.raises(ConfigError, match="env"):
        to_rsl_rl(object())  # type: ignore[arg-type]


@pytest.mark.slow  # 10-30 s on 2 cores; make test-slow
def test_rsl_rl_ppo_raises_the_return() -> None:
    pytest.importorskip("rsl_rl")
    from rsl_rl.algorithms import PPO
    from rsl_rl.models import MLPModel
    from rsl_rl.modules.distribution import GaussianDistribution
    from rsl_rl.runners import OnPolicyRunner
    from tensordict import TensorDict

    from volary.envs.adapters import to_rsl_rl

    torch.manual_seed(0)
    cfg = {
        "num_steps_per_env": 24,
        "save_interval": 10_000,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "algorithm": {"class_name": PPO, "learning_rate": 1e-3, "num_learning_epochs": 4,
                      "num_mini_batches": 4, "entropy_coef": 0.0, "gamma": 0.98},
        "actor": {"class_name": MLPModel, "hidden_dims": [64, 64],
                  "distribution_cfg": {"class_name": GaussianDistribution, "init_std": 0.5}},
        "critic": {"class_name": MLPModel, "hidden_dims": [64, 64]},
    }  # fmt: skip
    runner = OnPolicyRunner(to_rsl_rl(_easy_env(seed=0)), cfg, log_dir=None, device="cpu")

    def act(obs: Tensor) -> Tensor:
        td = TensorDict({"policy": obs}, batch_size=[obs.shape[0]])
        return runner.get_inference_policy()(td)

    before = mean_return(act)
    runner.learn(num_learning_iterations=RSL_ITERATIONS)
    after = mean_return(act)
    print(f"rsl_rl: mean return {before:.1f} -> {after:.1f}")
    assert after > before + MARGIN, (before, after)


def test_rsl_rl_learner_returns_the_policy_it_trained() -> None:
    # volary rl train --learner rsl_rl: rsl_rl trains, volary's ActorCritic is saved; the
    # converted policy must act exactly as the trained runner's own inference policy
    pytest.importorskip("rsl_rl")
    import contextlib
    import io

    from rsl_rl.runners import OnPolicyRunner
    from tensordict import TensorDict

    from volary.envs.adapters import to_rsl_rl
    from volary.studies.rl.ppo import PPOConfig
    from volary.studies.rl.rsl import make_runner, rsl_rl_config, to_actor_critic, train_rsl_rl

    cfg = PPOConfig(rollout_steps=8, epochs=2, minibatches=2, hidden=(16, 16), lr=1e-3,
                    normalize_obs=False, normalize_rewards=True,
                    lr_schedule="adaptive")  # fmt: skip
    obs = _easy_env(seed=5, n_envs=64).reset()[0]
    for c in (cfg, replace(cfg, normalize_obs=True), replace(cfg, normalize_obs=True,
                                                               obs_clip=None)):  # fmt: skip
        torch.manual_seed(0)
        runner = make_runner(to_rsl_rl(_easy_env(seed=0, n_envs=32)), c)
        with contextlib.redirect_stdout(io.StringIO()):
            runner.learn(num_learning_iterations=2)
        policy = to_actor_critic(runner, 22, 4, c)
        theirs = runner.get_inference_policy()(TensorDict({"policy": obs}, batch_size=[64]))
        torch.testing.assert_close(policy.act(obs, deterministic=True), theirs.clamp(-1.0, 1.0),
                                   rtol=0.0, atol=0.0)  # fmt: skip
        std = runner.alg.actor.distribution.log_std_param
        torch.testing.assert_close(policy.log_std, std.detach())
        if c.normalize_obs:  # rsl_rl updated the statistics from both rollouts (2 x 8 x 32)
            norm = policy.obs_norm
            assert float(norm.count) == 2 * 8 * 32 and norm.clip == c.obs_clip
            assert not torch.allclose(norm.mean, torch.zeros(22, dtype=norm.mean.dtype))
            critic = runner.alg.critic.obs_normalizer
            torch.testing.assert_close(norm.mean, critic.mean, rtol=0, atol=0)
            torch.testing.assert_close(norm.var, critic.var, rtol=0, atol=0)
    with pytest.raises(ConfigError, match="make_runner"):  # rsl_rl's own normalizer module
        with contextlib.redirect_stdout(io.StringIO()):
            venv = to_rsl_rl(_easy_env(seed=0, n_envs=8))
            plain = OnPolicyRunner(venv, rsl_rl_config(PPOConfig()), log_dir=None, device="cpu")
        to_actor_critic(plain, 22, 4, PPOConfig())

    calls: list[int] = []
    torch.manual_seed(123)
    caller = torch.random.get_rng_state()
    _, report = train_rsl_rl(to_rsl_rl(_easy_env(seed=0, n_envs=32)), cfg, 3,
                             progress=lambda it, row: calls.append(it))  # fmt: skip
    assert torch.equal(torch.random.get_rng_state(), caller)  # the caller's generator untouched
    assert calls == [0, 1, 2] and report["samples"] == 3 * 32 * 8
    assert report["learner"] == "rsl_rl" and len(report["history"]["mean_return"]) == 3

    # early stop: validated after iterations 1 and 2, stopped at 2 with that policy
    from volary.studies.rl.ppo import EarlyStop

    seen: list = []

    def validate(p):
        seen.append(p.act(obs, deterministic=True))
        return [0.5, 0.99][len(seen) - 1]

    policy, report = train_rsl_rl(
        to_rsl_rl(_easy_env(seed=0, n_envs=32)),
        cfg,
        5,
        stop=EarlyStop(validate, target=0.97, every=1, first=1),
    )
    assert report["iterations"] == 2 and report["samples"] == 2 * 32 * 8
    assert report["validation"]["chosen_iteration"] == 2 and len(seen) == 2
    torch.testing.assert_close(policy.act(obs, deterministic=True), seen[1], rtol=0, atol=0)

    # lr_schedule=linear: rsl_rl steps with volary's annealed rate, lr (1 - it / iterations)
    seen: list[float] = []
    import rsl_rl.algorithms.ppo as rsl_ppo

    update = rsl_ppo.PPO.update

    def spy(self, *a, **kw):
        seen.append(self.optimizer.param_groups[0]["lr"])
        return update(self, *a, **kw)

    lin = PPOConfig(rollout_steps=8, epochs=1, minibatches=1, hidden=(8,), lr=1e-3,
                    normalize_obs=False, lr_schedule="linear")  # fmt: skip
    try:
        rsl_ppo.PPO.update = spy
        train_rsl_rl(to_rsl_rl(_easy_env(seed=0, n_envs=8)), lin, 4)
    finally:
        rsl_ppo.PPO.update = update
    assert seen == pytest.approx([1e-3, 7.5e-4, 5e-4, 2.5e-4])


# ---- skrl ---------------------------------------------------------------------------------------
def test_skrl_adapter_interface(device: str) -> None:
    pytest.importorskip("skrl")
    from volary.envs.adapters import to_skrl

    env = make_env("hover", n_envs=4, seed=0, device=device, **TINY)
    venv = to_skrl(env)
    assert venv.num_envs == 4 and venv.device == env.device
    assert venv.observation_space.shape == (22,) and venv.action_space.shape == (4,)
    assert venv.state() is None
    obs, _ = venv.reset()
    assert obs.shape == (4, 22) and obs.dtype == torch.float32 and obs.device == env.device
    obs, rew, term, trunc, info = _walk_to_truncation(venv.step, 4)
    assert rew.shape == term.shape == trunc.shape == (4, 1)
    assert term.dtype == trunc.dtype == torch.bool and rew.dtype == torch.float32
    assert trunc.all() and not term.any()  # time limit: truncated, not terminated
    assert not torch.equal(obs, info["final_obs"])  # the returned obs starts the next episode
    torch.testing.assert_close(obs, _second_start(4, device))
    assert venv.reset()[0] is obs  # skrl's reset() after autoreset: the current observations
    with pytest.raises(ConfigError, match="env"):
        to_skrl(object())  # type: ignore[arg-type]


def _skrl_models(venv) -> dict:
    from skrl.models.torch import DeterministicMixin, GaussianMixin, Model

    def mlp(n_in: int, n_out: int) -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Linear(n_in, 64), torch.nn.ELU(),
                                   torch.nn.Linear(64, 64), torch.nn.ELU(),
                                   torch.nn.Linear(64, n_out))  # fmt: skip

    spaces = {"observation_space": venv.observation_space, "action_space": venv.action_space}

    class Policy(GaussianMixin, Model):
        def __init__(self) -> None:
            Model.__init__(self, device=venv.device, **spaces)
            GaussianMixin.__init__(self)
            self.net = mlp(self.num_observations, self.num_actions)
            self.log_std = torch.nn.Parameter(torch.full((self.num_actions,), np.log(0.5)))

        def compute(self, inputs: dict, role: str = "") -> tuple:
            return self.net(inputs["observations"]), {"log_std": self.log_std}

    class Value(DeterministicMixin, Model):
        def __init__(self) -> None:
            Model.__init__(self, device=venv.device, **spaces)
            DeterministicMixin.__init__(self)
            self.net = mlp(self.num_observations, 1)

        def compute(self, inputs: dict, role: str = "") -> tuple:
            return self.net(inputs["observations"]), {}

    return {"policy": Policy(), "value": Value()}


@pytest.mark.slow  # 10-30 s on 2 cores; make test-slow
def test_skrl_ppo_raises_the_return(tmp_path) -> None:
    pytest.importorskip("skrl")
    from skrl.agents.torch.ppo import PPO, PPO_CFG
    from skrl.memories.torch import RandomMemory
    from skrl.resources.schedulers.torch import KLAdaptiveLR
    from skrl.trainers.torch import SequentialTrainer

    from volary.envs.adapters import to_skrl

    torch.manual_seed(0)
    venv = to_skrl(_easy_env(seed=0))
    rollouts = 24
    cfg = PPO_CFG(rollouts=rollouts, learning_epochs=4, mini_batches=4, learning_rate=1e-3,
                  learning_rate_scheduler=KLAdaptiveLR,
                  learning_rate_scheduler_kwargs={"kl_threshold": 0.01},
                  grad_norm_clip=1.0, value_loss_scale=1.0, discount_factor=0.98,
                  time_limit_bootstrap=True)  # fmt: skip
    cfg.experiment.directory = str(tmp_path)
    cfg.experiment.write_interval = 0
    cfg.experiment.checkpoint_interval = 0
    agent = PPO(models=_skrl_models(venv), device=venv.device, cfg=cfg,
                memory=RandomMemory(memory_size=rollouts, num_envs=venv.num_envs),
                observation_space=venv.observation_space,
                action_space=venv.action_space)  # fmt: skip

    def act(obs: Tensor) -> Tensor:
        return agent.policy.act({"observations": obs}, role="policy")[1]["mean_actions"]

    before = mean_return(act)
    trainer_cfg = {"timesteps": rollouts * SKRL_ITERATIONS, "headless": True,
                   "disable_progressbar": True, "close_environment_at_exit": False}  # fmt: skip
    SequentialTrainer(env=venv, agents=agent, cfg=trainer_cfg).train()
    after = mean_return(act)
    print(f"skrl: mean return {before:.1f} -> {after:.1f}")
    assert after > before + MARGIN, (before, after)


# ---- Stable-Baselines3 --------------------------------------------------------------------------
def test_sb3_adapter_interface() -> None:
    pytest.importorskip("stable_baselines3")
    from volary.envs.adapters import to_sb3

    venv = to_sb3(make_env("hover", n_envs=4, seed=0, **TINY))
    obs = venv.reset()
    assert obs.shape == (4, 22) and obs.dtype == np.float32
    obs, rew, done, infos = _walk_to_truncation(lambda a: venv.step(a.numpy()), 4)
    assert rew.shape == (4,) and rew.dtype == np.float32 and done.dtype == bool and done.all()
    for i, info in enumerate(infos):
        assert info["TimeLimit.truncated"] is True and info["episode"]["l"] == 3
        assert not np.array_equal(obs[i], info["terminal_observation"])  # obs: the next episode
    np.testing.assert_allclose(obs, _second_start(4).numpy())


def test_sb3_ppo_raises_the_return() -> None:
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO

    from volary.envs.adapters import to_sb3

    n_steps = 24
    model = PPO("MlpPolicy", to_sb3(_easy_env(seed=0)), n_steps=n_steps,
                batch_size=n_steps * N_TRAIN // 4, n_epochs=4, learning_rate=3e-3, gamma=0.98,
                policy_kwargs={"net_arch": [64, 64], "log_std_init": float(np.log(0.5))},
                seed=0, device="cpu")  # fmt: skip

    def act(obs: Tensor) -> Tensor:
        return torch.as_tensor(model.predict(obs.numpy(), deterministic=True)[0])

    before = mean_return(act)
    model.learn(total_timesteps=n_steps * N_TRAIN * SB3_ITERATIONS)
    after = mean_return(act)
    print(f"sb3: mean return {before:.1f} -> {after:.1f}")
    assert after > before + MARGIN, (before, after)
