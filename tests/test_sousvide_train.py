"""Two-stage SV-Net training (paper 000 Sec. V, VI-A) on small synthetic SOUS VIDE datasets.

The synthetic expert: each rollout unit has theta = [k_th, m]; its vertical and forward
accelerations follow a known model (a_z = 0.4 k_th / m - g, a_x = 2 N / m) from a random
initial velocity, so theta can be read off the eq. 3 history but not off the current state
(not entirely: p_z and v keep a little of it); images are uniform grey with a per-row
brightness b; the expert action is f_th = 0.2 + 0.6 b, W_x = 2 (m - 1.2), W_y = 0.5 (b - 0.5),
W_z = 0.1 p_z.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from volary.errors import ConfigError, UnknownNameError
from volary.studies.sousvide import dataset as ds
from volary.studies.sousvide.history import history_windows, observable
from volary.studies.sousvide.net import ArchConfig, NetConfig, SVNet, load_checkpoint
from volary.studies.sousvide.policy import SVPolicy
from volary.studies.sousvide.train import (
    SVData,
    TrainConfig,
    augment_images,
    compute_stats,
    fit,
    occlude_images,
    pretrain_history,
    split_units,
    stage_parameters,
    train_imitation,
    train_policy,
)

DT, G = 0.05, 9.81
SMALL = ArchConfig(
    cnn_width=0.25,
    image_features=16,
    feature_hidden=(32,),
    features=16,
    history_hidden=(64, 32),
    command_hidden=(64,),
    image_norm="dataset",  # the synthetic images code the action in their brightness
)


def _unit_data(rng: np.random.Generator, b: int, steps: int, size: int, window: int) -> dict:
    out: dict[str, list] = {
        k: []
        for k in ("images", "state", "time", "action", "theta", "objective", "history", "valid")
    }
    for _ in range(b):
        k_th, m = rng.uniform(20, 40), rng.uniform(0.8, 1.6)
        t = np.arange(steps) * DT
        acc = np.array([2.0 / m, 0.0, 0.4 * k_th / m - G])
        v0 = rng.uniform(-1, 1, 3)  # a random start hides theta from the current state
        v = v0 + t[:, None] * acc + 0.005 * rng.standard_normal((steps, 3))
        p = np.cumsum(v * DT, axis=0) + np.r_[rng.uniform(-5, 5, 2), rng.uniform(0.5, 2)]
        q = np.tile([1.0, 0, 0, 0], (steps, 1)) + 0.05 * rng.standard_normal((steps, 4))
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        state = np.concatenate((p, v, q), axis=1).astype(np.float32)
        bright = rng.uniform(0.1, 0.9, steps)
        noise = rng.integers(-8, 9, (steps, size, size, 3))
        img = np.clip(bright[:, None, None, None] * 255 + noise, 0, 255).astype(np.uint8)
        action = np.stack(
            (
                0.2 + 0.6 * bright,
                np.full(steps, 2 * (m - 1.2)),
                0.5 * (bright - 0.5),
                0.1 * p[:, 2],
            ),
            axis=1,
        )
        hist = history_windows(
            torch.as_tensor(t), observable(torch.as_tensor(state)).double(), window
        )
        for key, val in (
            ("images", img),
            ("state", state),
            ("time", t),
            ("action", action),
            ("theta", np.tile([k_th, m], (steps, 1))),
            ("objective", np.tile([0, 0, 1, 5, 0, 1, steps * DT], (steps, 1))),
            ("history", hist.numpy()),
            ("valid", np.ones(steps, bool)),
        ):
            out[key].append(val)
    return {k: np.stack(v) for k, v in out.items()}


def make_dataset(
    path, units: int = 12, steps: int = 12, size: int = 32, window: int = 4, seed: int = 0
):
    rng = np.random.default_rng(seed)
    ds.create(
        path, {"synthetic": seed}, units=units, steps=steps, height=size, width=size, window=window
    )
    ds.write_units(path, np.arange(units), _unit_data(rng, units, steps, size, window))
    return path


@pytest.fixture(scope="module")
def data_path(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("sv") / "d.h5")


def _cfg(**kw) -> TrainConfig:
    base = dict(
        lr=1e-3, batch_size=32, stage1_epochs=2, stage2_epochs=2, val_fraction=0.25, arch=SMALL
    )
    return TrainConfig(**{**base, **kw})


# ---- config and split ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"lr": 0.0}, "lr"),
        ({"batch_size": 0}, "batch_size"),
        ({"val_fraction": 1.0}, "val_fraction"),
        ({"stage2_epochs": 0}, "stage2_epochs"),
        ({"device": "tpu?"}, "device"),
        ({"stage1_epochs": 0}, "stage1_epochs"),
        ({"stage2_max_steps": 0}, "stage2_max_steps"),
        ({"seed": -1}, "seed"),
        ({"latent": 0}, "latent"),
        ({"latent": 8.0}, "latent"),
        ({"latent": True}, "latent"),
        ({"occlusion": 1.5}, "occlusion"),
        ({"occlusion": True}, "occlusion"),
    ],
)
def test_train_config_errors_name_the_field(kw, field) -> None:
    with pytest.raises(ConfigError, match=field):
        TrainConfig(**kw)
    TrainConfig(variant="no_rma", stage1_epochs=0)  # nothing to pre-train
    with pytest.raises(UnknownNameError, match="svnet"):
        TrainConfig(variant="sv")


def test_validation_split_keeps_rollouts_whole_and_is_seeded() -> None:
    unit = np.repeat(np.arange(10), 7)
    tr, va = split_units(unit, 0.3, seed=3)
    assert set(unit[tr.numpy()]).isdisjoint(unit[va.numpy()])
    assert len(set(unit[va.numpy()])) == 3 and tr.numel() + va.numel() == 70
    assert torch.equal(split_units(unit, 0.3, seed=3)[1], va)
    assert not torch.equal(split_units(unit, 0.3, seed=4)[1], va)
    assert split_units(unit, 0.0, 0)[1].numel() == 0
    with pytest.raises(ConfigError, match="val_fraction"):
        split_units(np.zeros(5, int), 0.2, 0)


# ---- stages --------------------------------------------------------------------------------------
def _setup(path, variant: str, **kw):
    cfg = _cfg(variant=variant, **kw)
    data = SVData.from_arrays(ds.read(path), history_actions=cfg.history_actions)
    rows = split_units(data.unit, cfg.val_fraction, cfg.seed)
    gen = torch.Generator().manual_seed(0)
    net = SVNet(NetConfig(variant, 4, 32, 32, SMALL, cfg.history_actions), gen)
    net.set_stats(compute_stats(data, rows[0]))
    return cfg, data, rows, gen, net


def _snapshot(module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


@pytest.mark.parametrize("history_actions", [True, False], ids=["state+cmd", "eq3"])
@pytest.mark.parametrize("variant", ["svnet", "no_latent", "no_pretrain", "no_rma"])
def test_frozen_and_trainable_parameters_per_stage(
    data_path, variant: str, history_actions: bool
) -> None:
    cfg, data, rows, gen, net = _setup(
        data_path, variant, stage1_max_steps=3, stage2_max_steps=3, history_actions=history_actions
    )
    assert net.config.history_actions == history_actions
    s1 = set(stage_parameters(net, 1))
    assert s1 == (
        {k for k, _ in net.named_parameters() if k.startswith("history.")}
        if variant in ("svnet", "no_latent")
        else set()
    )
    before = _snapshot(net)
    if s1:
        pretrain_history(net, data, rows, cfg, gen)
        after1 = _snapshot(net)
        for k in before:  # stage 1 moves the history net only
            assert torch.equal(before[k], after1[k]) == (
                not k.startswith("history.") or k.endswith(("_mean", "_std"))
            ), k
    mid = _snapshot(net)
    train_imitation(net, data, rows, cfg, gen)
    after = _snapshot(net)
    hist = [k for k in after if k.startswith("history.")]
    assert bool(hist) == (variant != "no_rma")
    for k in hist:  # no_pretrain trains its history body (its theta head is off the path)
        moved = variant == "no_pretrain" and k.startswith("history.body.")
        assert torch.equal(mid[k], after[k]) != moved, k
    assert not torch.equal(mid["cnn.features.0.weight"], after["cnn.features.0.weight"])
    assert not torch.equal(mid["command.0.weight"], after["command.0.weight"])
    for k in ("image_mean", "theta_std", "action_mean"):
        assert torch.equal(mid[k], after[k])  # normalization statistics are not trained
    assert all(p.requires_grad for p in net.parameters())  # trainable flags restored


def test_stage1_recovers_theta_better_than_the_mean(tmp_path) -> None:
    path = make_dataset(tmp_path / "t.h5", units=100, steps=16, window=4, seed=5)
    cfg, data, rows, gen, net = _setup(path, "svnet", stage1_epochs=30, lr=1e-2)
    rep = pretrain_history(net, data, rows, cfg, gen)
    err = rep["theta_error"]
    assert err["split"] == "val" and err["rows"] == rows[1].numel()
    for name in ("k_th_N", "m_kg"):
        assert err["rmse"][name] < 0.5 * err["mean_predictor_rmse"][name], (name, err)
    assert rep["final_val_loss"] < 0.3 * rep["initial_val_loss"]


# ---- end to end ----------------------------------------------------------------------------------
def test_train_policy_writes_a_loadable_checkpoint_and_the_loss_drops(data_path, tmp_path) -> None:
    seen: list[tuple[str, int]] = []
    cfg = _cfg(stage1_epochs=20, stage2_epochs=12)
    ck = train_policy(
        data_path, tmp_path / "out", "svnet", cfg, progress=lambda s, e, tr, va: seen.append((s, e))
    )
    assert ck == tmp_path / "out" / "svnet.pt"
    assert seen[0] == ("stage1", 0) and seen[-1] == ("stage2", 11)
    rep = json.loads((tmp_path / "out" / "svnet.json").read_text())
    s2 = rep["stage2"]
    assert len(s2["curve"]) == 12 and s2["samples_per_s"] > 0 and rep["wall_s"] > 0
    assert s2["final_val_loss"] < 0.5 * s2["initial_val_loss"], s2
    assert s2["curve"][-1]["train_loss"] < s2["curve"][0]["train_loss"]
    assert set(rep["stage1"]["theta_error"]["rmse"]) == {"k_th_N", "m_kg"}
    assert rep["units"] == {"train": 9, "val": 3} and rep["rows"]["val"] == 36
    raw = torch.load(ck, weights_only=True)
    assert raw["meta"]["variant"] == "svnet"
    pol = SVPolicy.load(ck)
    a = ds.read(data_path)
    obs = {
        "image": torch.as_tensor(a.images[:3]),
        "state": torch.as_tensor(a.state[:3]),
        "time": torch.as_tensor(a.time[:3]),
        "objective": torch.as_tensor(a.objective[:3]),
    }
    u = pol.act(obs)
    assert u.shape == (3, 4) and torch.isfinite(u).all()


def test_command_history_pairs_each_entry_with_its_rollouts_command(data_path, tmp_path) -> None:
    from volary.studies.sousvide.history import action_windows
    from volary.studies.sousvide.train import with_commands

    a = ds.read(data_path)
    h = with_commands(a)
    assert h.shape == (*a.history.shape[:2], 15)
    np.testing.assert_array_equal(h[..., :11], a.history)
    for unit in (0, 5):
        rows = np.flatnonzero(a.unit == unit)
        want = action_windows(torch.as_tensor(a.action[rows]), a.history.shape[1])
        np.testing.assert_array_equal(h[rows, :, 11:], want.numpy())  # never across rollouts
    cfg = _cfg(history_actions=True, stage1_max_steps=3, stage2_max_steps=3)
    pol = SVPolicy.load(train_policy(data_path, tmp_path / "o", "svnet", cfg))
    assert pol.net.config.history_actions and pol.net.history_mean.numel() == 15
    with pytest.raises(ConfigError, match="history_actions"):
        _cfg(history_actions=1)


def test_latent_width_is_honoured_and_round_trips_through_the_checkpoint(
    data_path, tmp_path
) -> None:
    """TrainConfig.latent replaces the last history layer (the RMA latent the command net
    reads); the checkpoint's NetConfig carries it, so SVPolicy.load rebuilds the same net."""
    cfg = _cfg(latent=5, history_actions=True, stage1_max_steps=2, stage2_max_steps=2)
    assert cfg.net_arch.history_hidden == (64, 5) and cfg.arch == SMALL
    assert _cfg(latent=None).net_arch == SMALL  # None keeps the arch's own latent
    assert _cfg().net_arch.history_hidden == (64, 8)  # the default: an 8-wide latent
    ck = train_policy(data_path, tmp_path / "o", "svnet", cfg)
    pol = SVPolicy.load(ck)
    net = pol.net
    assert net.config.arch.history_hidden == (64, 5)
    assert net.history is not None and net.history.head.in_features == 5
    win = SVData.from_arrays(ds.read(data_path), history_actions=True).history[:3]
    assert net.latent(win).shape == (3, 5)
    first = net.command[0]
    assert first.in_features == SMALL.features + 5 + 8 + 7  # features, latent, obs, objective
    raw = torch.load(ck, weights_only=True)
    assert raw["net_config"]["arch"]["history_hidden"] == [64, 5]
    assert raw["meta"]["train_config"]["latent"] == 5
    back, _ = load_checkpoint(ck)
    assert back.config == net.config
    for k, v in net.state_dict().items():
        assert torch.equal(back.state_dict()[k], v), k


