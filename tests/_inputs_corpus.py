"""A new user's inputs to every entry point (issue 55): a generated, labelled corpus.

``tests/_fuzz.py`` mutates files volary itself writes; this harness starts from each entry
point's *input space* instead and draws what a new user hands it: their own course, platform,
suite, mesh, point cloud, splat, run database and checkpoint files, their learning datasets
(HDF5), recordings (.npz), served-run bags (rosbag2/MCAP) and scene obstacles (wrong TOML types and
shapes, missing and unknown keys, non-UTF-8 text, NUL bytes in the text or the path, deep
nesting, a FIFO, ``/dev/zero``, a directory, a missing or empty file, a 3 GiB sparse file,
1e308 / 1e39 / NaN / inf, degenerate geometry, coordinates 10 km (valid) and 1e6 m (invalid)
from the origin, counts that disagree with the data, PLY headers with ``comment`` and
``obj_info`` lines anywhere (valid), run databases with a column missing, of the wrong type or
holding wrong values) and the options of the ``volary`` commands.

Every input is labelled by construction: ``valid`` (with what the reader must return, checked
against the reader's result), or the reason it is invalid. Generation is seeded numpy
(``numpy.random.default_rng(seed)``): the same seed gives the same corpus, byte for byte.

Library inputs are read in a worker process (address space limited to 2 GiB, 10 s deadline per
input); ``volary`` commands run as subprocesses under the same memory limit (60 s deadline).
Each input's outcome is one of:

- ``clean``: an invalid input refused with a ``VolaryError`` (a command: exit 2 and one
  ``error:`` line, or click's usage error box, no traceback);
- ``valid``: a valid input accepted, and what came back is what was written;
- ``wrong``: an invalid input accepted (a silent acceptance), or a valid one read back wrong;
- ``refused_valid``: a valid input refused;
- ``unclean``: a command refused an invalid input without a traceback but not cleanly (an exit
  status other than 2, or no ``error:`` line);
- ``traceback``: any other exception (a command: ``Traceback`` in its output, or killed by a
  signal);
- ``hang``: no answer within the deadline; ``memory``: MemoryError, an allocator failure under
  the limit, or the worker killed by it.

    python tests/_inputs_corpus.py --n 2000 --out benchmarks/results/inputs_corpus.json

prints a table entry point x outcome and writes the counts, the distinct failure kinds (entry
point, input class, first example) and every finding. ``tests/test_inputs_corpus.py`` runs a
short sweep in the default tests and the full corpus as a slow test.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import math
import multiprocessing as mp
import os
import re
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

API_DEADLINE_S = 10.0
CLI_DEADLINE_S = 60.0
MEMORY_LIMIT = 2 * 2**30
SPARSE_BYTES = 3 * 2**30
BAD_OUTCOMES = ("wrong", "refused_valid", "unclean", "traceback", "hang", "memory")
OUTCOMES = ("clean", "valid", *BAD_OUTCOMES)
EXTREMES = (math.nan, math.inf, -math.inf, 1e308, -1e308, 1e39)


@dataclass
class Case:
    """One input: the entry point, its input class, and ``valid`` or why it is invalid."""

    entry: str
    kind: str
    label: str
    data: bytes | None = None  # the file's bytes (a file entry point, or a command's {file})
    special: str = ""  # fifo | devzero | dir | missing | nulpath | sparse: not a plain file
    suffix: str = ".toml"
    expect: dict[str, Any] = field(default_factory=dict)  # valid: what the reader must return
    args: list[str] = field(default_factory=list)  # a command's arguments; {file}, {dir}
    started: str = ""  # a command: output showing it accepted the input and began the work
    tree: dict[str, Any] = field(default_factory=dict)  # special "tree": a directory's files

    @property
    def valid(self) -> bool:
        return self.label == "valid"

    @property
    def cli(self) -> bool:
        return self.entry.startswith("volary ")


def _pick(rng: np.random.Generator, seq: Any) -> Any:
    return seq[int(rng.integers(len(seq)))]


def _fmt(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(x)


# ---- TOML text -----------------------------------------------------------------------------------
def _key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def _tv(v: Any) -> str:
    """A TOML value (inline tables for nested tables)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _fmt(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_tv(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_tv(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def toml_dumps(doc: dict[str, Any], rng: np.random.Generator | None = None) -> str:
    """``doc`` as TOML: top-level tables as ``[sections]``; comments sprinkled when ``rng``."""
    lines = []
    note = (
        (lambda: lines.append('# a user\'s note: ünïcode, [brackets] = "quotes"'))
        if (rng is not None)
        else (lambda: None)
    )
    for k, v in doc.items():
        if not isinstance(v, dict):
            lines.append(f"{_key(k)} = {_tv(v)}")
    for k, v in doc.items():
        if isinstance(v, dict):
            if rng is not None and rng.random() < 0.5:
                note()
            lines.append(f"[{_key(k)}]")
            for kk, vv in v.items():
                lines.append(f"{_key(kk)} = {_tv(vv)}")
    return "\n".join(lines) + "\n"


def _leaves(doc: Any, path: tuple = ()) -> list[tuple]:
    """Paths to every scalar leaf."""
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in _leaves(v, (*path, k))]
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc) for p in _leaves(v, (*path, i))]
    return [path]


def _get(doc: Any, path: tuple) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def _set(doc: Any, path: tuple, value: Any) -> None:
    _get(doc, path[:-1])[path[-1]] = value


def _dotted(path: tuple) -> str:
    return ".".join(str(p) for p in path)


def _ints_where_whole(doc: Any, rng: np.random.Generator) -> Any:
    """Whole floats written as TOML integers (``timeout_s = 300``): valid wherever a float is."""
    if isinstance(doc, dict):
        return {k: _ints_where_whole(v, rng) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_ints_where_whole(v, rng) for v in doc]
    if isinstance(doc, float) and doc.is_integer() and abs(doc) < 1e15 and rng.random() < 0.5:
        return int(doc)
    return doc


# ---- shared invalid classes ----------------------------------------------------------------------
FS_CLASSES = ("fifo", "devzero", "dir", "missing", "nulpath", "empty", "sparse")
FS_LABELS = {
    "fifo": "a FIFO (reading would block)",
    "devzero": "/dev/zero (never ends)",
    "dir": "a directory",
    "missing": "no such file",
    "nulpath": "a NUL byte in the path",
    "empty": "an empty file",
    "sparse": "a 3 GiB file (sparse, all NUL bytes)",
}


def fs_case(entry: str, rng: np.random.Generator, suffix: str) -> Case:
    kind = _pick(rng, FS_CLASSES)
    if kind == "empty":
        return Case(entry, "fs:empty", FS_LABELS[kind], data=b"", suffix=suffix)
    return Case(entry, f"fs:{kind}", FS_LABELS[kind], special=kind, suffix=suffix)


def text_case(entry: str, rng: np.random.Generator, text: str, suffix: str) -> Case:
    """Byte-level damage to a valid text file: not UTF-8, a NUL byte, deep nesting, garbage."""
    raw = text.encode()
    kind = _pick(
        rng, ("non_utf8", "nul_byte", "deep_nesting", "very_deep_nesting", "garbage", "latin1")
    )
    cut = int(rng.integers(len(raw) + 1))
    if kind == "non_utf8":
        data, label = raw[:cut] + b"\xff\xfe\xc3(" + raw[cut:], "bytes that are not UTF-8"
    elif kind == "latin1":
        data = (text + '# Gr\u00fc\u00dfe\nnote = "caf\u00e9"\n').encode("latin-1")
        label = "Latin-1 text (not UTF-8) and an unknown key"
    elif kind == "nul_byte":
        data, label = raw[:cut] + b"\x00" + raw[cut:], "a NUL byte in the text"
    elif kind == "deep_nesting":
        d = int(rng.integers(40, 200))
        data, label = raw + f"deep = {'[' * d}1{']' * d}\n".encode(), f"nesting {d} deep"
    elif kind == "very_deep_nesting":
        d = int(rng.integers(20_000, 100_000))
        data = raw + f"deep = {'[' * d}1{']' * d}\n".encode()
        label = f"nesting {d} deep (a recursive parser overflows)"
    else:
        data = raw[:cut] + bytes(rng.integers(0, 128, int(rng.integers(1, 40)), dtype=np.uint8))
        data += b"\n= = [\n"
        label = "not TOML (garbage lines)"
    return Case(entry, f"text:{kind}", label, data=data, suffix=suffix)


def doc_case(
    entry: str,
    rng: np.random.Generator,
    doc: dict[str, Any],
    required: list[tuple],
    shapes: dict[tuple, tuple[int, ...]],
) -> Case:
    """A structural mistake in a valid TOML document: an extreme number, a wrong type, a missing
    required key, an unknown key, a list of the wrong length."""
    doc = copy.deepcopy(doc)
    kind = _pick(rng, ("extreme", "extreme", "wrong_type", "missing_key", "unknown_key", "shape"))
    leaves = _leaves(doc)
    if kind == "extreme":
        nums = [
            p
            for p in leaves
            if isinstance(_get(doc, p), int | float) and not isinstance(_get(doc, p), bool)
        ]
        p, x = _pick(rng, nums), _pick(rng, EXTREMES)
        _set(doc, p, x)
        label = f"{_dotted(p)} = {_fmt(x)}"
    elif kind == "wrong_type":
        p = _pick(rng, leaves)
        old = _get(doc, p)
        choices = (
            ['"12"', "true", "[1]", "{a = 1}"]
            if not isinstance(old, str)
            else ["12", "true", "[]", "{a = 1}"]
        )
        new = _pick(rng, choices)
        _set(doc, p, tomllib.loads(f"v = {new}")["v"])
        label = f"{_dotted(p)}: a {type(old).__name__} written as {new}"
    elif kind == "missing_key":
        p = _pick(rng, required)
        del _get(doc, p[:-1])[p[-1]]
        label = f"{_dotted(p)} missing"
    elif kind == "unknown_key":
        tables = [()] + [(k,) for k, v in doc.items() if isinstance(v, dict)]
        t = _pick(rng, tables)
        _get(doc, t)["colour_typo"] = 1.0
        label = f"unknown key {_dotted((*t, 'colour_typo'))}"
    else:
        p, ok = _pick(rng, list(shapes.items()))
        seq = _get(doc, p)
        seq = seq if isinstance(seq, list) else [seq]
        n = _pick(rng, [k for k in (0, 1, 2, 3, 4, 5, 9) if k not in ok])
        _set(doc, p, (seq * 9)[:n] if seq else [1.0] * n)
        want = " or ".join(map(str, ok)) + " items" if ok else "a number"
        label = f"{_dotted(p)}: a list of {n} items, expected {want}"
    return Case(entry, f"doc:{kind}", label, data=toml_dumps(doc).encode())


# ---- course: volary.worlds.alphapilot_2019 -------------------------------------------------------
COURSE = "course: worlds.alphapilot_2019"


def _gate(rng: np.random.Generator, centre: np.ndarray, z_order: bool) -> list[list[float]]:
    yaw, w, h = rng.uniform(-math.pi, math.pi), rng.uniform(0.8, 3.0), rng.uniform(0.8, 3.0)
    u = np.array([-math.sin(yaw), math.cos(yaw), 0.0]) * w / 2
    z = np.array([0.0, 0.0, h / 2])
    c = [centre - u + z, centre + u + z, centre + u - z, centre - u - z]
    if z_order:  # TL, TR, BL, BR (as some gates of the published file)
        c = [c[0], c[1], c[3], c[2]]
    return [[round(float(v), 4) for v in p] for p in c]


def course_doc(rng: np.random.Generator, offset: float = 0.0) -> tuple[dict, dict]:
    n = int(rng.integers(1, 13))
    numbers = rng.choice(np.arange(1, 100), size=n, replace=False)
    names = [f"Gate{k}" for k in numbers]
    shift = np.array([offset, -offset / 2, 0.0])
    gates = {}
    for name in names:
        centre = rng.uniform([-50, -50, 1.5], [50, 50, 8]) + shift
        gates[name] = {
            "corners": _gate(rng, centre, rng.random() < 0.3),
            "perturbation": [float(round(v, 2)) for v in rng.uniform(0, 3, 3)],
        }
    order = [names[i] for i in rng.permutation(n)[: int(rng.integers(1, n + 1))]]
    yaw = rng.uniform(-math.pi, math.pi)
    course = {
        "name": f"user course {int(rng.integers(1000))}",
        "order": order,
        "start_position": [
            round(float(v), 3) for v in rng.uniform([-40, -40, 0.5], [40, 40, 3]) + shift
        ],
        "start_quaternion_wxyz": [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)],
        "timeout_s": float(round(rng.uniform(10, 600))),
        "gate_width": round(float(rng.uniform(0.1, 1.0)), 3),
        "inflation": round(float(rng.uniform(0.05, 0.5)), 3),
    }
    doc = _ints_where_whole({"course": course, "gates": gates}, rng)
    last = np.asarray(gates[order[-1]]["corners"], dtype=float).mean(axis=0)
    return doc, {"gates": sorted(names), "order": order, "goal": last.tolist()}


def course_cases(rng: np.random.Generator) -> Case:
    r = rng.random()
    if r < 0.3:
        far = rng.random() < 0.3
        doc, expect = course_doc(rng, 10_000.0 if far else 0.0)
        kind = "valid:10km_from_origin" if far else "valid:course"
        return Case(COURSE, kind, "valid", data=toml_dumps(doc, rng).encode(), expect=expect)
    doc, _ = course_doc(rng)
    if r < 0.4:
        return fs_case(COURSE, rng, ".toml")
    if r < 0.5:
        return text_case(COURSE, rng, toml_dumps(doc), ".toml")
    if r < 0.75:
        g = _pick(rng, sorted(doc["gates"]))
        shapes = {
            ("gates", g, "corners"): (4,),
            ("gates", g, "corners", 0): (3,),
            ("course", "start_position"): (3,),
            ("course", "start_quaternion_wxyz"): (4,),
            ("gates", g, "perturbation"): (3,),
        }
        required = [
            ("course", "order"),
            ("course", "start_position"),
            ("gates", g, "corners"),
            ("course",),
            ("gates",),
        ]
        return doc_case(COURSE, rng, doc, required, shapes)
    kind = _pick(
        rng,
        (
            "all_corners_equal",
            "collinear_corners",
            "unknown_gate_in_order",
            "million_m",
            "zero_quaternion",
            "negative_size",
            "no_gates",
        ),
    )
    g = _pick(rng, sorted(doc["gates"]))
    corners = doc["gates"][g]["corners"]
    if kind == "all_corners_equal":
        doc["gates"][g]["corners"] = [list(corners[0])] * 4
        label = f"gates.{g}: all four corners equal (zero-area gate)"
    elif kind == "collinear_corners":
        a = np.asarray(corners[0], dtype=float)
        doc["gates"][g]["corners"] = [(a + [0.0, 0.0, k]).tolist() for k in range(4)]
        label = f"gates.{g}: collinear corners (zero-area gate)"
    elif kind == "unknown_gate_in_order":
        doc["course"]["order"] = [*doc["course"]["order"], "Gate100"]
        label = "course.order names Gate100, which the gates table lacks"
    elif kind == "million_m":
        for gate in doc["gates"].values():
            gate["corners"] = [[c[0] + 1e6, c[1], c[2]] for c in gate["corners"]]
        label = "every gate 1e6 m from the origin (beyond 100 km)"
    elif kind == "zero_quaternion":
        doc["course"]["start_quaternion_wxyz"] = [0.0, 0.0, 0.0, 0.0]
        label = "course.start_quaternion_wxyz is zero"
    elif kind == "negative_size":
        k = _pick(rng, ("gate_width", "timeout_s", "inflation"))
        doc["course"][k] = -1.0
        label = f"course.{k} = -1"
    else:
        doc["gates"] = {}
        doc["course"]["order"] = []
        label = "no gates and an empty order"
    return Case(COURSE, f"geometry:{kind}", label, data=toml_dumps(doc).encode())


