"""Course files and platform (airframe catalogue) files take bad input cleanly (issue 55).

``volary.worlds.alphapilot_2019(path)`` and ``volary.platforms.load_file(path)`` read a user's
TOML file. Regression tests for each finding of the issue come first (each failed on the code
before the fix: a traceback, a hang, unbounded memory or a silent acceptance), then Hypothesis
property tests: courses and airframe entries generated from the declared ranges load and give
back what the file holds; generated invalid ones (wrong types and shapes, NaN/inf/1e308,
degenerate gates, unknown keys, deep nesting, non-UTF-8 bytes, NUL bytes, a FIFO,
``/dev/zero``, a directory) are refused with one line naming the file and the field.

Every call that is to be refused runs in a forked child process with a deadline and a memory
limit (:func:`_within`), so a regression fails the test instead of hanging the run or taking the
machine's memory.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import re
import resource
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from volary.errors import ConfigError, FileFormatError, UnknownNameError, VolaryError
from volary.inputs import LIMITS
from volary.platforms import catalogue, load_file
from volary.platforms.schema import FIELDS, TABLE1_FIELDS
from volary.worlds import Gate, alphapilot_2019, tracks
from volary.worlds.gates import GateTracker
from volary.worlds.tracks import (
    ALPHAPILOT_FILE,
    GATE_ANGLE_DEG,
    GATE_FLATNESS_M,
    GATE_SIDE_M,
    PASSAGE_M,
    around_frame,
    perturb_course,
)

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

EXTENT = LIMITS["coordinate"].hi  # 1e5 m
DEADLINE_S = 30.0  # generous on a loaded 2-core machine; a correct refusal takes milliseconds
_FORK = multiprocessing.get_context("fork")  # the child starts in 10 ms with volary loaded


# ---- helpers ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Raised:
    """What a call raised in the child process: its class and base-class names, its text."""

    names: tuple[str, ...]
    message: str


def _child(fn: Callable[[], Any], conn: Any) -> None:
    vm = int(re.search(r"VmSize:\s+(\d+) kB", Path("/proc/self/status").read_text())[1]) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (vm + 2**30, resource.getrlimit(resource.RLIMIT_AS)[1]))
    try:
        fn()
        conn.send(None)
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        conn.send(Raised(tuple(c.__name__ for c in type(e).__mro__), str(e)))


def _within(fn: Callable[[], Any]) -> Raised | None:
    """Run ``fn`` in a forked child with 1 GiB of address space beyond its parent's and a
    deadline of ``DEADLINE_S``: what it raised (None when it returned). A child still running at
    the deadline (a blocked open, an SVD spinning with the GIL held) is killed and the test
    fails; one that runs out of memory reports MemoryError."""
    recv, send = _FORK.Pipe(duplex=False)
    child = _FORK.Process(target=_child, args=(fn, send), daemon=True)
    child.start()
    send.close()
    try:
        if not recv.poll(DEADLINE_S):
            child.kill()
            pytest.fail(f"still running after {DEADLINE_S} s (a hang)")
        return recv.recv()
    except EOFError:
        return Raised(("died",), f"the child died with exit code {child.exitcode}")
    finally:
        child.join(5)
        recv.close()


def _refused(fn: Callable[[], Any], *parts: str, exc: type = VolaryError) -> str:
    """The one-line message of the VolaryError ``fn`` raises; it must contain every part."""
    err = _within(fn)
    assert err is not None and exc.__name__ in err.names, f"expected {exc.__name__}, got {err}"
    msg = err.message
    assert "\n" not in msg, msg
    for part in parts:
        assert part in msg, (part, msg)
    return msg


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)  # nan, inf, -inf, 1e+308 are TOML too
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a TOML basic string (no control chars here)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"


def toml(doc: dict[str, Any]) -> str:
    """``doc`` as TOML: top-level tables as ``[name]`` sections, anything deeper inline."""
    lines = []
    for key, value in doc.items():
        if isinstance(value, dict):
            lines.append(f"[{json.dumps(key)}]")
            lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()]
        else:
            lines.insert(0, f"{json.dumps(key)} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def _write(folder: Path, doc: dict[str, Any] | str, name: str = "user.toml") -> Path:
    p = folder / name
    p.write_text(doc if isinstance(doc, str) else toml(doc), encoding="utf-8")
    return p


def _packaged_course() -> str:
    return (Path(tracks.__file__).with_name("data") / ALPHAPILOT_FILE).read_text()


# ---- valid documents from the declared ranges ------------------------------------------------
def _rectangle(centre, yaw: float, tilt: float, w: float, h: float) -> np.ndarray:
    across = np.array([-math.sin(yaw), math.cos(yaw), 0.0]) * w / 2
    normal = np.array([math.cos(yaw), math.sin(yaw), 0.0])
    up = (np.array([0.0, 0.0, 1.0]) * math.cos(tilt) + normal * math.sin(tilt)) * h / 2
    c = np.asarray(centre, dtype=float)
    return np.stack([c - across + up, c + across + up, c + across - up, c - across - up])


SIDE = st.floats(0.05, 50.0)  # inside GATE_SIDE_M, m
FAR = EXTENT - 200.0  # m: room for the arena margin (at most 20 m shift + 36 m radius here)


@st.composite
def course_docs(draw: Any) -> dict[str, Any]:
    """A valid course document: 1-5 rectangular gates (any yaw, tilted up to 60 deg, corners
    in any order) anywhere within the world extent above the floor, an order of 1-8 of them,
    a unit start quaternion and passage settings from their declared ranges."""
    numbers = draw(st.lists(st.integers(0, 999_999_999), min_size=1, max_size=5, unique=True))
    gates = {}
    for k in numbers:
        corners = _rectangle(
            draw(st.tuples(st.floats(-FAR, FAR), st.floats(-FAR, FAR), st.floats(30.0, FAR))),
            draw(st.floats(-math.pi, math.pi)),
            draw(st.floats(-1.05, 1.05)),
            draw(SIDE),
            draw(SIDE),
        )[draw(st.permutations(range(4)))]
        gates[f"Gate{k}"] = {
            "corners": corners.tolist(),
            "perturbation": [
                draw(st.floats(0, 20)),
                draw(st.floats(0, 20)),
                draw(st.floats(0, 180)),
            ],
        }
    q = np.array(draw(st.tuples(*[st.floats(-1, 1)] * 4)))
    hypothesis.assume(np.linalg.norm(q) > 0.1)
    course = {
        "name": draw(st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=30)),
        "order": draw(st.lists(st.sampled_from(sorted(gates)), min_size=1, max_size=8)),
        "start_position": [draw(st.floats(-EXTENT, EXTENT)) for _ in "xy"]
        + [draw(st.floats(0.0, EXTENT))],
        "start_quaternion_wxyz": (q / np.linalg.norm(q)).tolist(),
        "timeout_s": draw(st.floats(1e-3, LIMITS["duration"].hi)),
        "gate_width": draw(st.floats(1e-3, PASSAGE_M)),
        "inflation": draw(st.floats(0.0, PASSAGE_M)),
    }
    return {"course": course, "gates": gates}


def _check_course(spec: Any, doc: dict[str, Any], path: Path) -> None:
    course, gates = doc["course"], doc["gates"]
    number = {n: int(n[4:]) for n in gates}
    assert [g.name for g in spec.gates] == sorted(gates, key=number.get)
    for g in spec.gates:  # the file's corners, reordered around the frame (not changed)
        assert sorted(g.corners) == sorted(tuple(c) for c in gates[g.name]["corners"])
        assert g.object_id == number[g.name]
    m = spec.meta
    assert m["order"] == course["order"] and m["source"] == str(path)
    assert [spec.gates[i].name for i in m["order_index"]] == course["order"]
    for key in ("gate_width", "inflation", "timeout_s"):
        assert m[key] == course[key]
    assert m["course"] == course["name"]
    assert m["start_quaternion_wxyz"] == tuple(course["start_quaternion_wxyz"])
    assert spec.start == tuple(course["start_position"])
    assert m["perturbation"] == {n: tuple(g["perturbation"]) for n, g in gates.items()}
    pts = np.array([g.corners for g in spec.gates]).reshape(-1, 3)
    assert (pts[:, :2] >= np.array(spec.bounds_min)[:2] + 10 - 1e-6).all()  # margin >= 10 m
    assert (pts[:, :2] <= np.array(spec.bounds_max)[:2] - 10 + 1e-6).all()
    assert (pts[:, 2] >= spec.bounds_min[2]).all() and (pts[:, 2] < spec.bounds_max[2]).all()


def _quaternion_norm_ok(doc: dict[str, Any]) -> bool:
    return abs(np.linalg.norm(doc["course"]["start_quaternion_wxyz"]) - 1) <= 1e-3


# ---- regression tests: each issue finding (every one failed before the fix) ---------------------
BAD_PATHS = ["fifo", "dev_zero", "link_to_dev_zero", "directory", "missing", "nul_in_path", "int"]


def _bad_path(kind: str, folder: Path) -> Any:
    p = folder / "user.toml"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "dev_zero":
        return "/dev/zero"
    elif kind == "link_to_dev_zero":
        p.symlink_to("/dev/zero")
    elif kind == "directory":
        p.mkdir()
    elif kind == "nul_in_path":
        return str(folder / "user\x00.toml")
    elif kind == "int":
        return 5
    return p


LOADERS = {"course": alphapilot_2019, "platforms": load_file}


@pytest.mark.parametrize("loader", sorted(LOADERS))
@pytest.mark.parametrize("kind", BAD_PATHS)
def test_a_path_that_is_not_a_regular_file_is_refused_before_opening(tmp_path, loader, kind):
    """A FIFO (blocked forever before the fix), /dev/zero (read until memory ran out), a NUL
    byte in the path or an int (a ValueError / TypeError traceback), a directory, a missing
    file: one line naming the path, and nothing opened."""
    path = _bad_path(kind, tmp_path)
    exc = ConfigError if kind in ("nul_in_path", "int") else FileFormatError
    msg = _refused(lambda: LOADERS[loader](path), exc=exc)
    if exc is FileFormatError:
        assert msg.startswith(str(path)) and "cannot read" in msg
    else:
        assert "expected a file path" in msg


@pytest.mark.parametrize("loader", sorted(LOADERS))
@pytest.mark.parametrize(
    ("junk", "says"),
    [
        (b"\xff\xfe", "is not UTF-8 text"),  # UnicodeDecodeError traceback before
        (b"\xc3\x28", "is not UTF-8 text"),
        (b"\x00", "a NUL byte"),
        (b"x = " + b"[" * 1000 + b"]" * 1000 + b"\n", "nested too deeply"),  # RecursionError
        (b"x = " + b"[" * 40 + b"]" * 40 + b"\n", "nested deeper than 32 levels"),
    ],
)
def test_bytes_that_are_not_a_sensible_toml_text_are_one_line_errors(tmp_path, loader, junk, says):
    good = _packaged_course() if loader == "course" else PLATFORM_TEXT
    path = tmp_path / "user.toml"
    path.write_bytes(junk + b"\n" + good.encode() if b"x =" in junk else good.encode() + junk)
    assert _refused(lambda: LOADERS[loader](path), says, exc=FileFormatError).startswith(str(path))


def test_gate_corners_at_1e308_are_refused_before_the_svd_that_never_returned(tmp_path):
    """Before the fix, corners at +-1e308 made the corners' mean overflow and numpy's SVD (in
    ``around_frame``) spin forever; now the file is refused at the declared world extent."""
    big = [[1e308, 0.0, 3.0], [1e308, 1.0, 3.0], [-1e308, 1.0, 1.0], [-1e308, 0.0, 1.0]]
    text = _packaged_course().replace(
        "[[-0.009051204, -34.8755, 3.071861], [-0.008949876, -32.9505, 3.071861], "
        "[-0.008949876, -32.9505, 1.134362], [-0.009051204, -34.8755, 1.134362]]",
        _toml_value(big),
    )
    assert "1e+308" in text
    path = _write(tmp_path, text)
    _refused(lambda: alphapilot_2019(path), str(path), "gates.Gate1.corners.0.0", "1e+308")
    # the public helper itself refuses what its SVD cannot take
    for bad in (big, [[math.inf, 0, 0]] * 4, [[math.nan, 0, 0]] * 4, [[0, 0]] * 4, "abc"):
        _refused(lambda b=bad: around_frame(b), "corners: expected 4 points", exc=ConfigError)


def _course_with(tmp_path: Path, edit: Callable[[dict], None]) -> Path:
    import tomllib

    doc = tomllib.loads(_packaged_course())
    edit(doc)
    return _write(tmp_path, doc)


def _set(doc: dict, dotted: str, value: Any) -> None:
    *head, last = dotted.split(".")
    for k in head:
        doc = doc[k]
    doc[last] = value


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("course.timeout_s", "300"),  # accepted as 300 before
        ("course.timeout_s", math.nan),  # accepted before
        ("course.gate_width", -0.3),  # accepted before
        ("course.inflation", math.inf),  # accepted before
        ("course.start_position", [18.0, -23.0]),  # ValueError traceback before
        ("course.start_quaternion_wxyz", [0.0, 0.0, 0.0, 0.0]),  # accepted before
        ("course.start_quaternion_wxyz", ["w", 0, 0, 1]),  # ValueError traceback before
        ("gates.Gate1.perturbation", [math.nan, 2.5, 5.0]),  # accepted before
        ("gates.Gate1.perturbation", [1e308, 2.5, 5.0]),  # accepted before
        ("gates.Gate1.corners", [["0", 0, 0], [1, 0, 0], [1, 0, 1], [0, 0, 1]]),  # accepted
        ("gates.Gate1.corners", [[0, 0, 0]] * 4),  # accepted before
        ("gates.Gate1.corners", [[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0]]),  # accepted
        ("gates.Gate1.corners", [[0, 0, 0], [1, 0, 0], [1, 0, 1], [0, 0.5, 1]]),  # accepted
        ("gates.Gate1.colour", "red"),  # accepted before (unknown key)
        (  # object id 12345678901 (beyond int32) accepted before
            "gates.Gate12345678901",
            {"corners": _rectangle((0, 0, 2), 0, 0, 1, 1).tolist(), "perturbation": [0, 0, 0]},
        ),
    ],
)
def test_course_values_of_the_wrong_type_shape_or_range_are_one_line_errors(tmp_path, field, value):
    path = _course_with(tmp_path, lambda d: _set(d, field, value))
    msg = _refused(lambda: alphapilot_2019(path), exc=FileFormatError)
    assert msg.startswith(f"{path}: {field}"), msg


def test_the_course_order_must_name_gates_of_the_file(tmp_path):
    path = _course_with(tmp_path, lambda d: d["course"]["order"].append("Gate99"))
    _refused(lambda: alphapilot_2019(path), f"{path}: course.order.11", "'Gate99'")


def test_gate_public_boundary_refuses_nan_corners_and_the_tracker_refuses_them_too():
    """``volary.worlds.Gate`` (public) refuses non-finite corners; ``GateTracker`` given a
    corner tensor with NaN raised torch's _LinAlgError before the fix."""
    with pytest.raises(ConfigError, match="corners"):
        Gate(((0, 0, math.nan), (1, 0, 0), (1, 0, 1), (0, 0, 1)))
    bad = torch.zeros(1, 1, 4, 3)
    bad[0, 0, 0, 0] = math.nan
    with pytest.raises(ConfigError, match="scene_or_corners: expected finite"):
        GateTracker(bad)


