"""Scene files: deterministic PLY/OBJ/PCD export, round trips, tessellation, malformed input;
the plyfile-based PLY reader against the hand parser it replaced."""

from __future__ import annotations

import ast
import functools
import math
import struct
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from volary.errors import FileFormatError
from volary.worlds import Box, Cylinder, Plane, SceneSpec, Sphere
from volary.worlds.io import (
    PointCloud,
    box_mesh,
    cylinder_mesh,
    export_scene,
    load_mesh,
    load_points,
    plane_mesh,
    read_ply,
    scene_mesh,
    sphere_mesh,
    write_pcd,
    write_ply,
    write_stl,
)
from volary.worlds.scenarios import SCENARIOS, make_scenario

EXPORTS = [("ply", False), ("ply", True), ("obj", False), ("pcd", False), ("pcd", True)]


def _export_all(spec: SceneSpec, folder: Path) -> dict[str, bytes]:
    folder.mkdir()
    out = {}
    for fmt, binary in EXPORTS:
        p = export_scene(spec, folder / f"s{int(binary)}.{fmt}", binary=binary, spacing=0.5)
        out[p.name] = p.read_bytes()
    return out


@pytest.mark.parametrize("kind", sorted(SCENARIOS))
def test_same_type_and_seed_give_byte_identical_files(kind, tmp_path):
    a = _export_all(make_scenario(kind, 3), tmp_path / "a")
    b = _export_all(make_scenario(kind, 3), tmp_path / "b")
    assert a == b and all(len(v) > 200 for v in a.values())
    assert a != _export_all(make_scenario(kind, 4), tmp_path / "c")


def test_every_format_exports_into_a_folder_that_does_not_exist_yet(tmp_path):
    spec = make_scenario("forest", 3)
    for fmt in ("ply", "obj", "stl", "pcd"):
        p = export_scene(spec, tmp_path / fmt / "nested" / f"scene.{fmt}", spacing=0.5)
        assert p.is_file() and p.stat().st_size > 200, fmt


def _mixed_spec() -> SceneSpec:
    obstacles = (
        Box((1, 2, 1), (1, 2, 2), 0.4),
        Cylinder((4, 4, 1), 0.3, 2.0, (1, 1, 1)),
        Sphere((6, 1, 1), 0.5),
        Plane((0, 0, 0.1), (0.1, 0, 1)),
    )
    return SceneSpec("mixed", (0, 0, 0), (8, 8, 3), obstacles)


@pytest.mark.parametrize("fmt,binary", [("ply", False), ("ply", True), ("obj", False)])
def test_mesh_round_trip_preserves_counts_and_vertices(fmt, binary, tmp_path):
    mesh = scene_mesh(_mixed_spec())
    p = export_scene(_mixed_spec(), tmp_path / f"m.{fmt}", binary=binary)
    back = load_mesh(p)
    assert back.vertices.shape == mesh.vertices.shape
    assert np.array_equal(back.triangles, mesh.triangles)
    assert np.allclose(back.vertices, mesh.vertices, atol=1e-5)


def test_stl_round_trip_preserves_triangles(tmp_path):
    mesh = scene_mesh(make_scenario("forest", 0))
    write_stl(tmp_path / "m.stl", mesh)
    back = load_mesh(tmp_path / "m.stl")
    assert len(back.triangles) == len(mesh.triangles) and len(back.vertices) == len(mesh.vertices)
    ascii_stl = (
        "solid t\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\n"
        "vertex 0 1 0\nendloop\nendfacet\nendsolid t\n"
    )
    (tmp_path / "a.stl").write_text(ascii_stl)
    assert load_mesh(tmp_path / "a.stl").triangles.shape == (1, 3)


@pytest.mark.parametrize("binary", [False, True])
def test_point_cloud_round_trip(binary, tmp_path):
    pts = np.random.default_rng(0).uniform(-5, 5, (1000, 3)).astype(np.float32)
    write_pcd(tmp_path / "p.pcd", pts, binary)
    back = load_points(tmp_path / "p.pcd").points  # float64; ascii "%.9g" is float32-exact
    assert np.array_equal(back.astype(np.float32), pts)
    write_ply(tmp_path / "p.ply", PointCloud(pts.astype(float)), binary)
    assert np.array_equal(load_points(tmp_path / "p.ply").points.astype(np.float32), pts)


