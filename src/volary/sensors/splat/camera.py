"""A body-mounted RGB camera over a Gaussian-splat scene: ``camera(pos, quat) -> SplatImage``.

The callable form every rig takes (:class:`volary.sim.Sensing`): body poses in, one rendering
per body out, on the CPU whatever device the splats live on. Intrinsics follow the depth
camera's (:func:`volary.sensors.rays.pinhole_intrinsics`: f = (size / 2) / tan(fov / 2),
principal point at the image centre), so a splat camera and a depth camera with the same size,
field of view and mount see the same pixels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from volary.errors import ConfigError, not_one_of
from volary.sensors.splat.io import GaussianSplats
from volary.sensors.splat.render import BACKENDS, SplatImage, camera_poses, render

SKY = (0.62, 0.75, 0.88)  # a daylight sky colour for backgrounds (the benchmark's RGB camera)


class SplatCamera:
    """An RGB camera of ``width`` x ``height`` px with horizontal field of view ``hfov`` (rad;
    square pixels) on a ``mount`` (T_BC, :class:`volary.sensors.Mount`; default the forward
    OpenCV camera of the depth camera), rendering ``splats`` with ``render``'s ``backend`` and
    ``background`` (RGB in [0, 1], seen where no Gaussian covers a pixel, e.g. the sky)."""

    def __init__(
        self,
        splats: GaussianSplats,
        width: int,
        height: int,
        hfov: float = math.pi / 2,
        *,
        mount: Any = None,
        backend: str = "auto",
        background: Sequence[float] = (0.0, 0.0, 0.0),
    ) -> None:
        from volary.sensors.rays import pinhole_intrinsics

        if not isinstance(splats, GaussianSplats):
            raise ConfigError(f"splats: expected GaussianSplats, got {type(splats).__name__}")
        for name, v in (("width", width), ("height", height)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ConfigError(f"{name}: expected a positive integer, got {v!r}")
        if not (isinstance(hfov, int | float) and 0 < hfov < math.pi):
            raise ConfigError(f"hfov: expected radians in (0, pi), got {hfov!r}")
        if backend not in BACKENDS:
            raise not_one_of("backend", backend, BACKENDS)
        bg = tuple(float(c) for c in background)
        if len(bg) != 3 or not all(0.0 <= c <= 1.0 for c in bg):
            raise ConfigError(f"background: expected an RGB triple in [0, 1], got {background!r}")
        self.splats, self.width, self.height, self.hfov = splats, width, height, float(hfov)
        self.mount, self.backend, self.background = mount, backend, bg
        fx, fy, cx, cy = pinhole_intrinsics(width, height, self.hfov, None).tolist()
        self.intrinsics = (fx, fy, cx, cy)

    def __call__(self, pos: Tensor, quat: Tensor) -> SplatImage:
        """One image per body: ``pos`` (N, 3) m, ``quat`` (N, 4) [w, x, y, z] body-to-world."""
        dev = self.splats.means.device
        t_wc = camera_poses(pos.float().to(dev), quat.float().to(dev), self.mount)
        img = render(
            self.splats,
            self.intrinsics,
            t_wc,
            self.width,
            self.height,
            backend=self.backend,
            background=self.background,
        )
        return SplatImage(img.rgb.cpu(), img.depth.cpu(), img.alpha.cpu())


def to_uint8(rgb: Tensor) -> Tensor:
    """(..., 3) colours in [0, 1] as 8-bit pixels (rounded, clamped): what a camera delivers."""
    return (rgb.clamp(0.0, 1.0) * 255.0).round().to(torch.uint8)


__all__ = ["SKY", "SplatCamera", "to_uint8"]