def test_a_perturbed_course_stays_inside_its_arena(tmp_path):
    """Bounds grow with the declared perturbation (before: always 10 m, so a 40 m shift left
    the arena)."""

    def shift_all(doc: dict) -> None:
        for gate in doc["gates"].values():
            gate["perturbation"] = [40.0, 40.0, 90.0]

    path = _course_with(tmp_path, shift_all)
    spec = alphapilot_2019(path)
    lo, hi = np.array(spec.bounds_min), np.array(spec.bounds_max)
    for seed in range(20):
        pts = np.array([g.corners for g in perturb_course(spec, seed).gates]).reshape(-1, 3)
        assert (pts[:, :2] >= lo[:2]).all() and (pts[:, :2] <= hi[:2]).all()


# ---- platforms: regression tests ---------------------------------------------------------------
PLATFORM_TEXT = """
[meta]
format = "volary-airframes"

[mini]
category = "preset"
layout = {value = "quad_x", source = "test"}
arm = {value = 120, unit = "mm", source = "test"}
mass = {value = 800, unit = "g", source = "test"}
inertia = {value = [4e-3, 4e-3, 7e-3], unit = "kg m^2", source = "test"}
k_f = {value = 3e-6, unit = "N/(rad/s)^2", source = "test"}
k_m = {value = 5e-8, unit = "N m/(rad/s)^2", source = "test"}
max_rotor_speed = {value = 15000, unit = "rpm", source = "test"}
"""


