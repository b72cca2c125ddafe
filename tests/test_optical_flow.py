"""Optical flow: exact flow from depth and poses; Farneback on rendered splat frames against it."""

from __future__ import annotations

import math

import pytest
import torch

from volary.errors import ConfigError
from volary.math.quaternion import quat_from_euler, quat_to_rotmat
from volary.sensors.flow import farneback, flow_from_depth
from volary.sensors.splat import render
from volary.sensors.splat.render import look_at
from volary.worlds import Box, SceneSpec

K = torch.tensor([50.0, 50.0, 32.0, 24.0], dtype=torch.float64)


def test_flow_from_depth_translation_rotation_and_invalid_pixels():
    n, h, w = 3, 24, 32
    depth = torch.full((n, h, w), 4.0, dtype=torch.float64)
    depth[2, 0, 0] = math.nan
    t0 = torch.eye(4, dtype=torch.float64).repeat(n, 1, 1)
    t1 = t0.clone()
    t1[0, 0, 3] = 0.2  # camera 0.2 m to the right: a plane at 4 m moves fx 0.2 / 4 px left
    t1[1, :3, :3] = quat_to_rotmat(  # rotation about the optical axis by 0.1 rad
        quat_from_euler(*torch.tensor([0.0, 0.0, 0.1], dtype=torch.float64))
    )
    k = torch.tensor([30.0, 30.0, 16.0, 12.0], dtype=torch.float64)
    f = flow_from_depth(depth, k, t0, t1)
    assert f.shape == (n, h, w, 2)
    torch.testing.assert_close(
        f[0, ..., 0], torch.full((h, w), -30.0 * 0.2 / 4.0, dtype=torch.float64)
    )
    torch.testing.assert_close(f[0, ..., 1], torch.zeros(h, w, dtype=torch.float64))
    # rotation about z: the pixel (u, v) rotates about (cx, cy) by -0.1 rad
    v, u = torch.meshgrid(torch.arange(h) + 0.5, torch.arange(w) + 0.5, indexing="ij")
    du, dv = u.double() - 16.0, v.double() - 12.0
    c, s = math.cos(0.1), math.sin(0.1)
    exp = torch.stack((c * du + s * dv - du, -s * du + c * dv - dv), -1)
    torch.testing.assert_close(f[1], exp)
    assert torch.isnan(f[2, 0, 0]).all()
    torch.testing.assert_close(f[2, 1:], torch.zeros_like(f[2, 1:]), atol=1e-12, rtol=0)
    # a point behind the second camera has no flow
    back = t0[:1].clone()
    back[0, 2, 3] = 10.0
    assert torch.isnan(flow_from_depth(depth[:1], k, t0[:1], back)).all()


def textured_wall():
    from volary.sensors.splat.synth import synthesize

    spec = SceneSpec(
        "wall",
        (-1, -6, 0),
        (8, 6, 4),
        obstacles=(Box((6.0, 0.0, 2.0), (0.4, 12.0, 4.0), object_id=1),),
    )
    return synthesize(spec, seed=2, spacing=0.04, ground=False, texture=0.9)


def test_farneback_recovers_the_flow_of_a_rendered_textured_wall():
    """Frames of a synthesized (procedurally textured) wall 4.5 m away, the camera moving
    0.15 m sideways and 0.1 m up: Farneback (OpenCV defaults above) against the exact flow
    from the rendered depth, 8 px away from the border (where the windows see outside the
    frame). Tolerance: median end-point error 0.05 px, 90th percentile 0.15 px on a 2.1 px
    flow (measured 0.014 and 0.040 px)."""
    s = textured_wall()
    c0 = look_at((1.5, 0.0, 2.0), (6.0, 0.0, 2.0))
    c1 = c0.clone()
    c1[:3, 3] += torch.tensor([0.0, -0.15, 0.1], dtype=torch.float64)
    t0, t1 = c0[None].float(), c1[None].float()
    a = render(s, K.float(), t0, 64, 48, backend="fast")
    b = render(s, K.float(), t1, 64, 48, backend="fast")
    est = farneback(a.rgb, b.rgb)
    true = flow_from_depth(a.depth.double(), K, c0[None], c1[None])
    assert est.shape == (1, 48, 64, 2) and est.dtype == torch.float32
    inner = (slice(None), slice(8, -8), slice(8, -8))
    epe = (est.double() - true)[inner].norm(dim=-1)
    mag = true[inner].norm(dim=-1)
    assert float(mag.median()) > 1.0  # the motion is there
    assert float(epe.median()) < 0.05
    assert float(torch.quantile(epe, 0.9)) < 0.15
    # no motion, no flow (inside the border; measured 1e-4 px)
    assert float(farneback(a.rgb, a.rgb)[inner].abs().max()) < 1e-3


def test_farneback_input_checks():
    x = torch.rand(2, 16, 16, 3, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ConfigError, match="nxt"):
        farneback(x, x[:1])
    with pytest.raises(ConfigError, match="winsize"):
        farneback(x, x, window=3)
    with pytest.raises(ConfigError, match="frames"):
        farneback(x[..., 0, 0], x[..., 0, 0])
    assert farneback(x[..., 0], x[..., 0]).shape == (2, 16, 16, 2)  # grey frames too
