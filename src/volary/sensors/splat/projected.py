"""What every splat path shares: the compositing constants of the 3DGS reference rasterizer,
the :class:`Projected` Gaussians, which Gaussians are drawn at all (:func:`usable`) and the
per-pixel depth of a projected Gaussian (:func:`pixel_depth`). The paths themselves
(:mod:`~volary.sensors.splat.render`, :mod:`~volary.sensors.splat.pairs`,
:mod:`~volary.sensors.splat.fast`) import from here, and ``render`` dispatches to the others."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from volary.sensors.splat.io import GaussianSplats

ALPHA_MIN = 1.0 / 255.0  # contributions below this are skipped (reference code)
ALPHA_MAX = 0.99  # alpha is capped (reference code)
T_MIN = 1e-4  # compositing stops before transmittance would fall below this
COS_EDGE_ON = 0.1  # flat Gaussians seen closer than ~6 deg to edge-on use their centre depth


@dataclass(frozen=True)
class Projected:
    """Gaussians projected into N cameras (``(N, G, ...)``), shared by every backend."""

    mean2d: Tensor  # (N, G, 2) px
    conic: Tensor  # (N, G, 3) (a, b, c) of the inverse 2-D covariance [[a, b], [b, c]]
    depth: Tensor  # (N, G) m, camera z of the mean
    opacity: Tensor  # (N, G) peak opacity
    colour: Tensor  # (N, G, 3) view-dependent RGB
    radius: Tensor  # (N, G) px, half extent of the footprint box
    valid: Tensor  # (N, G) bool, in front, visible and overlapping the image
    plane: Tensor  # (N, G, 6) (d, a, b, c, lo, hi): depth at pixel (u, v) is
    #   clamp(d / (a u + b v + c), lo, hi); (z, 0, 0, 1, z, z) for centre depth


def usable(splats: GaussianSplats) -> Tensor:
    """(..., G) bool: Gaussians every path draws. Those with a non-finite mean, rotation, scale,
    opacity logit or SH coefficient, or a zero quaternion, are skipped (documented output: the
    image is the one of the scene without them)."""
    ok = torch.isfinite(splats.opacity_logits)
    for t in (splats.means, splats.quats, splats.log_scales):
        ok = ok & torch.isfinite(t).all(-1)
    ok = ok & torch.isfinite(splats.sh).all(-1).all(-1)
    return ok & (splats.quats.abs().sum(-1) > 0)


def pixel_depth(plane: Tensor, px: Tensor, py: Tensor) -> Tensor:
    """Depth of each Gaussian at pixels: plane (..., 6) (d, a, b, c, lo, hi) broadcast against
    pixel centres px, py -> ``clamp(d / (a px + b py + c), lo, hi)``."""
    d, a, b, c, lo, hi = plane.unbind(-1)
    den = a * px + b * py + c
    den = torch.where(den.abs() > 1e-12, den, torch.full_like(den, 1e-12))
    return torch.minimum(torch.maximum(d / den, lo), hi)
