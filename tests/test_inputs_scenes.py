"""Scenes from files and far from the origin take bad input cleanly (issue 55).

Regression tests for each finding of the issue (each fails on the code before the fix), then
Hypothesis property tests: generated meshes and point clouds (positions near and far, NaN/inf,
degenerate and out-of-range faces, empty meshes, headers with ``comment``/``obj_info`` lines,
counts that disagree with the data), written in every format volary reads, give a scene whose
invariants hold or a one-line VolaryError naming the file; declared counts of 10^12 are read in a
worker process under a 2 GiB address-space limit (``tests/_fuzz.py``).
"""

from __future__ import annotations

import struct
import tracemalloc
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from volary.errors import ConfigError, FileFormatError, VolaryError
from volary.inputs import LIMITS
from volary.worlds import make_scenario
from volary.worlds.custom import scene_from_file
from volary.worlds.fields import VoxelGrid
from volary.worlds.grid import occupancy_grid
from volary.worlds.io import (
    MeshScene,
    box_mesh,
    export_scene,
    load_mesh,
    load_points,
    write_obj,
    write_pcd,
    write_ply,
)
from volary.worlds.primitives import Box, Mesh, SceneSpec

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

EXTENT = LIMITS["coordinate"].hi  # 1e5 m
# the generated files hold 1e300 in float32 fields on purpose
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")


def _one_line(err: BaseException, source: object) -> str:
    msg = str(err)
    assert "\n" not in msg and msg.startswith(str(source)), msg
    return msg


def _peak(fn) -> int:
    """Peak bytes traced while ``fn`` runs (numpy's allocations included)."""
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def _cube() -> tuple[np.ndarray, np.ndarray]:
    return box_mesh(Box((0.0, 0.0, 1.0), (1.0, 1.0, 1.0)))


# ---- the findings -----------------------------------------------------------------------
def test_a_vertex_10_km_away_refuses_the_grid_before_allocating_it(tmp_path):
    """The issue's 58 TiB occupancy grid: one vertex 10 km away made the solvability check of
    a custom scene size its grid from the scene's bounds without a limit."""
    v, t = _cube()
    path = tmp_path / "far.obj"
    write_obj(path, MeshScene(np.vstack([v, [[1e4, 1e4, 1e4]]]), t))

    def load() -> None:
        with pytest.raises(ConfigError) as e:
            make_scenario("custom", 0, path=str(path))
        msg = _one_line(e.value, path)
        assert "check_resolution" in msg and "resolution 0.25 m" in msg
        assert "10002.5 x 10002.5 x 10001.5 m" in msg and "6.4e+13 grid nodes" in msg

    assert _peak(load) < 5_000_000


def test_a_grid_over_the_cell_limit_names_resolution_extent_and_what_fits():
    from volary.worlds.grid import grid_shape

    spec = SceneSpec("big", (0, 0, 0), (5000, 5000, 100))
    with pytest.raises(ConfigError) as e:
        occupancy_grid(spec, 0.3, 0.25)
    msg = _one_line(e.value, "big")
    assert "resolution 0.25 m" in msg and "5000 x 5000 x 100 m" in msg
    fits = float(msg.rsplit("resolution >= ", 1)[1].split(" m")[0])
    n = grid_shape(spec, fits)  # the resolution the message offers fits
    assert np.prod(n, dtype=float) <= LIMITS["grid_cells"].hi
    with pytest.raises(ConfigError):  # and it is near the finest that does
        grid_shape(spec, fits * 0.9)