def _platform(tmp_path: Path, field: str, value: Any) -> Path:
    import tomllib

    doc = tomllib.loads(PLATFORM_TEXT)
    _set(doc, field, value)
    return _write(tmp_path, doc, "bad.toml")


@pytest.mark.parametrize(
    ("field", "value", "exc", "says"),
    [
        ("mini.mass.value", [800], FileFormatError, "[mini] mass: expected a number"),  # TypeError
        ("mini.arm.value", [[120]], FileFormatError, "[mini] arm: expected a number"),  # TypeError
        ("mini.mass.value", 1e308, ConfigError, "[mini] mass: expected a finite number in"),
        ("mini.max_rotor_speed.value", 1e308, ConfigError, "[mini] max_rotor_speed: expected"),
        ("mini.k_f.value", [3e-6], FileFormatError, "[mini] k_f: expected a number or a list of 4"),
        ("mini.inertia.source", 5, FileFormatError, "[mini] inertia.source"),  # str(5) before
        ("mini.description", {"a": 1}, FileFormatError, "[mini] description"),  # accepted before
        (
            "mini.table1",
            {
                k: {"value": math.nan, "unit": f.unit, "source": "t"}
                for k, f in TABLE1_FIELDS.items()
            },
            ConfigError,
            "[mini] table1.twr_max: expected a finite number",  # NaN accepted before
        ),
    ],
)
def test_platform_values_of_the_wrong_type_shape_or_range_are_one_line_errors(
    tmp_path, field, value, exc, says
):
    path = _platform(tmp_path, field, value)
    msg = _refused(lambda: load_file(path), says, exc=exc)
    assert msg.startswith("bad.toml: [mini]"), msg