# ---- platform: volary.platforms.load_file --------------------------------------------------------
PLATFORM = "platform: platforms.load_file"
_CATALOGUE: dict[str, Any] = {}


def _catalogue() -> dict[str, Any]:
    if not _CATALOGUE:
        from importlib import resources

        for f in ("presets.toml", "flyingtrust.toml"):
            doc = tomllib.loads((resources.files("volary.platforms") / "data" / f).read_text())
            doc.pop("meta", None)
            _CATALOGUE.update(doc)
    return _CATALOGUE


def platform_doc(rng: np.random.Generator) -> tuple[dict, dict]:
    cat = _catalogue()
    names = sorted(cat)
    doc, masses = {}, {}
    for i in range(int(rng.integers(1, 4))):
        src = copy.deepcopy(cat[_pick(rng, names)])
        masses_kg = float(src["mass"]["value"])
        if rng.random() < 0.3 and src["mass"]["unit"] == "kg":
            src["mass"] = {**src["mass"], "value": masses_kg * 1000, "unit": "g"}
        if rng.random() < 0.3 and src["arm"]["unit"] == "m":
            src["arm"] = {**src["arm"], "value": float(src["arm"]["value"]) * 1000, "unit": "mm"}
        keys = list(src)
        rng.shuffle(keys)
        name = f"my-quad-{i}"
        doc[name] = {k: src[k] for k in keys}
        masses[name] = masses_kg
    return _ints_where_whole(doc, rng), {"masses": masses}


def platform_cases(rng: np.random.Generator) -> Case:
    r = rng.random()
    doc, expect = platform_doc(rng)
    if r < 0.3:
        return Case(
            PLATFORM, "valid:platform", "valid", data=toml_dumps(doc, rng).encode(), expect=expect
        )
    if r < 0.4:
        return fs_case(PLATFORM, rng, ".toml")
    if r < 0.5:
        return text_case(PLATFORM, rng, toml_dumps(doc), ".toml")
    name = _pick(rng, sorted(doc))
    if r < 0.8:
        shapes = {(name, "inertia", "value"): (3,), (name, "mass", "value"): ()}
        required = [
            (name, k)
            for k in (
                "mass",
                "arm",
                "inertia",
                "k_f",
                "k_m",
                "max_rotor_speed",
                "layout",
                "category",
            )
        ]
        required += [(name, "mass", "unit"), (name, "mass", "value")]
        return doc_case(PLATFORM, rng, doc, required, shapes)
    kind = _pick(
        rng,
        (
            "wrong_unit",
            "unknown_layout",
            "zero_mass",
            "negative_inertia",
            "min_above_max_speed",
            "top_level_scalar",
            "no_platform",
        ),
    )
    e = doc[name]
    if kind == "wrong_unit":
        e["mass"]["unit"] = "lb"
        label = f"{name}.mass.unit = 'lb'"
    elif kind == "unknown_layout":
        e["layout"]["value"] = "quad_z"
        label = f"{name}.layout = quad_z (no such layout)"
    elif kind == "zero_mass":
        e["mass"]["value"] = 0.0
        label = f"{name}.mass = 0"
    elif kind == "negative_inertia":
        v = e["inertia"]["value"]
        e["inertia"]["value"] = [-abs(x) for x in v] if isinstance(v, list) else -abs(v)
        label = f"{name}.inertia negative"
    elif kind == "min_above_max_speed":
        e["min_rotor_speed"] = {
            "value": float(e["max_rotor_speed"]["value"]) * 2,
            "unit": e["max_rotor_speed"]["unit"],
            "source": "me",
        }
        label = f"{name}.min_rotor_speed above max_rotor_speed"
    elif kind == "top_level_scalar":
        doc = {"mass": 1.0, **doc}
        label = "a top-level key that is not a platform table"
    else:
        return Case(
            PLATFORM,
            "geometry:no_platform",
            "no platform table (comments only)",
            data=b"# my platforms\n# (none yet)\n",
        )
    return Case(PLATFORM, f"value:{kind}", label, data=toml_dumps(doc).encode())


# ---- suite: volary.bench.nav.get_suite -----------------------------------------------------------
SUITE = "suite: bench.nav.get_suite"


def suite_doc(rng: np.random.Generator) -> tuple[dict, dict]:
    from volary.studies.flyingtrust.protocol import QUICK_PLATFORMS, SCENARIO_TYPES
    from volary.studies.flyingtrust.schema import COLLIDERS, SETTING_RANGES

    plats = [str(p) for p in rng.permutation(QUICK_PLATFORMS)[: int(rng.integers(1, 5))]]
    scens = [str(s) for s in rng.permutation(SCENARIO_TYPES)[: int(rng.integers(1, 4))]]
    c = rng.random()
    if c < 0.3:
        configs: Any = "fixed"
        n_cfg = 10
    elif c < 0.6:
        n_cfg = int(rng.integers(1, 11))
        configs = f"fixed:{n_cfg}"
    else:
        configs = [int(x) for x in rng.choice(10_000, int(rng.integers(1, 6)), replace=False)]
        n_cfg = len(configs)
    trials = int(rng.integers(1, 6))
    doc: dict[str, Any] = {
        "name": f"my-suite-{int(rng.integers(100))}",
        "platforms": plats,
        "scenarios": scens,
        "configs": configs,
        "trials_per_config": trials,
        "max_envs": int(rng.integers(1, 37)),
    }
    settings: dict[str, Any] = {}
    for k, (lo, hi, _) in SETTING_RANGES.items():
        if rng.random() < 0.5:
            settings[k] = _pick(rng, [lo, hi, float(round(rng.uniform(lo, hi), 2)) or lo])
    if rng.random() < 0.3:
        settings["collider"] = _pick(rng, COLLIDERS)
    if settings or rng.random() < 0.5:
        doc["settings"] = settings
    expect = {"platforms": plats, "n_trials": len(plats) * len(scens) * n_cfg * trials}
    return _ints_where_whole(doc, rng), expect


def suite_cases(rng: np.random.Generator) -> Case:
    r = rng.random()
    doc, expect = suite_doc(rng)
    if r < 0.3:
        return Case(
            SUITE, "valid:suite", "valid", data=toml_dumps(doc, rng).encode(), expect=expect
        )
    if r < 0.4:
        return fs_case(SUITE, rng, ".toml")
    if r < 0.5:
        return text_case(SUITE, rng, toml_dumps(doc), ".toml")
    if r < 0.8:
        required = [("platforms",), ("scenarios",), ("configs",)]
        shapes = {("platforms",): tuple(range(1, 5)), ("scenarios",): tuple(range(1, 4))}
        return doc_case(SUITE, rng, doc, required, shapes)
    kind = _pick(
        rng,
        (
            "unknown_platform",
            "unknown_scenario",
            "fixed_99",
            "zero_trials",
            "setting_out_of_range",
            "duplicate_platform",
            "huge_trials",
        ),
    )
    if kind == "unknown_platform":
        doc["platforms"] = [*doc["platforms"], "my-drone"]
        label = "platforms names my-drone (not in the catalogue)"
    elif kind == "unknown_scenario":
        doc["scenarios"] = ["jungle"]
        label = "scenarios = ['jungle']"
    elif kind == "fixed_99":
        doc["configs"] = "fixed:99"
        label = "configs = 'fixed:99' (10 fixed configurations exist)"
    elif kind == "zero_trials":
        k = _pick(rng, ("trials_per_config", "max_envs"))
        doc[k] = _pick(rng, (0, -3))
        label = f"{k} = {doc[k]}"
    elif kind == "setting_out_of_range":
        doc["settings"] = {"time_limit": 1e6}
        label = "settings.time_limit = 1e6 s (at most 3600 s)"
    elif kind == "duplicate_platform":
        doc["platforms"] = [doc["platforms"][0]] * 2
        label = "platforms lists one twice"
    else:
        doc["trials_per_config"] = 2**62
        label = "trials_per_config = 2**62"
    return Case(SUITE, f"value:{kind}", label, data=toml_dumps(doc).encode())


# ---- meshes and point clouds: volary.worlds.io ---------------------------------------------------
MESH = "mesh: worlds.io.load_mesh"
POINTS = "points: worlds.io.load_points"


def _mesh(rng: np.random.Generator, offset: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    nv = int(rng.integers(4, 60))
    v = rng.uniform(-50, 50, (nv, 3)).round(4) + np.array([offset, offset / 2, 0.0])
    nt = int(rng.integers(1, 2 * nv))
    t = np.stack([rng.choice(nv, 3, replace=False) for _ in range(nt)])
    return v, t


def _ply_header(fmt: str, elements: list[tuple[str, int, list[str]]], rng: Any) -> list[str]:
    lines = ["ply", f"format {fmt} 1.0"]
    for name, n, props in elements:
        lines += [f"element {name} {n}", *props]
    lines.append("end_header")
    if rng is not None:  # comment / obj_info lines anywhere after the format line (valid)
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.integers(2, len(lines)))
            lines.insert(
                at,
                _pick(
                    rng,
                    [
                        "comment made by me",
                        "obj_info scanner v2 0.01 m",
                        "comment",
                        "comment element vertex 999",
                    ],
                ),
            )
    return lines


def ply_bytes(
    v: np.ndarray,
    t: np.ndarray | None,
    binary: bool,
    rng: Any = None,
    faces: list[list[int]] | None = None,
    counts: tuple[int, int] | None = None,
) -> bytes:
    """A PLY mesh (``t`` None: points) with optional header comments; ``counts`` overrides the
    declared vertex and face counts."""
    faces = faces if faces is not None else ([] if t is None else [list(f) for f in t])
    nv, nf = counts or (len(v), len(faces))
    props = ["property float x", "property float y", "property float z"]
    if binary:
        props = [p.replace("float", "double") for p in props]
    els = [("vertex", nv, props)]
    if t is not None or faces:
        els.append(("face", nf, ["property list uchar int vertex_indices"]))
    head = "\n".join(_ply_header("binary_little_endian" if binary else "ascii", els, rng)) + "\n"
    if binary:
        body = v.astype("<f8").tobytes() + b"".join(
            struct.pack(f"<B{len(f)}i", len(f), *f) for f in faces
        )
    else:
        body = (
            "".join(" ".join(repr(float(x)) for x in row) + "\n" for row in v)
            + "".join(f"{len(f)} " + " ".join(map(str, f)) + "\n" for f in faces)
        ).encode()
    return head.encode() + body


def obj_bytes(v: np.ndarray, faces: list[list[int]], rng: Any = None) -> bytes:
    out = ["# made by hand", "o thing", "mtllib none.mtl"] if rng is not None else []
    out += ["v " + " ".join(repr(float(x)) for x in row) for row in v]
    if rng is not None:
        out += ["vn 0 0 1", "vt 0.5 0.5", "g part", "s off", ""]
    for f in faces:
        if rng is not None and rng.random() < 0.3:
            out.append("f " + " ".join(f"{i + 1}/1/1" for i in f))
        elif rng is not None and rng.random() < 0.2:
            out.append("f " + " ".join(str(i - len(v)) for i in f))  # negative: relative
        else:
            out.append("f " + " ".join(str(i + 1) for i in f))
    return ("\n".join(out) + "\n").encode()


def stl_bytes(v: np.ndarray, t: np.ndarray, binary: bool, count: int | None = None) -> bytes:
    tri = v[t]
    if binary:
        rows = np.zeros((len(tri), 12), dtype=np.float64)
        rows[:, 2], rows[:, 3:] = 1.0, tri.reshape(len(tri), 9)
        with np.errstate(over="ignore"):  # 1e39 is inf in float32: still an invalid vertex
            f4 = rows.astype("<f4")
        rec = b"".join(r.tobytes() + b"\0\0" for r in f4)
        return b"\0" * 80 + struct.pack("<I", len(t) if count is None else count) + rec
    body = "".join(
        "facet normal 0 0 1\n outer loop\n"
        + "".join(f"  vertex {a!r} {b!r} {c!r}\n" for a, b, c in f.tolist())
        + " endloop\nendfacet\n"
        for f in tri
    )
    return f"solid mine\n{body}endsolid mine\n".encode()


def pcd_bytes(
    p: np.ndarray,
    binary: bool,
    extra: bool = False,
    points: int | None = None,
    fields: str = "x y z",
    comment: bool = False,
) -> bytes:
    n = len(p)
    cols = fields.split() + (["intensity"] if extra else [])
    data = np.concatenate([p, np.ones((n, 1))], axis=1) if extra else p
    head = ("# .PCD v0.7 - Point Cloud Data file format\n" if comment else "") + (
        f"VERSION 0.7\nFIELDS {' '.join(cols)}\nSIZE {' '.join(['4'] * len(cols))}\n"
        f"TYPE {' '.join(['F'] * len(cols))}\nCOUNT {' '.join(['1'] * len(cols))}\n"
        f"WIDTH {n}\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS {n if points is None else points}\n"
        f"DATA {'binary' if binary else 'ascii'}\n"
    )
    if binary:
        with np.errstate(over="ignore"):  # 1e39 is inf in float32: still an invalid point
            return head.encode() + data.astype("<f4").tobytes()
    return head.encode() + "".join(" ".join(f"{x:.9g}" for x in r) + "\n" for r in data).encode()


