"""Batched, torch-native PPO (Schulman et al. 2017) with GAE (Schulman et al. 2016).

Trains a Gaussian actor-critic against a vector env with same-step autoreset (``DESIGN.md``
beside this file states the env interface). Everything lives on ``env.device``; every random
draw takes an explicit ``torch.Generator``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from volary.config import apply_overrides
from volary.device import resolve as resolve_device
from volary.device import torch_threads
from volary.errors import ConfigError, did_you_mean
from volary.learning.checkpoint import (
    CheckpointKind,
    read_checkpoint,
    state_on_cpu,
    write_checkpoint,
)

# version 1, "volary.rl.ppo/1", is the legacy layout (same fields, a string tag)
CHECKPOINT_KIND = CheckpointKind(
    name="rl.ppo",
    title="PPO policy",
    fields=("config", "obs_dim", "act_dim", "state_dict"),
    version=2,
    legacy_format="volary.rl.ppo/1",
)
CHECKPOINT_FORMAT = CHECKPOINT_KIND.tag
Progress = Callable[[int, dict[str, Any]], None]


@dataclass(frozen=True)
class EarlyStop:
    """Model selection on held-out episodes: after every ``every``-th iteration (from
    ``first``), ``validate(policy)`` gives the deterministic policy's success rate on episodes
    the learner never trains on (the caller builds them: another env, another seed); the run
    stops as soon as it reaches ``target``. A run that never does returns the best policy
    validated (the final one is validated too; ties go to the later). The validations are in
    the report's ``validation`` rows; their wall time counts in the run's wall."""

    validate: Callable[[ActorCritic], float]
    target: float = 0.97
    every: int = 10
    first: int = 10

    def __post_init__(self) -> None:
        if not callable(self.validate):
            raise ConfigError(f"EarlyStop.validate: expected a callable, got {self.validate!r}")
        if isinstance(self.target, bool) or not 0.0 < float(self.target) <= 1.0:
            raise ConfigError(f"EarlyStop.target: expected a success rate in (0, 1], "
                              f"got {self.target!r}")  # fmt: skip
        for name in ("every", "first"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"EarlyStop.{name}: expected an int >= 1, got {v!r}")

    def due(self, done: int, iterations: int) -> bool:
        """Whether to validate after ``done`` iterations of ``iterations`` planned."""
        return done == iterations or (done >= self.first and (done - self.first) % self.every == 0)


class _Selection:
    """The validations of one run: rows, the best policy so far, whether to stop."""

    def __init__(self, stop: EarlyStop) -> None:
        self.stop = stop
        self.rows: list[dict[str, Any]] = []
        self.best: tuple[float, dict[str, Tensor]] | None = None

    def check(self, done: int, policy: ActorCritic) -> bool:
        """Validate ``policy`` after ``done`` iterations; True when it reached the target."""
        t0 = time.perf_counter()
        success = float(self.stop.validate(policy))
        self.rows.append({"iteration": done, "success": success,
                          "wall_s": time.perf_counter() - t0})  # fmt: skip
        if self.best is None or success >= self.best[0]:
            self.best = (success, {k: v.detach().clone() for k, v in policy.state_dict().items()})
        return success >= self.stop.target

    def chosen(self, policy: ActorCritic) -> ActorCritic:
        """``policy`` with the best validated weights loaded."""
        if self.best is not None:
            policy.load_state_dict(self.best[1])
        return policy

    def report(self) -> dict[str, Any]:
        best = max(self.rows, key=lambda r: (r["success"], r["iteration"]))
        return {"target": self.stop.target, "rows": self.rows,
                "reached": best["success"] >= self.stop.target,
                "chosen_iteration": best["iteration"], "chosen_success": best["success"],
                "wall_s": sum(r["wall_s"] for r in self.rows)}  # fmt: skip


LR_SCHEDULES = ("constant", "linear", "adaptive")
LR_BOUNDS = (1e-5, 1e-2)  # the adaptive schedule's floor and ceiling


# ---- config --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PPOConfig:
    """PPO hyper-parameters; validated on construction (``ConfigError`` names the field)."""

    rollout_steps: int = 32  # env steps per iteration (each of N envs)
    epochs: int = 5  # passes over one rollout
    minibatches: int = 4  # minibatches per epoch
    gamma: float = 0.99  # discount
    gae_lambda: float = 0.95  # GAE lambda (Schulman et al. 2016)
    clip: float = 0.2  # PPO ratio clip epsilon (Schulman et al. 2017 eq. 7)
    lr: float = 3e-4  # Adam learning rate
    lr_schedule: str = "constant"  # LR_SCHEDULES: constant, linear to 0, or KL-adaptive
    desired_kl: float = 0.01  # the adaptive schedule's target approx KL per minibatch
    value_coef: float = 0.5  # c_1 of eq. 9
    entropy_coef: float = 0.0  # c_2 of eq. 9
    max_grad_norm: float = 1.0  # global gradient-norm clip
    hidden: tuple[int, ...] = (64, 64)  # tanh MLP widths, actor and critic each
    init_log_std: float = -0.5  # initial log std of the Gaussian policy
    normalize_obs: bool = True  # running mean/std of observations (stored in the checkpoint)
    obs_clip: float | None = 10.0  # normalized observations clipped to +-obs_clip (None: not)
    normalize_advantages: bool = True  # per-minibatch advantage standardization
    normalize_rewards: bool = False  # divide rewards by the running std of discounted returns
    seed: int = 0  # network init, sampling and minibatch shuffling
    threads: int = 1  # torch CPU threads while training

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", _check_hidden(self.hidden))
        for name in ("rollout_steps", "epochs", "minibatches", "threads"):
            _check_int(name, getattr(self, name), low=1)
        _check_int("seed", self.seed, low=0)
        for name in ("gamma", "gae_lambda"):
            _check_float(name, getattr(self, name), "in [0, 1]", lambda v: 0.0 <= v <= 1.0)
        for name in ("clip", "lr", "max_grad_norm", "desired_kl"):
            _check_float(name, getattr(self, name), "> 0", lambda v: v > 0.0)
        for name in ("value_coef", "entropy_coef"):
            _check_float(name, getattr(self, name), ">= 0", lambda v: v >= 0.0)
        _check_float("init_log_std", self.init_log_std, "in [-20, 2]", lambda v: -20 <= v <= 2)
        if self.obs_clip is not None:
            _check_float("obs_clip", self.obs_clip, "> 0 (or None: not clipped)",
                         lambda v: v > 0.0)  # fmt: skip
        if self.lr_schedule not in LR_SCHEDULES:
            raise ConfigError(
                f"PPOConfig.lr_schedule: expected one of {', '.join(LR_SCHEDULES)}, "
                f"got {self.lr_schedule!r}"
            )
        for name in ("normalize_obs", "normalize_advantages", "normalize_rewards"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"PPOConfig.{name}: expected a bool, got {getattr(self, name)!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (lists, numbers, bools): JSON- and ``weights_only``-safe."""
        d = asdict(self)
        d["hidden"] = list(self.hidden)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PPOConfig:
        """Inverse of ``to_dict``; unknown keys raise ``ConfigError`` listing the valid ones."""
        _check_keys(data)
        return cls(**data)

    def override(self, items: Iterable[str]) -> PPOConfig:
        """A copy with ``"field=value"`` overrides (the CLI's ``--set``; volary.config)."""
        return apply_overrides(self, items)


