"""The ``learned`` planner: its observation is the navigate task's, its numpy network is the
torch policy, its velocity-obstacle shield, its options, and the shipped policy flying."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from test_nav_planners import _depth_wall, _obs, _task
from volary.errors import ConfigError
from volary.planning.navigation import NavObservation
from volary.studies.flyingtrust.planners import get_planner
from volary.studies.flyingtrust.planners.learned import (
    NumpyMLP,
    candidates,
    default_weights,
    observation,
    shield,
    unsafe,
    unsafe_reference,
    volume_clamp,
)
from volary.studies.rl.export import deterministic_actor, mlp_npz, parity_observations
from volary.studies.rl.ppo import ActorCritic, PPOConfig


# ---------------------------------------------------------------------------- the network
def _policy(seed: int = 0, obs_dim: int = 214) -> ActorCritic:
    torch.manual_seed(seed)
    pol = ActorCritic(obs_dim, 4, PPOConfig(hidden=(32, 16), seed=seed))
    with torch.no_grad():  # a trained-looking normalizer and a non-trivial output layer
        pol.obs_norm.update(torch.randn(512, obs_dim, dtype=torch.float64) * 3 + 1)
        pol.actor[-1].weight.normal_(0.0, 0.5)
    return pol


def test_numpy_mlp_matches_the_torch_policy(tmp_path):
    pol = _policy()
    path = mlp_npz(pol, tmp_path / "p.npz", meta={"task": "x"})
    net = NumpyMLP(path)
    obs = parity_observations(pol, 1000, seed=3)
    want = deterministic_actor(pol)(obs).detach().numpy()
    got = net(obs.numpy())
    assert net.obs_dim == 214 and net.meta == {"task": "x"}
    assert np.abs(got - want).max() < 1e-5
    assert np.abs(want).max() > 0.1  # the actions are not all ~0


@pytest.mark.parametrize("act", [nn.ReLU(), nn.ELU(alpha=0.7), nn.Tanh()])
def test_numpy_mlp_activations(tmp_path, act):
    torch.manual_seed(1)
    seq = nn.Sequential(nn.Linear(6, 8), act, nn.Linear(8, 3))
    net = NumpyMLP(mlp_npz(seq, tmp_path / "s.npz"))
    x = torch.randn(200, 6)
    np.testing.assert_allclose(net(x.numpy()), seq(x).detach().numpy(), atol=1e-5)


def test_numpy_mlp_rejects_other_files(tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, something=np.zeros(3))
    with pytest.raises(ConfigError, match="not an mlp_npz file"):
        NumpyMLP(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        NumpyMLP(tmp_path / "missing.npz")
    bad.write_text("weights\n")
    with pytest.raises(ConfigError, match="not an mlp_npz file .not a zip") as err:
        NumpyMLP(bad)
    assert "pickle" not in str(err.value)


# ---------------------------------------------------------------------------- observation
def test_observation_is_the_navigate_tasks():
    """The planner rebuilds navigate's observation from a benchmark observation: same
    numbers for the same state, depth image and previous action."""
    from volary.envs.navigate import NavigateTask, NavigateTaskConfig

    cfg = NavigateTaskConfig(scenes=2, action_repeat=6, seed=3)
    env = NavigateTask(4, cfg)
    obs, _ = env.reset(seed=3)
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        obs, *_ = env.step(torch.rand(4, 4, generator=gen) * 2 - 1)
    st = env.world.state
    depth = env.depth_image().numpy() * cfg.depth_range
    for i in range(4):
        nav = NavObservation(
            t=0.0, position=st.pos[i].double().numpy(), velocity=st.vel[i].double().numpy(),
            quat=st.quat[i].double().numpy(), omega=st.omega[i].double().numpy(),
            depth=np.where(depth[i] >= cfg.depth_range, np.inf, depth[i]),
        )  # fmt: skip
        mine = observation(nav, env.goal[i].double().numpy(), env.prev_action[i].numpy(),
                           cfg.depth_range, cfg.depth_obs)  # fmt: skip
        np.testing.assert_allclose(mine, obs[i].numpy(), atol=2e-5)


# ---------------------------------------------------------------------------- the shield
def test_velocity_obstacle_of_a_point():
    p0, r = np.zeros(3), 0.5
    pts = np.array([[2.0, 0.0, 0.0]])
    v = np.array([[1.0, 0, 0], [3.0, 0, 0], [-1.0, 0, 0], [1.0, 1.0, 0], [1.0, 0.2, 0]])
    # 1 s at 1 m/s ends 1 m short (> 0.5: safe), 2 s reach it; 3 m/s passes through it; away
    # is safe; at 45 degrees the flight passes sqrt(2) m from it; (1, 0.2) ends 1.02 m from
    # it after 1 s and passes 0.39 m from it within 2 s
    assert unsafe(pts, p0, v, 1.0, r).tolist() == [False, True, False, False, False]
    assert unsafe(pts, p0, v, 2.0, r).tolist() == [True, True, False, False, True]
    assert not unsafe(np.zeros((0, 3)), p0, v, 1.0, r).any()


def test_compiled_velocity_obstacle_matches_its_reference():
    """The compiled test equals the array form on a wall in front, scattered points and the
    shield's own candidate velocities (safe and unsafe ones)."""
    rng = np.random.default_rng(3)
    yy, zz = np.meshgrid(np.linspace(-3, 3, 61), np.linspace(0.2, 3.0, 29))
    wall = np.stack([np.full(yy.size, 1.6), yy.ravel(), zz.ravel()], -1)
    scattered = rng.uniform([-4, -4, 0], [4, 4, 3], (500, 3))
    p0 = np.array([0.0, 0.1, 1.5])
    vels = np.vstack([candidates(np.array([2.0, 0.3, 0.1])), candidates(np.array([-1.0, 1.5, 0])),
                      rng.normal(0, 2, (100, 3)), np.zeros((1, 3))])  # fmt: skip
    for pts in (wall, scattered, np.vstack([wall, scattered]), np.zeros((0, 3))):
        for horizon, r in ((1.0, 0.5), (0.6, 0.35)):
            fast = unsafe(pts, p0, vels, horizon, r)
            assert fast.dtype == bool and fast.shape == (len(vels),)
            np.testing.assert_array_equal(fast, unsafe_reference(pts, p0, vels, horizon, r))
            if len(pts):
                assert 0 < fast.sum() < len(vels)  # both kinds were tested