def mesh_cases(rng: np.random.Generator) -> Case:
    r = rng.random()
    fmt = _pick(rng, ("ply_ascii", "ply_binary", "obj", "stl_ascii", "stl_binary"))
    suffix = "." + fmt.split("_")[0]
    far = rng.random() < 0.2
    v, t = _mesh(rng, 10_000.0 if far else 0.0)
    faces = [list(f) for f in t]
    if r < 0.35:
        if fmt.startswith("ply") and rng.random() < 0.4:  # quads and comments
            faces = [
                [*f, int((f[0] + 1) % len(v))] if len({*f, (f[0] + 1) % len(v)}) == 4 else f
                for f in faces
            ]
        n_tri = sum(len(f) - 2 for f in faces)
        data = {
            "ply_ascii": lambda: ply_bytes(v, t, False, rng, faces),
            "ply_binary": lambda: ply_bytes(v, t, True, rng, faces),
            "obj": lambda: obj_bytes(v, faces, rng),
            "stl_ascii": lambda: stl_bytes(v, t, False),
            "stl_binary": lambda: stl_bytes(v, t, True),
        }[fmt]()
        used = v[t.ravel()] if fmt.startswith("stl") else v  # STL holds only face corners
        expect = {"triangles": n_tri, "box": [used.min(0).tolist(), used.max(0).tolist()]}
        if not fmt.startswith("stl"):
            expect["vertices"] = len(v)
        kind = f"valid:{fmt}" + (":10km_from_origin" if far else "")
        return Case(MESH, kind, "valid", data=data, suffix=suffix, expect=expect)
    if r < 0.45:
        return fs_case(MESH, rng, suffix)
    kind = _pick(
        rng,
        (
            "nan",
            "inf",
            "1e308",
            "1e39",
            "million_m",
            "index_out_of_range",
            "count_more",
            "count_less",
            "no_faces",
            "zero_area_faces",
            "truncated",
            "non_utf8",
            "nul_byte",
            "suffix",
        ),
    )
    label, faces2, counts = kind, faces, None
    if kind in ("nan", "inf", "1e308", "1e39"):
        x = {"nan": math.nan, "inf": math.inf, "1e308": 1e308, "1e39": 1e39}[kind]
        v = v.copy()
        at = int(_pick(rng, t.ravel()))  # a face's corner: STL holds no other vertex
        v[at, int(rng.integers(3))] = x
        label = f"a vertex coordinate = {kind}"
    elif kind == "million_m":
        v = v + np.array([1e6, 0.0, 0.0])
        label = "every vertex 1e6 m from the origin (beyond 100 km)"
    elif kind == "index_out_of_range":
        faces2 = [*faces, [0, 1, len(v) + 5]]
        label = f"a face names vertex {len(v) + 5} of {len(v)}"
    elif kind in ("count_more", "count_less"):
        d = 3 if kind == "count_more" else -1
        counts = (len(v) + d, len(faces))
        label = f"header/count says {len(v) + d} vertices, the data holds {len(v)}"
    elif kind == "no_faces":
        faces2 = []
        label = "vertices only, no faces"
    elif kind == "zero_area_faces":
        faces2 = [[f[0], f[0], f[1]] for f in faces]
        label = "every face has a repeated vertex (zero area)"
    elif kind == "truncated" and fmt == "obj":  # an OBJ cut after a line is a smaller OBJ
        kind, faces2 = "index_out_of_range", [*faces, [0, 1, len(v) + 5]]
        label = f"a face names vertex {len(v) + 5} of {len(v)}"
    data = _mesh_data(fmt, v, faces2, counts, rng)
    if fmt == "obj" and kind in ("count_more", "count_less"):
        label = (
            "a face names vertex 0 (OBJ counts from 1)"
            if kind == "count_less"
            else f"a face names vertex {len(v) + 1} of {len(v)}"
        )
    if fmt.startswith("stl") and kind == "index_out_of_range":  # STL has no indices
        label = "an incomplete last facet"
    if fmt == "stl_ascii" and kind in ("count_more", "count_less"):  # ascii STL has no count
        data = data.replace(
            b"endsolid",
            b"facet normal 0 0 1\n outer loop\n  vertex 1 2\n endloop\nendfacet\nendsolid",
        )
        label = "an ascii STL vertex of 2 numbers"
    if kind == "truncated":
        data, label = truncate(data, fmt, rng), "the file cut short"
    elif kind in ("non_utf8", "nul_byte"):
        junk = b"\xff\xfe\x80" if kind == "non_utf8" else b"\x00"
        data = inject(data, junk, fmt, rng)
        label = ("bytes that are not UTF-8" if kind == "non_utf8" else "a NUL byte") + (
            " inside a number" if fmt != "ply_binary" else " in the header"
        )
        if fmt == "stl_binary":  # its 80-byte header is free bytes: a short record instead
            data, label = data[:-7], "the file cut short"
    elif kind == "suffix":
        suffix = _pick(rng, (".txt", ".ply.bak", ".fbx"))
        label = f"an unsupported suffix {suffix}"
    return Case(MESH, f"mesh:{kind}:{fmt}", label, data=data, suffix=suffix)


def _body(data: bytes) -> int:
    """Where a file's data starts (after a PLY/PCD header), else 0."""
    for mark in (b"end_header\n", b"DATA ascii\n", b"DATA binary\n"):
        if mark in data:
            return data.index(mark) + len(mark)
    return 0


def truncate(data: bytes, fmt: str, rng: np.random.Generator) -> bytes:
    """``data`` cut so that the loss is detectable: a binary file anywhere in its data; a text
    file at the start of a data row before the last (a count then disagrees), an ascii STL
    inside a facet."""
    start = _body(data)
    if fmt.endswith("binary") or fmt in ("sqlite", "pt"):
        return data[: int(rng.integers(start, len(data) - 1))]
    if fmt == "stl_ascii":
        cuts = [m.end() for m in re.finditer(rb"outer loop\n", data)]
        return data[: _pick(rng, cuts)]
    rows = [m.end() for m in re.finditer(rb"\n", data) if start <= m.end() < len(data)]
    return data[: _pick(rng, rows[:-1] or [start])]


def inject(data: bytes, junk: bytes, fmt: str, rng: np.random.Generator) -> bytes:
    """``junk`` inserted after a digit: in the header of a binary PLY, anywhere in a text
    file (inside a number, so no reader can take it for a comment or a separator)."""
    end = _body(data) if fmt.endswith("binary") else len(data)
    digits = [m.end() for m in re.finditer(rb"\d", data[:end])]
    i = _pick(rng, digits) if digits else len(data)
    return data[:i] + junk + data[i:]


def _mesh_data(fmt: str, v: np.ndarray, faces: list[list[int]], counts: Any, rng: Any) -> bytes:
    t = np.asarray(faces, dtype=np.int64).reshape(-1, 3) if faces else np.zeros((0, 3), np.int64)
    if fmt.startswith("ply"):
        return ply_bytes(v, t, fmt == "ply_binary", None, faces, counts)
    if fmt == "obj":
        out = obj_bytes(v, faces)
        if counts is not None:  # OBJ declares no count: a face naming a vertex past the end
            out += f"f 1 2 {len(v) + 1}\n".encode() if counts[0] > len(v) else b"f 1 2 0\n"
        return out
    ok = t[(t < len(v)).all(1)] if len(t) else t
    if fmt == "stl_binary":
        count = None if counts is None else len(ok) + (3 if counts[0] > len(v) else -1)
        out = stl_bytes(v, ok, True, count)
    else:
        out = stl_bytes(v, ok, False)
    if len(ok) < len(t):  # STL has no indices: an out-of-range face is a short record
        out = (
            out[:-20]
            if fmt == "stl_binary"
            else out.replace(b"endsolid", b"facet normal 0 0 1\nouter loop\nendsolid")
        )
    return out


def points_cases(rng: np.random.Generator) -> Case:
    r = rng.random()
    fmt = _pick(rng, ("pcd_ascii", "pcd_binary", "ply_ascii", "ply_binary"))
    suffix = "." + fmt.split("_")[0]
    far = rng.random() < 0.2
    p = rng.uniform(-50, 50, (int(rng.integers(1, 80)), 3)).round(3)
    if far:
        p = p + np.array([10_000.0, -5_000.0, 0.0])
    binary = fmt.endswith("binary")
    if r < 0.35:
        if fmt.startswith("pcd"):
            data = pcd_bytes(p, binary, extra=rng.random() < 0.5, comment=rng.random() < 0.5)
        else:
            data = ply_bytes(p, None, binary, rng)
        kind = f"valid:{fmt}" + (":10km_from_origin" if far else "")
        return Case(
            POINTS,
            kind,
            "valid",
            data=data,
            suffix=suffix,
            expect={"points": len(p), "box": [p.min(0).tolist(), p.max(0).tolist()]},
        )
    if r < 0.45:
        return fs_case(POINTS, rng, suffix)
    kind = _pick(
        rng,
        (
            "nan",
            "inf",
            "1e39",
            "million_m",
            "count_more",
            "count_less",
            "no_z",
            "truncated",
            "nul_byte",
            "compressed",
        ),
    )
    label, count, fields = kind, None, "x y z"
    if kind in ("nan", "inf", "1e39"):
        p = p.copy()
        p[int(rng.integers(len(p))), int(rng.integers(3))] = {
            "nan": math.nan,
            "inf": math.inf,
            "1e39": 1e39,
        }[kind]
        label = f"a point coordinate = {kind} (NaN points need drop_nan=True)"
    elif kind == "million_m":
        p = p + 1e6
        label = "every point 1e6 m from the origin (beyond 100 km)"
    elif kind in ("count_more", "count_less"):
        count = len(p) + (3 if kind == "count_more" else -1)
        label = f"the header says {count} points, the data holds {len(p)}"
    elif kind == "no_z":
        fields = "x y w"
        label = "no z field"
    if fmt.startswith("pcd"):
        data = pcd_bytes(p, binary, points=count, fields=fields)
    else:
        data = ply_bytes(p, None, binary, None, counts=None if count is None else (count, 0))
        if kind == "no_z":
            data = data.replace(b"property double z", b"property double w").replace(
                b"property float z", b"property float w"
            )
    if kind == "truncated":
        data, label = truncate(data, fmt, rng), "the file cut short"
        if len(p) == 1 and not binary:  # one row: no row before the last to cut at
            data = data + b"1 2\n"
            label = "a row of 2 numbers after the declared points"
    elif kind == "nul_byte":
        data = data[:15] + b"\x00" + data[15:]
        label = "a NUL byte in the header"
    elif kind == "compressed":
        if fmt.startswith("pcd"):
            data = re.sub(rb"DATA \w+", b"DATA binary_compressed", data, count=1)
        else:
            data = re.sub(rb"format \w+", b"format binary_lzf", data, count=1)
        label = "an unsupported encoding (PCD binary_compressed / PLY binary_lzf)"
    return Case(POINTS, f"points:{kind}:{fmt}", label, data=data, suffix=suffix)


# ---- splat PLY: volary.sensors.splat.load_ply ----------------------------------------------------
SPLAT = "splat: sensors.splat.load_ply"
_SPLAT_PROPS = [
    "x",
    "y",
    "z",
    "f_dc_0",
    "f_dc_1",
    "f_dc_2",
    "opacity",
    "scale_0",
    "scale_1",
    "scale_2",
    "rot_0",
    "rot_1",
    "rot_2",
    "rot_3",
]


def splat_bytes(
    rng: np.random.Generator,
    g: int,
    offset: float = 0.0,
    comments: bool = False,
    props: list[str] | None = None,
    count: int | None = None,
    edit: Callable[[np.ndarray], None] | None = None,
    ascii_: bool = False,
) -> bytes:
    props = props or _SPLAT_PROPS
    a = np.zeros((g, len(_SPLAT_PROPS)), dtype=np.float64)
    a[:, :3] = rng.uniform(-20, 20, (g, 3)) + np.array([offset, 0.0, 0.0])
    a[:, 3:6] = rng.normal(0, 0.5, (g, 3))
    a[:, 6] = rng.normal(0, 1, g)
    a[:, 7:10] = rng.uniform(-4, -1, (g, 3))
    q = rng.normal(size=(g, 4))
    a[:, 10:14] = q / np.linalg.norm(q, axis=1, keepdims=True)
    if edit is not None:
        edit(a)
    cols = {n: a[:, k] for k, n in enumerate(_SPLAT_PROPS)}
    a = np.stack([cols.get(n, np.zeros(g)) for n in props], axis=1)
    fmt = "ascii" if ascii_ else "binary_little_endian"
    head = _ply_header(
        fmt,
        [("vertex", g if count is None else count, [f"property float {p}" for p in props])],
        rng if comments else None,
    )
    body = (
        "".join(" ".join(f"{x:.9g}" for x in row) + "\n" for row in a.astype(float)).encode()
        if ascii_
        else a.astype("<f4").tobytes()
    )
    return ("\n".join(head) + "\n").encode() + body


def splat_cases(rng: np.random.Generator) -> Case:
    r = rng.random()
    g = int(rng.integers(1, 40))
    if r < 0.35:
        far = rng.random() < 0.2
        asc = rng.random() < 0.3
        data = splat_bytes(
            rng, g, 10_000.0 if far else 0.0, comments=rng.random() < 0.7, ascii_=asc
        )
        kind = "valid:splat" + (":ascii" if asc else "") + (":10km_from_origin" if far else "")
        return Case(SPLAT, kind, "valid", data=data, suffix=".ply", expect={"splats": g})
    if r < 0.45:
        return fs_case(SPLAT, rng, ".ply")
    kind = _pick(
        rng,
        (
            "nan",
            "inf_scale",
            "zero_quaternion",
            "missing_rot_3",
            "count_more",
            "count_less",
            "million_m",
            "truncated",
            "five_f_rest",
        ),
    )
    asc = rng.random() < 0.3
    i = int(rng.integers(g))
    if kind == "nan":
        col = int(rng.integers(14))

        def edit(a: np.ndarray) -> None:
            a[i, col] = np.nan

        data, label = splat_bytes(rng, g, edit=edit, ascii_=asc), f"{_SPLAT_PROPS[col]} = NaN"
    elif kind == "inf_scale":

        def edit(a: np.ndarray) -> None:
            a[i, 7] = np.inf

        data, label = splat_bytes(rng, g, edit=edit, ascii_=asc), "scale_0 = inf"
    elif kind == "zero_quaternion":

        def edit(a: np.ndarray) -> None:
            a[i, 10:14] = 0.0

        data, label = splat_bytes(rng, g, edit=edit, ascii_=asc), "a zero rotation quaternion"
    elif kind == "missing_rot_3":
        data = splat_bytes(rng, g, props=_SPLAT_PROPS[:-1], ascii_=asc)
        label = "no rot_3 property"
    elif kind in ("count_more", "count_less"):
        n = g + (5 if kind == "count_more" else -1)
        data, label = splat_bytes(rng, g, count=n, ascii_=asc), f"header says {n}, data {g}"
    elif kind == "million_m":
        data = splat_bytes(rng, g, 1e6, ascii_=asc)
        label = "Gaussians 1e6 m from the origin (beyond 100 km)"
    elif kind == "truncated":
        data = splat_bytes(rng, g + 1, ascii_=asc)
        data = truncate(data, "ply_ascii" if asc else "ply_binary", rng)
        label = "the file cut short"
    else:
        props = [*_SPLAT_PROPS[:6], *[f"f_rest_{k}" for k in range(5)], *_SPLAT_PROPS[6:]]
        data, label = splat_bytes(rng, g, props=props, ascii_=asc), "5 f_rest_* properties"
    return Case(SPLAT, f"splat:{kind}", label, data=data, suffix=".ply")


# ---- run database: volary.studies.flyingtrust.db.load_results ------------------------------
RUNDB = "rundb: bench.nav.db.load_results"


_DB_CACHE: dict[int, bytes] = {}


def rundb_bytes(rng: np.random.Generator, rows: int, sql: list[str] | None = None) -> bytes:
    """A run database made by volary's runner for a 3-platform, 3-trial suite, with ``rows``
    finished trials written by :meth:`RunDB.write_unit` (their values drawn from seed ``rows``;
    made once per ``rows``: SQLite's synchronous writes are slow), then ``sql`` applied."""
    if rows not in _DB_CACHE:
        _DB_CACHE[rows] = _made_rundb(np.random.default_rng(rows), rows)
    if not sql:
        return _DB_CACHE[rows]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.sqlite"
        path.write_bytes(_DB_CACHE[rows])
        conn = sqlite3.connect(path)
        for s in sql:
            conn.execute(s)
        conn.commit()
        conn.close()
        return path.read_bytes()


