"""volary.sim.metrics: one formula per metric, in numpy (benchmark rows) and torch (batched
evaluation) alike, matching hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from volary.sim import metrics


def test_hand_computed_track():
    pos = np.array([[0.0, 0.0, 0.0], [3.0, 4.0, 0.0], [3.0, 4.0, 1.0]])
    assert metrics.path_length(pos) == pytest.approx(6.0)
    d = metrics.segment_distance(pos, np.zeros(3), np.array([3.0, 4.0, 0.0]))
    assert d == pytest.approx([0.0, 0.0, 1.0])
    assert metrics.tracking_error(d) == pytest.approx(1.0 / 3.0)
    assert metrics.proximity(d, 0.3) == pytest.approx(200.0 / 3.0)
    t = np.array([0.0, 1.0, 2.0])
    assert metrics.first_entry_time(t, pos, np.array([3.0, 4.0, 0.9]), 0.5) == 2.0
    assert math.isnan(metrics.first_entry_time(t, pos, np.array([9.0, 9.0, 9.0]), 0.5))


def test_numpy_and_torch_agree_batched():
    g = torch.Generator().manual_seed(0)
    pos = torch.randn(4, 50, 3, generator=g, dtype=torch.float64)
    a, b = torch.tensor([0.0, 0.0, 0.0]), torch.tensor([1.0, 2.0, 0.5])
    for fn in (metrics.path_length,):
        assert np.allclose(fn(pos).numpy(), fn(pos.numpy()))
    dt = metrics.segment_distance(pos, a, b)
    dn = metrics.segment_distance(pos.numpy(), a.numpy(), b.numpy())
    assert np.allclose(dt.numpy(), dn)
    assert np.allclose(metrics.tracking_error(dt).numpy(), metrics.tracking_error(dn))
    assert np.allclose(metrics.proximity(dt, 1.0).numpy(), metrics.proximity(dn, 1.0))
    assert np.allclose(metrics.speeds(pos).numpy(), metrics.speeds(pos.numpy()))


def test_path_distance_and_hits():
    desired = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    flown = torch.tensor([[[0.0, 1.0, 0.0], [1.0, 0.0, 2.0]]])
    assert metrics.path_distance(flown, desired).tolist() == [[1.0, 2.0]]
    flags = torch.tensor([[0, 1, 1, 0, 1], [0, 0, 0, 0, 0]])
    assert metrics.count_hits(flags).tolist() == [2, 0]


def test_empty_tracks():
    assert metrics.path_length(np.zeros((0, 3))) == 0.0
    assert math.isnan(metrics.tracking_error(np.zeros(0)))
    assert math.isnan(metrics.proximity(np.zeros(0)))
    assert torch.isnan(metrics.tracking_error(torch.zeros(3, 0))).all()
