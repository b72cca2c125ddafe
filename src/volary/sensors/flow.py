"""Optical flow between consecutive camera frames (SV-Net's flow input, SOUS VIDE Sec. V).

- :func:`farneback`: dense flow by OpenCV's Farneback polynomial-expansion method (Farneback
  2003, "Two-frame motion estimation based on polynomial expansion"), frame by frame over the
  env batch, on 8-bit grey images (ITU-R BT.601 luma).
- :func:`flow_from_depth`: the exact flow of a static scene from frame-0 depth and the two
  camera poses (back-project each pixel centre at its z-depth, move it into camera 1, project):
  the ground truth the estimate is checked against, and a noise-free flow for training.

Flow is (du, dv) in pixels, u to the right and v down (OpenCV image axes), shape (N, H, W, 2).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from volary.errors import ConfigError

FARNEBACK_DEFAULTS: dict[str, Any] = {
    "pyr_scale": 0.5,
    "levels": 3,
    "winsize": 15,
    "iterations": 3,
    "poly_n": 5,
    "poly_sigma": 1.2,
    "flags": 0,
}


def _grey_u8(frames: Tensor) -> np.ndarray:
    """(N, H, W, 3) RGB or (N, H, W) grey in [0, 1] -> (N, H, W) uint8 luma."""
    x = frames.detach().to("cpu", torch.float32)
    if x.dim() == 4 and x.shape[-1] == 3:
        x = x @ torch.tensor([0.299, 0.587, 0.114])
    if x.dim() != 3:
        raise ConfigError(f"frames: expected (N, H, W, 3) or (N, H, W), got {tuple(frames.shape)}")
    return (x.clamp(0, 1) * 255.0 + 0.5).to(torch.uint8).numpy()


def farneback(prev: Tensor, nxt: Tensor, **params: Any) -> Tensor:
    """Dense Farneback flow from ``prev`` to ``nxt`` (same shape, RGB or grey in [0, 1]) ->
    (N, H, W, 2) px on prev's device. ``params`` override :data:`FARNEBACK_DEFAULTS`."""
    import cv2

    if prev.shape != nxt.shape:
        raise ConfigError(f"nxt: expected shape {tuple(prev.shape)}, got {tuple(nxt.shape)}")
    unknown = set(params) - set(FARNEBACK_DEFAULTS)
    if unknown:
        raise ConfigError(f"params: unknown {sorted(unknown)}; valid: {sorted(FARNEBACK_DEFAULTS)}")
    p = {**FARNEBACK_DEFAULTS, **params}
    a, b = _grey_u8(prev), _grey_u8(nxt)
    args = [p[k] for k in ("pyr_scale", "levels", "winsize", "iterations", "poly_n", "poly_sigma")]
    out = [
        cv2.calcOpticalFlowFarneback(a[i], b[i], None, *args, p["flags"])  # type: ignore[call-overload]
        for i in range(len(a))
    ]
    return torch.from_numpy(np.stack(out)).to(prev.device)


def flow_from_depth(depth: Tensor, intrinsics: Tensor, t_wc0: Tensor, t_wc1: Tensor) -> Tensor:
    """Exact flow of a static scene (N, H, W, 2) px: pixel centre (u, v) of camera 0 at z-depth
    ``depth`` (N, H, W) back-projected, ``p_1 = T_WC1^-1 T_WC0 p_0``, projected with the same
    intrinsics (fx, fy, cx, cy) (4,) or (N, 4). NaN where depth is not finite or the point is
    behind camera 1."""
    n, h, w = depth.shape
    k = torch.as_tensor(intrinsics, dtype=depth.dtype, device=depth.device).expand(n, 4)
    fx, fy, cx, cy = (k[:, i, None, None] for i in range(4))
    v, u = torch.meshgrid(
        torch.arange(h, dtype=depth.dtype, device=depth.device) + 0.5,
        torch.arange(w, dtype=depth.dtype, device=depth.device) + 0.5,
        indexing="ij",
    )
    p0 = torch.stack(((u - cx) / fx * depth, (v - cy) / fy * depth, depth), -1)
    rel = torch.linalg.inv(t_wc1.to(depth.dtype)) @ t_wc0.to(depth.dtype)  # T_C1C0
    p1 = torch.einsum("nij,nhwj->nhwi", rel[:, :3, :3], p0) + rel[:, None, None, :3, 3]
    z1 = p1[..., 2]
    u1, v1 = fx * p1[..., 0] / z1 + cx, fy * p1[..., 1] / z1 + cy
    flow = torch.stack((u1 - u, v1 - v), -1)
    bad = ~torch.isfinite(depth) | (z1 <= 0)
    return torch.where(bad[..., None], torch.full_like(flow, float("nan")), flow)


__all__ = ["FARNEBACK_DEFAULTS", "farneback", "flow_from_depth"]
