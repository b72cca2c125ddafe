"""IR beacons: gate corners projected like a pinhole reference; occluded, behind-the-camera and
out-of-image corners dropped; seeded pixel noise independent of the batch size."""

from __future__ import annotations

import math

import pytest
import torch

from _tiny_caster import TinyCaster, exact_casters
from volary.errors import ConfigError
from volary.math.quaternion import quat_from_euler
from volary.sensors import CameraConfig, IrBeacons, Mount, project_pinhole
from volary.worlds import Box, Gate, Scene, SceneSpec, Sphere

F32 = torch.float32
CAM = CameraConfig(width=320, height=240, hfov=1.5)
CORNERS = ((5.0, 0.5, 5.5), (5.0, -0.5, 5.5), (5.0, -0.5, 4.5), (5.0, 0.5, 4.5))


def scene(*extra, gates=None) -> SceneSpec:
    g = (Gate(CORNERS, "g0", border=0.1, depth=0.1, object_id=11),) if gates is None else gates
    return SceneSpec("b", (-20, -20, 0), (20, 20, 20), tuple(extra), g)


CASTERS = exact_casters()


def pose(n, pos=(0.0, 0.0, 5.0), yaw=0.0):
    p = torch.tensor(pos, dtype=F32).expand(n, 3).clone()
    q = quat_from_euler(torch.zeros(n), torch.zeros(n), torch.full((n,), yaw))
    return p, q


def reference_pixels(corners, cam_pos):
    """OpenCV pinhole of a camera at cam_pos looking along +x_W: x_C = -y, y_C = -z, z_C = x."""
    fx = (CAM.width / 2) / math.tan(CAM.hfov / 2)
    out = []
    for c in corners:
        x, y, z = (c[i] - cam_pos[i] for i in range(3))
        out.append((fx * (-y) / x + CAM.width / 2, fx * (-z) / x + CAM.height / 2))
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("name,make", CASTERS, ids=[c[0] for c in CASTERS])
def test_projections_match_the_pinhole_reference(name, make):
    b = IrBeacons(CAM, make(scene(), 2), scene())
    r = b(*pose(2))
    assert r.pixels.shape == (2, 4, 2) and r.visible.all()
    ref = reference_pixels(CORNERS, (0.0, 0.0, 5.0))
    assert torch.allclose(r.pixels[0].double(), ref, atol=1e-3)
    assert r.gate_index[0].tolist() == [0, 0, 0, 0] and r.corner[0].tolist() == [0, 1, 2, 3]
    assert (r.object_id == 11).all()
    assert torch.allclose(r.depth, torch.full((2, 4), 5.0))
    # the same numbers from the public helper
    pc = torch.tensor([[-0.5, -0.5, 5.0]], dtype=torch.float64)
    assert torch.allclose(project_pinhole(pc, CAM.intrinsics)[0], ref[0])


@pytest.mark.parametrize("name,make", CASTERS, ids=[c[0] for c in CASTERS])
def test_an_occluded_corner_is_dropped(name, make):
    blocker = Sphere((2.5, 0.25, 5.25), 0.1, object_id=5)  # on the segment camera -> corner 0
    s = scene(blocker)
    r = IrBeacons(CAM, make(s, 1), s)(*pose(1))
    assert r.visible[0].tolist() == [False, True, True, True]
    assert r.pixels[0, 0].isnan().all() and not r.pixels[0, 1:].isnan().any()


@pytest.mark.parametrize("name,make", CASTERS, ids=[c[0] for c in CASTERS])
def test_the_gates_own_frame_does_not_hide_its_corners_from_an_oblique_view(name, make):
    s = scene()
    b = IrBeacons(CAM, make(s, 1), s)
    cam_pos = (1.0, 3.0, 6.5)
    yaw = math.atan2(0.0 - 3.0, 5.0 - 1.0)
    r = b(*pose(1, cam_pos, yaw))
    assert r.visible.all()
    # a wall just in front (another object, within frame_margin of the corners) still hides them
    s2 = scene(Box((4.85, 0.0, 5.0), (0.05, 3.0, 3.0), object_id=12))
    r2 = IrBeacons(CAM, make(s2, 1), s2)(*pose(1))
    assert not r2.visible.any()


def test_behind_and_outside_the_image_are_dropped():
    s = scene()
    b = IrBeacons(CAM, TinyCaster(s, 3, dtype=F32), s)
    p = torch.tensor([[0.0, 0.0, 5.0], [10.0, 0.0, 5.0], [0.0, 0.0, 5.0]])
    q = quat_from_euler(torch.zeros(3), torch.zeros(3), torch.tensor([0.0, 0.0, 1.2]))
    r = b(p, q)
    assert r.visible[0].all()
    assert not r.visible[1].any()  # gate behind the camera
    assert not r.visible[2].any()  # turned 69 deg away: outside the 86 deg-wide image
    # the mount turns the camera too: yawed 1 rad left on a level body the gate leaves the image
    pw = IrBeacons(CAM, TinyCaster(s, 1), s, mount=Mount.camera(yaw=1.0))(*pose(1))
    assert not pw.visible.any()


