"""The oriented-box collider (volary.worlds.collider) against a dense-sampling reference."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from volary.errors import ConfigError
from volary.math.quaternion import quat_from_euler, quat_to_rotmat
from volary.worlds import Scene, SceneSpec
from volary.worlds.collider import box_clearance, box_top, pair_gaps
from volary.worlds.primitives import Box, Plane, Sphere
from volary.worlds.sdf import scene_sdf, sdf_box, sdf_cylinder, sdf_sphere

HALF = (0.30, 0.25, 0.06)  # a flat frame: arm span x height


def _scene(obstacle) -> Scene:
    spec = SceneSpec("t", (-10.0, -10.0, -10.0), (10.0, 10.0, 10.0), obstacles=(obstacle,))
    return Scene.stack(spec, dtype=torch.float64)


def _random_quat(g: torch.Generator, n: int) -> torch.Tensor:
    rpy = (torch.rand(n, 3, generator=g, dtype=torch.float64) - 0.5) * torch.tensor(
        [1.2, 1.2, 2 * math.pi], dtype=torch.float64
    )
    return quat_from_euler(rpy[:, 0], rpy[:, 1], rpy[:, 2])


def _pairs(kind: str, g: torch.Generator, m: int = 400):
    """m random (obstacle params, box pose) pairs of ``kind`` near contact (float64)."""
    u = lambda *shape: torch.rand(*shape, generator=g, dtype=torch.float64)  # noqa: E731
    c = torch.zeros(m, 3, dtype=torch.float64)
    if kind == "box":
        params = (c, 0.05 + 0.5 * u(m, 3), (u(m) - 0.5) * 6)
    elif kind == "cylinder":
        axis = torch.randn(m, 3, generator=g, dtype=torch.float64)
        axis[: m // 4] = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)  # trees
        params = (c, axis / axis.norm(dim=-1, keepdim=True), 0.05 + 0.35 * u(m),
                  0.1 + 1.0 * u(m))  # fmt: skip
    else:
        params = (c, 0.05 + 0.45 * u(m))
    direction = torch.randn(m, 3, generator=g, dtype=torch.float64)
    pos = direction / direction.norm(dim=-1, keepdim=True) * (0.2 + 0.9 * u(m))[:, None]
    return params, pos, quat_to_rotmat(_random_quat(g, m))


def _true_distance(kind: str, params, pos, rot, half) -> torch.Tensor:
    """min over the box of the obstacle's signed distance: a convex function over a convex set,
    so projected gradient descent (multi-start, in box coordinates) finds its minimum."""
    sdf = {"box": sdf_box, "cylinder": sdf_cylinder, "sphere": sdf_sphere}[kind]
    corners = [[x, y, z] for x in (-0.9, 0.9) for y in (-0.9, 0.9) for z in (-0.9, 0.9)]
    starts = torch.tensor([[0.0, 0.0, 0.0], *corners], dtype=torch.float64)
    uu = starts[None].repeat(pos.shape[0], 1, 1).requires_grad_(True)
    e = [t[:, None] for t in params]

    def points(v: torch.Tensor) -> torch.Tensor:
        return pos[:, None] + ((v * half[:, None])[..., None, :] * rot[:, None]).sum(-1)

    for lr in torch.logspace(-1, -6, 1500, dtype=torch.float64).tolist():
        (grad,) = torch.autograd.grad(sdf(points(uu), *e)[0].sum(), uu)
        with torch.no_grad():
            uu -= lr * grad / half[:, None]
            uu.clamp_(-1.0, 1.0)
    with torch.no_grad():
        return sdf(points(uu), *e)[0].min(dim=1).values


@pytest.mark.parametrize("kind", ["box", "cylinder", "sphere"])
def test_the_box_test_is_sound_and_tight_against_the_true_distance(kind):
    """Over 400 random poses near contact: never reports a gap larger than the true distance
    (so never misses a contact), and certifies separation once the box is 2 mm clear."""
    g = torch.Generator().manual_seed(7)
    params, pos, rot = _pairs(kind, g)
    half = torch.tensor(HALF, dtype=torch.float64).expand(pos.shape[0], 3)
    gap, _ = pair_gaps(pos, rot, half, kind, params)
    true = _true_distance(kind, params, pos, rot, half)
    assert bool((true < 0).any()) and bool((true > 0.05).any())  # both sides of contact
    assert bool((gap <= true + 1e-9).all()), float((gap - true).max())
    assert bool((gap[true < 0] < 0).all())
    assert bool((gap[true > 2e-3] > 0).all()), true[(true > 2e-3) & (gap <= 0)]


def test_two_boxes_face_to_face_give_the_exact_gap():
    scene = _scene(Box((1.0, 0.0, 0.0), (0.2, 2.0, 2.0)))  # faces at x = 0.9 and 1.1
    quat = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    far = 0.9 - math.hypot(*HALF)  # beyond |h| of the centre: the broad-phase bound
    for x, gap in ((0.0, far), (0.55, 0.05), (0.6, 0.0), (0.65, -0.05)):
        c, obj, _ = box_clearance(scene, torch.tensor([[x, 0.0, 0.0]], dtype=torch.float64),
                                  quat, HALF)  # fmt: skip
        assert float(c[0]) == pytest.approx(gap, abs=1e-9) and int(obj[0]) == 0


def test_the_box_passes_a_gap_the_sphere_cannot_and_only_when_turned_to_fit():
    # a 0.6 m slot in a wall across x; the frame is 0.6 x 0.5 m: too wide along its x axis
    wall = SceneSpec("gap", (-5.0, -5.0, 0.0), (5.0, 5.0, 3.0), obstacles=(
        Box((0.0, -2.8, 1.5), (0.2, 5.0, 3.0), object_id=1),
        Box((0.0, 2.8, 1.5), (0.2, 5.0, 3.0), object_id=2)))  # fmt: skip
    scene = Scene.stack(wall, dtype=torch.float64)
    pos = torch.tensor([[0.0, 0.0, 1.5]], dtype=torch.float64)
    z = torch.zeros(1, dtype=torch.float64)
    along_y = quat_from_euler(z, z, z + math.pi / 2)  # body x across the slot: 0.6 m wide
    along_x = quat_from_euler(z, z, z)  # body y across: 0.5 m
    assert float(box_clearance(scene, pos, along_x, HALF)[0][0]) == pytest.approx(0.05)
    assert float(box_clearance(scene, pos, along_y, HALF)[0][0]) < 0
    sphere_clear = float(scene_sdf(scene, pos[None]).distance[0, 0]) - math.hypot(*HALF)
    assert sphere_clear < 0  # the bounding sphere does not fit


def test_planes_are_exact_and_the_top_follows_the_attitude():
    scene = _scene(Plane((0.0, 0.0, 0.0), (0.0, 0.0, 1.0)))  # the floor
    z = torch.zeros(1, dtype=torch.float64)
    level, rolled = quat_from_euler(z, z, z), quat_from_euler(z + math.pi / 2, z, z)
    pos = torch.tensor([[0.0, 0.0, 0.2]], dtype=torch.float64)
    assert float(box_clearance(scene, pos, level, HALF)[0][0]) == pytest.approx(0.14)
    assert float(box_clearance(scene, pos, rolled, HALF)[0][0]) == pytest.approx(-0.05)
    half = torch.tensor([HALF], dtype=torch.float64)
    assert float(box_top(pos, level, half)[0]) == pytest.approx(0.26)
    assert float(box_top(pos, rolled, half)[0]) == pytest.approx(0.45)


def test_far_obstacles_are_left_to_the_broad_phase_bound():
    scene = _scene(Sphere((5.0, 0.0, 0.0), 1.0))
    quat = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    c, obj, point = box_clearance(scene, torch.zeros(1, 3, dtype=torch.float64), quat, HALF)
    assert float(c[0]) == pytest.approx(4.0 - math.hypot(*HALF))  # d(centre) - |h|
    assert torch.isnan(point).all()


def test_bad_inputs_name_the_argument():
    scene = _scene(Sphere((5.0, 0.0, 0.0), 1.0))
    quat = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    with pytest.raises(ConfigError, match="half"):
        box_clearance(scene, torch.zeros(1, 3, dtype=torch.float64), quat, (0.3, 0.0, 0.1))
    with pytest.raises(ConfigError, match="quat"):
        box_clearance(scene, torch.zeros(1, 3, dtype=torch.float64), quat[:, :3], HALF)


def test_the_frame_box_comes_from_the_rotors_propellers_and_height():
    from volary.platforms import get

    a = get("0.60kg-EMAX")  # quad X: rotors at (+-d, +-d)/sqrt(2), sphere = arm + prop radius
    arm, rp = a.arm_length, a.radius - a.arm_length
    hx, hy, hz = a.collider_half_extents
    assert hx == pytest.approx(arm / math.sqrt(2) + rp) and hy == pytest.approx(hx)
    assert hz == pytest.approx(arm / 4)  # default height: half the arm length
    assert max(hx, hy) < a.radius  # narrower than the sphere across its arms
    tall = dataclasses.replace(a, frame_height=0.3)
    assert tall.collider_half_extents[2] == pytest.approx(0.15)
    with pytest.raises(ConfigError, match="frame_height"):
        dataclasses.replace(a, frame_height=-0.1)
    from volary.dynamics.params import VehicleParams

    p = VehicleParams.from_airframes([a, tall])
    assert p.collider_half.shape == (2, 3) and float(p.collider_half[1, 2]) == pytest.approx(0.15)


def test_a_world_with_the_box_collider_flies_through_the_slot_its_sphere_cannot():
    from volary.sim import World

    wall = SceneSpec("gap", (-5.0, -5.0, 0.0), (5.0, 5.0, 3.0), obstacles=(
        Box((0.0, -2.76, 1.5), (0.2, 5.0, 3.0), object_id=1),
        Box((0.0, 2.76, 1.5), (0.2, 5.0, 3.0), object_id=2)))  # 0.52 m slot  # fmt: skip
    pos = torch.tensor([[0.0, 0.0, 1.5]])
    hit = {}
    for collider in ("sphere", "box"):
        w = World("0.60kg-EMAX", wall, n_envs=1, collider=collider)  # 0.57 m sphere, 0.46 m box
        w.reset(pos=pos)
        ev = w.collision_events()
        hit[collider] = bool(ev.collided[0])
        assert float(ev.sphere_clearance[0]) <= float(ev.clearance[0])
    assert hit == {"sphere": True, "box": False}
    with pytest.raises(ConfigError, match="collider"):
        World("0.60kg-EMAX", wall, n_envs=1, collider="capsule")