def test_per_image_norm_trains_and_travels_in_the_checkpoint(data_path, tmp_path) -> None:
    """ArchConfig.image_norm reaches the trained net (TrainConfig.net_arch keeps it with the
    latent applied) and its checkpoint; the policy flies it brightness-invariantly."""
    arch = dataclasses.replace(SMALL, image_norm="per_image")
    cfg = _cfg(arch=arch, latent=4, stage1_max_steps=2, stage2_max_steps=2, augment=True)
    assert cfg.net_arch.image_norm == "per_image" and cfg.net_arch.history_hidden == (64, 4)
    assert cfg.to_dict()["arch"]["image_norm"] == "per_image"
    assert TrainConfig().arch.image_norm == "per_image"  # the default for new nets
    ck = train_policy(data_path, tmp_path / "o", "svnet", cfg)
    net, meta = load_checkpoint(ck)
    assert net.config.arch.image_norm == "per_image"
    assert meta["train_config"]["arch"]["image_norm"] == "per_image"
    data = SVData.from_arrays(ds.read(data_path), history_actions=True)
    img = (data.images[:4] // 5) * 5
    dim = (img.int() * 2 // 5).to(torch.uint8)  # exactly 40 % brightness
    args = (data.obs[:4], data.objective[:4], data.history[:4])
    with torch.no_grad():
        torch.testing.assert_close(net(img, *args), net(dim, *args), rtol=1e-4, atol=1e-5)


def test_training_is_deterministic_per_seed(data_path) -> None:
    arrays = ds.read(data_path)
    cfg = _cfg(variant="no_latent", stage1_max_steps=4, stage2_max_steps=3, augment=True)
    a, ra = fit(arrays, cfg)
    b, rb = fit(arrays, cfg)
    c, _ = fit(arrays, dataclasses.replace(cfg, seed=1))
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k]), k
    assert ra["stage2"]["curve"] == rb["stage2"]["curve"]
    assert not torch.equal(a.command[0].weight, c.command[0].weight)