@pytest.mark.parametrize(
    "bounds,ceiling,resolution,what",
    [
        (((-1e300, 0, 0), (1e300, 1, 1)), None, 0.25, "bounds_min: x = -1e+300"),
        (((0, 0, 0), (2e5, 1, 1)), None, 0.25, "bounds_max: x = 200000"),
        (((0, 0, 0), (10, 10, 3)), float("nan"), 0.25, "ceiling"),
        (((0, 0, 0), (10, 10, 3)), None, float("inf"), "resolution"),
        (((0, 0, 0), (10, 10, 3)), None, float("nan"), "resolution"),
    ],
)
def test_grid_of_bounds_beyond_the_world_or_not_numbers_is_refused(
    bounds, ceiling, resolution, what
):
    """Before: ±1e300 bounds overflowed the node count (an empty grid came back), a NaN
    ceiling was ignored and an infinite resolution gave a one-node grid."""
    spec = SceneSpec("s", *bounds, ceiling=ceiling)
    with pytest.raises(ConfigError, match="^s: |^resolution: ") as e:
        occupancy_grid(spec, 0.3, resolution)
    assert what in str(e.value) and "\n" not in str(e.value)


def test_huge_coordinates_in_a_point_cloud_are_refused_naming_the_point(tmp_path):
    """The issue's ``negative dimensions`` traceback: float64 points at 1e300 overflowed the
    voxel indices (int64) of the point cloud's voxel grid."""
    p = tmp_path / "far.pcd"
    p.write_text(
        "VERSION 0.7\nFIELDS x y z\nSIZE 8 8 8\nTYPE F F F\nCOUNT 1 1 1\nWIDTH 2\nHEIGHT 1\n"
        "POINTS 2\nDATA ascii\n0 0 0\n1e300 0 0\n"
    )
    with pytest.raises(FileFormatError) as e:
        scene_from_file(p)
    assert "point 1: x = 1e+300 is outside the world extent" in _one_line(e.value, p)
    with pytest.raises(ConfigError, match="point 1: x = 1e\\+300 is outside the world extent"):
        VoxelGrid.from_points(np.array([[0.0, 0, 0], [1e300, 0, 0]]), 0.2)


def test_a_voxel_too_small_for_the_coordinates_is_refused_not_misplaced():
    """Before: cell indices past int64 wrapped round, and the grid's origin came back wrong
    (-9.2 km for a point at +10 km)."""
    with pytest.raises(ConfigError, match="voxel: 1e-15 m is too small"):
        VoxelGrid.from_points(np.array([[1e4, 0.0, 0.0]]), 1e-15)
    g = VoxelGrid.from_points(np.array([[1e4, 0.0, 0.0]]), 1e-9)
    assert g.origin[0] == pytest.approx(1e4)


@pytest.mark.parametrize("fmt", ["obj", "ply"])
def test_mesh_vertices_outside_the_world_extent_name_file_vertex_and_coordinate(tmp_path, fmt):
    v, t = _cube()
    v = v.copy()
    v[5, 1] = -2e5
    path = tmp_path / f"far.{fmt}"
    (write_obj if fmt == "obj" else write_ply)(path, MeshScene(v, t))
    with pytest.raises(FileFormatError) as e:
        scene_from_file(path)
    assert "mesh vertex 5: y = -200000 is outside the world extent" in _one_line(e.value, path)


def test_custom_scene_options_are_checked_before_the_file_is_sized(tmp_path):
    v, t = _cube()
    path = tmp_path / "cube.ply"
    write_ply(path, MeshScene(v, t))
    cases = {
        "margin: input should be greater than 0": dict(margin=-1.0),
        "bounds_min (the data's extent and the margin): x = -1e+300": dict(margin=1e300),
        "bounds.1.0: input should be less than or equal to 100000": dict(
            bounds=((0, 0, 0), (1e6, 1, 1))
        ),
        "voxel: input should be a finite number": dict(voxel=float("nan")),
        "start.2: input should be a finite number": dict(start=(0, 0, float("nan"))),
        "kind: input should be 'auto', 'mesh' or 'points'": dict(kind="both"),
    }
    for what, kw in cases.items():
        with pytest.raises(ConfigError) as e:
            scene_from_file(path, **kw)
        assert what in _one_line(e.value, path), kw
    with pytest.raises(ConfigError, match="check_resolution: input should be greater than 0"):
        make_scenario("custom", 0, path=str(path), check_resolution=0.0)


