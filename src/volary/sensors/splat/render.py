"""Batched EWA splatting of 3D Gaussians: RGB, expected depth and opacity per pixel.

Equations (Kerbl et al. 2023, "3D Gaussian Splatting", Sec. 4 and its reference rasterizer;
Zwicker et al. 2001, "EWA volume splatting", Eq. 31 for the local affine projection):

- world covariance ``Sigma = R S S^T R^T`` (3DGS Eq. 6);
- camera frame (OpenCV, x right, y down, z optical axis): ``p_C = R_WC^T (mu - t_WC)``;
- 2-D covariance ``Sigma' = J R_WC^T Sigma R_WC J^T + b I`` (3DGS Eq. 5, EWA Eq. 31) with the
  pinhole Jacobian ``J = [[fx/z, 0, -fx x/z^2], [0, fy/z, -fy y/z^2]]`` (x/z, y/z clamped to
  1.3 x the half field of view as in the reference code) and the low-pass dilation ``b``
  (``blur``, 0.3 px^2 in the reference code);
- mean ``(fx x/z + cx, fy y/z + cy)``; pixel (i, j) is sampled at its centre (j + 0.5, i + 0.5),
  the convention of :func:`volary.sensors.rays.pinhole_rays`;
- ``alpha = min(0.99, o exp(-d^T Sigma'^-1 d / 2))``, skipped below 1/255; front-to-back
  compositing in order of camera z (3DGS Eq. 3): ``C = sum_i c_i a_i T_i + T_end bg``,
  ``T_i = prod_{j<i} (1 - a_j)``, stopping before the Gaussian that would take T below 1e-4;
- colour ``c_i = max(SH(d_i) + 0.5, 0)``, d_i the unit direction from the camera centre to the
  mean (view-dependent, degree <= 3);
- expected depth ``D = sum_i z_i a_i T_i / sum_i a_i T_i``: with ``depth_mode="center"`` z_i is
  the centre's camera z (gsplat's "ED"); with ``"plane"`` (default) z_i is the z where the
  pixel's ray meets the plane through the mean normal to the Gaussian's shortest axis
  (``z = (n . p_C) / (n . r)``, r = ((u - cx)/fx, (v - cy)/fy, 1)), clamped to the centre's z
  +- 3 x its largest standard deviation; used for flat Gaussians (shortest axis < half the
  middle one) not seen within ~6 deg of edge-on, the centre's z otherwise. Flat surface
  Gaussians then give the surface depth instead of a front-biased average of centres.

A Gaussian only touches pixels within ``k sqrt(lambda_max)`` of its mean, ``k = sqrt(2 ln(255
o))``: outside that ellipse its alpha is below 1/255 anyway, so the bounding box loses nothing
and the tiled path is exact with respect to the reference, not an approximation of it.

Backends: ``"reference"`` (plain torch: every pixel against every Gaussian of its env, any
device), ``"torch"`` (:mod:`volary.sensors.splat.pairs`: sparse Gaussian-pixel pairs and
segmented sums, any device; the CUDA torch path), ``"fast"`` (CPU, numba,
:mod:`volary.sensors.splat.fast`: Gaussian-major order with 8 x 8 px tile occlusion culling),
``"gsplat"`` (CUDA only, optional; ``rasterize_mode="classic"``, centre expected depth),
``"auto"`` (fast on the CPU; gsplat on CUDA when installed, else torch).
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from volary.errors import ConfigError, MissingDependencyError
from volary.math.quaternion import quat_normalize, quat_to_rotmat
from volary.registry import check_name
from volary.sensors.splat.io import GaussianSplats, sh_colour
from volary.sensors.splat.projected import (
    ALPHA_MAX,
    ALPHA_MIN,
    COS_EDGE_ON,
    T_MIN,
    Projected,
    pixel_depth,
    usable,
)

BACKENDS = ("auto", "reference", "torch", "fast", "gsplat")


@dataclass(frozen=True)
class SplatImage:
    """One batched rendering (N envs, H x W pixels)."""

    rgb: Tensor  # (N, H, W, 3) in [0, 1]
    depth: Tensor  # (N, H, W) m, expected z-depth; ``depth_fill`` where alpha < min_alpha
    alpha: Tensor  # (N, H, W) accumulated opacity in [0, 1]

    def save(self, path: str | Path, env: int = 0) -> Path:
        """Env ``env``'s image: ``x.png`` the RGB pixels, ``x.npz`` rgb, depth and alpha."""
        from volary.sensors.plots import rgb_png, save_reading

        arrays = {"rgb": self.rgb, "depth": self.depth, "alpha": self.alpha}
        return save_reading(path, env, arrays, lambda out, i: rgb_png(out, self.rgb[i]))