def _made_rundb(rng: np.random.Generator, rows: int) -> bytes:
    from volary.studies.flyingtrust.db import RunDB
    from volary.studies.flyingtrust.protocol import Suite
    from volary.studies.flyingtrust.run import create_run
    from volary.studies.flyingtrust.schema import CAUSES, TrialResult

    plats = ("0.60kg-EMAX", "1.00kg-SunnySky", "1.20kg-JFRC")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.sqlite"
        create_run(Suite("mine", plats, ("forest",), (0,), 3), ["straight"], path, seed=0)
        out = []
        for k in range(rows):
            cause = _pick(rng, CAUSES)
            t, length = float(rng.uniform(1, 90)), float(rng.uniform(1, 300))
            hit = int(cause == "collision")
            out.append(
                TrialResult(
                    "straight",
                    plats[k % 3],
                    "forest",
                    0,
                    k // 3,
                    0,
                    cause == "success",
                    cause,
                    t if cause == "success" else math.nan,
                    t,
                    length,
                    length / t,
                    length / t * 1.5,
                    hit,
                    hit / length,
                    float(rng.uniform(0, 3)),
                    float(rng.uniform(0, 100)),
                    float(rng.uniform(0, 50)),
                    t,
                    float(rng.uniform(0.1, 9)),
                    "",
                    "",
                )
            )
        with RunDB.open(path) as db:
            for k in range(3):
                db.write_unit(k, [x for x in out if x.trial == k])
        conn = sqlite3.connect(path)  # the same bytes for the same seed: fixed timestamps
        conn.execute(
            "UPDATE meta SET value = '\"2025-01-01T00:00:00Z\"' "
            "WHERE name IN ('created', 'updated')"
        )
        conn.commit()
        conn.close()
        return path.read_bytes()


def rundb_cases(rng: np.random.Generator) -> Case:
    r = rng.random()
    rows = int(rng.integers(1, 10))
    if r < 0.25:
        return Case(
            RUNDB,
            "valid:rundb",
            "valid",
            data=rundb_bytes(rng, rows),
            suffix=".sqlite",
            expect={"rows": rows},
        )
    if r < 0.35:
        return fs_case(RUNDB, rng, ".sqlite")
    kind = _pick(
        rng,
        (
            "missing_column",
            "text_in_real",
            "text_in_int",
            "success_7",
            "unknown_cause",
            "negative_count",
            "missing_meta_row",
            "meta_not_json",
            "meta_wrong_type",
            "no_trials_table",
            "truncated",
            "not_sqlite",
        ),
    )
    col = _pick(rng, ("time_to_goal", "flight_time", "path_length", "max_speed"))
    sqls = {
        "missing_column": ([f'ALTER TABLE trials DROP COLUMN "{col}"'], f"column {col} missing"),
        "text_in_real": ([f"UPDATE trials SET \"{col}\" = 'fast'"], f"{col} holds text 'fast'"),
        "text_in_int": (["UPDATE trials SET collisions = 'two'"], "collisions holds text 'two'"),
        "success_7": (["UPDATE trials SET success = 7"], "success = 7 (a 0/1 flag)"),
        "unknown_cause": (["UPDATE trials SET cause = 'exploded'"], "cause = 'exploded'"),
        "negative_count": (["UPDATE trials SET collisions = -3"], "collisions = -3"),
        "missing_meta_row": (
            ["DELETE FROM meta WHERE name = 'schema_version'"],
            "meta.schema_version missing",
        ),
        "meta_not_json": (
            ["UPDATE meta SET value = '{oops' WHERE name = 'seed'"],
            "meta.seed is not JSON",
        ),
        "meta_wrong_type": (
            ["UPDATE meta SET value = '\"zero\"' WHERE name = 'seed'"],
            "meta.seed is a string",
        ),
        "no_trials_table": (["DROP TABLE trials"], "no trials table"),
    }
    if kind in sqls:
        sql, label = sqls[kind]
        data = rundb_bytes(rng, rows, sql)
    elif kind == "truncated":
        data = rundb_bytes(rng, rows)
        data, label = truncate(data, "sqlite", rng), "the file cut short"
    else:
        data = _pick(
            rng,
            (
                b"SQLite format 3\x00" + bytes(200),
                b"algo,platform\nx,y\n",
                bytes(rng.integers(0, 256, 4096, dtype=np.uint8)),
            ),
        )
        label = "not an SQLite database"
    return Case(RUNDB, f"rundb:{kind}", label, data=data, suffix=".sqlite")


# ---- checkpoints: volary.studies.rl.ppo.load_policy ---------------------------------------------
CHECKPOINT = "checkpoint: learning.rl.ppo.load_policy"


def _torch_bytes(obj: Any) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def ppo_fields(rng: np.random.Generator) -> tuple[dict[str, Any], dict[str, Any]]:
    import torch

    from volary.studies.rl.ppo import CHECKPOINT_KIND, ActorCritic, PPOConfig

    obs, act = int(rng.integers(1, 20)), int(rng.integers(1, 6))
    h = int(rng.integers(2, 33))
    cfg = PPOConfig(hidden=(h, h), seed=int(rng.integers(100)))
    torch.manual_seed(int(rng.integers(2**31)))
    pol = ActorCritic(obs, act, cfg)
    state = {k: v.detach().clone() for k, v in pol.state_dict().items()}
    doc = {
        "format": CHECKPOINT_KIND.tag,
        "version": CHECKPOINT_KIND.version,
        "config": cfg.to_dict(),
        "obs_dim": obs,
        "act_dim": act,
        "state_dict": state,
        "meta": {"note": "mine"},
    }
    return doc, {"obs_dim": obs, "act_dim": act}


def checkpoint_cases(rng: np.random.Generator) -> Case:
    import argparse as _ap

    r = rng.random()
    doc, expect = ppo_fields(rng)
    if r < 0.25:
        return Case(
            CHECKPOINT, "valid:ppo", "valid", data=_torch_bytes(doc), suffix=".pt", expect=expect
        )
    if r < 0.35:
        return fs_case(CHECKPOINT, rng, ".pt")
    kind = _pick(
        rng,
        (
            "pickled_object",
            "truncated",
            "random_bytes",
            "wrong_tag",
            "future_version",
            "missing_state",
            "wrong_shapes",
            "dim_as_text",
            "negative_dim",
            "huge_dim",
            "config_nan",
            "config_unknown_key",
            "nan_weights",
            "not_a_dict",
        ),
    )
    label = kind
    if kind == "pickled_object":
        doc["meta"] = _ap.Namespace(x=1)
        label = "holds a pickled Python object (argparse.Namespace)"
    elif kind == "wrong_tag":
        doc["format"] = "volary.sousvide.net"
        label = "format tag of another kind"
    elif kind == "future_version":
        doc["version"] = 99
        label = "version 99"
    elif kind == "missing_state":
        del doc["state_dict"]
        label = "no state_dict"
    elif kind == "wrong_shapes":
        doc["obs_dim"] = doc["obs_dim"] + 3
        label = "obs_dim disagrees with the weights' shapes"
    elif kind == "dim_as_text":
        doc["act_dim"] = str(doc["act_dim"])
        label = "act_dim stored as text"
    elif kind == "negative_dim":
        doc["obs_dim"] = -4
        label = "obs_dim = -4"
    elif kind == "huge_dim":
        doc["obs_dim"] = 10**12
        label = "obs_dim = 1e12 (the network would need terabytes)"
    elif kind == "config_nan":
        doc["config"]["lr"] = math.nan
        label = "config.lr = NaN"
    elif kind == "config_unknown_key":
        doc["config"]["learning_rate"] = 1e-3
        label = "config has an unknown key"
    elif kind == "nan_weights":
        k = _pick(rng, sorted(k for k in doc["state_dict"] if k.startswith("actor")))
        doc["state_dict"][k] = doc["state_dict"][k].fill_(math.nan)
        label = f"state_dict.{k} is NaN"
    elif kind == "not_a_dict":
        doc = [1, 2, 3]  # type: ignore[assignment]
        label = "a list, not a checkpoint dict"
    data = _torch_bytes(doc)
    if kind == "truncated":
        data, label = truncate(data, "pt", rng), "the file cut short"
    elif kind == "random_bytes":
        data, label = bytes(rng.integers(0, 256, 2048, dtype=np.uint8)), "random bytes"
    return Case(CHECKPOINT, f"checkpoint:{kind}", label, data=data, suffix=".pt")


# ---- learning datasets (HDF5): boundary.dataset.load_dataset, sousvide.dataset.read -------------
BPDATA = "bp dataset: studies.boundary.dataset.load_dataset"
SVDATA = "sousvide dataset: studies.sousvide.dataset.read"
HUGE_ROWS = 2**40  # declared rows of a dataset nobody wrote: terabytes if read


def h5_bytes(attrs: dict[str, Any], arrays: dict[str, Any], edit: Callable | None = None) -> bytes:
    """An HDF5 file (h5py, in memory): root ``attrs``, ``arrays`` (an ndarray, or a (shape,
    dtype) pair for a chunked dataset with no data written), then ``edit(file)``."""
    import h5py

    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        for k, v in attrs.items():
            f.attrs[k] = v
        for k, v in arrays.items():
            if isinstance(v, tuple):
                shape, dtype = v
                f.create_dataset(k, shape=shape, dtype=dtype, chunks=(1, *shape[1:]))
            else:
                f.create_dataset(k, data=v)
        if edit is not None:
            edit(f)
    return buf.getvalue()


def bp_parts(rng: np.random.Generator) -> tuple[dict, dict[str, np.ndarray], np.ndarray]:
    """A BoundaryPredictor dataset's attributes, arrays and done mask (K rows of Table II)."""
    from volary.studies.boundary.dataset import FORMAT, _config_doc
    from volary.studies.boundary.grid import TABLE_II, grid_inputs
    from volary.studies.boundary.sampling import SamplingConfig

    k = int(rng.integers(1, 12))
    idx = np.sort(rng.choice(TABLE_II.size, k, replace=False)).astype(np.int64)
    labelled = rng.random(k) < 0.8
    speed = np.where(labelled, rng.choice([0.5, 1.0, 1.5, 2.0], k), np.nan)
    t0 = np.where(labelled, rng.uniform(0.2, 2.0, k).round(3), np.nan)
    cost = rng.uniform(0.2, 5, (k, 70)).astype(np.float32)
    cost[rng.random((k, 70)) < 0.3] = np.inf
    arrays = {
        "grid_index": idx,
        "inputs": grid_inputs(idx).numpy(),
        "speed": speed,
        "t0": t0,
        "cost_min": np.where(labelled, t0 + 0.1, np.inf),
        "cost": cost,
        "crashed": rng.integers(-1, 3, (k, 70)).astype(np.int8),
        "skipped": rng.integers(-1, 3, (k, 70)).astype(np.int8),
        "tracking": rng.uniform(0, 1, (k, 70)).astype(np.float32),
        "done": np.zeros(k, bool),
    }
    done = rng.random(k) < 0.7
    done[int(rng.integers(k))] = True
    arrays["done"] = done
    doc = _config_doc(SamplingConfig(), int(rng.integers(100)), float(k) / TABLE_II.size, k)
    return {"config": json.dumps(doc), "format": FORMAT}, arrays, done


def bp_cases(rng: np.random.Generator) -> Case:
    r = rng.random()
    attrs, arrays, done = bp_parts(rng)
    if r < 0.3:
        expect = {
            "grid_index": arrays["grid_index"][done].tolist(),
            "t0": arrays["t0"][done].tolist(),
        }
        return Case(
            BPDATA,
            "valid:bp_dataset",
            "valid",
            h5_bytes(attrs, arrays),
            suffix=".h5",
            expect=expect,
        )
    if r < 0.4:
        return fs_case(BPDATA, rng, ".h5")
    kind = _pick(
        rng,
        (
            "not_hdf5",
            "truncated",
            "format",
            "config_not_json",
            "config_type",
            "config_unknown_key",
            "missing_array",
            "group",
            "external_link",
            "dtype",
            "shape",
            "lengths_disagree",
            "huge_shape",
            "nan_inputs",
            "grid_index",
            "attr_type",
        ),
    )
    edit, label = None, kind
    doc = json.loads(attrs["config"])
    name = _pick(rng, ("grid_index", "inputs", "speed", "t0", "cost_min", "cost", "done"))
    k = len(done)
    if kind == "not_hdf5":
        data = _pick(
            rng, (b"[config]\nformat = 1\n", bytes(rng.integers(0, 256, 3000, dtype=np.uint8)))
        )
        return Case(BPDATA, "h5:not_hdf5", "not an HDF5 file", data, suffix=".h5")
    if kind == "truncated":
        data = h5_bytes(attrs, arrays)
        return Case(
            BPDATA,
            "h5:truncated",
            "the file cut short",
            data[: int(rng.integers(64, len(data) - 64))],
            suffix=".h5",
        )
    if kind == "format":
        attrs["format"], label = "volary.sousvide.dataset/1", "format of another dataset"
    elif kind == "config_not_json":
        attrs["config"], label = "{grid: [1, 2", "attribute config is not JSON"
    elif kind == "config_type":
        key = _pick(rng, ("n_inputs", "seed", "fraction"))
        doc[key] = _pick(rng, (str(doc[key]), None, [doc[key]], -3, math.nan))
        attrs["config"], label = json.dumps(doc), f"config.{key} = {doc[key]!r}"
    elif kind == "config_unknown_key":
        doc["colour"] = "red"
        attrs["config"], label = json.dumps(doc), "config has an unknown key"
    elif kind == "attr_type":
        attrs["config"] = _pick(rng, (np.int64(5), np.arange(3)))
        label = "attribute config is not text"
    elif kind == "missing_array":
        del arrays[name]
        label = f"no {name} array"
    elif kind == "group":
        del arrays[name]

        def edit(f: Any) -> None:
            f.create_group(name)

        label = f"{name} is a group"
    elif kind == "external_link":
        del arrays[name]

        def edit(f: Any) -> None:
            import h5py

            f[name] = h5py.ExternalLink("/dev/zero", "/x")

        label = f"{name} is a link to another file"
    elif kind == "dtype":
        arrays[name] = arrays[name].astype(
            _pick(rng, ("S8", "complex64")) if name != "done" else np.int8
        )
        label = f"{name} of dtype {arrays[name].dtype}"
    elif kind == "shape":
        arrays[name] = np.stack([arrays[name]] * 2, axis=-1)
        label = f"{name} with an extra axis"
    elif kind == "lengths_disagree":
        arrays[name] = arrays[name][: k - 1] if k > 1 else np.concatenate([arrays[name]] * 2)
        label = f"{name} has {len(arrays[name])} rows, the others {k}"
    elif kind == "huge_shape":
        doc["n_inputs"] = HUGE_ROWS
        attrs["config"] = json.dumps(doc)
        arrays = {n: ((HUGE_ROWS, *a.shape[1:]), a.dtype) for n, a in arrays.items()}
        label = f"every array declares {HUGE_ROWS} rows (none written)"
    elif kind == "nan_inputs":
        arrays["inputs"][int(np.flatnonzero(done)[0]), int(rng.integers(8))] = _pick(
            rng, (math.nan, math.inf)
        )
        label = "a finished row's input is NaN or inf"
    else:
        arrays["grid_index"][int(np.flatnonzero(done)[0])] = _pick(rng, (-1, 129600, 2**40))
        label = "a grid index outside Table II"
    return Case(BPDATA, f"h5:{kind}", label, h5_bytes(attrs, arrays, edit), suffix=".h5")