def _ply_with_info(binary: bool) -> tuple[bytes, np.ndarray, np.ndarray]:
    """A valid PLY mesh whose header has obj_info and comment lines after elements and
    properties (allowed by the PLY format; plyfile 1.1's header parser refused the obj_info)."""
    v, t = _cube()
    head = [
        "ply",
        f"format {'binary_little_endian' if binary else 'ascii'} 1.0",
        "comment made by hand",
        f"element vertex {len(v)}",
        "obj_info scanned 2026",
        "property double x",
        "comment between properties",
        "property double y",
        "property double z",
        "obj_info units m",
        f"element face {len(t)}",
        "comment the faces",
        "property list uchar int vertex_indices",
        "obj_info last line",
        "end_header",
    ]
    out = ("\n".join(head) + "\n").encode()
    if binary:
        out += v.astype("<f8").tobytes()
        out += b"".join(struct.pack("<B3i", 3, *map(int, f)) for f in t)
    else:
        out += "".join(f"{a!r} {b!r} {c!r}\n" for a, b, c in v.tolist()).encode()
        out += "".join(f"3 {a} {b} {c}\n" for a, b, c in t.tolist()).encode()
    return out, v, t


@pytest.mark.parametrize("binary", [False, True], ids=["ascii", "binary"])
def test_ply_with_obj_info_and_comments_anywhere_in_the_header_is_read(tmp_path, binary):
    data, v, t = _ply_with_info(binary)
    path = tmp_path / "info.ply"
    path.write_bytes(data)
    m = load_mesh(path)
    assert np.array_equal(m.vertices, v) and np.array_equal(m.triangles, t)
    assert np.array_equal(load_points(path).points, v)
    spec = scene_from_file(path)
    assert spec.obstacles == (Mesh(v, t, 1, "info"),)
    if binary:  # the same header with CR LF line ends
        crlf = tmp_path / "crlf.ply"
        head, body = data.split(b"end_header\n", 1)
        crlf.write_bytes(head.replace(b"\n", b"\r\n") + b"end_header\r\n" + body)
        assert np.array_equal(load_mesh(crlf).triangles, t)


@pytest.mark.parametrize("binary", [False, True], ids=["ascii", "binary"])
def test_splat_ply_with_obj_info_after_the_element_is_read_and_kept(tmp_path, binary):
    torch = pytest.importorskip("torch")
    from volary.sensors.splat import GaussianSplats, load_ply, save_ply

    g = 5
    splats = GaussianSplats(
        torch.randn(g, 3, generator=torch.Generator().manual_seed(0)),
        torch.tensor([[1.0, 0.0, 0.0, 0.0]]).repeat(g, 1),
        torch.full((g, 3), -2.0),
        torch.zeros(g),
        torch.rand(g, 1, 3, generator=torch.Generator().manual_seed(1)),
    )
    ref = tmp_path / "ref.ply"
    save_ply(ref, splats)
    fmt = "binary_little_endian" if binary else "ascii"
    head, body = ref.read_bytes().split(b"end_header\n", 1)
    if not binary:  # the same splats as ascii rows
        from plyfile import PlyData

        rows = PlyData.read(str(ref))["vertex"].data
        body = "".join(" ".join(repr(float(x)) for x in r) + "\n" for r in rows).encode()
    head = head.replace(b"format binary_little_endian 1.0", f"format {fmt} 1.0".encode())
    head = head.replace(b"property float x\n", b"obj_info capture 7\nproperty float x\n")
    path = tmp_path / "info.ply"
    path.write_bytes(head + b"obj_info end\nend_header\n" + body)
    got = load_ply(path)
    assert torch.equal(got.means, splats.means) and torch.equal(got.sh, splats.sh)
    assert got.layout.obj_info == ("capture 7", "end")


