"""The learned_rgb planner and its RGB depth encoder (issue 21, RGB observations): the numpy
convolution against torch, the training data's poses and targets, training, export parity, and
the planner's checks and behaviour on rendered frames."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from test_nav_planners import _obs, _rgb_open, _task
from volary.errors import ConfigError
from volary.studies.flyingtrust.planners import get_planner
from volary.studies.flyingtrust.planners.learned import NumpyMLP, conv2d, pooled_depth, with_coords
from volary.studies.rl.rgb_depth import (
    RgbDepthConfig,
    as_input,
    collect,
    export,
    loss_fn,
    sample_poses,
    train,
)

TINY = RgbDepthConfig(scenes=1, frames_per_scene=100, epochs=6, batch=32, scene_seed=2000)


@pytest.mark.parametrize(("stride", "padding", "dilation"), [(1, 0, 1), (2, 2, 1), (1, 2, 2)])
def test_numpy_conv2d_is_torchs(stride, padding, dilation):
    g = torch.Generator().manual_seed(stride + 3 * padding + 7 * dilation)
    x = torch.randn(2, 5, 12, 16, generator=g)
    w, b = torch.randn(4, 5, 3, 3, generator=g), torch.randn(4, generator=g)
    want = F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation).numpy()
    got = conv2d(x.numpy(), w.numpy(), b.numpy(), stride, padding, dilation)
    assert got.shape == want.shape and np.abs(got - want).max() < 1e-5


def test_coordinate_channels_match_the_torch_module():
    from volary.studies.rl.rgb_depth import Coords

    x = torch.rand(2, 3, 4, 6)
    np.testing.assert_allclose(with_coords(x.numpy()), Coords()(x).numpy(), atol=1e-7)


def test_sampled_poses_are_free_inside_the_volume_and_seeded():
    from volary.worlds import Scene, make_scenario
    from volary.worlds.sdf import scene_sdf

    spec = make_scenario("forest", 2000)
    pos, quat = sample_poses(spec, 200, TINY, torch.Generator().manual_seed(1))
    d = scene_sdf(Scene.stack([spec]), pos[None]).distance[0]
    assert bool((d >= TINY.clearance).all())
    assert bool((pos[:, 2] >= TINY.heights[0]).all() and (pos[:, 2] <= TINY.heights[1]).all())
    assert torch.allclose(quat.norm(dim=-1), torch.ones(200), atol=1e-5)
    again, _ = sample_poses(spec, 200, TINY, torch.Generator().manual_seed(1))
    assert torch.equal(pos, again)


@pytest.fixture(scope="module")
def tiny_data():
    rgb, target, info = collect(TINY)
    return rgb, target, info


def test_collected_targets_are_the_policys_depth_grid(tiny_data):
    """The target of a frame is what the learned planner computes from the depth camera at that
    pose; the RGB frame is the benchmark's camera (sky where no splat is hit)."""
    from volary.studies.rl.rgb_depth import camera_pair

    rgb, target, info = tiny_data
    assert rgb.shape == (200, 48, 64, 3) and rgb.dtype == torch.uint8
    assert target.shape == (200, 192) and 0 <= float(target.min()) <= float(target.max()) <= 1
    assert info["scene_ids"].tolist() == [0] * 100 + [1] * 100
    assert float(target.min()) < 0.3  # obstacles near some poses
    from volary.worlds import make_scenario

    spec = make_scenario("urban", TINY.scene_seed)
    world = camera_pair(spec, TINY, 4)
    pos, quat = sample_poses(spec, 4, TINY, torch.Generator().manual_seed(5))
    world.reset(pos=pos, quat=quat)
    d = world.read("depth")
    depth = torch.where(d.valid, d.depth, torch.full_like(d.depth, math.inf)).numpy()
    from volary.studies.rl.rgb_depth import pooled_target

    got = pooled_target(d.depth, d.valid, TINY).numpy()
    for i in range(4):
        np.testing.assert_array_equal(got[i], pooled_depth(depth[i], 10.0, (12, 16)))


def test_training_lowers_the_loss_and_the_export_runs_in_numpy(tiny_data, tmp_path):
    rgb, target, info = tiny_data
    ids = info["scene_ids"]
    net, report = train(rgb, target, TINY, ids)
    h = report["history"]
    assert h["train_loss"][-1] < 0.8 * h["train_loss"][0]
    assert report["validation_scenes"] == 1 and report["validation_frames"] == 100
    path = export(net, tmp_path / "enc.npz", {k: v for k, v in info.items() if k != "scene_ids"},
                  report)  # fmt: skip
    enc = NumpyMLP(path)
    x = as_input(rgb[:16])
    with torch.no_grad():
        want = net(x).numpy()
    assert np.abs(enc(x.numpy())[:, 0] - want).max() < 1e-5
    assert enc.meta["kind"] == "rgb_depth" and enc.meta["grid"] == [12, 16]


