"""Issue 55: the learning datasets, recordings, served-run bags and the other checkpoints take
bad input cleanly (one ``FileFormatError`` line naming the file and what was expected; never a
traceback, a hang, a memory blow-up or a silent acceptance) and read every valid file back as
written. The files are made by the corpus's builders (``tests/_inputs_corpus.py``)."""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _inputs_corpus import (
    DCE,
    HUGE_ROWS,
    _npz,
    _torch_bytes,
    bag_tree,
    bp_parts,
    h5_bytes,
    net_doc,
    recording_parts,
    serve_config_doc,
    sv_parts,
)
from volary.errors import ConfigError, FileFormatError
from volary.studies.boundary.dataset import load_dataset, read_config
from volary.studies.rl.dce import load_vae
from volary.studies.sousvide import dataset as sv
from volary.studies.sousvide.net import NetConfig
from volary.view.recording import load_recording

SEEDS = st.integers(0, 2**32 - 1)


def _one_line(err: BaseException, path: Path, *words: str) -> None:
    """A FileFormatError of one line that starts with the file and holds ``words``."""
    msg = str(err)
    assert isinstance(err, FileFormatError), f"{type(err).__name__}: {msg}"
    assert "\n" not in msg and msg.startswith(str(path)), msg
    for w in words:
        assert w in msg, msg


def _raised(read: Callable[[Path], Any], path: Path, timeout: float = 20.0) -> BaseException:
    """What ``read(path)`` raised, run in a thread: a read blocked on a FIFO fails the test
    (the FIFO is then opened for writing so the thread ends)."""
    out: dict[str, BaseException] = {}

    def run() -> None:
        try:
            read(path)
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            out["e"] = e

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(timeout)
    if th.is_alive():
        for fifo in [path, *(path.iterdir() if path.is_dir() else [])]:
            if fifo.is_fifo():
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        th.join(5)
        pytest.fail(f"{read.__name__} blocked on {path}")
    assert "e" in out, f"{read.__name__} accepted {path}"
    return out["e"]


# ---- BoundaryPredictor dataset -------------------------------------------------------------------
@settings(max_examples=10, deadline=None)
@given(SEEDS)
def test_a_bp_dataset_reads_back_its_finished_rows(tmp_path_factory, seed):
    attrs, arrays, done = bp_parts(np.random.default_rng(seed))
    p = tmp_path_factory.mktemp("bp") / "d.h5"
    p.write_bytes(h5_bytes(attrs, arrays))
    d = load_dataset(p)
    for name in ("grid_index", "inputs", "speed", "t0", "cost_min", "cost"):
        assert np.array_equal(getattr(d, name), arrays[name][done], equal_nan=True), name
    assert d.config == json.loads(attrs["config"]) == read_config(p)


def _bp_edit(kind: str, attrs: dict, arrays: dict) -> Callable | None:
    doc = json.loads(attrs["config"])
    if kind == "huge":
        doc["n_inputs"] = HUGE_ROWS
        arrays.update({n: ((HUGE_ROWS, *a.shape[1:]), a.dtype) for n, a in arrays.items()})
    elif kind == "short_done":
        arrays["done"] = arrays["done"][:-1]
    elif kind == "done_int8":
        arrays["done"] = arrays["done"].astype(np.int8)
    elif kind == "inputs_text":
        arrays["inputs"] = arrays["inputs"].astype("S8")
    elif kind == "nan_input":
        arrays["inputs"][np.flatnonzero(arrays["done"])[0], 2] = math.nan
    elif kind == "n_inputs_text":
        doc["n_inputs"] = str(doc["n_inputs"])
    elif kind == "config_not_json":
        attrs["config"] = "{grid: 1"
        return None
    elif kind == "link":
        del arrays["cost"]

        def link(f: Any) -> None:
            import h5py

            f["cost"] = h5py.ExternalLink("/dev/zero", "/x")

        return link
    attrs["config"] = json.dumps(doc)
    return None


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("huge", ["n_inputs", "less than or equal to 129600"]),
        ("short_done", ["done: expected shape"]),
        ("done_int8", ["done: expected bool"]),
        ("inputs_text", ["inputs: expected floating-point numbers"]),
        ("nan_input", ["inputs: row", "expected a finite number"]),
        ("n_inputs_text", ["n_inputs"]),
        ("config_not_json", ["attribute 'config': expected JSON"]),
        ("link", ["cost: expected an array stored in this file"]),
    ],
)
def test_a_bad_bp_dataset_is_one_line_naming_the_file(tmp_path, kind, words):
    """A dataset of declared shapes nobody wrote (2**40 rows), arrays whose lengths or dtypes
    disagree with the layout, NaN inputs, a config that is not what generate_dataset writes,
    an array linked to another file: refused before (or instead of) reading."""
    attrs, arrays, _ = bp_parts(np.random.default_rng(3))
    edit = _bp_edit(kind, attrs, arrays)
    p = tmp_path / "d.h5"
    p.write_bytes(h5_bytes(attrs, arrays, edit))
    _one_line(_raised(load_dataset, p), p, *words)