def test_pixel_noise_is_seeded_and_independent_of_batch_size():
    s = scene()

    def read(n, seed):
        b = IrBeacons(CAM, TinyCaster(s, n, dtype=F32), s, seed=seed, pixel_noise_std=1.5)
        return [b(*pose(n)).pixels for _ in range(2)]

    a, again, one, other = read(4, 7), read(4, 7), read(1, 7), read(4, 8)
    for k in range(2):
        assert torch.equal(a[k], again[k]) and torch.equal(a[k][:1], one[k])
        assert not torch.equal(a[k], other[k])
    err = a[0] - reference_pixels(CORNERS, (0.0, 0.0, 5.0)).float()
    assert 0.7 < err.std() < 2.5


def test_scene_tensors_and_bad_inputs():
    s = scene()
    st = Scene.stack(s, 2)
    r = IrBeacons(CAM, TinyCaster(s, 2), st)(*pose(2))
    assert r.visible.all() and (r.object_id == -1).all()
    with pytest.raises(ConfigError, match="scene"):
        IrBeacons(CAM, TinyCaster(s, 3), st)
    with pytest.raises(ConfigError, match="scene"):
        IrBeacons(CAM, TinyCaster(s, 1), [1, 2])
    with pytest.raises(ConfigError, match="pixel_noise_std"):
        IrBeacons(CAM, TinyCaster(s, 1), s, pixel_noise_std=-1.0)
    with pytest.raises(ConfigError, match="pos"):
        IrBeacons(CAM, TinyCaster(s, 1), s)(torch.zeros(2, 3), torch.zeros(2, 4))


def _three_gates() -> SceneSpec:
    gates = tuple(
        Gate(tuple((x, y + dy, z) for x, y, z in CORNERS), f"g{i}", border=0.1, depth=0.1,
             object_id=10 + i)
        for i, dy in enumerate((-2.0, 0.0, 2.0))
    )  # fmt: skip
    return scene(gates=gates)


def test_mislabelled_reports_keep_their_pixel_at_the_set_rate():
    """Each report is mislabelled with probability mislabel_rate: another corner of its gate or,
    half of the time, another gate's id; its pixel and visibility are what the fault-free
    sensor reports; rate 0 reports the true labels."""
    s, n, frames, rate = _three_gates(), 16, 40, 0.2

    def read(**kw):
        b = IrBeacons(CAM, TinyCaster(s, n, dtype=F32), s, seed=3, pixel_noise_std=1.0, **kw)
        return [b(*pose(n)) for _ in range(frames)]

    clean, faulty = read(), read(mislabel_rate=rate)
    wrong = other_gate = reports = 0
    for c, f in zip(clean, faulty, strict=True):
        assert c.mislabelled is None and c.visible.all()  # all 12 corners in view
        assert torch.equal(c.pixels, f.pixels) and torch.equal(c.visible, f.visible)
        assert torch.equal(c.object_id, 10 + c.gate_index)  # rate 0: the true labels
        changed = (f.corner != c.corner) | (f.object_id != c.object_id)
        assert torch.equal(changed, f.mislabelled)
        assert torch.equal(f.object_id, 10 + f.gate_index)  # a label names a real gate
        moved = f.gate_index != c.gate_index
        assert torch.equal(f.corner[moved], c.corner[moved])  # another gate: same corner
        reports += int(f.visible.sum())
        wrong += int(f.mislabelled.sum())
        other_gate += int(moved.sum())
    sd = math.sqrt(reports * rate * (1 - rate))
    assert abs(wrong - rate * reports) < 4 * sd, (wrong, reports)
    assert abs(other_gate - wrong / 2) < 4 * math.sqrt(wrong / 4), (other_gate, wrong)
    one = IrBeacons(CAM, TinyCaster(s, 1, dtype=F32), s, seed=3, pixel_noise_std=1.0,
                    mislabel_rate=rate)(*pose(1))  # fmt: skip
    assert torch.equal(one.object_id, faulty[0].object_id[:1])  # keyed per env, not per batch
    assert torch.equal(one.corner, faulty[0].corner[:1])
    with pytest.raises(ConfigError, match="mislabel_rate"):
        IrBeacons(CAM, TinyCaster(s, 1), s, mislabel_rate=1.0)