def test_splat_means_outside_the_world_extent_are_refused(tmp_path):
    torch = pytest.importorskip("torch")
    from volary.sensors.splat import GaussianSplats, load_ply, save_ply

    means = torch.tensor([[0.0, 0.0, 1.0], [0.0, 3e5, 1.0]])
    splats = GaussianSplats(
        means, torch.tensor([[1.0, 0, 0, 0]]).repeat(2, 1), torch.full((2, 3), -2.0),
        torch.zeros(2), torch.zeros(2, 1, 3),
    )  # fmt: skip
    path = tmp_path / "far.ply"
    save_ply(path, splats)
    with pytest.raises(FileFormatError) as e:
        load_ply(path)
    assert "Gaussian 1: y = 300000 is outside the world extent" in _one_line(e.value, path)


def test_ascii_pcd_rows_beyond_the_declared_points_are_refused(tmp_path):
    """Before: rows past POINTS were dropped without a word (ascii PLY already refused them)."""
    path = tmp_path / "more.pcd"
    write_pcd(path, np.zeros((2, 3)))
    path.write_bytes(path.read_bytes() + b"1 2 3\n")
    with pytest.raises(FileFormatError) as e:
        load_points(path)
    assert "1 row(s) of data after the 2 declared points" in _one_line(e.value, path)


@pytest.mark.parametrize("text", ["v 1_000 0 0", "v \u0661 0 0"])
def test_obj_numbers_are_numbers_as_files_write_them(tmp_path, text):
    """Python's float() takes 1_000 and Arabic-Indic digits; an OBJ file does not."""
    path = tmp_path / "n.obj"
    path.write_text(f"{text}\nv 1 0 0\nv 0 1 0\nf 1 2 3\n", encoding="utf-8")
    with pytest.raises(FileFormatError, match="line 1: malformed vertex"):
        load_mesh(path)


def test_a_surface_sampled_finer_than_the_point_limit_is_refused_before_allocating(tmp_path):
    """Before: a 10 km triangle sampled at 1 mm allocated a 10^7 x 10^7 lattice."""
    tri = Mesh(np.array([[0, 0, 0], [1e4, 0, 0], [0, 1e4, 0.0]]), np.array([[0, 1, 2]]))
    spec = SceneSpec("tri", (-1, -1, -1), (1e4 + 1, 1e4 + 1, 1), (tri,))

    def export() -> None:
        with pytest.raises(ConfigError, match="^spacing: 0.001 m puts about 5e\\+13 points"):
            export_scene(spec, tmp_path / "t.pcd", spacing=0.001)

    assert _peak(export) < 5_000_000


def test_the_preview_of_a_long_thin_scene_is_a_bounded_png(tmp_path):
    """Before: the figure was sized by the scene's aspect ratio: a scene 2 m wide and 1 km
    long gave a PNG of 700 x 350,060 pixels (a 1 GB image buffer)."""
    pytest.importorskip("matplotlib")
    from volary.worlds.preview import plot_top_view

    spec = SceneSpec("thin", (0, 0, 0), (2, 1000, 3), start=(1, 1, 1), goal=(1, 999, 1))
    png = plot_top_view(spec, tmp_path / "thin.png").read_bytes()
    width, height = struct.unpack(">II", png[16:24])
    assert width <= 700 and height <= 2160


