"""Scenario params are checked against their declared ranges before a scene is generated
(issue 55).

Regression tests for the two findings (each fails on the code before the fix: an OverflowError
and numpy's ``negative dimensions`` traceback), one through the CLI; a contract test that every
registered type declares a range for each field and that its defaults pass; the cross-field
rules and the bounded placement loops by example; then Hypothesis property tests: params drawn
inside a feasible part of the declared ranges give a scene whose invariants hold, and a field
set out of its range or to a wrong type is a one-line ConfigError naming the scenario and the
field, raised before anything is generated.
"""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys
import time
import typing
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from volary.errors import ConfigError
from volary.inputs import LIMITS
from volary.worlds import make_scenario
from volary.worlds.scenarios import SCENARIOS, scenario_params
from volary.worlds.scenarios_common import declared

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

TYPES = list(SCENARIOS)
GRID, OBJECTS = LIMITS["grid_cells"].hi, LIMITS["scene_objects"].hi
CELLS = LIMITS["lattice_cells"].hi


def _refused(kind: str, field: str, **overrides: Any) -> str:
    """The one-line ConfigError of ``make_scenario(kind, 0, **overrides)``, naming the field."""
    with pytest.raises(ConfigError) as info:
        make_scenario(kind, 0, **overrides)
    text = str(info.value)
    assert "\n" not in text and len(text) < 400, text
    assert text.startswith(f"{kind}: {field}"), text
    return text


# ------------------------------------------------------------------ regressions (issue 55)
def test_a_density_of_1e308_is_a_config_error_naming_the_range():
    text = _refused("forest", "density", density=1e308)
    assert "[0, 10] 1/m^2" in text and "1e+308" in text


def test_a_negative_maze_cell_is_a_config_error_naming_the_range():
    text = _refused("maze", "cell", cell=-1)
    assert "[0.1, 100000] m" in text and "got -1" in text


