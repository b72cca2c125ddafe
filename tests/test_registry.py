"""volary.registry: names, lazy specs, entry points and errors; and every registry uses it."""

from __future__ import annotations

from enum import StrEnum
from types import SimpleNamespace

import pytest

import volary.registry
from volary.errors import ConfigError, UnknownNameError
from volary.registry import Registry, check_name, load_spec, parse_enum


def _reg(**kw) -> Registry:
    return Registry("widget", {"a": 1, "b": "collections:OrderedDict"}, **kw)


def test_names_get_contains_and_lazy_specs():
    r = _reg()
    assert r.names() == ("a", "b") and list(r) == ["a", "b"] and len(r) == 2
    assert "a" in r and "b" in r and "c" not in r and 3 not in r
    assert r.get("a") == 1 and r["a"] == 1
    from collections import OrderedDict

    assert r.get("b") is OrderedDict and r.get("b") is r.get("b")  # imported once, cached
    assert r.items() == [("a", 1), ("b", OrderedDict)] and r.values() == [1, OrderedDict]
    assert dict(r) == {"a": 1, "b": OrderedDict}


def test_unknown_name_error_names_the_kind_and_lists_valid_names():
    r = _reg(hints=["auto"])
    with pytest.raises(UnknownNameError, match=r"unknown widget 'c'; valid names: a, auto, b") as e:
        r.get("c")
    assert isinstance(e.value, KeyError) and e.value.valid == ["a", "auto", "b"]
    with pytest.raises(UnknownNameError, match="unknown widget '3'"):
        r.get(3)  # type: ignore[arg-type]
    assert str(r.unknown("x")).startswith("unknown widget 'x'")


def test_a_typo_is_answered_with_the_names_it_is_close_to():
    """Among 46 platforms the one meant is named first; equally close ones both; far ones none."""
    from volary.platforms import get

    with pytest.raises(UnknownNameError, match=r"'cazyflie' \(did you mean 'crazyflie'\?\); valid"):
        get("cazyflie")
    with pytest.raises(UnknownNameError, match=r"mean '1.00kg-SunnySky' or '1.80kg-SunnySky'\?"):
        get("1.0kg-SunnySky")
    with pytest.raises(UnknownNameError, match=r"'zzz'; valid names: "):
        get("zzz")


def test_a_value_outside_a_fixed_set_is_answered_with_the_names_it_is_close_to():
    """The fixed sets checked by hand (not a registry) say the same: a World's collider, a
    CLI option's choices, the RL task."""
    from typer.testing import CliRunner

    from volary.cli.main import app
    from volary.errors import not_one_of
    from volary.sim.world import World

    with pytest.raises(
        ConfigError, match=r"collider: expected one of .*got 'boxx' \(did you mean 'box'\?\)"
    ):
        World("crazyflie", None, n_envs=1, collider="boxx")
    r = CliRunner().invoke(app, ["rl", "eval", "--policy", "x.pt", "--task", "hovr"])
    assert r.exit_code == 2 and "got 'hovr' (did you mean 'hover'?)" in r.stderr, r.output
    err = not_one_of("mode", "zzz", ["position", "velocity"])
    assert str(err) == "mode: expected one of position, velocity, got 'zzz'"


def test_register_rejects_duplicates_and_bad_names_unless_replace():
    r = _reg()
    with pytest.raises(ConfigError, match="already registered"):
        r.register("a", 2)
    r.register("a", 2, replace=True)
    assert r.get("a") == 2
    for bad in ("", "x:y", 5):
        with pytest.raises(ConfigError, match="widget"):
            r.register(bad, 1)  # type: ignore[arg-type]


def test_module_attr_specs_only_where_allowed():
    with pytest.raises(UnknownNameError):
        _reg().get("collections:OrderedDict")
    r = _reg(specs=True)
    assert r.get("collections:OrderedDict").__name__ == "OrderedDict"
    assert r.get("os:path.join").__name__ == "join"  # dotted attribute paths
    with pytest.raises(UnknownNameError, match="module:Class"):
        r.get("nope")  # the error says specs are accepted
    with pytest.raises(ConfigError, match="cannot import"):
        r.get("no_such_pkg_xyz:Thing")
    with pytest.raises(ConfigError, match="has no"):
        r.get("collections:Nope")
    with pytest.raises(ConfigError, match="expected 'package.module:Class'"):
        load_spec("collections:", "widget")


def test_broken_lazy_entry_raises_config_error_naming_it():
    r = Registry("widget", {"x": "no_such_pkg_xyz.mod:Thing"})
    with pytest.raises(ConfigError, match=r"widget 'x': cannot import"):
        r.get("x")