def sv_parts(rng: np.random.Generator) -> tuple[dict, dict[str, np.ndarray]]:
    """A SOUS VIDE dataset's attributes and arrays (``dataset.create``'s layout)."""
    from volary.studies.sousvide.dataset import FORMAT, ROW_FIELDS, _row_shape

    units, steps = int(rng.integers(1, 4)), int(rng.integers(1, 5))
    h, w, win = int(rng.integers(2, 6)), int(rng.integers(2, 6)), int(rng.integers(1, 4))
    rows = units * steps
    attrs = {
        "format": FORMAT,
        "config": json.dumps({"seed": int(rng.integers(9)), "note": "mine"}),
        "units": units,
        "steps": steps,
        "window": win,
        "height": h,
        "width": w,
    }
    arrays = {}
    for name, (_, dtype) in ROW_FIELDS.items():
        shape = (rows, *_row_shape(name, h, w, win))
        if name == "images":
            arrays[name] = rng.integers(0, 256, shape, dtype=np.uint8)
        elif name == "valid":
            arrays[name] = rng.random(rows) < 0.8
        elif name == "unit":
            arrays[name] = np.repeat(np.arange(units), steps).astype(np.int64)
        elif name == "step":
            arrays[name] = np.tile(np.arange(steps), units).astype(np.int64)
        else:
            arrays[name] = rng.normal(size=shape).astype(dtype)
    done = rng.random(units) < 0.7
    done[int(rng.integers(units))] = True
    arrays["done"] = done
    return attrs, arrays


def sv_cases(rng: np.random.Generator) -> Case:
    r = rng.random()
    attrs, arrays = sv_parts(rng)
    rows = np.repeat(arrays["done"], attrs["steps"]) & arrays["valid"]
    if not rows.any():  # at least one finished, valid row to expect or to spoil
        arrays["valid"][int(np.flatnonzero(np.repeat(arrays["done"], attrs["steps"]))[0])] = True
        rows = np.repeat(arrays["done"], attrs["steps"]) & arrays["valid"]
    if r < 0.3:
        expect = {"rows": int(rows.sum()), "state": arrays["state"][rows].tolist()}
        return Case(
            SVDATA,
            "valid:sv_dataset",
            "valid",
            h5_bytes(attrs, arrays),
            suffix=".h5",
            expect=expect,
        )
    if r < 0.4:
        return fs_case(SVDATA, rng, ".h5")
    kind = _pick(
        rng,
        (
            "not_hdf5",
            "attr_missing",
            "attr_type",
            "config_not_json",
            "dtype",
            "lengths_disagree",
            "done_length",
            "huge_shape",
            "nan",
            "unit_index",
            "external_link",
        ),
    )
    name = _pick(rng, ("images", "state", "time", "action", "history", "unit", "valid"))
    edit, label = None, kind
    if kind == "not_hdf5":
        return Case(
            SVDATA,
            "h5:not_hdf5",
            "not an HDF5 file",
            bytes(rng.integers(0, 256, 2000, dtype=np.uint8)),
            suffix=".h5",
        )
    if kind == "attr_missing":
        key = _pick(rng, ("steps", "units", "format", "config", "window"))
        del attrs[key]
        label = f"attribute {key} missing"
    elif kind == "attr_type":
        key = _pick(rng, ("steps", "units", "height"))
        attrs[key] = _pick(rng, (str(attrs[key]), float(attrs[key]) + 0.5, 0, -2, True))
        label = f"attribute {key} = {attrs[key]!r}"
    elif kind == "config_not_json":
        attrs["config"] = _pick(rng, ("{oops", "[1, 2]"))
        label = f"attribute config = {attrs['config']!r} (not a JSON object)"
    elif kind == "dtype":
        arrays[name] = arrays[name].astype(
            np.float32 if name in ("images", "unit", "valid") else "S4"
        )
        label = f"{name} of dtype {arrays[name].dtype}"
    elif kind == "lengths_disagree":
        arrays[name] = (
            arrays[name][:-1] if len(arrays[name]) > 1 else np.concatenate([arrays[name]] * 2)
        )
        label = f"{name} has {len(arrays[name])} rows, units x steps = {len(rows)}"
    elif kind == "done_length":
        arrays["done"] = np.ones(attrs["units"] + 2, bool)
        label = "done has more entries than units"
    elif kind == "huge_shape":
        attrs["units"], attrs["steps"] = 2**30, 2**10
        arrays = {
            n: ((HUGE_ROWS if n != "done" else 2**30, *a.shape[1:]), a.dtype)
            for n, a in arrays.items()
        }
        label = "units x steps = 2**40 rows declared (none written)"
    elif kind == "nan":
        key = _pick(rng, ("state", "action", "theta", "time"))
        at = int(np.flatnonzero(rows)[0])
        arrays[key][at] = _pick(rng, (np.nan, np.inf))
        label = f"a finished row's {key} is NaN or inf"
    elif kind == "unit_index":
        at = int(np.flatnonzero(rows)[0])
        arrays["unit"][at] = _pick(rng, (-1, 7, 2**40))
        label = "a row's unit index is not its unit"
    else:
        del arrays[name]

        def edit(f: Any) -> None:
            import h5py

            f[name] = h5py.ExternalLink("/dev/zero", "/x")

        label = f"{name} is a link to another file"
    return Case(SVDATA, f"h5:{kind}", label, h5_bytes(attrs, arrays, edit), suffix=".h5")


# ---- recordings: view.recording.load_recording (.npz) -------------------------------------------
RECORDING = "recording: view.recording.load_recording"