def test_declared_count_limits_refuse_each_format_naming_the_count(tmp_path, monkeypatch):
    """``LIMITS["scene_vertices"]`` / ``["scene_faces"]`` are checked by every reader before
    the rows are allocated (tested with limits of 7 rows: a real file over 2^24 rows is
    hundreds of MB)."""
    for key in ("scene_vertices", "scene_faces"):
        monkeypatch.setitem(LIMITS, key, replace(LIMITS[key], hi=7))
    v, t = _cube()  # 8 vertices, 12 triangles
    mesh = MeshScene(v, t)
    write_ply(tmp_path / "m.ply", mesh, binary=True)
    write_obj(tmp_path / "m.obj", mesh)
    export_scene(SceneSpec("c", (-1, -1, -1), (1, 1, 2), (Box((0, 0, 1), (1, 1, 1)),)),
                 tmp_path / "m.stl")  # fmt: skip
    write_pcd(tmp_path / "p.pcd", v)
    expect = {
        "m.ply": "8 PLY vertices; expected at most 7 (vertices or points of a scene file)",
        "m.obj": "8 OBJ vertices; expected at most 7",
        "m.stl": "12 STL triangles; expected at most 7 (triangles of a scene file)",
        "p.pcd": "8 PCD points; expected at most 7",
    }
    for name, what in expect.items():
        read = load_points if name.endswith("pcd") else load_mesh
        with pytest.raises(FileFormatError) as e:
            read(tmp_path / name)
        assert what in _one_line(e.value, tmp_path / name)


# ---- property tests -----------------------------------------------------------------------------
NEAR = st.floats(-8.0, 8.0, allow_nan=False, width=32)
ODD = st.sampled_from([1e5, -1e5, 99999.5, 5e-324, -0.0,  # inside the world extent
                       1.5e5, -2e5, 1e6, 1e300, -3e38, float("nan"), float("inf"),
                       float("-inf")])  # fmt: skip
FORMATS = ["ply-ascii", "ply-binary", "ply-points", "obj", "stl", "stl-ascii", "pcd-ascii",
           "pcd-binary"]  # fmt: skip
EXTRA_LINES = st.lists(
    st.tuples(
        st.integers(0, 20),
        st.sampled_from(["comment hand made", "obj_info scanner 3", "comment", "obj_info"]),
    ),
    max_size=4,
)


@st.composite
def scene_files(draw: st.DrawFn, lies: st.SearchStrategy[int]) -> dict:
    """A generated mesh or point cloud and how to write it: the format, the property type,
    comment/obj_info lines put anywhere in the header, and a lie added to a declared count."""
    n = draw(st.integers(0, 10))
    v = np.array(draw(st.lists(NEAR, min_size=3 * n, max_size=3 * n)), dtype=float)
    index = st.integers(0, max(n - 1, 0))
    least = 0 if draw(st.integers(0, 9)) == 0 else 1  # a mesh without faces now and then
    faces = draw(st.lists(st.tuples(index, index, index), min_size=least, max_size=8))
    f = np.array(faces, dtype=np.int64).reshape(-1, 3)
    if n and draw(st.integers(0, 2)) == 0:  # coordinates far away, on the extent's edge, NaN
        for i, x in draw(
            st.lists(st.tuples(st.integers(0, 3 * n - 1), ODD), min_size=1, max_size=2)
        ):
            v.reshape(-1)[i] = x
    if len(f) and draw(st.integers(0, 3)) == 0:  # an index out of range
        k, j = draw(st.integers(0, len(f) - 1)), draw(st.integers(0, 2))
        f[k, j] = draw(st.sampled_from([-2, -1, n, n + 1]))
    v = v.reshape(-1, 3)
    return {
        "fmt": draw(st.sampled_from(FORMATS)),
        "v": v,
        "f": f,
        "double": draw(st.booleans()),
        "extra": draw(EXTRA_LINES),
        "lie": draw(lies),
        "lie_at": draw(st.integers(0, 1)),
    }


def _insert(head: list[str], extra: list[tuple[int, str]]) -> list[str]:
    """``head`` (magic line first, end line last) with the extra lines at the given places."""
    out = list(head[:-1])
    for pos, line in extra:
        out.insert(1 + pos % len(out), line)
    return out + head[-1:]


def _has_area(v: np.ndarray, f: np.ndarray) -> bool:
    """Some face of the mesh has a positive area."""
    tri = v[f]
    cross = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    return bool(np.any(np.einsum("ij,ij->i", cross, cross) > 0))