# ------------------------------------------------------------------ inputs


def _intrinsics(intrinsics: Any, n: int, device: torch.device, dtype: torch.dtype) -> Tensor:
    """(N, 4) fx, fy, cx, cy from (4,), (N, 4), (3, 3) or (N, 3, 3)."""
    k = torch.as_tensor(intrinsics, device=device).to(dtype)
    if k.shape[-2:] == (3, 3):
        k = torch.stack((k[..., 0, 0], k[..., 1, 1], k[..., 0, 2], k[..., 1, 2]), dim=-1)
    if k.shape == (4,):
        k = k.expand(n, 4)
    if k.shape != (n, 4) or not bool(torch.isfinite(k).all()) or bool((k[:, :2] <= 0).any()):
        raise ConfigError(
            "intrinsics: expected finite (fx, fy, cx, cy) or K with fx, fy > 0, shaped (4,), "
            f"({n}, 4), (3, 3) or ({n}, 3, 3); got {tuple(torch.as_tensor(intrinsics).shape)}"
        )
    return k


def _poses(world_from_cam: Any, device: torch.device, dtype: torch.dtype) -> Tensor:
    """(N, 4, 4) T_WC from (4, 4) or (N, 4, 4); the rotation block must be orthonormal."""
    t = torch.as_tensor(world_from_cam, device=device).to(dtype)
    if t.shape == (4, 4):
        t = t[None]
    if t.dim() != 3 or t.shape[1:] != (4, 4) or not bool(torch.isfinite(t).all()):
        raise ConfigError(
            f"world_from_cam: expected finite (4, 4) or (N, 4, 4), got {tuple(t.shape)}"
        )
    r = t[:, :3, :3].to(torch.float64)
    eye = torch.eye(3, dtype=torch.float64, device=r.device)
    if not torch.allclose(r.transpose(1, 2) @ r, eye.expand_as(r), atol=1e-4):
        raise ConfigError("world_from_cam: the rotation block R_WC is not orthonormal")
    return t


def camera_poses(pos: Tensor, quat: Tensor, mount: Any = None) -> Tensor:
    """T_WC (N, 4, 4) of a camera mounted on bodies at ``pos (N, 3)``, ``quat (N, 4)`` [w,x,y,z]
    (body-to-world), with ``mount`` = T_BC (a :class:`volary.sensors.Mount`; default the forward
    OpenCV camera, as :class:`volary.sensors.DepthCamera`)."""
    from volary.sensors.rays import FORWARD_CAMERA, as_mount

    m = as_mount(FORWARD_CAMERA if mount is None else mount)
    if pos.dim() != 2 or pos.shape[-1] != 3 or quat.shape != (pos.shape[0], 4):
        raise ConfigError(
            f"pos, quat: expected (N, 3) and (N, 4), got {tuple(pos.shape)}, {tuple(quat.shape)}"
        )
    r_wb = quat_to_rotmat(quat_normalize(quat))
    r_bc = m.matrix(pos.dtype).to(pos.device)
    t_bc = torch.tensor(m.translation, dtype=pos.dtype, device=pos.device)
    out = torch.zeros(pos.shape[0], 4, 4, dtype=pos.dtype, device=pos.device)
    out[:, :3, :3] = r_wb @ r_bc
    out[:, :3, 3] = pos + r_wb @ t_bc
    out[:, 3, 3] = 1.0
    return out


