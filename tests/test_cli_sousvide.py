"""``volary sousvide``: generate (resumable), eval of the expert, bad options exit 2."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from volary.cli.main import app
from volary.studies.sousvide import dataset as ds
from volary.studies.sousvide.net import load_checkpoint

runner = CliRunner()
TINY = ["--n-des", "2", "--n-smp", "2", "--t-smp", "0.3", "--envs", "2", "--size", "32"]


def _sv(*args: str):
    return runner.invoke(app, ["sousvide", *args])


def test_generate_resumes_and_eval_expert_writes_the_table(tmp_path) -> None:
    out = tmp_path / "d.h5"
    r = _sv("generate", "--out", str(out), *TINY, "--max-units", "2")
    assert r.exit_code == 0, r.output
    assert "2 flown now" in r.output and ds.pending_units(out).tolist() == [2, 3]
    r = _sv("generate", "--out", str(out), *TINY)
    assert r.exit_code == 0, r.output
    assert "2 already done" in r.output and ds.pending_units(out).size == 0
    r = _sv("eval", "--policy", "expert", "--out", str(tmp_path / "ev"), "--trials", "1",
            "--steps", "10", "--size", "32", "--disturbance", "baseline,lighting")  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "ev" / "eval.json").read_text())
    assert [run["summary"]["disturbance"] for run in doc["runs"]] == ["baseline", "lighting"]
    assert "lighting (paper)" in (tmp_path / "ev" / "table.md").read_text()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["generate", "--out", "X", "--n-des", "0"], "--n-des"),
        (["generate", "--out", "X", "--t-smp", "0.01"], "t_smp"),
        (["generate", "--out", "X", "--device", "tpu"], "--device"),
        (["eval", "--policy", "expert", "--out", "E", "--disturbance", "fog"], "--disturbance"),
        (["eval", "--policy", "nope.pt", "--out", "E"], "--policy"),
        (["eval", "--policy", "expert", "--out", "E", "--trials", "0"], "trials"),
        (["train", "--data", "missing.h5", "--out", "T"], "--data"),
        (["train", "--data", "empty.h5", "--out", "T", "--latent", "0"], "--latent"),
        (["train", "--data", "empty.h5", "--out", "T", "--image-norm", "frame"], "--image-norm"),
        (["train", "--data", "empty.h5", "--out", "T", "--occlusion", "1.5"], "--occlusion"),
    ],
)
def test_bad_options_exit_2_with_one_line(tmp_path, args, needle) -> None:
    (tmp_path / "empty.h5").touch()  # the other options are checked before the file is read
    args = [
        str(tmp_path / a) if a in ("X", "E", "T", "missing.h5", "empty.h5", "nope.pt") else a
        for a in args
    ]
    r = _sv(*args)
    assert r.exit_code == 2, r.output
    assert needle in r.output and "Traceback" not in r.output


def test_train_then_eval_the_checkpoint(tmp_path) -> None:
    out = tmp_path / "d.h5"
    assert _sv("generate", "--out", str(out), *TINY).exit_code == 0
    r = _sv("train", "--data", str(out), "--out", str(tmp_path / "t"), "--variant", "big")
    assert r.exit_code == 2 and "variant" in r.output, r.output
    r = _sv("train", "--data", str(out), "--out", str(tmp_path / "t"), "--width", "0")
    assert r.exit_code == 2 and "--width" in r.output, r.output
    r = _sv("train", "--data", str(out), "--out", str(tmp_path / "t"), "--steps", "2",
            "--pretrain-steps", "2", "--epochs", "1", "--batch", "8",
            "--width", "0.25", "--lr", "3e-4", "--history-actions",
            "--latent", "6", "--image-norm", "dataset", "--occlusion", "0.5")  # fmt: skip
    assert r.exit_code == 0, r.output
    ckpt = tmp_path / "t" / "svnet.pt"
    assert ckpt.is_file()
    net, meta = load_checkpoint(ckpt)
    assert meta["train_config"]["occlusion"] == 0.5
    assert net.config.history_actions and net.config.arch.history_hidden[-1] == 6
    assert net.config.arch.image_norm == "dataset"  # the default is per_image
    r = _sv("eval", "--policy", str(ckpt), "--out", str(tmp_path / "e"), "--trials", "1",
            "--steps", "3")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "baseline (volary)" in r.output
