"""The World, rollout, the envs and PPO on a CUDA GPU fly as they do on the CPU.

Physics in float64 on both devices (the World's), so the two agree to rounding; the envs run
float32 and are compared over a short horizon. Random draws are keyed by (seed, env, episode)
counters, not by a device generator, so both devices draw the same starts and noise.
"""

from __future__ import annotations

import math

import pytest
import torch

from test_world import CAM, ROOM  # the room with one wall and its 16x12 depth camera
from volary.envs import make_env
from volary.sim import Sensing, World, rollout, terms

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]

START = torch.tensor(
    [[0.0, 0.0, 1.0], [0.5, 0.0, 1.0], [2.0, 0.0, 1.0], [0.0, 2.0, 1.0], [0.0, -1.0, 1.5],
     [-1.0, 0.0, 1.0]], dtype=torch.float64,
)  # fmt: skip
GOAL = torch.tensor(
    [[0.0, 0.0, 1.2], [0.5, 1.0, 1.0], [3.5, 0.0, 1.0], [1.0, 2.0, 1.5], [0.0, -1.0, 1.0],
     [-1.0, 0.5, 1.0]], dtype=torch.float64,
)  # fmt: skip


def _fly(device: str, stochastic: bool):
    """Three envs of two vehicles each in the room with a 30 Hz depth camera; vehicle 2 flies
    into the wall. Records positions and depth images every 12 steps."""
    world = World(
        "crazyflie", ROOM, n_envs=3, vehicles_per_env=2, device=device, dtype=torch.float64,
        compile="eager", stochastic=stochastic, noise_seeds=[11, 12, 13, 14, 15, 16],
        sensors={"depth": Sensing(CAM, rate_hz=30.0)},
    )  # fmt: skip
    world.reset(pos=START.to(device))
    sp = torch.zeros(6, 4, dtype=torch.float64, device=device)
    sp[:, :3] = GOAL.to(device)
    probes = {
        "pos": lambda w: w.sim.state.pos,
        "depth": lambda w: w.read("depth").depth,
    }
    ep = rollout(
        world, sp, (terms.collided, terms.time_limit(1.5)), duration=2.0,
        record=probes, record_every=12,
    )  # fmt: skip
    return ep


@pytest.mark.parametrize("stochastic", [False, True])
def test_a_world_rollout_on_cuda_matches_the_cpu(stochastic):
    cpu, gpu = _fly("cpu", stochastic), _fly("cuda", stochastic)
    assert gpu.causes() == cpu.causes()
    assert "collided" in cpu.causes() and "time_limit" in cpu.causes()
    assert gpu.steps == cpu.steps
    torch.testing.assert_close(gpu.end_time.cpu(), cpu.end_time, rtol=0, atol=1e-9)
    torch.testing.assert_close(gpu.records["pos"].cpu(), cpu.records["pos"], rtol=0, atol=1e-6)
    d_cpu = cpu.records["depth"]
    d_gpu = gpu.records["depth"].cpu().to(d_cpu.dtype)
    same = torch.isclose(d_gpu, d_cpu, rtol=0, atol=1e-3)
    assert same.float().mean() > 0.999  # a pixel on an edge may fall either side


@pytest.mark.parametrize("observation", ["volary", "body"])
def test_the_hover_env_on_cuda_steps_like_the_cpu(observation):
    def run(device: str):
        env = make_env("hover", n_envs=64, seed=0, device=device, observation=observation)
        obs, _ = env.reset(seed=5)
        gen = torch.Generator().manual_seed(0)
        out = [obs.cpu()]
        rewards, ended = [], []
        for _ in range(40):
            a = (torch.rand(64, env.act_dim, generator=gen) * 0.4 - 0.2).to(device)
            obs, r, term, trunc, _ = env.step(a)
            out.append(obs.cpu())
            rewards.append(r.cpu())
            ended.append((term | trunc).cpu())
        return torch.stack(out), torch.stack(rewards), torch.stack(ended)

    (o_c, r_c, e_c), (o_g, r_g, e_g) = run("cpu"), run("cuda")
    torch.testing.assert_close(o_g[0], o_c[0], rtol=0, atol=1e-6)  # same keyed starts
    assert torch.equal(e_g, e_c)
    torch.testing.assert_close(o_g, o_c, rtol=0, atol=2e-3)
    torch.testing.assert_close(r_g, r_c, rtol=0, atol=2e-3)


def test_a_cuda_env_reports_the_device_its_tensors_are_on():
    # torch.device("cuda") != torch.device("cuda:0"): PPO and the learner adapters compare the
    # env's device with its observations' and once refused every env made with device="cuda"
    env = make_env("hover", n_envs=4, seed=0, device="cuda")
    obs, _ = env.reset(seed=0)
    assert obs.device == env.device and env.device.index is not None


def test_ppo_trains_and_evaluates_a_hover_policy_on_cuda():
    from volary.studies.rl.ppo import PPOConfig, evaluate_policy, train_ppo

    env = make_env("hover", n_envs=256, seed=0, device="cuda", observation="body")
    policy, report = train_ppo(env, PPOConfig(), iterations=3)
    assert next(policy.parameters()).device.type == "cuda"
    kl = report["history"]["kl"]
    assert len(kl) == 3 and all(math.isfinite(v) for v in kl)
    stats = evaluate_policy(env, policy, episodes=256, seed=1)
    assert stats["episodes"] >= 256 and 0.0 <= stats["success_rate"] <= 1.0
