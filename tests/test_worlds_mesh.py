"""Triangle meshes, height fields and voxel grids in scenes; custom scenes from files.

The mesh SDF is checked against an independent float64 numpy reference (distance: face plane
or the three edge segments; sign: generalized winding number) to 1e-5 m, and a tessellated box
against the analytic box SDF."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from volary.errors import ConfigError, FileFormatError
from volary.worlds import (
    Box,
    CollisionMonitor,
    HeightField,
    Mesh,
    Scene,
    SceneSpec,
    Sphere,
    VoxelGrid,
    collision_events,
    export_scene,
    make_scenario,
    scene_from_file,
    scene_sdf,
)
from volary.worlds.grid import find_path, occupancy_grid, scene_distance
from volary.worlds.io import (
    MeshScene,
    PointCloud,
    box_mesh,
    load_mesh,
    scene_mesh,
    sphere_mesh,
    write_pcd,
    write_ply,
)
from volary.worlds.meshgeom import signed_volume
from volary.worlds.sdf import mesh_sdf, sdf_box, sdf_triangles

TOL = 1e-5  # m, acceptance tolerance of the issue


# ---- independent float64 reference ------------------------------------------------------------
def _seg(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ab = b - a
    t = np.clip(((p - a) @ ab) / max(ab @ ab, 1e-300), 0.0, 1.0)
    return np.linalg.norm(p - (a + t[:, None] * ab), axis=1)


def ref_triangle(p: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Unsigned distance: to the face plane when the projection falls inside, else to the
    nearest of the three edge segments."""
    edges = np.minimum(np.minimum(_seg(p, a, b), _seg(p, b, c)), _seg(p, c, a))
    n = np.cross(b - a, c - a)
    if np.linalg.norm(n) == 0:
        return edges
    n = n / np.linalg.norm(n)
    h = (p - a) @ n
    proj = p - h[:, None] * n
    inside = np.ones(len(p), dtype=bool)
    for u, v in ((a, b), (b, c), (c, a)):
        inside &= (np.cross(v - u, proj - u) @ n) >= 0
    return np.where(inside, np.abs(h), edges)


