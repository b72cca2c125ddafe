"""Ray-cast cameras: analytic depth, extrinsics (T_BC per DESIGN.md), noise determinism,
stereo shadows, point clouds and the input checks at the public boundary."""

from __future__ import annotations

import math

import pytest
import torch

from _tiny_caster import TinyCaster
from volary.dynamics.state import MultirotorState
from volary.errors import ConfigError, UnknownNameError
from volary.math.quaternion import quat_from_euler
from volary.sensors import CAMERA_PRESETS, CameraConfig, DepthCamera, Mount, camera_config
from volary.worlds import Box, Cylinder, Plane, SceneSpec

F32 = torch.float32
BOUNDS = ((-20.0, -20.0, 0.0), (20.0, 20.0, 20.0))  # floor z = 0 when ground=True


def spec(*obstacles) -> SceneSpec:
    return SceneSpec("t", *BOUNDS, obstacles=tuple(obstacles))


def casters():
    """(name, factory(specs, n_envs, ground), tolerance m for curved surfaces)."""
    out = [("tiny", lambda s, n, g=False: TinyCaster(s, n, ground=g, dtype=F32), 1e-5)]
    try:
        from volary.sensors.raycast import make_raycaster
    except ImportError:
        return out
    out.append(
        ("torch", lambda s, n, g=False: make_raycaster(s, n, backend="torch", ground=g), 1e-5)
    )
    try:
        import embreex  # noqa: F401

        # embree cylinders are tessellated (64 segments): the raycast module's stated bound
        # 2 r sin(pi / 64) for the 0.5 m cylinder below
        out.append(
            (
                "embree",
                lambda s, n, g=False: make_raycaster(s, n, backend="embree", ground=g),
                2 * 0.5 * math.sin(math.pi / 64) + 1e-5,
            )
        )
    except ImportError:
        pass
    try:
        import warp  # noqa: F401

        out.append(
            (
                "warp",
                lambda s, n, g=False: make_raycaster(s, n, backend="warp", ground=g),
                2 * 0.5 * math.sin(math.pi / 64) + 1e-5,
            )
        )
    except ImportError:
        pass
    return out


CASTERS = casters()


def pose(n: int, pos=(0.0, 0.0, 5.0), roll=0.0, pitch=0.0, yaw=0.0):
    p = torch.tensor(pos, dtype=F32).expand(n, 3).clone()
    q = quat_from_euler(*(torch.full((n,), v, dtype=F32) for v in (roll, pitch, yaw)))
    return p, q


def wall_x(d: float, oid: int = 7) -> Plane:
    return Plane((d, 0.0, 0.0), (-1.0, 0.0, 0.0), oid)


@pytest.mark.parametrize("name,make,tol", CASTERS, ids=[c[0] for c in CASTERS])
def test_depth_of_a_plane_is_analytic(name, make, tol):
    cfg = CameraConfig(width=32, height=24, hfov=1.4, max_range=20.0)
    cam = DepthCamera(cfg, make(spec(wall_x(5.0)), 2), mount=Mount.camera((0.2, 0.0, 0.0)))
    r = cam(*pose(2))
    assert r.depth.shape == (2, 24, 32) and r.valid.all()
    assert torch.allclose(r.depth, torch.full_like(r.depth, 4.8), atol=1e-5)
    # range mode: z-depth / cos(angle to the optical axis)
    cam_r = DepthCamera(
        camera_config(cfg, depth_mode="range"), cam.caster, mount=Mount.camera((0.2, 0.0, 0.0))
    )
    rr = cam_r(*pose(2)).depth
    fx, fy, cx, cy = cfg.intrinsics.tolist()
    v, u = torch.meshgrid(torch.arange(24) + 0.5, torch.arange(32) + 0.5, indexing="ij")
    ref = 4.8 * torch.sqrt(1 + ((u - cx) / fx) ** 2 + ((v - cy) / fy) ** 2)
    assert torch.allclose(rr[0].double(), ref.double(), atol=1e-5)
    assert (r.segmentation == 7).all()
    n = r.normals[0].reshape(-1, 3)
    assert torch.allclose(n, torch.tensor([0.0, 0.0, -1.0]).expand_as(n), atol=1e-6)