def look_at(eye: Sequence[float], target: Sequence[float], up: Sequence[float] = (0, 0, 1)):
    """T_WC (4, 4) float64 of an OpenCV camera at ``eye`` looking at ``target`` (image-up ~ up)."""
    e, g, u = (torch.tensor(v, dtype=torch.float64) for v in (eye, target, up))
    z = g - e
    if float(z.norm()) < 1e-12:
        raise ConfigError("look_at: eye and target coincide")
    z = z / z.norm()
    x = torch.linalg.cross(z, u)
    if float(x.norm()) < 1e-9:
        raise ConfigError("look_at: the view direction is parallel to up")
    x = x / x.norm()
    y = torch.linalg.cross(z, x)
    t = torch.eye(4, dtype=torch.float64)
    t[:3, 0], t[:3, 1], t[:3, 2], t[:3, 3] = x, y, z, e
    return t


# ------------------------------------------------------------------ projection (shared)


def _batched(splats: GaussianSplats, n: int) -> GaussianSplats:
    if splats.means.dim() == 2:
        return splats
    if splats.means.dim() != 3 or splats.means.shape[0] not in (1, n):
        raise ConfigError(
            f"splats: expected (G, 3) or ({n}, G, 3) means for {n} cameras, "
            f"got {tuple(splats.means.shape)}"
        )
    return splats


def covariance_2d(
    p_c: Tensor, r_wc: Tensor, l_w: Tensor, k: Tensor, lim: Tensor, blur: float
) -> Tensor:
    """``Sigma' = J R_WC^T Sigma R_WC J^T + blur I`` (3DGS Eq. 5; EWA Eq. 31) as (a, b, c) of
    [[a, b], [b, c]], (N, G, 3). p_c (N, G, 3) camera-frame means (z > 0), r_wc (N, 3, 3),
    l_w (G | N G, 3, 3) = R S with Sigma = L L^T, k (N, 4) intrinsics, lim (N, 2) clamps of x/z
    and y/z. Computed as M = J R_WC^T L (N, G, 2, 3), Sigma' = M M^T, with J's zeros skipped."""
    fx, fy = k[:, None, 0, None], k[:, None, 1, None]
    z = p_c[..., 2:3]
    tx = (p_c[..., 0:1] / z).clamp(-lim[:, None, 0:1], lim[:, None, 0:1])
    ty = (p_c[..., 1:2] / z).clamp(-lim[:, None, 1:2], lim[:, None, 1:2])
    c0, c1, c2 = (r_wc[:, None, :, i] for i in range(3))  # camera axes in the world, (N, 1, 3)
    row0 = fx / z * (c0 - tx * c2)  # (N, G, 3): rows of J R_WC^T
    row1 = fy / z * (c1 - ty * c2)
    eq = "ngj,ngjk->ngk" if l_w.dim() == 4 else "ngj,gjk->ngk"  # per-env or shared splats
    m0 = torch.einsum(eq, row0, l_w)
    m1 = torch.einsum(eq, row1, l_w)
    return torch.stack(((m0 * m0).sum(-1) + blur, (m0 * m1).sum(-1), (m1 * m1).sum(-1) + blur), -1)


