"""volary.config: dotted FIELD=VALUE overrides of frozen config dataclasses, and the CLI's
``--set`` built on it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

import pytest

from volary.config import apply_overrides, describe, parse_overrides, split_override
from volary.errors import ConfigError


class Mode(StrEnum):
    FAST = "fast"
    SLOW = "slow"


@dataclass(frozen=True)
class Inner:
    width: float = 1.0
    sizes: tuple[int, ...] = (64, 64)

    def __post_init__(self) -> None:
        if not self.width > 0:
            raise ConfigError(f"width: expected > 0, got {self.width}")


@dataclass(frozen=True)
class Outer:
    lr: float = 1e-4
    steps: int = 10
    cap: int | None = None
    flag: bool = True
    name: str = "svnet"
    goal: tuple[float, float, float] = (0.0, 0.0, 1.5)
    platform: str | tuple[str, ...] = "quad"
    compile: bool | str = False
    norm: Literal["per_image", "dataset"] = "per_image"
    mode: Mode = Mode.FAST
    names: list[str] = field(default_factory=lambda: ["a"])
    options: dict[str, Any] = field(default_factory=lambda: {"density": 0.1, "width": 10.0})
    inner: Inner = field(default_factory=Inner)
    maybe: Inner | None = None


def test_values_are_parsed_by_annotation_and_the_caller_keeps_its_config():
    base = Outer()
    cfg = apply_overrides(
        base,
        ["lr=3e-4", "steps=20", "cap=5", "flag=false", "name=no_rma", "goal=(1, 2, 0.5)",
         "platform=a,b", "compile=numba", "norm=dataset", "mode=slow", "names=x,y",
         "inner.width=0.5", "inner.sizes=8,8", "options.density=0.2"],
    )  # fmt: skip
    assert (cfg.lr, cfg.steps, cfg.cap, cfg.flag, cfg.name) == (3e-4, 20, 5, False, "no_rma")
    assert cfg.goal == (1.0, 2.0, 0.5) and all(type(v) is float for v in cfg.goal)
    assert cfg.platform == ("a", "b") and cfg.compile == "numba" and cfg.norm == "dataset"
    assert cfg.mode is Mode.SLOW and cfg.names == ["x", "y"]
    assert cfg.inner == Inner(0.5, (8, 8)) and cfg.options == {"density": 0.2, "width": 10.0}
    assert base == Outer() and base.options == {"density": 0.1, "width": 10.0}  # untouched


@pytest.mark.parametrize(
    ("item", "attr", "value"),
    [
        ("cap=none", "cap", None),
        ("cap=None", "cap", None),
        ("flag=yes", "flag", True),
        ("flag=0", "flag", False),
        ("compile=true", "compile", True),
        ("platform=quad_x", "platform", "quad_x"),
        ("name=123", "name", "123"),  # a str field keeps the text as typed
        ("name='with = sign'", "name", "with = sign"),
        ("lr=7", "lr", 7.0),
        ("lr=inf", "lr", math.inf),
        ("inner.sizes=32", "inner", Inner(1.0, (32,))),  # one value for a sequence
        ("maybe.width=2", "maybe", Inner(2.0)),  # an Optional config starts from its defaults
        ("options={'density': 1}", "options", {"density": 1}),
    ],
)
def test_one_override(item, attr, value):
    assert getattr(apply_overrides(Outer(), [item]), attr) == value


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("steps=many", "Outer.steps: expected an int, got 'many'"),
        ("steps=1.5", "Outer.steps: expected an int, got '1.5'"),
        ("steps=true", "Outer.steps: expected an int, got 'true'"),
        ("lr=fast", "Outer.lr: expected a float, got 'fast'"),
        ("flag=maybe", "Outer.flag: expected a bool (true/false), got 'maybe'"),
        ("cap=x", "Outer.cap: expected an int or None, got 'x'"),
        ("goal=1,2", "Outer.goal: expected a tuple (float, float, float), got '1,2'"),
        ("norm=frame", "Outer.norm: expected one of 'per_image', 'dataset', got 'frame'"),
        ("mode=medium", "Outer.mode: expected one of 'fast', 'slow', got 'medium'"),
        ("inner.sizes=a,b", "Outer.inner.sizes: expected a tuple of ints (a,b,...), got 'a,b'"),
        ("inner=3", "Outer.inner: expected an Inner (or set its fields: inner.FIELD=VALUE)"),
        ("inner.width=-1", "width: expected > 0, got -1.0"),  # the dataclass's own check
        ("nope", "expected FIELD=VALUE"),
        ("=3", "expected FIELD=VALUE"),
        ("lr.x=1", "Outer.lr: float has no fields to set"),
        ("options.density.x=1", "Outer.options.density: a dict entry has no fields to set"),
    ],
)
def test_errors_name_the_path_the_expected_type_and_the_value(item, message):
    with pytest.raises(ConfigError) as e:
        apply_overrides(Outer(), [item])
    assert message in str(e.value)


def test_unknown_fields_list_the_valid_ones_at_their_level():
    with pytest.raises(ConfigError, match=r"Outer: unknown field 'lrr'; valid fields: cap, comp"):
        apply_overrides(Outer(), ["lrr=1"])
    with pytest.raises(ConfigError, match=r"Outer.inner: unknown field 'w'; valid fields: sizes"):
        apply_overrides(Outer(), ["inner.w=1"])


def test_mapping_values_are_checked_not_parsed_and_later_keys_win():
    cfg = apply_overrides(Outer(), {"name": "123", "inner.width": 2, "lr": 1})
    assert cfg.name == "123" and cfg.inner.width == 2.0 and cfg.lr == 1.0
    with pytest.raises(ConfigError, match="Outer.name: expected a str, got 5"):
        apply_overrides(Outer(), {"name": 5})
    assert apply_overrides(Outer(), ["steps=1", "steps=2"]).steps == 2
    with pytest.raises(ConfigError, match="conflicts"):
        apply_overrides(Outer(), ["inner.width=2", "inner=x"])
    with pytest.raises(ConfigError, match="conflicts"):
        apply_overrides(Outer(), ["lr=2", "lr.x=1"])


def test_parse_overrides_returns_whole_top_level_values_and_no_changes_is_the_same_object():
    base = Outer()
    assert parse_overrides(base, ["inner.width=3", "steps=4"]) == {
        "inner": Inner(3.0),
        "steps": 4,
    }
    assert apply_overrides(base, []) is base
    with pytest.raises(ConfigError, match="expected a dataclass instance"):
        apply_overrides({"lr": 1}, ["lr=2"])
    with pytest.raises(ConfigError, match="expected a list"):
        apply_overrides(base, "lr=2")  # type: ignore[arg-type]


def test_split_and_describe():
    assert split_override(" a.b = 1, 2 ") == ("a.b", "1, 2")
    assert describe(int | None) == "an int or None"
    assert describe(tuple[float, float]) == "a tuple (float, float)"
    assert describe(dict[str, float]) == "a dict {key: value}"


def test_string_annotations_of_real_configs_resolve():
    """volary's configs are written with ``from __future__ import annotations``."""
    from volary.envs.position import PositionTaskConfig
    from volary.studies.rl.ppo import PPOConfig
    from volary.studies.sousvide.train import TrainConfig

    assert apply_overrides(PPOConfig(), ["hidden=8,8"]).hidden == (8, 8)
    cfg = apply_overrides(TrainConfig(), ["arch.cnn_width=0.5", "latent=none"])
    assert cfg.arch.cnn_width == 0.5 and cfg.latent is None and TrainConfig().latent == 8
    opts = parse_overrides(PositionTaskConfig(), ["compile=numba", "goal_range=(1,1,0.5)"])
    assert opts == {"compile": "numba", "goal_range": (1.0, 1.0, 0.5)}


