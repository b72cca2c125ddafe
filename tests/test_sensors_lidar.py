"""LiDAR, multi-zone ToF and the downward rangefinder in a box room with analytic ranges."""

from __future__ import annotations

import math

import pytest
import torch

from _tiny_caster import TinyCaster, exact_casters, room
from volary.errors import ConfigError, UnknownNameError
from volary.math.quaternion import quat_from_euler, quat_to_rotmat
from volary.sensors import (
    LIDAR_PRESETS,
    RANGEFINDER_PRESETS,
    TOF_PRESETS,
    Lidar,
    LidarConfig,
    Mount,
    MultiZoneTof,
    Rangefinder,
    RangefinderConfig,
    TofConfig,
    lidar_config,
    rangefinder_config,
    tof_config,
)
from volary.worlds import Box, Plane, SceneSpec

F32 = torch.float32
HALF, HEIGHT = 5.0, 4.0


CASTERS = exact_casters()


def pose(n, pos, roll=0.0, pitch=0.0, yaw=0.0):
    p = torch.tensor(pos, dtype=F32).expand(n, 3).clone()
    q = quat_from_euler(*(torch.full((n,), v, dtype=F32) for v in (roll, pitch, yaw)))
    return p, q


def room_ranges(origin: torch.Tensor, dirs: torch.Tensor) -> torch.Tensor:
    """Analytic distance from inside the room [-5, 5]^2 x [0, 4] along unit dirs (..., 3)."""
    lo = torch.tensor([-HALF, -HALF, 0.0], dtype=torch.float64)
    hi = torch.tensor([HALF, HALF, HEIGHT], dtype=torch.float64)
    d = dirs.double()
    o = origin.double()
    t = torch.where(d > 0, (hi - o) / d, torch.where(d < 0, (lo - o) / d, math.inf))
    return t.amin(-1)


@pytest.mark.parametrize("name,make", CASTERS, ids=[c[0] for c in CASTERS])
def test_lidar_returns_analytic_ranges_in_a_room(name, make):
    cfg = lidar_config("os0_32", columns=64, noise_std=0.0, max_range=30.0)
    lidar = Lidar(cfg, make(room(HALF, HEIGHT), 2), mount=Mount((0.0, 0.0, 0.1)))
    p, q = pose(2, (1.0, -0.5, 2.0), yaw=0.3, roll=0.1)
    r = lidar(p, q)
    assert r.range.shape == (2, 32, 64) and r.valid.all()
    rot = quat_to_rotmat(q.double())
    origin = p.double() + (rot @ torch.tensor([0.0, 0.0, 0.1]).double())
    dirs = torch.matmul(lidar.bundle.dirs_s.double(), rot.transpose(-1, -2))
    ref = room_ranges(origin[:, None], dirs).reshape(2, 32, 64)
    assert torch.allclose(r.range.double(), ref, atol=1e-5)
    pts = r.points("world")
    assert pts.shape == (2, 32 * 64, 3)
    inner = (pts.abs()[..., :2] <= HALF + 1e-4).all() & (pts[..., 2] >= -1e-4).all()
    assert inner and (pts[..., 2] <= HEIGHT + 1e-4).all()
    assert set(r.object_id.unique().tolist()) <= {1, 2, 3, 4, 5, 6}


def test_lidar_pattern_rows_top_first_columns_left_first():
    cfg = LidarConfig(channels=5, columns=8, vfov_min=-0.4, vfov_max=0.4, hfov=2 * math.pi)
    el, az = cfg.elevations(), cfg.azimuths()
    assert torch.allclose(el, torch.linspace(0.4, -0.4, 5).double())
    assert az[0] > 0 > az[-1] and torch.allclose(
        az[:-1] - az[1:], torch.full((7,), math.pi / 4).double()
    )
    d = Lidar(cfg, TinyCaster(room(), 1)).bundle.dirs_s.reshape(5, 8, 3)
    assert (d[0, :, 2] > 0).all() and (d[-1, :, 2] < 0).all()
    assert d[2, 0, 1] > 0  # column 0 looks left (+y)


def test_dome_lidar_covers_the_upper_hemisphere():
    lidar = Lidar(lidar_config("dome", noise_std=0.0), TinyCaster(room(HALF, HEIGHT), 1, dtype=F32))
    d = lidar.bundle.dirs_s
    assert (d[:, 2] >= -1e-9).all() and d[:, 2].max() > 0.999
    r = lidar(*pose(1, (0.0, 0.0, 1.0)))
    assert r.range.shape == (1, 64, 512)
    assert torch.allclose(r.range[0, 0], torch.full((512,), HEIGHT - 1.0), atol=1e-4)  # zenith
    ref = room_ranges(torch.tensor([0.0, 0.0, 1.0]), d).reshape(64, 512)
    ok = r.valid[0]
    assert torch.allclose(r.range[0][ok].double(), ref[ok], atol=2e-4)  # float32, ~10 m