def test_entry_points_are_found_listed_and_loaded_on_first_use(monkeypatch):
    loads = []
    ep = SimpleNamespace(name="plugin", load=lambda: loads.append(1) or "loaded")
    bad = SimpleNamespace(name="broken", load=lambda: 1 / 0)
    monkeypatch.setattr(volary.registry, "entry_points", lambda group: [ep, bad])
    r = _reg(group="volary.widgets")
    assert r.names() == ("a", "b", "broken", "plugin") and "plugin" in r
    assert loads == []  # listing does not load
    assert r.get("plugin") == "loaded" and loads == [1]
    with pytest.raises(ConfigError, match="'broken': its entry point failed"):
        r.get("broken")
    with pytest.raises(UnknownNameError, match="plugin"):
        r.get("nope")
    # a registered name wins over an entry point of the same name
    monkeypatch.setattr(volary.registry, "entry_points", lambda group: [SimpleNamespace(name="a")])
    assert r.names() == ("a", "b") and r.get("a") == 1


def test_no_group_no_entry_point_lookup(monkeypatch):
    monkeypatch.setattr(volary.registry, "entry_points", lambda group: pytest.fail("looked up"))
    assert _reg().names() == ("a", "b")


class Colour(StrEnum):
    RED = "red"
    BLUE = "blue"


def test_parse_enum_and_check_name():
    assert parse_enum(Colour, "red", "colour") is Colour.RED
    assert parse_enum(Colour, Colour.BLUE, "colour") is Colour.BLUE
    with pytest.raises(UnknownNameError, match="unknown colour 'green'; valid names: blue, red"):
        parse_enum(Colour, "green", "colour")
    assert check_name("mode", "x", ("x", "y")) == "x"
    with pytest.raises(UnknownNameError, match="unknown mode 'z'; valid names: x, y"):
        check_name("mode", "z", ("x", "y"))


def test_resolve_takes_an_instance_as_is_or_a_name():
    r = Registry("number preset", {"one": 1.0})
    assert r.resolve(2.5, float) == 2.5 and r.resolve("one", float) == 1.0
    with pytest.raises(UnknownNameError, match="number preset"):
        r.resolve("two", float)


def _registries() -> list[tuple[Registry, str]]:
    """Every Registry volary defines, with the kind its errors name."""
    from volary.envs import _REGISTRY as envs
    from volary.platforms import LAYOUTS
    from volary.platforms.catalogue import _entries
    from volary.sensors import (
        CAMERA_PRESETS,
        IMU_PRESETS,
        LIDAR_PRESETS,
        RANGEFINDER_PRESETS,
        TOF_PRESETS,
    )
    from volary.sensors.raycast import BACKENDS
    from volary.studies.flyingtrust import protocol
    from volary.studies.flyingtrust.planners import _REGISTRY as planners
    from volary.studies.sousvide.net import VARIANTS
    from volary.worlds import SCENARIOS
    from volary.worlds.tracks import BP_COURSES

    return [
        (planners, "planner"),
        (envs, "env"),
        (BACKENDS, "ray-cast backend"),
        (CAMERA_PRESETS, "camera preset"),
        (LIDAR_PRESETS, "lidar preset"),
        (TOF_PRESETS, "tof preset"),
        (RANGEFINDER_PRESETS, "rangefinder preset"),
        (IMU_PRESETS, "imu preset"),
        (LAYOUTS, "layout"),
        (_entries(), "platform"),
        (SCENARIOS, "scenario type"),
        (BP_COURSES, "BoundaryPredictor course"),
        (VARIANTS, "SV-Net variant"),
        (protocol._BUILTIN, "suite"),
    ]


@pytest.mark.parametrize("index", range(14))
def test_every_volary_registry_lists_its_names_in_errors(index):
    reg, kind = _registries()[index]
    assert isinstance(reg, Registry) and reg.kind == kind and len(reg) > 0
    with pytest.raises(UnknownNameError) as e:
        reg.get("no-such-name")
    assert str(e.value).startswith(f"unknown {kind} 'no-such-name'; valid names: ")
    assert set(reg.names()) <= set(e.value.valid)
    name = reg.names()[0]
    assert name in reg and reg.get(name) is reg.get(name)


def test_public_lookups_raise_the_registry_error():
    from volary.control import make_controller
    from volary.envs import make_env
    from volary.math.integrators import integrate
    from volary.platforms import get, layout
    from volary.sensors import imu_config, lidar_config
    from volary.studies.flyingtrust.planners import get_planner
    from volary.studies.sousvide.net import get_variant
    from volary.worlds import make_scenario

    cases = [
        (lambda: make_env("hovr"), "env", "hover"),
        (lambda: get_planner("strait"), "planner", "straight"),
        (lambda: get("crazyfly"), "platform", "crazyflie"),
        (lambda: layout("quad_y", 0.1), "layout", "quad_x"),
        (lambda: make_scenario("forrest", 0), "scenario type", "forest"),
        (lambda: get_variant("big"), "SV-Net variant", "svnet"),
        (lambda: imu_config("bmi"), "imu preset", "bmi085"),
        (lambda: lidar_config("os2"), "lidar preset", "dome"),
        (lambda: integrate("rk5", None, (), 0.1), "integrator", "rk4"),  # type: ignore[arg-type]
        (lambda: make_controller("speed", None), "control mode", "velocity"),  # type: ignore[arg-type]
    ]
    for call, kind, valid in cases:
        with pytest.raises(UnknownNameError) as e:
            call()
        assert str(e.value).startswith(f"unknown {kind} ") and valid in e.value.valid