def test_a_platform_file_without_an_airframe_and_a_name_that_is_not_a_key(tmp_path):
    path = _write(tmp_path, '[meta]\nformat = "volary-airframes"\n', "bad.toml")
    _refused(lambda: load_file(path), "bad.toml: 0 airframe tables", exc=FileFormatError)
    with pytest.raises(UnknownNameError, match="unknown platform"):
        catalogue.entry(["crazyflie"])  # TypeError: unhashable type before


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('name = "x"\nmass = 0.5\n', "[name]: expected a table, got 'x' (a platform is named"),
        ('mass = {value = 0.5, unit = "kg", source = "s"}\n', "put it under a table named"),
        ("mass = 0.5\n", "[mass]: expected a table, got 0.5 ('mass' is a platform field"),
        ('description = "quad"\n', "'description' is a platform field"),
    ],
)
def test_fields_written_without_their_platform_table_say_where_they_go(tmp_path, text, says):
    """A first platform file written as flat keys named the key 'expected a table' and stopped
    there; it now says the fields go under a table named for the platform."""
    path = _write(tmp_path, text, "flat.toml")
    _refused(lambda: load_file(path), says, exc=FileFormatError)


# ---- property tests: courses --------------------------------------------------------------------
@settings(max_examples=100)
@given(doc=course_docs())
def test_generated_valid_courses_load_and_give_back_the_files_values(tmp_path_factory, doc):
    path = _write(tmp_path_factory.mktemp("course"), doc)
    _check_course(alphapilot_2019(path), doc, path)