def npz_bytes(arrays: dict[str, Any], raw: dict[str, bytes] | None = None) -> bytes:
    """An ``.npz`` (zip of ``.npy``) with fixed timestamps: the same arrays, the same bytes;
    ``raw`` adds members as given (a forged ``.npy`` header)."""
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, a in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asanyarray(a), allow_pickle=True)
            z.writestr(zipfile.ZipInfo(f"{name}.npy", (2025, 1, 1, 0, 0, 0)), member.getvalue())
        for name, data in (raw or {}).items():
            z.writestr(zipfile.ZipInfo(name, (2025, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


def recording_parts(rng: np.random.Generator, offset: float = 0.0) -> tuple[dict, dict]:
    """A recording's header and arrays, as ``Recording.save`` writes them."""
    v, t = _mesh(rng, offset)
    head: dict[str, Any] = {
        "version": 1,
        "title": f"my flight {int(rng.integers(100))}",
        "bounds": [[offset - 60, -60.0, 0.0], [offset + 60, 60.0, 20.0]],
        "start": [offset, 0.0, 1.0],
        "goal": _pick(rng, (None, [offset + 10, 5.0, 2.0])),
        "scene_ref": "",
        "tracks": [],
        "frames": [],
    }
    arrays: dict[str, Any] = {
        "vertices": v,
        "triangles": t,
        "gate_vertices": np.zeros((0, 3)),
        "gate_triangles": np.zeros((0, 3), np.int64),
    }
    for i in range(int(rng.integers(1, 4))):
        k = int(rng.integers(1, 30))
        head["tracks"].append({"name": f"v{i}", "radius": 0.15, "note": _pick(rng, ("", "ok"))})
        arrays[f"track{i}_t"] = np.cumsum(rng.uniform(0, 0.2, k))
        arrays[f"track{i}_pos"] = rng.uniform(-20, 20, (k, 3)) + [offset, 0, 0]
        if rng.random() < 0.5:
            q = rng.normal(size=(k, 4))
            arrays[f"track{i}_quat"] = q / np.linalg.norm(q, axis=1, keepdims=True)
    for i in range(int(rng.integers(0, 3))):
        head["frames"].append({"t": float(i) * 0.1, "name": "cam"})
        if rng.random() < 0.5:
            arrays[f"frame{i}_image"] = rng.integers(0, 256, (4, 6, 3), dtype=np.uint8)
        else:
            arrays[f"frame{i}_points"] = rng.uniform(-5, 5, (7, 3)) + [offset, 0, 0]
    return head, arrays


def _npz(head: Any, arrays: dict[str, Any]) -> bytes:
    text = head if isinstance(head, bytes) else json.dumps(head).encode()
    return npz_bytes({**arrays, "header": np.frombuffer(text, np.uint8)})


def recording_cases(rng: np.random.Generator) -> Case:
    r = rng.random()
    far = rng.random() < 0.2
    head, arrays = recording_parts(rng, 10_000.0 if far else 0.0)
    if r < 0.3:
        expect = {
            "title": head["title"],
            "pos": [arrays[f"track{i}_pos"].tolist() for i in range(len(head["tracks"]))],
            "vertices": arrays["vertices"].tolist(),
        }
        kind = "valid:recording" + (":10km_from_origin" if far else "")
        return Case(RECORDING, kind, "valid", _npz(head, arrays), suffix=".npz", expect=expect)
    if r < 0.4:
        return fs_case(RECORDING, rng, ".npz")
    kind = _pick(
        rng,
        (
            "not_zip",
            "truncated",
            "header_not_json",
            "header_deep",
            "header_missing",
            "header_type",
            "header_unknown_key",
            "version",
            "no_header",
            "pickled",
            "huge_shape",
            "nan",
            "million_m",
            "triangle_index",
            "t_decreasing",
            "pos_shape",
            "unknown_array",
            "image_dtype",
            "scene_ref",
        ),
    )
    label = kind
    if kind == "not_zip":
        return Case(
            RECORDING,
            "npz:not_zip",
            "not a zip",
            b"PK\x03\x04" + bytes(rng.integers(0, 256, 500, dtype=np.uint8)),
            suffix=".npz",
        )
    if kind == "truncated":
        data = _npz(head, arrays)
        return Case(
            RECORDING,
            "npz:truncated",
            "the file cut short",
            data[: int(rng.integers(30, len(data) - 30))],
            suffix=".npz",
        )
    if kind == "header_not_json":
        head, label = b"{'title': 'mine'", "header is not JSON"
    elif kind == "header_deep":
        head, label = b"[" * 100_000 + b"]" * 100_000, "header nested 100000 deep"
    elif kind == "header_missing":
        key = _pick(rng, ("tracks", "title", "bounds", "version"))
        del head[key]
        label = f"header.{key} missing"
    elif kind == "header_type":
        key, val = _pick(rng, (("radius", "big"), ("radius", -1.0), ("name", 3), ("note", None)))
        head["tracks"][0][key] = val
        label = f"header.tracks.0.{key} = {val!r}"
    elif kind == "header_unknown_key":
        head["colour"] = "red"
        label = "header has an unknown key"
    elif kind == "version":
        head["version"] = _pick(rng, (2, "1", None))
        label = f"header.version = {head['version']!r}"
    elif kind == "no_header":
        return Case(RECORDING, "npz:no_header", "no header array", npz_bytes(arrays), suffix=".npz")
    elif kind == "pickled":
        arrays["track0_t"] = np.array([{"t": 1}], dtype=object)
        label = "track0_t is a pickled object array"
    elif kind == "huge_shape":
        hdr = io.BytesIO()
        np.lib.format.write_array_header_1_0(
            hdr, {"descr": "<f8", "fortran_order": False, "shape": (HUGE_ROWS, 3)}
        )
        text = json.dumps(head).encode()
        data = npz_bytes(
            {
                **{k: a for k, a in arrays.items() if k != "track0_pos"},
                "header": np.frombuffer(text, np.uint8),
            },
            raw={"track0_pos.npy": hdr.getvalue() + bytes(64)},
        )
        return Case(
            RECORDING,
            "npz:huge_shape",
            f"track0_pos declares {HUGE_ROWS} x 3 (24 TiB)",
            data,
            suffix=".npz",
        )
    elif kind in ("nan", "million_m"):
        x = _pick(rng, (math.nan, math.inf)) if kind == "nan" else 1e6
        key = _pick(
            rng,
            ("track0_pos", "vertices", "track0_t") if kind == "nan" else ("track0_pos", "vertices"),
        )
        arrays[key] = arrays[key].copy()
        arrays[key].reshape(-1)[-1] = x
        label = f"{key} holds {x}"
    elif kind == "triangle_index":
        arrays["triangles"] = np.concatenate(
            [arrays["triangles"], [[0, 1, len(arrays["vertices"]) + 2]]]
        )
        label = "a triangle names a vertex past the end"
    elif kind == "t_decreasing":
        arrays["track0_t"] = np.concatenate([arrays["track0_t"], [-1.0]])
        arrays["track0_pos"] = np.concatenate([arrays["track0_pos"], [[0.0, 0.0, 1.0]]])
        arrays.pop("track0_quat", None)
        label = "track0_t goes back in time"
    elif kind == "pos_shape":
        arrays["track0_pos"] = arrays["track0_pos"][:, :2]
        label = "track0_pos has 2 columns"
    elif kind == "unknown_array":
        arrays["track9_pos"] = np.zeros((2, 3))
        label = "track9_pos without a header entry"
    elif kind == "image_dtype":
        head["frames"].append({"t": 1.0, "name": "cam"})
        arrays[f"frame{len(head['frames']) - 1}_image"] = rng.uniform(0, 1, (4, 4, 3))
        label = "a frame image of floats"
    else:
        head["scene_ref"] = _pick(rng, ("jungle:1", "forest", "forest:99999999999999", "../x:1"))
        label = f"scene_ref = {head['scene_ref']!r}"
    return Case(RECORDING, f"npz:{kind}", label, _npz(head, arrays), suffix=".npz")


# ---- served-run bags: serve.recording.read_bag (a rosbag2 directory, MCAP) ----------------------
BAG = "bag: serve.recording.read_bag"
_BAG_CACHE: dict[str, Any] = {}


def bag_tree(
    config: str | None, ticks: int, control_hz: float, extra: Callable | None = None
) -> dict[str, bytes]:
    """A rosbag2 directory's files (metadata.yaml, one .mcap) written by rosbags: the config
    message (None: none) and ``ticks`` ticks of /clock and a vehicle setpoint."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = _BAG_CACHE.setdefault("ts", None) or get_typestore(Stores.ROS2_HUMBLE)
    _BAG_CACHE["ts"] = ts
    m = ts.types
    dt = round(1e9 / control_hz)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bag"
        w = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
        w.open()
        if config is not None:
            c = w.add_connection("/volary/config", "std_msgs/msg/String", typestore=ts)
            w.write(
                c, 0, ts.serialize_cdr(m["std_msgs/msg/String"](data=config), "std_msgs/msg/String")
            )
        sp = w.add_connection("/vehicle0/setpoint", "std_msgs/msg/Float64MultiArray", typestore=ts)
        layout = m["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
        for k in range(ticks):
            msg = m["std_msgs/msg/Float64MultiArray"](
                layout=layout, data=np.array([0.5, 0.0, 0.0, float(k)])
            )
            w.write(sp, (k + 1) * dt, ts.serialize_cdr(msg, "std_msgs/msg/Float64MultiArray"))
        if extra is not None:
            extra(w, ts)
        w.close()
        return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def serve_config_doc(rng: np.random.Generator) -> dict[str, Any]:
    import dataclasses

    from volary.serve.world import ServeConfig, SlotSpec

    cfg = ServeConfig(
        slots=(SlotSpec(),) * int(rng.integers(1, 3)),
        scene=_pick(rng, ("forest", None)),
        seed=int(rng.integers(100)),
        control_hz=float(_pick(rng, (30.0, 60.0, 120.0))),  # divisors of physics_hz (960)
    )
    return json.loads(json.dumps(dataclasses.asdict(cfg)))


def bag_cases(rng: np.random.Generator) -> Case:
    r = rng.random()
    doc = serve_config_doc(rng)
    ticks = int(rng.integers(1, 6))
    if r < 0.3:
        tree = bag_tree(json.dumps(doc), ticks, doc["control_hz"])
        return Case(
            BAG,
            "valid:bag",
            "valid",
            tree=tree,
            special="tree",
            suffix="",
            expect={"ticks": ticks, "slots": len(doc["slots"])},
        )
    if r < 0.4:
        kind = _pick(rng, ("fifo", "devzero", "missing", "nulpath", "empty"))
        if kind == "empty":
            return Case(
                BAG, "fs:file", "a plain file, not a bag directory", data=b"", suffix=".mcap"
            )
        return Case(BAG, f"fs:{kind}", FS_LABELS[kind], special=kind, suffix="")
    kind = _pick(
        rng,
        (
            "metadata_fifo",
            "mcap_fifo",
            "metadata_devzero",
            "no_metadata",
            "metadata_garbage",
            "mcap_truncated",
            "mcap_random",
            "no_config",
            "config_not_json",
            "config_type",
            "config_rule",
            "control_hz",
            "config_unknown_key",
            "empty_dir",
        ),
    )
    label = kind
    if kind in (
        "config_not_json",
        "config_type",
        "config_rule",
        "control_hz",
        "config_unknown_key",
    ):
        text = json.dumps(doc)
        hz = doc["control_hz"]
        if kind == "config_not_json":
            text, label = "{slots: []", "/volary/config is not JSON"
        elif kind == "config_type":
            key = _pick(rng, ("seed", "slots", "control_hz", "scene"))
            doc[key] = _pick(rng, ("12", None, 3.5, [1]))
            text, label = json.dumps(doc), f"config.{key} = {doc[key]!r}"
        elif kind == "config_rule":
            doc["slots"][0]["role"] = _pick(rng, ("pilot", ""))
            text, label = json.dumps(doc), f"slots.0.role = {doc['slots'][0]['role']!r}"
        elif kind == "control_hz":
            doc["control_hz"] = _pick(rng, (-60.0, 0.0, 1e308, 1e-300))
            text, label = json.dumps(doc), f"control_hz = {doc['control_hz']}"
        else:
            doc["colour"] = "red"
            text, label = json.dumps(doc), "config has an unknown key"
        tree = bag_tree(text, ticks, hz)
        return Case(BAG, f"bag:{kind}", label, tree=tree, special="tree", suffix="")
    tree = bag_tree(json.dumps(doc) if kind != "no_config" else None, ticks, doc["control_hz"])
    mcap = next(k for k in tree if k.endswith(".mcap"))
    if kind in ("metadata_fifo", "metadata_devzero"):
        tree["metadata.yaml"] = kind.split("_")[1]  # type: ignore[assignment]
        label = f"metadata.yaml is {FS_LABELS[tree['metadata.yaml']]}"  # type: ignore[index]
    elif kind == "mcap_fifo":
        tree[mcap] = "fifo"  # type: ignore[assignment]
        label = f"{mcap} is a FIFO"
    elif kind == "no_metadata":
        del tree["metadata.yaml"]
        label = "no metadata.yaml"
    elif kind == "metadata_garbage":
        tree["metadata.yaml"] = _pick(
            rng, (b"rosbag2_bagfile_information: [", b"\xff\xfe\x00", b"a: 1\n")
        )
        label = "metadata.yaml is not a rosbag2 description"
    elif kind == "mcap_truncated":
        tree[mcap] = tree[mcap][: int(rng.integers(8, len(tree[mcap]) - 8))]
        label = "the .mcap cut short"
    elif kind == "mcap_random":
        tree[mcap] = bytes(rng.integers(0, 256, 3000, dtype=np.uint8))
        label = "the .mcap is random bytes"
    elif kind == "no_config":
        label = "no /volary/config message"
    else:
        tree = {}
        label = "an empty directory"
    return Case(BAG, f"bag:{kind}", label, tree=tree, special="tree", suffix="")


# ---- obstacles of a scene file: worlds.custom.load_obstacles ------------------------------------
OBSTACLES = "obstacles: worlds.custom.load_obstacles"


def obstacles_cases(rng: np.random.Generator) -> Case:
    """The mesh and point-cloud inputs, through ``load_obstacles`` (a point cloud becomes
    merged voxel boxes of 0.2 m): valid clouds span at most 20 m; a cloud spanning 200 m
    needs more voxels than a dense grid may hold (refused, naming the voxel)."""
    if rng.random() < 0.5:
        c = mesh_cases(rng)
        while c.kind.startswith("mesh:no_faces") and c.suffix == ".ply":
            c = mesh_cases(rng)  # a PLY of vertices only is a point cloud here: valid, not this
        return Case(
            OBSTACLES,
            c.kind,
            c.label,
            c.data,
            c.special,
            c.suffix,
            {"triangles": c.expect["triangles"]} if c.valid else {},
        )
    r = rng.random()
    fmt = _pick(rng, ("pcd_ascii", "ply_binary"))
    suffix, binary = "." + fmt.split("_")[0], fmt.endswith("binary")
    if r < 0.35:
        p = (
            rng.uniform(-10, 10, (int(rng.integers(1, 60)), 3)).round(3)
            + rng.uniform(-1e4, 1e4, 3).round()
        )
        data = pcd_bytes(p, binary) if fmt.startswith("pcd") else ply_bytes(p, None, binary, rng)
        return Case(
            OBSTACLES,
            f"valid:{fmt}",
            "valid",
            data,
            suffix=suffix,
            expect={"box": [p.min(0).tolist(), p.max(0).tolist()]},
        )
    if r < 0.5:
        p = rng.uniform(-100, 100, (40, 3))
        data = pcd_bytes(p, binary) if fmt.startswith("pcd") else ply_bytes(p, None, binary)
        return Case(
            OBSTACLES,
            "points:voxel_grid_too_large",
            "a 200 m cloud at 0.2 m voxels (1e9 cells)",
            data,
            suffix=suffix,
        )
    c = points_cases(rng)
    while c.valid:
        c = points_cases(rng)
    return Case(OBSTACLES, c.kind, c.label, c.data, c.special, c.suffix)


# ---- the other checkpoints: dce.load_vae, sousvide.net.load_checkpoint, boundary.model ---------
DCE = "checkpoint: learning.dce.load_vae"
SVNET = "checkpoint: studies.sousvide.net.load_checkpoint"
BPNET = "checkpoint: studies.boundary.model.load_checkpoint"


def net_doc(entry: str, rng: np.random.Generator) -> tuple[dict[str, Any], dict[str, Any], str]:
    """A checkpoint dict as the learner's save function writes it, what it must read back as,
    and the name of its config field."""
    import torch

    torch.manual_seed(int(rng.integers(2**31)))
    if entry == DCE:
        from dataclasses import asdict

        from volary.studies.rl.dce import CHECKPOINT_KIND, DCEConfig, DepthVAE

        cfg = DCEConfig(latent=int(rng.integers(2, 9)), width=int(rng.integers(2, 5)))
        shape = (8 * int(rng.integers(1, 4)), 8 * int(rng.integers(1, 5)))
        net: Any = DepthVAE(shape, cfg)
        fields = {"config": asdict(cfg), "info": {"shape": list(shape), "frames": 10}}
        kind, cfield = CHECKPOINT_KIND, "config"
    elif entry == SVNET:
        from volary.studies.sousvide.net import CHECKPOINT_KIND, ArchConfig, NetConfig, SVNet

        arch = ArchConfig(
            cnn_width=0.25,
            image_features=8,
            feature_hidden=(8,),
            features=8,
            history_hidden=(8, int(rng.integers(2, 8))),
            command_hidden=(8,),
        )
        cfg = NetConfig(window=int(rng.integers(1, 5)), image_height=32, image_width=32, arch=arch)
        net = SVNet(cfg)
        fields, kind, cfield = {"net_config": cfg.to_dict()}, CHECKPOINT_KIND, "net_config"
    else:
        from volary.studies.boundary.model import CHECKPOINT_KIND, BoundaryPredictor

        drop = float(round(rng.uniform(0, 0.5), 2))
        net = BoundaryPredictor(drop)
        fields, kind, cfield = {"dropout": drop}, CHECKPOINT_KIND, "dropout"
    state = {k: v.detach().clone() for k, v in net.state_dict().items()}
    doc = {
        "format": kind.tag,
        "version": kind.version,
        **fields,
        "state_dict": state,
        "meta": {"note": "mine"},
    }
    n = sum(v.numel() for v in state.values())
    return doc, {"weights": n}, cfield


def net_cases(entry: str, rng: np.random.Generator) -> Case:
    import argparse as _ap

    r = rng.random()
    doc, expect, cfield = net_doc(entry, rng)
    if r < 0.25:
        return Case(
            entry, "valid:checkpoint", "valid", _torch_bytes(doc), suffix=".pt", expect=expect
        )
    if r < 0.35:
        return fs_case(entry, rng, ".pt")
    kind = _pick(
        rng,
        (
            "pickled_object",
            "truncated",
            "random_bytes",
            "wrong_tag",
            "missing_state",
            "missing_config",
            "config_type",
            "config_unknown_key",
            "config_nan",
            "config_huge",
            "config_not_a_dict",
            "nan_weights",
            "missing_weight",
            "not_a_dict",
        ),
    )
    label = kind
    cfg = doc[cfield]
    if kind == "pickled_object":
        doc["meta"] = _ap.Namespace(x=1)
        label = "holds a pickled Python object (argparse.Namespace)"
    elif kind == "wrong_tag":
        doc["format"] = "volary.rl.ppo"
        label = "format tag of another kind"
    elif kind == "missing_state":
        del doc["state_dict"]
    elif kind == "missing_config":
        del doc[cfield]
        label = f"no {cfield}"
    elif kind in (
        "config_type",
        "config_unknown_key",
        "config_nan",
        "config_huge",
    ) and not isinstance(cfg, dict):
        doc[cfield] = {
            "config_type": "0.1",
            "config_unknown_key": [0.1],
            "config_nan": math.nan,
            "config_huge": 1.0,
        }[kind]
        label = f"dropout = {doc[cfield]!r}"
    elif kind == "config_type":
        key = _pick(rng, sorted(k for k in cfg if k != "arch"))
        old = cfg[key]
        cfg[key] = _pick(
            rng,
            (12, None, [old])
            if isinstance(old, str)
            else (str(old), None, [old], 1 if isinstance(old, bool) else True),
        )
        label = f"{cfield}.{key} = {cfg[key]!r}"
    elif kind == "config_unknown_key":
        cfg["colour"] = "red"
        label = f"{cfield} has an unknown key"
    elif kind == "config_nan":
        key = "lr" if entry == DCE else "arch"
        if entry == DCE:
            cfg["lr"] = _pick(rng, (math.nan, math.inf, -1.0))
        else:
            cfg["arch"]["cnn_width"] = _pick(rng, (math.nan, math.inf, True))
        label = f"{cfield}.{key} non-finite or a bool"
    elif kind == "config_huge":
        key = _pick(rng, ("latent", "width") if entry == DCE else ("window", "image_height"))
        cfg[key] = _pick(rng, (2**16, 10**9, 2**40))
        label = f"{cfield}.{key} = {cfg[key]} (the weights are of a small network)"
    elif kind == "config_not_a_dict":
        doc[cfield] = _pick(rng, ([1, 2], "svnet", None)) if isinstance(cfg, dict) else "0.1"
        label = f"{cfield} is not a table"
    elif kind == "nan_weights":
        k = _pick(rng, sorted(doc["state_dict"]))
        if doc["state_dict"][k].is_floating_point():
            doc["state_dict"][k] = doc["state_dict"][k].fill_(math.nan)
            label = f"state_dict.{k} is NaN"
        else:
            doc["state_dict"][k] = doc["state_dict"][k].float().fill_(math.inf)
            label = f"state_dict.{k} is inf"
    elif kind == "missing_weight":
        k = _pick(rng, sorted(doc["state_dict"]))
        del doc["state_dict"][k]
        label = f"state_dict lacks {k}"
    elif kind == "not_a_dict":
        doc = [1, 2, 3]  # type: ignore[assignment]
        label = "a list, not a checkpoint dict"
    data = _torch_bytes(doc)
    if kind == "truncated":
        data, label = truncate(data, "pt", rng), "the file cut short"
    elif kind == "random_bytes":
        data, label = bytes(rng.integers(0, 256, 2048, dtype=np.uint8)), "random bytes"
    return Case(entry, f"checkpoint:{kind}", label, data=data, suffix=".pt")


# ---- the volary commands -------------------------------------------------------------------------
def _num(rng: np.random.Generator) -> tuple[str, str]:
    x = _pick(rng, ("nan", "inf", "-inf", "1e308", "1e39", "-1e308"))
    return x, f"= {x}"


def cli_fly(rng: np.random.Generator) -> Case:
    e = "volary fly"
    base = ["fly", "--platform", "crazyflie", "--out", "{dir}/fly", "--duration", "0.2"]
    if rng.random() < 0.2:
        to = [f"{x:.2f}" for x in rng.uniform(-3, 3, 3)]
        return Case(
            e, "valid:fly", "valid", args=[*base, "--to", *to, "--yaw", f"{rng.uniform(-3, 3):.2f}"]
        )
    kind = _pick(
        rng,
        (
            "to",
            "to_million",
            "yaw",
            "duration",
            "duration_huge",
            "platform",
            "mode",
            "device",
            "to_two_values",
        ),
    )
    if kind == "to":
        x, why = _num(rng)
        to = ["1", "0", "1.5"]
        to[int(rng.integers(3))] = x
        return Case(e, "cli:fly:--to", f"--to {why}", args=[*base, "--to", *to])
    if kind == "to_million":
        return Case(
            e, "cli:fly:--to", "--to 1e6 m (beyond 100 km)", args=[*base, "--to", "1e6", "0", "1.5"]
        )
    if kind == "yaw":
        x, why = _num(rng)
        return Case(e, "cli:fly:--yaw", f"--yaw {why}", args=[*base, "--yaw", x])
    if kind in ("duration", "duration_huge"):
        x = _pick(
            rng, ("nan", "inf", "-1", "0") if kind == "duration" else ("1e39", "1e308", "1e9")
        )
        args = [a for a in base if a not in ("--duration", "0.2")] + ["--duration", x]
        return Case(e, "cli:fly:--duration", f"--duration {x}", args=args)
    if kind == "platform":
        return Case(
            e,
            "cli:fly:--platform",
            "--platform mydrone (unknown)",
            args=["fly", "--platform", "mydrone", "--out", "{dir}/fly"],
        )
    if kind == "mode":
        return Case(e, "cli:fly:--mode", "--mode hover (unknown)", args=[*base, "--mode", "hover"])
    if kind == "device":
        return Case(e, "cli:fly:--device", "--device gpu", args=[*base, "--device", "gpu"])
    return Case(e, "cli:fly:--to", "--to with two numbers", args=[*base, "--to", "1", "2"])


def cli_physics(rng: np.random.Generator) -> Case:
    e = "volary bench physics"
    base = ["bench", "physics", "--out", "{dir}/bench", "--backend", "eager"]
    kind = _pick(
        rng, ("n_zero", "n_negative", "n_huge", "backend", "substeps", "threads", "device")
    )
    if kind == "n_zero":
        return Case(e, "cli:physics:--n", "--n 0", args=[*base, "--n", "0"])
    if kind == "n_negative":
        return Case(e, "cli:physics:--n", "--n -5", args=[*base, "--n", "-5"])
    if kind == "n_huge":
        return Case(
            e,
            "cli:physics:--n",
            "--n 10**11 (terabytes of state)",
            args=[*base, "--n", str(10**11)],
        )
    if kind == "backend":
        return Case(
            e,
            "cli:physics:--backend",
            "--backend jax",
            args=["bench", "physics", "--out", "{dir}/b", "--n", "1", "--backend", "jax"],
        )
    if kind == "substeps":
        return Case(
            e,
            "cli:physics:--substeps",
            "--substeps 0",
            args=[
                "bench",
                "physics",
                "--out",
                "{dir}/b",
                "--n",
                "1",
                "--backend",
                "numba",
                "--substeps",
                "0",
            ],
        )
    if kind == "threads":
        return Case(
            e, "cli:physics:--threads", "--threads -2", args=[*base, "--n", "1", "--threads", "-2"]
        )
    return Case(
        e, "cli:physics:--device", "--device tpu", args=[*base, "--n", "1", "--device", "tpu"]
    )


def cli_race(rng: np.random.Generator) -> Case:
    e = "volary race"
    base = ["race", "--out", "{dir}/race"]
    kind = _pick(
        rng,
        ("racer", "mode", "courses_negative", "courses_huge", "sensors", "faults", "contestant"),
    )
    if kind == "racer":
        return Case(
            e,
            "cli:race:--racer",
            "--racer fastest (unknown)",
            args=[*base, "--mode", "oracle", "--racer", "fastest"],
        )
    if kind == "mode":
        return Case(e, "cli:race:--mode", "--mode practice", args=[*base, "--mode", "practice"])
    if kind == "courses_negative":
        return Case(
            e,
            "cli:race:--courses",
            "--courses -3",
            args=[*base, "--mode", _pick(rng, ("oracle", "challenge")), "--courses", "-3"],
        )
    if kind == "courses_huge":
        return Case(
            e,
            "cli:race:--courses",
            "--courses 10**9 (years of racing)",
            args=[*base, "--mode", "oracle", "--courses", str(10**9)],
            started="flying the nominal",
        )
    if kind == "sensors":
        return Case(e, "cli:race:--sensors", "--sensors gps", args=[*base, "--sensors", "gps"])
    if kind == "faults":
        return Case(e, "cli:race:--faults", "--faults all", args=[*base, "--faults", "all"])
    return Case(
        e,
        "cli:race:--contestant",
        "--contestant no_such_module:Racer",
        args=[*base, "--contestant", "no_such_module:Racer", "--courses", "1"],
    )


def cli_scene(rng: np.random.Generator) -> Case:
    e = "volary scene"
    sub = _pick(rng, ("preview", "export"))
    kind0 = _pick(rng, ("forest", "urban", "maze", "random_cylinders"))
    base = ["scene", sub, kind0, "--out", "{dir}/scene"] + (
        ["--no-sensors"] if sub == "preview" else []
    )
    if rng.random() < 0.2:
        fmt = _pick(rng, ("ply", "obj", "stl", "pcd"))
        args = [
            "scene",
            "export",
            kind0,
            "--out",
            "{dir}/scene",
            "--format",
            fmt,
            "--seed",
            str(int(rng.integers(100))),
        ]
        return Case(e, "valid:scene_export", "valid", args=args)
    kind = _pick(
        rng,
        (
            "kind",
            "format",
            "seed",
            "set_nan",
            "set_negative",
            "set_unknown",
            "set_huge",
            "custom_devzero",
            "custom_fifo",
        ),
    )
    if kind == "kind":
        return Case(
            e,
            f"cli:scene {sub}:KIND",
            "scenario type jungle",
            args=["scene", sub, "jungle", "--out", "{dir}/s"],
        )
    if kind == "format":
        return Case(
            e,
            "cli:scene export:--format",
            "--format fbx",
            args=["scene", "export", kind0, "--out", "{dir}/s", "--format", "fbx"],
        )
    if kind == "seed":
        return Case(e, f"cli:scene {sub}:--seed", "--seed -1", args=[*base, "--seed", "-1"])
    if kind in ("set_nan", "set_negative", "set_huge"):
        x = {"set_nan": "nan", "set_negative": "-1", "set_huge": "1e308"}[kind]
        fieldname = {
            "forest": "density",
            "urban": "density",
            "maze": "cell",
            "random_cylinders": "density",
        }[kind0]
        return Case(
            e,
            f"cli:scene {sub}:--set",
            f"--set {fieldname}={x}",
            args=[*base, "--set", f"{fieldname}={x}"],
        )
    if kind == "set_unknown":
        return Case(
            e,
            f"cli:scene {sub}:--set",
            "--set colour=red (no such field)",
            args=[*base, "--set", "colour=red"],
        )
    special = "devzero" if kind == "custom_devzero" else "fifo"
    return Case(
        e,
        f"cli:scene {sub}:--set path",
        f"custom --set path= {FS_LABELS[special]}",
        special=special,
        suffix=".ply",
        args=["scene", sub, "custom", "--out", "{dir}/s", "--set", "path={file}"]
        + (["--no-sensors"] if sub == "preview" else []),
    )


def cli_bench_run(rng: np.random.Generator) -> Case:
    e = "volary bench run"
    base = ["bench", "run", "--out", "{dir}/run", "--quiet", "--workers", "0"]
    started = r"suite .*: \d+ trials"
    r = rng.random()
    if r < 0.5:  # a user's suite file that is invalid
        while True:
            c = suite_cases(rng)
            if not c.valid and c.special != "nulpath":  # argv cannot hold a NUL byte
                break
        return Case(
            e,
            f"cli:bench run:--suite {c.kind}",
            c.label,
            data=c.data,
            special=c.special,
            suffix=".toml",
            args=[*base, "--suite", "{file}"],
            started=started,
        )
    kind = _pick(
        rng,
        ("algo", "seed", "workers", "unit_timeout", "set_huge", "set_nan", "remote", "set_unknown"),
    )
    opts = {
        "algo": (["--algo", "teleport"], "--algo teleport (unknown)"),
        "seed": (["--seed", "-1"], "--seed -1"),
        "workers": (["--workers", "-2"], "--workers -2"),
        "unit_timeout": (["--unit-timeout", _pick(rng, ("nan", "-1", "0"))], "--unit-timeout"),
        "set_huge": (["--set", "trials_per_config=1e39"], "--set trials_per_config=1e39"),
        "set_nan": (["--set", "settings.time_limit=nan"], "--set settings.time_limit=nan"),
        "remote": (["--remote", "straight=localhost"], "--remote without ://"),
        "set_unknown": (["--set", "settings.speed=3"], "--set settings.speed (no such field)"),
    }
    extra, label = opts[kind]
    if kind == "unit_timeout":
        label = f"--unit-timeout {extra[1]}"
    if kind == "workers":
        base = [a for a in base if a not in ("--workers", "0")]
    return Case(e, f"cli:bench run:{extra[0]}", label, args=[*base, *extra], started=started)


def cli_bench_db(rng: np.random.Generator) -> Case:
    sub = _pick(rng, ("resume", "report"))
    e = f"volary bench {sub}"
    while True:
        c = rundb_cases(rng)
        if not c.valid and c.special != "nulpath":  # argv cannot hold a NUL byte
            break
    args = (
        ["bench", sub, "{file}", "--quiet", "--workers", "0"]
        if sub == "resume"
        else ["bench", "report", "{file}", "--out", "{dir}/report"]
    )
    return Case(
        e,
        f"cli:bench {sub}:RUN {c.kind}",
        c.label,
        data=c.data,
        special=c.special,
        suffix=".sqlite",
        args=args,
        started="resuming .*\n.*trials",
    )


def cli_serve(rng: np.random.Generator) -> Case:
    e = "volary serve"
    port = int(rng.integers(40_000, 60_000))
    base = ["serve", "--scene", "none", "--bind", f"tcp://127.0.0.1:{port}", "--ticks", "1"]
    opts = [
        (["--vehicles", "-1"], "--vehicles -1"),
        (["--vehicles", str(10**9)], "--vehicles 10**9"),
        (["--in-loop", "-2"], "--in-loop -2"),
        (["--control-hz", _pick(rng, ("nan", "inf", "0", "-60", "1e308"))], "--control-hz"),
        (["--timeout", _pick(rng, ("nan", "-1", "inf"))], "--timeout"),
        (["--max-bytes", _pick(rng, ("-1", "0"))], "--max-bytes"),
        (["--ticks", "-1"], "--ticks -1"),
        (["--realtime", "--speed", _pick(rng, ("0", "nan", "-2", "inf"))], "--speed"),
        (["--bind", "not-an-endpoint"], "--bind not-an-endpoint"),
        (["--scene", "jungle"], "--scene jungle"),
        (["--platform", "mydrone"], "--platform mydrone"),
        (["--control", "telepathy"], "--control telepathy"),
        (["--imu", "best"], "--imu best"),
        (["--sensor", "eyes"], "--sensor eyes (not NAME=KIND:PRESET)"),
        (["--sensor", "d=depth:aerial_gym_64@nan"], "--sensor ...@nan Hz"),
        (["--actor", "blob:1,2,3"], "--actor blob"),
        (["--actor", "box:nan,0,0"], "--actor box:nan,0,0"),
        (["--seed", "-1"], "--seed -1"),
    ]
    extra, label = _pick(rng, opts)
    if label in ("--control-hz", "--timeout", "--max-bytes", "--speed"):
        label = f"{label} {extra[-1]}"
    args = [a for a in base if not (extra[0] == "--bind" and a.startswith(("--bind", "tcp:")))]
    return Case(
        e, f"cli:serve:{extra[0]}", label, args=[*args, *extra], started="volary serve: tcp"
    )


# ---- the corpus ----------------------------------------------------------------------------------
API: dict[str, Callable[[np.random.Generator], Case]] = {
    COURSE: course_cases,
    PLATFORM: platform_cases,
    MESH: mesh_cases,
    POINTS: points_cases,
    SPLAT: splat_cases,
    SUITE: suite_cases,
    RUNDB: rundb_cases,
    CHECKPOINT: checkpoint_cases,
    BPDATA: bp_cases,
    SVDATA: sv_cases,
    RECORDING: recording_cases,
    BAG: bag_cases,
    OBSTACLES: obstacles_cases,
    DCE: lambda rng: net_cases(DCE, rng),
    SVNET: lambda rng: net_cases(SVNET, rng),
    BPNET: lambda rng: net_cases(BPNET, rng),
}
CLI: dict[str, Callable[[np.random.Generator], Case]] = {
    "volary fly": cli_fly,
    "volary bench physics": cli_physics,
    "volary race": cli_race,
    "volary scene": cli_scene,
    "volary bench run": cli_bench_run,
    "volary bench resume|report": cli_bench_db,
    "volary serve": cli_serve,
}


def corpus(n_api: int, n_cli: int, seed: int = 0) -> list[Case]:
    """``n_api`` library inputs and ``n_cli`` command lines, round-robin over the entry points;
    the same ``seed`` gives the same cases."""
    rng = np.random.default_rng(seed)
    api, cli = list(API.values()), list(CLI.values())
    return [api[i % len(api)](rng) for i in range(n_api)] + [
        cli[i % len(cli)](rng) for i in range(n_cli)
    ]


def materialize(case: Case, folder: Path, i: int) -> str:
    """The path the entry point is given: a plain file, or the special object named."""
    p = folder / f"{i}-in{case.suffix}"
    if case.special == "nulpath":
        return str(folder / f"{i}-a\x00b{case.suffix}")
    if case.special == "missing":
        return str(p)
    if case.special == "dir":
        p.mkdir()
    elif case.special == "tree":  # a directory of files; "fifo" / "devzero" for special ones
        p.mkdir()
        for name, content in case.tree.items():
            if content == "fifo":
                os.mkfifo(p / name)
            elif content == "devzero":
                (p / name).symlink_to("/dev/zero")
            else:
                (p / name).write_bytes(content)
    elif case.special == "fifo":
        os.mkfifo(p)
    elif case.special == "devzero":
        p.symlink_to("/dev/zero")
    elif case.special == "sparse":
        with open(p, "wb") as f:
            f.truncate(SPARSE_BYTES)
    else:
        p.write_bytes(case.data or b"")
    return str(p)


# ---- reading, in a worker ------------------------------------------------------------------------
def _close(a: Any, b: Any, tol: float = 1e-3) -> bool:
    return bool(np.allclose(np.asarray(a, float), np.asarray(b, float), rtol=1e-5, atol=tol))


def check(entry: str, path: str, expect: dict[str, Any]) -> str:
    """Call the entry point on ``path``: 'valid' when what came back is what the input holds,
    'wrong: why' otherwise (raises whatever the reader raises)."""
    if entry == COURSE:
        from volary.worlds import alphapilot_2019

        s = alphapilot_2019(path)
        if not expect:
            return f"accepted: {len(s.gates)} gates"
        c = np.array([g.corners for g in s.gates], dtype=float)
        if sorted(g.name for g in s.gates) != expect["gates"]:
            return "wrong: gate names differ"
        if list(s.meta["order"]) != expect["order"] or not np.isfinite(c).all():
            return "wrong: order or corners differ"
        return "valid" if _close(s.goal, expect["goal"]) else "wrong: goal is not the last gate"
    if entry == PLATFORM:
        from volary.platforms import load_file

        got = load_file(path)
        if not expect:
            return f"accepted: {len(got)} platforms"
        masses = {k: float(e.airframe.mass) for k, e in got.items()}
        if set(masses) != set(expect["masses"]):
            return f"wrong: platforms {sorted(masses)}"
        ok = all(math.isclose(masses[k], m, rel_tol=1e-9) for k, m in expect["masses"].items())
        return "valid" if ok else "wrong: masses differ (unit conversion)"
    if entry in (MESH, POINTS):
        from volary.worlds.io import load_mesh, load_points

        if entry == MESH:
            m = load_mesh(path)
            v, t = np.asarray(m.vertices, float), np.asarray(m.triangles)
            if not expect:
                return f"accepted: {len(v)} vertices, {len(t)} triangles"
            if len(t) != expect["triangles"] or (t.min() < 0 or t.max() >= len(v)):
                return f"wrong: {len(t)} triangles, expected {expect['triangles']}"
            if "vertices" in expect and len(v) != expect["vertices"]:
                return f"wrong: {len(v)} vertices, expected {expect['vertices']}"
        else:
            v = np.asarray(load_points(path).points, float)
            if not expect:
                return f"accepted: {len(v)} points"
            if len(v) != expect["points"]:
                return f"wrong: {len(v)} points, expected {expect['points']}"
        if not np.isfinite(v).all():
            return "wrong: non-finite vertices"
        box = [v.min(0).tolist(), v.max(0).tolist()]
        return "valid" if _close(box, expect["box"], 0.01) else "wrong: bounding box differs"
    if entry == SPLAT:
        import torch

        from volary.sensors.splat import load_ply

        s = load_ply(path)
        if not expect:
            return f"accepted: {len(s.means)} splats"
        core = (s.means, s.quats, s.log_scales, s.opacity_logits, s.sh)
        if len(s.means) != expect["splats"]:
            return f"wrong: {len(s.means)} splats, expected {expect['splats']}"
        return "valid" if all(bool(torch.isfinite(x).all()) for x in core) else "wrong: NaN"
    if entry == SUITE:
        from volary.studies.flyingtrust.protocol import get_suite

        s = get_suite(path)
        if not expect:
            return f"accepted: {s.n_trials(1)} trials"
        if list(s.platforms) != expect["platforms"] or s.n_trials(1) != expect["n_trials"]:
            return "wrong: platforms or trial count differ"
        return "valid"
    if entry == RUNDB:
        from volary.studies.flyingtrust.db import load_results
        from volary.studies.flyingtrust.schema import CAUSES

        rows = load_results(path)
        if not expect:
            return f"accepted: {len(rows)} rows"
        if len(rows) != expect["rows"]:
            return f"wrong: {len(rows)} rows, expected {expect['rows']}"
        bad = [r for r in rows if r.cause not in CAUSES or not isinstance(r.success, bool)]
        return "valid" if not bad else "wrong: a row reads back with a bad cause or flag"
    if entry == CHECKPOINT:
        import torch

        from volary.studies.rl.ppo import load_policy

        pol, _, _ = load_policy(path)
        if not expect:
            return f"accepted: obs_dim {pol.obs_dim}, act_dim {pol.act_dim}"
        if (pol.obs_dim, pol.act_dim) != (expect["obs_dim"], expect["act_dim"]):
            return "wrong: dimensions differ"
        finite = all(bool(torch.isfinite(p).all()) for p in pol.parameters())
        return "valid" if finite else "wrong: non-finite weights"
    return check_more(entry, path, expect)


def check_more(entry: str, path: str, expect: dict[str, Any]) -> str:
    """:func:`check` for the datasets, recordings, bags, obstacles and other checkpoints."""
    if entry == BPDATA:
        from volary.studies.boundary.dataset import load_dataset

        d = load_dataset(path)
        if not expect:
            return f"accepted: {len(d.grid_index)} rows"
        if d.grid_index.tolist() != expect["grid_index"]:
            return "wrong: grid indices differ"
        same = np.array_equal(d.t0, np.asarray(expect["t0"], float), equal_nan=True)
        return "valid" if same else "wrong: labels differ"
    if entry == SVDATA:
        from volary.studies.sousvide.dataset import read

        d = read(path)
        if not expect:
            return f"accepted: {len(d)} rows"
        want = np.asarray(expect["state"], np.float32).reshape(-1, 10)
        ok = len(d) == expect["rows"] and np.array_equal(d.state, want)
        return "valid" if ok else f"wrong: {len(d)} rows, expected {expect['rows']}"
    if entry == RECORDING:
        from volary.view.recording import load_recording

        rec = load_recording(path)
        if not expect:
            return f"accepted: {len(rec.tracks)} tracks"
        ok = (
            rec.title == expect["title"]
            and len(rec.tracks) == len(expect["pos"])
            and all(
                np.array_equal(t.pos, np.asarray(p))
                for t, p in zip(rec.tracks, expect["pos"], strict=True)
            )
            and np.array_equal(rec.vertices, np.asarray(expect["vertices"]))
        )
        return "valid" if ok else "wrong: tracks or vertices differ"
    if entry == BAG:
        from volary.serve.recording import read_bag

        cfg, ticks = read_bag(path)
        if not expect:
            return f"accepted: {len(ticks)} ticks"
        ok = len(ticks) == expect["ticks"] and len(cfg.slots) == expect["slots"]
        return "valid" if ok else f"wrong: {len(ticks)} ticks, {len(cfg.slots)} slots"
    if entry == OBSTACLES:
        from volary.worlds.custom import load_obstacles
        from volary.worlds.grid import aabb

        obs = load_obstacles(path)
        if not expect:
            return f"accepted: {len(obs)} obstacles"
        if "triangles" in expect:
            n = sum(len(o.triangles) for o in obs)
            return "valid" if n == expect["triangles"] else f"wrong: {n} triangles"
        boxes = [b for b in (aabb(o) for o in obs) if b is not None]
        lo, hi = np.min([b[0] for b in boxes], 0), np.max([b[1] for b in boxes], 0)
        (plo, phi), tol = np.asarray(expect["box"]), 0.2 + 1e-6
        ok = np.all(lo <= plo + 1e-6) and np.all(lo >= plo - tol)
        ok = ok and np.all(hi >= phi - 1e-6) and np.all(hi <= phi + tol)
        return "valid" if ok else "wrong: the boxes do not cover the points"
    if entry in (DCE, SVNET, BPNET):
        import torch

        if entry == DCE:
            from volary.studies.rl.dce import load_vae as load
        elif entry == SVNET:
            from volary.studies.sousvide.net import load_checkpoint as load
        else:
            from volary.studies.boundary.model import load_checkpoint as load
        net = load(path)[0]
        if not expect:
            return f"accepted: {sum(p.numel() for p in net.state_dict().values())} weights"
        n = sum(p.numel() for p in net.state_dict().values())
        finite = all(bool(torch.isfinite(p).all()) for p in net.parameters())
        return "valid" if n == expect["weights"] and finite else "wrong: weights differ"
    raise ValueError(entry)


_MEMORY = (
    "MemoryError",
    "can't allocate memory",
    "Cannot allocate memory",
    "bad_alloc",
    "DefaultCPUAllocator",
    "out of memory",
)


def _worker(conn: Any) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    import torch  # noqa: F401 - imported before the first deadline starts

    import volary.platforms
    import volary.sensors.splat
    import volary.serve.recording
    import volary.studies.boundary.dataset
    import volary.studies.flyingtrust.db
    import volary.studies.rl.dce
    import volary.studies.rl.ppo
    import volary.studies.sousvide.net
    import volary.view.recording
    import volary.worlds.io  # noqa: F401
    from volary.errors import VolaryError

    conn.send("ready")
    while True:
        job = conn.recv()
        if job is None:
            return
        entry, path, expect = job
        try:
            conn.send(("ok", check(entry, path, expect)))
        except VolaryError as e:
            conn.send(("refused", f"{type(e).__name__}: {str(e)[:300]}"))
        except MemoryError as e:
            conn.send(("memory", f"MemoryError: {str(e)[:200]}"))
        except BaseException as e:  # noqa: BLE001 - the point: anything else is a finding
            text = f"{type(e).__name__}: {str(e)[:300]}"
            conn.send(("memory" if any(m in text for m in _MEMORY) else "traceback", text))


class Reader:
    """The worker process; restarted after a hang or a crash."""

    def __init__(self) -> None:
        self.proc: Any = None

    def start(self) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()
        if not self.conn.poll(300) or self.conn.recv() != "ready":
            raise RuntimeError("the reader process did not start")

    def read(self, entry: str, path: str, expect: dict[str, Any]) -> tuple[str, str]:
        if self.proc is None or not self.proc.is_alive():
            self.start()
        self.conn.send((entry, path, expect))
        if not self.conn.poll(API_DEADLINE_S):
            self._kill()
            return "hang", f"no answer in {API_DEADLINE_S:g} s"
        try:
            return self.conn.recv()
        except EOFError:  # the worker died: the memory limit, a crash
            code = self.proc.exitcode if self.proc is not None else None
            self._kill()
            return "memory" if code in (-signal.SIGKILL, -signal.SIGSEGV, -signal.SIGABRT) else (
                "traceback"
            ), f"the reader's process died (exit code {code})"

    def _kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.join()
        self.proc = None

    def close(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.conn.send(None)
            self.proc.join(10)
            if self.proc.is_alive():
                self._kill()


def classify_api(case: Case, status: str, detail: str) -> str:
    if status in ("hang", "memory", "traceback"):
        return status
    if status == "refused":
        return "refused_valid" if case.valid else "clean"
    if case.valid:
        return "valid" if detail == "valid" else "wrong"
    return "wrong"  # an invalid input accepted (detail: what came back)


# ---- commands, in a subprocess -------------------------------------------------------------------
def _limit() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    os.setsid()


def run_cli(case: Case, folder: Path, i: int) -> tuple[str, str]:
    """Run ``volary ARGS`` in ``folder``; (outcome, detail)."""
    file = materialize(case, folder, i) if (case.data is not None or case.special) else ""
    args = [a.replace("{file}", file).replace("{dir}", str(folder / f"{i}-out")) for a in case.args]
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-c", "from volary.cli.main import main; main()", *args]
    proc = subprocess.Popen(
        cmd,
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        preexec_fn=_limit,
    )
    try:
        out, _ = proc.communicate(timeout=CLI_DEADLINE_S)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        rc = None
    text = out.decode("utf-8", "replace")
    return classify_cli(case, rc, text)


def _tail(text: str, n: int = 300) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-3:])[-n:]


def classify_cli(case: Case, rc: int | None, text: str) -> tuple[str, str]:
    """The outcome of one command from its exit status and output."""
    if rc is None:
        if case.started and re.search(case.started, text):
            return "wrong", f"accepted and started the work; killed at {CLI_DEADLINE_S:g} s"
        return "hang", f"no exit in {CLI_DEADLINE_S:g} s: {_tail(text)}"
    if any(m in text for m in _MEMORY):
        return "memory", _tail(text)
    if "Traceback (most recent call last)" in text:
        last = [ln for ln in text.strip().splitlines() if ln.strip()][-1]
        return "traceback", last.strip()[:300]
    if rc < 0:
        return ("memory" if rc == -signal.SIGKILL else "traceback"), f"killed by signal {-rc}"
    errors = [ln for ln in text.splitlines() if ln.startswith("error:")]
    usage = "Usage:" in text and ("Error" in text or "Invalid value" in text)
    if case.valid:
        return ("valid", "") if rc == 0 else ("refused_valid", f"exit {rc}: {_tail(text)}")
    if rc == 0:
        return "wrong", f"exit 0: {_tail(text)}"
    if rc == 2 and (len(errors) == 1 or usage):
        return "clean", (errors[0] if errors else _tail(text))[:300]
    return "unclean", f"exit {rc}, {len(errors)} error: lines: {_tail(text)}"


# ---- the run -------------------------------------------------------------------------------------
def run(n_api: int, n_cli: int, folder: Path, seed: int = 0) -> dict[str, Any]:
    """Generate and run the corpus; counts per entry point and outcome, the distinct failure
    kinds (entry point, input class, outcome, first example) and every finding."""
    t_gen = time.perf_counter()
    cases = corpus(n_api, n_cli, seed)
    t0 = time.perf_counter()
    work = folder / "inputs"
    work.mkdir(parents=True, exist_ok=True)
    reader = Reader()
    per: dict[str, Counter] = {}
    findings, kinds = [], {}
    cli_s = 0.0
    try:
        for i, case in enumerate(cases):
            if case.cli:
                t = time.perf_counter()
                outcome, detail = run_cli(case, work, i)
                cli_s += time.perf_counter() - t
            else:
                path = materialize(case, work, i)
                status, detail = reader.read(case.entry, path, case.expect)
                outcome = classify_api(case, status, detail)
            entry = (
                "volary bench resume|report"
                if case.entry.startswith(("volary bench resume", "volary bench report"))
                else case.entry
            )
            per.setdefault(entry, Counter())[outcome] += 1
            if outcome in BAD_OUTCOMES:
                f = {
                    "input": i,
                    "entry": case.entry,
                    "kind": case.kind,
                    "label": case.label,
                    "outcome": outcome,
                    "detail": detail,
                    "args": case.args,
                }
                findings.append(f)
                key = f"{case.entry} | {case.kind} | {outcome}"
                if key not in kinds:
                    kinds[key] = {
                        "entry": case.entry,
                        "kind": case.kind,
                        "outcome": outcome,
                        "example": case.label,
                        "args": case.args,
                        "detail": detail,
                        "count": 0,
                    }
                kinds[key]["count"] += 1
    finally:
        reader.close()
    totals: Counter = Counter()
    for c in per.values():
        totals.update(c)
    return {
        "seed": seed,
        "inputs": len(cases),
        "api_inputs": n_api,
        "cli_inputs": n_cli,
        "valid_inputs": sum(c.valid for c in cases),
        "generate_seconds": round(t0 - t_gen, 2),
        "seconds": round(time.perf_counter() - t0, 2),
        "cli_seconds": round(cli_s, 2),
        "outcomes": dict(totals),
        "per_entry": {k: dict(v) for k, v in per.items()},
        "input_classes": dict(Counter(c.kind.split(":")[0] for c in cases)),
        "failure_kinds": sorted(kinds.values(), key=lambda k: (k["entry"], k["kind"])),
        "findings": findings,
    }


def table(doc: dict[str, Any]) -> str:
    """Entry point x outcome, as text."""
    w = max(len(k) for k in doc["per_entry"]) + 2
    head = "entry point".ljust(w) + "".join(f"{o:>14}" for o in OUTCOMES)
    rows = [head, "-" * len(head)]
    for k, c in doc["per_entry"].items():
        rows.append(k.ljust(w) + "".join(f"{c.get(o, 0):>14}" for o in OUTCOMES))
    tot = doc["outcomes"]
    rows.append("total".ljust(w) + "".join(f"{tot.get(o, 0):>14}" for o in OUTCOMES))
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="library inputs")
    ap.add_argument("--cli", type=int, default=None, help="command lines (default: n / 20)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=None, help="folder for the inputs")
    ap.add_argument("--out", type=Path, default=None, help="JSON results")
    args = ap.parse_args(argv)
    n_cli = max(1, args.n // 20) if args.cli is None else args.cli
    with tempfile.TemporaryDirectory(prefix="volary-corpus-") as tmp:
        doc = run(args.n, n_cli, args.work or Path(tmp), args.seed)
    doc["command"] = "python tests/_inputs_corpus.py " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    print(table(doc))
    print(f"\n{doc['inputs']} inputs ({doc['valid_inputs']} valid) in {doc['seconds']:.0f} s")
    for k in doc["failure_kinds"]:
        print(
            f"- {k['entry']} [{k['kind']}] {k['outcome']} x{k['count']}: {k['example']} -> "
            f"{k['detail'][:160]}"
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return 0 if not doc["failure_kinds"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