@pytest.mark.parametrize("name,make,tol", CASTERS, ids=[c[0] for c in CASTERS])
def test_depth_of_a_cylinder_is_analytic(name, make, tol):
    cx0, rad = 4.0, 0.5
    scene = spec(Cylinder((cx0, 0.3, 5.0), rad, 4.0, object_id=3))
    cfg = CameraConfig(width=40, height=30, hfov=0.9, max_range=20.0)
    cam = DepthCamera(cfg, make(scene, 1))
    r = cam(*pose(1))
    # reference: first intersection of each pixel ray with the infinite vertical cylinder
    d = cam.bundle.dirs_b.double()  # body = world here (level, yaw 0)
    ox, oy = 0.0 - cx0, 0.0 - 0.3
    a = d[:, 0] ** 2 + d[:, 1] ** 2
    b = ox * d[:, 0] + oy * d[:, 1]
    c = ox**2 + oy**2 - rad**2
    disc = b * b - a * c
    t = (-b - disc.clamp_min(0).sqrt()) / a
    hit = disc > 0
    z_ref = (t * cam.z_per_range.double()).reshape(30, 40)
    hit = hit.reshape(30, 40)
    both = hit & r.valid[0]
    assert both.sum() > 100
    assert torch.allclose(r.depth[0][both].double(), z_ref[both], atol=tol)
    # away from the silhouette, hits agree exactly
    assert (r.valid[0] == hit)[:, :].float().mean() > 0.97
    assert (r.segmentation[0][r.valid[0]] == 3).all()


def test_default_mount_looks_along_body_x_with_opencv_axes():
    cam = DepthCamera(CameraConfig(width=4, height=4), TinyCaster(spec(wall_x(3.0)), 1))
    r_bc = cam.config.mount.matrix()
    assert torch.allclose(r_bc, torch.tensor([[0.0, 0, 1], [-1, 0, 0], [0, -1, 0]]).double())


def test_extrinsics_yaw_roll_pitch():
    """A forward camera at t_BC = (0.2, 0, 0): wall at x = d -> depth d - 0.2; yawed 90 deg it
    sees the wall at y = d; rolled 90 deg the floor moves from the image bottom to its right
    side; pitched 90 deg down it sees the floor at height - 0.2."""
    d = 5.0
    scene = spec(wall_x(d, 7), Plane((0, d, 0), (0, -1, 0), 8))
    caster = TinyCaster(scene, 1, ground=True, dtype=F32)
    cfg = CameraConfig(width=16, height=16, hfov=1.2, max_range=30.0)
    cam = DepthCamera(cfg, caster, mount=Mount.camera((0.2, 0.0, 0.0)))
    level = cam(*pose(1, pos=(0, 0, 2.0)))
    assert torch.allclose(level.depth[0, 7:9, 7:9], torch.full((2, 2), d - 0.2), atol=1e-5)
    seg = level.segmentation[0]
    assert (seg[-1] == 0).all() and (seg[0] == 7).all()  # floor at the bottom rows
    yawed = cam(*pose(1, pos=(0, 0, 2.0), yaw=math.pi / 2))
    assert torch.allclose(yawed.depth[0, 7:9, 7:9], torch.full((2, 2), d - 0.2), atol=1e-5)
    assert (yawed.segmentation[0, :8] == 8).all()
    rolled = cam(*pose(1, pos=(0, 0, 2.0), roll=math.pi / 2))
    seg = rolled.segmentation[0]
    assert (seg[:, -1] == 0).all() and (seg[:, 0] == 7).all()  # floor on the right columns
    assert torch.allclose(rolled.depth[0, 7:9, 7:9], torch.full((2, 2), d - 0.2), atol=1e-5)
    down = cam(*pose(1, pos=(0, 0, 2.0), pitch=math.pi / 2))
    assert torch.allclose(down.depth[0, 7:9, 7:9], torch.full((2, 2), 1.8), atol=1e-5)
    # a mount pitched down by 90 deg on a level body gives the same picture
    cam2 = DepthCamera(cfg, caster, mount=Mount.camera((0.0, 0.0, -0.2), pitch=math.pi / 2))
    assert torch.allclose(cam2(*pose(1, pos=(0, 0, 2.0))).depth, down.depth, atol=1e-5)


