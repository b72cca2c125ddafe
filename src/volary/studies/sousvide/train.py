"""Two-stage SV-Net training (SOUS VIDE paper 000, Sec. V "To train the policy", Sec. VI-A).

- Stage 1 (RMA pre-training; variants with ``pretrain``): only the history network trains, to
  regress the normalized sampled dynamics theta = [k_th, m] from the eq. 3 window (MSE).
- Stage 2 (imitation): MSE between the command network's output and the normalized expert
  action [f_th, W]. The history network is frozen for ``svnet`` and ``no_latent``, trains with
  the rest for ``no_pretrain`` and is absent for ``no_rma``; the SqueezeNet encoder always
  trains (the paper re-trains it on its data).
- Adam, learning rate 1e-4 (Sec. VI-A). The validation split is by rollout unit, so no rollout
  is in both sets; each stage keeps the weights of its epoch with the lowest validation loss
  (the last epoch's when there is no validation split).
- Every random draw (weight init, split, batch order, augmentation) derives from ``seed``:
  same seed, same device, same thread count -> the same checkpoint.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from volary.errors import ConfigError
from volary.studies.sousvide import dataset as sv_dataset
from volary.studies.sousvide.dataset import SousVideArrays
from volary.studies.sousvide.history import observable
from volary.studies.sousvide.net import (
    ArchConfig,
    NetConfig,
    NormStats,
    SVNet,
    get_variant,
    parameter_count,
    save_checkpoint,
)

Progress = Callable[[str, int, float, "float | None"], None]  # (stage, epoch, train, val)


@dataclass(frozen=True)
class TrainConfig:
    """Both stages. ``*_max_steps`` caps the optimizer steps of a stage (None: whole epochs)."""

    variant: str = "svnet"
    lr: float = 1e-4  # Adam (Sec. VI-A)
    batch_size: int = 64
    stage1_epochs: int = 50  # history net only: cheap (no images), ~20k samples/s on 1 core
    stage1_max_steps: int | None = None
    stage2_epochs: int = 5
    stage2_max_steps: int | None = None
    val_fraction: float = 0.1  # of the rollout units
    seed: int = 0
    device: str = "cpu"
    threads: int = 1  # torch intra-op threads while training (restored afterwards)
    augment: bool = False  # per-image brightness/contrast jitter in stage 2
    # stage 2: share of training images given 1-3 random flat-coloured rectangles (random
    # erasing; occluders such as people walking through the view), 0 = off
    occlusion: float = 0.0
    # history entries also carry u^(k-1) (RMA's state-action history; eq. 3 alone: False).
    # Default on: with states only the mass is not identifiable from expert data (DESIGN.md)
    history_actions: bool = True
    eval_batch_size: int = 256
    # layer sizes and image normalization (ArchConfig.image_norm: "per_image" by default, each
    # image standardized by its own channel statistics; "dataset": the training-set ones)
    arch: ArchConfig = field(default_factory=ArchConfig)
    # RMA latent width: replaces the last entry of arch.history_hidden (None: keep arch's, 64).
    # Default 8: a wide latent also carries the recent commands and the policy copies them
    latent: int | None = 8

    def __post_init__(self) -> None:
        get_variant(self.variant)
        for name in ("batch_size", "stage2_epochs", "threads", "eval_batch_size"):
            _check_int(name, getattr(self, name), 1)
        _check_int("stage1_epochs", self.stage1_epochs, 0)
        for name in ("stage1_max_steps", "stage2_max_steps"):
            if getattr(self, name) is not None:
                _check_int(name, getattr(self, name), 1)
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise ConfigError(f"lr: expected a finite learning rate > 0, got {self.lr!r}")
        if not (isinstance(self.val_fraction, (int, float)) and 0 <= self.val_fraction < 1):
            raise ConfigError(
                f"val_fraction: expected a fraction in [0, 1), got {self.val_fraction!r}"
            )
        _check_int("seed", self.seed, 0)
        for name in ("augment", "history_actions"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}: expected a bool, got {getattr(self, name)!r}")
        occ = self.occlusion
        if isinstance(occ, bool) or not isinstance(occ, (int, float)) or not 0 <= occ <= 1:
            raise ConfigError(f"occlusion: expected a fraction in [0, 1], got {occ!r}")
        if not isinstance(self.arch, ArchConfig):
            raise ConfigError(f"arch: expected an ArchConfig, got {type(self.arch).__name__}")
        if self.latent is not None:
            _check_int("latent", self.latent, 1)
        _parse_device(self.device)
        if get_variant(self.variant).pretrain and self.stage1_epochs < 1:
            raise ConfigError(f"stage1_epochs: variant {self.variant!r} pre-trains, expected >= 1")

    @property
    def net_arch(self) -> ArchConfig:
        """``arch`` with the latent width applied: the layer sizes the trained net gets (and its
        checkpoint stores in ``NetConfig.arch.history_hidden``)."""
        if self.latent is None:
            return self.arch
        return replace(self.arch, history_hidden=(*self.arch.history_hidden[:-1], self.latent))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["arch"] = {k: list(v) if isinstance(v, tuple) else v for k, v in d["arch"].items()}
        return d


def _check_int(name: str, v: Any, lo: int) -> None:
    if not isinstance(v, int) or isinstance(v, bool) or v < lo:
        raise ConfigError(f"{name}: expected an integer >= {lo}, got {v!r}")


def _parse_device(device: str) -> torch.device:
    from volary.device import checked

    return checked(device, "device")


# ---- data ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SVData:
    """The dataset as tensors on the training device; the policy's inputs only (no p_x, p_y)."""

    images: Tensor  # (R, H, W, 3) uint8
    obs: Tensor  # (R, 8) observable [p_z, v, q]
    objective: Tensor  # (R, 7)
    history: Tensor  # (R, T, 11) eq. 3 windows; (R, T, 15) with the commands u^(k-1)
    theta: Tensor  # (R, 2) [k_th N, m kg]
    action: Tensor  # (R, 4) expert [f_th, W rad/s]
    unit: np.ndarray  # (R,) rollout index

    def __len__(self) -> int:
        return int(self.obs.shape[0])

    @classmethod
    def from_arrays(
        cls, a: SousVideArrays, device: torch.device | str = "cpu", history_actions: bool = False
    ) -> SVData:
        if a.images is None:
            raise ConfigError("data: the dataset was read without images (read(images=True))")
        if len(a) == 0:
            raise ConfigError("data: the dataset holds no valid rows")

        def t(x: np.ndarray) -> Tensor:
            return torch.as_tensor(np.ascontiguousarray(x), dtype=torch.float32).to(device)

        return cls(
            images=torch.as_tensor(np.ascontiguousarray(a.images)).to(device),
            obs=observable(t(a.state)),
            objective=t(a.objective),
            history=t(with_commands(a) if history_actions else a.history),
            theta=t(a.theta),
            action=t(a.action),
            unit=np.asarray(a.unit),
        )