def _check_keys(data: dict[str, Any]) -> None:
    valid = {f.name for f in fields(PPOConfig)}
    unknown = sorted(set(data) - valid)
    if unknown:
        raise ConfigError(
            f"PPOConfig: unknown field(s) {', '.join(unknown)}"
            f"{did_you_mean(unknown[0], sorted(valid))}; valid: {', '.join(sorted(valid))}"
        )


def _check_int(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"PPOConfig.{name}: expected an int >= {low}, got {value!r}")


def _check_float(name: str, value: Any, expected: str, ok: Callable[[float], bool]) -> None:
    good = isinstance(value, int | float) and not isinstance(value, bool)
    if not good or not math.isfinite(value) or not ok(float(value)):
        raise ConfigError(f"PPOConfig.{name}: expected a finite number {expected}, got {value!r}")


def _check_hidden(value: Any) -> tuple[int, ...]:
    try:
        widths = tuple(value)
    except TypeError:
        widths = ()
    if not widths or not all(isinstance(w, int) and not isinstance(w, bool) for w in widths):
        raise ConfigError(f"PPOConfig.hidden: expected a non-empty tuple of ints, got {value!r}")
    if min(widths) < 1:
        raise ConfigError(f"PPOConfig.hidden: expected widths >= 1, got {value!r}")
    return widths


