"""Tilted boxes: a gate pitched or rolled out of upright has its frame bars where its corners
are, for distance, collision and every ray caster (before, the bars stood upright)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from volary.errors import ConfigError
from volary.sensors.raycast import make_raycaster
from volary.worlds import Box, Gate, Mesh, Scene, SceneSpec, scene_sdf
from volary.worlds.collider import box_clearance
from volary.worlds.io import box_mesh
from volary.worlds.primitives import gate_boxes, gate_frame

torch.set_num_threads(1)
TILT = (math.radians(25.0), math.radians(-15.0))
BOX = Box((1.0, 2.0, 3.0), (2.0, 0.4, 1.0), 0.6, object_id=7, tilt=TILT)


def _spec(*obstacles, gates=()) -> SceneSpec:
    return SceneSpec("t", (-10.0, -10.0, 0.0), (10.0, 10.0, 10.0), obstacles=obstacles,
                     gates=gates)  # fmt: skip


def _tilted_gate(pitch: float, roll: float) -> Gate:
    """An opening 2 m x 1.6 m at (0, 0, 4), facing +y, rolled in its plane then pitched."""
    hw, hh = 1.0, 0.8
    c = np.array([[-hw, 0, hh], [hw, 0, hh], [hw, 0, -hh], [-hw, 0, -hh]], dtype=float)
    cr, sr, cp, sp = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch)
    about_y = np.array([[cr, 0, sr], [0, 1, 0], [-sr, 0, cr]])  # in the plane (normal: y)
    about_x = np.array([[1, 0, 0], [0, cp, -sp], [0, sp, cp]])  # about the top bar
    c = c @ (about_x @ about_y).T + np.array([0.0, 0.0, 4.0])
    return Gate(tuple(map(tuple, c.tolist())), name="g", object_id=3, border=0.2)


def test_the_axes_of_a_tilted_box_are_its_yaw_after_its_tilt():
    c, s = math.cos(BOX.yaw), math.sin(BOX.yaw)
    rz = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
    cx, sx, cy, sy = math.cos(TILT[0]), math.sin(TILT[0]), math.cos(TILT[1]), math.sin(TILT[1])
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    np.testing.assert_allclose(BOX.axes, rz @ ry @ rx, atol=1e-15)


def test_a_tilted_box_is_at_the_distance_of_its_tessellation():
    """Distance to a tilted Box (analytic) against the same box as a closed triangle mesh."""
    v, t = box_mesh(BOX)
    mesh = Mesh(v, t, object_id=7)
    gen = torch.Generator().manual_seed(1)
    p = torch.tensor(BOX.center) + 0.6 * torch.randn(1, 400, 3, generator=gen, dtype=torch.float64)
    a = scene_sdf(Scene.stack(_spec(BOX), dtype=torch.float64), p)
    b = scene_sdf(Scene.stack(_spec(mesh), dtype=torch.float64), p)
    torch.testing.assert_close(a.distance, b.distance, atol=1e-9, rtol=0)
    inside = a.distance < 0
    assert 20 < int(inside.sum()) < 380  # points on both sides


@pytest.mark.parametrize("backend", ["torch", "embree"])
def test_rays_meet_a_tilted_box_where_its_tessellation_is(backend):
    v, t = box_mesh(BOX)
    gen = torch.Generator().manual_seed(2)
    o = torch.tensor([[0.0, -4.0, 3.0]], dtype=torch.float64).expand(500, 3)[None]
    aim = torch.tensor(BOX.center) + 0.4 * torch.randn(500, 3, generator=gen, dtype=torch.float64)
    d = torch.nn.functional.normalize(aim[None] - o, dim=-1)
    box = make_raycaster(_spec(BOX), backend=backend, dtype=torch.float64).cast(o, d, 30.0)
    ref = make_raycaster(_spec(Mesh(v, t, object_id=7)), backend="torch", dtype=torch.float64)
    want = ref.cast(o, d, 30.0)
    hit = want.object_id == 7
    assert int(hit.sum()) > 200
    assert bool((box.object_id[hit] == 7).all())
    err = (box.distance.double() - want.distance)[hit].abs().max()
    assert float(err) < (1e-9 if backend == "torch" else 1e-4)


@pytest.mark.parametrize(("pitch", "roll"), [(20.0, 0.0), (0.0, 15.0), (-15.0, 10.0), (90.0, 0.0)])
def test_a_tilted_gate_has_its_bars_where_its_corners_are(pitch, roll):
    gate = _tilted_gate(math.radians(pitch), math.radians(roll))
    c = np.asarray(gate.corners)
    frame = gate_frame(c)
    a, up = frame[:, 0], frame[:, 2]
    b = gate.border
    mids = [  # the middle of each bar, from the corners
        (c[0] + c[1]) / 2 + up * b / 2,
        (c[2] + c[3]) / 2 - up * b / 2,
        (c[1] + c[2]) / 2 + a * b / 2,
        (c[0] + c[3]) / 2 - a * b / 2,
    ]
    scene = Scene.stack(_spec(gates=(gate,)), dtype=torch.float64)
    d = scene_sdf(scene, torch.tensor(np.stack(mids))[None]).distance[0]
    assert bool((d < -0.04).all()), d  # inside every bar (half its depth)
    centre = torch.tensor(c.mean(0))[None, None]
    assert float(scene_sdf(scene, centre).distance) > 0.7  # the opening is free
    # a vehicle-sized box on the top bar's middle collides; one in the opening does not
    quat = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    half = torch.tensor([0.1, 0.1, 0.05], dtype=torch.float64)
    on_bar = torch.tensor(mids[0])[None]
    assert float(box_clearance(scene, on_bar, quat, half)[0]) < 0
    assert float(box_clearance(scene, centre[0], quat, half)[0]) > 0.5


def test_an_upright_gate_is_built_as_before():
    """Level gates keep level boxes (no tilt), so a scene without tilt casts as it did."""
    gate = _tilted_gate(0.0, 0.0)
    assert all(bx.tilt == (0.0, 0.0) for bx in gate_boxes(gate))
    assert Scene.stack(_spec(gates=(gate,))).box_tilt is None


@pytest.mark.parametrize("tilt", [(0.1,), (0.0, math.nan), (1.0, 2.0, 3.0)])
def test_a_bad_tilt_is_refused_by_name(tilt):
    with pytest.raises(ConfigError, match="Box.tilt"):
        Box((0.0, 0.0, 0.0), (1.0, 1.0, 1.0), tilt=tilt)


def test_a_level_box_answers_to_the_bit_beside_a_tilted_one():
    """A scene holding one tilted box turns every box by its tilt (the identity for the level
    ones): a level box's distances, closest points and ray hits stay the same to the bit, so a
    scene's level parts answer as they did before tilted boxes existed."""
    level = Box((0.3, -0.2, 1.0), (1.0, 2.0, 0.5), 0.7, object_id=1)
    far = Box((8.0, 8.0, 8.0), (0.5, 0.5, 0.5), 0.1, object_id=2, tilt=(0.4, -0.3))
    alone, beside = (Scene.stack(_spec(*o), dtype=torch.float32) for o in ((level,), (level, far)))
    assert alone.box_tilt is None and beside.box_tilt is not None
    gen = torch.Generator().manual_seed(3)
    p = (torch.tensor(level.center) + torch.randn(1, 300, 3, generator=gen)).float()
    a, b = scene_sdf(alone, p), scene_sdf(beside, p)
    assert torch.equal(a.distance, b.distance) and torch.equal(a.closest, b.closest)
    d = torch.nn.functional.normalize(torch.randn(1, 300, 3, generator=gen), dim=-1)
    o = torch.tensor(level.center) + 0.3 * torch.randn(1, 300, 3, generator=gen) + 3.0 * d
    ray_a = make_raycaster(_spec(level), backend="torch").cast(o, -d, 20.0)
    ray_b = make_raycaster(_spec(level, far), backend="torch").cast(o, -d, 20.0)
    hit = ray_a.object_id == 1
    assert int(hit.sum()) > 100
    assert torch.equal(ray_a.distance[hit], ray_b.distance[hit])
    assert torch.equal(ray_a.normal[hit], ray_b.normal[hit])
