"""Scene files: SceneSpec -> PLY/OBJ/STL triangle meshes and PCD/PLY point clouds, and back.

The writers are written here. PLY files are read by plyfile (ascii, binary_little_endian and
binary_big_endian; imported on first use). OBJ (v/f, polygons fan-triangulated, negative
indices), STL (ascii and binary) and PCD (ascii and binary; ``binary_compressed`` is refused)
are read by the parsers here: the maintained libraries tried read them less well (the reasons
are in ``worlds/DESIGN.md``). Output is deterministic: the same spec gives the same bytes. Every
malformed input raises :class:`~volary.errors.FileFormatError` whose message starts with the
file path, and sizes from headers are checked against the bytes present before anything is
allocated, so a lying header cannot hang or exhaust memory. :func:`load_mesh` and
:func:`load_points` also refuse more rows than ``volary.inputs.LIMITS`` declares
(``scene_vertices``, ``scene_faces``) and coordinates outside the world extent
(``LIMITS["coordinate"]``, :func:`check_extent`).
"""

from __future__ import annotations

import io as _stdio
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from volary.errors import ConfigError, FileFormatError, VolaryError, not_one_of
from volary.inputs import LIMITS
from volary.worlds.primitives import (
    Box,
    Cylinder,
    Mesh,
    Plane,
    Primitive,
    SceneSpec,
    Sphere,
    gate_boxes,
)

if TYPE_CHECKING:  # plyfile is imported where a PLY file is read
    from plyfile import PlyData, PlyElement


@dataclass(frozen=True)
class MeshScene:
    """A triangle mesh in the world frame (m)."""

    vertices: np.ndarray  # (V, 3) float64 m
    triangles: np.ndarray  # (T, 3) int64 vertex indices, counter-clockwise seen from outside
    name: str = ""
    object_ids: np.ndarray | None = None  # (T,) int64 object id per triangle, when known


@dataclass(frozen=True)
class PointCloud:
    """Points in the world frame (m)."""

    points: np.ndarray  # (N, 3) float64 m
    name: str = ""


# ----------------------------------------------------------------------------- tessellation
_BOX_TRIS = np.array(
    [
        [0, 2, 1],
        [1, 2, 3],
        [4, 5, 6],
        [5, 7, 6],
        [0, 1, 5],
        [0, 5, 4],
        [2, 6, 7],
        [2, 7, 3],
        [0, 4, 6],
        [0, 6, 2],
        [1, 3, 7],
        [1, 7, 5],
    ]
)


def box_mesh(b: Box) -> tuple[np.ndarray, np.ndarray]:
    """8 corners and 12 outward triangles of an oriented box."""
    bits = np.array([[(i >> k) & 1 for k in range(3)] for i in range(8)], dtype=float)
    local = (bits - 0.5) * np.asarray(b.size)
    if b.tilt == (0.0, 0.0):  # level: as before tilted boxes existed, to the last bit
        c, s = math.cos(b.yaw), math.sin(b.yaw)
        rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    else:
        rot = b.axes
    return local @ rot.T + np.asarray(b.center), _BOX_TRIS.copy()