def test_train_policy_rejects_bad_inputs(data_path, tmp_path) -> None:
    with pytest.raises(UnknownNameError, match="no_rma"):
        train_policy(data_path, tmp_path, "rma_net", _cfg())
    with pytest.raises(ConfigError, match="config"):
        train_policy(data_path, tmp_path, "svnet", {"lr": 1e-3})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="val_fraction"):
        one = make_dataset(tmp_path / "one.h5", units=1, steps=4)
        train_policy(one, tmp_path, "no_rma", _cfg())


def test_augmentation_is_seeded_and_stays_uint8() -> None:
    img = torch.full((4, 32, 32, 3), 128, dtype=torch.uint8)
    a = augment_images(img, torch.Generator().manual_seed(0))
    b = augment_images(img, torch.Generator().manual_seed(0))
    assert a.dtype == torch.uint8 and torch.equal(a, b)
    assert len({int(x) for x in a[:, 0, 0, 0]}) > 1  # per-image brightness


def test_occlusion_is_seeded_and_covers_the_requested_share() -> None:
    img = torch.full((400, 24, 32, 3), 128, dtype=torch.uint8)
    a = occlude_images(img, 0.5, torch.Generator().manual_seed(3))
    b = occlude_images(img, 0.5, torch.Generator().manual_seed(3))
    assert a.dtype == torch.uint8 and a.shape == img.shape and torch.equal(a, b)
    changed = (a != 128).any(-1)  # (N, H, W) occluded pixels (a colour of exactly 128 is rare)
    hit = changed.any(-1).any(-1)
    assert 0.4 < hit.float().mean() < 0.6  # about half the images
    cover = changed.flatten(1).float().mean(1)[hit]
    assert cover.min() > 0.005 and cover.max() < 0.75  # 1-3 rectangles of 10-50 % sides
    assert torch.equal(occlude_images(img, 0.0, torch.Generator()), img)
    assert (occlude_images(img, 1.0, torch.Generator()) != 128).any(-1).flatten(1).any(1).all()