def test_state_input_and_point_clouds():
    caster = TinyCaster(spec(wall_x(5.0)), 3, dtype=F32)
    cam = DepthCamera(CameraConfig(width=8, height=6, hfov=1.0), caster)
    state = MultirotorState.create(3, 4, pos=[0.0, 0.0, 5.0])
    r = cam(state)
    pw = r.points("world")
    assert pw.shape == (3, 48, 3)
    assert torch.allclose(pw[..., 0], torch.full((3, 48), 5.0), atol=1e-5)
    ps = r.points("sensor")
    assert torch.allclose(ps[..., 2].reshape(3, 6, 8), r.depth, atol=1e-5)
    with pytest.raises(ConfigError, match="frame"):
        r.points("body")


def test_out_of_range_pixels_get_the_documented_value():
    caster = TinyCaster(spec(wall_x(5.0)), 1, dtype=F32)
    far = DepthCamera(CameraConfig(width=4, height=4, max_range=3.0), caster)(*pose(1))
    assert not far.valid.any() and (far.depth == 3.0).all() and (far.segmentation == -1).all()
    cfg = CameraConfig(width=4, height=4, max_range=3.0, invalid_value=math.nan)
    assert DepthCamera(cfg, caster)(*pose(1)).depth.isnan().all()
    near = DepthCamera(
        CameraConfig(width=4, height=4, min_range=10.0, max_range=12.0, invalid_value=0.0), caster
    )(*pose(1))
    assert not near.valid.any() and (near.depth == 0).all()
    assert (near.points("world").isnan()).all()


def test_noise_is_deterministic_per_seed_and_independent_of_batch_size():
    cfg = CameraConfig(width=8, height=8, noise_std=0.01, noise_quadratic=0.01, dropout=0.1)

    def frames(n: int, seed: int):
        cam = DepthCamera(cfg, TinyCaster(spec(wall_x(4.0)), n, dtype=F32), seed=seed)
        return [cam(*pose(n)).depth for _ in range(2)]

    a, b, one, other = frames(8, 3), frames(8, 3), frames(1, 3), frames(8, 4)
    for k in range(2):
        assert torch.equal(a[k], b[k])
        assert torch.equal(a[k][:1], one[k])
        assert not torch.equal(a[k], other[k])
    assert not torch.equal(a[0], a[1])  # a fresh draw per call
    assert not torch.equal(a[0][0], a[0][1])  # per env
    clean = DepthCamera(
        camera_config(cfg, noise_std=0.0, noise_quadratic=0.0, dropout=0.0),
        TinyCaster(spec(wall_x(4.0)), 8, dtype=F32),
    )(*pose(8)).depth
    valid = a[0] != cfg.max_range
    err = (a[0] - clean)[valid]
    sigma = 0.01 + 0.01 * 4.0**2
    assert 0.5 * sigma < err.std() < 1.5 * sigma
    drop = 1 - valid.float().mean()
    assert 0.03 < drop < 0.2


def test_stereo_shadow_invalidates_pixels_hidden_from_the_second_view():
    scene = spec(wall_x(5.0, 7), Box((2.5, 0.0, 5.0), (0.2, 0.2, 4.0), object_id=9))
    cfg = CameraConfig(
        width=64, height=8, hfov=1.2, max_range=20.0, stereo_shadow=True, stereo_baseline=0.3
    )
    caster = TinyCaster(scene, 1, dtype=F32)
    r = DepthCamera(cfg, caster)(*pose(1))
    plain = DepthCamera(camera_config(cfg, stereo_shadow=False), caster)(*pose(1))
    assert plain.valid.all()
    shadow = ~r.valid[0]
    assert shadow.sum() >= 8
    assert (r.segmentation[0][shadow] == 7).all()  # only the wall behind the pole
    cols = shadow.any(0).nonzero()[:, 0]
    assert (cols < 32).all()  # the second view sits to the right (+x_C): shadow on the left
    # reference: the 2-D segment o2 -> P crosses the pole's square [2.4, 2.6] x [-0.1, 0.1]
    pts = plain.points("world")[0].double()
    o2 = torch.tensor([0.0, -0.3])
    v = pts[:, :2] - o2
    t0 = (torch.tensor([2.4, -0.1]) - o2) / v
    t1 = (torch.tensor([2.6, 0.1]) - o2) / v
    tn = torch.minimum(t0, t1).amax(-1)
    tf = torch.maximum(t0, t1).amin(-1)
    ref = ((tn <= tf) & (tf > 0) & (tn < 1)).reshape(8, 64) & (plain.segmentation[0] == 7)
    assert (ref != shadow).sum() <= 2