# ---- the CLI ------------------------------------------------------------------------------------
def test_configure_names_the_flag_or_set_that_failed():
    from volary.config import configure

    flags = [("--lr", "lr", 2e-4), ("--cap", "cap", None), ("--width", "inner.width", 2.0)]
    cfg = configure(Outer(), flags, ["steps=3", "lr=5e-4"])
    assert (cfg.lr, cfg.cap, cfg.inner.width, cfg.steps) == (5e-4, None, 2.0, 3)  # --set wins
    with pytest.raises(ConfigError, match=r"^--width: width: expected > 0"):
        configure(Outer(), [("--lr", "lr", 1.0), ("--width", "inner.width", -1.0)])
    with pytest.raises(ConfigError, match=r"^--set: Outer.steps: expected an int"):
        configure(Outer(), [], ["steps=x"])


def _invoke(*args: str):
    from typer.testing import CliRunner

    from volary.cli.main import app

    return CliRunner().invoke(app, list(args))


def test_cli_set_reaches_the_configs(tmp_path):
    r = _invoke("scene", "export", "maze", "--set", "cell=4.0", "--set", "length=12",
                "--set", "width=8", "--out", str(tmp_path), "--format", "obj")  # fmt: skip
    assert r.exit_code == 0, r.output
    r = _invoke("scene", "export", "maze", "--set", "cel=2", "--out", str(tmp_path))
    assert r.exit_code == 2 and "--set: MazeParams: unknown field 'cel'" in r.output
    assert "cell" in r.output
    (tmp_path / "empty.h5").touch()  # --data is checked (a regular file) before --set is read
    r = _invoke("sousvide", "train", "--data", str(tmp_path / "empty.h5"), "--out", str(tmp_path),
                "--set", "arch.cnn_width=wide")  # fmt: skip
    assert r.exit_code == 2 and "TrainConfig.arch.cnn_width: expected a float" in r.output
    r = _invoke("bench", "run", "--suite", "quick", "--set", "settings.time_limit=-1")
    assert r.exit_code == 2
    assert "settings.time_limit: expected a number in [0.1, 3600] s" in r.output
    r = _invoke("rl", "train", "--task", "hover", "--env", "physics_hz=fast", "--out", "o")
    assert r.exit_code == 2
    assert "--env: PositionTaskConfig.physics_hz: expected a float, got 'fast'" in r.output


@pytest.mark.parametrize(
    "command",
    [
        ("splat", "synth"),
        ("sousvide", "generate"),
        ("sousvide", "train"),
        ("sousvide", "eval"),
        ("bp", "sample"),
        ("bp", "train"),
        ("bp", "fly"),
        ("rl", "train"),
        ("bench", "run"),
        ("scene", "preview"),
        ("scene", "export"),
    ],
)
def test_commands_with_a_config_take_set(command):
    r = _invoke(*command, "--help")
    assert r.exit_code == 0 and "--set" in r.output
