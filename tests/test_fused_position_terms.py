"""The numba position task (envs/fused_position.py) and the torch one (envs/position.py) compute
each reward term and each end condition alike, term by term, on the same random states: a change
to one implementation without the other fails here. Thresholds are straddled on purpose (goal
distance around max_distance, height around min_height, every tilt, ground crashes, diverged and
NaN states)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from volary.dynamics import MultirotorState
from volary.dynamics.compiled import pack_state
from volary.envs import fused_position, make_env
from volary.envs.fused_position import _end_terms, _reward_terms
from volary.envs.position import REWARD_TERMS, task_constants

N = 512
END_TERMS = ("diverged", "crashed", "too_far", "below", "tilted")


@pytest.fixture(scope="module")
def env():
    e = make_env("reach", n_envs=N, seed=0, compile=False, precision_weight=0.5,
                 physics_hz=240.0, control_hz=60.0)  # fmt: skip
    e.reset(seed=3)
    return e


def _random_state(env, gen: torch.Generator) -> MultirotorState:
    """States around the env's goals and thresholds (float32, as the env flies them)."""
    cfg = env.config

    def u(*shape):
        return torch.rand(*shape, generator=gen) * 2.0 - 1.0

    direction = torch.nn.functional.normalize(u(N, 3), dim=-1)
    dist = torch.rand(N, generator=gen) * 2.0 * cfg.max_distance
    pos = env.goal + direction * dist[:, None]
    pos[: N // 4, 2] = cfg.min_height + 0.2 * u(N // 4)  # around the floor limit
    pos[N - 8 :, 0] = torch.nan  # diverged positions
    quat = torch.nn.functional.normalize(torch.randn(N, 4, generator=gen), dim=-1)
    base = MultirotorState.create(N, env.sim.params.n_rotors)
    flags = torch.rand(N, 2, generator=gen) < 0.1
    return dataclasses.replace(
        base, pos=pos, vel=4.0 * u(N, 3), quat=quat, omega=8.0 * u(N, 3),
        crashed=flags[:, 0], diverged=flags[:, 1],
    )  # fmt: skip


def _torch_ends(env, state) -> dict[str, torch.Tensor]:
    sim = SimpleNamespace(last_reset=torch.zeros(N, dtype=torch.bool))
    world = SimpleNamespace(state=state, b=N, device=torch.device("cpu"), sim=sim)
    task_terms = [t for t in env.terms if not getattr(t, "time_out", False)]
    assert env.term_names[: len(task_terms)] == END_TERMS
    return {name: term(world) for name, term in zip(END_TERMS, task_terms, strict=True)}


def _numba_ends(env, state) -> dict[str, np.ndarray]:
    x, flags = pack_state(state)
    x, flags = x.numpy(), flags.numpy()
    goal, task = env.goal.numpy().astype(np.float64), task_constants(env)
    rows = np.array([_end_terms(x, n, goal, flags, task) for n in range(N)])
    return {name: rows[:, i] for i, name in enumerate(END_TERMS)}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_end_condition_agrees_term_by_term(env, seed):
    state = _random_state(env, torch.Generator().manual_seed(seed))
    want, got = _torch_ends(env, state), _numba_ends(env, state)
    for name in END_TERMS:
        assert want[name].any() and not want[name].all(), name  # both sides of each threshold
        np.testing.assert_array_equal(got[name], want[name].numpy(), err_msg=name)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_reward_term_agrees_term_by_term(env, seed):
    gen = torch.Generator().manual_seed(100 + seed)
    state = _random_state(env, gen)
    action = torch.rand(N, env.act_dim, generator=gen) * 2.0 - 1.0
    prev = torch.rand(N, env.act_dim, generator=gen) * 2.0 - 1.0
    terminated = torch.stack(list(_torch_ends(env, state).values())).any(0)
    want = env.reward_terms(state, action, prev, terminated)
    assert tuple(want) == REWARD_TERMS == fused_position.REWARD_TERMS
    x = pack_state(state)[0].numpy()
    goal, task = env.goal.numpy().astype(np.float64), task_constants(env)
    act64, prev32 = action.numpy().astype(np.float64), prev.numpy()
    got = np.zeros((N, len(REWARD_TERMS)))
    for n in range(N):
        _reward_terms(x, n, goal, act64[n], prev32[n], bool(terminated[n]), task, got[n])
    for i, name in enumerate(REWARD_TERMS):
        assert torch.isfinite(want[name][:-8]).all(), name
        np.testing.assert_allclose(got[:, i], want[name].numpy(), rtol=2e-6, atol=1e-6,
                                   err_msg=name)  # fmt: skip