@pytest.mark.parametrize("special", ["fifo", "dir", "not_hdf5"])
def test_a_bp_dataset_path_that_is_no_hdf5_file_is_a_file_format_error(tmp_path, special):
    p = tmp_path / "d.h5"
    if special == "fifo":
        os.mkfifo(p)
    elif special == "dir":
        p.mkdir()
    else:
        p.write_text("[config]\n")
    for read in (load_dataset, read_config):
        _one_line(_raised(read, p), p)


# ---- SOUS VIDE dataset ---------------------------------------------------------------------------
@settings(max_examples=10, deadline=None)
@given(SEEDS, st.booleans())
def test_a_sousvide_dataset_reads_back_its_valid_rows(tmp_path_factory, seed, images):
    attrs, arrays = sv_parts(np.random.default_rng(seed))
    p = tmp_path_factory.mktemp("sv") / "d.h5"
    p.write_bytes(h5_bytes(attrs, arrays))
    rows = np.repeat(arrays["done"], attrs["steps"]) & arrays["valid"]
    d = sv.read(p, images=images)
    for name in ("state", "time", "action", "theta", "objective", "history", "unit", "step"):
        assert np.array_equal(getattr(d, name), arrays[name][rows]), name
    assert (d.images is None) != images
    if images:
        assert np.array_equal(d.images, arrays["images"][rows])


def _sv_edit(kind: str, attrs: dict, arrays: dict) -> None:
    first = int(np.flatnonzero(np.repeat(arrays["done"], attrs["steps"]) & arrays["valid"])[0])
    if kind == "steps_text":
        attrs["steps"] = str(attrs["steps"])
    elif kind == "steps_missing":
        del attrs["steps"]
    elif kind == "config_list":
        attrs["config"] = "[1, 2]"
    elif kind == "short_state":
        arrays["state"] = arrays["state"][:-1]
    elif kind == "images_float":
        arrays["images"] = arrays["images"].astype(np.float32)
    elif kind == "huge":
        attrs["units"], attrs["steps"] = 2**30, 2**10
        arrays.update(
            {n: ((HUGE_ROWS if n != "done" else 2**30, *a.shape[1:]), a.dtype)
             for n, a in arrays.items()}
        )  # fmt: skip
    elif kind == "nan_state":
        arrays["state"][first, 4] = math.nan
    elif kind == "wrong_unit":
        arrays["unit"][first] = 7


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("steps_text", ["steps: input should be a valid integer"]),
        ("steps_missing", ["steps: field required"]),
        ("config_list", ["attribute 'config': expected a JSON object"]),
        ("short_state", ["state: expected shape"]),
        ("images_float", ["images: expected uint8"]),
        ("huge", ["bytes; expected at most"]),
        ("nan_state", ["state: row", "expected a finite number"]),
        ("wrong_unit", ["unit: row"]),
    ],
)
def test_a_bad_sousvide_dataset_is_one_line_naming_the_file(tmp_path, kind, words):
    attrs, arrays = sv_parts(np.random.default_rng(5))
    _sv_edit(kind, attrs, arrays)
    p = tmp_path / "d.h5"
    p.write_bytes(h5_bytes(attrs, arrays))
    _one_line(_raised(sv.read, p), p, *words)


def test_a_sousvide_dataset_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    p = tmp_path / "d.h5"
    os.mkfifo(p)
    _one_line(_raised(sv.read, p), p, "not a regular file")