def with_commands(a: SousVideArrays) -> np.ndarray:
    """(R, T, 15): each eq. 3 entry followed by the command applied over its interval, as
    ``history.action_windows`` per rollout (rows of a unit are consecutive steps from 0: the
    valid rows of a rollout are a prefix), zero before the rollout's first command."""
    r, window = a.history.shape[:2]
    offsets = np.arange(window) - window  # entry i of row k pairs with u^(k - window + i)
    src = np.arange(r)[:, None] + offsets[None, :]
    ok = (a.step[:, None] + offsets[None, :]) >= 0
    cmd = np.where(ok[..., None], a.action[np.clip(src, 0, None)], 0.0).astype(np.float32)
    return np.concatenate((a.history, cmd), axis=-1)


def split_units(unit: np.ndarray, val_fraction: float, seed: int) -> tuple[Tensor, Tensor]:
    """(train rows, val rows) with whole rollout units in each, the val units a seeded random
    ``val_fraction`` of them (at least one when the fraction is > 0)."""
    units = np.unique(unit)
    if val_fraction > 0 and units.size < 2:
        raise ConfigError(
            f"val_fraction: a validation split needs >= 2 rollout units, the data has {units.size}"
        )
    n_val = (
        0 if val_fraction == 0 else min(units.size - 1, max(1, round(val_fraction * units.size)))
    )
    val_units = np.random.default_rng(seed).permutation(units)[:n_val]
    is_val = np.isin(unit, val_units)
    return torch.as_tensor(np.flatnonzero(~is_val)), torch.as_tensor(np.flatnonzero(is_val))