def _leaves(doc: Any, path: tuple = ()) -> list[tuple]:
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in _leaves(v, (*path, k))]
    if isinstance(doc, list) and doc and isinstance(doc[0], list | float | int):
        return [p for i, v in enumerate(doc) for p in _leaves(v, (*path, i))]
    return [path]


def _put(doc: Any, path: tuple, value: Any) -> None:
    for k in path[:-1]:
        doc = doc[k]
    doc[path[-1]] = value


WRONG = st.sampled_from(["1", True, {"x": 1}, [[[1.0]]], math.nan, -math.inf, 1e308, -1e308])
GATE_EDITS = {  # what makes a gate's 4 corners unusable, each with the problem named
    "all equal": lambda c: [c[0]] * 4,
    "collinear": lambda c: [[c[0][0] + k, c[0][1], c[0][2]] for k in range(4)],
    "tiny": lambda c: (np.array(c[0]) + _rectangle((0, 0, 0), 0, 0, 0.005, 0.5)).tolist(),
    "huge": lambda c: (np.array(c[0]) + _rectangle((0, 0, 0), 0, 0, 150.0, 1.0)).tolist(),
    # one corner 6 tolerances off the plane: each corner 1.5 tolerances off the best fit
    "warped": lambda c: (
        np.array(c[0])
        + _rectangle((0, 0, 0), 0, 0, 2, 2)
        + np.array([[0, 0, 0], [0, 0, 0], [0, 0, 0], [6 * GATE_FLATNESS_M, 0, 0]])
    ).tolist(),
    "dart": lambda c: (np.array(c[0]) + [[0, 0, 0], [0, 2, 0], [0, 1, 0.3], [0, 1, 2]]).tolist(),
    "sliver": lambda c: (
        np.array(c[0]) + [[0, 0, 0], [0, 1, 0.02], [0, 2, 0], [0, 1, -0.02]]
    ).tolist(),
}