def winding_number(p: np.ndarray, verts: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """Generalized winding number (solid angles of Van Oosterom & Strackee, 1983)."""
    w = np.zeros(len(p))
    for tri in verts[tris]:
        a, b, c = tri[0] - p, tri[1] - p, tri[2] - p
        la, lb, lc = (np.linalg.norm(x, axis=1) for x in (a, b, c))
        det = np.einsum("ij,ij->i", a, np.cross(b, c))
        dot = lambda x, y: np.einsum("ij,ij->i", x, y)  # noqa: E731
        den = la * lb * lc + dot(a, b) * lc + dot(b, c) * la + dot(c, a) * lb
        w += 2 * np.arctan2(det, den)
    return w / (4 * np.pi)


def ref_mesh(p: np.ndarray, verts: np.ndarray, tris: np.ndarray, closed: bool) -> np.ndarray:
    d = np.min([ref_triangle(p, *tri) for tri in verts[tris]], axis=0)
    if not closed:
        return d
    return np.where(np.abs(winding_number(p, verts, tris)) > 0.5, -d, d)


def _sdf(mesh: Mesh, p: np.ndarray, dtype=torch.float64, device="cpu"):
    scene = Scene.stack(
        SceneSpec("m", (-9, -9, -9), (9, 9, 9), (mesh,)), device=device, dtype=dtype
    )
    return scene_sdf(scene, torch.as_tensor(p, dtype=dtype, device=device)[None])


def _probe_points(rng: np.random.Generator, verts: np.ndarray, n: int = 1500) -> np.ndarray:
    lo, hi = verts.min(0) - 1.0, verts.max(0) + 1.0
    near = verts[rng.integers(0, len(verts), n // 3)] + rng.normal(scale=1e-3, size=(n // 3, 3))
    return np.vstack([rng.uniform(lo, hi, (n, 3)), near, verts])


# ---- the Mesh primitive -----------------------------------------------------------------------
def test_mesh_validation_names_the_field():
    v, t = box_mesh(Box((0, 0, 0), (1, 1, 1)))
    bad = v.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ConfigError, match=r"Mesh 'w'.vertices: .*1 rows are NaN"):
        Mesh(bad, t, name="w")
    with pytest.raises(ConfigError, match=r"Mesh.triangles: .*T >= 1"):
        Mesh(v, np.zeros((0, 3), int))
    with pytest.raises(ConfigError, match="out of range"):
        Mesh(v, t + 1)
    with pytest.raises(ConfigError, match="integer"):
        Mesh(v, t + 0.5)
    with pytest.raises(ConfigError, match=r"shape \(V, 3\)"):
        Mesh(v[:, :2], t)


def test_mesh_is_read_only_hashable_and_compares_by_content():
    v, t = box_mesh(Box((0, 0, 0), (1, 2, 3)))
    a, b = Mesh(v, t, 2), Mesh(v.copy(), t.copy(), 2)
    assert a == b and hash(a) == hash(b) and a != Mesh(v, t, 3)
    with pytest.raises(ValueError):
        a.vertices[0, 0] = 5.0
    v[0, 0] = 99.0  # the caller's array is copied
    assert a.vertices[0, 0] != 99.0
    s1 = SceneSpec("s", (-5, -5, -5), (5, 5, 5), (a,))
    s2 = SceneSpec("s", (-5, -5, -5), (5, 5, 5), (b,))
    assert s1 == s2 and hash(s1) == hash(s2)
    assert a.closed and not Mesh(v, t[:-1]).closed


# ---- signed distance ----------------------------------------------------------------------------
def test_single_triangles_match_reference_unsigned():
    rng = np.random.default_rng(0)
    tris = rng.uniform(-1, 1, (40, 3, 3))
    tris[0, 2] = tris[0, 0] + 0.5 * (tris[0, 1] - tris[0, 0])  # collinear (degenerate)
    tris[1, :] = tris[1, 0]  # a point
    p = rng.uniform(-2, 2, (300, 3))
    corners = torch.as_tensor(tris)[None, :]  # (1, 40, 3, 3)
    d, q = sdf_triangles(torch.as_tensor(p)[:, None], corners, torch.zeros(1, 40, 7, 3))
    ref = np.stack([ref_triangle(p, *t) for t in tris], axis=1)
    assert np.abs(d.numpy() - ref).max() < 1e-12
    assert torch.isfinite(q).all()
    assert np.allclose(np.linalg.norm(p[:, None] - q.numpy(), axis=-1), ref, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_closed_sphere_mesh_matches_reference(dtype, device):
    v, t = sphere_mesh(Sphere((0.3, -0.2, 1.0), 1.3), 12)
    mesh = Mesh(v, t, 7)
    p = _probe_points(np.random.default_rng(1), v)
    ref = ref_mesh(p, v, t, closed=True)
    out = _sdf(mesh, p, dtype, device)
    err = np.abs(out.distance[0].double().cpu().numpy() - ref)
    assert err.max() < TOL, err.max()
    assert (out.object_id == 7).all()
    far = np.abs(ref) > 1e-4  # the sign is meaningful off the surface
    assert np.array_equal(np.sign(out.distance[0].cpu().numpy())[far], np.sign(ref)[far])
    gap = np.linalg.norm(p - out.closest[0].double().cpu().numpy(), axis=1) - np.abs(ref)
    assert np.abs(gap).max() < TOL


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_concave_terrain_mesh_matches_reference(dtype):
    h = np.random.default_rng(5).uniform(0.5, 2.0, (6, 5))
    m = HeightField((1.0, -2.0), (0.5, 0.7), h, floor=0.0).to_mesh()
    rng = np.random.default_rng(6)
    p = np.vstack(
        [
            rng.uniform([0.5, -2.5, -0.5], [4.0, 1.5, 3.0], (1500, 3)),
            _probe_points(rng, m.vertices, 300),
        ]
    )
    ref = ref_mesh(p, m.vertices, m.triangles, closed=True)
    err = np.abs(_sdf(m, p, dtype).distance[0].double().numpy() - ref)
    assert err.max() < TOL, err.max()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_tessellated_box_equals_analytic_box(dtype, device):
    box = Box((1.0, 2.0, 0.5), (1.5, 0.7, 2.2), 0.6)
    v, t = box_mesh(box)
    rng = np.random.default_rng(2)
    p = np.vstack(
        [
            rng.uniform(-2, 4, (4000, 3)),
            v + rng.normal(scale=1e-4, size=v.shape),
            np.asarray(box.center)[None] + rng.uniform(-0.3, 0.3, (200, 3)),
        ]
    )
    out = _sdf(Mesh(v, t, 3), p, dtype, device)
    q = torch.as_tensor(p, dtype=dtype, device=device)
    ref, _ = sdf_box(
        q,
        torch.tensor(box.center, dtype=dtype, device=device),
        torch.tensor(box.size, dtype=dtype, device=device) / 2,
        torch.tensor(box.yaw, dtype=dtype, device=device),
    )
    err = (out.distance[0] - ref).abs().max().item()
    print(f"box mesh vs analytic box, {dtype}: max error {err:.2e} m")
    assert err < TOL


def test_inward_wound_closed_mesh_has_the_same_sdf():
    v, t = box_mesh(Box((0, 0, 0), (1, 2, 3)))
    p = np.random.default_rng(3).uniform(-2, 2, (500, 3))
    a = _sdf(Mesh(v, t), p).distance
    b = _sdf(Mesh(v, t[:, ::-1]), p).distance
    assert torch.equal(a, b) and (a < 0).any()


def test_open_mesh_is_an_unsigned_thin_shell():
    quad = Mesh([[2, -1, 0], [2, 1, 0], [2, 1, 2], [2, -1, 2]], [[0, 1, 2], [0, 2, 3]], 4)
    assert not quad.closed and not quad.pseudo_normals.any()
    p = np.array([[1.0, 0, 1], [3.0, 0, 1], [7.0, 0, 1], [2.0, 0, 1], [2.0, 3, 1]])
    d = _sdf(quad, p).distance[0].numpy()
    assert np.allclose(d, [1.0, 1.0, 5.0, 0.0, 2.0])
    ref = ref_mesh(p, quad.vertices, quad.triangles, closed=False)
    assert np.abs(d - ref).max() < 1e-12


def test_chunked_mesh_sdf_equals_one_shot():
    v, t = sphere_mesh(Sphere((0, 0, 0), 1.0), 10)
    scene = Scene.stack(SceneSpec("m", (-3, -3, -3), (3, 3, 3), (Mesh(v, t),)), 2)
    p = torch.randn(2, 50, 3, generator=torch.Generator().manual_seed(0))
    args = (p, scene.tri_vertices, scene.tri_normals, scene.tri_valid, scene.tri_id)
    one = mesh_sdf(*args, chunk=1 << 30)
    small = mesh_sdf(*args, chunk=7)
    for x, y in zip(one, small, strict=True):
        assert torch.equal(x, y)


# ---- batched scenes -----------------------------------------------------------------------------
def test_stack_holds_different_meshes_per_env(device):
    vb, tb = box_mesh(Box((0, 0, 1), (1, 1, 1)))
    vs, ts = sphere_mesh(Sphere((0, 0, 1), 0.5), 8)
    specs = [
        SceneSpec("b", (-5, -5, 0), (5, 5, 5), (Mesh(vb, tb, 1), Sphere((3, 0, 1), 0.2))),
        SceneSpec("s", (-5, -5, 0), (5, 5, 5), (Mesh(vs, ts, 2),)),
        SceneSpec("e", (-5, -5, 0), (5, 5, 5), (Box((0, 0, 1), (1, 1, 1), object_id=9),)),
    ]
    scene = Scene.stack(specs, device=device)
    assert scene.tri_vertices.shape == (3, len(ts), 3, 3)
    assert scene.tri_valid.sum(1).tolist() == [12, len(ts), 0]
    assert scene.tri_id[0, :12].eq(1).all() and scene.tri_id[0, 12:].eq(-1).all()
    assert scene.tri_vertices[2].eq(0).all() and scene.tri_normals[1, len(ts) :].eq(0).all()
    p = torch.tensor([[0.0, 0.0, 2.0], [0.0, 0.0, 1.0], [3.0, 0.0, 1.25]], device=device)
    out = scene_sdf(scene, p[None].expand(3, 3, 3).contiguous())
    assert torch.allclose(
        out.distance[0], torch.tensor([0.5, -0.5, 0.05], device=device), atol=1e-6
    )
    assert out.object_id.tolist() == [[1, 1, 0], [2, 2, 2], [9, 9, 9]]
    for i, spec in enumerate(specs):  # each env equals its spec stacked alone
        alone = scene_sdf(Scene.stack(spec, device=device), p[None])
        assert torch.equal(alone.distance[0], out.distance[i])
        assert torch.equal(alone.closest[0], out.closest[i])
    no_mesh = Scene.stack(SceneSpec("x", (0, 0, 0), (1, 1, 1)), 4)
    assert no_mesh.tri_vertices.shape == (4, 1, 3, 3) and not no_mesh.tri_valid.any()
    assert not no_mesh.has_triangles and scene.has_triangles


def test_collision_with_a_mesh_wall(device):
    wall = Mesh(*box_mesh(Box((5.0, 0.0, 1.5), (0.2, 6.0, 3.0))), object_id=5)
    scene = Scene.stack(SceneSpec("w", (0, -4, 0), (10, 4, 4), (wall,)), 4, device=device)
    pos = torch.tensor([[4.0, 0, 1], [4.75, 0, 1], [5.0, 0, 1], [6.0, 2.9, 2.9]], device=device)
    ev = collision_events(scene, pos, 0.3)
    assert ev.collided.tolist() == [False, True, True, False]
    assert ev.object_id.tolist() == [5, 5, 5, 5]
    assert torch.allclose(
        ev.clearance, torch.tensor([0.6, -0.15, -0.4, 0.9 - 0.3], device=device), atol=1e-5
    )
    assert torch.allclose(ev.contact_point[1], torch.tensor([4.9, 0, 1], device=device), atol=1e-5)
    mon = CollisionMonitor(scene, 0.3)

    class S:  # minimal state: pos and time
        def __init__(self, x: float, t: float) -> None:
            self.pos = torch.tensor([[x, 0.0, 1.0]] * 4, device=device)
            self.time = torch.full((4,), t, device=device)

    for k in range(200):  # flying at 2 m/s along +x, 100 Hz
        mon.update(S(3.0 + 0.02 * k, 0.01 * k))
    assert mon.collided.all() and (mon.object_id == 5).all()
    t_hit = (4.9 - 0.3 - 3.0) / 2.0
    assert ((mon.time - t_hit).abs() <= 0.01 + 1e-6).all()


# ---- files --------------------------------------------------------------------------------------
def _terrain_spec() -> SceneSpec:
    h = np.random.default_rng(4).uniform(0.2, 1.5, (8, 6))
    hf = HeightField((2.0, 0.0), (1.0, 1.0), h, floor=0.0, object_id=3)
    return SceneSpec(
        "terrain",
        (0, 0, 0),
        (12, 6, 4),
        (hf.to_mesh(), Box((11, 1, 1), (0.5, 0.5, 2), object_id=5)),
        start=(0.5, 3, 2.5),
        goal=(11.5, 3, 2.5),
    )


def test_scene_mesh_keeps_mesh_ids():
    spec = _terrain_spec()
    mesh = scene_mesh(spec)
    n = len(spec.obstacles[0].triangles)
    assert (mesh.object_ids[:n] == 3).all() and (mesh.object_ids[n:] == 5).all()
    assert np.array_equal(mesh.triangles[:n], spec.obstacles[0].triangles)


@pytest.mark.parametrize(
    "fmt,binary", [("ply", False), ("ply", True), ("obj", False), ("stl", False)]
)
def test_export_round_trip_as_custom_scene(fmt, binary, tmp_path):
    spec = _terrain_spec()
    path = export_scene(spec, tmp_path / f"t.{fmt}", binary=binary)
    custom = make_scenario("custom", 0, path=str(path))
    (m,) = custom.obstacles
    ref = scene_mesh(spec)
    got = np.sort(np.sort(m.corners, axis=1).reshape(len(m.triangles), -1), axis=0)
    want = np.sort(
        np.sort(ref.vertices[ref.triangles], axis=1).reshape(len(ref.triangles), -1), axis=0
    )
    assert got.shape == want.shape and np.abs(got - want).max() < 1e-5  # float32 in the file
    if fmt != "stl":  # STL merges vertices, so indices differ; the triangles do not
        assert np.array_equal(m.triangles, ref.triangles)
    assert m.closed and m.object_id == 1 and custom.meta["solvable"]
    assert custom.bounds_min == pytest.approx((1.0, -1.0, -1.0))
    assert scene_distance(custom, np.array([custom.start, custom.goal])).min() > 0.3


def test_point_cloud_becomes_voxel_boxes(tmp_path):
    pts = np.array([[0.05, 0.05, 0.05], [0.15, 0.05, 0.05], [1.05, 0.3, 0.05]])
    write_pcd(tmp_path / "p.pcd", pts)
    spec = scene_from_file(tmp_path / "p.pcd", voxel=0.1, object_id=8)
    sizes = np.array([b.size for b in spec.obstacles])
    assert sizes == pytest.approx(np.array([[0.2, 0.1, 0.1], [0.1, 0.1, 0.1]]))
    assert spec.obstacles[0].center == pytest.approx((0.1, 0.05, 0.05))
    assert all(b.object_id == 8 for b in spec.obstacles)
    assert spec.bounds_min == pytest.approx((-1.0, -1.0, -1.0))
    assert spec.bounds_max == pytest.approx((2.1, 1.4, 1.1))
    write_ply(tmp_path / "c.ply", PointCloud(pts))  # a PLY without faces is a point cloud
    from_ply = scene_from_file(tmp_path / "c.ply", voxel=0.1).obstacles
    assert from_ply == tuple(replace(b, object_id=1) for b in spec.obstacles)


# ---- height fields and voxels -------------------------------------------------------------------
def test_height_field_mesh_is_closed_with_known_heights():
    h = np.array([[1.0, 2.0, 1.5], [0.5, 1.0, 3.0]])
    hf = HeightField((1.0, -1.0), (2.0, 0.5), h, object_id=6)
    m = hf.to_mesh()
    assert hf.floor == -0.5 and m.closed and m.object_id == 6
    assert len(m.triangles) == 2 * 2 + 2 * 6 + 2 * 2
    vol = (
        sum(
            0.5
            * 2.0
            * 0.5
            * (h[0, j] + h[1, j] + h[1, j + 1] + h[0, j] + h[1, j + 1] + h[0, j + 1])
            / 3
            for j in range(2)
        )
        + 2.0 * 1.0 * 0.5
    )
    assert signed_volume(m.vertices, m.triangles) == pytest.approx(vol)
    x, y = np.array([1.0, 3.0, 1.0, 2.0, 2.5]), np.array([-1.0, -1.0, 0.0, -0.75, -0.875])
    # corners, the diagonal midpoint (mean of its ends), a point of the lower triangle
    assert hf.height_at(x, y) == pytest.approx([1.0, 0.5, 1.5, 1.0, 0.75])
    z = hf.height_at(x, y)
    d = _sdf(m, np.stack([x, y, z + 0.25], 1)).distance[0].numpy()
    assert (d > 0).all() and (d <= 0.25 + 1e-12).all()
    flat = HeightField((0.0, 0.0), (1.0, 1.0), np.full((4, 4), 2.0), floor=0.0).to_mesh()
    q = np.array([[1.5, 1.5, 2.7], [1.5, 1.5, 1.6], [2.0, 1.0, -0.5]])
    assert _sdf(flat, q).distance[0].numpy() == pytest.approx([0.7, -0.4, 0.5])


def test_height_field_and_voxel_validation():
    with pytest.raises(ConfigError, match="HeightField.floor"):
        HeightField((0, 0), (1, 1), np.ones((2, 2)), floor=1.0)
    with pytest.raises(ConfigError, match="HeightField.heights"):
        HeightField((0, 0), (1, 1), [[1.0, np.nan], [1.0, 1.0]])
    with pytest.raises(ConfigError, match="HeightField.spacing"):
        HeightField((0, 0), (1, 0), np.ones((2, 2)))
    with pytest.raises(ConfigError, match="VoxelGrid.voxel"):
        VoxelGrid((0, 0, 0), 0.0, np.ones((1, 1, 1)))
    with pytest.raises(ConfigError, match="larger voxel"):
        VoxelGrid.from_points(np.array([[0, 0, 0], [1e4, 1e4, 1e4]]), 0.01)
    assert VoxelGrid((0, 0, 0), 1.0, np.zeros((2, 2, 2))).to_boxes() == ()


def test_voxel_grid_to_boxes_known_cells():
    occ = np.zeros((3, 3, 3), dtype=bool)
    occ[0, 0, 0] = occ[1, 0, 0] = occ[2, 2, 2] = True
    boxes = VoxelGrid((1.0, 2.0, 3.0), 0.5, occ, 9).to_boxes()
    assert [(b.center, b.size, b.object_id) for b in boxes] == [
        ((1.5, 2.25, 3.25), (1.0, 0.5, 0.5), 9),
        ((2.25, 3.25, 4.25), (0.5, 0.5, 0.5), 9),
    ]


# ---- occupancy grid and solvability -------------------------------------------------------------
def test_occupancy_of_box_meshes_equals_boxes():
    spec = make_scenario("maze", 2)
    meshes = tuple(Mesh(*box_mesh(b), b.object_id) for b in spec.obstacles)
    a = occupancy_grid(spec, 0.3, 0.25).occupied
    b = occupancy_grid(replace(spec, obstacles=meshes), 0.3, 0.25).occupied
    assert np.array_equal(a, b)


def test_mesh_wall_blocks_the_grid_search():
    wall = Mesh(*box_mesh(Box((5.0, 2.5, 1.5), (0.3, 5.0, 3.0))))
    spec = SceneSpec(
        "w", (0, 0, 0), (10, 5, 3), (wall,), start=(1, 2.5, 1.5), goal=(9, 2.5, 1.5), ceiling=3.0
    )
    assert not find_path(spec, 0.3).solvable
    open_wall = Mesh(wall.vertices, wall.triangles[:-2])  # open shell: still a barrier
    assert not find_path(replace(spec, obstacles=(open_wall,)), 0.3).solvable
    low = Mesh(*box_mesh(Box((5.0, 2.5, 0.75), (0.3, 5.0, 1.5))))
    res = find_path(replace(spec, obstacles=(low,)), 0.3)
    assert res.solvable and scene_distance(replace(spec, obstacles=(low,)), res.path).min() > 0.3


# ---- bad input ----------------------------------------------------------------------------------
def test_bad_files_give_clear_errors(tmp_path):
    obj = tmp_path / "empty.obj"
    obj.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\n")
    with pytest.raises(FileFormatError, match=r"empty\.obj: empty mesh"):
        scene_from_file(obj)
    nan = tmp_path / "nan.obj"
    nan.write_text("v 0 0 nan\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    with pytest.raises(FileFormatError, match=r"nan\.obj: NaN"):
        scene_from_file(nan)
    write_pcd(tmp_path / "none.pcd", np.zeros((0, 3)))
    with pytest.raises(FileFormatError, match=r"none\.pcd: empty point"):
        scene_from_file(tmp_path / "none.pcd")
    write_ply(tmp_path / "none.ply", PointCloud(np.zeros((0, 3))))
    with pytest.raises(FileFormatError, match=r"none\.ply: empty point"):
        scene_from_file(tmp_path / "none.ply")
    write_ply(tmp_path / "nanpts.ply", PointCloud(np.array([[0, 0, np.nan], [1, 1, 1.0]])))
    with pytest.raises(FileFormatError, match="NaN"):
        scene_from_file(tmp_path / "nanpts.ply")
    assert len(scene_from_file(tmp_path / "nanpts.ply", drop_nan=True).obstacles) == 1
    bad = tmp_path / "trunc.ply"
    bad.write_bytes(
        b"ply\nformat ascii 1.0\nelement vertex 5\nproperty float x\n"
        b"property float y\nproperty float z\nend_header\n0 0 0\n"
    )
    with pytest.raises(FileFormatError, match=r"trunc\.ply: truncated"):
        scene_from_file(bad)
    with pytest.raises(FileFormatError, match=r"scene\.xyz: unsupported"):
        scene_from_file(tmp_path / "scene.xyz")
    with pytest.raises(FileFormatError, match="cannot read"):
        scene_from_file(tmp_path / "missing.stl")
    with pytest.raises(FileFormatError, match="empty mesh"):
        write_ply(tmp_path / "vo.ply", PointCloud(np.ones((3, 3))))
        scene_from_file(tmp_path / "vo.ply", kind="mesh")


def test_custom_scenario_requires_a_path_and_a_solvable_scene(tmp_path):
    with pytest.raises(ConfigError, match="path="):
        make_scenario("custom", 0)
    wall = scene_mesh(SceneSpec("w", (0, 0, 0), (1, 1, 1), (Box((0, 0, 0), (0.2, 20, 20)),)))
    write_ply(tmp_path / "wall.ply", wall)
    spec = scene_from_file(tmp_path / "wall.ply", margin=0.5)
    assert spec.start[0] < 0 < spec.goal[0]
    with pytest.raises(ConfigError, match="not solvable"):
        make_scenario("custom", 0, path=str(tmp_path / "wall.ply"), margin=0.5)
    assert isinstance(load_mesh(tmp_path / "wall.ply"), MeshScene)