# ---- networks ------------------------------------------------------------------------------------
class RunningNorm(nn.Module):
    """Running mean/variance of observations (parallel Welford; Chan et al. 1979), float64;
    ``(x - mean) / sqrt(var + eps)``, clipped to +-``clip`` (``None``: not clipped)."""

    mean: Tensor  # (D,)
    var: Tensor  # (D,)
    count: Tensor  # () samples seen

    def __init__(
        self, dim: int, enabled: bool = True, eps: float = 1e-8, clip: float | None = 10.0
    ) -> None:
        super().__init__()
        self.enabled, self.eps, self.clip = enabled, eps, clip
        self.register_buffer("mean", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("var", torch.ones(dim, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: Tensor) -> None:
        """Fold a batch (..., D) into the running moments."""
        if not self.enabled:
            return
        x = x.reshape(-1, x.shape[-1]).to(torch.float64)
        n, mean, var = x.shape[0], x.mean(0), x.var(0, unbiased=False)
        total = self.count + n
        delta = mean - self.mean
        m2 = self.var * self.count + var * n + delta**2 * self.count * n / total
        self.mean.add_(delta * n / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    @property
    def bound(self) -> float:
        """The clip as a number: ``clip``, or infinity when not clipped (exports, kernels)."""
        return math.inf if self.clip is None else float(self.clip)

    def forward(self, x: Tensor) -> Tensor:
        if not self.enabled:
            return x
        z = (x - self.mean.to(x.dtype)) / torch.sqrt(self.var.to(x.dtype) + self.eps)
        return z if self.clip is None else z.clamp(-self.clip, self.clip)


def _mlp(sizes: list[int], out_gain: float, generator: torch.Generator) -> nn.Sequential:
    """Tanh MLP initialized from ``generator`` only. ``skip_init``: nn.Linear's own init would
    draw from torch's global generator, which rsl_rl samples its actions from, so building an
    ActorCritic mid-run (every validation of an rsl_rl run) would change that run."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        lin = nn.utils.skip_init(nn.Linear, a, b)
        last = i == len(sizes) - 2
        nn.init.orthogonal_(lin.weight, out_gain if last else math.sqrt(2.0), generator=generator)
        nn.init.zeros_(lin.bias)
        layers += [lin] if last else [lin, nn.Tanh()]
    return nn.Sequential(*layers)


class ActorCritic(nn.Module):
    """Gaussian policy N(mu(o), diag(exp(log_std))^2) with a state-independent log std, and a
    separate value MLP; both see the running-normalized observation."""

    def __init__(self, obs_dim: int, act_dim: int, cfg: PPOConfig) -> None:
        super().__init__()
        self.obs_dim, self.act_dim = obs_dim, act_dim
        gen = torch.Generator().manual_seed(cfg.seed)  # CPU init: same weights on every device
        self.obs_norm = RunningNorm(obs_dim, enabled=cfg.normalize_obs, clip=cfg.obs_clip)
        self.actor = _mlp([obs_dim, *cfg.hidden, act_dim], 0.01, gen)
        self.critic = _mlp([obs_dim, *cfg.hidden, 1], 1.0, gen)
        self.log_std = nn.Parameter(torch.full((act_dim,), float(cfg.init_log_std)))

    def value(self, obs: Tensor) -> Tensor:
        """V(o) (...,) from raw observations (..., D)."""
        return self.critic(self.obs_norm(obs))[..., 0]

    def dist(self, obs_n: Tensor) -> torch.distributions.Normal:
        """The action distribution given normalized observations (..., D)."""
        mu = self.actor(obs_n)  # (arguments are finite by construction: no validation cost)
        return torch.distributions.Normal(mu, self.log_std.exp().expand_as(mu), validate_args=False)

    @torch.no_grad()
    def mlp_policy(self) -> Any:
        """The deterministic policy (the mean, clipped) as plain arrays
        (:class:`volary.envs.policy.MlpPolicy`) for an env's one-call evaluation."""
        from volary.envs.policy import MlpPolicy

        lin = [m for m in self.actor if isinstance(m, nn.Linear)]
        ws = tuple(m.weight.detach().cpu().to(torch.float32).numpy().copy() for m in lin)
        bs = tuple(m.bias.detach().cpu().to(torch.float32).numpy().copy() for m in lin)
        norm = self.obs_norm
        if not norm.enabled:
            return MlpPolicy(ws, bs)
        mean = norm.mean.to(torch.float32)
        std = torch.sqrt(norm.var.to(torch.float32) + norm.eps)
        return MlpPolicy(ws, bs, mean.cpu().numpy(), std.cpu().numpy(), norm.bound)

    @torch.no_grad()
    def sample(
        self, obs: Tensor, generator: torch.Generator
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(unclipped action (N, A), its log-prob (N,), V (N,), the mean (N, A)) for raw
        observations (N, D)."""
        obs_n = self.obs_norm(obs)
        d = self.dist(obs_n)
        noise = torch.randn(d.loc.shape, generator=generator, device=obs.device, dtype=obs.dtype)
        a = d.loc + d.scale * noise
        return a, d.log_prob(a).sum(-1), self.critic(obs_n)[..., 0], d.loc

    @torch.no_grad()
    def act(
        self, obs: Tensor, deterministic: bool = False, generator: torch.Generator | None = None
    ) -> Tensor:
        """Env actions in [-1, 1]^A: the mean, or a sample (``generator`` on obs's device)."""
        d = self.dist(self.obs_norm(obs))
        if deterministic:
            return d.loc.clamp(-1.0, 1.0)
        if generator is None:
            raise ConfigError("ActorCritic.act: a stochastic action needs an explicit generator")
        noise = torch.randn(d.loc.shape, generator=generator, device=obs.device, dtype=obs.dtype)
        return (d.loc + d.scale * noise).clamp(-1.0, 1.0)


class Adam:
    """Adam (Kingma & Ba 2015, Algorithm 1) in torch.optim.Adam's form (``eps`` added to
    ``sqrt(v_t / (1 - beta2^t))``, bias-corrected step ``lr / (1 - beta1^t)``), same update.

    Written here, not taken from ``torch.optim``, only because ``torch.optim.Optimizer.step``
    imports ``torch._dynamo`` on first use: 1.7 s of interpreter work, a sixth of the fixed
    cost of a ``volary rl train`` process (issue 22's 30 s hover budget). Parity with
    torch.optim.Adam is tested. ``param_groups[0]["lr"]`` is the step size schedules set.
    """

    def __init__(
        self, params: Iterable[Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:  # fmt: skip
        self.params = [p for p in params if p.requires_grad]
        self.param_groups = [{"lr": float(lr)}]
        self.betas, self.eps, self.t = betas, eps, 0
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        b1, b2 = self.betas
        lr = self.param_groups[0]["lr"]
        step_size = lr / (1.0 - b1**self.t)
        bc2_sqrt = math.sqrt(1.0 - b2**self.t)
        for p, m, v in zip(self.params, self.m, self.v, strict=True):
            if p.grad is None:
                continue
            g = p.grad
            m.lerp_(g, 1.0 - b1)  # m = b1 m + (1 - b1) g
            v.mul_(b2).addcmul_(g, g, value=1.0 - b2)
            p.addcdiv_(m, (v.sqrt() / bc2_sqrt).add_(self.eps), value=-step_size)


# ---- the equations -------------------------------------------------------------------------------
def gae(
    rewards: Tensor,
    values: Tensor,
    next_values: Tensor,
    terminated: Tensor,
    done: Tensor,
    gamma: float,
    lam: float,
) -> tuple[Tensor, Tensor]:
    """Generalized advantage estimation (Schulman et al. 2016, eq. 16), all (T, N).

    delta_t = r_t + gamma (1 - term_t) V(s_{t+1}) - V(s_t), A_t = delta_t + gamma lambda
    (1 - done_t) A_{t+1}, A_T = 0. ``next_values[t]`` is V of the true successor of step t: the
    next rollout observation, or V(final_obs) where the episode ended (a truncated episode is
    bootstrapped from it, a terminated one is not). Returns (advantages, value targets A + V).
    """
    not_term, not_done = 1.0 - terminated.to(values.dtype), 1.0 - done.to(values.dtype)
    deltas = rewards + gamma * not_term * next_values - values
    adv = torch.zeros_like(values)
    last = torch.zeros_like(values[0])
    for t in range(values.shape[0] - 1, -1, -1):
        last = deltas[t] + gamma * lam * not_done[t] * last
        adv[t] = last
    return adv, adv + values


def gaussian_kl(mu0: Tensor, log_std0: Tensor, mu1: Tensor, log_std1: Tensor) -> Tensor:
    """KL(N(mu0, s0^2) || N(mu1, s1^2)) of diagonal Gaussians, summed over the last axis:
    sum log(s1 / s0) + (s0^2 + (mu0 - mu1)^2) / (2 s1^2) - 1/2."""
    var0, var1 = torch.exp(2.0 * log_std0), torch.exp(2.0 * log_std1)
    kl = log_std1 - log_std0 + (var0 + (mu0 - mu1) ** 2) / (2.0 * var1) - 0.5
    return kl.sum(-1)


def ppo_loss(
    policy: ActorCritic, batch: dict[str, Tensor], cfg: PPOConfig
) -> tuple[Tensor, dict[str, Tensor]]:
    """-L^{CLIP+VF+S} (Schulman et al. 2017, eq. 9) of one minibatch, and detached statistics.

    L^CLIP = E[min(r A, clip(r, 1 - eps, 1 + eps) A)] with r = pi(a|s) / pi_old(a|s) (eq. 7);
    L^VF = 1/2 (V(s) - V_targ)^2; S the Gaussian entropy. approx KL is E[(r - 1) - log r].
    """
    d = policy.dist(batch["obs"])
    logp = d.log_prob(batch["actions"]).sum(-1)
    log_ratio = logp - batch["logp"]
    ratio = log_ratio.exp()
    adv = batch["adv"]
    if cfg.normalize_advantages and adv.numel() > 1:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    clipped = ratio.clamp(1.0 - cfg.clip, 1.0 + cfg.clip)
    policy_loss = -torch.min(ratio * adv, clipped * adv).mean()
    value_loss = 0.5 * (policy.critic(batch["obs"])[..., 0] - batch["returns"]).pow(2).mean()
    entropy = d.entropy().sum(-1).mean()
    loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy
    with torch.no_grad():
        stats = {
            "policy_loss": policy_loss.detach(),
            "value_loss": value_loss.detach(),
            "entropy": entropy.detach(),
            "approx_kl": ((ratio - 1.0) - log_ratio).mean(),
            "kl": gaussian_kl(
                batch["mu"], batch["log_std"], d.loc, policy.log_std.expand_as(d.loc)
            ).mean(),
            "clip_fraction": ((ratio - 1.0).abs() > cfg.clip).float().mean(),
        }
    return loss, stats


# ---- rollouts ------------------------------------------------------------------------------------
class _Episodes:
    """Sums and counts of episode returns/lengths ended since the last ``pop`` (on device)."""

    def __init__(self, n: int, device: torch.device) -> None:
        self.ret = torch.zeros(n, dtype=torch.float64, device=device)  # own running return
        self.len = torch.zeros(n, dtype=torch.float64, device=device)
        self.sums = torch.zeros(3, dtype=torch.float64, device=device)  # count, return, length

    def add(self, reward: Tensor, done: Tensor, info: dict[str, Any]) -> None:
        self.ret += reward.to(torch.float64)
        self.len += 1.0
        ret = info.get("episode_return", self.ret)
        length = info.get("episode_length", self.len)
        mask = done.to(torch.float64)
        self.sums += torch.stack(
            [mask.sum(), (ret.to(torch.float64) * mask).sum(), (length * mask).sum()]
        )
        self.ret *= 1.0 - mask
        self.len *= 1.0 - mask

    def pop(self) -> tuple[int, float | None, float | None]:
        count, ret, length = self.sums.tolist()
        self.sums.zero_()
        if count == 0:
            return 0, None, None
        return int(count), ret / count, length / count


class RewardScale:
    """Reward scaling (Engstrom et al. 2020, "Implementation Matters", Sec. 3): rewards are
    divided by the running standard deviation of each env's discounted return
    ``G_t = gamma G_{t-1} + r_t`` (reset at episode ends), so value targets stay O(1) whatever
    the task's reward magnitude. Running moments: parallel Welford in float64 (Chan et al.)."""

    def __init__(self, n: int, gamma: float, device: torch.device, eps: float = 1e-8) -> None:
        self.gamma, self.eps = gamma, eps
        self.ret = torch.zeros(n, dtype=torch.float64, device=device)
        self.stats = RunningNorm(1).to(device)

    @torch.no_grad()
    def __call__(self, reward: Tensor, done: Tensor) -> Tensor:
        self.ret = self.ret * self.gamma + reward.to(torch.float64)
        self.stats.update(self.ret[:, None])
        scaled = reward / torch.sqrt(self.stats.var[0] + self.eps).to(reward.dtype)
        self.ret = torch.where(done, 0.0, self.ret)
        return scaled


def _final_obs(info: dict[str, Any], obs: Tensor) -> Tensor:
    final = info.get("final_obs")
    if final is None:
        raise ConfigError("env.step: expected info['final_obs'] (N, D) when an episode ends")
    return final.to(obs.dtype)


def collect_rollout(
    env: Any,
    policy: ActorCritic,
    obs: Tensor,
    cfg: PPOConfig,
    gen: torch.Generator,
    episodes: _Episodes,
    scale: RewardScale | None = None,
) -> tuple[dict[str, Tensor], Tensor]:
    """Run ``cfg.rollout_steps`` steps; return the flat training batch and the next obs.
    ``scale`` (``cfg.normalize_rewards``) scales the rewards trained on; episode statistics
    keep the env's own."""
    keys = ("obs", "actions", "logp", "values", "r", "mu")
    buf: dict[str, list[Tensor]] = {k: [] for k in keys}
    term_l, done_l, next_v = [], [], []
    for _ in range(cfg.rollout_steps):
        policy.obs_norm.update(obs)
        action, logp, value, mu = policy.sample(obs, gen)
        nxt, reward, terminated, truncated, info = env.step(action.clamp(-1.0, 1.0))
        done = terminated | truncated
        r_train = reward if scale is None else scale(reward, done)
        row = (policy.obs_norm(obs), action, logp, value, r_train, mu)
        for k, v in zip(buf, row, strict=True):
            buf[k].append(v)
        term_l.append(terminated)
        done_l.append(done)
        episodes.add(reward, done, info)
        with torch.no_grad():  # V(final_obs) bootstraps truncations; terminations get gamma * 0
            v_end = policy.value(_final_obs(info, nxt)) if bool(done.any()) else value
        next_v.append(v_end)
        obs = nxt
    with torch.no_grad():
        last_v = policy.value(obs)
    values, dones = torch.stack(buf["values"]), torch.stack(done_l)
    following = torch.cat([values[1:], last_v[None]])
    next_values = torch.where(dones, torch.stack(next_v), following)
    adv, ret = gae(
        torch.stack(buf["r"]).to(values.dtype), values, next_values,
        torch.stack(term_l), dones, cfg.gamma, cfg.gae_lambda,
    )  # fmt: skip
    batch = {k: torch.stack(buf[k]).flatten(0, 1) for k in ("obs", "actions", "logp", "mu")}
    batch["log_std"] = policy.log_std.detach().expand_as(batch["mu"])  # the sampling policy's
    batch.update(adv=adv.flatten(), returns=ret.flatten())
    return batch, obs


def update_policy(
    policy: ActorCritic,
    opt: Adam | torch.optim.Optimizer,
    batch: dict[str, Tensor],
    cfg: PPOConfig,
    gen: torch.Generator,
) -> dict[str, float]:
    """``cfg.epochs`` passes of shuffled minibatch gradient steps; mean statistics."""
    n = batch["adv"].shape[0]
    totals: dict[str, Tensor] = {}
    steps = 0
    for _ in range(cfg.epochs):
        perm = torch.randperm(n, generator=gen, device=gen.device)
        for idx in perm.tensor_split(min(cfg.minibatches, n)):
            loss, stats = ppo_loss(policy, {k: v[idx] for k, v in batch.items()}, cfg)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
            if cfg.lr_schedule == "adaptive":
                adapt_lr(opt, float(stats["kl"]), cfg.desired_kl)
            opt.step()
            for k, v in stats.items():
                totals[k] = totals.get(k, torch.zeros_like(v)) + v
            steps += 1
    return {k: float(v) / steps for k, v in totals.items()}


# ---- training ------------------------------------------------------------------------------------
def _space_dim(space: Any, what: str) -> int:
    shape = getattr(space, "shape", None)
    if shape is None or len(shape) != 1 or shape[0] < 1:
        raise ConfigError(f"env.{what}: expected a 1-D Box, got {space!r}")
    return int(shape[0])


def _check_obs(obs: Any, n: int, dim: int, device: torch.device) -> Tensor:
    if not isinstance(obs, Tensor) or tuple(obs.shape) != (n, dim):
        got = tuple(obs.shape) if isinstance(obs, Tensor) else type(obs).__name__
        raise ConfigError(f"env.reset: expected an obs tensor of shape ({n}, {dim}), got {got}")
    if obs.device != device:
        raise ConfigError(f"env.reset: expected obs on {device}, got {obs.device}")
    return obs.float()


def train_ppo(
    env: Any,
    cfg: PPOConfig,
    iterations: int,
    progress: Progress | None = None,
    stop: EarlyStop | None = None,
) -> tuple[ActorCritic, dict[str, Any]]:
    """Train a new ActorCritic for ``iterations`` rollouts + updates (at most, with ``stop``).

    Returns (policy in eval mode, report). ``report["history"]`` holds per-iteration columns
    (episodes ended, their mean return and length, losses, approx KL, clip fraction, entropy),
    deterministic per seed for a deterministic env; ``report["timing"]`` holds samples/s and
    wall time. ``progress(iteration, row)`` is called after each iteration. ``stop``: validate
    and stop early (:class:`EarlyStop`; ``report["validation"]``).
    """
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise ConfigError(f"train_ppo: iterations expected an int >= 1, got {iterations!r}")
    with torch_threads(cfg.threads):
        return _train(env, cfg, iterations, progress, stop)


def _train(
    env: Any, cfg: PPOConfig, iterations: int, progress: Progress | None, stop: EarlyStop | None
) -> tuple[ActorCritic, dict[str, Any]]:
    t0 = time.perf_counter()
    trainer = PPOTrainer(env, cfg, iterations)
    selection = _Selection(stop) if stop is not None else None
    for it in range(iterations):
        row = trainer.iterate()
        if progress is not None:
            progress(it, row)
        if selection is not None and stop is not None and stop.due(it + 1, iterations):
            if selection.check(it + 1, trainer.policy):
                break
    report = trainer.report()
    policy = trainer.policy.eval()
    if selection is not None:
        policy = selection.chosen(policy)
        report["validation"] = selection.report()
        report["timing"]["run_wall_s"] = time.perf_counter() - t0
    return policy, report


class PPOTrainer:
    """One PPO run, an iteration (rollout + update) at a time: ``train_ppo`` is a loop of
    ``iterate``; callers that evaluate or stop on their own (benchmarks) drive it directly.

    Builds the policy, the optimizer and the generator and resets ``env`` on construction;
    ``iterations`` is the planned length (the linear learning-rate schedule's horizon).
    """

    def __init__(self, env: Any, cfg: PPOConfig, iterations: int) -> None:
        if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
            raise ConfigError(f"PPOTrainer: iterations expected an int >= 1, got {iterations!r}")
        self.env, self.cfg, self.iterations = env, cfg, iterations
        self.device, self.n = resolve_device(env.device), int(env.num_envs)
        obs_dim = _space_dim(env.single_observation_space, "single_observation_space")
        act_dim = _space_dim(env.single_action_space, "single_action_space")
        self.policy = ActorCritic(obs_dim, act_dim, cfg).to(self.device)
        self.opt = Adam(self.policy.parameters(), lr=cfg.lr, eps=1e-5)
        self.gen = torch.Generator(device=self.device).manual_seed(cfg.seed)
        obs, _ = env.reset(seed=cfg.seed)
        self.obs = _check_obs(obs, self.n, obs_dim, self.device)
        self.episodes = _Episodes(self.n, self.device)
        self.scale = RewardScale(self.n, cfg.gamma, self.device) if cfg.normalize_rewards else None
        self.done = 0  # iterations run
        self.history: dict[str, list[Any]] = {}
        self.timing: dict[str, list[float]] = {"samples_per_s": [], "wall_s": []}

    def iterate(self) -> dict[str, Any]:
        """One rollout and update; its history row with samples/s and wall s added."""
        t0 = time.perf_counter()
        self.policy.train()
        _set_lr(self.opt, self.cfg, min(self.done, self.iterations - 1), self.iterations)
        batch, self.obs = collect_rollout(
            self.env, self.policy, self.obs, self.cfg, self.gen, self.episodes, self.scale
        )
        stats = update_policy(self.policy, self.opt, batch, self.cfg, self.gen)
        count, ret, length = self.episodes.pop()
        row: dict[str, Any] = {"episodes": count, "mean_return": ret, "mean_length": length}
        row.update(stats)
        for k, v in row.items():
            self.history.setdefault(k, []).append(v)
        dt = time.perf_counter() - t0
        self.timing["samples_per_s"].append(self.n * self.cfg.rollout_steps / dt)
        self.timing["wall_s"].append(dt)
        self.done += 1
        return {**row, "samples_per_s": self.timing["samples_per_s"][-1], "wall_s": dt}

    def report(self) -> dict[str, Any]:
        """The run so far: config, sizes, per-iteration history and timing (train_ppo's)."""
        return {
            "config": self.cfg.to_dict(),
            "num_envs": self.n,
            "device": str(self.device),
            "iterations": self.done,
            "samples": self.done * self.n * self.cfg.rollout_steps,
            "history": self.history,
            "timing": {**self.timing, "total_wall_s": sum(self.timing["wall_s"])},
        }


def learning_rate(cfg: PPOConfig, iteration: int, iterations: int) -> float:
    """The Adam step size of ``iteration`` (0-based) of ``iterations`` for the fixed
    schedules: ``cfg.lr``, or for ``lr_schedule="linear"`` ``cfg.lr (1 - iteration /
    iterations)`` (annealed towards 0, the schedule of Schulman et al. 2017's Atari and MuJoCo
    runs)."""
    if cfg.lr_schedule == "linear":
        return cfg.lr * (1.0 - iteration / iterations)
    return cfg.lr


def adapt_lr(opt: Adam | torch.optim.Optimizer, kl: float, desired: float) -> None:
    """KL-adaptive step size (Schulman et al. 2017 Sec. 4's adaptive KL rule applied to the
    learning rate, as in Rudin et al. 2021's massively parallel PPO): a minibatch whose KL
    from the sampling policy (exact, :func:`gaussian_kl`) exceeds 2 x ``desired`` divides
    the rate by 1.5, one below ``desired`` / 2 multiplies it
    by 1.5, within :data:`LR_BOUNDS`."""
    for group in opt.param_groups:
        if kl > 2.0 * desired:
            group["lr"] = max(group["lr"] / 1.5, LR_BOUNDS[0])
        elif 0.0 < kl < 0.5 * desired:
            group["lr"] = min(group["lr"] * 1.5, LR_BOUNDS[1])


def _set_lr(
    opt: Adam | torch.optim.Optimizer, cfg: PPOConfig, iteration: int, iterations: int
) -> None:
    if cfg.lr_schedule == "adaptive":
        return  # the rate carried over from the last minibatch (adapt_lr)
    for group in opt.param_groups:
        group["lr"] = learning_rate(cfg, iteration, iterations)


# ---- evaluation ----------------------------------------------------------------------------------
@torch.no_grad()
def evaluate_policy(
    env: Any,
    policy: ActorCritic,
    episodes: int,
    deterministic: bool = True,
    seed: int = 0,
    max_steps: int = 100_000,
    groups: Sequence[str] | None = None,
    kernel: bool = True,
) -> dict[str, Any]:
    """Every env's first ``k = ceil(episodes / num_envs)`` episodes (``k * num_envs`` >=
    ``episodes`` in all; not "the first to end", which would favour short episodes).

    Returns episodes, mean/std return, mean length and the success rate when the env reports
    ``info["success"]`` at episode end (else None), and under ``metrics`` each of the env's
    ``episode_metrics`` info fields: its mean and median over the episodes where it is finite
    and that count (a task reports NaN where a metric does not apply, e.g. tracking error of an
    episode that crashed). Stochastic actions draw from a generator seeded with ``seed``.
    ``groups``: a label per env (e.g. its airframe); adds ``groups``, label -> episodes, success
    rate and mean return of that label's envs.

    ``kernel``: with deterministic actions and one episode per env (k = 1), a policy that
    offers ``mlp_policy()`` (an ActorCritic) and an env that offers ``evaluate_mlp`` (the
    position tasks on the numba backend) fly them in one call
    (:mod:`volary.envs.fused_position`; 3.8-7.6x faster than stepping 64 envs, 1.2-1.6x at
    1,024 where the physics dominates: `benchmarks/rl_eval.py`); False steps the env.
    """
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ConfigError(f"evaluate_policy: episodes expected an int >= 1, got {episodes!r}")
    device, n = resolve_device(env.device), int(env.num_envs)
    k = -(-episodes // n)
    policy = policy.to(device).eval()
    if groups is not None and len(groups) != n:
        raise ConfigError(f"evaluate_policy: groups expected {n} labels (one per env), "
                          f"got {len(groups)}")  # fmt: skip
    fast = getattr(env, "evaluate_mlp", None) if kernel and deterministic and k == 1 else None
    as_mlp = getattr(policy, "mlp_policy", None)  # any policy with act() is stepped otherwise
    ends = fast(as_mlp(), seed) if fast is not None and as_mlp is not None else None
    if ends is not None:
        names = tuple(getattr(env, "episode_metrics", ()))
        return _summary(
            [torch.from_numpy(ends["episode_return"]).to(torch.float64)],
            [torch.from_numpy(ends["episode_length"]).to(torch.float64)],
            [torch.from_numpy(ends["success"]).to(torch.float64)],
            {name: [torch.from_numpy(ends[name]).to(torch.float64)] for name in names},
            [torch.arange(n)], groups,
        )  # fmt: skip
    gen = torch.Generator(device=device).manual_seed(seed)
    obs, _ = env.reset(seed=seed)
    obs = _check_obs(obs, n, policy.obs_dim, device)
    ret = torch.zeros(n, dtype=torch.float64, device=device)
    length = torch.zeros(n, dtype=torch.float64, device=device)
    count = torch.zeros(n, dtype=torch.int64, device=device)
    rets: list[Tensor] = []
    lens: list[Tensor] = []
    succ: list[Tensor] = []
    names = tuple(getattr(env, "episode_metrics", ()))
    which: list[Tensor] = []  # the env of every counted episode
    extra: dict[str, list[Tensor]] = {name: [] for name in names}
    for _ in range(max_steps):
        action = policy.act(obs, deterministic=deterministic, generator=gen)
        obs, reward, terminated, truncated, info = env.step(action)
        ret += reward.to(torch.float64)
        length += 1.0
        done = terminated | truncated
        if bool(done.any()):
            keep = done & (count < k)  # an env's episodes beyond its first k are not counted
            rets.append(info.get("episode_return", ret)[keep].to(torch.float64))
            lens.append(info.get("episode_length", length)[keep].to(torch.float64))
            if "success" in info:
                succ.append(info["success"][keep].to(torch.float64))
            for name in names:
                extra[name].append(info[name][keep].to(torch.float64))
            which.append(keep.nonzero()[:, 0])
            count += done.to(torch.int64)
            ret, length = ret * ~done, length * ~done
        if bool((count >= k).all()):
            break
    else:
        found = int(count.clamp(max=k).sum())
        raise ConfigError(f"evaluate_policy: {found} of {k * n} episodes in {max_steps} steps")
    return _summary(rets, lens, succ, extra, which, groups)


def _summary(
    rets: list[Tensor],
    lens: list[Tensor],
    succ: list[Tensor],
    extra: dict[str, list[Tensor]],
    which: list[Tensor],
    groups: Sequence[str] | None,
) -> dict[str, Any]:
    """evaluate_policy's result from the counted episodes' returns, lengths, successes,
    metrics and envs."""
    r, ln = torch.cat(rets), torch.cat(lens)
    out = {
        "episodes": int(r.numel()),
        "mean_return": float(r.mean()),
        "std_return": float(r.std(unbiased=False)),
        "mean_length": float(ln.mean()),
        "success_rate": float(torch.cat(succ).mean()) if succ else None,
        "metrics": {name: _finite_summary(torch.cat(v)) for name, v in extra.items()},
    }
    if groups is not None:
        out["groups"] = _by_group(groups, torch.cat(which).cpu(), r.cpu(),
                                  torch.cat(succ).cpu() if succ else None)  # fmt: skip
    return out


def _by_group(
    groups: Sequence[str], env_of: Tensor, returns: Tensor, success: Tensor | None
) -> dict[str, dict[str, Any]]:
    """Episodes, success rate and mean return per label (labels in first-seen order)."""
    label = [groups[int(i)] for i in env_of]
    out: dict[str, dict[str, Any]] = {}
    for g in dict.fromkeys(groups):
        idx = torch.tensor([k for k, lab in enumerate(label) if lab == g], dtype=torch.long)
        out[g] = {
            "episodes": int(idx.numel()),
            "success_rate": None if success is None or idx.numel() == 0
            else float(success[idx].mean()),
            "mean_return": float(returns[idx].mean()) if idx.numel() else None,
        }  # fmt: skip
    return out


def _finite_summary(values: Tensor) -> dict[str, Any]:
    """Mean and median of the finite ``values`` and their count (None where none is)."""
    v = values[torch.isfinite(values)]
    if v.numel() == 0:
        return {"mean": None, "median": None, "episodes": 0}
    return {"mean": float(v.mean()), "median": float(v.median()), "episodes": int(v.numel())}


# ---- checkpoints ---------------------------------------------------------------------------------
def save_policy(
    path: str | Path, policy: ActorCritic, cfg: PPOConfig, meta: dict[str, Any] | None = None
) -> Path:
    """Write weights + normalizer (state dict), the config as a plain dict and JSON-able
    metadata, atomically, through :mod:`volary.learning.checkpoint` (``weights_only``-safe)."""
    fields = {
        "config": cfg.to_dict(),
        "obs_dim": policy.obs_dim,
        "act_dim": policy.act_dim,
        "state_dict": state_on_cpu(policy),
    }
    return write_checkpoint(path, CHECKPOINT_KIND, fields, meta)


def load_policy(
    path: str | Path, device: str | torch.device = "cpu"
) -> tuple[ActorCritic, PPOConfig, dict[str, Any]]:
    """(policy in eval mode on ``device``, config, metadata) from ``save_policy``'s file;
    ``FileFormatError`` naming the file and the field for a missing, foreign or malformed
    file."""
    ck = read_checkpoint(path, CHECKPOINT_KIND)
    obs_dim, act_dim = ck.integer("obs_dim"), ck.integer("act_dim")
    with ck.reading("config"):
        cfg = PPOConfig.from_dict(ck["config"])
        policy = ActorCritic(obs_dim, act_dim, cfg)
    ck.load_state(policy)
    return policy.to(device).eval(), cfg, ck.meta


# ---- plots ---------------------------------------------------------------------------------------
def plot_learning_curve(report: dict[str, Any], path: str | Path, title: str = "PPO") -> Path:
    """PNG of mean episode return and length per iteration vs. env samples (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hist = report["history"]
    per_iter = report["samples"] / max(report["iterations"], 1)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for ax, key, label in zip(axes, ("mean_return", "mean_length"), ("return", "length (steps)"),
                              strict=True):  # fmt: skip
        pts = [((i + 1) * per_iter, v) for i, v in enumerate(hist[key]) if v is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".")
        ax.set(xlabel="env samples", ylabel=f"mean episode {label}", title=title)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


__all__ = [
    "LR_SCHEDULES",
    "Adam",
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_KIND",
    "ActorCritic",
    "EarlyStop",
    "PPOConfig",
    "PPOTrainer",
    "RewardScale",
    "RunningNorm",
    "adapt_lr",
    "collect_rollout",
    "evaluate_policy",
    "gae",
    "gaussian_kl",
    "learning_rate",
    "load_policy",
    "plot_learning_curve",
    "ppo_loss",
    "save_policy",
    "train_ppo",
    "update_policy",
]