def _write(case: dict, folder: Path) -> tuple[Path, bool]:
    """Write a generated case; the path and whether the reader must accept it."""
    fmt, v, f, lie = case["fmt"], case["v"], case["f"], case["lie"]
    double = case["double"]
    ftype, np_t = ("double", "<f8") if double else ("float", "<f4")
    stored = v.astype(np_t).astype(float)
    ok_v = len(v) > 0 and bool(np.all(np.isfinite(stored)) and np.all(np.abs(stored) <= EXTENT))
    if fmt.startswith("stl"):  # STL stores corners: faces are taken in range
        f = f % max(len(v), 1) if len(v) else f[:0]
    ok_f = len(f) > 0 and bool(np.all((f >= 0) & (f < len(v))))
    if fmt.startswith("ply"):
        points = fmt == "ply-points"
        nv, nf = len(v), len(f)
        if case["lie_at"] == 0 or points:
            nv += lie
        else:
            nf += lie
        head = ["ply", f"format {'ascii' if fmt == 'ply-ascii' else 'binary_little_endian'} 1.0",
                f"element vertex {nv}"] + [f"property {ftype} {c}" for c in "xyz"]  # fmt: skip
        if not points:
            head += [f"element face {nf}", "property list uchar int vertex_indices"]
        head = _insert(head + ["end_header"], case["extra"])
        body = b""
        if fmt == "ply-ascii":
            body += "".join(" ".join(repr(float(x)) for x in r) + "\n" for r in v).encode()
            if not points:
                body += "".join(f"3 {a} {b} {c}\n" for a, b, c in f).encode()
        else:
            body += v.astype(np_t).tobytes()
            if not points:
                body += b"".join(struct.pack("<B3i", 3, *map(int, r)) for r in f)
        data = ("\n".join(head) + "\n").encode() + body
        accept = ok_v and (points or ok_f)
    elif fmt == "obj":
        lines = [f"v {x!r} {y!r} {z!r}" for x, y, z in v.tolist()]
        lines += ["f " + " ".join(str(i + 1) if i >= 0 else "0" for i in r) for r in f]
        lines = _insert(["# obj", *lines, ""], [(p, "# " + t) for p, t in case["extra"]])
        data, stored = "\n".join(lines).encode(), v
        ok_v = len(v) > 0 and bool(np.all(np.isfinite(v)) and np.all(np.abs(v) <= EXTENT))
        accept = ok_v and ok_f
    elif fmt == "stl":
        corners = v[f].astype("<f4") if len(f) else np.zeros((0, 3, 3), "<f4")
        rec = b"".join(b"\0" * 12 + c.tobytes() + b"\0\0" for c in corners)
        count = min(max(len(f) + lie, 0), 2**32 - 1)
        data = b"volary test".ljust(80) + struct.pack("<I", count) + rec
        stored = v.astype("<f4").astype(float)
        ok_c = bool(np.all(np.isfinite(corners)) and np.all(np.abs(corners) <= EXTENT))
        accept = len(f) > 0 and ok_c and lie == 0
    elif fmt == "stl-ascii":
        facets = "".join("facet normal 0 0 1\nouter loop\n" + "".join(
            f"vertex {x!r} {y!r} {z!r}\n" for x, y, z in v[r].tolist()) + "endloop\nendfacet\n"
            for r in f)  # fmt: skip
        data, stored = f"solid s\n{facets}endsolid s\n".encode(), v
        ok_c = bool(np.all(np.isfinite(v[f])) and np.all(np.abs(v[f]) <= EXTENT))
        accept = len(f) > 0 and ok_c
    else:  # pcd
        n = len(v) + lie
        size = 8 if double else 4
        head = ["# .PCD v0.7", "VERSION 0.7", "FIELDS x y z", f"SIZE {size} {size} {size}",
                "TYPE F F F", "COUNT 1 1 1", f"WIDTH {n}", "HEIGHT 1", "VIEWPOINT 0 0 0 1 0 0 0",
                f"POINTS {n}", f"DATA {fmt.split('-')[1]}"]  # fmt: skip
        head = _insert(head, [(p, "# " + t) for p, t in case["extra"]])
        if fmt == "pcd-ascii":  # read as float64 whatever SIZE says
            body = "".join(" ".join(repr(float(x)) for x in r) + "\n" for r in v).encode()
            stored = v
            ok_v = len(v) > 0 and bool(np.all(np.isfinite(v)) and np.all(np.abs(v) <= EXTENT))
        else:
            body = v.astype(np_t).tobytes()
        data = ("\n".join(head) + "\n").encode() + body
        accept = ok_v
    if accept and fmt in ("ply-ascii", "ply-binary", "obj", "stl", "stl-ascii"):
        accept = _has_area(np.asarray(stored, dtype=float), f)  # all faces degenerate: no surface
    accept = accept and lie == 0
    path = folder / f"case.{fmt.split('-')[0]}"
    path.write_bytes(data)
    case["stored"] = stored
    case["f"] = f
    return path, accept


