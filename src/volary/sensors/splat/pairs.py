"""The ``"torch"`` splat path: sparse (Gaussian, pixel) pairs, any device (the CUDA torch path).

Same equations and order as the reference (:mod:`volary.sensors.splat.render`), without its
every-pixel-against-every-Gaussian product: each visible Gaussian of an env, in depth order,
emits one pair per pixel centre of its footprint box (``mean2d +- radius``, outside which its
alpha is below 1/255), pairs with alpha < 1/255 are dropped, a stable sort by pixel keeps the
depth order within each pixel, and front-to-back compositing per pixel is a segmented sum:
``T_i = T_carry exp(sum_{j<i} log(1 - a_j))`` (float64 sums), weight ``a_i T_i`` where
``T_i (1 - a_i) >= T_MIN`` (3DGS Eq. 3 with the reference's stop). Gaussians are taken in
depth-ordered chunks of at most ``max_pairs`` pairs, the transmittance carried between chunks,
so memory stays bounded. All tensor ops: the same code on CPU and CUDA.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from volary.sensors.splat.projected import ALPHA_MAX, ALPHA_MIN, T_MIN, Projected, pixel_depth


def _boxes(pr: Projected, n: int, idx: Tensor, width: int, height: int):
    """Pixel index ranges (j0, i0, w, h) of the footprint boxes of Gaussians ``idx`` of env n."""
    m, r = pr.mean2d[n, idx], pr.radius[n, idx]
    j0 = torch.ceil(m[:, 0] - r - 0.5).clamp(min=0).long()
    j1 = torch.floor(m[:, 0] + r - 0.5).clamp(max=width - 1).long()
    i0 = torch.ceil(m[:, 1] - r - 0.5).clamp(min=0).long()
    i1 = torch.floor(m[:, 1] + r - 0.5).clamp(max=height - 1).long()
    return j0, i0, (j1 - j0 + 1).clamp(min=0), (i1 - i0 + 1).clamp(min=0)


def _composite_chunk(pr, n, idx, j0, i0, w, h, width, log_t, out) -> None:
    """Composite Gaussians ``idx`` (depth order) of env n into ``out`` = (rgb, wz, ws) (P, ...)
    given, and updating, the per-pixel log transmittance ``log_t`` (P,) float64."""
    cnt = w * h
    local = torch.repeat_interleave(torch.arange(len(idx), device=idx.device), cnt)
    start = torch.cumsum(cnt, 0) - cnt
    off = torch.arange(len(local), device=idx.device) - start[local]
    jj = j0[local] + off % w[local]
    ii = i0[local] + torch.div(off, w[local], rounding_mode="floor")
    g = idx[local]
    dt = pr.mean2d.dtype
    px, py = jj.to(dt) + 0.5, ii.to(dt) + 0.5
    dx, dy = px - pr.mean2d[n, g, 0], py - pr.mean2d[n, g, 1]
    cn = pr.conic[n, g]
    power = -0.5 * (cn[:, 0] * dx * dx + cn[:, 2] * dy * dy) - cn[:, 1] * dx * dy
    alpha = (pr.opacity[n, g] * torch.exp(power)).clamp(max=ALPHA_MAX)
    keep = torch.nonzero((power <= 0) & (alpha >= ALPHA_MIN))[:, 0]
    pix, order = torch.sort((ii * width + jj)[keep], stable=True)  # depth order kept per pixel
    sel = keep[order]
    a, g, px, py = alpha[sel].double(), g[sel], px[sel], py[sel]
    log1m = torch.log1p(-a)
    cs = torch.cumsum(log1m, 0)
    first = torch.ones_like(pix, dtype=torch.bool)
    first[1:] = pix[1:] != pix[:-1]
    seg = torch.cumsum(first.long(), 0) - 1
    before = log_t[pix] + (cs - log1m) - (cs - log1m)[first][seg]  # log T before the pair
    live = before + log1m >= math.log(T_MIN)
    wgt = (a * torch.exp(before) * live).to(dt)
    rgb, wz, ws = out
    rgb.index_add_(0, pix, wgt[:, None] * pr.colour[n, g])
    wz.index_add_(0, pix, wgt * pixel_depth(pr.plane[n, g], px, py))
    ws.index_add_(0, pix, wgt)
    log_t.index_add_(0, pix, log1m)


def render_pairs(pr: Projected, width: int, height: int, max_pairs: int | None = None):
    """(rgb (N, H, W, 3), sum w z, sum w) from projected Gaussians, as the reference."""
    n_env = pr.depth.shape[0]
    dev, dt = pr.mean2d.device, pr.mean2d.dtype
    if max_pairs is None:
        max_pairs = 1 << (24 if dev.type == "cuda" else 21)
    p = width * height
    rgb = torch.zeros(n_env, p, 3, device=dev, dtype=dt)
    wz = torch.zeros(n_env, p, device=dev, dtype=dt)
    ws = torch.zeros(n_env, p, device=dev, dtype=dt)
    for n in range(n_env):
        idx = torch.nonzero(pr.valid[n])[:, 0]
        idx = idx[torch.argsort(pr.depth[n, idx], stable=True)]
        j0, i0, w, h = _boxes(pr, n, idx, width, height)
        cnt = w * h
        group = torch.div(torch.cumsum(cnt, 0) - cnt, max_pairs, rounding_mode="floor")
        bounds = torch.searchsorted(group, torch.unique(group), right=False).tolist() + [len(idx)]
        log_t = torch.zeros(p, device=dev, dtype=torch.float64)  # log transmittance so far
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            _composite_chunk(pr, n, idx[a:b], j0[a:b], i0[a:b], w[a:b], h[a:b], width, log_t,
                             (rgb[n], wz[n], ws[n]))  # fmt: skip
    hw = (n_env, height, width)
    return rgb.reshape(*hw, 3), wz.reshape(hw), ws.reshape(hw)