def _moments(x: Tensor) -> tuple[Tensor, Tensor]:
    x = x.double()
    return x.mean(0).float(), x.std(0, unbiased=False).float()


def compute_stats(data: SVData, rows: Tensor, chunk: int = 1024) -> NormStats:
    """Fig. 4 normalization from the training rows: image channels in [0, 1], observable
    state, objective, history entry fields (over all T entries), theta and action."""
    s1 = torch.zeros(3, dtype=torch.float64)
    s2 = torch.zeros(3, dtype=torch.float64)
    for i in range(0, rows.numel(), chunk):
        x = data.images[rows[i : i + chunk].to(data.images.device)].double().cpu() / 255.0
        s1 += x.sum(dim=(0, 1, 2))
        s2 += (x * x).sum(dim=(0, 1, 2))
    n = rows.numel() * data.images.shape[1] * data.images.shape[2]
    img_mean = s1 / n
    img_std = (s2 / n - img_mean**2).clamp_min(0).sqrt()
    r = rows.to(data.obs.device)
    mean, std = {"image": img_mean.float()}, {"image": img_std.float()}
    for name, x in (
        ("obs", data.obs[r]),
        ("objective", data.objective[r]),
        ("history", data.history[r].flatten(0, 1)),
        ("theta", data.theta[r]),
        ("action", data.action[r]),
    ):
        m, s = _moments(x.cpu())
        mean[name], std[name] = m, s
    return NormStats.from_moments(mean, std)


# ---- parameter sets per stage --------------------------------------------------------------------
def stage_parameters(net: SVNet, stage: int) -> dict[str, torch.nn.Parameter]:
    """The parameters a stage trains: stage 1 the history net (pre-training variants only),
    stage 2 everything on the command path except a frozen history net."""
    v = net.variant
    if stage == 1:
        if not v.pretrain or net.history is None:
            return {}
        return {f"history.{k}": p for k, p in net.history.named_parameters()}
    if stage == 2:
        # a frozen history net trains nowhere; with the latent as context the theta head is
        # off the command path (no gradient reaches it), so it is left out too
        skip: tuple[str, ...] = ("history.",) if v.freeze_history else ()
        if v.context == "latent":
            skip += ("history.head.",)
        return {k: p for k, p in net.named_parameters() if not k.startswith(skip)}
    raise ConfigError(f"stage: expected 1 or 2, got {stage!r}")


def _set_trainable(net: SVNet, params: dict[str, torch.nn.Parameter]) -> list[torch.nn.Parameter]:
    keep = set(params)
    for k, p in net.named_parameters():
        p.requires_grad_(k in keep)
    return list(params.values())


def _batches(rows: Tensor, size: int, gen: torch.Generator | None) -> list[Tensor]:
    order = rows[torch.randperm(rows.numel(), generator=gen)] if gen is not None else rows
    return list(order.split(size))


def augment_images(images: Tensor, gen: torch.Generator) -> Tensor:
    """Per-image photometric jitter on uint8 (N, H, W, 3): brightness x U(0.6, 1.4) (the
    lighting changes of Sec. VI-B), contrast about the image mean x U(0.8, 1.2)."""
    n = images.shape[0]
    b = (0.6 + 0.8 * torch.rand(n, 1, 1, 1, generator=gen)).to(images.device)
    c = (0.8 + 0.4 * torch.rand(n, 1, 1, 1, generator=gen)).to(images.device)
    x = images.float()
    m = x.mean(dim=(1, 2, 3), keepdim=True)
    return ((x - m) * c + m * b).clamp(0, 255).round().to(torch.uint8)