def test_shield_turns_away_from_a_wall_and_stops_when_boxed_in():
    wall = np.stack(np.meshgrid([1.5], np.linspace(-1, 1, 21), np.linspace(-1, 1, 21),
                                indexing="ij"), -1).reshape(-1, 3)  # fmt: skip
    v = np.array([2.0, 0.0, 0.0])
    out, changed = shield(wall, np.zeros(3), v, 1.0, 0.4)
    assert changed and not unsafe(wall, np.zeros(3), out[None], 1.0, 0.4)[0]
    assert 0 < np.linalg.norm(out) < 2.0 + 1e-9
    free, changed = shield(wall, np.zeros(3), np.array([0.0, 1.0, 0.0]), 1.0, 0.4)
    assert not changed and free[1] == 1.0  # along the wall: untouched
    near = wall * [0.4, 1.0, 1.0]  # a face 0.6 m away; six of them close a box around p0
    box = np.concatenate([near, -near, near[:, [1, 0, 2]], -near[:, [1, 0, 2]],
                          near[:, [1, 2, 0]], -near[:, [1, 2, 0]]])  # fmt: skip
    # every candidate moves >= 0.5 m in 1 s, ending < 0.4 m from a face: only hovering is safe
    stop, changed = shield(box, np.zeros(3), v, 1.0, 0.4)
    assert changed and not stop.any()


def test_volume_clamp_keeps_the_vehicle_inside():
    lo, hi = np.zeros(3), np.array([10.0, 10.0, 3.0])
    p = np.array([5.0, 5.0, 2.0])
    # 1 s of climbing may take it to 3 - 0.5 m: 0.5 m/s up at most; sideways untouched
    np.testing.assert_allclose(volume_clamp(np.array([1.0, -2.0, 2.0]), p, lo, hi, 0.5, 1.0),
                               [1.0, -2.0, 0.5])  # fmt: skip
    # already too close to the ceiling: sent back down
    low = volume_clamp(np.zeros(3), np.array([5.0, 5.0, 2.8]), lo, hi, 0.5, 1.0)
    assert low[2] < 0 and low[:2].tolist() == [0.0, 0.0]


# ---------------------------------------------------------------------------- the planner
def test_options_and_camera_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="unknown"):
        get_planner("learned", not_an_option=1)
    with pytest.raises(ConfigError, match="horizon"):
        get_planner("learned", horizon=-1.0)
    with pytest.raises(ConfigError, match="does not exist"):
        get_planner("learned", weights=str(tmp_path / "none.npz"))
    odd = mlp_npz(_policy(), tmp_path / "odd.npz", meta={"task": "hover"})
    with pytest.raises(ConfigError, match="navigate layout"):
        get_planner("learned", weights=str(odd))
    task = _task()
    p = get_planner("learned")
    wide = type(task.depth)(**{**task.depth.__dict__, "fx": task.depth.fx / 2})
    with pytest.raises(ConfigError, match="deg camera"):
        p.reset(type(task)(**{**task.__dict__, "depth": wide}))
    with pytest.raises(ConfigError, match="planner_rate_hz: the policy decides at 10 Hz"):
        p.reset(type(task)(**{**task.__dict__, "planner_rate_hz": 20.0}))


def test_shield_stops_the_flight_into_a_wall():
    """A wall 1 m ahead across the view: whatever the policy asks, the shielded command
    does not fly into it within the horizon; the bare policy's is reported as it is."""
    p = get_planner("learned")
    p.reset(_task())
    for k in range(5):
        ref = p.plan(_obs(0.1 * k, _depth_wall(1.0)))
        v = ref.velocities[0]
        assert v[0] * 1.0 < 1.0 - 0.3 - 0.15 + 1e-9  # 1 s of it stays short of the wall
        np.testing.assert_allclose(ref.positions[-1], ref.positions[0] + 0.5 * v)
    assert p.stats["calls"] == 5


def test_shipped_policy_reaches_the_goal_in_open_space():
    """The shipped weights exist and fly toward a goal 20 m ahead (kinematic flight: the
    reference's velocity integrated; the floor in the depth image at the flown height)."""
    assert default_weights().is_file()
    p = get_planner("learned")
    p.reset(_task())
    pos, vel = np.array([0.0, 0.0, 1.5]), np.zeros(3)
    yaw = 0.0
    for k in range(150):
        q = np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])
        obs = NavObservation(t=0.1 * k, position=pos.copy(), velocity=vel.copy(), quat=q,
                             omega=np.zeros(3), depth=_depth_wall(None, pos[2]))  # fmt: skip
        ref = p.plan(obs)
        vel = ref.velocities[0]
        pos = pos + 0.1 * vel
        yaw = float(ref.yaws[0])
        if np.linalg.norm(pos - [20.0, 0.0, 1.5]) < 2.0:
            break
    assert np.linalg.norm(pos - [20.0, 0.0, 1.5]) < 2.0, pos
