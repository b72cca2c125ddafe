"""Small network layers of the RL study's models and their exporter (was
``volary.learning.layers``, now a deprecated shim).

``Coords`` lives here, not beside the RGB depth encoder that uses it, so that the plain-array
exporter (:func:`volary.studies.rl.export.mlp_npz`) can know it without importing the encoder.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class Coords(nn.Module):
    """Appends the pixel's column and row, each scaled to [-1, 1], as two channels (CoordConv:
    Liu et al. 2018): (N, C, H, W) -> (N, C + 2, H, W)."""

    def forward(self, x: Tensor) -> Tensor:
        n, _, h, w = x.shape
        ys = torch.linspace(-1.0, 1.0, h, dtype=x.dtype, device=x.device)
        xs = torch.linspace(-1.0, 1.0, w, dtype=x.dtype, device=x.device)
        yy, xx = torch.meshgrid(ys, xs, indexing="ij")
        return torch.cat((x, xx.expand(n, 1, h, w), yy.expand(n, 1, h, w)), dim=1)


__all__ = ["Coords"]