def project(
    splats: GaussianSplats,
    k: Tensor,
    t_wc: Tensor,
    width: int,
    height: int,
    *,
    near: float,
    far: float,
    blur: float,
    sh_degree: int,
    depth_mode: str = "plane",
) -> Projected:
    """Project every Gaussian into every camera (k (N, 4), t_wc (N, 4, 4)); all (N, G, ...)."""
    r_wc, t = t_wc[:, :3, :3], t_wc[:, :3, 3]
    mu = splats.means
    p_c = torch.einsum("nji,ngj->ngi", r_wc, (mu - t[:, None]).expand(r_wc.shape[0], -1, -1))
    l_w = quat_to_rotmat(quat_normalize(splats.quats)) * splats.scales[..., None, :]
    half = torch.stack(
        (torch.maximum(k[:, 2], width - k[:, 2]), torch.maximum(k[:, 3], height - k[:, 3])), -1
    )
    lim = 1.3 * half / k[:, :2]  # 1.3 x tan(half FOV), as the reference code
    z = p_c[..., 2]
    zs = torch.where(z > near, z, torch.ones_like(z))
    ps = torch.cat((p_c[..., :2], zs[..., None]), -1)
    a, b, c = covariance_2d(ps, r_wc, l_w, k, lim, blur).unbind(-1)
    det = a * c - b * b
    ok = (z > near) & (z < far) & (det > 0)
    det = torch.where(ok, det, torch.ones_like(det))
    conic = torch.stack((c / det, -b / det, a / det), -1)
    mean2d = torch.stack(
        (
            k[:, None, 0] * ps[..., 0] / zs + k[:, None, 2],
            k[:, None, 1] * ps[..., 1] / zs + k[:, None, 3],
        ),
        -1,
    )
    opacity = splats.opacities.expand_as(z)
    ok = ok & (opacity > ALPHA_MIN) & usable(splats)
    mid = 0.5 * (a + c)
    lam = mid + torch.sqrt((mid * mid - det).clamp_min(0.0))
    sigmas = torch.sqrt(2.0 * torch.log((255.0 * opacity).clamp_min(1.0)))
    radius = torch.ceil(sigmas * torch.sqrt(lam.clamp_min(0.0)))
    ok = ok & (mean2d[..., 0] + radius > 0) & (mean2d[..., 0] - radius < width)
    ok = ok & (mean2d[..., 1] + radius > 0) & (mean2d[..., 1] - radius < height)
    if sh_degree == 0:  # view-independent: one colour per Gaussian
        colour = sh_colour(splats.sh, mu, 0).expand(*z.shape, 3)
    else:
        dirs = mu - t[:, None]
        dirs = dirs / dirs.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        colour = sh_colour(splats.sh, dirs, sh_degree)
    plane = depth_planes(splats, r_wc, p_c, k, mean2d, radius, planar=depth_mode == "plane")
    return Projected(mean2d, conic, z, opacity, colour, radius, ok, plane)


def depth_planes(
    splats: GaussianSplats,
    r_wc: Tensor,
    p_c: Tensor,
    k: Tensor,
    mean2d: Tensor,
    radius: Tensor,
    planar: bool,
) -> Tensor:
    """(N, G, 6) per-Gaussian depth model (d, a, b, c, lo, hi), see :class:`Projected`.

    A flat Gaussian (shortest axis < half the middle one, plane not within ~6 deg of edge-on
    at its centre) uses its plane; the clamp [lo, hi] is the range of the plane depth over its
    footprint box ``mean2d +- radius`` (the extremes of ``d / (a u + b v + c)`` over a box where
    the denominator keeps its sign lie at the corners), so every pixel it touches gets the exact
    ray / plane depth. When the plane is seen edge-on somewhere in the box (the denominator
    changes sign), the centre's z is used instead."""
    z = p_c[..., 2]
    one, zero = torch.ones_like(z), torch.zeros_like(z)
    centre = torch.stack((z, zero, zero, one, z, z), -1)
    if not planar:
        return centre
    srt, idx = torch.sort(splats.scales, dim=-1)  # (G, 3) or (N, G, 3): once per scene
    rot = quat_to_rotmat(quat_normalize(splats.quats))
    n_w = torch.gather(rot, -1, idx[..., :1, None].expand(*idx.shape[:-1], 3, 1))[..., 0]
    n_w, srt = n_w.expand(*z.shape, 3), srt.expand(*z.shape, 3)
    n_c = torch.einsum("nji,ngj->ngi", r_wc, n_w)
    fx, fy, cx, cy = (k[:, None, i] for i in range(4))
    a, b = n_c[..., 0] / fx, n_c[..., 1] / fy
    c = n_c[..., 2] - a * cx - b * cy
    d = (n_c * p_c).sum(-1)
    cos = d.abs() / p_c.norm(dim=-1).clamp_min(1e-12)
    use = (srt[..., 0] < 0.5 * srt[..., 1]) & (cos > COS_EDGE_ON)
    den0 = a * mean2d[..., 0] + b * mean2d[..., 1] + c
    lo, hi = z, z
    for su in (-1.0, 1.0):
        for sv in (-1.0, 1.0):
            den = den0 + radius * (su * a + sv * b)
            use = use & (den * den0 > 0) & (den.abs() > 1e-12)
            zk = d / torch.where(den.abs() > 1e-12, den, torch.ones_like(den))
            lo, hi = torch.minimum(lo, zk), torch.maximum(hi, zk)
    plane = torch.stack((d, a, b, c, lo, hi), -1)
    return torch.where(use[..., None], plane, centre)


