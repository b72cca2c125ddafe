"""Camera effects for robustness experiments on rendered RGB frames ``(N, H, W, 3)`` in [0, 1].

- Brightness: a per-env factor on the linear image. SOUS VIDE (paper 000, Sec. VI-B, Table II
  "Lighting") flies with the scene lit at 40 % of the original lumens and reports robustness
  to 60 % brightness changes; :func:`draw_brightness` draws factors in [0.4, 1.0] by default.
- Exposure: ``rgb 2^ev`` (ev in stops), clipped to [0, 1] like a saturating sensor.
- Noise: the Poisson-Gaussian sensor model (Foi et al. 2008, "Practical Poissonian-Gaussian
  noise modeling", Eq. 1): variance ``read_std^2 + shot * x`` at intensity x, clipped.
- Motion blur: the frame is the mean of ``samples`` renders at poses interpolated (translation
  linearly, rotation by slerp) over the exposure, the temporal supersampling FlightGoggles'
  renderer approximates (Guerra et al. 2019, Sec. III).
- Dynamic objects: splat objects (a loaded PLY, or a primitive dressed by
  :func:`volary.sensors.splat.synth.synthesize`) moved per env by a pose and appended to the
  scene, giving per-env splats ``(N, G + Go, ...)`` the renderer takes as they are.

Every random draw takes an explicit ``torch.Generator``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from volary.errors import ConfigError
from volary.math.quaternion import quat_from_rotmat, quat_mul, quat_normalize, quat_to_rotmat
from volary.sensors.splat.io import GaussianSplats, sh_rotation
from volary.sensors.splat.render import SplatImage


def _check_rgb(rgb: Tensor) -> None:
    if not isinstance(rgb, Tensor) or rgb.dim() != 4 or rgb.shape[-1] != 3:
        got = tuple(rgb.shape) if isinstance(rgb, Tensor) else type(rgb).__name__
        raise ConfigError(f"rgb: expected a (N, H, W, 3) tensor, got {got}")


def _per_env(value: Any, n: int, name: str, like: Tensor) -> Tensor:
    v = torch.as_tensor(value, dtype=like.dtype, device=like.device)
    if v.dim() == 0:
        v = v.expand(n)
    if v.shape != (n,) or not bool(torch.isfinite(v).all()):
        raise ConfigError(f"{name}: expected a finite scalar or ({n},), got {tuple(v.shape)}")
    return v[:, None, None, None]


def brightness(rgb: Tensor, factor: Any) -> Tensor:
    """Scale the scene illumination by ``factor`` (scalar or (N,), >= 0): ``rgb * factor``."""
    _check_rgb(rgb)
    f = _per_env(factor, rgb.shape[0], "factor", rgb)
    if bool((f < 0).any()):
        raise ConfigError("factor: expected values >= 0")
    return (rgb * f).clamp(0.0, 1.0)


def draw_brightness(
    n: int, generator: torch.Generator, low: float = 0.4, high: float = 1.0
) -> Tensor:
    """(n,) factors uniform in [low, high] (default SOUS VIDE's 40 % to full lumens)."""
    if not 0 <= low <= high:
        raise ConfigError(f"low, high: expected 0 <= low <= high, got {low}, {high}")
    return low + (high - low) * torch.rand(n, generator=generator, dtype=torch.float64).float()


def exposure(rgb: Tensor, ev: Any) -> Tensor:
    """Exposure change of ``ev`` stops (scalar or (N,)): ``clip(rgb 2^ev, 0, 1)``."""
    _check_rgb(rgb)
    return (rgb * torch.exp2(_per_env(ev, rgb.shape[0], "ev", rgb))).clamp(0.0, 1.0)


def sensor_noise(
    rgb: Tensor, generator: torch.Generator, read_std: float = 0.01, shot: float = 0.0
) -> Tensor:
    """Poisson-Gaussian noise (Foi et al. 2008, Eq. 1): ``x + sqrt(read_std^2 + shot x) n``,
    n standard normal from ``generator`` (on rgb's device), clipped to [0, 1]."""
    _check_rgb(rgb)
    if not (read_std >= 0 and shot >= 0):
        raise ConfigError(f"read_std, shot: expected >= 0, got {read_std}, {shot}")
    n = torch.randn(rgb.shape, generator=generator, device=rgb.device, dtype=rgb.dtype)
    std = torch.sqrt(read_std**2 + shot * rgb.clamp_min(0.0))
    return (rgb + std * n).clamp(0.0, 1.0)


def slerp(q0: Tensor, q1: Tensor, s: float) -> Tensor:
    """Spherical linear interpolation of unit [w, x, y, z] quaternions (shortest arc)."""
    dot = (q0 * q1).sum(-1, keepdim=True)
    q1 = torch.where(dot < 0, -q1, q1)
    dot = dot.abs().clamp(max=1.0)
    theta = torch.acos(dot)
    small = theta < 1e-6
    st = torch.sin(theta).clamp_min(1e-12)
    w0 = torch.where(small, 1.0 - s, torch.sin((1 - s) * theta) / st)
    w1 = torch.where(small, torch.full_like(theta, s), torch.sin(s * theta) / st)
    return quat_normalize(w0 * q0 + w1 * q1)


def interpolate_poses(t0: Tensor, t1: Tensor, s: float) -> Tensor:
    """Poses (N, 4, 4) a fraction s in [0, 1] from t0 to t1 (lerp translation, slerp rotation)."""
    q = slerp(quat_from_rotmat(t0[:, :3, :3]), quat_from_rotmat(t1[:, :3, :3]), s)
    out = t0.clone()
    out[:, :3, :3] = quat_to_rotmat(q)
    out[:, :3, 3] = (1 - s) * t0[:, :3, 3] + s * t1[:, :3, 3]
    return out


def motion_blur(
    render_fn: Callable[[Tensor], SplatImage], start: Tensor, end: Tensor, samples: int = 5
) -> SplatImage:
    """Mean of ``samples`` renders ``render_fn(T_WC)`` at poses evenly spaced from ``start`` to
    ``end`` (N, 4, 4), the camera poses at shutter open and close. RGB and alpha are averaged;
    depth is the middle sample's (a depth sensor is not blurred this way)."""
    if samples < 1 or start.shape != end.shape or start.shape[-2:] != (4, 4):
        raise ConfigError("start, end, samples: expected equal (N, 4, 4) poses and samples >= 1")
    fracs = [0.5] if samples == 1 else [i / (samples - 1) for i in range(samples)]
    frames = [render_fn(interpolate_poses(start, end, s)) for s in fracs]
    rgb = torch.stack([f.rgb for f in frames]).mean(0)
    alpha = torch.stack([f.alpha for f in frames]).mean(0)
    return SplatImage(rgb, frames[len(frames) // 2].depth, alpha)


def _rigid(world_from_object: Tensor) -> tuple[Tensor, Tensor]:
    t = torch.as_tensor(world_from_object)
    if t.dim() != 3 or t.shape[1:] != (4, 4):
        raise ConfigError(f"world_from_object: expected (N, 4, 4), got {tuple(t.shape)}")
    r = t[:, :3, :3].double()
    eye = torch.eye(3, dtype=torch.float64).expand_as(r)
    if not torch.allclose(r.transpose(1, 2) @ r, eye, atol=1e-5):
        raise ConfigError("world_from_object: the rotation blocks must be orthonormal")
    return r, t[:, :3, 3].double()


def place_object(obj: GaussianSplats, world_from_object: Tensor) -> GaussianSplats:
    """Per-env copies ``(N, Go, ...)`` of an object's splats moved by rigid poses (N, 4, 4):
    means, rotations and (degree > 0) SH coefficients, as :func:`volary.sensors.splat.align`."""
    if obj.means.dim() != 2:
        raise ConfigError("obj: expected one object (Go, 3), not per-env splats")
    r, t = _rigid(world_from_object)
    dt, dev = obj.means.dtype, obj.means.device
    r, t = r.to(dev), t.to(dev)
    means = torch.einsum("nij,gj->ngi", r, obj.means.double()) + t[:, None]
    q_r = quat_from_rotmat(r)[:, None]
    quats = quat_mul(q_r.expand(-1, obj.count, 4), obj.quats.double()[None].expand(len(r), -1, 4))
    sh = obj.sh.double()[None].repeat(len(r), 1, 1, 1)
    for n in range(len(r)) if obj.sh_degree > 0 else ():
        for lvl, a in enumerate(sh_rotation(r[n].cpu(), obj.sh_degree)):
            s = slice(lvl * lvl, (lvl + 1) * (lvl + 1))
            sh[n, :, s] = torch.einsum("ij,gjc->gic", a.to(dev), sh[n, :, s])
    n = len(r)
    return GaussianSplats(
        means.to(dt),
        quats.to(dt),
        obj.log_scales[None].expand(n, -1, 3),
        obj.opacity_logits[None].expand(n, -1),
        sh.to(dt),
    )


def with_objects(scene: GaussianSplats, *objects: GaussianSplats) -> GaussianSplats:
    """The scene (shared or per env) with per-env objects (from :func:`place_object`)
    appended: ``(N, G + sum Go, ...)``. All SH degrees are padded to the highest."""
    if not objects:
        return scene
    n = objects[0].means.shape[0]
    parts = [scene, *objects]
    k = max(p.sh.shape[-2] for p in parts)

    def batch(p: GaussianSplats, name: str) -> Tensor:
        v = getattr(p, name)
        if p.means.dim() == 2:
            v = v[None]
        if v.shape[0] not in (1, n):
            raise ConfigError(f"objects: expected per-env splats for {n} envs, got {v.shape[0]}")
        v = v.expand(n, *v.shape[1:])
        if name == "sh" and v.shape[-2] < k:
            pad = v.new_zeros(*v.shape[:-2], k - v.shape[-2], 3)
            v = torch.cat((v, pad), -2)
        return v

    fields = ("means", "quats", "log_scales", "opacity_logits", "sh")
    cat = {f: torch.cat([batch(p, f) for p in parts], dim=1) for f in fields}
    return replace(scene, extra={}, layout=None, **cat)


__all__ = [
    "brightness",
    "draw_brightness",
    "exposure",
    "interpolate_poses",
    "motion_blur",
    "place_object",
    "sensor_noise",
    "slerp",
    "with_objects",
]