OCCLUDER_SIDE = (0.1, 0.5)  # occlude_images: rectangle sides as fractions of the image's
OCCLUDERS_MAX = 3  # at most this many rectangles per occluded image


def occlude_images(images: Tensor, fraction: float, gen: torch.Generator) -> Tensor:
    """Random erasing on uint8 (N, H, W, 3): each image, with probability ``fraction``, gets
    1-:data:`OCCLUDERS_MAX` axis-aligned rectangles, sides U(:data:`OCCLUDER_SIDE`) of the
    image's, each one flat random colour. Untouched images are returned as they are."""
    n, h, w, _ = images.shape
    hit = torch.rand(n, generator=gen) < fraction
    count = torch.randint(1, OCCLUDERS_MAX + 1, (n,), generator=gen)
    lo, hi = OCCLUDER_SIDE
    size = lo + (hi - lo) * torch.rand(n, OCCLUDERS_MAX, 2, generator=gen)  # (h, w) fractions
    corner = torch.rand(n, OCCLUDERS_MAX, 2, generator=gen) * (1.0 - size)
    colour = torch.randint(0, 256, (n, OCCLUDERS_MAX, 3), generator=gen, dtype=torch.uint8)
    rows = (torch.arange(h) + 0.5) / h
    cols = (torch.arange(w) + 0.5) / w
    out = images.clone()
    for k in range(OCCLUDERS_MAX):
        on = hit & (count > k)  # (N,)
        r0, c0 = corner[:, k, 0, None], corner[:, k, 1, None]
        in_r = (rows[None] >= r0) & (rows[None] < r0 + size[:, k, 0, None])  # (N, H)
        in_c = (cols[None] >= c0) & (cols[None] < c0 + size[:, k, 1, None])  # (N, W)
        mask = (on[:, None, None] & in_r[:, :, None] & in_c[:, None, :]).to(images.device)
        out = torch.where(mask[..., None], colour[:, k, None, None, :].to(images.device), out)
    return out


# ---- stage 1 -------------------------------------------------------------------------------------
def _theta_loss(net: SVNet, data: SVData, idx: Tensor, images: Tensor | None = None) -> Tensor:
    target = net.normalize_theta(data.theta[idx])
    return ((net.theta_estimate(data.history[idx]) - target) ** 2).mean()


def _action_loss(net: SVNet, data: SVData, idx: Tensor, images: Tensor | None = None) -> Tensor:
    img = data.images[idx] if images is None else images
    y = net(img, data.obs[idx], data.objective[idx], data.history[idx] if net.has_history else None)
    return ((y - net.normalize_action(data.action[idx])) ** 2).mean()


@torch.no_grad()
def mean_loss(net: SVNet, data: SVData, rows: Tensor, stage: int, batch: int = 256) -> float:
    """Mean per-sample MSE of a stage's loss over ``rows`` in eval mode."""
    if rows.numel() == 0:
        return math.nan
    was = net.training
    net.eval()
    loss_fn = _theta_loss if stage == 1 else _action_loss
    total = 0.0
    for idx in _batches(rows.to(data.obs.device), batch, None):
        total += float(loss_fn(net, data, idx)) * idx.numel()
    net.train(was)
    return total / rows.numel()


@torch.no_grad()
def theta_errors(net: SVNet, data: SVData, rows: Tensor, train_rows: Tensor) -> dict[str, Any]:
    """Stage-1 theta regression error in physical units on ``rows``: RMSE and MAE of k_th (N)
    and m (kg), beside the RMSE of always predicting the training-set mean."""
    if rows.numel() == 0 or net.history is None:
        return {}
    net.eval()
    r = rows.to(data.obs.device)
    est = torch.cat([net.theta_physical(data.history[i]) for i in r.split(1024)])
    err = (est - data.theta[r]).double()
    base = (data.theta[r] - data.theta[train_rows.to(r.device)].mean(0)).double()

    def named(x: Tensor) -> dict[str, float]:
        return {"k_th_N": float(x[0]), "m_kg": float(x[1])}

    return {
        "rmse": named(err.pow(2).mean(0).sqrt()),
        "mae": named(err.abs().mean(0)),
        "mean_predictor_rmse": named(base.pow(2).mean(0).sqrt()),
        "rows": int(rows.numel()),
    }


