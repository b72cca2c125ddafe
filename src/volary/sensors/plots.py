"""PNG previews of ray-cast sensor output (matplotlib Agg, imported on first use)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from volary.errors import ConfigError


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _parent_made(path: str | Path) -> Path:
    """``path`` as a Path, its folder created if missing (as every figure writer in volary)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    return out


def _numpy(x: Any) -> np.ndarray:
    return x.detach().cpu().double().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def depth_png(path: str | Path, depth: Any, *, title: str = "depth [m]") -> Path:
    """Write one depth image (H, W) (or env 0 of (N, H, W)) as a colour-mapped PNG; NaN/inf
    pixels are drawn grey."""
    d = _numpy(depth)
    if d.ndim == 3:
        d = d[0]
    if d.ndim != 2 or d.size == 0:
        raise ConfigError(f"depth: expected shape (H, W) or (N, H, W), got {d.shape}")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 6 * d.shape[0] / max(d.shape[1], 1) + 0.6))
    cmap = plt.get_cmap("viridis").with_extremes(bad="0.6")
    im = ax.imshow(np.ma.masked_invalid(d), cmap=cmap, interpolation="nearest")
    fig.colorbar(im, ax=ax, label=title, shrink=0.8)
    ax.set_xlabel("u [px]")
    ax.set_ylabel("v [px]")
    fig.tight_layout()
    out = _parent_made(path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def lidar_png(path: str | Path, points: Any, *, title: str = "LiDAR scan") -> Path:
    """Write a top view (x-y, coloured by z) of a point cloud (P, 3) (or env 0 of (N, P, 3));
    NaN points (no return) are skipped."""
    p = _numpy(points)
    if p.ndim == 3:
        p = p[0]
    if p.ndim != 2 or p.shape[-1] != 3:
        raise ConfigError(f"points: expected shape (P, 3) or (N, P, 3), got {p.shape}")
    p = p[np.isfinite(p).all(axis=1)]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 6))
    sc = ax.scatter(p[:, 0], p[:, 1], c=p[:, 2], s=1.0, cmap="plasma")
    fig.colorbar(sc, ax=ax, label="z [m]", shrink=0.8)
    ax.set_aspect("equal")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_title(f"{title} ({len(p)} points)")
    fig.tight_layout()
    out = _parent_made(path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def rgb_png(path: str | Path, rgb: Any) -> Path:
    """Write one RGB image (H, W, 3) in [0, 1] (or env 0 of (N, H, W, 3)) as a PNG, pixel for
    pixel."""
    a = _numpy(rgb)
    if a.ndim == 4:
        a = a[0]
    if a.ndim != 3 or a.shape[-1] != 3 or a.size == 0:
        raise ConfigError(f"rgb: expected shape (H, W, 3) or (N, H, W, 3), got {a.shape}")
    plt = _pyplot()
    out = _parent_made(path)
    plt.imsave(out, np.clip(np.nan_to_num(a), 0.0, 1.0))
    return out


def save_reading(path: str | Path, env: int, arrays: dict[str, Any], png: Any) -> Path:
    """A reading's ``save``: ``.npz`` writes env ``env``'s arrays (numpy), anything else the
    PNG that ``png(path, env)`` draws."""
    out = Path(path)
    n = next(iter(arrays.values())).shape[0]
    if isinstance(env, bool) or not isinstance(env, int) or not 0 <= env < n:
        raise ConfigError(f"env: expected an env index in [0, {n}), got {env!r}")
    if out.suffix.lower() == ".npz":
        _parent_made(out)
        np.savez_compressed(out, **{k: v[env].detach().cpu().numpy() for k, v in arrays.items()})
        return out
    if out.suffix.lower() != ".png":
        raise ConfigError(f"path: expected a .png or .npz file name, got {str(out)!r}")
    return png(out, env)