@settings(max_examples=150)
@given(doc=course_docs(), data=st.data())
def test_generated_invalid_courses_are_refused_naming_file_and_field(tmp_path_factory, doc, data):
    """One leaf of a valid course given a wrong value (a string, a bool, a table, a list,
    NaN/inf/+-1e308), a gate made degenerate, an unknown key or a required key removed: a
    FileFormatError whose one line starts with ``<file>: <field>``."""
    _check_invalid_course(tmp_path_factory, doc, data)


@pytest.mark.slow
@settings(max_examples=500)
@given(doc=course_docs(), data=st.data())
def test_many_more_generated_invalid_courses(tmp_path_factory, doc, data):
    _check_invalid_course(tmp_path_factory, doc, data)


def _check_invalid_course(tmp_path_factory: Any, doc: dict[str, Any], data: Any) -> None:
    kind = data.draw(st.sampled_from(["leaf", "gate", "unknown", "missing", "order", "size"]))
    gate = data.draw(st.sampled_from(sorted(doc["gates"])))
    if kind == "leaf":
        leaves = [p for p in _leaves(doc) if p[:2] != ("course", "name")]
        where = data.draw(st.sampled_from(leaves))
        value = data.draw(WRONG.filter(lambda v: not (isinstance(v, str) and where[1] == "order")))
        _put(doc, where, value)
        field = ".".join(str(p) for p in where[:3]) if where[0] == "gates" else ".".join(where[:2])
    elif kind == "gate":
        edit = data.draw(st.sampled_from(sorted(GATE_EDITS)))
        doc["gates"][gate]["corners"] = GATE_EDITS[edit](doc["gates"][gate]["corners"])
        field = f"gates.{gate}.corners"
    elif kind == "unknown":
        where = data.draw(st.sampled_from([(), ("course",), ("gates", gate)]))
        _put(doc, (*where, "colour"), "red") if where else doc.update(colour="red")
        field = ".".join((*where, "colour"))
    elif kind == "missing":
        table, key = data.draw(
            st.sampled_from(
                [("course", k) for k in doc["course"] if k != "name"]
                + [(("gates", gate), "corners"), (("gates", gate), "perturbation"), ((), "gates")]
            )
        )
        table = (table,) if isinstance(table, str) else table
        parent = doc
        for k in table:
            parent = parent[k]
        del parent[key]
        field = ".".join((*table, key))
    elif kind == "order":
        doc["course"]["order"] = [*doc["course"]["order"], "NoSuchGate"]
        field = f"course.order.{len(doc['course']['order']) - 1}"
    else:
        key, bad = data.draw(
            st.sampled_from(
                [("timeout_s", 0.0), ("timeout_s", 1e6), ("gate_width", 0.0),
                 ("gate_width", PASSAGE_M * 2), ("inflation", -1e-3)]
            )
        )  # fmt: skip
        doc["course"][key] = bad
        field = f"course.{key}"
    path = _write(tmp_path_factory.mktemp("course"), doc)
    msg = _refused(lambda: alphapilot_2019(path), exc=FileFormatError)
    assert msg.startswith(f"{path}: {field}"), (field, msg)


def test_the_declared_gate_tolerances_hold_at_their_edges(tmp_path):
    """Just inside every declared tolerance loads; just outside is refused with its unit."""
    lo, hi = GATE_SIDE_M
    a = math.radians(GATE_ANGLE_DEG)

    def load(corners) -> Any:
        import tomllib

        doc = tomllib.loads(_packaged_course())
        doc["gates"]["Gate1"]["corners"] = np.asarray(corners, dtype=float).tolist()
        return lambda: alphapilot_2019(_write(tmp_path, doc))

    rhombus = lambda ang: [[0, 0, 0], [0, 1, 0], [0, 1 + math.cos(ang), math.sin(ang)],  # noqa: E731
                           [0, math.cos(ang), math.sin(ang)]]  # fmt: skip
    assert _within(load(_rectangle((0, 0, 2), 0, 0, lo * 1.01, 1.0))) is None
    assert _within(load(_rectangle((0, 0, 2), 0, 0, hi * 0.99, 1.0))) is None
    assert _within(load(rhombus(a * 1.01))) is None
    warped = _rectangle((0, 0, 2), 0, 0, 2, 2)
    warped[0, 0] += 1.9 * GATE_FLATNESS_M  # a quarter of it on each corner, after the fit
    assert _within(load(warped)) is None
    _refused(load(_rectangle((0, 0, 2), 0, 0, lo * 0.99, 1.0)), "expected at least 0.01 m")
    _refused(load(_rectangle((0, 0, 2), 0, 0, hi * 1.01, 1.0)), "expected sides in [0.01, 100] m")
    _refused(load(rhombus(a * 0.99)), "expected angles in [5, 175] deg")
    warped[0, 0] += 2.2 * GATE_FLATNESS_M
    _refused(load(warped), f"expected within {GATE_FLATNESS_M} m")