def _basis(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit u, v with (u, v, a) right-handed and orthonormal."""
    helper = np.array([1.0, 0.0, 0.0]) if abs(a[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    u = np.cross(helper, a)
    u /= np.linalg.norm(u)
    return u, np.cross(a, u)


def cylinder_mesh(cy: Cylinder, segments: int = 24) -> tuple[np.ndarray, np.ndarray]:
    """Two rings of ``segments`` vertices; 2 * segments side and 2 * (segments - 2) cap tris."""
    a = np.asarray(cy.axis)
    u, v = _basis(a)
    th = 2 * np.pi * np.arange(segments) / segments
    ring = cy.radius * (np.cos(th)[:, None] * u + np.sin(th)[:, None] * v)
    c = np.asarray(cy.center)
    verts = np.vstack([c - a * cy.length / 2 + ring, c + a * cy.length / 2 + ring])
    k = np.arange(segments)
    k1 = (k + 1) % segments
    side = np.vstack(
        [np.stack([k, k1, k1 + segments], 1), np.stack([k, k1 + segments, k + segments], 1)]
    )
    f = np.arange(1, segments - 1)
    top = np.stack([np.full_like(f, segments), f + segments, f + 1 + segments], 1)
    bottom = np.stack([np.zeros_like(f), f + 1, f], 1)
    return verts, np.vstack([side, top, bottom])


def sphere_mesh(sp: Sphere, segments: int = 24) -> tuple[np.ndarray, np.ndarray]:
    """UV sphere: two poles and ``segments // 2 - 1`` rings of ``segments`` vertices."""
    rings = max(2, segments // 2)
    lat = np.pi * np.arange(1, rings) / rings
    lon = 2 * np.pi * np.arange(segments) / segments
    ring = np.stack(
        [
            np.outer(np.sin(lat), np.cos(lon)),
            np.outer(np.sin(lat), np.sin(lon)),
            np.repeat(np.cos(lat)[:, None], segments, 1),
        ],
        -1,
    ).reshape(-1, 3)
    unit = np.vstack([[0.0, 0.0, 1.0], ring, [0.0, 0.0, -1.0]])
    south = len(unit) - 1
    k = np.arange(segments)
    k1 = (k + 1) % segments
    tris = [np.stack([np.zeros_like(k), 1 + k, 1 + k1], 1)]
    for r in range(rings - 2):
        a, b = 1 + r * segments, 1 + (r + 1) * segments
        tris += [np.stack([a + k, b + k, b + k1], 1), np.stack([a + k, b + k1, a + k1], 1)]
    last = 1 + (rings - 2) * segments
    tris.append(np.stack([np.full_like(k, south), last + k1, last + k], 1))
    return unit * sp.radius + np.asarray(sp.center), np.vstack(tris)


_BOX_EDGES = [(i, i ^ (1 << k)) for i in range(8) for k in range(3) if not i & (1 << k)]


def plane_mesh(pl: Plane, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The plane clipped to the box [lo, hi] as a triangle fan facing along its normal."""
    n, p0 = np.asarray(pl.normal), np.asarray(pl.point)
    corners = np.array([[hi[k] if (i >> k) & 1 else lo[k] for k in range(3)] for i in range(8)])
    sd = (corners - p0) @ n
    pts = [
        corners[i] + sd[i] / (sd[i] - sd[j]) * (corners[j] - corners[i])
        for i, j in _BOX_EDGES
        if (sd[i] < 0) != (sd[j] < 0)
    ]
    if len(pts) < 3:
        return np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64)
    poly = np.asarray(pts)
    u, v = _basis(n)
    rel = poly - poly.mean(axis=0)
    poly = poly[np.argsort(np.arctan2(rel @ v, rel @ u), kind="stable")]
    f = np.arange(1, len(poly) - 1)
    return poly, np.stack([np.zeros_like(f), f, f + 1], 1)


def scene_mesh(spec: SceneSpec, segments: int = 24) -> MeshScene:
    """Tessellate every obstacle and gate frame of a spec (planes clipped to its bounds); Mesh
    obstacles are copied as they are, with their object id on every triangle."""
    if segments < 3:
        raise ConfigError(f"segments: expected >= 3, got {segments}")
    lo, hi = np.asarray(spec.bounds_min, float), np.asarray(spec.bounds_max, float)
    prims: list[Primitive] = list(spec.obstacles) + [b for g in spec.gates for b in gate_boxes(g)]
    verts, tris, ids, base = [], [], [], 0
    for prim in prims:
        if isinstance(prim, Box):
            v, t = box_mesh(prim)
        elif isinstance(prim, Cylinder):
            v, t = cylinder_mesh(prim, segments)
        elif isinstance(prim, Sphere):
            v, t = sphere_mesh(prim, segments)
        elif isinstance(prim, Mesh):
            v, t = np.array(prim.vertices), np.array(prim.triangles)
        else:
            v, t = plane_mesh(prim, lo, hi)
        verts.append(v)
        tris.append(t + base)
        ids.append(np.full(len(t), prim.object_id, dtype=np.int64))
        base += len(v)
    if not verts:
        return MeshScene(
            np.zeros((0, 3)), np.zeros((0, 3), np.int64), spec.name, np.zeros(0, np.int64)
        )
    return MeshScene(
        np.vstack(verts), np.vstack(tris).astype(np.int64), spec.name, np.concatenate(ids)
    )


def sample_surface(mesh: MeshScene, spacing: float) -> np.ndarray:
    """Deterministic surface points: on every triangle a lattice along its two edges from the
    first corner, about ``spacing`` (m) apart on each, thinned to the first point in every
    ``spacing / 2`` voxel (removes duplicates on shared edges and clusters on thin triangles)."""
    if not spacing > 0:
        raise ConfigError(f"spacing: expected > 0 m, got {spacing}")
    tri = mesh.vertices[mesh.triangles]  # (T, 3, 3)
    e1, e2 = tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]
    steps = np.maximum(
        1, np.ceil(np.stack([np.linalg.norm(e1, axis=1), np.linalg.norm(e2, axis=1)], 1) / spacing)
    )
    lattice = float(np.sum((steps[:, 0] + 1) * (steps[:, 1] + 1) / 2))  # inf for inf steps
    cap = LIMITS["scene_vertices"]
    if not lattice <= cap.hi:  # before the lattice is allocated
        raise ConfigError(
            f"spacing: {spacing:g} m puts about {lattice:.3g} points on the mesh's surface; "
            f"expected at most {cap.hi:.0f} ({cap.quantity}): use a larger spacing"
        )
    n = steps.astype(int)
    out = []
    for n1, n2 in np.unique(n, axis=0):
        i, j = np.meshgrid(np.arange(n1 + 1), np.arange(n2 + 1), indexing="ij")
        keep = i * n2 + j * n1 <= n1 * n2
        a, b = i[keep] / n1, j[keep] / n2  # (P,)
        sel = np.all(n == (n1, n2), axis=1)
        out.append(
            (
                tri[sel, None, 0]
                + a[None, :, None] * e1[sel, None]
                + b[None, :, None] * e2[sel, None]
            ).reshape(-1, 3)
        )
    if not out:
        return np.zeros((0, 3))
    pts = np.vstack(out)
    _, first = np.unique(
        np.floor(pts / (spacing / 2)).astype(np.int64), axis=0, return_index=True
    )  # one point per spacing/2 voxel (thin triangles)
    return pts[np.sort(first)]


# ----------------------------------------------------------------------------- writers
def _ascii_rows(arr: np.ndarray, fmt: str) -> bytes:
    buf = _stdio.BytesIO()
    np.savetxt(buf, arr, fmt=fmt, delimiter=" ", newline="\n")
    return buf.getvalue()


def _ply_head_bytes(fmt: str, name: str, n_vert: int, n_face: int | None) -> bytes:
    lines = [
        "ply",
        f"format {fmt} 1.0",
        f"comment volary scene {name}",
        f"element vertex {n_vert}",
        "property float x",
        "property float y",
        "property float z",
    ]
    if n_face is not None:
        lines += [f"element face {n_face}", "property list uchar int vertex_indices"]
    return ("\n".join(lines + ["end_header"]) + "\n").encode()


def _write(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path``, its folder created if missing (as every writer in volary)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)


def write_ply(path: str | Path, data: MeshScene | PointCloud, binary: bool = False) -> None:
    """PLY mesh (vertices + faces) or point cloud (vertices only), ascii or binary LE."""
    tris = data.triangles if isinstance(data, MeshScene) else None
    v = data.vertices if isinstance(data, MeshScene) else data.points
    nf = None if tris is None else len(tris)
    out = [_ply_head_bytes("binary_little_endian" if binary else "ascii", data.name, len(v), nf)]
    if binary:
        out.append(np.ascontiguousarray(v, dtype="<f4").tobytes())
        if tris is not None:
            f = np.zeros(len(tris), dtype=[("n", "u1"), ("i", "<i4", (3,))])
            f["n"], f["i"] = 3, tris
            out.append(f.tobytes())
    else:
        out.append(_ascii_rows(np.asarray(v, dtype=np.float32), "%.9g"))
        if tris is not None:
            tri = np.hstack([np.full((len(tris), 1), 3), tris])
            out.append(_ascii_rows(tri, "%d"))
    _write(path, b"".join(out))


def write_obj(path: str | Path, mesh: MeshScene) -> None:
    """Wavefront OBJ: one ``v`` line per vertex, one ``f`` line per triangle (1-based)."""
    head = f"# volary scene {mesh.name}\no {mesh.name or 'scene'}\n".encode()
    v = np.hstack([np.zeros((len(mesh.vertices), 0)), mesh.vertices])
    body = _ascii_rows(v, "v %.9g %.9g %.9g") + _ascii_rows(mesh.triangles + 1, "f %d %d %d")
    _write(path, head + body)


def write_stl(path: str | Path, mesh: MeshScene) -> None:
    """Binary STL (facet normals from the winding)."""
    tri = mesh.vertices[mesh.triangles]
    nrm = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    nrm /= np.maximum(np.linalg.norm(nrm, axis=1, keepdims=True), 1e-30)
    rec = np.zeros(len(tri), dtype=[("n", "<f4", (3,)), ("v", "<f4", (3, 3)), ("a", "<u2")])
    rec["n"], rec["v"] = nrm, tri
    head = f"volary scene {mesh.name}".encode()[:80].ljust(80, b" ")
    _write(path, head + np.uint32(len(tri)).tobytes() + rec.tobytes())


def write_pcd(path: str | Path, points: np.ndarray, binary: bool = False) -> None:
    """PCD v0.7 with float x y z, unorganized (HEIGHT 1), ascii or binary."""
    p = np.asarray(points, dtype=np.float32).reshape(-1, 3)
    head = (
        "# .PCD v0.7 - Point Cloud Data file format\nVERSION 0.7\nFIELDS x y z\n"
        "SIZE 4 4 4\nTYPE F F F\nCOUNT 1 1 1\n"
        f"WIDTH {len(p)}\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS {len(p)}\n"
        f"DATA {'binary' if binary else 'ascii'}\n"
    ).encode()
    body = p.astype("<f4").tobytes() if binary else _ascii_rows(p, "%.9g")
    _write(path, head + body)


FORMATS = ("ply", "obj", "stl", "pcd")


def export_scene(
    spec: SceneSpec,
    path: str | Path,
    format: str | None = None,
    *,
    binary: bool = False,
    spacing: float = 0.2,
    segments: int = 24,
) -> Path:
    """Write a spec as a mesh (ply, obj, stl) or a surface point cloud (pcd; ``spacing`` m).
    ``format`` defaults to the file suffix."""
    path = Path(path)
    fmt = (format or path.suffix.lstrip(".")).lower()
    if fmt not in FORMATS:
        raise not_one_of("format", fmt, FORMATS, shown=str(FORMATS))
    mesh = scene_mesh(spec, segments)
    if fmt == "ply":
        write_ply(path, mesh, binary)
    elif fmt == "obj":
        write_obj(path, mesh)
    elif fmt == "stl":
        write_stl(path, mesh)
    else:
        write_pcd(path, sample_surface(mesh, spacing), binary)
    return path


# ----------------------------------------------------------------------------- readers
_MAX_HEADER = 1 << 16  # bytes searched for a PLY end_header or PCD DATA line
# List lengths tried, in order, for plyfile's memory-mapped reading of binary elements with list
# properties (triangle, then quad meshes) before its general row-by-row reader.
_PLY_LIST_GUESSES = (3, 4)


def _fail(path: str | Path, problem: str) -> FileFormatError:
    return FileFormatError(f"{path}: {problem}")


def _regular(path: str | Path) -> None:
    """A regular file, or FileFormatError: a FIFO or a device would block or never end."""
    try:
        ok = Path(path).is_file()
    except OSError as e:
        raise _fail(path, f"cannot read the file ({e.strerror or e})") from e
    if not ok:
        what = "no such file" if not Path(path).exists() else "not a regular file"
        raise _fail(path, f"cannot read the file ({what})")


def _read(path: str | Path) -> bytes:
    """The whole file (text formats, STL, PCD), its size checked against
    ``LIMITS["scene_file"]`` before it is read."""
    _regular(path)
    limit = int(LIMITS["scene_file"].hi)
    try:
        size = Path(path).stat().st_size
    except OSError as e:
        raise _fail(path, f"cannot read the file ({e.strerror or e})") from e
    if size > limit:
        raise _fail(path, f"the file is {size} bytes; expected at most {limit} bytes")
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise _fail(path, f"cannot read the file ({e.strerror or e})") from e


def _floats(path: str | Path, tokens: list[bytes], what: str) -> np.ndarray:
    if any(b"_" in t for t in tokens):  # Python's float() takes 1_000; no file format does
        bad = next(t for t in tokens if b"_" in t)
        raise _fail(path, f"{what}: non-numeric value {bad[:40]!r}")
    try:
        return np.array([float(t) for t in tokens], dtype=float)
    except ValueError as e:
        raise _fail(path, f"{what}: non-numeric value ({e})") from e


@dataclass(frozen=True)
class _PlyHeader:
    """A PLY header as plyfile parses it: ``layout`` (format, elements, counts, property types;
    no data), the header bytes handed to plyfile and the offset of the body in the file."""

    layout: PlyData
    text: bytes  # the header with its obj_info lines taken out (plyfile refuses some)
    obj_info: tuple[str, ...]
    start: int  # offset of the body in the file


def check_ply(path: str | Path) -> PlyData:
    """Refuse a PLY file whose header does not parse or declares more rows than the file holds
    (binary: bytes; ascii: lines), or an ascii one with rows beyond those declared: before any
    reader allocates what the header claims (the splat reader calls it too). Returns plyfile's
    parse of the header."""
    return _ply_checked(path).layout


def _ply_checked(path: str | Path) -> _PlyHeader:
    header = _ply_layout(path, _head(path))
    _ply_check_counts(path, header.layout, header.start)
    return header


def read_ply_data(path: str | Path) -> PlyData:
    """Every element of a PLY file, read by plyfile after :func:`check_ply`: ``comment`` and
    ``obj_info`` lines are taken anywhere in the header (the PLY format allows them there), and
    every problem is a one-line :class:`FileFormatError` naming the file."""
    return _ply_data(path, _ply_checked(path))


def _head(path: str | Path) -> bytes:
    """The first :data:`_MAX_HEADER` bytes of a file."""
    _regular(path)
    try:
        with open(path, "rb") as f:
            return f.read(_MAX_HEADER)
    except OSError as e:
        raise _fail(path, f"cannot read the file ({e.strerror or e})") from e


def _ply_newline(head: bytes) -> bytes | None:
    """The line ending of a PLY header (that of its ``ply`` line), None when there is none."""
    for nl in (b"\r\n", b"\n", b"\r"):
        if head.startswith(b"ply" + nl):
            return nl
    return None


def _ply_without_obj_info(head: bytes) -> tuple[bytes, tuple[str, ...], int]:
    """The header up to its ``end_header`` line with the ``obj_info`` lines taken out (plyfile
    1.1 refuses one after an ``element`` line, which the PLY format allows), their texts, and
    the number of bytes taken out. A header without a well-formed line structure is returned
    as it is, for plyfile to name its problem."""
    nl = _ply_newline(head)
    if nl is None:
        return head, (), 0
    kept, info, pos = [], [], 0
    while True:
        end = head.find(nl, pos)
        if end < 0:
            return head, (), 0
        line = head[pos : end + len(nl)]
        pos = end + len(nl)
        words = line.split(None, 1)
        if words and words[0] == b"obj_info":
            info.append(line.strip()[len(b"obj_info") + 1 :].decode("ascii", "replace"))
            continue
        kept.append(line)
        if line[: -len(nl)] == b"end_header":
            text = b"".join(kept)
            return text, tuple(info), pos - len(text)


def _ply_layout(path: str | Path, head: bytes) -> _PlyHeader:
    """plyfile's parse of the header (format, elements, counts, property types; no data) and
    the offset of the body."""
    if not head.startswith(b"ply"):
        raise _fail(path, "not a PLY file (missing 'ply' magic line)")
    if b"end_header" not in head:
        raise _fail(path, f"PLY header has no end_header line in its first {_MAX_HEADER} bytes")
    text, info, removed = _ply_without_obj_info(head)
    layout, size = _ply_parse(path, text)
    layout.obj_info = list(info)
    return _PlyHeader(layout, text[:size], info, size + removed)


def _ply_parse(path: str | Path, text: bytes) -> tuple[PlyData, int]:
    """plyfile's header parser (the one ``PlyData.read`` starts with) over ``text``, and the
    number of bytes it took."""
    from plyfile import PlyData, PlyHeaderParseError

    stream = _stdio.BytesIO(text)
    try:
        layout = PlyData._parse_header(stream)
    except PlyHeaderParseError as e:
        if e.message == "early end-of-file":
            raise _fail(path, "PLY header has no end_header line") from e
        raise _fail(path, f"unsupported or malformed PLY header line {e.line}: {e.message}") from e
    except UnicodeDecodeError as e:
        raise _fail(path, "PLY header is not ASCII text") from e
    except ValueError as e:  # e.g. two elements with the same name
        raise _fail(path, f"malformed PLY header ({e})") from e
    return layout, stream.tell()


def _ply_min_row(element: PlyElement) -> int:
    """Fewest bytes a binary row of a plyfile element can take (lists empty)."""
    from plyfile import PlyListProperty

    return sum(
        np.dtype(p.list_dtype()[0] if isinstance(p, PlyListProperty) else p.dtype()).itemsize
        for p in element.properties
    )


def _ply_check_counts(path: str | Path, layout: PlyData, start: int) -> None:
    """Row counts from the header against the bytes (binary) or lines (ascii) present, before
    plyfile allocates an array of that many rows."""
    if layout.text:
        body = _read(path)[start:]
        have = max(body.count(b"\n"), body.count(b"\r")) + 1
        rows = sum(max(el.count, 0) for el in layout.elements)
        lines = sum(1 for line in body.splitlines() if line.strip())
        if lines > rows:
            raise _fail(path, f"{lines - rows} line(s) of data after the {rows} declared rows")
    else:
        try:
            have = Path(path).stat().st_size - start
        except OSError as e:
            raise _fail(path, f"cannot read the file ({e.strerror or e})") from e
    for el in layout.elements:
        if el.count < 0:
            raise _fail(path, f"PLY element {el.name!r} has a negative row count {el.count}")
        if el.count and not el.properties:
            raise _fail(path, f"PLY element {el.name!r} has rows but no properties")
        need = el.count * (1 if layout.text else _ply_min_row(el))
        if need > have:
            unit = "lines" if layout.text else "bytes"
            raise _fail(
                path,
                f"truncated: PLY element {el.name!r} declares {el.count} rows, needs at least "
                f"{need} {unit}, {max(have, 0)} remain",
            )
        have -= need
    if not layout.text and have > 0 and _ply_fixed_rows(layout):
        _ply_check_tail(path, start, have)


def _ply_fixed_rows(layout: PlyData) -> bool:
    """Every element's rows have one size (no list properties): the body's length is known."""
    from plyfile import PlyListProperty

    return not any(isinstance(p, PlyListProperty) for el in layout.elements for p in el.properties)


def _ply_check_tail(path: str | Path, start: int, extra: int) -> None:
    """A binary body longer than its declared rows: refused unless the extra bytes are only
    line ends or padding (some writers end the file with a newline); a row the header does not
    count is data the reader would silently drop."""
    with open(path, "rb") as f:
        f.seek(-min(extra, 4096), 2)
        tail = f.read()
    if extra > 4096 or tail.strip(b"\r\n\x00 \t"):
        raise _fail(path, f"{extra} bytes of data after the declared PLY rows")


def _ply_problem(e: Exception) -> str:
    """Our wording for a plyfile element error (which names element, row and property)."""
    msg = getattr(e, "message", "") or str(e)
    where = str(e).removesuffix(msg)
    if msg == "early end-of-file":
        return f"truncated: PLY {where}the file ends early"
    if msg == "malformed input":
        return f"PLY {where}non-numeric value"
    return f"PLY {where}{msg}"


def _ply_read(path: str | Path, header: _PlyHeader, known_list_len: dict) -> PlyData:
    """The elements of the file read by plyfile (memory-mapped where it can), from the body
    offset after the header as :func:`_ply_layout` parsed it (what ``PlyData.read`` does after
    its own header parse, which refuses some valid headers)."""
    from plyfile import PlyData

    ply, _ = _ply_parse(path, header.text)
    ply.obj_info = list(header.obj_info)
    try:
        with open(path, "rb") as f:
            f.seek(header.start)
            stream = _stdio.TextIOWrapper(f, "ascii") if ply.text else f
            for el in ply:
                el._read(stream, ply.text, ply.byte_order, "c", known_list_len.get(el.name, {}))
    except OSError as e:
        raise _fail(path, f"cannot read the file ({e.strerror or e})") from e
    except UnicodeDecodeError as e:
        raise _fail(path, "ascii PLY data is not ASCII text") from e
    except (ValueError, TypeError, OverflowError) as e:  # (element errors are not ValueErrors)
        raise _fail(path, f"malformed PLY data ({e})") from e
    assert isinstance(ply, PlyData)
    return ply


def _ply_data(path: str | Path, header: _PlyHeader) -> PlyData:
    """The file read by plyfile. Binary elements with lists are memory-mapped when every row
    has the same length (tried: 3, then 4), otherwise read row by row."""
    from plyfile import PlyElementParseError, PlyListProperty

    layout = header.layout
    lists = {
        el.name: [p.name for p in el.properties if isinstance(p, PlyListProperty)]
        for el in layout.elements
    }
    if not layout.text and any(lists.values()):
        for n in _PLY_LIST_GUESSES:
            try:
                known = {k: dict.fromkeys(v, n) for k, v in lists.items() if v}
                return _ply_read(path, header, known)
            except PlyElementParseError:
                continue  # some row is not n long (or the file is short): the general reader says
    try:
        return _ply_read(path, header, {})
    except PlyElementParseError as e:
        raise _fail(path, _ply_problem(e)) from e


def _fan(path: str | Path, faces: list | np.ndarray) -> np.ndarray:
    """Triangulate polygons (rows of vertex indices) as fans; integer check included."""
    if isinstance(faces, np.ndarray) and faces.ndim == 2:
        rows = [faces]
    else:
        by_len: dict[int, list] = {}
        for f in faces:
            by_len.setdefault(len(f), []).append(f)
        rows = [np.asarray(v, dtype=float) for _, v in sorted(by_len.items())]
    n_tris = sum(len(r) * max(r.shape[1] - 2, 0) for r in rows if r.ndim == 2)
    _check_count(path, n_tris, "scene_faces", "triangles in the faces")
    tris = []
    for r in rows:
        if r.shape[1] < 3:
            raise _fail(path, f"face with {r.shape[1]} vertices (need at least 3)")
        if not np.all(np.isfinite(r)) or np.any(r != np.round(r)):
            raise _fail(path, "face indices are not integers")
        k = np.arange(1, r.shape[1] - 1)
        tris.append(
            np.stack([np.repeat(r[:, :1], len(k), 1), r[:, k], r[:, k + 1]], -1).reshape(-1, 3)
        )
    return np.vstack(tris).astype(np.int64) if tris else np.zeros((0, 3), np.int64)


def read_ply(path: str | Path) -> tuple[np.ndarray, np.ndarray | None]:
    """Vertices ``(V, 3)`` and triangles ``(T, 3)`` (None when the file has no face element),
    read by plyfile; values are those of the declared property types (``float`` is float32)."""
    header = _ply_checked(path)
    _ply_check_limits(path, header.layout)
    table = {el.name: el for el in _ply_data(path, header).elements}
    vert = table.get("vertex")
    if vert is None or not all(c in vert.data.dtype.names for c in "xyz"):
        raise _fail(path, "PLY file has no vertex element with x, y, z properties")
    try:
        v = np.stack([np.asarray(vert[c], dtype=float) for c in "xyz"], axis=1)
    except (TypeError, ValueError) as e:
        raise _fail(path, "PLY vertex x, y, z are not scalar properties") from e
    if "face" not in table:
        return v, None
    names = table["face"].data.dtype.names
    key = next((k for k in ("vertex_indices", "vertex_index") if k in names), None)
    if key is None:
        raise _fail(path, "PLY face element has no vertex_indices list")
    return v, _fan(path, table["face"][key])


_OBJ_IGNORED = {"vt", "vn", "vp", "g", "o", "s", "usemtl", "mtllib", "l", "p"}


def _plain(tokens: list[str]) -> bool:
    """Numbers as files write them: Python's int() and float() also take ``1_000`` and
    non-ASCII digits, which no file format does."""
    return all(t.isascii() and "_" not in t for t in tokens)


def _obj_face(path: str | Path, no: int, tok: list[str], n_vert: int) -> list[int]:
    try:
        heads = [t.split("/")[0] for t in tok]
        if not _plain(heads):
            raise ValueError(heads)
        idx = [int(t) for t in heads]
    except ValueError as e:
        raise _fail(path, f"line {no}: malformed face index") from e
    if len(idx) < 3 or 0 in idx:
        raise _fail(path, f"line {no}: a face needs at least 3 non-zero indices")
    return [i - 1 if i > 0 else n_vert + i for i in idx]


def read_obj(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Vertices and fan-triangulated faces of a Wavefront OBJ file."""
    try:
        text = _read(path).decode("utf-8")
    except UnicodeDecodeError as e:
        raise _fail(path, "not a text OBJ file (not UTF-8)") from e
    verts: list[list[float]] = []
    faces: list[list[int]] = []
    max_verts, max_faces = int(LIMITS["scene_vertices"].hi), int(LIMITS["scene_faces"].hi)
    for no, line in enumerate(text.splitlines(), 1):
        tok = line.split()
        if not tok or tok[0].startswith("#") or tok[0] in _OBJ_IGNORED:
            continue
        if tok[0] == "v":
            if len(verts) >= max_verts:
                _check_count(path, len(verts) + 1, "scene_vertices", "OBJ vertices")
            try:
                if not _plain(tok[1:4]):
                    raise ValueError(tok[1:4])
                verts.append([float(t) for t in tok[1:4]])
            except ValueError as e:
                raise _fail(path, f"line {no}: malformed vertex") from e
            if len(verts[-1]) != 3:
                raise _fail(path, f"line {no}: a vertex needs 3 coordinates")
        elif tok[0] == "f":
            if len(faces) >= max_faces:
                _check_count(path, len(faces) + 1, "scene_faces", "OBJ faces")
            faces.append(_obj_face(path, no, tok[1:], len(verts)))
        else:
            raise _fail(path, f"line {no}: unsupported OBJ statement {tok[0][:20]!r}")
    v = np.asarray(verts, dtype=float).reshape(-1, 3)
    return v, _fan(path, faces)


_STL_REC = np.dtype([("n", "<f4", (3,)), ("v", "<f4", (3, 3)), ("a", "<u2")])


def read_stl(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Binary or ASCII STL; coincident corners are merged into shared vertices."""
    data = _read(path)
    n = int.from_bytes(data[80:84], "little") if len(data) >= 84 else -1
    if n >= 0 and len(data) == 84 + 50 * n:
        _check_count(path, n, "scene_faces", "STL triangles")
        corners = np.frombuffer(data, _STL_REC, n, 84)["v"].astype(float).reshape(-1, 3)
    elif data.lstrip()[:5].lower() == b"solid":
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError as e:
            raise _fail(path, "STL is neither a consistent binary file nor ASCII text") from e
        found = re.findall(r"^\s*vertex\s+(\S+)\s+(\S+)\s+(\S+)", text, re.M)
        _check_count(path, len(found) // 3, "scene_faces", "STL triangles")
        corners = _floats(path, [t.encode() for f in found for t in f], "STL vertex")
        if corners.size % 9:
            raise _fail(path, "ASCII STL vertex count is not a multiple of 3")
        if np.all(np.isfinite(corners)):  # (a NaN vertex is named below)
            _stl_facets_whole(path, text, len(found) // 3)
        corners = corners.reshape(-1, 3)
    else:
        raise _fail(
            path,
            f"not an STL file: binary size {len(data)} B does not match the "
            f"triangle count in its header, and there is no ASCII 'solid' header",
        )
    if not np.all(np.isfinite(corners)):
        raise _fail(path, "NaN or infinite vertex coordinates")
    v, inv = np.unique(corners, axis=0, return_inverse=True)
    return v, inv.reshape(-1, 3).astype(np.int64)


def _stl_facets_whole(path: str | Path, text: str, n: int) -> None:
    """Every ASCII STL facet is whole: as many ``facet``, ``outer loop``, ``endloop`` and
    ``endfacet`` lines as triangles (a file cut inside its last facet is refused)."""
    for word in ("facet", "outer", "endloop", "endfacet"):
        got = len(re.findall(rf"^\s*{word}\b", text, re.M | re.I))
        if got != n:
            raise _fail(path, f"ASCII STL has {n} triangles but {got} '{word}' lines")


_PCD_KINDS = {
    ("F", 4): "f4",
    ("F", 8): "f8",
    ("I", 1): "i1",
    ("I", 2): "i2",
    ("I", 4): "i4",
    ("I", 8): "i8",
    ("U", 1): "u1",
    ("U", 2): "u2",
    ("U", 4): "u4",
    ("U", 8): "u8",
}


def _pcd_header(path: str | Path, data: bytes) -> tuple[dict[str, list[str]], int]:
    head: dict[str, list[str]] = {}
    pos = 0
    while "DATA" not in head:
        if pos >= min(len(data), _MAX_HEADER):
            raise _fail(path, "PCD header has no DATA line")
        nl = data.find(b"\n", pos)
        nl = len(data) if nl < 0 else nl
        try:
            line = data[pos:nl].decode("ascii").strip()
        except UnicodeDecodeError as e:
            raise _fail(path, "PCD header is not ASCII text") from e
        pos = nl + 1
        if line and not line.startswith("#"):
            key, *vals = line.split()
            head[key.upper()] = vals
    return head, pos


_PCD_MAX_COUNT = 4096  # elements of one PCD field (a descriptor histogram has a few hundred)


def _pcd_dtype(path: str | Path, head: dict[str, list[str]]) -> np.dtype:
    names = head.get("FIELDS", [])
    sizes, types = head.get("SIZE", []), head.get("TYPE", [])
    counts = head.get("COUNT", ["1"] * len(names))
    if not names or not len(names) == len(sizes) == len(types) == len(counts):
        raise _fail(path, "PCD FIELDS, SIZE, TYPE and COUNT lines disagree in length")
    fields = []
    for k, (nm, s, t, c) in enumerate(zip(names, sizes, types, counts, strict=True)):
        if not (s.isdigit() and c.isdigit()) or (t.upper(), int(s)) not in _PCD_KINDS:
            raise _fail(path, f"PCD field {nm!r}: unsupported SIZE {s} / TYPE {t} / COUNT {c}")
        if not 1 <= int(c) <= _PCD_MAX_COUNT:
            raise _fail(path, f"PCD field {nm!r}: COUNT {c} is not in [1, {_PCD_MAX_COUNT}]")
        shape = (int(c),) if int(c) != 1 else ()
        fields.append(
            (
                nm if nm not in names[:k] else f"{nm}_{k}",
                "<" + _PCD_KINDS[(t.upper(), int(s))],
                shape,
            )
        )
    if not {"x", "y", "z"} <= set(names):
        raise _fail(path, "PCD file has no x, y, z fields")
    return np.dtype(fields)


def _pcd_count(path: str | Path, head: dict[str, list[str]]) -> int:
    try:
        texts = [head["WIDTH"][0], head["HEIGHT"][0]]
        texts.append(head.get("POINTS", [texts[0]])[0])
        if not _plain(texts):
            raise ValueError(texts)
        w, h = int(texts[0]), int(texts[1])
        n = int(texts[2]) if "POINTS" in head else w * h
    except (KeyError, IndexError, ValueError) as e:
        raise _fail(path, "PCD header lacks a valid WIDTH, HEIGHT or POINTS") from e
    if n != w * h or n < 0:
        raise _fail(path, f"PCD POINTS {n} does not equal WIDTH x HEIGHT = {w * h}")
    return n


def read_pcd(path: str | Path) -> np.ndarray:
    """Points ``(N, 3)`` of an ascii or binary PCD file (x, y, z fields; others ignored)."""
    data = _read(path)
    head, start = _pcd_header(path, data)
    dt, n = _pcd_dtype(path, head), _pcd_count(path, head)
    _check_count(path, n, "scene_vertices", "PCD points")
    mode = (head["DATA"] or [""])[0].lower()
    body = data[start:]
    if mode == "binary":
        if n * dt.itemsize > len(body):
            raise _fail(
                path, f"truncated: {n} points need {n * dt.itemsize} bytes, {len(body)} present"
            )
        rec = np.frombuffer(body, dt, n)
        return np.stack([rec[c].astype(float) for c in "xyz"], axis=1)
    if mode != "ascii":
        raise _fail(path, f"unsupported PCD DATA {mode!r} (ascii and binary are supported)")
    lines = [ln for ln in body.split(b"\n") if ln.strip()]
    if len(lines) < n:
        raise _fail(path, f"truncated: header says {n} points, {len(lines)} rows present")
    if len(lines) > n:
        raise _fail(path, f"{len(lines) - n} row(s) of data after the {n} declared points")
    names = list(dt.names or ())
    widths = [max(1, int(np.prod(dt[k].shape))) for k in range(len(names))]
    cols = sum(widths)
    arr = _floats(path, b" ".join(lines[:n]).split(), "PCD data")
    if arr.size != n * cols:
        raise _fail(path, f"PCD data: expected {n} rows of {cols} values, got {arr.size} values")
    arr = arr.reshape(n, cols)
    offs = np.cumsum([0, *widths])
    return np.stack([arr[:, int(offs[names.index(c)])] for c in "xyz"], axis=1)


def check_extent(
    source: str | Path,
    points: np.ndarray,
    label: str,
    error: type[VolaryError] = FileFormatError,
) -> None:
    """Refuse points ``(..., 3)`` with a coordinate outside the world extent
    (``LIMITS["coordinate"]``) or not finite: one line naming ``source``, the row (``label``
    and its index, or ``label`` alone for one point) and the coordinate."""
    v = np.asarray(points, dtype=float).reshape(-1, 3)
    lim = LIMITS["coordinate"]
    inside = (v >= lim.lo) & (v <= lim.hi)  # False for NaN
    if inside.all():
        return
    flat = int(np.argmin(inside.ravel()))
    row, axis = divmod(flat, 3)
    where = label if len(v) == 1 else f"{label} {row}"
    raise error(
        f"{source}: {where}: {'xyz'[axis]} = {v[row, axis]:g} is outside the world extent; "
        f"expected {lim.describe()}"
    )


def _check_count(path: str | Path, n: int, limit: str, what: str) -> None:
    """Refuse ``n`` rows of ``what`` above the declared limit, before they are allocated."""
    lim = LIMITS[limit]
    if n > lim.hi:
        raise _fail(path, f"{n} {what}; expected at most {lim.hi:.0f} ({lim.quantity})")


def _ply_check_limits(path: str | Path, layout: PlyData) -> None:
    counts = {el.name: el.count for el in layout.elements}
    _check_count(path, counts.get("vertex", 0), "scene_vertices", "PLY vertices")
    _check_count(path, counts.get("face", 0), "scene_faces", "PLY faces")


def _check_vertices(path: str | Path, v: np.ndarray, what: str) -> None:
    if len(v) == 0:
        raise _fail(path, f"empty {what}: no vertices")
    if not np.all(np.isfinite(v)):
        bad = int((~np.isfinite(v)).any(axis=1).sum())
        raise _fail(path, f"NaN or infinite {what} coordinates in {bad} rows")
    check_extent(path, v, what)


def load_mesh(path: str | Path) -> MeshScene:
    """Read a PLY, OBJ or STL triangle mesh (format from the suffix) into a MeshScene."""
    fmt = Path(path).suffix.lower().lstrip(".")
    readers = {"ply": read_ply, "obj": read_obj, "stl": read_stl}
    if fmt not in readers:
        raise _fail(path, f"unsupported mesh format {fmt!r} (expected ply, obj or stl)")
    v, t = readers[fmt](path)
    if t is None or len(t) == 0:
        raise _fail(path, "empty mesh: no faces")
    _check_vertices(path, v, "mesh vertex")
    if t.min() < 0 or t.max() >= len(v):
        raise _fail(path, f"face index out of range [0, {len(v)})")
    if not _any_area(v, t):
        raise _fail(path, f"no face of positive area: all {len(t)} faces are degenerate")
    return MeshScene(v, t, Path(path).stem)


def _any_area(v: np.ndarray, t: np.ndarray) -> bool:
    """Whether some triangle has a positive area (a mesh whose every face is a line or a point
    has no surface to hit); checked in chunks, no (F, 3, 3) array at once."""
    for lo in range(0, len(t), 1 << 20):
        tri = v[t[lo : lo + (1 << 20)]]
        cross = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
        if np.any(np.einsum("ij,ij->i", cross, cross) > 0):
            return True
    return False


def load_points(path: str | Path, drop_nan: bool = False) -> PointCloud:
    """Read a PCD or PLY point cloud (a PLY mesh gives its vertices). NaN points are an error
    unless ``drop_nan`` (PCL writes NaN for invalid points of organized clouds)."""
    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt == "pcd":
        p = read_pcd(path)
    elif fmt == "ply":
        p = read_ply(path)[0]
    else:
        raise _fail(path, f"unsupported point cloud format {fmt!r} (expected pcd or ply)")
    if drop_nan:
        p = p[np.all(np.isfinite(p), axis=1)]
    _check_vertices(path, p, "point")
    return PointCloud(p, Path(path).stem)


__all__ = [
    "FORMATS",
    "MeshScene",
    "PointCloud",
    "box_mesh",
    "check_extent",
    "check_ply",
    "cylinder_mesh",
    "export_scene",
    "load_mesh",
    "load_points",
    "plane_mesh",
    "read_obj",
    "read_pcd",
    "read_ply",
    "read_ply_data",
    "read_stl",
    "sample_surface",
    "scene_mesh",
    "sphere_mesh",
    "write_obj",
    "write_pcd",
    "write_ply",
    "write_stl",
]