def _check_scene(path: Path) -> None:
    """scene_from_file gives a scene whose invariants hold, or a one-line VolaryError."""
    from volary.worlds.grid import grid_shape

    try:
        spec = scene_from_file(path)
    except VolaryError as e:
        _one_line(e, path)
        return
    lo, hi = np.array(spec.bounds_min), np.array(spec.bounds_max)
    assert np.all(np.abs([lo, hi]) <= EXTENT) and np.all(lo < hi)
    for o in spec.obstacles:
        if isinstance(o, Mesh):
            assert np.all(np.abs(o.vertices) <= EXTENT)
            assert o.triangles.min() >= 0 and o.triangles.max() < len(o.vertices)
        else:
            assert np.all(np.abs(o.center) <= EXTENT + 1)
    try:  # the grid's size is checked before anything is allocated
        shape = grid_shape(spec, 0.25)
    except ConfigError as e:
        assert "\n" not in str(e)
    else:
        assert min(shape) >= 1 and np.prod(shape, dtype=float) <= LIMITS["grid_cells"].hi


def _check_read(case: dict, path: Path, accept: bool) -> None:
    mesh = case["fmt"] in ("ply-ascii", "ply-binary", "obj", "stl", "stl-ascii")
    try:
        got = load_mesh(path) if mesh else load_points(path)
    except VolaryError as e:
        _one_line(e, path)
        assert not accept, f"a valid file was refused: {e}"
        return
    v = np.asarray(got.vertices if mesh else got.points)
    assert v.ndim == 2 and v.shape[1] == 3 and len(v) > 0
    assert np.all(np.isfinite(v)) and np.all(np.abs(v) <= EXTENT)
    if mesh:
        t = np.asarray(got.triangles)
        assert t.ndim == 2 and t.shape[1] == 3 and len(t) > 0
        assert t.min() >= 0 and t.max() < len(v)
    assert accept or case["lie"] != 0, "an invalid file was accepted"
    if accept and case["fmt"].startswith("stl"):  # corners, as STL merges vertices
        want = case["stored"][case["f"]].reshape(-1, 3)
        assert np.array_equal(v[got.triangles].reshape(-1, 3), want)
    elif accept:
        assert np.array_equal(v, case["stored"])
        if mesh:
            assert np.array_equal(got.triangles, case["f"])


@given(case=scene_files(lies=st.sampled_from([0, 0, 0, 0, -2, -1, 1, 3])))
@settings(max_examples=150)
def test_generated_scene_files_give_a_valid_scene_or_a_one_line_error(case, tmp_path_factory):
    folder = tmp_path_factory.mktemp("case")
    path, accept = _write(case, folder)
    _check_read(case, path, accept)
    _check_scene(path)


@pytest.mark.slow
@given(case=scene_files(lies=st.sampled_from([0, 0, -2, -1, 1, 3])))
@settings(max_examples=2000)
def test_generated_scene_files_long_sweep(case, tmp_path_factory):
    folder = tmp_path_factory.mktemp("case")
    path, accept = _write(case, folder)
    _check_read(case, path, accept)
    _check_scene(path)