@pytest.mark.parametrize("name,make,tol", CASTERS, ids=[c[0] for c in CASTERS])
def test_camera_inside_an_obstacle_gives_finite_documented_output(name, make, tol):
    scene = spec(Box((0.0, 0.0, 5.0), (2.0, 2.0, 2.0), object_id=4))
    cam = DepthCamera(CameraConfig(width=8, height=8), make(scene, 1))
    r = cam(*pose(1))
    assert torch.isfinite(r.depth).all()
    assert (r.depth[r.valid] <= 1.5).all()  # it sees the inside of the box


def test_bad_configs_name_the_field():
    bad = {
        "width": dict(width=0),
        "height": dict(height=-3),
        "hfov": dict(hfov=0.0),
        "vfov": dict(vfov=math.pi),
        "min_range": dict(min_range=5.0, max_range=5.0),
        "noise_std": dict(noise_std=math.nan),
        "dropout": dict(dropout=1.0),
        "depth_mode": dict(depth_mode="disparity"),
        "stereo_baseline": dict(stereo_shadow=True),
    }
    for field, kw in bad.items():
        with pytest.raises(ConfigError, match=field):
            CameraConfig(**kw)
    with pytest.raises(ConfigError, match="hfov"):
        CameraConfig(hfov=math.nan)
    with pytest.raises(UnknownNameError, match="aerial_gym_64"):
        camera_config("kinect")
    for name, cfg in CAMERA_PRESETS.items():
        assert cfg.source, name


def test_bad_inputs_name_the_argument():
    cam = DepthCamera(CameraConfig(width=4, height=4), TinyCaster(spec(wall_x(5.0)), 2))
    p, q = pose(2)
    with pytest.raises(ConfigError, match="pos"):
        cam(p[:1], q)
    with pytest.raises(ConfigError, match="quat"):
        cam(p, q[:, :3])
    with pytest.raises(ConfigError, match="pos"):
        cam(p.long(), q)
    with pytest.raises(ConfigError, match="pos"):
        cam(object())
    with pytest.raises(ConfigError, match="caster"):
        DepthCamera("ideal_64", object())
    if torch.cuda.is_available():
        with pytest.raises(ConfigError, match="device"):
            cam(p.cuda(), q)


def test_preview_pngs_are_written(tmp_path):
    from volary.sensors.plots import depth_png, lidar_png

    cam = DepthCamera(CameraConfig(width=16, height=12), TinyCaster(spec(wall_x(5.0)), 1))
    r = cam(*pose(1))
    assert depth_png(tmp_path / "d.png", r.depth).stat().st_size > 1000
    assert lidar_png(tmp_path / "l.png", r.points("world")).stat().st_size > 1000
    with pytest.raises(ConfigError, match="depth"):
        depth_png(tmp_path / "x.png", torch.zeros(3))
    with pytest.raises(ConfigError, match="points"):
        lidar_png(tmp_path / "x.png", torch.zeros(4, 2))


def test_mount_accepts_a_quaternion_or_a_rotation_matrix():
    r_bc = [[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]]
    caster = TinyCaster(spec(wall_x(5.0)), 1, dtype=F32)
    cfg = CameraConfig(width=4, height=4)
    a = DepthCamera(cfg, caster, mount=((0.1, 0.0, 0.0), r_bc))(*pose(1)).depth
    b = DepthCamera(cfg, caster, mount=((0.1, 0.0, 0.0), (0.5, -0.5, 0.5, -0.5)))(*pose(1)).depth
    assert torch.allclose(a, b) and torch.allclose(a, torch.full_like(a, 4.9), atol=1e-5)
    with pytest.raises(ConfigError, match="mount"):
        Mount((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0))
    with pytest.raises(ConfigError, match="mount"):
        DepthCamera(cfg, caster, mount="forward")
