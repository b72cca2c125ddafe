"""A deep collision encoder (DCE) for depth images: a small VAE whose 64-d latent is trained to
reconstruct the *collision image* of its input, not the image itself (Kulkarni and Alexis,
"Task-driven compression for collision encoding based on depth images", 2023; the encoder behind
Aerial Gym's depth navigation, paper 003 Sec. V-D). The navigate task then observes the latent
mean instead of a min-pooled depth image (``make_env("navigate", depth_encoder=...)``).

Collision image (:func:`collision_image`): a pixel v holds the smallest ``d_u - R`` over every
pixel u whose obstacle point, inflated by the robot's radius R, covers v. With a pinhole camera
of focal length f px, a sphere of radius R at depth d spans f R / d px around its pixel, so

    C(v) = min { d_u - R : |u - v| <= f R / d_u },  clamped to [0, range]

(u = v always qualifies). Thin obstacles the min-pooled image can lose between its cells grow
to the size the robot sees them at; far ones barely grow.

    >>> frames, info = collect_depth(20_000, scenes=64)        # flown in the training forests
    >>> vae, report = train_dce(frames, info, DCEConfig())
    >>> save_encoder("encoder.pt", vae, info, DCEConfig(), meta=report)
    >>> enc = load_encoder("encoder.pt")                       # (N, H, W) depth/range -> (N, 64)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import torch
from pydantic import ConfigDict, Field
from torch import Tensor, nn

from volary.errors import ConfigError
from volary.inputs import Positive, Strict, validated
from volary.learning.checkpoint import (
    CheckpointKind,
    read_checkpoint,
    state_on_cpu,
    write_checkpoint,
)
from volary.learning.files import build_network

if TYPE_CHECKING:
    from volary.envs.navigate import NavigateTask

CHECKPOINT_KIND = CheckpointKind("dce", "deep collision encoder", ("config", "state_dict", "info"))


# ---- the target --------------------------------------------------------------------------------
def collision_image(depth: Tensor, focal_px: float, radius: float, max_px: int = 8) -> Tensor:
    """The collision image (module docstring) of z-depth ``depth`` (..., H, W) in metres (no
    invalid pixels: set them to the range first); ``focal_px``: f (px), ``radius``: R (m);
    ``max_px``: the largest inflation radius (px) considered. Same shape, m, >= 0."""
    if not focal_px > 0 or not radius >= 0:
        raise ConfigError(f"collision_image: expected focal_px > 0 and radius >= 0, got "
                          f"{focal_px!r}, {radius!r}")  # fmt: skip
    d = depth
    reach = focal_px * radius / d.clamp_min(1e-6)  # px a pixel's inflated point covers
    val = d - radius
    inf = torch.full_like(d, math.inf)
    out = val.clone()
    h, w = d.shape[-2:]
    for dy in range(-max_px, max_px + 1):
        for dx in range(-max_px, max_px + 1):
            r = math.hypot(dx, dy)
            if r == 0 or r > max_px or abs(dy) >= h or abs(dx) >= w:
                continue
            src = torch.where(reach >= r, val, inf)  # pixel u reaches v = u + (dy, dx)
            (ys, yd), (xs, xd) = _shift(dy, h), _shift(dx, w)
            out[..., yd, xd] = torch.minimum(out[..., yd, xd], src[..., ys, xs])
    return out.clamp_min(0.0)


def _shift(k: int, n: int) -> tuple[slice, slice]:
    """(source, destination) slices of an axis of length ``n`` moved by ``k`` pixels."""
    return (slice(0, n - k), slice(k, n)) if k >= 0 else (slice(-k, n), slice(0, n + k))


# ---- the network -------------------------------------------------------------------------------
@dataclass(frozen=True)
class DCEConfig:
    """Network and training knobs (our choices; the paper's encoder sees 270 x 480 images)."""

    latent: int = 64
    width: int = 16  # channels of the first conv; doubled twice
    beta: float = 1.0  # KL weight of the beta-VAE loss
    epochs: int = 10
    batch: int = 256
    lr: float = 1e-3
    val_fraction: float = 0.1
    max_px: int = 8  # collision image: largest inflation radius (px)
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("latent", "width", "epochs", "batch", "max_px"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name}: expected an int >= 1, got {v!r}")
        for name in ("beta", "lr"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
                raise ConfigError(f"{name}: expected a number > 0, got {v!r}")
        if not 0 < self.val_fraction < 1:
            raise ConfigError(f"val_fraction: expected 0 < value < 1, got {self.val_fraction!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"seed: expected an int >= 0, got {self.seed!r}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DCEConfig:
        known = {f.name for f in fields(cls)}
        bad = sorted(set(data) - known)
        if bad:
            raise ConfigError(f"DCEConfig: unknown fields {bad}; valid: {sorted(known)}")
        return cls(**data)


class DepthVAE(nn.Module):
    """Conv encoder (three stride-2 3x3 convs, ELU) -> mean and log-variance of a ``latent``-d
    Gaussian; transposed-conv decoder -> a (H, W) image in [0, 1]. H and W divisible by 8."""

    def __init__(self, shape: tuple[int, int], cfg: DCEConfig) -> None:
        super().__init__()
        h, w = shape
        if h < 8 or w < 8 or h % 8 or w % 8:
            raise ConfigError(f"shape: expected (H, W) divisible by 8, got {shape}")
        c = cfg.width
        self.shape, self.latent = (h, w), cfg.latent
        self.cells = (4 * c, h // 8, w // 8)
        n = 4 * c * (h // 8) * (w // 8)
        self.encoder = nn.Sequential(
            nn.Conv2d(1, c, 3, 2, 1), nn.ELU(), nn.Conv2d(c, 2 * c, 3, 2, 1), nn.ELU(),
            nn.Conv2d(2 * c, 4 * c, 3, 2, 1), nn.ELU(), nn.Flatten(), nn.Linear(n, 2 * cfg.latent),
        )  # fmt: skip
        self.decoder_in = nn.Linear(cfg.latent, n)
        self.decoder = nn.Sequential(
            nn.ELU(), nn.ConvTranspose2d(4 * c, 2 * c, 4, 2, 1), nn.ELU(),
            nn.ConvTranspose2d(2 * c, c, 4, 2, 1), nn.ELU(), nn.ConvTranspose2d(c, 1, 4, 2, 1),
        )  # fmt: skip

    def encode(self, depth: Tensor) -> tuple[Tensor, Tensor]:
        """(mean, log-variance), each (N, latent), of depth / range images (N, H, W)."""
        stats = self.encoder(depth[:, None])
        return stats[:, : self.latent], stats[:, self.latent :].clamp(-10.0, 10.0)

    def decode(self, z: Tensor) -> Tensor:
        """(N, H, W) collision image / range in [0, 1] from latents (N, latent)."""
        x = self.decoder_in(z).reshape(-1, *self.cells)
        return torch.sigmoid(self.decoder(x))[:, 0]

    def loss(self, depth: Tensor, target: Tensor, beta: float, generator: torch.Generator
             ) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
        """(loss, reconstruction, KL) per image, averaged: beta-VAE on the collision target,
        reconstruction = sum of squared pixel errors, KL to N(0, I) in nats."""
        mu, logvar = self.encode(depth)
        eps = torch.randn(mu.shape, generator=generator, device=mu.device, dtype=mu.dtype)
        recon = self.decode(mu + eps * torch.exp(0.5 * logvar))
        rec = ((recon - target) ** 2).flatten(1).sum(-1).mean()
        kl = (-0.5 * (1 + logvar - mu**2 - logvar.exp()).sum(-1)).mean()
        return rec + beta * kl, rec, kl


class LatentEncoder(nn.Module):
    """The frozen encoder half of a :class:`DepthVAE`: (N, H, W) depth / range -> (N, latent)
    latent means; what ``make_env("navigate", depth_encoder=...)`` takes."""

    def __init__(self, vae: DepthVAE) -> None:
        super().__init__()
        self.vae = vae
        self.out_dim = vae.latent
        self.shape = vae.shape
        self.requires_grad_(False)
        self.eval()

    def forward(self, depth: Tensor) -> Tensor:
        if depth.shape[-2:] != self.shape:
            raise ConfigError(
                f"depth_encoder: expected images of {self.shape} px, got {tuple(depth.shape[-2:])}"
            )
        p = next(self.vae.parameters())
        return self.vae.encode(depth.to(p.device, p.dtype))[0].to(depth.device)


# ---- data --------------------------------------------------------------------------------------
def collect_depth(
    frames: int,
    scenes: int = 64,
    scene_seed: int = 0,
    n_envs: int = 256,
    seed: int = 0,
    noise: float = 0.6,
    env_options: dict[str, Any] | None = None,
) -> tuple[Tensor, dict[str, Any]]:
    """``frames`` depth / range images (F, H, W) flown by ``n_envs`` navigate envs in forests
    ``scene_seed .. scene_seed + scenes - 1`` (the training scenes): velocity along the goal
    vector plus Gaussian noise of std ``noise`` per action (so flights also end close to and
    in trees). ``info``: camera focal length (px), robot radius (m), range (m), scenes."""
    from volary.envs import make_env
    from volary.envs.navigate import goal_follower_action

    if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
        raise ConfigError(f"frames: expected an int >= 1, got {frames!r}")
    made = make_env("navigate", n_envs=n_envs, seed=seed, scenes=scenes, scene_seed=scene_seed,
                    **(env_options or {}))  # fmt: skip
    env = cast("NavigateTask", made)
    cfg = env.config
    gen = torch.Generator().manual_seed(seed)
    obs, _ = env.reset(seed=seed)
    out: list[Tensor] = []
    got = 0
    while got < frames:
        img = env.depth_image().cpu()
        out.append(img)
        got += img.shape[0]
        act = goal_follower_action(obs.cpu())
        act = (act + noise * torch.randn(act.shape, generator=gen)).clamp(-1.0, 1.0)
        obs, *_ = env.step(act.to(env.device))
    depth = torch.cat(out)[:frames]
    info = {
        "focal_px": cfg.camera[1] / 2 / math.tan(cfg.hfov / 2),
        "radius": float(env.world.sim.params.radius[0]),
        "depth_range": float(cfg.depth_range),
        "camera": list(cfg.camera),
        "scenes": scenes,
        "scene_seed": scene_seed,
        "platform": cfg.platform,
        "frames": int(depth.shape[0]),
    }
    return depth, info


# ---- training ----------------------------------------------------------------------------------
def collision_targets(depth: Tensor, info: dict[str, Any], max_px: int, chunk: int = 4096
                      ) -> Tensor:  # fmt: skip
    """Collision images / range (F, H, W) of depth / range images ``depth`` (``info`` from
    :func:`collect_depth`)."""
    rng = float(info["depth_range"])
    parts = [
        collision_image(depth[i : i + chunk] * rng, info["focal_px"], info["radius"], max_px) / rng
        for i in range(0, depth.shape[0], chunk)
    ]
    return torch.cat(parts).clamp(0.0, 1.0)


def train_dce(
    depth: Tensor,
    info: dict[str, Any],
    cfg: DCEConfig | None = None,
    progress: Callable[[int, dict[str, float]], None] | None = None,
) -> tuple[DepthVAE, dict[str, Any]]:
    """Train a :class:`DepthVAE` on depth / range images (F, H, W) to reconstruct their
    collision images; a random ``val_fraction`` is held out. Returns (vae, report) with the
    per-epoch train/validation reconstruction error and KL."""
    cfg = cfg or DCEConfig()
    if depth.dim() != 3 or depth.shape[0] < 2:
        raise ConfigError(f"depth: expected (F >= 2, H, W) images, got {tuple(depth.shape)}")
    t0 = time.perf_counter()
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    target = collision_targets(depth, info, cfg.max_px)
    perm = torch.randperm(depth.shape[0], generator=gen)
    n_val = max(1, int(round(cfg.val_fraction * depth.shape[0])))
    val, tr = perm[:n_val], perm[n_val:]
    vae = DepthVAE((int(depth.shape[1]), int(depth.shape[2])), cfg)
    opt = torch.optim.Adam(vae.parameters(), lr=cfg.lr)
    hist: dict[str, list[float]] = {"train_recon": [], "train_kl": [], "val_recon": [],
                                    "val_kl": []}  # fmt: skip
    for epoch in range(cfg.epochs):
        vae.train()
        order = tr[torch.randperm(tr.numel(), generator=gen)]
        rec_sum = kl_sum = 0.0
        for i in range(0, order.numel(), cfg.batch):
            idx = order[i : i + cfg.batch]
            loss, rec, kl = vae.loss(depth[idx], target[idx], cfg.beta, gen)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec_sum += float(rec.detach()) * idx.numel()
            kl_sum += float(kl.detach()) * idx.numel()
        vae.eval()
        with torch.no_grad():
            mu, logvar = vae.encode(depth[val])
            v_rec = float(((vae.decode(mu) - target[val]) ** 2).flatten(1).sum(-1).mean())
            v_kl = float((-0.5 * (1 + logvar - mu**2 - logvar.exp()).sum(-1)).mean())
        row = {"train_recon": rec_sum / tr.numel(), "train_kl": kl_sum / tr.numel(),
               "val_recon": v_rec, "val_kl": v_kl}  # fmt: skip
        for k, v in row.items():
            hist[k].append(v)
        if progress is not None:
            progress(epoch, row)
    report = {
        "config": asdict(cfg),
        "frames": int(depth.shape[0]),
        "validation_frames": int(n_val),
        "history": hist,
        "wall_s": time.perf_counter() - t0,
        "pixels": int(depth.shape[1] * depth.shape[2]),
    }
    return vae.eval(), report


# ---- checkpoints -------------------------------------------------------------------------------
def save_encoder(path: str | Path, vae: DepthVAE, info: dict[str, Any], cfg: DCEConfig,
                 meta: dict[str, Any] | None = None) -> Path:  # fmt: skip
    """Write the VAE (both halves), its config and the data ``info`` through the checkpoint
    module (``weights_only``-safe)."""
    fields_ = {"config": asdict(cfg), "state_dict": state_on_cpu(vae),
               "info": {**info, "shape": list(vae.shape)}}  # fmt: skip
    return write_checkpoint(path, CHECKPOINT_KIND, fields_, meta)


Size = Annotated[int, Field(strict=True, ge=1, le=2**16)]
Pixels = Annotated[int, Field(strict=True, ge=8, le=2**14, multiple_of=8)]


class _ConfigDoc(Strict):
    """A checkpoint's ``config`` (``asdict(DCEConfig)``): types and ranges; a field an older
    file lacks takes :class:`DCEConfig`'s default."""

    latent: Size = DCEConfig.latent
    width: Size = DCEConfig.width
    beta: Positive = DCEConfig.beta
    epochs: Size = DCEConfig.epochs
    batch: Annotated[int, Field(strict=True, ge=1)] = DCEConfig.batch
    lr: Positive = DCEConfig.lr
    val_fraction: Annotated[float, Field(strict=True, gt=0, lt=1)] = DCEConfig.val_fraction
    max_px: Size = DCEConfig.max_px
    seed: Annotated[int, Field(strict=True, ge=0)] = DCEConfig.seed


class _InfoDoc(Strict):
    """A checkpoint's ``info``: the image shape (H, W) the VAE was built for, and the data's
    description (free JSON)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    shape: tuple[Pixels, Pixels]


def load_vae(path: str | Path) -> tuple[DepthVAE, dict[str, Any]]:
    """(VAE in eval mode, data info) from :func:`save_encoder`'s file. Its ``config`` and
    ``info`` are checked against declared models and the network they describe against the
    weights the file holds before it is built; ``FileFormatError`` in one line naming the file
    and the field otherwise."""
    ck = read_checkpoint(path, CHECKPOINT_KIND)
    doc = validated(_ConfigDoc, ck["config"], f"{ck.path}: field 'config'")
    info = validated(_InfoDoc, ck["info"], f"{ck.path}: field 'info'")
    cfg = DCEConfig(**doc.model_dump())
    vae = build_network(ck, "config", lambda: DepthVAE(info.shape, cfg))
    ck.load_state(vae)
    return vae.eval(), {**info.model_dump(), "shape": list(info.shape)}


def load_encoder(path: str | Path) -> LatentEncoder:
    """The frozen latent encoder of :func:`save_encoder`'s file."""
    return LatentEncoder(load_vae(path)[0])


def resolve_env_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` for ``make_env`` with a ``depth_encoder`` given as a path replaced by the
    loaded encoder (policy files store the path)."""
    enc = options.get("depth_encoder")
    if isinstance(enc, str | Path):
        return {**options, "depth_encoder": load_encoder(enc)}
    return dict(options)


__all__ = [
    "CHECKPOINT_KIND",
    "DCEConfig",
    "DepthVAE",
    "LatentEncoder",
    "collect_depth",
    "collision_image",
    "collision_targets",
    "load_encoder",
    "load_vae",
    "resolve_env_options",
    "save_encoder",
    "train_dce",
]
