"""Camera effects: brightness, exposure, noise, motion blur, dynamic objects."""

from __future__ import annotations

import math

import pytest
import torch

from volary.errors import ConfigError
from volary.math.quaternion import quat_from_euler, quat_to_rotmat
from volary.sensors.effects import (
    brightness,
    draw_brightness,
    exposure,
    interpolate_poses,
    motion_blur,
    place_object,
    sensor_noise,
    slerp,
    with_objects,
)
from volary.sensors.splat import GaussianSplats, render, splats_from_colours
from volary.sensors.splat.render import look_at

K = (40.0, 40.0, 24.0, 16.0)  # fx, fy, cx, cy for 48 x 32 frames


def grey(n: int = 2, value: float = 0.5) -> torch.Tensor:
    return torch.full((n, 32, 48, 3), value)


def test_brightness_scales_per_env_and_clips():
    rgb = torch.rand(3, 8, 8, 3, generator=torch.Generator().manual_seed(0))
    out = brightness(rgb, torch.tensor([0.4, 1.0, 2.0]))
    torch.testing.assert_close(out[0], 0.4 * rgb[0])
    torch.testing.assert_close(out[1], rgb[1])
    assert out[2].max() <= 1.0 and torch.equal(out[2], (2 * rgb[2]).clamp(max=1.0))
    with pytest.raises(ConfigError, match="factor"):
        brightness(rgb, -0.1)
    with pytest.raises(ConfigError, match="factor"):
        brightness(rgb, torch.ones(2))
    with pytest.raises(ConfigError, match="rgb"):
        brightness(rgb[0], 1.0)


def test_draw_brightness_is_seeded_and_in_the_sous_vide_range():
    a = draw_brightness(1000, torch.Generator().manual_seed(7))
    b = draw_brightness(1000, torch.Generator().manual_seed(7))
    assert torch.equal(a, b)
    assert 0.4 <= float(a.min()) and float(a.max()) <= 1.0
    assert float(a.max() - a.min()) > 0.55  # spans the range
    assert not torch.equal(a, draw_brightness(1000, torch.Generator().manual_seed(8)))
    with pytest.raises(ConfigError, match="low"):
        draw_brightness(3, torch.Generator(), low=0.9, high=0.5)


def test_exposure_is_powers_of_two_and_saturates():
    out = exposure(grey(2, 0.3), torch.tensor([1.0, -1.0]))
    torch.testing.assert_close(out[0], torch.full_like(out[0], 0.6))
    torch.testing.assert_close(out[1], torch.full_like(out[1], 0.15))
    assert torch.equal(exposure(grey(1, 0.7), 2.0), torch.ones(1, 32, 48, 3))
    with pytest.raises(ConfigError, match="ev"):
        exposure(grey(), float("nan"))


def test_sensor_noise_has_the_poisson_gaussian_variance_and_is_seeded():
    """Var = read_std^2 + shot x (Foi et al. 2008, Eq. 1), measured on 3 x 32 x 48 x 100 px."""
    x = torch.full((100, 32, 48, 3), 0.4, dtype=torch.float64)
    noisy = sensor_noise(x, torch.Generator().manual_seed(1), read_std=0.02, shot=0.01)
    var = float((noisy - x).var())
    expected = 0.02**2 + 0.01 * 0.4
    assert abs(var - expected) < 0.03 * expected  # 460k samples: ~0.2 % standard error
    again = sensor_noise(x, torch.Generator().manual_seed(1), read_std=0.02, shot=0.01)
    assert torch.equal(noisy, again)
    assert noisy.min() >= 0 and noisy.max() <= 1
    with pytest.raises(ConfigError, match="read_std"):
        sensor_noise(x, torch.Generator(), read_std=-1.0)


def test_slerp_and_pose_interpolation():
    yaw = torch.tensor([0.0, 1.2], dtype=torch.float64)
    q0 = quat_from_euler(
        torch.zeros(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64), yaw * 0
    )
    q1 = quat_from_euler(
        torch.zeros(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64), yaw
    )
    mid = slerp(q0, q1, 0.5)
    torch.testing.assert_close(
        mid,
        quat_from_euler(
            torch.zeros(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64), yaw / 2
        ),
    )
    torch.testing.assert_close(slerp(q0, -q1, 0.5).abs(), mid.abs())  # shortest arc
    t0 = torch.eye(4, dtype=torch.float64).repeat(2, 1, 1)
    t1 = t0.clone()
    t1[:, :3, :3] = quat_to_rotmat(q1)
    t1[:, :3, 3] = torch.tensor([2.0, 0.0, -1.0], dtype=torch.float64)
    m = interpolate_poses(t0, t1, 0.25)
    torch.testing.assert_close(
        m[:, :3, 3], torch.tensor([[0.5, 0.0, -0.25]] * 2, dtype=torch.float64)
    )
    torch.testing.assert_close(interpolate_poses(t0, t1, 1.0), t1)