# ---- property tests: platforms ------------------------------------------------------------------
LAYOUT_ROTORS = {"quad_x": 4, "quad_plus": 4, "hexa": 6, "octo": 8, "y6": 6}


def _inset(lo: float, hi: float) -> tuple[float, float]:
    """The range less a relative 1e-9 at each end (a unit alias may round a value by an ulp)."""
    return lo + abs(lo) * 1e-9, hi - abs(hi) * 1e-9


@st.composite
def airframe_entries(draw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A valid catalogue entry drawn from :data:`FIELDS`' declared ranges (in a unit drawn
    from the field's unit and aliases), and the SI values it must load as. Within the ranges,
    what the airframe's physics needs: k_m at least 1e-3 m of k_f (else the yaw axis has no
    authority), a positive diagonal inertia, min_rotor_speed <= max_rotor_speed."""
    layout = draw(st.sampled_from(sorted(LAYOUT_ROTORS)))
    n = LAYOUT_ROTORS[layout]
    entry: dict[str, Any] = {
        "category": draw(st.sampled_from(["preset", "layout"])),
        "layout": {"value": layout, "source": "test"},
    }
    si: dict[str, Any] = {}

    def number(fname: str, lo: float | None = None, hi: float | None = None) -> float:
        spec = FIELDS[fname]
        a, b = _inset(spec.lo if lo is None else lo, spec.hi if hi is None else hi)
        return draw(st.floats(a, b))

    def put(fname: str, value: Any) -> None:
        spec = FIELDS[fname]
        unit, factor = draw(st.sampled_from([(spec.unit, 1.0), *spec.aliases]))
        scaled = [v / factor for v in value] if isinstance(value, list) else value / factor
        entry[fname] = {"value": scaled, "unit": unit, "source": "test"}
        si[fname] = value

    def per_rotor(fname: str, lo: float | None = None, hi: float | None = None) -> Any:
        if draw(st.booleans()):
            return number(fname, lo, hi)
        return [number(fname, lo, hi) for _ in range(n)]

    put("mass", number("mass"))
    put("arm", number("arm"))
    put("inertia", [number("inertia", 1e-8) for _ in range(3)])
    k_f = number("k_f")
    put("k_f", k_f)
    put("k_m", number("k_m", 1e-3 * k_f, k_f))
    top = number("max_rotor_speed")
    put("max_rotor_speed", top)
    if draw(st.booleans()):
        put("min_rotor_speed", per_rotor("min_rotor_speed", None, top))
    for fname in ("motor_tau_up", "motor_tau_down"):
        if draw(st.booleans()):
            put(fname, per_rotor(fname))
    if draw(st.booleans()):
        put("collider_radius", number("collider_radius"))
    for fname in ("drag_linear", "drag_quadratic", "force_noise"):
        if draw(st.booleans()):
            vec = FIELDS[fname].shape == "vec3" and draw(st.booleans())
            put(fname, [number(fname) for _ in range(3)] if vec else number(fname))
    if layout == "y6" and draw(st.booleans()):
        put("coaxial_gap", number("coaxial_gap"))
    return entry, si


def _as_tuple(value: Any, n: int) -> tuple[float, ...]:
    return tuple(value) if isinstance(value, list) else (value,) * n


@settings(max_examples=100)
@given(entries=st.lists(airframe_entries(), min_size=1, max_size=3))
def test_generated_valid_airframes_load_with_their_values_in_si(tmp_path_factory, entries):
    doc = {"meta": {"format": "volary-airframes"}}
    doc.update({f"quad-{i}": e for i, (e, _) in enumerate(entries)})
    got = load_file(_write(tmp_path_factory.mktemp("platforms"), doc))
    assert list(got) == [f"quad-{i}" for i in range(len(entries))]
    for (entry, si), e in zip(entries, got.values(), strict=True):
        af, n = e.airframe, len(e.airframe.rotor_positions)
        assert e.category == entry["category"] and n == LAYOUT_ROTORS[entry["layout"]["value"]]
        assert af.mass == pytest.approx(si["mass"], rel=1e-12)
        arm = float(np.hypot(*np.asarray(af.rotor_positions)[:, :2].T).max())
        assert arm == pytest.approx(si["arm"], rel=1e-9)
        assert np.diag(af.inertia) == pytest.approx(si["inertia"], rel=1e-12)
        for fname in ("k_f", "k_m", "max_rotor_speed", "min_rotor_speed", "motor_tau_up"):
            if fname in si:
                assert getattr(af, fname) == pytest.approx(_as_tuple(si[fname], n), rel=1e-12)
        if "collider_radius" in si:
            assert af.collider_radius == pytest.approx(si["collider_radius"], rel=1e-12)
        if "drag_linear" in si:
            assert af.drag_linear == pytest.approx(_as_tuple(si["drag_linear"], 3), rel=1e-12)


PLATFORM_EDITS: list[tuple[str, Any, type, str]] = [
    # (dotted key in the entry, value; None deletes it), error class, the field named
    *[(f"{f}.value", v, FileFormatError, f) for f in ("mass", "inertia", "k_f")
      for v in ("heavy", True, {"x": 1}, [[[1.0]]], [])],
    *[(f"{f}.value", v, ConfigError, f) for f in ("mass", "arm", "k_f", "max_rotor_speed")
      for v in (math.nan, math.inf, -math.inf, 1e308, -1.0)],
    ("inertia.value", [math.nan, 1.0, 1.0], ConfigError, "inertia"),
    ("inertia.value", [1.0, 1.0], FileFormatError, "inertia"),
    ("k_f.value", [1e-6] * 5, FileFormatError, "k_f"),
    ("mass.unit", "lb", FileFormatError, "mass: wrong unit"),
    ("mass.unit", 5, FileFormatError, "mass.unit"),
    ("mass.source", None, FileFormatError, "mass: missing source"),
    ("mass.colour", "red", FileFormatError, "mass: unknown key"),
    ("mass", 0.8, FileFormatError, "mass: expected a table"),
    ("k_m", None, FileFormatError, "k_m: missing field"),
    ("wingspan", 3, FileFormatError, "wingspan: unknown field"),
    ("category", "toy", FileFormatError, "category: expected one of"),
    ("category", 5, FileFormatError, "category"),
    ("layout.value", "quad_z", FileFormatError, "layout: unknown layout 'quad_z'"),
    ("layout", "quad_x", FileFormatError, "layout"),
    ("description", ["a"], FileFormatError, "description"),
    ("table1", 5, FileFormatError, "table1"),
    ("rotor_tilt", {"value": 30, "unit": "deg", "source": "t"}, FileFormatError, "rotor_tilt"),
    ("collider_radius", {"value": -1, "unit": "m", "source": "t"}, ConfigError, "collider_"),
    ("min_rotor_speed", {"value": 20.0, "unit": "rad/s", "source": "t"}, ConfigError, "min_"),
]  # fmt: skip


@settings(max_examples=150)
@given(entry=airframe_entries(), edit=st.sampled_from(PLATFORM_EDITS))
def test_generated_invalid_airframes_are_refused_naming_file_entry_and_field(
    tmp_path_factory, entry, edit
):
    """One key of a valid entry given a wrong type, shape, unit or value (or removed, or an
    unknown one added): FileFormatError for structure, ConfigError for values, one line
    ``<file>: [<entry>] ... <field>``."""
    key, value, exc, field = edit
    doc = entry[0]
    if key == "min_rotor_speed":  # above the top speed (the airframe's own check)
        doc["max_rotor_speed"] = {"value": 10.0, "unit": "rad/s", "source": "t"}
    *head, last = key.split(".")
    parent = doc
    for k in head:
        parent = parent[k]
    if value is None:
        del parent[last]
    else:
        parent[last] = value
    path = _write(tmp_path_factory.mktemp("platforms"), {"my-quad": doc}, "mine.toml")
    msg = _refused(lambda: load_file(path), exc=exc)
    assert msg.startswith("mine.toml: [my-quad]") and field in msg, (field, msg)