def _signed_volume(v: np.ndarray, t: np.ndarray) -> float:
    a, b, c = v[t[:, 0]], v[t[:, 1]], v[t[:, 2]]
    return float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6)


def test_tessellations_are_closed_outward_and_near_analytic_volume():
    assert _signed_volume(*box_mesh(Box((1, 2, 3), (1, 2, 3), 0.7))) == pytest.approx(6.0)
    cyl = Cylinder((1, 1, 1), 0.5, 2.0, (0.3, 0.2, 1.0))
    assert _signed_volume(*cylinder_mesh(cyl, 48)) == pytest.approx(math.pi * 0.5, rel=0.01)
    sph = Sphere((1, 2, 3), 1.0)
    assert _signed_volume(*sphere_mesh(sph, 48)) == pytest.approx(4 / 3 * math.pi, rel=0.01)
    v, t = plane_mesh(Plane((0, 0, 1), (0, 0, 1)), np.zeros(3), np.array([4.0, 5.0, 3.0]))
    n = np.cross(v[t[:, 1]] - v[t[:, 0]], v[t[:, 2]] - v[t[:, 0]])
    assert np.all(n[:, 2] > 0) and np.allclose(v[:, 2], 1.0)
    assert np.linalg.norm(n, axis=1).sum() / 2 == pytest.approx(20.0)


def test_pcd_export_samples_surfaces_at_the_spacing(tmp_path):
    spec = SceneSpec("box", (0, 0, 0), (4, 4, 4), (Box((2, 2, 2), (2, 2, 2)),))
    pts = load_points(export_scene(spec, tmp_path / "b.pcd", spacing=0.25)).points
    on_face = np.isclose(np.abs(pts - 2).max(axis=1), 1.0)
    assert on_face.all() and 24 / 0.25**2 * 0.8 < len(pts) < 24 / 0.125**2


# ----------------------------------------------------------------------------- malformed files
_PLY_HEAD = (
    "ply\nformat ascii 1.0\nelement vertex {nv}\nproperty float x\nproperty float y\n"
    "property float z\nelement face {nf}\nproperty list uchar int vertex_indices\n"
    "end_header\n"
)
_TRI = "0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n"


def _ascii_tri(body: bytes) -> bytes:
    return _PLY_HEAD.format(nv=3, nf=1).encode() + body


def _bin_ply(nv: int, body: bytes) -> bytes:
    head = _PLY_HEAD.replace("ascii", "binary_little_endian").format(nv=nv, nf=1)
    return head.encode() + body


