"""``volary bp sample|train|fly`` on tiny options, and clear errors (exit code 2, the option or
file named, no traceback) for malformed options and files."""

from __future__ import annotations

import json

import h5py
import pytest
import torch
from typer.testing import CliRunner

from volary.cli.main import app
from volary.studies.boundary.grid import GRID_SIZE
from volary.studies.boundary.model import BoundaryPredictor, save_checkpoint

runner = CliRunner()
TINY = str(6 / GRID_SIZE)  # six Table II inputs


def _ok(args: list[str]):
    r = runner.invoke(app, ["bp", *args])
    assert r.exit_code == 0, r.output
    return r


def _bad(args: list[str], *needles: str) -> str:
    r = runner.invoke(app, ["bp", *args])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    for n in needles:
        assert n in r.output, r.output
    return r.output


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    out = tmp_path_factory.mktemp("bp_cli")
    r = _ok(["sample", "--out", str(out), "--fraction", TINY, "--tail", "0.3", "--seed", "2"])
    assert "dataset:" in r.output
    return out


@pytest.mark.slow  # about 10-20 s on the shared 2-core machine
def test_sample_writes_a_dataset_with_its_config(sampled):
    with h5py.File(sampled / "dataset.h5") as f:
        cfg = json.loads(f.attrs["config"])
        assert f["done"][:].all() and f["inputs"].shape == (6, 8)
    assert cfg["seed"] == 2 and cfg["sampling"]["tail_s"] == 0.3


@pytest.mark.slow
def test_train_then_fly_on_tiny_options(sampled):
    r = _ok(["train", "--out", str(sampled), "--epochs", "2", "--patience", "2"])
    assert "speed" in r.output and (sampled / "model.pt").is_file()
    assert json.loads((sampled / "train.json").read_text())["epochs_run"] == 2
    r = _ok(["fly", "--out", str(sampled), "--courses", "straight", "--gates", "1"])
    assert "bp_straight: " in r.output and "/1 gates" in r.output
    flights = json.loads((sampled / "fly.json").read_text())
    assert [f["gates"] for f in flights] == [1]
    assert (sampled / "fly.png").is_file()


# ---- bad input -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--fraction", "0"], ("fraction",)),
        (["--fraction", "1.5"], ("fraction",)),
        (["--device", "tpu"], ("--device",)),
        (["--compile", "jax"], ("compile", "numba")),
        (["--tail", "-1"], ("--tail",)),
        (["--chunk", "0"], ("chunk",)),
        (["--block", "0"], ("block",)),
    ],
)
def test_sample_rejects_bad_options(tmp_path, args, needles):
    _bad(["sample", "--out", str(tmp_path), "--fraction", TINY, *args], *needles)
    assert not (tmp_path / "dataset.h5").exists()


@pytest.mark.slow
def test_sample_refuses_to_resume_a_dataset_of_another_config(sampled):
    _bad(["sample", "--out", str(sampled), "--fraction", TINY, "--tail", "0.4", "--seed", "2"],
         "another config")  # fmt: skip


def test_train_rejects_missing_and_malformed_datasets(tmp_path):
    _bad(
        ["train", "--out", str(tmp_path)],
        "dataset.h5: cannot read the BoundaryPredictor dataset",
        "No such file",
    )
    junk = tmp_path / "junk.h5"
    junk.write_text("not hdf5")
    _bad(
        ["train", "--out", str(tmp_path), "--dataset", str(junk)],
        "not an HDF5 BoundaryPredictor dataset",
    )
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f.create_dataset("x", data=[1, 2, 3])
    _bad(["train", "--out", str(tmp_path), "--dataset", str(other)], "format: field required")
    with h5py.File(other, "w") as f:  # the right format tag, the arrays missing
        f.attrs["format"] = "volary.bp.dataset/1"
        f.attrs["config"] = "{}"
    _bad(["train", "--out", str(tmp_path), "--dataset", str(other)], "attribute 'config'")
    _bad(["train", "--out", str(tmp_path), "--epochs", "0"], "epochs")


def test_fly_rejects_missing_and_malformed_models_and_unknown_courses(tmp_path):
    _bad(["fly", "--out", str(tmp_path)], "checkpoint")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"\x00not a checkpoint")
    _bad(["fly", "--out", str(tmp_path), "--model", str(junk)], "not a readable BoundaryPredictor")
    wrong = tmp_path / "wrong.pt"
    torch.save({"format": "volary.bp.checkpoint/1", "dropout": 0.1, "state_dict": {}}, wrong)
    _bad(["fly", "--out", str(tmp_path), "--model", str(wrong)], "malformed")
    model = str(save_checkpoint(BoundaryPredictor(), tmp_path / "m.pt", {}))
    _bad(["fly", "--model", model, "--out", str(tmp_path), "--courses", "oval"],
         "oval", "circular", "snaked")  # fmt: skip
    _bad(["fly", "--model", model, "--out", str(tmp_path), "--courses", ","], "at least one")
    _bad(["fly", "--model", model, "--out", str(tmp_path), "--gates", "0"], "--gates")
    assert not (tmp_path / "fly.json").exists()
