"""The deep collision encoder (volary.studies.rl.dce) and the navigate task's latent observation."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from volary.cli.main import app
from volary.envs import make_env
from volary.errors import ConfigError, FileFormatError
from volary.studies.rl.dce import (
    DCEConfig,
    DepthVAE,
    LatentEncoder,
    collect_depth,
    collision_image,
    load_encoder,
    load_vae,
    save_encoder,
    train_dce,
)

runner = CliRunner()


def _reference(depth: torch.Tensor, f: float, r: float, max_px: int) -> torch.Tensor:
    """Pixel-pair loop: C(v) = min over u with |u - v| <= min(f r / d_u, max_px) of d_u - r."""
    h, w = depth.shape
    out = torch.empty_like(depth)
    for vy in range(h):
        for vx in range(w):
            best = math.inf
            for uy in range(h):
                for ux in range(w):
                    d = float(depth[uy, ux])
                    dist = math.hypot(uy - vy, ux - vx)
                    if dist <= min(f * r / d, max_px):
                        best = min(best, d - r)
            out[vy, vx] = max(best, 0.0)
    return out


def test_collision_image_matches_the_pixel_pair_loop():
    g = torch.Generator().manual_seed(3)
    depth = 0.3 + 9.7 * torch.rand(9, 11, generator=g, dtype=torch.float64)
    fast = collision_image(depth, focal_px=6.0, radius=0.4, max_px=4)
    assert torch.equal(fast, _reference(depth, 6.0, 0.4, 4))


def test_a_near_point_grows_to_the_robot_size_and_a_far_one_does_not():
    depth = torch.full((24, 32), 10.0)
    depth[12, 16] = 1.0  # f R / d = 16 * 0.25 / 1 = 4 px
    depth[3, 3] = 5.0  # 0.8 px: only its own pixel
    c = collision_image(depth, 16.0, 0.25)
    near = c < 0.8
    ys, xs = near.nonzero(as_tuple=True)
    assert float(((ys - 12.0) ** 2 + (xs - 16.0) ** 2).sqrt().max()) == 4.0
    assert int(near.sum()) == 49 and float(c[12, 16]) == 0.75  # the disc of radius 4; d - R
    assert float(c[3, 3]) == 4.75 and float(c[3, 4]) == 9.75 and float(c[0, 0]) == 9.75


def test_collision_image_argument_errors():
    with pytest.raises(ConfigError, match="focal_px > 0"):
        collision_image(torch.ones(8, 8), 0.0, 0.2)


@pytest.mark.parametrize(("field", "value"), [("latent", 0), ("beta", 0.0), ("val_fraction", 1.0),
                                              ("epochs", 1.5), ("seed", -1)])  # fmt: skip
def test_config_errors_name_the_field(field, value):
    with pytest.raises(ConfigError, match=field):
        DCEConfig(**{field: value})


def test_the_network_needs_sides_divisible_by_8():
    with pytest.raises(ConfigError, match="divisible by 8"):
        DepthVAE((20, 32), DCEConfig())


@pytest.fixture(scope="module")
def data():
    torch.set_num_threads(1)
    return collect_depth(1024, scenes=4, n_envs=64, seed=0)


def test_collected_images_are_range_normalized_and_see_trees(data):
    depth, info = data
    assert depth.shape == (1024, 24, 32) and depth.dtype == torch.float32
    assert float(depth.min()) >= 0.0 and float(depth.max()) == 1.0
    assert float((depth < 0.3).float().mean()) > 0.05  # trees and floor within 3 m
    assert info["focal_px"] == pytest.approx(16.0) and info["radius"] > 0


def test_training_lowers_the_held_out_reconstruction_error(data):
    depth, info = data
    _, report = train_dce(depth, info, DCEConfig(epochs=5, lr=3e-3, batch=128))
    val = report["history"]["val_recon"]
    assert val[-1] < 0.8 * val[0], val


def test_save_load_round_trip_and_env_observation(data, tmp_path):
    depth, info = data
    cfg = DCEConfig(epochs=1, latent=16, width=8)
    vae, report = train_dce(depth[:256], info, cfg)
    path = save_encoder(tmp_path / "enc.pt", vae, info, cfg, meta=report)
    enc = load_encoder(path)
    assert isinstance(enc, LatentEncoder) and enc.out_dim == 16
    with torch.no_grad():
        assert torch.equal(enc(depth[:8]), vae.encode(depth[:8])[0])
    assert load_vae(path)[1]["shape"] == [24, 32]
    env = make_env("navigate", n_envs=3, seed=0, depth_encoder=enc)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (3, 22 + 16) and env.single_observation_space.shape == (38,)
    obs, *_ = env.step(torch.zeros(3, 4))
    assert torch.equal(obs[:, 22:], enc(env.depth_image()))


def test_a_foreign_file_and_a_bad_encoder_are_refused(tmp_path):
    from volary.studies.rl.ppo import ActorCritic, PPOConfig, save_policy

    cfg = PPOConfig()
    path = save_policy(tmp_path / "policy.pt", ActorCritic(4, 2, cfg), cfg)
    with pytest.raises(FileFormatError, match="policy.pt"):
        load_encoder(path)
    with pytest.raises(ConfigError, match="depth_encoder"):
        make_env("navigate", n_envs=2, depth_encoder="enc.pt")  # a path: load it first


def test_cli_trains_an_encoder_and_a_policy_on_its_latent(tmp_path):
    enc_dir, run = tmp_path / "dce", tmp_path / "run"
    args = ["--frames", "512", "--scenes", "2", "--envs", "64", "--set", "epochs=1",
            "--set", "width=8"]  # fmt: skip
    r = runner.invoke(app, ["rl", "dce", *args, "--out", str(enc_dir)])
    assert r.exit_code == 0, r.output
    assert {p.name for p in enc_dir.iterdir()} == {"encoder.pt", "report.json", "dce.png"}
    assert json.loads((enc_dir / "report.json").read_text())["frames"] == 512
    enc = str(enc_dir / "encoder.pt")
    args = ["--task", "navigate", "--envs", "4", "--iterations", "1", "--set", "rollout_steps=4",
            "--env", f"depth_encoder={enc}", "--env", "episode_s=1"]  # fmt: skip
    r = runner.invoke(app, ["rl", "train", *args, "--out", str(run)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["rl", "eval", "--policy", str(run / "policy.pt"), "--task", "navigate",
                               "--envs", "2", "--episodes", "2", "--out", str(run)])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert json.loads((run / "eval.json").read_text())["env_options"]["depth_encoder"] == enc
    r = runner.invoke(app, ["rl", "eval", "--policy", str(run / "policy.pt"), "--task", "navigate",
                               "--env", "depth_encoder=missing.pt", "--out", str(run)])  # fmt: skip
    assert r.exit_code == 2 and "depth_encoder" in r.output and "missing.pt" in r.output
    # the encoder moved after training (a results folder renamed): the policy's stored path is
    # refused with the way out, and --env depth_encoder= replaces it without loading it
    moved = enc_dir.rename(tmp_path / "moved")
    base = ["rl", "eval", "--policy", str(run / "policy.pt"), "--task", "navigate", "--envs", "2",
            "--episodes", "2", "--out", str(run)]  # fmt: skip
    r = runner.invoke(app, base)
    assert r.exit_code == 2 and "--policy: its depth_encoder" in r.output, r.output
    assert enc in r.output.replace("\n", "") and "--env depth_encoder=PATH" in r.output
    r = runner.invoke(app, [*base, "--env", f"depth_encoder={moved / 'encoder.pt'}"])
    assert r.exit_code == 0, r.output
    used = json.loads((run / "eval.json").read_text())["env_options"]["depth_encoder"]
    assert used == str(moved / "encoder.pt")
    # the policy and its encoder moved together (a results tree cloned elsewhere): the policy
    # finds the encoder where it was relative to the policy, with no --env
    tree = tmp_path / "elsewhere"
    shutil.copytree(run, tree / "run")
    shutil.copytree(moved, tree / "dce")
    r = runner.invoke(app, ["rl", "eval", "--policy", str(tree / "run" / "policy.pt"),
                            "--task", "navigate", "--envs", "2", "--episodes", "2",
                            "--out", str(tree / "run")])  # fmt: skip
    assert r.exit_code == 0, r.output
    used = json.loads((tree / "run" / "eval.json").read_text())["env_options"]["depth_encoder"]
    assert Path(used).resolve() == (tree / "dce" / "encoder.pt").resolve()
