"""volary.learning.checkpoint: one tagged, weights_only checkpoint format for every learner.

Round trips through each learner's own save/load functions, the legacy (version 1) layouts
they wrote before the module, every error path (each message names the file, and the field
where there is one), refusal of pickled objects, and atomic writes."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from volary.errors import ConfigError, FileFormatError
from volary.learning import checkpoint
from volary.learning.checkpoint import CheckpointKind, read_checkpoint, write_checkpoint
from volary.studies.boundary import grid
from volary.studies.boundary import model as bp
from volary.studies.rl import ppo
from volary.studies.sousvide import net as sv

BP_RESULT = (
    Path(__file__).resolve().parents[1] / "experiments/boundary/quarter-grid/results/model.pt"
)
TOY = CheckpointKind("test.toy", "toy checkpoint", ("width", "state_dict"), 2, "volary.toy/1")
PPO_CFG = ppo.PPOConfig(hidden=(8,), seed=3)
SV_ARCH = sv.ArchConfig(
    cnn_width=0.25,
    image_features=8,
    feature_hidden=(8,),
    features=4,
    history_hidden=(8, 4),
    command_hidden=(8,),
)


# ---- the three learners, seen through their public save/load functions -----------------------
@dataclasses.dataclass(frozen=True)
class Learner:
    kind: CheckpointKind
    make: Callable[[], nn.Module]
    save: Callable[[nn.Module, Path, dict[str, Any]], Path]
    load: Callable[[Path], tuple[nn.Module, dict[str, Any]]]


def _load_ppo(path: Path) -> tuple[nn.Module, dict[str, Any]]:
    policy, cfg, meta = ppo.load_policy(path)
    assert cfg == PPO_CFG
    return policy, meta


LEARNERS = {
    "bp": Learner(bp.CHECKPOINT_KIND, bp.BoundaryPredictor, bp.save_checkpoint, bp.load_checkpoint),
    "svnet": Learner(
        sv.CHECKPOINT_KIND,
        lambda: sv.SVNet(sv.NetConfig("svnet", 3, 32, 32, SV_ARCH), torch.Generator()),
        sv.save_checkpoint,
        sv.load_checkpoint,
    ),
    "ppo": Learner(
        ppo.CHECKPOINT_KIND,
        lambda: ppo.ActorCritic(3, 2, PPO_CFG),
        lambda m, p, meta: ppo.save_policy(p, m, PPO_CFG, meta),
        _load_ppo,
    ),
}
META = {"note": "x", "losses": [1.0, 0.5], "nested": {"seed": 0}}


@pytest.fixture(params=sorted(LEARNERS))
def learner(request) -> Learner:
    return LEARNERS[request.param]


def _assert_same_state(a: nn.Module, b: nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k, v in sa.items():
        assert torch.equal(v.cpu(), sb[k].cpu()), k


def _file_error(path: Path, *words: str) -> Any:
    """``pytest.raises(FileFormatError)`` whose message starts with ``path`` and has ``words``."""
    pattern = "^" + re.escape(str(path)) + ": " + "".join(f"(?=.*{re.escape(w)})" for w in words)
    return pytest.raises(FileFormatError, match=re.compile(pattern, re.S))


def test_each_learner_round_trips_through_the_tagged_format(learner, tmp_path) -> None:
    net = learner.make()
    path = learner.save(net, tmp_path / "sub" / "ck.pt", META)
    raw = torch.load(path, weights_only=True)
    assert raw["format"] == learner.kind.tag and raw["version"] == learner.kind.version == 2
    assert set(raw) == {"format", "version", "meta", *learner.kind.fields}
    back, meta = learner.load(path)
    assert meta == META and not back.training
    _assert_same_state(back, net)
    assert [p.name for p in path.parent.iterdir()] == ["ck.pt"]  # no temporary file left


def test_learner_tags_are_distinct_and_a_wrong_kind_names_the_format_field(tmp_path) -> None:
    tags = {name: lr.kind.tag for name, lr in LEARNERS.items()}
    assert len(set(tags.values())) == 3 and all(t.startswith("volary.") for t in tags.values())
    bp_file = bp.save_checkpoint(bp.BoundaryPredictor(), tmp_path / "bp.pt", {})
    with _file_error(bp_file, "field 'format'", repr(tags["bp"]), repr(tags["ppo"])):
        ppo.load_policy(bp_file)
    with _file_error(bp_file, "field 'format'", repr(tags["svnet"])):
        sv.load_checkpoint(bp_file)


# ---- legacy layout (version 1) ------------------------------------------------------------------
def _as_legacy(raw: dict[str, Any], kind: CheckpointKind) -> dict[str, Any]:
    """The file the learner wrote before volary.learning.checkpoint: the same fields under a
    single string tag, no version; BoundaryPredictor kept its metadata as a JSON string."""
    old = {k: v for k, v in raw.items() if k != "version"}
    old["format"] = kind.legacy_format
    if kind is bp.CHECKPOINT_KIND:
        old["meta"] = json.dumps(old["meta"])
    return old


def test_legacy_files_of_each_learner_still_load(learner, tmp_path) -> None:
    net = learner.make()
    raw = torch.load(learner.save(net, tmp_path / "new.pt", META), weights_only=True)
    old = tmp_path / "old.pt"
    torch.save(_as_legacy(raw, learner.kind), old)
    assert read_checkpoint(old, learner.kind).version == 1
    back, meta = learner.load(old)
    assert meta == META
    _assert_same_state(back, net)


def test_the_committed_boundary_predictor_result_loads_as_version_1() -> None:
    assert BP_RESULT.is_file()
    raw = torch.load(BP_RESULT, weights_only=True)
    assert raw["format"] == "volary.bp.checkpoint/1" and "version" not in raw
    net, meta = bp.load_checkpoint(BP_RESULT)
    assert isinstance(meta, dict) and "test_errors" in meta
    v, t0 = net.predict(grid.grid_inputs(np.arange(0, 129_600, 9000)))
    assert bool(torch.isfinite(v).all() and torch.isfinite(t0).all())


def test_a_legacy_tag_with_a_version_field_is_not_legacy(tmp_path) -> None:
    p = tmp_path / "mixed.pt"
    torch.save({"format": "volary.toy/1", "version": 1, "width": 1, "state_dict": {}}, p)
    with _file_error(p, "field 'format'", "'volary.toy/1'", "'volary.test.toy'"):
        read_checkpoint(p, TOY)


# ---- every error path names the file (and the field) -------------------------------------------
def _good(**changes: Any) -> dict[str, Any]:
    ck = {"format": TOY.tag, "version": 2, "width": 3, "state_dict": {}, "meta": {}}
    return {k: v for k, v in {**ck, **changes}.items() if v is not _DROP}


_DROP = object()
BAD_CONTENTS = {
    "not a dict": ([torch.zeros(2)], ("not a volary checkpoint", "field 'format'")),
    "no format": ({"state_dict": {}}, ("not a volary checkpoint", "field 'format'")),
    "foreign format": (_good(format="volary.other"), ("field 'format'", "'volary.other'")),
    "no version": (_good(version=_DROP), ("missing field 'version'",)),
    "text version": (_good(version="2"), ("field 'version'", "'2'")),
    "bool version": (_good(version=True), ("field 'version'", "True")),
    "zero version": (_good(version=0), ("field 'version'", "0")),
    "newer version": (_good(version=3), ("field 'version' is 3", "1 to 2")),
    "missing field": (_good(width=_DROP), ("missing field(s) 'width'",)),
    "missing meta": (_good(meta=_DROP, state_dict=_DROP), ("'meta', 'state_dict'",)),
}


@pytest.mark.parametrize("case", sorted(BAD_CONTENTS))
def test_bad_contents_name_the_file_and_the_field(case, tmp_path) -> None:
    contents, words = BAD_CONTENTS[case]
    p = tmp_path / "bad.pt"
    torch.save(contents, p)
    with _file_error(p, *words):
        read_checkpoint(p, TOY)


def test_missing_truncated_and_junk_files_name_the_file(tmp_path) -> None:
    with _file_error(tmp_path / "none.pt", "no such toy checkpoint file"):
        read_checkpoint(tmp_path / "none.pt", TOY)
    with _file_error(tmp_path, "no such"):  # a folder is not a checkpoint file
        read_checkpoint(tmp_path, TOY)
    good = write_checkpoint(tmp_path / "good.pt", TOY, {"width": 3, "state_dict": {}})
    cut = tmp_path / "cut.pt"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    for name, data in (("cut.pt", None), ("junk.pt", b"\x00junk"), ("empty.pt", b"")):
        p = tmp_path / name
        if data is not None:
            p.write_bytes(data)
        with _file_error(p, "not a readable toy checkpoint", "truncated, corrupt"):
            read_checkpoint(p, TOY)


def test_unusable_fields_name_the_file_and_the_field(learner, tmp_path) -> None:
    p = learner.save(learner.make(), tmp_path / "ck.pt", {})
    raw = torch.load(p, weights_only=True)
    raw["state_dict"].pop(next(iter(raw["state_dict"])))
    torch.save(raw, p)
    with _file_error(p, f"malformed {learner.kind.title}", "field 'state_dict'", "Missing key"):
        learner.load(p)
    raw = torch.load(learner.save(learner.make(), p, {}), weights_only=True)
    raw["meta"] = ["not", "a", "dict"]
    torch.save(raw, p)
    with _file_error(p, "field 'meta'", "expected a dict, got list") as err:
        learner.load(p)
    assert str(err.value).count(str(p)) == 1


def test_non_finite_weights_are_refused_naming_the_tensor(learner, tmp_path) -> None:
    p = learner.save(learner.make(), tmp_path / "ck.pt", {})
    raw = torch.load(p, weights_only=True)
    name = next(k for k, v in raw["state_dict"].items() if v.is_floating_point())
    raw["state_dict"][name].view(-1)[0] = float("nan")
    torch.save(raw, p)
    with _file_error(p, "field 'state_dict'", "non-finite weights", name):
        learner.load(p)


@pytest.mark.parametrize(
    ("field", "value"), [("act_dim", "2"), ("act_dim", 2.0), ("obs_dim", True), ("obs_dim", -3)]
)
def test_policy_sizes_must_be_integers_as_written(field, value, tmp_path) -> None:
    """A size stored as text or a float was not written by volary: refused, not converted."""
    p = ppo.save_policy(tmp_path / "ck.pt", ppo.ActorCritic(3, 2, PPO_CFG), PPO_CFG, {})
    raw = torch.load(p, weights_only=True)
    raw[field] = value
    torch.save(raw, p)
    with _file_error(p, f"field {field!r}", "expected an integer"):
        ppo.load_policy(p)


def test_a_dropout_outside_0_1_is_refused(tmp_path) -> None:
    p = bp.save_checkpoint(bp.BoundaryPredictor(), tmp_path / "ck.pt", {})
    raw = torch.load(p, weights_only=True)
    raw["dropout"] = "0.1"
    torch.save(raw, p)
    with _file_error(p, "field 'dropout'", "expected a number in [0, 1]"):
        bp.load_checkpoint(p)


def test_checkpoint_reading_turns_field_failures_into_file_format_errors(tmp_path) -> None:
    p = write_checkpoint(tmp_path / "t.pt", TOY, {"width": "wide", "state_dict": {}})
    ck = read_checkpoint(p, TOY)
    assert ck.version == 2 and ck.meta == {} and ck["width"] == "wide"
    with _file_error(p, "malformed toy checkpoint", "field 'width'", "'wide'"), ck.reading("width"):
        int(ck["width"])
    with _file_error(p, "field 'width'", "missing key 'depth'"), ck.reading("width"):
        {"w": 1}["depth"]
    with _file_error(p, "field 'state_dict'", "Missing key"):
        ck.load_state(nn.Linear(2, 2))


# ---- weights_only: pickled objects are refused, never run --------------------------------------
RAN: list[str] = []


def _side_effect() -> str:
    RAN.append("unpickled")
    return "ran"


class _Payload:
    """Unpickling this calls ``_side_effect``: what a hostile file would do."""

    def __reduce__(self) -> tuple[Callable[[], str], tuple[()]]:
        return (_side_effect, ())


def test_a_pickled_object_is_refused_without_running_it(learner, tmp_path) -> None:
    p = learner.save(learner.make(), tmp_path / "ck.pt", META)
    raw = torch.load(p, weights_only=True)
    raw["meta"] = {"note": _Payload()}
    torch.save(raw, p)
    RAN.clear()
    with _file_error(p, "refused", "pickled Python object", "_side_effect", "weights_only=True"):
        learner.load(p)
    assert RAN == []
    torch.load(p, weights_only=False)  # the same file, unpickled: the payload runs
    assert RAN == ["unpickled"]


# ---- writing -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "meta", "words"),
    [
        ({"width": 1}, None, "missing field(s) 'state_dict'"),
        ({"width": 1, "state_dict": {}, "version": 9}, None, "'version' is reserved"),
        ({"width": 1, "state_dict": {}, "extra": _Payload()}, None, "extra: a checkpoint holds"),
        ({"width": {"a": [1, object()]}, "state_dict": {}}, None, "width.a[1]"),
        ({"width": {(1, 2): 3}, "state_dict": {}}, None, "width: keys must be str or int"),
        ({"width": 1, "state_dict": {}}, {"t": torch.zeros(1)}, "meta: expected JSON"),
    ],
)
def test_writing_refuses_what_would_not_load_and_writes_nothing(
    fields, meta, words, tmp_path
) -> None:
    with pytest.raises(ConfigError, match=re.escape(words)):
        write_checkpoint(tmp_path / "w.pt", TOY, fields, meta)
    assert list(tmp_path.iterdir()) == []


def test_kinds_reject_reserved_fields_and_bad_versions() -> None:
    with pytest.raises(ConfigError, match="reserved"):
        CheckpointKind("x", "x", ("meta", "state_dict"))
    with pytest.raises(ConfigError, match="version"):
        CheckpointKind("x", "x", ("state_dict",), version=0)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch) -> None:
    p = write_checkpoint(tmp_path / "ck.pt", TOY, {"width": 1, "state_dict": {}}, {"run": 1})

    def broken_save(obj: Any, fh: Any) -> None:
        fh.write(b"PK\x03\x04 half a zip")
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint.torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        write_checkpoint(p, TOY, {"width": 2, "state_dict": {}}, {"run": 2})
    monkeypatch.undo()
    assert [f.name for f in tmp_path.iterdir()] == ["ck.pt"]
    ck = read_checkpoint(p, TOY)
    assert ck["width"] == 1 and ck.meta == {"run": 1}