def blob() -> GaussianSplats:
    """One small round Gaussian 4 m ahead of a camera at the origin (OpenCV frame)."""
    return splats_from_colours(
        torch.tensor([[0.0, 0.0, 4.0]], dtype=torch.float64),
        torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64),
        torch.full((1, 3), 0.05, dtype=torch.float64),
        torch.tensor([0.9], dtype=torch.float64),
        torch.tensor([[1.0, 1.0, 1.0]], dtype=torch.float64),
    )


def test_motion_blur_smears_along_the_image_motion_and_keeps_the_energy():
    """A sideways shift of 0.4 m at 4 m moves the footprint fx 0.4 / 4 = 4 px: the blurred
    alpha is the sharp one convolved with the 9 shifts, so its variance along u grows by the
    shifts' variance and not along v, and its sum (energy) stays the same."""
    s = blob()
    start = torch.eye(4, dtype=torch.float64)[None]
    end = start.clone()
    end[0, 0, 3] = 0.4

    def fn(t):
        return render(s, K, t, 48, 32, backend="fast")

    sharp = fn(interpolate_poses(start, end, 0.5))
    blurred = motion_blur(fn, start, end, samples=9)

    def variance(a, dim):  # second moment of the alpha profile along u (dim 0) or v (dim 1)
        prof = a[0].sum(dim)
        x = torch.arange(len(prof), dtype=prof.dtype)
        m = (prof * x).sum() / prof.sum()
        return float((prof * (x - m) ** 2).sum() / prof.sum())

    # 9 evenly spaced shifts over 4 px: variance (4^2 / 12) (9 + 1) / (9 - 1) = 1.667 px^2 added
    assert abs(variance(blurred.alpha, 0) - variance(sharp.alpha, 0) - 5 / 3) < 0.1
    assert abs(variance(blurred.alpha, 1) - variance(sharp.alpha, 1)) < 0.02
    assert abs(float(blurred.alpha.sum() / sharp.alpha.sum()) - 1.0) < 0.02
    torch.testing.assert_close(blurred.depth, sharp.depth, equal_nan=True)
    single = motion_blur(fn, start, end, samples=1)
    torch.testing.assert_close(single.rgb, sharp.rgb)
    with pytest.raises(ConfigError, match="samples"):
        motion_blur(fn, start, end, samples=0)


def test_dynamic_object_moves_per_env():
    """The same object placed 1 m left in env 0 and 1 m right in env 1 (camera at the origin
    looking along +z) shows up on the left and right of the image."""
    obj = blob()
    scene = splats_from_colours(  # a far grey backdrop
        torch.tensor([[0.0, 0.0, 30.0]], dtype=torch.float64),
        torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64),
        torch.tensor([[50.0, 50.0, 0.1]], dtype=torch.float64),
        torch.tensor([0.99], dtype=torch.float64),
        torch.tensor([[0.2, 0.2, 0.2]], dtype=torch.float64),
    )
    poses = torch.eye(4, dtype=torch.float64).repeat(2, 1, 1)
    poses[0, 0, 3], poses[1, 0, 3] = -1.0, 1.0
    both = with_objects(scene, place_object(obj, poses))
    assert both.means.shape == (2, 2, 3)
    img = render(both, K, torch.eye(4, dtype=torch.float64).repeat(2, 1, 1), 48, 32)
    bright = img.rgb[..., 0] > 0.5
    cols = [torch.nonzero(bright[i])[:, 1].double().mean() for i in range(2)]
    assert abs(float(cols[0]) - (24 - 40 / 4)) < 1.0 and abs(float(cols[1]) - (24 + 40 / 4)) < 1.0
    with pytest.raises(ConfigError, match="orthonormal"):
        place_object(obj, 2 * torch.eye(4, dtype=torch.float64)[None])
    with pytest.raises(ConfigError, match="world_from_object"):
        place_object(obj, torch.eye(4)[None, :3])


def test_placing_object_and_camera_together_leaves_the_image_unchanged():
    """A rigid motion applied to a view-dependent (SH degree 2) object and to the camera gives
    the same image: means, rotations and SH coefficients are all moved consistently."""
    gen = torch.Generator().manual_seed(3)
    g = 200
    obj = GaussianSplats(
        0.5 * torch.randn(g, 3, generator=gen, dtype=torch.float64),
        torch.randn(g, 4, generator=gen, dtype=torch.float64),
        torch.log(0.03 + 0.1 * torch.rand(g, 3, generator=gen, dtype=torch.float64)),
        torch.randn(g, generator=gen, dtype=torch.float64),
        0.5 * torch.randn(g, 9, 3, generator=gen, dtype=torch.float64),
    )
    cam = look_at((3.0, 1.0, 1.0), (0.0, 0.0, 0.0))
    move = torch.eye(4, dtype=torch.float64)
    move[:3, :3] = quat_to_rotmat(
        quat_from_euler(*torch.tensor([0.3, -0.5, 2.0], dtype=torch.float64))
    )
    move[:3, 3] = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    a = render(obj, K, cam, 48, 32, backend="fast")
    b = render(place_object(obj, move[None]), K, move @ cam, 48, 32, backend="fast")
    assert float((a.rgb - b.rgb).abs().max()) < 1e-6
    assert a.alpha.mean() > 0.1
    assert math.isclose(float(a.alpha.sum()), float(b.alpha.sum()), rel_tol=1e-6)