@dataclass
class _Stage:
    """One stage's training loop state and report."""

    name: str
    stage: int
    epochs: int
    max_steps: int | None
    curve: list[dict[str, Any]] = field(default_factory=list)
    samples: int = 0
    step_s: float = 0.0
    steps: int = 0


def _run_stage(
    s: _Stage,
    net: SVNet,
    data: SVData,
    rows: tuple[Tensor, Tensor],
    cfg: TrainConfig,
    gen: torch.Generator,
    progress: Progress | None,
) -> dict[str, Any]:
    """Adam on the stage's parameters; per-epoch running train loss and val loss."""
    train_rows, val_rows = rows
    params = _set_trainable(net, stage_parameters(net, s.stage))
    opt = torch.optim.Adam(params, lr=cfg.lr)
    loss_fn = _theta_loss if s.stage == 1 else _action_loss
    best: tuple[float, int, dict[str, Tensor] | None] = (math.inf, -1, None)
    t0 = time.perf_counter()
    initial_val = mean_loss(net, data, val_rows, s.stage, cfg.eval_batch_size)
    for epoch in range(s.epochs):
        net.train()
        if net.variant.freeze_history and net.history is not None and s.stage == 2:
            net.history.eval()
        total, count = 0.0, 0
        for idx in _batches(train_rows, cfg.batch_size, gen):
            if s.max_steps is not None and s.steps >= s.max_steps:
                break
            idx = idx.to(data.obs.device)
            t = time.perf_counter()
            imgs = None
            if s.stage == 2 and (cfg.augment or cfg.occlusion > 0):
                imgs = data.images[idx]
                if cfg.occlusion > 0:
                    imgs = occlude_images(imgs, cfg.occlusion, gen)
                if cfg.augment:
                    imgs = augment_images(imgs, gen)
            loss = loss_fn(net, data, idx, imgs)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            s.step_s += time.perf_counter() - t
            s.steps += 1
            s.samples += idx.numel()
            total, count = total + float(loss.detach()) * idx.numel(), count + idx.numel()
        if count == 0:
            break
        val = mean_loss(net, data, val_rows, s.stage, cfg.eval_batch_size)
        s.curve.append({"epoch": epoch, "train_loss": total / count, "val_loss": _j(val)})
        if progress is not None:
            progress(s.name, epoch, total / count, None if math.isnan(val) else val)
        if not math.isnan(val) and val < best[0]:
            best = (val, epoch, {k: v.detach().clone() for k, v in net.state_dict().items()})
    if best[2] is not None:
        net.load_state_dict(best[2])
    _set_trainable(net, dict(net.named_parameters()))
    net.eval()
    return {
        "epochs_run": len(s.curve),
        "steps": s.steps,
        "curve": s.curve,
        "initial_val_loss": _j(initial_val),
        "best_epoch": best[1] if best[2] is not None else len(s.curve) - 1,
        "final_train_loss": _j(mean_loss(net, data, train_rows, s.stage, cfg.eval_batch_size)),
        "final_val_loss": _j(mean_loss(net, data, val_rows, s.stage, cfg.eval_batch_size)),
        "wall_s": time.perf_counter() - t0,
        "samples_per_s": s.samples / s.step_s if s.step_s > 0 else None,
        "trainable_parameters": sum(p.numel() for p in params),
    }


def _j(x: float) -> float | None:
    """JSON-safe float (NaN -> None)."""
    return None if math.isnan(x) else float(x)


