"""A position task's one-call evaluation (volary.envs.fused_position) against the env stepped
in torch by the same deterministic policy: every env's first episode ends at the same step, with
the same success, return and tracking error to float32 rounding; every observation layout and
action mode; the result does not depend on the thread count or the batch size.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from volary.envs import make_env
from volary.studies.rl.ppo import ActorCritic, PPOConfig, evaluate_policy

pytest.importorskip("numba")

# short episodes with a wide success radius, so episodes end by time (and succeed or fail)
# as well as by every termination; a random policy of small output gain nearly hovers
CASES = {
    "volary-ctbr": {"max_distance": 2.0},
    "aerial_gym-rotor_thrusts": {
        "observation": "aerial_gym",
        "control": "rotor_thrusts",
        "control_hz": 100.0,
        "physics_hz": 400.0,
        "precision_weight": 1.0,
        "episode_s": 0.6,
        "max_distance": 1.2,
    },  # fmt: skip
    "body-acceleration": {"observation": "body", "control": "acceleration", "max_distance": 1.5},
    "twr-velocity-random_airframes": {
        "observation": "volary_twr",
        "control": "velocity",
        "random_airframes": True,
        "max_distance": 1.2,
    },  # fmt: skip
}
SHORT = {"episode_s": 1.0, "success_radius": 1.0, "start_speed": 0.2, "settle_s": 0.5,
         "compile": "numba"}  # fmt: skip


def _policy(env, seed: int, normalize: bool) -> ActorCritic:
    cfg = PPOConfig(seed=seed, normalize_obs=normalize)
    pol = ActorCritic(env.single_observation_space.shape[0], env.act_dim, cfg)
    if normalize:  # a normalizer that is not the identity
        g = torch.Generator().manual_seed(seed)
        pol.obs_norm.mean.copy_(torch.randn(pol.obs_dim, generator=g, dtype=torch.float64) * 0.1)
        pol.obs_norm.var.copy_(torch.rand(pol.obs_dim, generator=g, dtype=torch.float64) + 0.5)
    return pol.eval()


def _stepped(env, policy: ActorCritic, seed: int) -> dict[str, np.ndarray]:
    """Every env's first episode, stepped through env.step (the reference)."""
    n = env.num_envs
    out = {k: np.full(n, np.nan) for k in ("episode_return", "episode_length", "success",
                                           *env.episode_metrics)}  # fmt: skip
    seen = np.zeros(n, bool)
    obs, _ = env.reset(seed=seed)
    while not seen.all():
        with torch.no_grad():
            obs, _, term, trunc, info = env.step(policy.act(obs, deterministic=True))
        first = ((term | trunc).numpy()) & ~seen
        for k in out:
            out[k][first] = info[k].to(torch.float64).numpy()[first]
        seen |= first
    return out


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("normalize", [False, True])
def test_the_kernel_flies_every_first_episode_as_the_stepped_env_does(case, normalize):
    env = make_env("hover", n_envs=24, seed=4, **{**SHORT, **CASES[case]})
    policy = _policy(env, seed=2, normalize=normalize)
    ref = _stepped(env, policy, seed=9)
    got = env.evaluate_mlp(policy.mlp_policy(), seed=9)
    assert got is not None
    np.testing.assert_array_equal(got["episode_length"], ref["episode_length"])
    np.testing.assert_array_equal(got["success"], ref["success"].astype(bool))
    np.testing.assert_allclose(got["episode_return"], ref["episode_return"], rtol=1e-4, atol=1e-4)
    for name in env.episode_metrics:  # NaN where the episode terminated, in both
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-4, atol=1e-5, equal_nan=True)
    ends = ref["episode_length"]
    assert (ends < env.max_steps).any() and (ends == env.max_steps).any()  # both kinds of end
    if case.startswith("twr"):  # successes and truncations without success
        truncated = ends == env.max_steps
        assert got["success"].any() and (truncated & ~got["success"]).any()


def test_evaluate_policy_summary_is_the_same_through_the_kernel():
    env = make_env("hover", n_envs=32, seed=1, **SHORT)
    policy = _policy(env, seed=5, normalize=False)
    fast = evaluate_policy(env, policy, 32, seed=3)
    slow = evaluate_policy(env, policy, 32, seed=3, kernel=False)
    assert fast["episodes"] == slow["episodes"] == 32
    assert fast["success_rate"] == slow["success_rate"]
    assert fast["mean_length"] == slow["mean_length"]
    assert math.isclose(fast["mean_return"], slow["mean_return"], rel_tol=1e-5)
    for name, s in slow["metrics"].items():
        f = fast["metrics"][name]
        assert f["episodes"] == s["episodes"]
        if s["mean"] is not None:
            assert math.isclose(f["mean"], s["mean"], rel_tol=1e-4)


def test_the_kernel_does_not_depend_on_threads_or_batch_size():
    policy = None
    runs = []
    for n, threads in ((96, 1), (96, 2), (8, 2)):
        env = make_env("hover", n_envs=n, seed=7, **SHORT)
        policy = policy or _policy(env, seed=3, normalize=False)
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            runs.append(env.evaluate_mlp(policy.mlp_policy(), seed=4))
        finally:
            torch.set_num_threads(before)
    for k in runs[0]:
        np.testing.assert_array_equal(runs[0][k], runs[1][k])  # 96 envs, 1 and 2 threads
        np.testing.assert_array_equal(runs[0][k][:8], runs[2][k])  # env i alone in 8


def test_envs_the_kernel_does_not_cover_are_stepped():
    for opts in ({"compile": False}, {"compile": "numba", "goal_hold_s": 0.5}):
        env = make_env("hover", n_envs=8, seed=1, **{**SHORT, **opts})
        policy = _policy(env, seed=1, normalize=False)
        assert env.evaluate_mlp(policy.mlp_policy(), seed=2) is None
        fast = evaluate_policy(env, policy, 8, seed=2)
        slow = evaluate_policy(env, policy, 8, seed=2, kernel=False)
        assert fast == slow


def test_an_env_evaluated_in_the_kernel_must_be_reset_before_it_steps():
    env = make_env("hover", n_envs=8, seed=1, **SHORT)
    policy = _policy(env, seed=1, normalize=False)
    env.evaluate_mlp(policy.mlp_policy(), seed=2)
    with pytest.raises(Exception, match="reset"):
        env.step(torch.zeros(8, env.act_dim))
    obs, _ = env.reset(seed=2)
    assert obs.shape == (8, env.single_observation_space.shape[0])


def test_a_policy_without_mlp_policy_is_stepped():
    """Any object with act() (another library's policy) is evaluated by stepping the env."""

    class Wrapped:
        def __init__(self, inner):
            self.inner, self.obs_dim = inner, inner.obs_dim

        def to(self, device):
            return self

        def eval(self):
            return self

        def act(self, obs, deterministic=False, generator=None):
            return self.inner.act(obs, deterministic=True)

    env = make_env("hover", n_envs=16, seed=1, **SHORT)
    policy = _policy(env, seed=5, normalize=False)
    got = evaluate_policy(env, Wrapped(policy), 16, seed=3)
    ref = evaluate_policy(env, policy, 16, seed=3, kernel=False)
    assert got["success_rate"] == ref["success_rate"]
    assert got["mean_return"] == ref["mean_return"] and got["mean_length"] == ref["mean_length"]