def test_the_cli_refuses_an_out_of_range_set_in_one_line(tmp_path):
    script = Path(sys.executable).with_name("volary")  # the installed command a user runs
    exe = [str(script)] if script.exists() else [sys.executable, "-m", "volary.cli.main"]
    r = subprocess.run(
        [*exe, "scene", "export", "forest", "--set", "density=1e308", "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, COLUMNS="200"),
    )
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "forest: density" in lines[0] and "1/m^2" in lines[0], r.stderr
    assert "Traceback" not in r.stderr + r.stdout and not (tmp_path / "o").exists()


# ------------------------------------------------------------------ declared ranges (contract)
@pytest.mark.parametrize("kind", TYPES)
def test_every_field_declares_a_range_and_the_defaults_pass_it(kind):
    params = SCENARIOS.get(kind).params
    limits = declared(type(params))
    assert [f.name for f in dataclasses.fields(params)] == list(limits)
    for name, (base, limit, _) in limits.items():
        value = getattr(params, name)
        if limit is None:  # a flag
            assert base is bool and isinstance(value, bool), name
            continue
        ints = int in (base, *typing.get_args(base)) and base is not float
        assert limit.integer == ints, name
        for v in value if isinstance(value, tuple) else (value,):
            assert v is None or limit.lo <= v <= limit.hi, (name, v, limit)
    assert scenario_params(kind) == params  # the rules between fields pass too


def test_checked_values_are_normalised_and_types_strict():
    p = scenario_params("forest", length=50, trunk_radius=[0.2, 0.3])
    assert type(p.length) is float and p.trunk_radius == (0.2, 0.3)
    _refused("forest", "density", density=True)
    _refused("forest", "density", density="0.02")
    _refused("urban", "walls", walls=8.0)
    _refused("random_cylinders", "block_line", block_line=1)
    _refused("narrow_gap", "gap_width", gap_width=0.9)
    _refused("sudden_drop", "obstacles", obstacles=10**400)  # no OverflowError from the check


# ------------------------------------------------------------------ rules between fields
@pytest.mark.parametrize(
    ("kind", "field", "overrides", "expected"),
    [
        ("forest", "trunk_radius", {"trunk_radius": (0.4, 0.15)}, "lo <= hi"),
        ("forest", "margin", {"margin": 30.0}, "< length / 2 = 30 m"),
        ("forest", "flight_height", {"flight_height": 3.0}, "< the ceiling 3 m"),
        ("forest", "clearance", {"clearance": 40.0}, "< the floor's smaller side 40 m"),
        ("forest", "density", {"density": 1.0}, "at most 1946 trees"),
        (
            "forest",
            "density",
            {"density": 0.1, "length": 1e3, "width": 1e3},
            f"at most {OBJECTS:.0f}",
        ),
        ("forest", "check_resolution", {"length": 1e5, "width": 1e5}, f"at most {GRID:.0f} nodes"),
        ("urban", "street", {"street": 15.0}, "(blocks along x + 1) x street < 60 m"),
        ("urban", "blocks", {"blocks": (200, 200), "street": 0.1}, f"at most {OBJECTS:.0f}"),
        ("narrow_gap", "min_offset", {"min_offset": 6.0}, "<= (width - 6 m) / 8 = 5.5 m"),
        ("narrow_gap", "first_wall", {"first_wall": 2.0}, "in (margin + wall_thickness / 2"),
        ("narrow_gap", "gaps", {"gaps_step": 2000}, f"at most {OBJECTS:.0f}"),
        ("sudden_drop", "bottom", {"bottom": 14.0}, "< height = 14 m"),
        ("sudden_drop", "start_height", {"start_height": 4.0}, "< min(height, ceiling) = 4 m"),
        ("maze", "cell", {"cell": 60.0}, "(one cell)"),
        ("maze", "cell", {"cell": 0.1, "length": 1e3, "width": 1e3}, f"at most {CELLS:.0f}"),
        ("maze", "cell", {"cell": 1.0, "length": 100.0, "width": 100.0}, f"at most {OBJECTS:.0f}"),
        ("maze", "wall_thickness", {"wall_thickness": 2.5}, "< cell = 2.5 m"),
        ("perlin", "voxel", {"voxel": 0.05}, f"at most {CELLS:.0f}"),
    ],
)
def test_rules_between_fields_are_checked_before_generation(kind, field, overrides, expected):
    t0 = time.perf_counter()
    assert expected in _refused(kind, field, **overrides)
    assert time.perf_counter() - t0 < 1.0  # refused up front, nothing generated


@pytest.mark.parametrize(
    ("kind", "overrides", "what"),
    [
        # under the packing bound (154 trees) but past what random placement can fill
        (
            "forest",
            {"length": 10.0, "width": 10.0, "density": 1.2, "trunk_radius": (0.5, 0.5)}
            | {"min_gap": 0.0, "clearance": 0.5},
            "could not place 120 trees with min_gap 0 m in 10 m x 10 m",
        ),
        # every cylinder, slab or wall comes within the clearance of start or goal
        (
            "random_cylinders",
            {"length": 10.0, "width": 10.0, "density": 0.05, "clearance": 9.9},
            "could not place 5 cylinders 9.9 m clear of start and goal",
        ),
        (
            "sudden_drop",
            {"length": 10.0, "width": 10.0, "obstacles": 3, "clearance": 9.9},
            "could not place 3 slabs",
        ),
        ("urban", {"walls": 2, "clearance": 59.0}, "could not place 2 walls"),
    ],
)
def test_placement_that_cannot_finish_gives_up_with_a_config_error(kind, overrides, what):
    with pytest.raises(ConfigError) as info:
        make_scenario(kind, 0, **overrides)
    text = str(info.value)
    assert "\n" not in text and text.startswith(f"{kind}: {what}"), text
    assert "attempts" in text


# ------------------------------------------------------------------ property tests
def _floats(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(lo, hi, allow_nan=False)


def _span(lo: float, hi: float) -> st.SearchStrategy[tuple[float, float]]:
    return st.tuples(_floats(lo, hi), _floats(lo, hi)).map(lambda t: (min(t), max(t)))


# A feasible part of each type's declared ranges, small scenes so the grid search stays quick.
FEASIBLE: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "forest": {
        "length": _floats(10, 40),
        "width": _floats(8, 30),
        "ceiling": _floats(2.5, 5),
        "density": _floats(0, 0.1),
        "trunk_radius": _span(0.05, 0.5),
        "tree_height": _span(0.5, 12),
        "min_gap": _floats(0, 2),
        "flight_height": _floats(1, 2),
        "margin": _floats(0.5, 3),
        "clearance": _floats(0, 3),
    },
    "random_cylinders": {
        "length": _floats(10, 40),
        "width": _floats(8, 30),
        "density": _floats(0, 0.05),
        "radius": _span(0.05, 0.5),
        "tilt_deg": _span(0, 180),
        "cyl_length": _span(0.5, 8),
        "clearance": _floats(0.5, 3),
        "block_line": st.booleans(),
    },
    "urban": {
        "length": _floats(40, 70),
        "width": _floats(40, 70),
        "blocks": st.tuples(st.integers(1, 4), st.integers(2, 4)),
        "street": _floats(3, 5),
        "building_fraction": _floats(0, 1),
        "walls": st.integers(0, 12),
        "street_start_goal": st.booleans(),
    },
    "narrow_gap": {
        "length": _floats(25, 50),
        "width": _floats(40, 60),
        "gaps": st.none() | st.integers(1, 4),
        "gaps_step": st.integers(0, 1),
        "first_wall": _floats(5, 10),
        "min_offset": _floats(0, 4),
        "gap_snap": st.sampled_from([0.25, 0.5]),
    },
    "sudden_drop": {
        "length": _floats(15, 50),
        "width": _floats(15, 50),
        "obstacles": st.none() | st.integers(0, 8),
        "depth": _span(0.5, 6),
        "span": _span(2, 50),
        "clearance": _floats(1, 3),
        "block_line": st.booleans(),
    },
    "maze": {
        "length": _floats(5, 30),
        "width": _floats(5, 20),
        "height": _floats(2, 3),
        "cell": _floats(2, 3),
        "wall_thickness": _floats(0.05, 0.3),
        "loop_fraction": _floats(0, 0.5),
    },
    "perlin": {
        "length": _floats(10, 30),
        "width": _floats(8, 25),
        "frequency": _floats(0.01, 0.3),
        "fill": _floats(0, 0.05),
        "voxel": _floats(0.5, 1),
        "octaves": st.integers(1, 5),
        "clearance": _floats(1, 3),
        "block_line": st.booleans(),
    },
}


def _numbers(value: Any) -> list[float]:
    if dataclasses.is_dataclass(value):
        return _numbers(dataclasses.astuple(value))
    if isinstance(value, tuple | list):
        return [x for v in value for x in _numbers(v)]
    return [float(value)] if isinstance(value, int | float) else []


def _check_scene(kind: str, overrides: dict[str, Any]) -> None:
    spec = make_scenario(kind, 3, **overrides)
    lo, hi = np.asarray(spec.bounds_min), np.asarray(spec.bounds_max)
    assert np.all(np.isfinite([lo, hi])) and np.all(lo < hi)
    assert np.all(np.abs([lo, hi]) <= LIMITS["coordinate"].hi)
    for q in (spec.start, spec.goal):
        assert np.all(lo <= q) and np.all(np.asarray(q) <= hi) and q[2] < spec.flight_ceiling
    assert all(math.isfinite(x) for o in spec.obstacles for x in _numbers(o))
    assert spec.meta["type"] == kind and spec.meta["solvable"] is True
    assert spec.meta["params"] == dataclasses.asdict(scenario_params(kind, **overrides))


@pytest.mark.parametrize("kind", TYPES)
@settings(max_examples=6)
@given(data=st.data())
def test_params_in_range_give_a_scene_whose_invariants_hold(kind, data):
    _check_scene(kind, data.draw(st.fixed_dictionaries(FEASIBLE[kind]), label="overrides"))


@pytest.mark.slow
@pytest.mark.parametrize("kind", TYPES)
@settings(max_examples=40)
@given(data=st.data())
def test_params_in_range_give_a_scene_whose_invariants_hold_sweep(kind, data):
    _check_scene(kind, data.draw(st.fixed_dictionaries(FEASIBLE[kind]), label="overrides"))


def _bad_values(base: Any, limit: Any) -> st.SearchStrategy[Any]:
    """Values a field must refuse: past either end of its range, NaN/inf, a bool, a string,
    the wrong shape; a float for an integer field."""
    if limit is None:  # a flag
        return st.sampled_from([0, 1, "true", None, 1.0])
    scale = st.floats(1e-6, 1e6)
    if limit.integer:
        out = st.integers(1, 10**30).flatmap(
            lambda k: st.sampled_from([int(limit.lo) - k, int(limit.hi) + k])
        ) | st.sampled_from([1.0, float(limit.hi)])
    else:
        out = scale.flatmap(
            lambda s: st.sampled_from(
                [limit.lo - max(abs(limit.lo), 1.0) * s, limit.hi + max(abs(limit.hi), 1.0) * s]
            )
        )
    out = out | st.sampled_from([math.nan, math.inf, -math.inf, True, False, "1", b"1", [1]])
    if typing.get_origin(base) is tuple:
        good = (limit.lo, limit.hi)
        return out.flatmap(lambda v: st.sampled_from([(v, good[1]), (good[0], v), v])) | st.just(
            (limit.lo, limit.hi, limit.hi)
        )
    optional = type(None) in typing.get_args(base)
    return out if optional else out | st.just(None)


@pytest.mark.parametrize("kind", TYPES)
@settings(max_examples=60)
@given(data=st.data())
def test_a_field_out_of_range_or_of_a_wrong_type_is_a_one_line_config_error(kind, data):
    limits = declared(type(SCENARIOS.get(kind).params))
    field = data.draw(st.sampled_from(sorted(limits)), label="field")
    base, limit, _ = limits[field]
    value = data.draw(_bad_values(base, limit), label="value")
    text = _refused(kind, field, **{field: value})
    if limit is not None and limit.unit not in ("", "1") and "expected a" in text:
        assert f" {limit.unit} (" in text, text  # the range comes with its unit
