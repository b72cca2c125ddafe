"""Signed distance against independent float64 numpy references (1e-5 m), inside and outside,
at corners and edges, per primitive and for a padded batched Scene."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from volary.errors import ConfigError
from volary.worlds import Box, Cylinder, Plane, Scene, SceneSpec, Sphere
from volary.worlds.sdf import scene_sdf, sdf_box, sdf_cylinder, sdf_plane, sdf_sphere

TOL = 1e-5  # m, acceptance tolerance of issue 3


# ---- independent references (float64 numpy, formulated differently) --------------------------
def _rect_dist(p2: np.ndarray, half2: np.ndarray) -> np.ndarray:
    """Distance from points in a face plane (2-D coords) to the filled rectangle |u|<=h."""
    return np.linalg.norm(np.maximum(np.abs(p2) - half2, 0.0), axis=-1)


def ref_box(p: np.ndarray, c, half, yaw) -> np.ndarray:
    """Box as six face rectangles: unsigned distance = min over faces; sign from containment."""
    c, half = np.asarray(c, float), np.asarray(half, float)
    rot = np.array(
        [[math.cos(yaw), -math.sin(yaw), 0], [math.sin(yaw), math.cos(yaw), 0], [0, 0, 1.0]]
    )
    loc = (p - c) @ rot  # world -> box frame (row vectors times R)
    best = np.full(len(p), np.inf)
    for ax in range(3):
        others = [i for i in range(3) if i != ax]
        for sgn in (-1.0, 1.0):
            off = loc[:, ax] - sgn * half[ax]
            d = np.sqrt(off**2 + _rect_dist(loc[:, others], half[others]) ** 2)
            best = np.minimum(best, d)
    inside = np.all(np.abs(loc) < half, axis=-1)
    return np.where(inside, -best, best)


def ref_cylinder(p: np.ndarray, c, axis, r, hl) -> np.ndarray:
    """Cylinder as tube + two discs (unsigned min), sign from containment."""
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    d = p - np.asarray(c, float)
    a = d @ axis
    rho = np.linalg.norm(d - a[:, None] * axis, axis=-1)
    tube = np.hypot(rho - r, np.maximum(np.abs(a) - hl, 0.0))
    disc = np.minimum(
        np.hypot(a - hl, np.maximum(rho - r, 0.0)), np.hypot(a + hl, np.maximum(rho - r, 0.0))
    )
    best = np.minimum(tube, disc)
    inside = (rho < r) & (np.abs(a) < hl)
    return np.where(inside, -best, best)


def ref_sphere(p, c, r):
    return np.linalg.norm(p - np.asarray(c, float), axis=-1) - r


def ref_plane(p, q, n):
    n = np.asarray(n, float) / np.linalg.norm(n)
    return (p - np.asarray(q, float)) @ n


# ---- query point sets -------------------------------------------------------------------------
def _box_points(rng, c, half, yaw) -> np.ndarray:
    """Random points near the box plus every corner, edge midpoint and face centre, nudged in
    and out."""
    c, half = np.asarray(c, float), np.asarray(half, float)
    rot = np.array(
        [[math.cos(yaw), -math.sin(yaw), 0], [math.sin(yaw), math.cos(yaw), 0], [0, 0, 1.0]]
    )
    grid = np.array(
        [
            [i, j, k]
            for i in (-1, 0, 1)
            for j in (-1, 0, 1)
            for k in (-1, 0, 1)
            if (i, j, k) != (0, 0, 0)
        ],
        float,
    )
    feats = np.concatenate([grid * half * s for s in (0.9, 1.0, 1.1, 1.5)])
    rand = rng.uniform(-2.0, 2.0, (400, 3)) * half
    deep = rng.uniform(-0.99, 0.99, (100, 3)) * half
    loc = np.concatenate([feats, rand, deep, [[0, 0, 0]]])
    return loc @ rot.T + c


def _t(a, device, dtype=torch.float32):
    return torch.as_tensor(np.asarray(a), device=device, dtype=dtype)


BOXES = [
    ((0.3, -0.2, 1.0), (1.0, 0.4, 2.0), 0.0),
    ((1.5, 2.0, 0.5), (0.2, 3.0, 0.6), 0.7),
    ((-1.0, 0.5, 2.0), (2.0, 2.0, 0.1), -2.5),
]


@pytest.mark.parametrize(("c", "size", "yaw"), BOXES)
def test_box_matches_face_reference(device, c, size, yaw):
    rng = np.random.default_rng(0)
    half = np.asarray(size) / 2
    p = _box_points(rng, c, half, yaw)
    d, closest = sdf_box(_t(p, device), _t(c, device), _t(half, device), _t(yaw, device))
    ref = ref_box(p, c, half, yaw)
    assert np.abs(d.cpu().double().numpy() - ref).max() < TOL
    # the closest point lies on the surface, at |distance| from the query
    cl = closest.cpu().double().numpy()
    assert np.abs(ref_box(cl, c, half, yaw)).max() < TOL
    assert np.abs(np.linalg.norm(cl - p, axis=-1) - np.abs(ref)).max() < TOL


CYLS = [
    ((0.0, 0.0, 1.0), (0, 0, 1), 0.4, 2.0),
    ((1.0, -1.0, 1.5), (1, 0, 0), 0.25, 1.0),
    ((0.5, 0.5, 1.0), (1, 2, 3), 0.5, 3.0),
    ((-1.0, 0.0, 0.5), (0, 1, 0.2), 0.3, 0.5),
]


def _cyl_points(rng, c, axis, r, hl) -> np.ndarray:
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    e = np.eye(3)[np.argmin(np.abs(axis))]
    u = np.cross(axis, e)
    u /= np.linalg.norm(u)
    w = np.cross(axis, u)
    ang = rng.uniform(0, 2 * np.pi, 600)
    rho = np.concatenate(
        [rng.uniform(0, 2.0 * r, 400), np.full(200, r) * rng.choice([0.0, 0.95, 1.0, 1.05], 200)]
    )
    a = np.concatenate(
        [
            rng.uniform(-1.6 * hl, 1.6 * hl, 400),
            hl * rng.choice([-1.05, -1.0, -0.95, 0.0, 0.95, 1.0, 1.05], 200),
        ]
    )
    loc = (rho * np.cos(ang))[:, None] * u + (rho * np.sin(ang))[:, None] * w + a[:, None] * axis
    return loc + np.asarray(c, float)


@pytest.mark.parametrize(("c", "axis", "r", "length"), CYLS)
def test_cylinder_matches_tube_disc_reference(device, c, axis, r, length):
    rng = np.random.default_rng(1)
    hl = length / 2
    p = _cyl_points(rng, c, axis, r, hl)
    ax = np.asarray(axis, float) / np.linalg.norm(axis)
    d, closest = sdf_cylinder(
        _t(p, device), _t(c, device), _t(ax, device), _t(r, device), _t(hl, device)
    )
    ref = ref_cylinder(p, c, ax, r, hl)
    assert np.abs(d.cpu().double().numpy() - ref).max() < TOL
    cl = closest.cpu().double().numpy()
    assert np.abs(ref_cylinder(cl, c, ax, r, hl)).max() < TOL
    assert np.abs(np.linalg.norm(cl - p, axis=-1) - np.abs(ref)).max() < TOL


def test_sphere_and_plane_closed_forms(device):
    rng = np.random.default_rng(2)
    p = rng.uniform(-3, 3, (500, 3))
    c, r = (0.5, -0.5, 1.0), 0.8
    d, cl = sdf_sphere(_t(p, device), _t(c, device), _t(r, device))
    assert np.abs(d.cpu().double().numpy() - ref_sphere(p, c, r)).max() < TOL
    assert np.abs(ref_sphere(cl.cpu().double().numpy(), c, r)).max() < TOL
    q, n = (0.0, 0.0, 0.2), np.array([0.3, -0.2, 1.0]) / np.linalg.norm([0.3, -0.2, 1.0])
    d, cl = sdf_plane(_t(p, device), _t(q, device), _t(n, device))
    assert np.abs(d.cpu().double().numpy() - ref_plane(p, q, n)).max() < TOL
    assert np.abs(ref_plane(cl.cpu().double().numpy(), q, n)).max() < TOL


def test_degenerate_queries_are_finite(device):
    """Points on a cylinder's axis and at a sphere's centre still get a closest point."""
    z = torch.zeros(1, 3, device=device)
    d, cl = sdf_sphere(z, z, torch.ones(1, device=device))
    assert d.item() == -1.0 and torch.isfinite(cl).all()
    axis = torch.tensor([[0.0, 0.0, 1.0]], device=device)
    d, cl = sdf_cylinder(
        z, z, axis, torch.tensor([0.5], device=device), torch.tensor([2.0], device=device)
    )
    assert abs(d.item() + 0.5) < TOL and abs(cl.norm().item() - 0.5) < TOL


def test_arbitrary_leading_dims(device):
    p = torch.randn(2, 3, 5, 3, device=device)
    d, cl = sdf_box(
        p,
        torch.zeros(3, device=device),
        torch.ones(3, device=device),
        torch.tensor(0.3, device=device),
    )
    assert d.shape == (2, 3, 5) and cl.shape == (2, 3, 5, 3)


def _specs():
    a = SceneSpec(
        "a",
        (-5, -5, 0),
        (5, 5, 5),
        obstacles=(
            Box((1.0, 0.0, 1.0), (0.5, 0.5, 2.0), 0.4, object_id=1),
            Cylinder((-1.0, 1.0, 1.0), 0.3, 2.0, (0.3, 0.0, 1.0), object_id=2),
            Sphere((0.0, -2.0, 1.5), 0.5, object_id=3),
            Plane((0.0, 0.0, 0.0), (0.0, 0.0, 1.0), object_id=4),
        ),
    )
    b = SceneSpec(
        "b",
        (-5, -5, 0),
        (5, 5, 5),
        obstacles=(
            Sphere((0.5, 0.5, 1.0), 0.7, object_id=7),
            Sphere((-2.0, 0.0, 1.0), 0.2, object_id=8),
        ),
    )
    c = SceneSpec("empty", (-5, -5, 0), (5, 5, 5))
    return [a, b, c]


def _ref_scene(spec: SceneSpec, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    cols, ids = [], []
    for o in spec.obstacles:
        if isinstance(o, Box):
            cols.append(ref_box(p, o.center, np.asarray(o.size) / 2, o.yaw))
        elif isinstance(o, Cylinder):
            cols.append(ref_cylinder(p, o.center, o.axis, o.radius, o.length / 2))
        elif isinstance(o, Sphere):
            cols.append(ref_sphere(p, o.center, o.radius))
        else:
            cols.append(ref_plane(p, o.point, o.normal))
        ids.append(o.object_id)
    if not cols:
        return np.full(len(p), np.inf), np.full(len(p), -1)
    m = np.stack(cols, axis=-1)
    return m.min(-1), np.asarray(ids)[m.argmin(-1)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_scene_min_over_padded_primitives(device, dtype):
    specs = _specs()
    scene = Scene.stack(specs, device=device, dtype=dtype)
    rng = np.random.default_rng(3)
    p = rng.uniform([-3, -3, -0.5], [3, 3, 3], (3, 300, 3))
    out = scene_sdf(scene, _t(p, device, dtype))
    for i, spec in enumerate(specs):
        ref, ids = _ref_scene(spec, p[i])
        got = out.distance[i].cpu().double().numpy()
        if np.isinf(ref).all():
            assert np.isinf(got).all() and (out.object_id[i] == -1).all()
            assert torch.isnan(out.closest[i]).all()
            continue
        assert np.abs(got - ref).max() < TOL
        assert (out.object_id[i].cpu().numpy() == ids).all()


@pytest.mark.parametrize("kind", [0, 1, 2, 3])
def test_scene_of_one_kind_skips_the_others_and_matches_the_reference(device, kind):
    """A stack holding only one primitive kind queries only that kind (Scene.kinds_present)
    and still gives the reference distances and ids."""
    obstacles = _specs()[0].obstacles[kind : kind + 1]
    specs = [SceneSpec("one", (-5, -5, 0), (5, 5, 5), obstacles=obstacles),
             SceneSpec("empty", (-5, -5, 0), (5, 5, 5))]  # fmt: skip
    scene = Scene.stack(specs, device=device, dtype=torch.float64)
    assert scene.kinds_present == tuple(k == kind for k in range(4))
    p = np.random.default_rng(kind).uniform([-3, -3, -0.5], [3, 3, 3], (2, 200, 3))
    out = scene_sdf(scene, _t(p, device, torch.float64))
    ref, ids = _ref_scene(specs[0], p[0])
    assert np.abs(out.distance[0].cpu().numpy() - ref).max() < TOL
    assert (out.object_id[0].cpu().numpy() == ids).all()
    assert torch.isinf(out.distance[1]).all() and (out.object_id[1] == -1).all()


def test_scene_includes_gate_frames(device):
    from volary.worlds import Gate

    g = Gate(
        ((0, -0.5, 1.5), (0, 0.5, 1.5), (0, 0.5, 0.5), (0, -0.5, 0.5)),
        border=0.1,
        depth=0.1,
        object_id=9,
    )
    scene = Scene.stack(SceneSpec("g", (-5, -5, 0), (5, 5, 5), gates=(g,)), device=device)
    p = torch.tensor([[[0.0, 0.0, 1.0], [0.0, 0.0, 1.55], [0.0, 0.0, 1.8]]], device=device)
    out = scene_sdf(scene, p)
    assert abs(out.distance[0, 0].item() - 0.5) < TOL  # centre of the opening, 0.5 m to bars
    assert abs(out.distance[0, 1].item() + 0.05) < TOL and (out.object_id[0] == 9).all()
    assert abs(out.distance[0, 2].item() - 0.2) < TOL  # 0.2 m above the top bar


def test_scene_sdf_rejects_bad_points(device):
    scene = Scene.stack(_specs(), device=device)
    with pytest.raises(ConfigError, match=r"points: expected shape \(3, P, 3\)"):
        scene_sdf(scene, torch.zeros(2, 4, 3, device=device))
    with pytest.raises(ConfigError, match="points: expected dtype"):
        scene_sdf(scene, torch.zeros(3, 4, 3, device=device, dtype=torch.float64))
