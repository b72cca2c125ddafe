"""PPO (``volary.studies.rl.ppo``): config checks, GAE by hand, learning, determinism, checkpoints,
evaluation and the CLI's option errors, against a tiny fake point-mass vector env."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import types

import gymnasium as gym
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from volary.cli.main import app
from volary.device import resolve
from volary.errors import ConfigError, FileFormatError
from volary.studies.rl.ppo import (
    ActorCritic,
    EarlyStop,
    PPOConfig,
    PPOTrainer,
    evaluate_policy,
    gae,
    learning_rate,
    load_policy,
    save_policy,
    train_ppo,
)


class PointMass:
    """1-D point mass, obs [x, v], action = acceleration (2 m/s^2 per unit), dt = 0.1 s.
    Reward -(x^2) - 0.1 a^2; truncated after 50 steps, terminated (reward -50) if |x| > 5.
    Same-step autoreset with info["final_obs"], episode_return/length, success (|x| < 0.5)."""

    def __init__(self, num_envs: int = 32, device: str = "cpu", horizon: int = 50) -> None:
        self.num_envs, self.device, self.horizon = num_envs, torch.device(device), horizon
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.gen = torch.Generator(device=self.device)
        n = num_envs
        self.x = self.v = self.ret = torch.zeros(n, device=self.device)
        self.t = torch.zeros(n, dtype=torch.long, device=self.device)

    def _draw(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        u = torch.rand(2, n, generator=self.gen, device=self.device) * 2.0 - 1.0
        return 2.0 * u[0], u[1]

    def _obs(self) -> torch.Tensor:
        return torch.stack([self.x, self.v], -1)

    def reset(self, seed: int | None = None):
        if seed is not None:
            self.gen.manual_seed(seed)
        self.x, self.v = self._draw(self.num_envs)
        self.t.zero_()
        self.ret = torch.zeros(self.num_envs, device=self.device)
        return self._obs(), {}

    def step(self, action: torch.Tensor):
        a = action[:, 0].clamp(-1.0, 1.0)
        self.v = self.v + 0.2 * a
        self.x = self.x + 0.1 * self.v
        self.t += 1
        terminated = self.x.abs() > 5.0
        truncated = (self.t >= self.horizon) & ~terminated
        reward = -(self.x**2) - 0.1 * a**2 - 50.0 * terminated.float()
        self.ret = self.ret + reward
        done = terminated | truncated
        info = {
            "final_obs": self._obs(),
            "episode_return": self.ret.clone(),
            "episode_length": self.t.clone(),
            "success": self.x.abs() < 0.5,
        }
        x0, v0 = self._draw(self.num_envs)
        self.x, self.v = torch.where(done, x0, self.x), torch.where(done, v0, self.v)
        self.t = torch.where(done, 0, self.t)
        self.ret = torch.where(done, 0.0, self.ret)
        return self._obs(), reward, terminated, truncated, info


SMALL = PPOConfig(rollout_steps=16, epochs=2, minibatches=2, hidden=(16, 16))


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("rollout_steps", 0, "int >= 1"),
        ("epochs", 2.5, "int >= 1"),
        ("gamma", 1.5, "in [0, 1]"),
        ("lr", -1.0, "> 0"),
        ("clip", float("nan"), "> 0"),
        ("entropy_coef", -0.1, ">= 0"),
        ("hidden", (), "non-empty tuple of ints"),
        ("hidden", (64, 0), "widths >= 1"),
        ("normalize_obs", 1, "bool"),
        ("normalize_rewards", "yes", "bool"),
        ("lr_schedule", "cosine", "one of constant, linear"),
        ("seed", -1, "int >= 0"),
    ],
)
def test_config_errors_name_the_field(field, value, expected):
    with pytest.raises(ConfigError, match=rf"PPOConfig\.{field}: expected .*{re.escape(expected)}"):
        PPOConfig(**{field: value})


def test_config_dict_round_trip_and_overrides():
    cfg = PPOConfig(hidden=[32, 32])  # type: ignore[arg-type]
    assert cfg.hidden == (32, 32) and PPOConfig.from_dict(cfg.to_dict()) == cfg
    new = cfg.override(["lr=1e-3", "hidden=8,8", "normalize_obs=false"])
    assert (new.lr, new.hidden, new.normalize_obs) == (1e-3, (8, 8), False)
    with pytest.raises(ConfigError, match="unknown field.*bogus"):
        cfg.override(["bogus=1"])
    with pytest.raises(ConfigError, match=r"PPOConfig\.epochs: expected an int, got 'many'"):
        cfg.override(["epochs=many"])


def test_gae_by_hand_with_truncation_and_termination():
    # One env, 3 steps: step 0 truncated (bootstrap from V(final_obs) = 10), step 1 continues,
    # step 2 terminated (no bootstrap). gamma 0.9, lambda 0.5.
    g, lam = 0.9, 0.5
    r = torch.tensor([[1.0], [2.0], [3.0]])
    v = torch.tensor([[0.5], [1.0], [2.0]])
    next_v = torch.tensor([[10.0], [2.0], [7.0]])  # V(final_obs), V(s_2), V(final_obs) (unused)
    term = torch.tensor([[False], [False], [True]])
    done = torch.tensor([[True], [False], [True]])
    d2 = 3.0 - 2.0  # terminated: r - V
    d1 = 2.0 + g * 2.0 - 1.0
    d0 = 1.0 + g * 10.0 - 0.5  # truncated: bootstrapped, no propagation past the episode end
    a2, a1, a0 = d2, d1 + g * lam * d2, d0
    adv, ret = gae(r, v, next_v, term, done, g, lam)
    torch.testing.assert_close(adv, torch.tensor([[a0], [a1], [a2]]))
    torch.testing.assert_close(ret, adv + v)


def _returns(report):
    return [x for x in report["history"]["mean_return"] if x is not None]


@pytest.fixture(scope="module")
def trained():
    torch.set_num_threads(1)
    env = PointMass(num_envs=32)
    cfg = PPOConfig(rollout_steps=32, epochs=5, minibatches=4, lr=1e-3, seed=3)
    policy, report = train_ppo(env, cfg, iterations=25)
    return env, cfg, policy, report


def test_ppo_improves_the_point_mass_return(trained):
    # Measured (seed 3, 25 iterations of 1024 samples, ~4.5 s on one core): the first
    # iteration's episodes average -422 (random actions drift off, many hit the |x| > 5
    # termination) and the last three -14.5 (seeds 0 and 1: -376 -> -13.1, -420 -> -15.4).
    # Asserted with wide margins: half the measured gain, 4x the measured final cost.
    _, _, _, report = trained
    rets = _returns(report)
    first, last = rets[0], float(np.mean(rets[-3:]))
    assert last > first + 200.0, (first, last)
    assert last > -60.0, rets
    hist = report["history"]
    assert all(np.isfinite(hist[k]).all() for k in ("policy_loss", "value_loss", "approx_kl"))
    assert report["samples"] == 25 * 32 * 32 and len(report["timing"]["samples_per_s"]) == 25


def test_same_seed_same_report(device):
    _, a = train_ppo(PointMass(8, device), SMALL, iterations=4)
    _, b = train_ppo(PointMass(8, device), SMALL, iterations=4)
    assert a["history"] == b["history"] and a["config"] == b["config"]
    assert a["device"] == str(resolve(device))  # "cuda" is reported as its index, cuda:0
    _, c = train_ppo(PointMass(8, device), dataclasses.replace(SMALL, seed=1), iterations=4)
    assert c["history"] != a["history"]


def test_a_trainer_driven_by_hand_is_train_ppo():
    # callers that evaluate between iterations (benchmarks/rl_trainers.py) drive PPOTrainer
    _, whole = train_ppo(PointMass(8), SMALL, iterations=4)
    trainer = PPOTrainer(PointMass(8), SMALL, iterations=4)
    rows = [trainer.iterate() for _ in range(4)]
    assert trainer.report()["history"] == whole["history"]
    assert [r["mean_return"] for r in rows] == whole["history"]["mean_return"]
    assert trainer.report()["samples"] == whole["samples"] == 4 * 8 * 16


class _Script:
    """A validation that answers a scripted success sequence and keeps each policy it saw."""

    def __init__(self, answers):
        self.answers, self.seen = list(answers), []

    def __call__(self, policy):
        self.seen.append({k: v.clone() for k, v in policy.state_dict().items()})
        return self.answers.pop(0)


def _same_weights(policy, state):
    return all(torch.equal(v, state[k]) for k, v in policy.state_dict().items())


def test_early_stop_stops_when_validation_reaches_the_target():
    # validation after iterations 2, 4, 6: the run stops at the first check at the target
    script = _Script([0.2, 0.98, 1.0])
    policy, report = train_ppo(PointMass(8), SMALL, iterations=10,
                               stop=EarlyStop(script, target=0.97, every=2, first=2))  # fmt: skip
    assert report["iterations"] == 4 and report["samples"] == 4 * 8 * 16
    assert len(report["history"]["mean_return"]) == 4
    val = report["validation"]
    assert [r["iteration"] for r in val["rows"]] == [2, 4]
    assert val["reached"] and val["chosen_iteration"] == 4 and val["chosen_success"] == 0.98
    assert _same_weights(policy, script.seen[-1])
    # the iterations run are the unstopped run's first four (validation draws nothing from it)
    _, plain = train_ppo(PointMass(8), SMALL, iterations=10)
    assert report["history"]["mean_return"] == plain["history"]["mean_return"][:4]


def test_early_stop_that_never_reaches_keeps_the_best_validated_policy():
    # checks after 1, 3 and the last iteration (5, always validated); best is the one at 3
    script = _Script([0.1, 0.6, 0.3])
    policy, report = train_ppo(PointMass(8), SMALL, iterations=5,
                               stop=EarlyStop(script, target=0.9, every=2, first=1))  # fmt: skip
    val = report["validation"]
    assert [r["iteration"] for r in val["rows"]] == [1, 3, 5] and report["iterations"] == 5
    assert not val["reached"] and (val["chosen_iteration"], val["chosen_success"]) == (3, 0.6)
    assert _same_weights(policy, script.seen[1]) and not _same_weights(policy, script.seen[2])


def test_early_stop_with_a_real_validation_env():
    # the point mass's success (|x| < 0.5 at the episode's end) on 64 episodes of another seed
    val_env = PointMass(32)

    def validate(policy):
        return evaluate_policy(val_env, policy, 64, seed=99)["success_rate"]

    cfg = PPOConfig(rollout_steps=32, epochs=5, minibatches=4, lr=1e-3, seed=3)
    policy, report = train_ppo(PointMass(32), cfg, iterations=40,
                               stop=EarlyStop(validate, target=0.9, every=5, first=5))  # fmt: skip
    val = report["validation"]
    assert val["reached"] and report["iterations"] < 40, val
    assert validate(policy) == val["chosen_success"] >= 0.9


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"validate": 1}, "EarlyStop.validate: expected a callable"),
        ({"target": 0.0}, "EarlyStop.target: expected a success rate in"),
        ({"target": 1.5}, "EarlyStop.target"),
        ({"every": 0}, "EarlyStop.every: expected an int >= 1"),
        ({"first": 2.0}, "EarlyStop.first"),
    ],
)
def test_early_stop_errors_name_the_field(kwargs, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        EarlyStop(**{"validate": lambda p: 1.0, **kwargs})


def test_the_linear_schedule_anneals_the_step_size_to_zero():
    cfg = dataclasses.replace(SMALL, lr=1e-3, lr_schedule="linear")
    rates = [learning_rate(cfg, i, 4) for i in range(4)]
    assert rates == pytest.approx([1e-3, 7.5e-4, 5e-4, 2.5e-4])
    assert learning_rate(SMALL, 3, 4) == SMALL.lr  # constant
    trainer = PPOTrainer(PointMass(8), cfg, iterations=4)
    for expected in rates:
        trainer.iterate()
        assert trainer.opt.param_groups[0]["lr"] == pytest.approx(expected)


def test_building_a_policy_leaves_the_global_generator_alone():
    """rsl_rl samples actions from torch's global generator and an rsl_rl run builds an
    ActorCritic at every validation: building one must not change the run."""
    state = torch.get_rng_state()
    a = ActorCritic(6, 2, PPOConfig(seed=3))
    assert torch.equal(torch.get_rng_state(), state)
    b = ActorCritic(6, 2, PPOConfig(seed=3))  # still initialized from its own seed
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
    assert a.actor[0].weight.abs().sum() > 0 and torch.equal(a.actor[0].bias, torch.zeros(64))


def test_gaussian_kl_is_torch_distributions_kl():
    # the adaptive step size reads the exact KL from the sampling policy
    from volary.studies.rl.ppo import gaussian_kl

    gen = torch.Generator().manual_seed(1)
    mu0, mu1 = torch.randn(2, 50, 3, generator=gen)
    ls0, ls1 = 0.5 * torch.randn(2, 50, 3, generator=gen)
    ref = torch.distributions.kl_divergence(
        torch.distributions.Normal(mu0, ls0.exp()), torch.distributions.Normal(mu1, ls1.exp())
    ).sum(-1)
    torch.testing.assert_close(gaussian_kl(mu0, ls0, mu1, ls1), ref)
    assert torch.equal(gaussian_kl(mu0, ls0, mu0, ls0), torch.zeros(50))


def test_adam_matches_torch_optim_adam():
    # the trainer's own Adam (it avoids torch.optim's 1.7 s torch._dynamo import) is the
    # reference's update, including a step size changed between steps (the schedules)
    from volary.studies.rl.ppo import Adam

    gen = torch.Generator().manual_seed(0)
    ours = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 2))
    ref.load_state_dict(ours.state_dict())
    a = Adam(ours.parameters(), lr=3e-3, eps=1e-5)
    b = torch.optim.Adam(ref.parameters(), lr=3e-3, eps=1e-5, foreach=False)
    for i in range(30):
        x = torch.randn(16, 5, generator=gen)
        for net, opt in ((ours, a), (ref, b)):
            opt.zero_grad(set_to_none=True)
            net(x).pow(2).sum().backward()
            opt.param_groups[0]["lr"] = 3e-3 * (1.0 - i / 30)
            opt.step()
    for p, q in zip(ours.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)


class _Scaled(PointMass):
    """PointMass with every reward multiplied by ``factor``."""

    def __init__(self, factor: float) -> None:
        super().__init__(8)
        self.factor = factor

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward * self.factor, terminated, truncated, info


def test_reward_scaling_makes_training_blind_to_the_reward_unit():
    # Engstrom et al. 2020: rewards / std(discounted return). The same task in other units
    # (x 1000) trains the same policy; without the scaling it does not.
    cfg = dataclasses.replace(SMALL, normalize_rewards=True)
    a, _ = train_ppo(_Scaled(1.0), cfg, iterations=4)
    b, _ = train_ppo(_Scaled(1000.0), cfg, iterations=4)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, rtol=1e-4, atol=1e-5)
    c, _ = train_ppo(_Scaled(1.0), SMALL, iterations=4)
    d, _ = train_ppo(_Scaled(1000.0), SMALL, iterations=4)
    assert not torch.allclose(c.critic[0].weight, d.critic[0].weight, rtol=1e-3)


def test_checkpoint_round_trip(trained, tmp_path):
    _, cfg, policy, _ = trained
    path = save_policy(tmp_path / "p.pt", policy, cfg, {"task": "point-mass", "iterations": 25})
    raw = torch.load(path, weights_only=True)
    assert raw["config"] == cfg.to_dict() and raw["meta"]["task"] == "point-mass"
    loaded, cfg2, meta = load_policy(path)
    assert cfg2 == cfg and meta == {"task": "point-mass", "iterations": 25}
    obs = torch.randn(64, 2, generator=torch.Generator().manual_seed(0)) * 3.0
    assert torch.equal(loaded.act(obs, deterministic=True), policy.act(obs, deterministic=True))
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert torch.equal(loaded.act(obs, generator=g1), policy.act(obs, generator=g2))
    assert loaded.act(obs, generator=g1).abs().max() <= 1.0
    assert torch.equal(loaded.obs_norm.mean, policy.obs_norm.mean)
    with pytest.raises(FileFormatError, match="no such"):
        load_policy(tmp_path / "missing.pt")
    torch.save({"format": "other"}, tmp_path / "other.pt")
    with pytest.raises(FileFormatError, match="field 'format' is 'other'"):
        load_policy(tmp_path / "other.pt")


class _Unequal:
    """Env 0 fails in one step every episode; the others succeed after ten steps."""

    def __init__(self, n: int = 4) -> None:
        self.num_envs, self.device, self.t = n, torch.device("cpu"), torch.zeros(n)
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, seed: int | None = None):
        self.t = torch.zeros(self.num_envs)
        return torch.zeros(self.num_envs, 2), {}

    def step(self, action):
        self.t += 1
        short = torch.arange(self.num_envs) == 0
        done = short | (self.t >= 10)
        success = done & ~short
        info = {"final_obs": torch.zeros(self.num_envs, 2), "success": success,
                "episode_return": success.float(), "episode_length": self.t.clone()}  # fmt: skip
        self.t = torch.where(done, 0.0, self.t)
        return torch.zeros(self.num_envs, 2), success.float(), short, done & ~short, info


def test_evaluate_policy_counts_every_env_alike(trained):
    """Every env's first k episodes: the short failing episodes of env 0 do not crowd out the
    others (taking the first episodes to end would report 0 % here)."""
    res = evaluate_policy(_Unequal(4), ActorCritic(2, 1, PPOConfig()), episodes=4)
    assert res["episodes"] == 4 and res["success_rate"] == pytest.approx(0.75)
    assert res["mean_length"] == pytest.approx((1 + 10 + 10 + 10) / 4)


def test_evaluate_policy_returns_finite_numbers(trained):
    _, _, policy, _ = trained
    res = evaluate_policy(PointMass(num_envs=16), policy, episodes=20)
    assert res["episodes"] == 32 and 0.0 <= res["success_rate"] <= 1.0  # 2 per env
    assert np.isfinite([res["mean_return"], res["std_return"], res["mean_length"]]).all()
    assert 1 <= res["mean_length"] <= 50
    stoch = evaluate_policy(PointMass(num_envs=16), policy, episodes=20, deterministic=False)
    assert np.isfinite(stoch["mean_return"])


def test_env_contract_errors():
    env = PointMass(num_envs=4)
    env.single_action_space = gym.spaces.Box(-1.0, 1.0, (2, 2), np.float32)
    with pytest.raises(ConfigError, match="single_action_space: expected a 1-D Box"):
        train_ppo(env, SMALL, iterations=1)
    with pytest.raises(ConfigError, match="iterations"):
        train_ppo(PointMass(num_envs=4), SMALL, iterations=0)


runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "--task", "hover", "--envs", "0"], "--envs"),
        (["train", "--task", "hover", "--iterations", "0"], "--iterations"),
        (["train", "--task", "hover", "--device", "tpu"], "--device"),
        (["train", "--task", "hover", "--set", "lr=-1"], "PPOConfig.lr"),
        (["train", "--task", "hover", "--set", "nope"], "FIELD=VALUE"),
        (["train", "--recipe", "nope"], "unknown recipe 'nope'; valid names: aerial-gym-quad"),
        (["train", "--task", "hover", "--stop-at", "1.5"], "--stop-at"),
        (["train", "--task", "hover", "--stop-at", "0.9", "--val-every", "0"], "--val-every"),
        (["train", "--task", "hover", "--stop-at", "0.9", "--val-first", "0"], "--val-first"),
        (["train", "--recipe", "hover-fast", "--task", "navigate"], "recipe 'hover-fast'"),
        (["train"], "--task: required"),
        (["eval", "--policy", "missing.pt", "--task", "hover"], "--policy"),
        (["eval", "--policy", "missing.pt", "--task", "hover", "--episodes", "0"], "--episodes"),
    ],
)
def test_cli_bad_options_exit_2_with_one_line(args, message, tmp_path):
    r = runner.invoke(app, ["rl", *args, "--out", str(tmp_path)])
    assert r.exit_code == 2, r.output
    assert message in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_cli_unknown_option_exits_2():
    r = runner.invoke(app, ["rl", "train", "--task", "hover", "--bogus", "1"])
    assert r.exit_code == 2 and "bogus" in r.output


def test_cli_recipe_sets_what_is_not_given(tmp_path, monkeypatch):
    from volary.studies.rl.recipes import RECIPES

    calls = []

    def make_env(name, n_envs, **options):
        calls.append((name, n_envs, options))
        return PointMass(n_envs)

    monkeypatch.setattr("volary.studies.rl.cli._make_env", lambda task, envs, seed, device, options:
                        make_env(task, envs, seed=seed, device=device, **options))  # fmt: skip
    out = tmp_path / "run"
    args = ["--recipe", "hover-fast", "--learner", "volary", "--iterations", "2", "--envs", "8",
            "--set", "hidden=8,8", "--stop-at", "0"]  # fmt: skip
    r = runner.invoke(app, ["rl", "train", *args, "--env", "compile=false", "--out", str(out)])
    assert r.exit_code == 0, r.output
    rec = RECIPES["hover-fast"]
    ((name, n, options),) = calls
    assert (name, n) == ("hover", 8)  # the recipe's task; the given --envs
    assert options["compile"] is False  # --env over the recipe's compile=numba
    report = json.loads((out / "report.json").read_text())
    cfg = report["config"]
    assert report["iterations"] == 2 and cfg["hidden"] == [8, 8]  # given options win
    for key in ("rollout_steps", "epochs", "lr_schedule", "desired_kl", "normalize_rewards"):
        assert cfg[key] == rec.ppo[key], key  # the rest is the recipe's
    _, _, meta = load_policy(out / "policy.pt")
    assert meta["recipe"] == "hover-fast" and meta["env_options"] == {**rec.env, "compile": False}
    assert meta["learner"] == report["learner"] == "volary"  # --learner over the recipe's
    assert rec.learner == "rsl_rl"
    assert "validation" not in report and meta["stop_at"] is None  # --stop-at 0: none

    # the recipe's own early stop: a validation env of its own seed, checked as the recipe says
    calls.clear()
    out = tmp_path / "stop"
    args = ["--recipe", "hover-fast", "--learner", "volary", "--iterations", "3", "--envs", "8",
            "--set", "hidden=8,8", "--seed", "4", "--val-every", "1",
            "--val-first", "2"]  # fmt: skip
    r = runner.invoke(app, ["rl", "train", *args, "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert [(c[0], c[1], c[2]["seed"]) for c in calls] == [
        ("hover", 8, 4), ("hover", rec.val_episodes, 1_000_003 + 4)]  # fmt: skip
    val = json.loads((out / "report.json").read_text())["validation"]
    assert val["target"] == rec.stop_at and [x["iteration"] for x in val["rows"]] == [2, 3]
    assert "validation:" in r.output and load_policy(out / "policy.pt")[2]["stop_at"] == 0.97


def test_cli_train_and_eval_end_to_end(tmp_path, monkeypatch):
    calls = []

    def make_env(name, n_envs, seed, device):
        calls.append((name, n_envs, seed, device))
        return PointMass(n_envs, device)

    fake = types.ModuleType("volary.envs")
    fake.make_env = make_env  # type: ignore[attr-defined]
    fake.ENVS = ("pm",)  # type: ignore[attr-defined]  # what `--task` is checked against
    monkeypatch.setitem(sys.modules, "volary.envs", fake)
    out = tmp_path / "run"
    args = ["--task", "pm", "--envs", "8", "--iterations", "3", "--seed", "2", "--out", str(out)]
    r = runner.invoke(app, ["rl", "train", *args, "--set", "hidden=8,8", "--log-every", "2"])
    assert r.exit_code == 0, r.output
    assert calls == [("pm", 8, 2, "cpu")] and "samples/s" in r.output
    report = json.loads((out / "report.json").read_text())
    assert report["task"] == "pm" and report["config"]["hidden"] == [8, 8]
    assert (out / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    ev = tmp_path / "ev"
    r = runner.invoke(
        app,
        ["rl", "eval", "--policy", str(out / "policy.pt"), "--task", "pm", "--episodes", "5",
         "--out", str(ev)],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    res = json.loads((ev / "eval.json").read_text())
    assert res["episodes"] == 16 and res["trained_on"] == "pm"  # one per env (16 envs)
    assert np.isfinite(res["mean_return"])