@pytest.fixture(scope="module")
def reader():
    """A worker process reading files under a 2 GiB address-space limit (tests/_fuzz.py)."""
    from _fuzz import _Reader

    r = _Reader()
    yield r
    r.close()


HUGE = st.sampled_from([2**31, 10**12, 2**62, 2**63 - 1 - 10, 2**64])


@given(case=scene_files(lies=HUGE))
@settings(max_examples=16)
def test_huge_declared_counts_are_refused_without_allocating(case, reader, tmp_path_factory):
    """Counts of 2^31 to 2^64 rows declared by files of a few hundred bytes: refused in a
    process limited to 2 GiB of address space (no MemoryError, no crash, no hang)."""
    if case["fmt"] in ("obj", "stl-ascii"):  # no declared counts
        case["fmt"] = "pcd-binary"
    folder = tmp_path_factory.mktemp("huge")
    path, _ = _write(case, folder)
    kind = "mesh" if case["fmt"] in ("ply-ascii", "ply-binary", "stl") else "points"
    outcome, detail = reader.read(path, kind)
    assert outcome == "clean", (outcome, detail)
    assert detail.startswith(str(path)) and "\n" not in detail


@pytest.mark.parametrize("tail", [b"", b"\n", struct.pack("<3f", 7.0, 8.0, 9.0)])
def test_a_binary_ply_row_the_header_does_not_count_is_refused(tail, tmp_path) -> None:
    """A binary body longer than its declared rows would be dropped silently (the reader stops
    at the count): refused, naming the bytes; a trailing newline some writers add is fine."""
    from volary.worlds.io import load_points

    head = b"ply\nformat binary_little_endian 1.0\nelement vertex 2\n"
    head += b"property float x\nproperty float y\nproperty float z\nend_header\n"
    p = tmp_path / "pts.ply"
    p.write_bytes(head + struct.pack("<6f", 1, 2, 3, 4, 5, 6) + tail)
    if len(tail) > 1:
        with pytest.raises(FileFormatError, match="12 bytes of data after the declared PLY rows"):
            load_points(p)
    else:
        assert load_points(p).points.shape == (2, 3)


@pytest.mark.parametrize("suffix", ["obj", "ply"])
def test_a_mesh_whose_every_face_is_degenerate_is_refused(suffix, tmp_path) -> None:
    """No face with an area is no surface to hit: refused; one good face among bad ones is fine."""
    from volary.worlds.io import load_mesh

    p = tmp_path / f"m.{suffix}"
    v = "v 0 0 0\nv 1 0 0\nv 2 0 0\nv 0 1 0\n"
    if suffix == "obj":
        p.write_text(v + "f 1 2 3\nf 1 1 2\n")
    else:
        p.write_text("ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
                     "property float z\nelement face 1\nproperty list uchar int vertex_indices\n"
                     "end_header\n0 0 0\n1 0 0\n2 0 0\n3 0 1 2\n")  # fmt: skip
    with pytest.raises(FileFormatError, match="no face of positive area"):
        load_mesh(p)
    if suffix == "obj":
        p.write_text(v + "f 1 2 3\nf 1 2 4\n")
        assert load_mesh(p).triangles.shape == (2, 3)


def test_an_ascii_stl_cut_inside_its_last_facet_is_refused(tmp_path) -> None:
    from volary.worlds.io import load_mesh

    facet = (
        "facet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nvertex 0 1 0\n"
        "endloop\nendfacet\n"
    )
    p = tmp_path / "cut.stl"
    p.write_text("solid s\n" + facet + facet.replace("0 1 0", "0 0 1").split("endloop")[0])
    with pytest.raises(FileFormatError, match="2 triangles but 1 'endloop' lines"):
        load_mesh(p)
    p.write_text("solid s\n" + facet + "endsolid s\n")
    assert load_mesh(p).triangles.shape == (1, 3)