def pretrain_history(
    net: SVNet,
    data: SVData,
    rows: tuple[Tensor, Tensor],
    cfg: TrainConfig,
    gen: torch.Generator,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Stage 1: history net regresses normalized theta (MSE); report with physical errors."""
    s = _Stage("stage1", 1, cfg.stage1_epochs, cfg.stage1_max_steps)
    rep = _run_stage(s, net, data, rows, cfg, gen, progress)
    eval_rows = rows[1] if rows[1].numel() else rows[0]
    rep["theta_error"] = theta_errors(net, data, eval_rows, rows[0])
    rep["theta_error"]["split"] = "val" if rows[1].numel() else "train"
    return rep


def train_imitation(
    net: SVNet,
    data: SVData,
    rows: tuple[Tensor, Tensor],
    cfg: TrainConfig,
    gen: torch.Generator,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Stage 2: imitation of the expert's normalized actions (MSE), history net per variant."""
    s = _Stage("stage2", 2, cfg.stage2_epochs, cfg.stage2_max_steps)
    return _run_stage(s, net, data, rows, cfg, gen, progress)


# ---- the whole run -------------------------------------------------------------------------------
def fit(
    arrays: SousVideArrays, config: TrainConfig, progress: Progress | None = None
) -> tuple[SVNet, dict[str, Any]]:
    """Both stages on in-memory data; (trained net in eval mode, JSON-able report)."""
    device = _parse_device(config.device)
    data = SVData.from_arrays(arrays, device, config.history_actions)
    gen = torch.Generator().manual_seed(config.seed)
    rows = split_units(data.unit, config.val_fraction, config.seed)
    if rows[0].numel() == 0:
        raise ConfigError("data: no training rows left after the validation split")
    h, w = data.images.shape[1:3]
    net_cfg = NetConfig(
        variant=config.variant,
        window=int(data.history.shape[1]),
        image_height=int(h),
        image_width=int(w),
        arch=config.net_arch,
        history_actions=config.history_actions,
    )
    net = SVNet(net_cfg, gen).to(device)
    net.set_stats(compute_stats(data, rows[0]))
    t0 = time.perf_counter()
    report: dict[str, Any] = {
        "variant": config.variant,
        "train_config": config.to_dict(),
        "net_config": net_cfg.to_dict(),
        "parameters": parameter_count(net),
        "rows": {"train": int(rows[0].numel()), "val": int(rows[1].numel())},
        "units": {
            "train": int(np.unique(data.unit[rows[0].numpy()]).size),
            "val": int(np.unique(data.unit[rows[1].numpy()]).size),
        },
    }
    if net.variant.pretrain:
        report["stage1"] = pretrain_history(net, data, rows, config, gen, progress)
    report["stage2"] = train_imitation(net, data, rows, config, gen, progress)
    report["wall_s"] = time.perf_counter() - t0
    return net, report


def train_policy(
    data: str | Path,
    out: str | Path,
    variant: str | None = None,
    config: TrainConfig | None = None,
    progress: Progress | None = None,
) -> Path:
    """Read the dataset once, train ``variant`` (overrides ``config.variant`` when given) and
    write ``out/<variant>.pt`` (weights_only-loadable) and ``out/<variant>.json`` (report).
    Returns the checkpoint path."""
    cfg = config if config is not None else TrainConfig()
    if not isinstance(cfg, TrainConfig):
        raise ConfigError(f"config: expected a TrainConfig, got {type(cfg).__name__}")
    if variant is not None:
        cfg = replace(cfg, variant=get_variant(variant).name)
    arrays = sv_dataset.read(Path(data))
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        net, report = fit(arrays, cfg, progress)
    finally:
        torch.set_num_threads(threads)
    report["dataset"] = {"path": str(data), "rows": len(arrays), "config": arrays.config}
    o = Path(out)
    o.mkdir(parents=True, exist_ok=True)
    meta = {
        "variant": cfg.variant,
        "train_config": cfg.to_dict(),
        "dataset": str(data),
        "final_val_loss": report["stage2"]["final_val_loss"],
    }
    ckpt = save_checkpoint(net, o / f"{cfg.variant}.pt", meta)
    (o / f"{cfg.variant}.json").write_text(json.dumps(report, indent=2))
    return ckpt


__all__ = [
    "Progress",
    "SVData",
    "TrainConfig",
    "augment_images",
    "occlude_images",
    "compute_stats",
    "fit",
    "mean_loss",
    "pretrain_history",
    "split_units",
    "stage_parameters",
    "theta_errors",
    "train_imitation",
    "train_policy",
]
