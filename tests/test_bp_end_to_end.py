"""BoundaryPredictor end to end on a tiny configuration: Algorithm 1 over a few Table II inputs
(flown, scored, written with its config), Table IV training for a few epochs, and a flight of
the network's plan through a short course."""

from __future__ import annotations

import json
import math

import h5py
import numpy as np
import pytest
import torch

from volary.errors import ConfigError
from volary.studies.boundary import dataset as ds
from volary.studies.boundary import deploy, grid, model, sampling, train
from volary.studies.boundary.flight import CandidateFlyer, FlightBatch
from volary.worlds import boundary_predictor_course

TINY = sampling.SamplingConfig(tail_s=0.5)  # score 0.5 s past gate i: short flights
N_INPUTS = 16


@pytest.fixture(scope="module")
def tiny_dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("bp") / "dataset.h5"
    ds.generate_dataset(path, fraction=N_INPUTS / grid.GRID_SIZE, seed=3, config=TINY)
    return path


def test_dataset_file_holds_algorithm_1_labels_and_its_config(tiny_dataset):
    cfg = ds.read_config(tiny_dataset)
    assert cfg["grid_size"] == 129_600 and cfg["n_inputs"] == N_INPUTS
    assert cfg["sampling"]["tail_s"] == 0.5 and cfg["seed"] == 3
    data = ds.load_dataset(tiny_dataset)
    assert data.inputs.shape == (N_INPUTS, 8) and data.cost.shape == (N_INPUTS, 70)
    np.testing.assert_allclose(data.inputs, grid.grid_inputs(data.grid_index).numpy())
    cand = sampling.candidates(torch.as_tensor(data.inputs))
    lab = data.labelled()
    assert len(lab.speed) >= N_INPUTS - 2  # a few inputs may have no eq. 3-feasible candidate
    for i in np.flatnonzero(np.isfinite(data.speed)):
        j = int(np.nanargmin(np.where(np.isnan(data.cost[i]), np.inf, data.cost[i])))
        assert data.speed[i] == pytest.approx(float(cand.speed[i, j]))
        assert data.t0[i] == pytest.approx(float(cand.t0[i, j]))
        assert data.cost_min[i] >= data.t0[i]  # eq. 7: C >= T = t_0
    flown = np.isfinite(data.cost)
    assert flown.any(1)[np.isfinite(data.speed)].all()
    with h5py.File(tiny_dataset) as f:
        assert f["done"][:].all()
        crashed, tracking = f["crashed"][:], f["tracking"][:]
    assert ((crashed >= 0) == flown).all() and np.isfinite(tracking[flown]).all()
    assert (tracking[flown] < 0.5).all()  # tracked to within half a metre on average
    summary = ds.summarize(data)
    parts = ("no_feasible_candidate", "every_flown_candidate_crashed", "labelled_without_crash")
    assert sum(summary[k] for k in parts) == N_INPUTS
    assert sum(summary["label_speed_counts"].values()) == summary["labelled_without_crash"]
    assert summary["flown_per_input"] == pytest.approx(flown.sum() / N_INPUTS)


def test_resume_keeps_finished_rows_and_refuses_another_config(tiny_dataset):
    before = ds.load_dataset(tiny_dataset)
    frac = N_INPUTS / grid.GRID_SIZE
    ds.generate_dataset(tiny_dataset, fraction=frac, seed=3, config=TINY)  # nothing left to do
    np.testing.assert_array_equal(ds.load_dataset(tiny_dataset).cost, before.cost)
    other = sampling.SamplingConfig(tail_s=0.6)
    with pytest.raises(ConfigError, match="another config"):
        ds.generate_dataset(tiny_dataset, fraction=frac, seed=3, config=other)


def test_pruning_finds_the_same_argmin_as_flying_every_feasible_candidate():
    # inputs entering at v_{i-1} = 1 m/s (the last tenth of the grid): short candidates
    idx = grid.GRID_SIZE * 9 // 10 + np.sort(np.random.default_rng(11).choice(12_960, 4))
    e, gi = grid.grid_inputs(idx), torch.as_tensor(idx)
    full_cfg = sampling.SamplingConfig(tail_s=0.5, prune=False)
    full = ds.label_inputs(e, gi, CandidateFlyer(full_cfg, seed=3), full_cfg)
    pruned = ds.label_inputs(e, gi, CandidateFlyer(TINY, seed=3), TINY)
    assert pruned.flown < full.flown
    torch.testing.assert_close(pruned.speed, full.speed, equal_nan=True)
    torch.testing.assert_close(pruned.t0, full.t0, equal_nan=True)
    flown = ~pruned.cost.isnan() & pruned.cost.isfinite()
    # a candidate's flight does not depend on the batch it was flown in
    torch.testing.assert_close(pruned.cost[flown], full.cost[flown])


def test_train_then_fly_a_short_course(tiny_dataset, tmp_path):
    summary = train.run_training(tiny_dataset, tmp_path, seed=0, epochs=3, patience=3)
    assert summary["epochs_run"] == 3 and summary["test_rows"] >= 1
    assert all(math.isfinite(h["train_loss"]) for h in summary["history"])
    assert set(summary["test_errors"]) >= {"speed", "time", "safe_skew"}
    assert (tmp_path / "errors.png").stat().st_size > 0
    saved = json.loads((tmp_path / "train.json").read_text())
    assert saved["dataset_config"]["n_inputs"] == N_INPUTS
    net, meta = model.load_checkpoint(tmp_path / "model.pt")
    assert meta["best_epoch"] == summary["best_epoch"]
    spec = boundary_predictor_course("straight", n_gates=2)
    res = deploy.fly_course(net, spec)
    assert res.gates == 2 and 0 <= res.gates_passed <= 2
    assert len(res.speeds) == 2 and all(0 <= v <= 2 for v in res.speeds)
    assert np.isfinite(res.path).all()
    assert res.finished == (res.gates_passed == 2 and res.time_s is not None)
    if res.time_s is not None:
        assert res.time_s <= res.plan_time_s + deploy.DeployConfig().grace_s


@pytest.mark.slow  # about 30 s on the shared machine (eager physics)
def test_eager_flights_match_the_numba_kernel():
    # the CUDA path flies eager torch; on CPU the default is numba: same outcomes
    idx = grid.GRID_SIZE * 9 // 10 + np.arange(0, 12_960, 4_000)
    e = grid.grid_inputs(idx)
    cand = sampling.candidates(e)
    co, du = sampling.candidate_coefficients(e, cand)
    w = sampling.window(e)
    pick = torch.tensor([v * 7 + t for v in (4, 5, 6) for t in (0, 3, 6)])  # ~1 s flights
    rows = torch.arange(len(idx)).repeat_interleave(len(pick))
    cols = pick.repeat(len(idx))
    batch = FlightBatch(
        co[rows, cols], du[rows, cols], w.headings[rows], w.centres[rows], rows * 70 + cols
    )
    out = {}
    for mode in ("eager", "numba"):
        cfg = sampling.SamplingConfig(tail_s=0.3, compile=mode)
        out[mode] = CandidateFlyer(cfg, seed=5).fly(batch)
    assert torch.equal(out["eager"].crashed, out["numba"].crashed)
    assert torch.equal(out["eager"].skipped, out["numba"].skipped)
    torch.testing.assert_close(out["eager"].tracking, out["numba"].tracking, atol=2e-4, rtol=0)