@pytest.mark.parametrize("name,make", CASTERS, ids=[c[0] for c in CASTERS])
def test_tof_zones_are_min_or_mean_of_their_sub_rays(name, make):
    caster = make(room(HALF, HEIGHT), 1)
    p, q = pose(1, (2.0, 0.0, 2.0))  # facing the wall x = 5 at 3 m
    for reduction in ("min", "mean"):
        tof = MultiZoneTof(
            tof_config("vl53l5cx", noise_std=0.0, noise_quadratic=0.0, reduction=reduction), caster
        )
        r = tof(p, q)
        assert r.range.shape == (1, 8, 8) and r.valid.all()
        sub = tof.bundle.dirs_b.double().reshape(8, 8, 16, 3)  # level, yaw 0: body = world
        ref = 3.0 / sub[..., 0]
        ref = ref.amin(-1) if reduction == "min" else ref.mean(-1)
        assert torch.allclose(r.range[0].double(), ref, atol=1e-5)
    # the zone grid follows the image: an obstacle up-left (+y, +z) shows in zone row 0, col 0
    near = SceneSpec(
        "n",
        (-6, -6, -1),
        (6, 6, 5),
        room(HALF, HEIGHT).obstacles + (Box((3.0, 0.35, 2.35), (0.2, 0.2, 0.2), 0.0, 9),),
    )
    r = MultiZoneTof(tof_config("vl53l5cx", noise_std=0.0, noise_quadratic=0.0), make(near, 1))(
        p, q
    )
    assert r.range[0, 0, 0] < 1.2 and r.range[0, -1, -1] > 2.9


def test_tof_out_of_range_zones_are_invalid():
    tof = MultiZoneTof(TofConfig(max_range=2.0), TinyCaster(room(), 1, dtype=F32))
    r = tof(*pose(1, (0.0, 0.0, 2.0)))
    assert not r.valid.any() and (r.range == 2.0).all()
    assert r.points("world").isnan().all()


@pytest.mark.parametrize("name,make", CASTERS, ids=[c[0] for c in CASTERS])
def test_downward_rangefinder_reads_altitude(name, make):
    scene = SceneSpec("f", (-50, -50, 0), (50, 50, 50), (Plane((0, 0, 0), (0, 0, 1), 0),))
    rf = Rangefinder("ideal", make(scene, 3), mount=Mount((0.0, 0.0, -0.05)))
    p = torch.tensor([[0.0, 0, 1.0], [0, 0, 2.0], [3, 4, 10.0]])
    q = quat_from_euler(
        torch.tensor([0.0, 0.5, 0.0]), torch.tensor([0.0, 0.0, -0.3]), torch.zeros(3)
    )
    r = rf(p, q)
    tilt = torch.cos(torch.tensor([0.0, 0.5, 0.3]))
    ref = (p[:, 2] - 0.05 * tilt) / tilt
    assert torch.allclose(r.range, ref, atol=1e-5) and r.valid.all()
    pts = r.points("world")
    assert torch.allclose(pts[:, 0, 2], torch.zeros(3), atol=1e-5)
    upside = rf(p, quat_from_euler(torch.full((3,), math.pi), torch.zeros(3), torch.zeros(3)))
    assert not upside.valid.any() and (upside.range == 100.0).all()


def test_rangefinder_limits_and_noise_are_deterministic():
    scene = SceneSpec("f", (-50, -50, 0), (50, 50, 150), ())
    cfg = rangefinder_config("flightgoggles")
    p, q = pose(8, (0.0, 0.0, 0.1))  # below the 0.2 m minimum
    assert not Rangefinder(cfg, TinyCaster(scene, 8, ground=True))(p, q).valid.any()

    def read(n, seed):
        rf = Rangefinder(cfg, TinyCaster(scene, n, ground=True, dtype=F32), seed=seed)
        return [rf(*pose(n, (0.0, 0.0, 30.0))).range for _ in range(3)]

    a, b, one, other = read(8, 1), read(8, 1), read(1, 1), read(8, 2)
    for k in range(3):
        assert torch.equal(a[k], b[k]) and torch.equal(a[k][:1], one[k])
        assert not torch.equal(a[k], other[k])
    err = torch.stack(a) - 30.0
    assert 0.02 < err.std() < 0.1


def test_lidar_noise_is_independent_of_batch_size():
    def scan(n):
        lidar = Lidar(
            lidar_config("os1_16", columns=32, dropout=0.05),
            TinyCaster(room(), n, dtype=F32),
            seed=5,
        )
        return lidar(*pose(n, (0.0, 0.0, 2.0))).range

    a, one = scan(8), scan(1)
    assert torch.equal(a[:1], one) and not torch.equal(a[0], a[1])


def test_bad_configs_name_the_field_and_unknown_presets_list_names():
    for field, kw in {
        "channels": dict(channels=0),
        "columns": dict(columns=-1),
        "min_range": dict(min_range=10.0, max_range=1.0),
        "vfov_min": dict(vfov_min=-2.0),
        "noise_std": dict(noise_std=math.nan),
        "hfov": dict(hfov=7.0),
    }.items():
        with pytest.raises(ConfigError, match=field):
            LidarConfig(**kw)
    for field, kw in {
        "fov": dict(fov=math.pi),
        "zones_x": dict(zones_x=0),
        "reduction": dict(reduction="median"),
        "max_range": dict(max_range=math.nan),
    }.items():
        with pytest.raises(ConfigError, match=field):
            TofConfig(**kw)
    with pytest.raises(ConfigError, match="min_range"):
        RangefinderConfig(min_range=-1.0)
    with pytest.raises(UnknownNameError, match="os0_128"):
        lidar_config("velodyne")
    with pytest.raises(UnknownNameError, match="vl53l5cx"):
        tof_config("vl53l1x")
    with pytest.raises(UnknownNameError, match="flightgoggles"):
        rangefinder_config("sf11")
    for table in (LIDAR_PRESETS, TOF_PRESETS, RANGEFINDER_PRESETS):
        assert all(c.source for c in table.values())
    assert {f"os{m}_{c}" for m in (0, 1) for c in (16, 32, 64, 128)} <= set(LIDAR_PRESETS)
    lidar = Lidar("os1_16", TinyCaster(room(), 2))
    with pytest.raises(ConfigError, match="quat"):
        lidar(torch.zeros(2, 3), torch.zeros(3, 4))
