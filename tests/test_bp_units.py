"""BoundaryPredictor pieces (paper 002): Table II grid, Algorithm 1 candidates, eq. 3, 4, 5, 7,
8-10, gate geometry, checkpoints and input checks."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from volary.errors import ConfigError, FileFormatError, UnknownNameError
from volary.studies.boundary import deploy, flight, grid, model, sampling, train
from volary.worlds import boundary_predictor_course
from volary.worlds.sdf import sdf_box


# ---- Table II grid ------------------------------------------------------------------------------
def test_grid_has_exactly_129600_unique_inputs_in_the_table_ii_ranges():
    assert grid.TABLE_II.size == grid.GRID_SIZE == 129_600
    e = grid.grid_inputs()
    assert e.shape == (129_600, 8)
    assert len(np.unique(e.numpy(), axis=0)) == 129_600
    for col, axis in enumerate(grid.TABLE_II.axes):
        vals = np.unique(e[:, col].numpy())
        np.testing.assert_allclose(vals, np.linspace(axis.low, axis.high, axis.count))
    assert sorted(np.unique(e[:, [1, 4, 7]].numpy())) == pytest.approx([0.3, 0.525])


def test_subset_is_seeded_sorted_and_checked():
    a, b = grid.subset_indices(0.01, 3), grid.subset_indices(0.01, 3)
    np.testing.assert_array_equal(a, b)
    assert len(a) == 1296 and np.all(np.diff(a) > 0)
    assert not np.array_equal(a, grid.subset_indices(0.01, 4))
    for bad in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ConfigError, match="fraction"):
            grid.subset_indices(bad, 0)


def test_check_inputs_rejects_nan_shape_and_out_of_range():
    e = grid.grid_inputs(np.arange(3))
    with pytest.raises(ConfigError, match="finite"):
        grid.check_inputs(torch.where(torch.eye(3, 8) > 0, math.nan, e))
    with pytest.raises(ConfigError, match="shape"):
        grid.check_inputs(e[:, :7])
    far = e.clone()
    far[0, 2] = 3.0
    with pytest.raises(ConfigError, match="d0"):
        grid.check_inputs(far)


# ---- Algorithm 1 ------------------------------------------------------------------------------
def test_seventy_candidates_per_input_follow_algorithm_1():
    e = grid.grid_inputs(np.array([0, 77_777]))
    c = sampling.candidates(e)
    assert c.speed.shape == c.t0.shape == c.tf.shape == (2, 70)
    # input 0: v_{i-1} = 0, d0 = d_f = 0.8; candidate v_i = 0 -> t_lin = 1.5 s, t_f = 2 d_f
    np.testing.assert_allclose(c.t0[0, :7], 1.5 * np.linspace(0.5, 1.1, 7))
    np.testing.assert_allclose(c.tf[0, :7], 1.6)
    v1 = 2.0 / 9
    np.testing.assert_allclose(c.t0[0, 7:14], 2 * 0.8 / v1 * np.linspace(0.5, 1.1, 7))
    np.testing.assert_allclose(c.tf[0, 7:14], 2 * 0.8 / v1)
    assert torch.unique(c.speed[1]).numel() == 10


def test_window_geometry_and_gate_velocities():
    e = torch.tensor([[0.5, 0.3, 1.2, 0.3, 0.525, 1.0, -0.2, 0.3]], dtype=torch.float64)
    w = sampling.window(e)
    np.testing.assert_allclose(w.centres[0, 1], [1.2 * math.cos(0.3), 1.2 * math.sin(0.3), 0.525])
    assert float(w.headings[0, 1]) == pytest.approx(0.1)  # theta_0 + theta_f (bisector)
    leg = w.centres[0, 2, :2] - w.centres[0, 1, :2]
    assert float(torch.atan2(leg[1], leg[0])) == pytest.approx(0.1 - 0.2)
    assert float(leg.norm()) == pytest.approx(1.0)
    c = sampling.candidates(e)
    co, du = sampling.candidate_coefficients(e, c)
    # boundary conditions: start velocity v_{i-1} along +x, gate i velocity along psi_i (eq. 5)
    np.testing.assert_allclose(co[0, 20, 0, :, 1], [0.5, 0.0, 0.0], atol=1e-12)
    tau = du[0, 20, 0]
    vel = sampling._poly_derivative(co[0, 20, 0], tau, 1)
    np.testing.assert_allclose(
        vel, float(c.speed[0, 20]) * np.array([math.cos(0.1), math.sin(0.1), 0]), atol=1e-9
    )


def test_window_inputs_of_the_circular_course_reproduce_its_gates():
    spec = boundary_predictor_course("circular")
    c, h = deploy.course_gates(spec)
    e = deploy.window_input(c[0], h[0], 0.7, c[1], h[1], c[2])
    w = sampling.window(torch.as_tensor(e[None]))
    # rotate the local window into the world frame of gate 0 and compare gate 2
    rot = np.array([[math.cos(h[0]), -math.sin(h[0])], [math.sin(h[0]), math.cos(h[0])]])
    np.testing.assert_allclose(c[0, :2] + rot @ w.centres[0, 2, :2].numpy(), c[2, :2], atol=1e-6)
    assert float(w.headings[0, 1]) + h[0] == pytest.approx(h[1], abs=1e-6)


# ---- eq. 3, 4, 7 -------------------------------------------------------------------------------
def test_eq3_acceleration_limit():
    assert float(sampling.acceleration_limit(torch.tensor(1.0))) == pytest.approx(1.7)
    assert float(sampling.acceleration_limit(torch.tensor(0.0))) == pytest.approx(2.0)
    # a line at 1 m/s (a = 0) holds; the same line with 1.8 m/s^2 of acceleration does not
    line = torch.zeros(1, 3, 8, dtype=torch.float64)
    line[0, 0, 1] = 1.0
    assert bool(sampling.satisfies_acceleration_limit(line, torch.tensor([1.0])))
    line[0, 0, 2] = 0.9  # x = t + 0.9 t^2: a = 1.8 > 1.7 at t = 0
    assert not bool(sampling.satisfies_acceleration_limit(line, torch.tensor([1.0])))
    with pytest.raises(ConfigError, match="samples"):
        sampling.satisfies_acceleration_limit(line, torch.tensor([1.0]), samples=1)


def test_eq4_yaw_interpolation_with_r_025():
    t = torch.tensor([0.0, 0.25, 0.5, 1.0, 2.0])
    yaw, rate = sampling.interpolated_yaw(
        t, torch.tensor(2.0), torch.tensor(0.2), torch.tensor(1.0), 0.25
    )
    np.testing.assert_allclose(yaw, [0.2, 0.6, 1.0, 1.0, 1.0], atol=1e-6)
    np.testing.assert_allclose(rate, [1.6, 1.6, 0.0, 0.0, 0.0], atol=1e-6)
    # across +-pi the short way round
    y, _ = sampling.interpolated_yaw(
        torch.tensor(0.25), torch.tensor(1.0), torch.tensor(3.0), torch.tensor(-3.0), 0.25
    )
    assert float(y) == pytest.approx(3.0 + (2 * math.pi - 6.0))
    with pytest.raises(ConfigError, match="ratio"):
        sampling.interpolated_yaw(t, torch.tensor(1.0), torch.tensor(0.0), torch.tensor(1.0), 0.0)


def test_eq7_cost_hand_computed_and_argmin():
    c = sampling.trajectory_cost(
        torch.tensor(1.0), torch.tensor(1.0), torch.tensor(0.05), torch.tensor(1.2)
    )
    assert float(c) == pytest.approx(1_000_000 + 100 + 0.2 + 1.2)
    c0 = sampling.trajectory_cost(
        torch.tensor(0.0), torch.tensor(0.0), torch.tensor(0.01), torch.tensor(0.9)
    )
    assert float(c0) == pytest.approx(0.94)
    e = grid.grid_inputs(np.array([5, 6]))
    cand = sampling.candidates(e)
    cost = torch.full((2, 70), math.inf, dtype=torch.float64)
    cost[0, 13], cost[0, 40] = 2.0, 1.5
    v, t0, cmin = sampling.select_optimal(cost, cand)
    assert float(v[0]) == pytest.approx(float(cand.speed[0, 40])) and float(cmin[0]) == 1.5
    assert float(t0[0]) == pytest.approx(float(cand.t0[0, 40]))
    assert math.isnan(float(v[1])) and math.isinf(float(cmin[1]))


# ---- gate frames -----------------------------------------------------------------------------
def test_frame_distance_matches_the_worlds_box_sdf():
    cfg = sampling.SamplingConfig()
    g = torch.Generator().manual_seed(0)
    centres = torch.tensor([[[0.0, 0.0, 0.3], [1.0, 0.5, 0.525]]])
    heads = torch.tensor([[0.3, -0.7]])
    pts = torch.rand(4000, 3, generator=g) * torch.tensor([2.0, 1.6, 0.9]) + torch.tensor(
        [-0.5, -0.5, 0.0]
    )
    ctr, half, yaw = flight.gate_frame_boxes(centres, heads, cfg)
    ref, _ = sdf_box(
        pts[:, None, :], ctr.reshape(1, -1, 3), half.reshape(1, -1, 3), yaw.reshape(1, -1)
    )
    sizes = torch.tensor([cfg.gate_opening / 2, cfg.gate_border, cfg.gate_depth / 2])
    got = flight.frame_distance(pts, centres.expand(4000, 2, 3), heads.expand(4000, 2), sizes)
    np.testing.assert_allclose(got, ref.amin(-1).clamp_min(0), atol=1e-5)


# ---- eq. 8-10 -----------------------------------------------------------------------------------
def _sig(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_eq8_eq9_loss_hand_computed():
    pred = torch.tensor([[0.5, 0.5]])
    target = torch.tensor([[0.4, 0.6]])
    e_v = (0.4 - 0.5) / (0.4 + 0.1)  # over-predicted speed: unsafe, negative
    e_t = -(0.6 - 0.5) / (0.6 + 0.1)  # under-predicted time: unsafe, negative
    np.testing.assert_allclose(train.item_errors(pred, target)[0], [e_v, e_t], rtol=1e-6)

    def item(e: float) -> float:
        return _sig(10 * e) * 0.8 * e + (1 - _sig(10 * e)) * (-2.0 * e)

    want = (item(e_v) + item(e_t)) / 2
    assert float(train.soft_threshold_loss(pred, target)) == pytest.approx(want, rel=1e-6)
    # the same error magnitude on the safe side costs less
    safe = train.soft_threshold_loss(torch.tensor([[0.3, 0.7]]), target)
    assert float(safe) < want


def test_eq10_noise_is_bounded_by_b_and_seeded():
    x = torch.zeros(20000, 8)
    a = train.noisy_inputs(x, 0.1, torch.Generator().manual_seed(1))
    b = train.noisy_inputs(x, 0.1, torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    assert float(a.std()) == pytest.approx(0.1 * math.sqrt(1 / 3), rel=0.05)  # B sqrt(E[U^2])


# ---- network, checkpoints, configs -------------------------------------------------------------
def test_table_iii_network_shapes_and_checkpoint_round_trip(tmp_path):
    net = model.BoundaryPredictor()
    linear = [m for m in net.net if isinstance(m, torch.nn.Linear)]
    assert [m.out_features for m in linear] == [512, 256, 32, 32, 2]
    e = grid.grid_inputs(np.arange(0, 129_600, 9000))
    v, t = net.predict(e)
    assert bool(((v >= 0) & (v <= 2) & (t >= 0) & (t <= 2)).all())
    p = model.save_checkpoint(net, tmp_path / "m.pt", {"note": "x"})
    raw = torch.load(p, weights_only=True)
    assert raw["format"] == model.CHECKPOINT_FORMAT
    back, meta = model.load_checkpoint(p)
    assert meta == {"note": "x"}
    torch.testing.assert_close(back.predict(e), net.predict(e))
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(FileFormatError):
        model.load_checkpoint(tmp_path / "junk.pt")
    with pytest.raises(FileFormatError, match="no such BoundaryPredictor checkpoint file"):
        model.load_checkpoint(tmp_path / "missing.pt")


@pytest.mark.parametrize(
    ("factory", "match"),
    [
        (lambda: sampling.SamplingConfig(compile="jax"), "compile"),
        (lambda: sampling.SamplingConfig(tail_s=-1.0), "tail_s"),
        (lambda: sampling.SamplingConfig(grace_s=-0.1), "grace_s"),
        (lambda: sampling.SamplingConfig(mass_range=-0.01), "mass_range"),
        (lambda: train.TrainConfig(epochs=0), "epochs"),
        (lambda: train.TrainConfig(test_fraction=1.0), "test_fraction"),
        (lambda: deploy.DeployConfig(end_distance=-1.0), "end_distance"),
        (lambda: model.BoundaryPredictor(dropout=1.5), "dropout"),
    ],
)
def test_bad_options_raise_config_errors(factory, match):
    with pytest.raises(ConfigError, match=match):
        factory()


def test_bad_courses_raise():
    with pytest.raises(UnknownNameError, match="circular"):
        deploy.named_course("oval")
    spec = boundary_predictor_course("straight")
    dup = replace(spec, gates=(spec.gates[0], spec.gates[0], *spec.gates[1:]))
    dup = replace(dup, meta={**dup.meta, "order_index": list(range(len(dup.gates)))})
    with pytest.raises(ConfigError, match="duplicate"):
        deploy.course_gates(dup)
    with pytest.raises(ConfigError, match="no gates"):
        deploy.course_gates(replace(spec, meta={**spec.meta, "order_index": []}))


def test_eq3_check_matches_the_per_sample_reference_on_grid_candidates():
    e = grid.grid_inputs(grid.subset_indices(40 / grid.GRID_SIZE, 7))
    co, du = sampling.candidate_coefficients(e, sampling.candidates(e))
    got = sampling.satisfies_acceleration_limit(co, du, 16)
    tau = du[..., None] * torch.linspace(0.0, 1.0, 16, dtype=torch.float64)
    vel = sampling._poly_derivative(co[..., None, :, :], tau, 1).norm(dim=-1)
    acc = sampling._poly_derivative(co[..., None, :, :], tau, 2).norm(dim=-1)
    ref = (acc < sampling.acceleration_limit(vel)).flatten(-2).all(-1)
    assert 0 < int(ref.sum()) < ref.numel()  # both outcomes occur
    assert torch.equal(got, ref)


def test_length_buckets_bound_the_ratio_and_cover_every_flight():
    lengths = torch.sort(torch.rand(5000, generator=torch.Generator().manual_seed(2)) * 9 + 1)[0]
    chunks = flight.length_buckets(lengths, max_size=1024, ratio=1.2, min_size=100)
    assert chunks[0].start == 0 and chunks[-1].stop == 5000
    assert all(a.stop == b.start for a, b in zip(chunks, chunks[1:], strict=False))
    for c in chunks:
        part = lengths[c]
        assert len(part) <= 1024
        assert len(part) >= 100 or c.stop == 5000 or float(part[-1]) <= 1.2 * float(part[0])
        if len(part) > 100:
            assert float(part[-1]) <= 1.2 * float(part[0]) + 1e-6
    with pytest.raises(ConfigError, match="lengths"):
        flight.length_buckets(lengths.flip(0), 1024, 1.2, 100)


def test_table_i_randomization_stays_in_its_ranges_and_follows_the_keys():
    from volary.math import random as vrandom
    from volary.sim import Simulator

    cfg = sampling.SamplingConfig()
    nominal = Simulator("crazyflie", n_envs=500, control="mellinger").params
    keys = vrandom.env_keys(4, torch.arange(500))
    p, force = flight.table_i_randomization(nominal, keys, cfg)
    dm = p.mass - nominal.mass
    assert float(dm.abs().max()) <= 0.01 and float(dm.std()) > 0.004  # U(+-0.01): std 0.0058
    di = torch.diagonal(p.inertia - nominal.inertia, dim1=-2, dim2=-1)
    assert float(di.abs().max()) <= 1e-6 + 1e-9 and float(di.abs().max()) > 5e-7
    torch.testing.assert_close(p.inertia_inv @ p.inertia, torch.eye(3).expand(500, 3, 3))
    assert force.shape == (500, 3) and float(force.abs().max()) <= 1e-6
    p2, force2 = flight.table_i_randomization(nominal, keys, cfg)
    assert torch.equal(p2.mass, p.mass) and torch.equal(force2, force)
    p3, _ = flight.table_i_randomization(nominal, vrandom.env_keys(5, torch.arange(500)), cfg)
    assert not torch.equal(p3.mass, p.mass)