def test_trained_weights_do_not_depend_on_the_callers_threads(tiny_data):
    rgb, target, info = tiny_data
    cfg = replace(TINY, epochs=2)
    before, weights = torch.get_num_threads(), []
    try:
        for threads in (1, 3):
            torch.set_num_threads(threads)
            net, _ = train(rgb, target, cfg, info["scene_ids"])
            weights.append(torch.cat([p.detach().flatten() for p in net.parameters()]))
            assert torch.get_num_threads() == threads  # restored after training
    finally:
        torch.set_num_threads(before)
    assert torch.equal(weights[0], weights[1])


def test_loss_weighs_too_far_more():
    t = torch.full((1, 4), 0.5)
    assert float(loss_fn(t + 0.1, t, 3.0)) == pytest.approx(3 * float(loss_fn(t - 0.1, t, 3.0)))


def test_config_is_checked():
    with pytest.raises(ConfigError, match="grid"):
        RgbDepthConfig(grid=(7, 16))
    with pytest.raises(ConfigError, match="scenes"):
        RgbDepthConfig(scenes=0)
    with pytest.raises(ConfigError, match="scenarios"):
        RgbDepthConfig(scenarios=())
    with pytest.raises(ConfigError, match="threads"):
        RgbDepthConfig(threads=0)


def test_planner_needs_rgb_and_checks_its_camera_and_encoder(tmp_path):
    from dataclasses import replace

    p = get_planner("learned_rgb")
    assert p.needs == frozenset({"rgb"})
    with pytest.raises(ConfigError, match="task.rgb"):
        p.reset(replace(_task(), rgb=None))
    task = _task()
    with pytest.raises(ConfigError, match="trained on 48 x 64"):
        p.reset(replace(task, rgb=replace(task.rgb, width=32, height=24, fx=16.0, cx=16, cy=12)))
    p.reset(task)
    with pytest.raises(ConfigError, match="obs.rgb"):
        p.plan(_obs())
    other = tmp_path / "mlp.npz"  # the depth policy is not an RGB encoder
    from volary.studies.flyingtrust.planners.learned import default_weights

    other.write_bytes(default_weights().read_bytes())
    with pytest.raises(ConfigError, match="RGB depth encoder"):
        get_planner("learned_rgb", encoder=str(other))


def test_planner_sees_open_space_far_and_a_wall_near():
    """On rendered frames: open space is predicted far (the policy flies on), a wall 1.5 m
    ahead near (the shield stops the flight into it)."""
    p = get_planner("learned_rgb")
    p.reset(_task())
    far, _ = p._perceive(_obs(rgb=_rgb_open()))
    near, image = p._perceive(_obs(rgb=_rgb_open(wall=1.5)))
    centre = np.zeros((12, 16), bool)
    centre[3:7, 5:11] = True  # above the horizon, straight ahead
    assert far.reshape(12, 16)[centre].mean() > 0.5  # > 5 m
    assert near.reshape(12, 16)[centre].mean() < 0.35  # < 3.5 m
    assert np.isfinite(image).any()
    ref = p.plan(_obs(rgb=_rgb_open(wall=1.0)))
    assert ref.velocities[0][0] < 0.5  # does not fly on into the wall (+x)


def test_rgb_encoder_command_writes_an_encoder_the_planner_flies(tmp_path):
    from typer.testing import CliRunner

    from volary.cli.main import app

    sets = ["scenes=1", "frames_per_scene=100", "epochs=1", "batch=64", "scene_seed=2100"]
    args = ["rl", "rgb-encoder", "--out", str(tmp_path)]
    r = CliRunner().invoke(app, args + [x for s in sets for x in ("--set", s)])
    assert r.exit_code == 0, r.output
    assert {"encoder.npz", "report.json", "rgb_encoder.png"} <= {p.name for p in tmp_path.iterdir()}
    p = get_planner("learned_rgb", encoder=str(tmp_path / "encoder.npz"))
    p.reset(_task())
    assert p.plan(_obs(rgb=_rgb_open())) is not None
    r = CliRunner().invoke(app, args + ["--set", "grid=(7,16)"])
    assert r.exit_code == 2 and "grid" in r.output