# ---- recordings ----------------------------------------------------------------------------------
@settings(max_examples=10, deadline=None)
@given(SEEDS, st.sampled_from([0.0, 10_000.0]))
def test_a_recording_reads_back_as_written(tmp_path_factory, seed, offset):
    head, arrays = recording_parts(np.random.default_rng(seed), offset)
    p = tmp_path_factory.mktemp("rec") / "r.npz"
    p.write_bytes(_npz(head, arrays))
    rec = load_recording(p)
    assert rec.title == head["title"] and len(rec.tracks) == len(head["tracks"])
    for i, tr in enumerate(rec.tracks):
        assert np.array_equal(tr.pos, arrays[f"track{i}_pos"])
        assert np.array_equal(tr.t, arrays[f"track{i}_t"])
    assert np.array_equal(rec.vertices, arrays["vertices"])
    assert len(rec.frames) == len(head["frames"])


def _rec_bytes(kind: str) -> bytes:
    head, arrays = recording_parts(np.random.default_rng(11))
    if kind == "huge":
        from _inputs_corpus import npz_bytes

        hdr = __import__("io").BytesIO()
        np.lib.format.write_array_header_1_0(
            hdr, {"descr": "<f8", "fortran_order": False, "shape": (HUGE_ROWS, 3)}
        )
        rest = {k: a for k, a in arrays.items() if k != "track0_pos"}
        text = np.frombuffer(json.dumps(head).encode(), np.uint8)
        return npz_bytes({**rest, "header": text}, {"track0_pos.npy": hdr.getvalue()})
    if kind == "no_tracks_key":
        del head["tracks"]
    elif kind == "radius_text":
        head["tracks"][0]["radius"] = "big"
    elif kind == "nan_pos":
        arrays["track0_pos"][0, 1] = math.nan
    elif kind == "triangle_past_end":
        arrays["triangles"][0, 2] = len(arrays["vertices"]) + 4
    elif kind == "unknown_array":
        arrays["track7_pos"] = np.zeros((2, 3))
    elif kind == "scene_ref":
        head["scene_ref"] = "jungle:1"
    return _npz(head, arrays)


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("huge", ["bytes; expected at most"]),
        ("no_tracks_key", ["header: tracks: field required"]),
        ("radius_text", ["header: tracks.0.radius"]),
        ("nan_pos", ["track0_pos: expected finite numbers"]),
        ("triangle_past_end", ["triangles: expected vertex indices"]),
        ("unknown_array", ["track7_pos"]),
        ("scene_ref", ["unknown scenario type"]),
    ],
)
def test_a_bad_recording_is_one_line_naming_the_file(tmp_path, kind, words):
    """An array declaring 24 TiB (a forged .npy header), a header without its fields or of
    the wrong types, NaN positions, triangles past the vertices, arrays no header entry owns,
    an unknown scene: refused before the arrays are read (or before they are used)."""
    p = tmp_path / "r.npz"
    p.write_bytes(_rec_bytes(kind))
    _one_line(_raised(load_recording, p), p, *words)


def test_a_recording_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    p = tmp_path / "r.npz"
    os.mkfifo(p)
    _one_line(_raised(load_recording, p), p, "not a regular file")


# ---- served-run bags -----------------------------------------------------------------------------
def _bag(tmp_path: Path, tree: dict[str, Any]) -> Path:
    p = tmp_path / "bag"
    p.mkdir()
    for name, content in tree.items():
        if content == "fifo":
            os.mkfifo(p / name)
        else:
            (p / name).write_bytes(content)
    return p