def test_occlusion_reaches_stage_two_only(data_path) -> None:
    """TrainConfig.occlusion changes the stage-2 fit (images differ) and not stage 1's."""
    arrays = ds.read(data_path)
    cfg = _cfg(variant="svnet", stage1_max_steps=3, stage2_max_steps=3)
    _, plain = fit(arrays, cfg)
    _, occ = fit(arrays, dataclasses.replace(cfg, occlusion=1.0))
    assert plain["stage1"]["curve"] == occ["stage1"]["curve"]
    assert plain["stage2"]["curve"] != occ["stage2"]["curve"]
    assert occ["train_config"]["occlusion"] == 1.0


@pytest.mark.slow
def test_rma_variants_beat_no_rma_when_the_action_depends_on_theta(tmp_path) -> None:
    """W_x = 2 (m - 1.2) is visible only through the history: no_rma cannot fit it."""
    path = make_dataset(tmp_path / "big.h5", units=100, steps=10, window=4, seed=2)
    val = {}
    for v in ("svnet", "no_rma"):  # about 20 s each on one core
        cfg = _cfg(variant=v, stage1_epochs=40, stage2_epochs=20, lr=3e-3)
        ck = train_policy(path, tmp_path / "o", v, cfg)
        val[v] = json.loads(ck.with_suffix(".json").read_text())["stage2"]["final_val_loss"]
        load_checkpoint(ck)
    assert val["svnet"] < 0.7 * val["no_rma"], val