BAD_FILES = [
    ("m.ply", b"plx\nformat ascii 1.0\nend_header\n", "magic"),
    ("m.ply", b"ply\nformat ascii 1.0\nelement vertex 3\n", "end_header"),
    ("m.ply", b"ply\nformat binary_middle_endian 1.0\nend_header\n", "header line"),
    ("m.ply", _PLY_HEAD.format(nv=10, nf=1).encode() + _TRI.encode(), "truncated"),
    ("m.ply", _PLY_HEAD.format(nv=999999999999, nf=1).encode() + _TRI.encode(), "truncated"),
    ("m.ply", _PLY_HEAD.format(nv=3, nf=1).encode() + b"0 0 0\nnan 0 0\n0 1 0\n3 0 1 2\n", "NaN"),
    (
        "m.ply",
        _PLY_HEAD.format(nv=3, nf=1).encode() + b"0 0 0\n1 0 0\n0 1 0\n3 0 1 7\n",
        "out of range",
    ),
    (
        "m.ply",
        _PLY_HEAD.format(nv=3, nf=1).encode() + b"0 0 0\n1 x 0\n0 1 0\n3 0 1 2\n",
        "non-numeric",
    ),
    (
        "m.ply",
        _PLY_HEAD.format(nv=3, nf=1).encode() + b"0 0 0\n1 0 0\n0 1 0\n2 0 1\n",
        "at least 3",
    ),
    ("m.ply", _PLY_HEAD.format(nv=3, nf=0).encode() + b"0 0 0\n1 0 0\n0 1 0\n", "empty mesh"),
    ("m.ply", _bin_ply(3, struct.pack("<9f", *range(9))[:20]), "truncated"),
    ("m.ply", _bin_ply(3, struct.pack("<9fB3i", *range(9), 3, 0, 1, 2)[:-3]), "truncated"),
    ("m.ply", _bin_ply(3, struct.pack("<9fB3i", *range(9), 200, 0, 1, 2)), "truncated"),
    ("m.ply", _bin_ply(3, struct.pack("<9fB2i", *range(9), 2, 0, 1)), "at least 3"),
    ("m.ply", _bin_ply(3, struct.pack("<9fB3i", *range(9), 3, 0, 1, 3)), "out of range"),
    ("m.ply", _PLY_HEAD.format(nv=-3, nf=0).encode(), "negative row count"),
    (
        "m.ply",
        _PLY_HEAD.format(nv=3, nf=1).encode() + b"0 0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n",
        "end-of-line",
    ),
    (
        "m.ply",
        _PLY_HEAD.format(nv=3, nf=1).encode() + b"0 0 0\n1 0\n0 1 0\n3 0 1 2\n",
        "end-of-line",
    ),
    ("m.ply", _PLY_HEAD.replace("float z", "float \u00e9").format(nv=0, nf=0).encode(), "ASCII"),
    ("m.ply", _PLY_HEAD.replace("float z", "float x").format(nv=0, nf=0).encode(), "header"),
    (
        "m.ply",
        b"ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nend_header\n1\n",
        "x, y, z",
    ),
    ("m.obj", b"v 0 0 0\nv 1 0\nf 1 2 3\n", "3 coordinates"),
    ("m.obj", b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 0\n", "non-zero"),
    ("m.obj", b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 9\n", "out of range"),
    ("m.obj", b"v 0 0 0\nv 1 0 0\nv nan 1 0\nf 1 2 3\n", "NaN"),
    ("m.obj", b"ply\nformat ascii 1.0\n", "unsupported OBJ statement"),
    ("m.obj", b"", "empty mesh"),
    ("m.obj", b"\xff\xfe\x00binary junk", "UTF-8"),
    ("m.stl", b"\x00" * 80 + struct.pack("<I", 5) + b"\x00" * 60, "not an STL"),
    ("m.stl", b"solid x\nfacet\nvertex 0 0 0\nvertex 1 0 0\nendsolid\n", "multiple of 3"),
    ("m.stl", b"solid x\nvertex nan 0 0\nvertex 1 0 0\nvertex 0 1 0\nendsolid\n", "NaN"),
    ("m.dae", b"<COLLADA/>", "unsupported mesh format"),
    ("p.pcd", b"VERSION 0.7\nFIELDS x y z\nSIZE 4 4 4\nTYPE F F F\n", "no DATA"),
    (
        "p.pcd",
        b"FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nWIDTH 5\nHEIGHT 1\nPOINTS 5\n"
        b"DATA binary\n" + b"\x00" * 30,
        "truncated",
    ),
    (
        "p.pcd",
        b"FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nWIDTH 5\nHEIGHT 1\nPOINTS 7\nDATA ascii\n",
        "WIDTH x HEIGHT",
    ),
    (
        "p.pcd",
        b"FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nWIDTH 1\nHEIGHT 1\nPOINTS 1\n"
        b"DATA binary_compressed\n\x00\x00",
        "unsupported PCD DATA",
    ),
    (
        "p.pcd",
        b"FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nWIDTH 2\nHEIGHT 1\nPOINTS 2\n"
        b"DATA ascii\n1 2 3\n4 5\n",
        "expected 2 rows of 3",
    ),
    ("p.pcd", b"FIELDS a b\nSIZE 4 4\nTYPE F F\nWIDTH 1\nHEIGHT 1\nDATA ascii\n1 2\n", "x, y, z"),
    (
        "p.pcd",
        b"FIELDS x y z\nSIZE 4 4\nTYPE F F F\nWIDTH 1\nHEIGHT 1\nDATA ascii\n1 2 3\n",
        "disagree",
    ),
    (
        "p.pcd",
        b"FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nWIDTH 1\nHEIGHT 1\nDATA ascii\n1 nan 3\n",
        "NaN",
    ),
    (
        "p.pcd",
        b"FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nWIDTH 0\nHEIGHT 1\nDATA ascii\n",
        "empty point",
    ),
    ("p.xyz", b"1 2 3\n", "unsupported point cloud format"),
]


# issue 18's cases, which the hand parser before plyfile accepted or crashed on: rows after the
# declared ones, Python-only numbers, absurd counts (1e39 and 2^63 once gave 'negative
# dimensions' or MemoryError tracebacks)
BAD_FILES_18 = [
    (
        "m.ply",
        b"ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
        b"property float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n"
        b"0 0 0\n1 0 0\n0 1 0\n3 0 1 2\ngarbage here\n",
        "after the 4 declared rows",
    ),
    (
        "p.pcd",
        b"# .PCD v0.7\nVERSION 0.7\nFIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nCOUNT 1 1 1\n"
        b"WIDTH 2\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS 2\nDATA ascii\n1_000 2 3\n4 5 6\n",
        "non-numeric value b'1_000'",
    ),
    *(
        (
            "m.ply",
            b"ply\nformat binary_little_endian 1.0\nelement vertex " + count + b"\n"
            b"property float x\nproperty float y\nproperty float z\nend_header\n" + bytes(24),
            problem,
        )
        for count, problem in (
            (b"1e39", "expected integer count"),
            (b"9223372036854775808", "truncated"),
            (b"1000000000000", "truncated"),
            (b"-5", "negative row count"),
        )
    ),
]


@pytest.mark.parametrize(
    "name,content,problem",
    BAD_FILES + BAD_FILES_18,
    ids=[f"{i}-{b[0]}-{b[2]}" for i, b in enumerate(BAD_FILES + BAD_FILES_18)],
)
def test_malformed_files_raise_file_format_error_naming_file_and_problem(
    name, content, problem, tmp_path
):
    path = tmp_path / name
    path.write_bytes(content)
    loader = load_points if name.startswith("p.") else load_mesh
    with pytest.raises(FileFormatError) as err:
        loader(path)
    assert str(path) in str(err.value) and problem in str(err.value)


def test_missing_file_and_nan_dropping(tmp_path):
    with pytest.raises(FileFormatError, match="cannot read"):
        load_mesh(tmp_path / "none.ply")
    (tmp_path / "n.pcd").write_bytes(
        b"FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nWIDTH 2\nHEIGHT 1\nDATA ascii\nnan nan nan\n1 2 3\n"
    )
    assert load_points(tmp_path / "n.pcd", drop_nan=True).points.tolist() == [[1.0, 2.0, 3.0]]


def test_polygons_and_negative_indices_are_triangulated(tmp_path):
    (tmp_path / "q.obj").write_text("v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nf -4/1 -3/2 -2/3 -1/4\n")
    assert load_mesh(tmp_path / "q.obj").triangles.tolist() == [[0, 1, 2], [0, 2, 3]]
    head = _PLY_HEAD.format(nv=4, nf=2).encode()
    (tmp_path / "q.ply").write_bytes(head + b"0 0 0\n1 0 0\n1 1 0\n0 1 0\n4 0 1 2 3\n3 0 1 2\n")
    assert len(load_mesh(tmp_path / "q.ply").triangles) == 3


# ----------------------------------------------------------------------------- PLY via plyfile
BASELINE = "d06313fe3afa1af093885fb9cd13a311397b1c2e"  # last commit with the hand PLY reader


@functools.cache
def _hand_parser() -> types.ModuleType | None:
    """volary.worlds.io as of BASELINE (its hand-written PLY reader), or None without git."""
    root = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "show", f"{BASELINE}:src/volary/worlds/io.py"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    # gate_boxes moved from worlds._stack (gone) to worlds.primitives since BASELINE
    out = out.replace("from volary.worlds._stack import", "from volary.worlds.primitives import")
    mod = types.ModuleType("_volary_io_hand")
    sys.modules[mod.__name__] = mod  # dataclasses look their module up
    exec(compile(out, f"{BASELINE}:io.py", "exec"), mod.__dict__)
    return mod


_HEAD = (
    "ply\nformat {fmt} 1.0\ncomment c\nobj_info o\nelement vertex 4\nproperty {vt} x\n"
    "property {vt} y\nproperty {vt} z\nproperty uchar red\n{extra}element face {nf}\n"
    "property list {lt} {it} {key}\nproperty uchar flag\nend_header\n"
)
_VERTS = [(0, 0, 0, 1), (1, 0, 0, 2), (1, 1, 0, 3), (0, 1, 0, 4)]
_MIXED = [[0, 1, 2, 3], [0, 1, 2], [3, 2, 1, 0, 1]]


def _ascii_ply(vt="float", lt="uchar", it="int", key="vertex_indices", extra="", nl="\n") -> bytes:
    s = _HEAD.format(fmt="ascii", vt=vt, lt=lt, it=it, key=key, extra=extra, nf=len(_MIXED))
    s += "".join(f"{a} {b} {c} {r}\n" for a, b, c, r in _VERTS)
    s += "".join(f"{len(f)} {' '.join(map(str, f))} 7\n" for f in _MIXED)
    return s.replace("\n", nl).encode()


def _binary_ply(e="<", vt=("float", "f"), lt=("uchar", "B"), it=("int", "i"), faces=None) -> bytes:
    faces = _MIXED if faces is None else faces
    fmt = "binary_little_endian" if e == "<" else "binary_big_endian"
    s = _HEAD.format(
        fmt=fmt, vt=vt[0], lt=lt[0], it=it[0], key="vertex_indices", extra="", nf=len(faces)
    ).encode()
    s += b"".join(struct.pack(e + 3 * vt[1] + "B", *row) for row in _VERTS)
    return s + b"".join(struct.pack(f"{e}{lt[1]}{len(f) * it[1]}B", len(f), *f, 7) for f in faces)


HAND_MADE = {
    "ascii": _ascii_ply(),
    "ascii-double": _ascii_ply(vt="double"),
    "ascii-int": _ascii_ply(vt="int"),
    "ascii-vertex_index": _ascii_ply(key="vertex_index"),
    "ascii-crlf": _ascii_ply(nl="\r\n"),
    "ascii-empty-element": _ascii_ply(extra="element edge 0\nproperty int a\n"),
    "ascii-ushort-uint": _ascii_ply(lt="ushort", it="uint"),
    "le-mixed": _binary_ply(),
    "be-mixed": _binary_ply(">"),
    "le-double": _binary_ply(vt=("double", "d")),
    "le-ushort-uint": _binary_ply(lt=("ushort", "H"), it=("uint", "I")),
    "le-triangles": _binary_ply(faces=[[0, 1, 2], [0, 2, 3]]),
    "be-triangles": _binary_ply(">", faces=[[0, 1, 2], [0, 2, 3]]),
    "le-quads": _binary_ply(faces=[[0, 1, 2, 3], [3, 2, 1, 0]]),
    "le-no-faces": _binary_ply(faces=[]),
}


def _volary_written(folder: Path) -> dict[str, Path]:
    mesh = scene_mesh(_mixed_spec())
    cloud = PointCloud(np.random.default_rng(1).normal(size=(300, 3)) * 1e3)
    out = {}
    for binary in (False, True):
        out[f"mesh-{binary}"] = folder / f"m{int(binary)}.ply"
        out[f"cloud-{binary}"] = folder / f"c{int(binary)}.ply"
        write_ply(out[f"mesh-{binary}"], mesh, binary)
        write_ply(out[f"cloud-{binary}"], cloud, binary)
    return out


def _same_as_hand(new: tuple, old: tuple, ascii_float: bool) -> None:
    """Indices identical; coordinates identical, except that ascii ``float`` properties now hold
    the declared float32 value where the hand parser kept the float64 of the decimal text."""
    assert new[0].dtype == old[0].dtype == np.float64
    expected = old[0].astype(np.float32).astype(float) if ascii_float else old[0]
    assert np.array_equal(new[0], expected)
    assert (new[1] is None) == (old[1] is None)
    if new[1] is not None:
        assert new[1].dtype == old[1].dtype == np.int64 and np.array_equal(new[1], old[1])


def test_ply_reader_matches_the_hand_parser(tmp_path):
    hand = _hand_parser()
    if hand is None:
        pytest.skip(f"git history with {BASELINE} is not available")
    files = _volary_written(tmp_path)
    for name, content in HAND_MADE.items():
        files[name] = tmp_path / f"{name}.ply"
        files[name].write_bytes(content)
    for name, path in files.items():
        ascii_float = name in ("mesh-False", "cloud-False") or (
            name.startswith("ascii") and name not in ("ascii-double", "ascii-int")
        )
        _same_as_hand(read_ply(path), hand.read_ply(path), ascii_float)
    for name, content, _ in BAD_FILES:
        if name.endswith(".ply"):
            (tmp_path / "bad.ply").write_bytes(content)
            with pytest.raises(FileFormatError):
                hand.load_mesh(tmp_path / "bad.ply")


def test_ascii_and_binary_ply_of_one_mesh_read_the_same_values(tmp_path):
    files = _volary_written(tmp_path)
    mesh = scene_mesh(_mixed_spec())
    for kind in ("mesh", "cloud"):
        (va, ta), (vb, tb) = read_ply(files[f"{kind}-False"]), read_ply(files[f"{kind}-True"])
        assert np.array_equal(va, vb) and (ta is None) == (tb is None)
    v, t = read_ply(files["mesh-True"])
    assert np.array_equal(v, mesh.vertices.astype(np.float32)) and np.array_equal(t, mesh.triangles)


def test_binary_ply_with_polygons_reads_every_layout(tmp_path):
    """Triangles and quads go through plyfile's memory map; mixed polygons, its row reader."""
    expected = [[0, 1, 2], [0, 1, 2], [0, 2, 3], [3, 2, 1], [3, 1, 0], [3, 0, 1]]
    for name in ("le-mixed", "be-mixed", "le-ushort-uint", "ascii", "ascii-crlf"):
        (tmp_path / "p.ply").write_bytes(HAND_MADE[name])
        v, t = read_ply(tmp_path / "p.ply")
        assert t.tolist() == expected and v.tolist() == [list(r[:3]) for r in _VERTS]
    (tmp_path / "q.ply").write_bytes(HAND_MADE["le-quads"])
    assert read_ply(tmp_path / "q.ply")[1].tolist() == [[0, 1, 2], [0, 2, 3], [3, 2, 1], [3, 1, 0]]
    (tmp_path / "n.ply").write_bytes(HAND_MADE["le-no-faces"])
    assert read_ply(tmp_path / "n.ply")[1].shape == (0, 3)


def test_plyfile_is_imported_only_inside_the_readers():
    """Importing volary loads no parser library (DESIGN.md); plyfile comes in on first use."""
    import volary.worlds.io as io_module

    tree = ast.parse(Path(io_module.__file__).read_text())
    top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    names = [a.name for n in top for a in n.names] + [
        n.module for n in top if isinstance(n, ast.ImportFrom) and n.module
    ]
    assert not any(n.split(".")[0] == "plyfile" for n in names)


def test_ply_rows_are_lines_and_the_magic_line_is_exact(tmp_path):
    """Stricter than the hand parser (DESIGN.md): plyfile reads one row per line."""
    blank = _ascii_tri(b"0 0 0\n\n1 0 0\n0 1 0\n3 0 1 2\n")
    spaced = _ascii_tri(b"0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n").replace(b"ply\n", b"ply \n", 1)
    for content, problem in ((blank, "end-of-line"), (spaced, "after 'ply'")):
        (tmp_path / "s.ply").write_bytes(content)
        with pytest.raises(FileFormatError, match=problem):
            read_ply(tmp_path / "s.ply")
    (tmp_path / "t.ply").write_bytes(_ascii_tri(b"0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n\n\n"))
    assert read_ply(tmp_path / "t.ply")[1].tolist() == [[0, 1, 2]]


def test_exports_are_byte_identical_to_the_baseline_writers(tmp_path):
    hand = _hand_parser()
    if hand is None:
        pytest.skip(f"git history with {BASELINE} is not available")
    spec = _mixed_spec()
    for fmt, binary in [*EXPORTS, ("stl", True)]:
        name = f"{int(binary)}.{fmt}"
        new = export_scene(spec, tmp_path / f"n{name}", binary=binary, spacing=0.5)
        old = hand.export_scene(spec, tmp_path / f"o{name}", binary=binary, spacing=0.5)
        assert new.read_bytes() == old.read_bytes(), name


# ---- issue 18's cases ---------------------------------------------------------------------------
def test_a_fifo_is_refused_not_read_forever(tmp_path):
    import os

    from volary.worlds.io import load_mesh

    fifo = tmp_path / "scene.ply"
    os.mkfifo(fifo)
    with pytest.raises(FileFormatError, match="not a regular file"):
        load_mesh(fifo)
