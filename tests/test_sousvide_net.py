"""SV-Net (paper 000 Sec. V): SqueezeNet 1.1 plan, RMA latent, Table I variants, checkpoints
and the deployable policy."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from volary.errors import ConfigError, FileFormatError, UnknownNameError
from volary.studies.sousvide.history import action_windows, history_windows, observable
from volary.studies.sousvide.net import (
    IMAGE_NORMS,
    VARIANTS,
    ArchConfig,
    Fire,
    NetConfig,
    NormStats,
    SqueezeNet,
    SVNet,
    get_variant,
    load_checkpoint,
    parameter_count,
    save_checkpoint,
)
from volary.studies.sousvide.policy import SVPolicy
from volary.types import Policy

SMALL = ArchConfig(
    cnn_width=0.25,
    image_features=16,
    feature_hidden=(16,),
    features=8,
    history_hidden=(16, 12),
    command_hidden=(16,),
)


def _net(
    variant: str = "svnet",
    size: int = 32,
    seed: int = 0,
    window: int = 3,
    actions: bool = False,
    image_norm: str = "dataset",
) -> SVNet:
    arch = dataclasses.replace(SMALL, image_norm=image_norm)
    cfg = NetConfig(variant, window, size, size, arch, history_actions=actions)
    net = SVNet(cfg, torch.Generator().manual_seed(seed))
    g = torch.Generator().manual_seed(seed + 100)
    stats = NormStats.identity(cfg.entry_size)
    mean = {k: 0.1 * torch.randn(v.shape, generator=g) for k, v in stats.mean.items()}
    std = {k: 0.5 + torch.rand(v.shape, generator=g) for k, v in stats.std.items()}
    net.set_stats(NormStats.from_moments(mean, std))
    return net.eval()


def _inputs(n: int, size: int = 32, window: int = 3, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    img = torch.randint(0, 256, (n, size, size, 3), dtype=torch.uint8, generator=g)
    state = torch.randn(n, 10, generator=g)
    state[:, 6:] = state[:, 6:] / state[:, 6:].norm(dim=-1, keepdim=True)
    return (
        img,
        observable(state),
        torch.randn(n, 7, generator=g),
        torch.randn(n, window, 11, generator=g),
    )


# ---- SqueezeNet 1.1 ------------------------------------------------------------------------------
def test_squeezenet_1_1_layer_plan_and_parameter_count() -> None:
    s = SqueezeNet()
    kinds = [type(m).__name__ for m in s.features]
    assert kinds == [
        "Conv2d",
        "ReLU",
        "MaxPool2d",
        "Fire",
        "Fire",
        "MaxPool2d",
        "Fire",
        "Fire",
        "MaxPool2d",
        "Fire",
        "Fire",
        "Fire",
        "Fire",
    ]
    fires = [
        (f.squeeze.out_channels, f.expand1.out_channels, f.expand3.out_channels)
        for f in s.features
        if isinstance(f, Fire)
    ]
    assert (
        fires
        == [(16, 64, 64)] * 2 + [(32, 128, 128)] * 2 + [(48, 192, 192)] * 2 + [(64, 256, 256)] * 2
    )
    conv1 = s.features[0]
    assert (conv1.out_channels, conv1.kernel_size, conv1.stride) == (64, (3, 3), (2, 2))
    assert all(
        f.expand3.kernel_size == (3, 3) and f.squeeze.kernel_size == (1, 1)
        for f in s.features
        if isinstance(f, Fire)
    )
    # the standard 1.1 feature extractor (no classifier) has 722,496 parameters
    assert parameter_count(s.features) == 722_496
    assert s.feature_channels == 512
    half = parameter_count(SqueezeNet(width=0.5).features)
    assert 0.2 < half / 722_496 < 0.3


@pytest.mark.parametrize("size", [32, 64, 96])
def test_squeezenet_and_svnet_accept_small_images(size: int) -> None:
    s = SqueezeNet(out_features=24)
    assert s(torch.zeros(2, 3, size, size)).shape == (2, 24)
    net = _net(size=size)
    img, obs, obj, win = _inputs(2, size)
    assert net(img, obs, obj, win).shape == (2, 4)


def test_net_config_errors_name_the_field() -> None:
    with pytest.raises(ConfigError, match="image_height"):
        NetConfig(image_height=31)
    with pytest.raises(ConfigError, match="window"):
        NetConfig(window=0)
    with pytest.raises(ConfigError, match="cnn_width"):
        ArchConfig(cnn_width=0.0)
    with pytest.raises(ConfigError, match="history_hidden"):
        ArchConfig(history_hidden=())
    assert NetConfig.from_dict(NetConfig(arch=SMALL).to_dict()) == NetConfig(arch=SMALL)


# ---- image normalization -------------------------------------------------------------------------
def test_per_image_norm_is_invariant_to_a_brightness_scale_the_dataset_norm_is_not() -> None:
    """The lighting disturbance scales every pixel (evaluate.py, 40 %): without clipping, the
    per_image input is unchanged, so is the output; the dataset-statistics net sees it."""
    img, obs, obj, win = _inputs(3)
    img = (img // 5) * 5  # multiples of 5: x 0.4 stays an exact uint8 (no rounding, no clip)
    dim = (img.int() * 2 // 5).to(torch.uint8)
    assert torch.equal(dim.int() * 5, img.int() * 2)
    per, dataset = _net(image_norm="per_image"), _net(image_norm="dataset")
    with torch.no_grad():
        a, b = per(img, obs, obj, win), per(dim, obs, obj, win)
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
        x = per.preprocess_image(img)
        assert x.mean(dim=(-2, -1)).abs().max() < 1e-5
        assert (x.std(dim=(-2, -1), unbiased=False) - 1).abs().max() < 1e-4
        assert not torch.allclose(dataset(img, obs, obj, win), dataset(dim, obs, obj, win))
    # a flat image is not blown up: its std is floored, the input stays finite (zero)
    flat = torch.full((1, 32, 32, 3), 77, dtype=torch.uint8)
    assert torch.equal(per.preprocess_image(flat), torch.zeros(1, 3, 32, 32))


def test_image_norm_round_trips_and_old_checkpoints_load_as_dataset(tmp_path) -> None:
    assert ArchConfig().image_norm == "per_image" and IMAGE_NORMS == ("dataset", "per_image")
    assert NetConfig().arch.image_norm == "per_image"  # new nets
    assert ArchConfig.from_dict({}).image_norm == "dataset"  # serialized before the option
    net = _net(image_norm="per_image")
    p = save_checkpoint(net, tmp_path / "n.pt")
    raw = torch.load(p, weights_only=True)
    assert raw["net_config"]["arch"]["image_norm"] == "per_image"
    back, _ = load_checkpoint(p)
    assert back.config == net.config and back.config.arch.image_norm == "per_image"
    img, obs, obj, win = _inputs(2)
    assert torch.equal(back(img, obs, obj, win), net(img, obs, obj, win))
    # a checkpoint written before the option (no key in its arch) is a dataset-norm net
    was = _net(image_norm="dataset")
    raw = torch.load(save_checkpoint(was, p), weights_only=True)
    del raw["net_config"]["arch"]["image_norm"]
    old = tmp_path / "old.pt"
    torch.save(raw, old)
    loaded, _ = load_checkpoint(old)
    assert loaded.config.arch.image_norm == "dataset"
    assert torch.equal(loaded(img, obs, obj, win), was(img, obs, obj, win))
    raw["net_config"]["arch"]["image_norm"] = "histogram"
    torch.save(raw, old)
    with pytest.raises(FileFormatError, match="image_norm"):
        load_checkpoint(old)


@pytest.mark.parametrize("bad", ["Per_Image", "none", "", 1, None])
def test_bad_image_norm_names_the_field_and_the_choices(bad) -> None:
    with pytest.raises(ConfigError, match=r"image_norm: expected one of 'dataset', 'per_image'"):
        ArchConfig(image_norm=bad)
    with pytest.raises(ConfigError, match="image_norm"):
        NetConfig.from_dict({"arch": {"image_norm": bad}})


# ---- RMA latent and variants ---------------------------------------------------------------------
def test_latent_is_the_second_to_last_layer_of_the_history_net() -> None:
    net = _net("svnet")
    _, _, _, win = _inputs(5)
    lat = net.latent(win)
    assert lat.shape == (5, SMALL.history_hidden[-1])
    body = net.history.body
    assert isinstance(body[-1], nn.ReLU) and isinstance(body[-2], nn.Linear)
    assert isinstance(net.history.head, nn.Linear)
    assert net.history.head.in_features == lat.shape[-1] and net.history.head.out_features == 2
    torch.testing.assert_close(net.history.head(lat), net.theta_estimate(win))
    # physical theta is the denormalized estimate
    torch.testing.assert_close(
        net.theta_physical(win), net.theta_estimate(win) * net.theta_std + net.theta_mean
    )


def test_variants_feed_latent_theta_or_nothing_to_the_command_net() -> None:
    img, obs, obj, win = _inputs(4)
    first = {v: _net(v).command[0].in_features for v in VARIANTS}
    base = SMALL.features + 8 + 7
    assert first == {
        "svnet": base + 12,
        "no_pretrain": base + 12,
        "no_latent": base + 2,
        "no_rma": base,
    }
    assert _net("no_rma").history is None
    assert _net("no_rma")(img, obs, obj, None).shape == (4, 4)
    # the latent does not pass through the history head; the explicit estimate does
    for v, head_matters in (("svnet", False), ("no_latent", True)):
        net = _net(v)
        y0 = net(img, obs, obj, win)
        with torch.no_grad():
            net.history.head.weight.add_(1.0)
        changed = not torch.equal(y0, net(img, obs, obj, win))
        assert changed == head_matters, v
    # the history matters for the RMA variants only
    for v in VARIANTS:
        net = _net(v)
        y0 = net(img, obs, obj, win)
        assert torch.equal(y0, net(img, obs, obj, win + 1.0)) == (v == "no_rma"), v


def test_unknown_variant_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownNameError, match="no_latent, no_pretrain, no_rma, svnet"):
        get_variant("rma")
    with pytest.raises(UnknownNameError, match="valid names"):
        NetConfig(variant="big")


def test_init_is_deterministic_per_generator() -> None:
    a, b, c = _net(seed=1), _net(seed=1), _net(seed=2)
    for (k, x), y, _z in zip(
        a.state_dict().items(), b.state_dict().values(), c.state_dict().values(), strict=True
    ):
        assert torch.equal(x, y), k
    assert not torch.equal(a.cnn.head.weight, c.cnn.head.weight)


# ---- checkpoints ---------------------------------------------------------------------------------
def test_checkpoint_round_trip_is_exact_and_weights_only(tmp_path) -> None:
    net = _net("no_latent")
    p = save_checkpoint(net, tmp_path / "n.pt", {"note": "x", "losses": [1.0, 0.5]})
    raw = torch.load(p, weights_only=True)
    assert raw["net_config"]["variant"] == "no_latent"
    assert "theta_mean" in raw["state_dict"]  # normalization travels with the weights
    back, meta = load_checkpoint(p)
    assert meta == {"note": "x", "losses": [1.0, 0.5]}
    assert back.config == net.config
    img, obs, obj, win = _inputs(3)
    assert torch.equal(back(img, obs, obj, win), net(img, obs, obj, win))


def test_bad_checkpoints_raise_file_format_errors(tmp_path) -> None:
    with pytest.raises(FileFormatError, match="no such"):
        load_checkpoint(tmp_path / "missing.pt")
    p = save_checkpoint(_net(), tmp_path / "n.pt")
    cut = tmp_path / "cut.pt"
    cut.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    with pytest.raises(FileFormatError, match="cut.pt"):
        SVPolicy.load(cut)
    foreign = tmp_path / "f.pt"
    torch.save({"format": "something else", "state_dict": {}}, foreign)
    with pytest.raises(FileFormatError, match="field 'format' is 'something else'"):
        load_checkpoint(foreign)
    bad = tmp_path / "b.pt"
    ck = torch.load(p, weights_only=True)
    ck["state_dict"].pop("cnn.head.weight")
    torch.save(ck, bad)
    with pytest.raises(FileFormatError, match="malformed"):
        load_checkpoint(bad)


# ---- the policy ----------------------------------------------------------------------------------
def _rollout(k: int, n: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    state = torch.randn(k, n, 10, generator=g)
    state[..., 6:] = state[..., 6:] / state[..., 6:].norm(dim=-1, keepdim=True)
    img = torch.randint(0, 256, (k, n, 32, 32, 3), dtype=torch.uint8, generator=g)
    t = (torch.arange(k, dtype=torch.float32) * 0.05)[:, None].expand(k, n).contiguous()
    obj = torch.randn(n, 7, generator=g)
    return state, img, t, obj


def _obs(state, img, t, obj, k):
    return {"image": img[k], "state": state[k], "time": t[k], "objective": obj}


def test_policy_matches_the_offline_eq3_windows_and_is_a_policy(tmp_path) -> None:
    net = _net("svnet")
    pol = SVPolicy(net)
    assert isinstance(pol, Policy)
    state, img, t, obj = _rollout(6, 2)
    acts = torch.stack([pol.act(_obs(state, img, t, obj, k)) for k in range(6)])
    for e in range(2):
        win = history_windows(t[:, e], observable(state[:, e]), net.config.window)
        y = net(img[:, e], observable(state[:, e]), obj[e].expand(6, 7), win)
        u = net.denormalize_action(y)
        u[:, 0] = u[:, 0].clamp(0, 1)
        torch.testing.assert_close(acts[:, e], u)
    # round trip through a file gives identical actions
    p = pol.save(tmp_path / "p.pt")
    again = SVPolicy.load(p)
    assert again.variant == "svnet"
    acts2 = torch.stack([again.act(_obs(state, img, t, obj, k)) for k in range(6)])
    assert torch.equal(acts, acts2)


def test_policy_with_command_history_matches_the_offline_windows() -> None:
    """history_actions: each entry also carries the command sent over its interval; the
    online windows (policy) equal the offline ones built from the same commands."""
    net = _net("svnet", actions=True)
    assert net.config.entry_size == 15 and net.history is not None
    pol = SVPolicy(net)
    state, img, t, obj = _rollout(6, 2, seed=2)
    acts = torch.stack([pol.act(_obs(state, img, t, obj, k)) for k in range(6)])
    for e in range(2):
        o = observable(state[:, e])
        win = history_windows(t[:, e], o, net.config.window)
        win = torch.cat((win, action_windows(acts[:, e], net.config.window)), dim=-1)
        u = net.denormalize_action(net(img[:, e], o, obj[e].expand(6, 7), win))
        u[:, 0] = u[:, 0].clamp(0, 1)
        torch.testing.assert_close(acts[:, e], u)
    with pytest.raises(ConfigError, match="15 fields"):
        net.set_stats(NormStats.identity())  # eq. 3-only statistics do not fit


def test_policy_ignores_lateral_position() -> None:
    state, img, t, obj = _rollout(5, 3, seed=1)
    moved = state.clone()
    moved[..., 0] += torch.linspace(-50, 50, 3)
    moved[..., 1] -= 7.0
    a, b = SVPolicy(_net("no_pretrain")), SVPolicy(_net("no_pretrain"))
    for k in range(5):
        assert torch.equal(a.act(_obs(state, img, t, obj, k)), b.act(_obs(moved, img, t, obj, k)))
    moved[..., 2] += 1.0  # height is observed
    c = SVPolicy(_net("no_pretrain"))
    assert not torch.equal(c.act(_obs(moved, img, t, obj, 0)), a.act(_obs(state, img, t, obj, 0)))


def test_policy_reset_restarts_the_history_of_masked_envs() -> None:
    state, img, t, obj = _rollout(4, 2, seed=2)
    pol, fresh = SVPolicy(_net()), SVPolicy(_net())
    pol.reset(2)
    for k in range(3):
        pol.act(_obs(state, img, t, obj, k))
    pol.reset(2, mask=torch.tensor([True, False]))
    a = pol.act(_obs(state, img, t, obj, 3))
    b = fresh.act(_obs(state, img, t, obj, 3))  # a fresh history for both envs
    assert torch.equal(a[0], b[0]) and not torch.equal(a[1], b[1])
    with pytest.raises(ConfigError, match="mask"):
        pol.reset(2, mask=torch.tensor([1, 0]))


def test_policy_clamps_thrust() -> None:
    net = _net()
    with torch.no_grad():
        net.action_mean[0] = 50.0  # a net that asks for far too much thrust
    state, img, t, obj = _rollout(1, 4)
    u = SVPolicy(net).act(_obs(state, img, t, obj, 0))
    assert u.shape == (4, 4) and (u[:, 0] == 1.0).all()


def test_policy_rejects_bad_observations() -> None:
    pol = SVPolicy(_net())
    state, img, t, obj = _rollout(1, 2)
    good = _obs(state, img, t, obj, 0)
    with pytest.raises(ConfigError, match=r"obs\['image'\].*\(N, 32, 32, 3\) uint8"):
        pol.act({**good, "image": torch.zeros(2, 64, 64, 3, dtype=torch.uint8)})
    with pytest.raises(ConfigError, match=r"obs\['image'\]"):
        pol.act({**good, "image": good["image"].float()})
    with pytest.raises(ConfigError, match=r"obs\['state'\]"):
        pol.act({**good, "state": good["state"][:, :9]})
    with pytest.raises(ConfigError, match=r"obs\['time'\]"):
        pol.act({**good, "time": good["time"][:1]})
    with pytest.raises(ConfigError, match="keys"):
        pol.act({"image": good["image"]})
    pol.act(good)
    three = _rollout(1, 3)
    with pytest.raises(ConfigError, match=r"reset\(3\)"):
        pol.act(_obs(*three, 0))
    with pytest.raises(ConfigError, match="n_envs"):
        pol.reset(0)


def test_policy_runs_on_the_device_and_repeats_itself(device: str) -> None:
    state, img, t, obj = _rollout(3, 2, seed=4)
    runs = []
    for _ in range(2):
        pol = SVPolicy(_net("no_latent"), device=device)
        runs.append(torch.stack([pol.act(_obs(state, img, t, obj, k)) for k in range(3)]))
    assert runs[0].device == state.device and torch.isfinite(runs[0]).all()
    assert torch.equal(runs[0], runs[1])


def test_a_fresh_net_predicts_about_the_mean() -> None:
    for v in VARIANTS:
        net = _net(v)
        y = net(*_inputs(64))
        assert y.abs().max() < 0.5, v  # normalized units: the target std is 1
        if net.history is not None:
            assert net.theta_estimate(_inputs(64)[3]).abs().max() < 0.5, v