def test_a_bag_reads_back_its_config_and_ticks(tmp_path):
    pytest.importorskip("rosbags")
    from volary.serve.recording import read_bag

    doc = serve_config_doc(np.random.default_rng(2))
    p = _bag(tmp_path, bag_tree(json.dumps(doc), 4, doc["control_hz"]))
    cfg, ticks = read_bag(p)
    assert cfg.control_hz == doc["control_hz"] and len(cfg.slots) == len(doc["slots"])
    assert sorted(ticks) == [1, 2, 3, 4]
    assert [list(m.data) for k in sorted(ticks) for _, m in ticks[k]] == [
        [0.5, 0.0, 0.0, float(k)] for k in range(4)
    ]


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("no_config", ["not a volary recording"]),
        ("negative_rate", ["/volary/config: control_hz"]),
        ("rate_not_divisor", ["control_hz: expected a divisor of physics_hz"]),
        ("role", ["/volary/config: slots[0].role"]),
        ("scene", ["/volary/config: unknown scenario type 'jungle'"]),
        ("metadata_fifo", ["metadata.yaml", "not a regular file"]),
        ("not_a_bag", ["expected a recording"]),
    ],
)
def test_a_bad_bag_is_one_line_naming_the_recording(tmp_path, kind, words):
    """No config message (was a tuple's repr), a negative control rate (was accepted: ticks
    before 0), a config ServeConfig refuses, an unknown scene (was accepted; replay failed
    later), a FIFO for metadata.yaml (was a hang), a file where a bag directory belongs."""
    pytest.importorskip("rosbags")
    from volary.serve.recording import read_bag

    doc = serve_config_doc(np.random.default_rng(4))
    hz = doc["control_hz"]
    if kind == "negative_rate":
        doc["control_hz"] = -hz
    elif kind == "rate_not_divisor":  # a replay's Simulator would refuse it only later
        doc["physics_hz"] = doc["control_hz"] * 3.5
    elif kind == "role":
        doc["slots"][0]["role"] = "pilot"
    elif kind == "scene":
        doc["scene"] = "jungle"
    tree = bag_tree(None if kind == "no_config" else json.dumps(doc), 3, hz)
    if kind == "metadata_fifo":
        tree["metadata.yaml"] = "fifo"
    p = _bag(tmp_path, tree)
    if kind == "not_a_bag":
        p = next(p.glob("*.mcap"))
    _one_line(_raised(read_bag, p), p, *words)


# ---- checkpoints ---------------------------------------------------------------------------------
def _dce(tmp_path: Path, edit: Callable[[dict], None]) -> Path:
    doc, _, _ = net_doc(DCE, np.random.default_rng(6))
    edit(doc)
    p = tmp_path / "enc.pt"
    p.write_bytes(_torch_bytes(doc))
    return p


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda d: d["config"].update(lr=math.inf), ["field 'config': lr"]),
        (lambda d: d["config"].update(latent="4"), ["field 'config': latent"]),
        (lambda d: d["info"].update(shape=["8", "16"]), ["field 'info': shape.0"]),
        (lambda d: d["info"].update(shape=[12, 16]), ["multiple of 8"]),
        (lambda d: d.update(config=[1, 2]), ["field 'config'"]),
    ],
)
def test_a_dce_checkpoint_config_of_wrong_types_is_one_line(tmp_path, edit, words):
    """Infinite learning rates, numbers stored as text (were read as numbers), a list for the
    config: one line naming the file and the field."""
    p = _dce(tmp_path, edit)
    with pytest.raises(FileFormatError) as err:
        load_vae(p)
    _one_line(err.value, p, *words)


def test_a_dce_config_larger_than_its_weights_is_refused_before_allocating(tmp_path):
    """A config of 2**16 channels (hundreds of GB of weights) with a small network's weights:
    the weights are compared on the meta device, nothing is allocated."""
    p = _dce(tmp_path, lambda d: d["config"].update(width=2**16))
    with pytest.raises(FileFormatError) as err:
        load_vae(p)
    _one_line(err.value, p, "field 'state_dict'", "size mismatch")
    assert "allocate" not in str(err.value)


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"arch": 5}, "arch"),
        ({"colour": "red"}, "colour"),
        ({"arch": {"cnn_width": True}}, "arch.cnn_width"),
        ({"window": "10"}, "window"),
        ({"arch": {"feature_hidden": [2**40]}}, "arch.feature_hidden.0"),
        ([1, 2], "(top level)"),
    ],
)
def test_net_config_from_dict_of_wrong_types_or_keys_is_one_config_error_line(doc, field):
    with pytest.raises(ConfigError) as err:
        NetConfig.from_dict(doc)
    msg = str(err.value)
    assert msg.startswith(f"net_config: {field}") and "\n" not in msg, msg


def test_net_config_from_dict_still_reads_what_to_dict_writes():
    cfg = NetConfig(window=3, history_actions=True)
    assert NetConfig.from_dict(cfg.to_dict()) == cfg
    assert NetConfig.from_dict({}).arch.image_norm == "dataset"  # files from before the option
