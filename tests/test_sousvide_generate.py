"""SOUS VIDE Algorithm 1: resumable, deterministic expert data in the dataset contract."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch

from volary.control.mpc import MpcConfig
from volary.errors import ConfigError
from volary.studies.sousvide import dataset as ds
from volary.studies.sousvide.generate import (
    GenerateConfig,
    desired_state,
    draw_units,
    generate,
    nominal_params,
    unit_generator,
)
from volary.studies.sousvide.history import history_windows, observable
from volary.studies.sousvide.scene import make_scene

TINY = dict(n_des=3, n_smp=2, t_smp=0.5, width=32, height=32, window=4, envs=2)


@pytest.fixture(scope="module")
def scene():
    return make_scene(width=32, height=32)


def _raw(path) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as f:
        return {k: f[k][...] for k in f}


def test_resume_after_partial_run_equals_uninterrupted(tmp_path, scene) -> None:
    cfg = GenerateConfig(**TINY)
    full = generate(tmp_path / "full.h5", cfg, scene=scene)
    assert full.units_flown == 6 and full.rows == 6 * 10
    part = generate(tmp_path / "part.h5", cfg, scene=scene, max_units=2)
    assert part.units_flown == 2
    assert ds.pending_units(tmp_path / "part.h5").tolist() == [2, 3, 4, 5]
    rest = generate(tmp_path / "part.h5", cfg, scene=scene)
    assert rest.units_skipped == 2 and rest.units_flown == 4
    a, b = _raw(tmp_path / "full.h5"), _raw(tmp_path / "part.h5")
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    # a second resume has nothing left to fly
    assert generate(tmp_path / "part.h5", cfg, scene=scene).units_flown == 0


def test_seed_changes_the_draws_and_a_unit_stream_is_its_own() -> None:
    cfg = GenerateConfig(**TINY)
    a = draw_units(cfg, np.array([0, 1, 2, 3]))
    b = draw_units(cfg, np.array([3, 1]))  # other batch composition, same units
    torch.testing.assert_close(a.dpos[[3, 1]], b.dpos)
    torch.testing.assert_close(a.mass_frac[[3, 1]], b.mass_frac)
    c = draw_units(GenerateConfig(**{**TINY, "seed": 1}), np.array([0, 1, 2, 3]))
    assert not torch.allclose(a.dpos, c.dpos)
    g1, g2 = unit_generator(0, 5), unit_generator(0, 5)
    assert torch.equal(torch.rand(3, generator=g1), torch.rand(3, generator=g2))


def test_rows_hold_the_expert_within_limits_and_the_sampled_theta(tmp_path, scene) -> None:
    cfg = GenerateConfig(**{**TINY, "n_smp": 3, "envs": 3})
    s = generate(tmp_path / "d.h5", cfg, scene=scene)
    data = ds.read(tmp_path / "d.h5")
    assert s.valid_rows == len(data) > 0.8 * s.rows
    assert 0.0 < s.tracking_error < 0.4  # starts are up to ~0.45 m off x_des
    lo, hi = MpcConfig().input_bounds()
    assert (data.action >= lo - 1e-6).all() and (data.action <= hi + 1e-6).all()
    nom = nominal_params("sous_vide", "cpu")
    m0, k0 = float(nom.mass[0]), float(nom.max_thrust[0])
    assert ((data.theta[:, 1] >= 0.65 * m0 - 1e-4) & (data.theta[:, 1] <= 1.35 * m0 + 1e-4)).all()
    assert ((data.theta[:, 0] >= 0.85 * k0 - 1e-3) & (data.theta[:, 0] <= 1.15 * k0 + 1e-3)).all()
    assert len(np.unique(data.theta[:, 1])) == cfg.units  # one theta per rollout
    np.testing.assert_allclose(data.objective[0], scene.objective.numpy())
    assert data.images is not None and data.images.shape[1:] == (32, 32, 3)
    assert data.images.std() > 5  # the camera sees the scene, not a blank frame
    # step 0 of each unit is x_s: within delta_x of x_des(t_i) (the attitude turn aside)
    first = data.step == 0
    t0 = torch.from_numpy(data.time[first]).double()
    x_des = desired_state(scene, t0, nom)
    off = np.abs(data.state[first, :6] - x_des[:, :6].numpy())
    assert (off <= np.array([0.3, 0.3, 0.2, 0.3, 0.3, 0.2]) + 1e-3).all()
    # the time column runs at 20 Hz from t_i = i * duration / n_des
    np.testing.assert_allclose(np.sort(np.unique(data.time[first])), [0.0, 5.0, 10.0], atol=1e-6)
    # the stored histories are eq. 3 windows of the stored states
    u = data.unit == data.unit[0]
    want = history_windows(
        torch.from_numpy(data.time[u]), observable(torch.from_numpy(data.state[u])), cfg.window
    )
    np.testing.assert_allclose(data.history[u], want.numpy(), atol=1e-6)


def test_off_course_rollouts_are_invalid_from_the_first_bad_row(tmp_path, scene) -> None:
    cfg = GenerateConfig(**{**TINY, "max_error": 0.05})
    generate(tmp_path / "d.h5", cfg, scene=scene)
    raw = _raw(tmp_path / "d.h5")
    valid = raw["valid"].reshape(cfg.units, cfg.steps)
    assert not valid.all()
    assert (np.diff(valid.astype(int), axis=1) <= 0).all()  # once invalid, always invalid


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("n_des", 0),
        ("n_smp", 1.5),
        ("t_smp", 0.04),
        ("physics_hz", 30.0),
        ("mass_range", (1.2, 0.8)),
        ("thrust_range", (0.0, 1.0)),
        ("pos_range", (0.1, -0.1, 0.1)),
        ("att_range", (0.1, 0.1)),
        ("window", 0),
        ("seed", -1),
        ("device", "gpu0"),
        ("max_error", float("nan")),
    ],
)
def test_bad_config_names_the_field(field, value) -> None:
    with pytest.raises(ConfigError, match=field):
        GenerateConfig(**{field: value})


def test_resume_with_another_config_is_refused(tmp_path, scene) -> None:
    cfg = GenerateConfig(**TINY)
    generate(tmp_path / "d.h5", cfg, scene=scene, max_units=2)
    with pytest.raises(ConfigError, match="another config"):
        generate(tmp_path / "d.h5", GenerateConfig(**{**TINY, "seed": 3}), scene=scene)
    # execution settings are not part of the dataset identity
    generate(tmp_path / "d.h5", GenerateConfig(**{**TINY, "envs": 2}), scene=scene, max_units=2)
    with pytest.raises(ConfigError, match="scene"):
        generate(tmp_path / "e.h5", GenerateConfig(**{**TINY, "width": 48}), scene=scene)