# ------------------------------------------------------------------ reference path


def _composite(alpha: Tensor, colour: Tensor, depth: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Front-to-back compositing of depth-ordered alphas (P, G) with colours (G, 3) and
    per-pixel depths (P, G) -> (rgb (P, 3), sum w z (P,), sum w (P,)), stopping before the
    transmittance falls below T_MIN (3DGS Eq. 3)."""
    t_incl = torch.cumprod(1.0 - alpha, dim=-1)
    t_excl = torch.cat((torch.ones_like(t_incl[:, :1]), t_incl[:, :-1]), dim=-1)
    w = alpha * t_excl * (t_incl >= T_MIN)
    return w @ colour, (w * depth).sum(-1), w.sum(-1)


def _reference_env(pr: Projected, n: int, width: int, height: int, chunk: int):
    """Every pixel of env n against every valid Gaussian, in depth order."""
    idx = torch.nonzero(pr.valid[n], as_tuple=False)[:, 0]
    idx = idx[torch.argsort(pr.depth[n, idx], stable=True)]
    m, cn, o = pr.mean2d[n, idx], pr.conic[n, idx], pr.opacity[n, idx]
    col, pl = pr.colour[n, idx], pr.plane[n, idx]
    dev, dt = m.device, m.dtype
    jj, ii = torch.meshgrid(
        torch.arange(width, device=dev, dtype=dt) + 0.5,
        torch.arange(height, device=dev, dtype=dt) + 0.5,
        indexing="xy",
    )
    pix = torch.stack((jj.reshape(-1), ii.reshape(-1)), -1)
    outs = []
    step = max(1, chunk // max(1, len(idx)))
    for s in range(0, len(pix), step):
        d = pix[s : s + step, None, :] - m[None]
        power = -0.5 * (cn[:, 0] * d[..., 0] ** 2 + cn[:, 2] * d[..., 1] ** 2)
        power = power - cn[:, 1] * d[..., 0] * d[..., 1]
        alpha = (o * torch.exp(power)).clamp(max=ALPHA_MAX)
        alpha = torch.where((power <= 0) & (alpha >= ALPHA_MIN), alpha, 0.0)
        z = pixel_depth(pl, pix[s : s + step, None, 0], pix[s : s + step, None, 1])
        outs.append(_composite(alpha, col, z))
    return tuple(torch.cat(p, 0) for p in zip(*outs, strict=True))


def _render_reference(pr: Projected, width: int, height: int, chunk: int = 1 << 22):
    rgb, wz, ws = zip(
        *(_reference_env(pr, n, width, height, chunk) for n in range(pr.depth.shape[0])),
        strict=True,
    )
    n = len(rgb)
    return (
        torch.stack(rgb).reshape(n, height, width, 3),
        torch.stack(wz).reshape(n, height, width),
        torch.stack(ws).reshape(n, height, width),
    )


PROJECT_BUDGET = 1 << 25  # Gaussian-envs projected at once by the torch paths (~30 floats each)


def _env_slice(splats: GaussianSplats, sl: slice) -> GaussianSplats:
    if splats.means.dim() == 2 or splats.means.shape[0] == 1:
        return splats
    fields = ("means", "quats", "log_scales", "opacity_logits", "sh")
    return GaussianSplats(*(getattr(splats, f)[sl] for f in fields))


def _render_torch(name, splats, k, t_wc, width, height, kw):
    """The torch paths (reference or pairs), envs in chunks of PROJECT_BUDGET / G so the
    (N, G, ...) projection stays bounded (256 envs x 1M Gaussians would need ~30 GB)."""
    from volary.sensors.splat.pairs import render_pairs

    n = t_wc.shape[0]
    step = max(1, PROJECT_BUDGET // max(1, splats.count))
    outs = []
    for a in range(0, n, step):
        sl = slice(a, a + step)
        pr = project(_env_slice(splats, sl), k[sl], t_wc[sl], width, height, **kw)
        fn = render_pairs if name == "torch" else _render_reference
        outs.append(fn(pr, width, height))
    return tuple(torch.cat(parts) for parts in zip(*outs, strict=True))


# ------------------------------------------------------------------ gsplat adapter (CUDA)


def _render_gsplat(splats, k, t_wc, width, height, background, near, far, blur, sh_degree):
    """gsplat.rasterization (RGB+ED) on CUDA (parity with the reference: tests/test_splat_cuda.py,
    run on a GPU machine)."""
    import gsplat

    if splats.means.dim() != 2:
        raise ConfigError("backend 'gsplat': per-env splats are not supported; use 'reference'")
    keep = usable(splats)
    if not bool(keep.all()):
        splats = GaussianSplats(
            *(t[keep] for t in (splats.means, splats.quats, splats.log_scales)),
            splats.opacity_logits[keep],
            splats.sh[keep],
        )
    kk = torch.zeros(k.shape[0], 3, 3, device=k.device, dtype=k.dtype)
    kk[:, 0, 0], kk[:, 1, 1], kk[:, 0, 2], kk[:, 1, 2] = k[:, 0], k[:, 1], k[:, 2], k[:, 3]
    kk[:, 2, 2] = 1.0
    out, alpha, _ = gsplat.rasterization(
        splats.means, quat_normalize(splats.quats), splats.scales, splats.opacities, splats.sh,
        torch.linalg.inv(t_wc), kk, width, height, near_plane=near, far_plane=far,
        eps2d=blur, sh_degree=sh_degree, render_mode="RGB+ED",
    )  # fmt: skip
    # background composited here (C + T bg, T = 1 - alpha): gsplat 1.5.3's packed mode rejects
    # per-camera ``backgrounds``
    a = alpha[..., 0]
    return out[..., :3] + (1.0 - a)[..., None] * background, out[..., 3], a


# ------------------------------------------------------------------ public entry


def _cuda_gsplat_available(device: torch.device) -> bool:
    return device.type == "cuda" and importlib.util.find_spec("gsplat") is not None


def resolve_backend(backend: str, device: torch.device) -> str:
    """The backend ``auto`` picks: gsplat on CUDA when installed, else the torch pair path on a
    GPU; the numba path on the CPU. Unknown names raise UnknownNameError."""
    check_name("splat backend", backend, BACKENDS)
    if backend == "auto":
        if device.type == "cpu":
            return "fast"
        return "gsplat" if _cuda_gsplat_available(device) else "torch"
    if backend == "fast" and device.type != "cpu":
        raise ConfigError("backend 'fast': CPU only (numba); use 'torch' or 'gsplat' on CUDA")
    if backend == "gsplat" and not _cuda_gsplat_available(device):
        if device.type != "cuda":
            raise ConfigError("backend 'gsplat': needs CUDA tensors; use 'fast' on the CPU")
        raise MissingDependencyError("gsplat", "gsplat")
    return backend


def _check_size(width: int, height: int) -> None:
    for name, v in (("width", width), ("height", height)):
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ConfigError(f"{name}: expected a positive integer, got {v!r}")


def render(
    splats: GaussianSplats,
    intrinsics: Any,
    world_from_cam: Any,
    width: int,
    height: int,
    *,
    backend: str = "auto",
    background: Sequence[float] | Tensor = (0.0, 0.0, 0.0),
    near: float = 0.01,
    far: float = 1e4,
    blur: float = 0.3,
    sh_degree: int | None = None,
    min_alpha: float = 0.5,
    depth_fill: float = math.nan,
    depth_mode: str = "plane",
) -> SplatImage:
    """Render splats into N pinhole cameras.

    intrinsics: (fx, fy, cx, cy) px or K, shared ``(4,)``/``(3, 3)`` or per env ``(N, ...)``.
    world_from_cam: T_WC ``(N, 4, 4)`` (or ``(4, 4)``), OpenCV camera frame (see
        :func:`camera_poses` for body poses + mount, :func:`look_at`).
    splats: one scene ``(G, ...)`` for every env, or one per env ``(N, G, ...)``.
    background: RGB in [0, 1] behind the splats. near/far: m, Gaussians with centre z outside
    are culled. blur: px^2 low-pass dilation. sh_degree: None uses all the splats have.
    min_alpha: pixels with accumulated opacity below it get ``depth_fill`` depth.
    depth_mode: "plane" (ray / Gaussian-plane depth, default) or "center" (the centre's z,
    gsplat's expected depth; the only mode of the gsplat backend).
    """
    _check_size(width, height)
    dev, dt = splats.means.device, splats.means.dtype
    t_wc = _poses(world_from_cam, dev, dt)
    n = t_wc.shape[0]
    k = _intrinsics(intrinsics, n, dev, dt)
    splats = _batched(splats, n)
    deg = splats.sh_degree if sh_degree is None else sh_degree
    if not 0 <= deg <= splats.sh_degree:
        raise ConfigError(f"sh_degree: expected 0..{splats.sh_degree}, got {sh_degree}")
    if not (0 <= blur < math.inf and 0 < near < far):
        raise ConfigError(f"blur, near, far: expected blur >= 0, 0 < near < far; got "
                          f"{blur}, {near}, {far}")  # fmt: skip
    bg = torch.as_tensor(background, dtype=dt, device=dev)
    if bg.shape != (3,):
        raise ConfigError(f"background: expected an RGB triple, got {tuple(bg.shape)}")
    if depth_mode not in ("plane", "center"):
        raise ConfigError(f"depth_mode: expected 'plane' or 'center', got {depth_mode!r}")
    name = resolve_backend(backend, dev)
    if name == "gsplat":
        rgb, depth, alpha = _render_gsplat(splats, k, t_wc, width, height, bg, near, far, blur, deg)
    else:
        kw = dict(near=near, far=far, blur=blur, sh_degree=deg, depth_mode=depth_mode)
        if name == "fast":  # the same last steps, in NumPy (no torch intra-op threads)
            from volary.sensors.splat.fast import render_fast_image

            rgb, depth, alpha = render_fast_image(
                splats, k, t_wc, width, height, bg, min_alpha, depth_fill, **kw
            )
            return SplatImage(rgb, depth, alpha)
        rgb, wz, alpha = _render_torch(name, splats, k, t_wc, width, height, kw)
        rgb = rgb + (1.0 - alpha)[..., None] * bg
        depth = wz / alpha.clamp_min(1e-12)
    depth = torch.where(alpha >= min_alpha, depth, torch.full_like(depth, depth_fill))
    return SplatImage(rgb.clamp(0.0, 1.0), depth, alpha.clamp(0.0, 1.0))


__all__ = [
    "BACKENDS",
    "Projected",
    "SplatImage",
    "camera_poses",
    "covariance_2d",
    "look_at",
    "project",
    "render",
    "resolve_backend",
    "usable",
]
