"""Training BoundaryPredictor (paper 002 Sec. V-C: eq. 8-10, Table IV) and its test errors.

- Per-item error (eq. 8), on outputs normalized by [2 m/s, 2 s]: e = (y - y_hat) / (y + eps) for
  the speed, e = -(y - y_hat) / (y + eps) for the time, so e > 0 is the safe side (speed
  under-predicted, time over-predicted).
- Loss (eq. 9): mean of sigma(alpha e) W_S e + (1 - sigma(alpha e)) (-W_U e) over items and both
  outputs, (W_S, W_U, alpha, eps) = (0.8, 2.0, 10, 0.1).
- Input noise (eq. 10): E_train = E_norm + B U(0, 1) N_8(0, I), one uniform per sample, B = 0.1.
- Table IV: Adam, lr 0.01, StepLR (50 epochs, gamma 0.8), batch 1280, up to 1000 epochs, early
  stop after 100 epochs without a lower test loss (the best weights are kept). Table IV's
  "Test / Train Split 92 / 8" is read as 92 % train, 8 % test (the other reading trains on 8 %).
  The split is a fixed permutation of the labelled rows by ``seed``; rows whose every feasible
  candidate crashed (C_min >= 1e6) are left out by default (``TrainConfig.drop_crashed``).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from volary.config import apply_overrides
from volary.errors import ConfigError
from volary.studies.boundary.dataset import BPDataset
from volary.studies.boundary.grid import normalize_inputs
from volary.studies.boundary.model import OUTPUT_SCALE, BoundaryPredictor


@dataclass(frozen=True)
class LossConfig:
    """Eq. 8-9 constants (paper's best values)."""

    w_safe: float = 0.8  # W_S
    w_unsafe: float = 2.0  # W_U
    alpha: float = 10.0
    eps: float = 0.1


@dataclass(frozen=True)
class TrainConfig:
    """Table IV (scale ``epochs``/``patience`` down for quick runs)."""

    epochs: int = 1000
    batch_size: int = 1280
    patience: int = 100
    noise: float = 0.1  # B of eq. 10
    lr: float = 0.01
    step_size: int = 50
    gamma: float = 0.8
    test_fraction: float = 0.08
    dropout: float = 0.1
    seed: int = 0
    drop_crashed: bool = True  # leave out inputs whose every feasible candidate crashed
    loss: LossConfig = LossConfig()

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "patience", "step_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name}: expected an integer >= 1, got {v!r}")
        if not 0 < self.test_fraction < 1:
            raise ConfigError(f"test_fraction: expected (0, 1), got {self.test_fraction}")
        for name in ("noise", "lr", "gamma"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ConfigError(f"{name}: expected a finite value >= 0, got {v}")

    def to_dict(self) -> dict:
        return asdict(self)


# ---- eq. 8-10 --------------------------------------------------------------------------------
def item_errors(pred: Tensor, target: Tensor, eps: float = 0.1) -> Tensor:
    """Eq. 8 for (..., 2) [speed, time] (normalized): positive is the safe side."""
    e = (target - pred) / (target + eps)
    return torch.stack((e[..., 0], -e[..., 1]), dim=-1)


def soft_threshold_loss(pred: Tensor, target: Tensor, cfg: LossConfig | None = None) -> Tensor:
    """Eq. 9: weighted soft-threshold loss, averaged over items and outputs."""
    c = cfg or LossConfig()
    e = item_errors(pred, target, c.eps)
    s = torch.sigmoid(c.alpha * e)
    return (s * c.w_safe * e + (1 - s) * (-c.w_unsafe * e)).mean()


def noisy_inputs(x: Tensor, bound: float, generator: torch.Generator) -> Tensor:
    """Eq. 10: x + B U(0, 1) N_8(0, I), one uniform factor per row."""
    u = torch.rand(x.shape[0], 1, generator=generator, dtype=x.dtype)
    return x + bound * u * torch.randn(x.shape, generator=generator, dtype=x.dtype)


# ---- data --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Split:
    """Normalized inputs and targets of the train and test rows."""

    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor
    test_rows: np.ndarray  # indices into the labelled dataset


def split_dataset(
    data: BPDataset, test_fraction: float, seed: int, drop_crashed: bool = True
) -> Split:
    """Fixed train/test split by ``seed`` of the labelled rows (without the all-crashed ones
    when ``drop_crashed``); labels above the output range (2 m/s, 2 s) are kept as they are
    (the sigmoid cannot reach them)."""
    d = data.labelled(drop_crashed)
    n = len(d.speed)
    if n < 2:
        raise ConfigError(f"dataset: expected at least 2 labelled inputs, got {n}")
    perm = np.random.default_rng(seed).permutation(n)
    n_test = min(n - 1, max(1, int(round(test_fraction * n))))
    test, train = perm[:n_test], perm[n_test:]
    x = normalize_inputs(torch.as_tensor(d.inputs, dtype=torch.float64)).float()
    y = torch.as_tensor(np.stack((d.speed, d.t0), -1), dtype=torch.float32)
    y = y / torch.tensor(OUTPUT_SCALE)
    return Split(x[train], y[train], x[test], y[test], test)


# ---- training -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainResult:
    model: BoundaryPredictor
    history: list[dict]  # per epoch: train loss, test loss, lr
    best_epoch: int
    split: Split


def train(data: BPDataset, cfg: TrainConfig | None = None, log=None) -> TrainResult:
    """Table IV training on ``data``; returns the weights of the epoch with the lowest test
    loss. ``log(epoch, train_loss, test_loss)`` is called after each epoch when given."""
    c = cfg or TrainConfig()
    gen = torch.Generator().manual_seed(c.seed)
    torch.manual_seed(c.seed)  # dropout masks (nn.Dropout draws from the default generator)
    split = split_dataset(data, c.test_fraction, c.seed, c.drop_crashed)
    model = BoundaryPredictor(c.dropout)
    opt = torch.optim.Adam(model.parameters(), lr=c.lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=c.step_size, gamma=c.gamma)
    best, best_state, best_epoch, history = math.inf, None, 0, []
    for epoch in range(c.epochs):
        tr = _epoch(model, opt, split, c, gen)
        te = evaluate_loss(model, split.x_test, split.y_test, c.loss)
        sched.step()
        history.append({"epoch": epoch, "train_loss": tr, "test_loss": te, "lr": _lr(opt)})
        if log is not None:
            log(epoch, tr, te)
        if te < best:
            best, best_epoch = te, epoch
            best_state = {k: v.clone() for k, v in model.state_dict().items()}
        elif epoch - best_epoch >= c.patience:
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    return TrainResult(model, history, best_epoch, split)


def _lr(opt: torch.optim.Optimizer) -> float:
    return float(opt.param_groups[0]["lr"])


def _epoch(model, opt, split: Split, c: TrainConfig, gen: torch.Generator) -> float:
    model.train()
    n = split.x_train.shape[0]
    perm = torch.randperm(n, generator=gen)
    total = 0.0
    for s in range(0, n, c.batch_size):
        idx = perm[s : s + c.batch_size]
        x = noisy_inputs(split.x_train[idx], c.noise, gen)
        loss = soft_threshold_loss(model(x), split.y_train[idx], c.loss)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += float(loss.detach()) * len(idx)
    return total / n


@torch.no_grad()
def evaluate_loss(model, x: Tensor, y: Tensor, cfg: LossConfig) -> float:
    model.eval()
    return float(soft_threshold_loss(model(x), y, cfg))


@torch.no_grad()
def percent_errors(model, x: Tensor, y: Tensor) -> dict[str, np.ndarray]:
    """Fig. 2's percent errors 100 (y_hat - y) / y per output, labels of 0 excluded."""
    model.eval()
    p = model(x)
    out = {}
    for i, name in enumerate(("speed", "time")):
        ok = y[:, i] > 0
        out[name] = (100 * (p[ok, i] - y[ok, i]) / y[ok, i]).double().numpy()
    return out


def error_summary(errors: dict[str, np.ndarray]) -> dict:
    """Median, quartiles and the under/over-predicted fractions per output."""
    out: dict[str, Any] = {}
    for name, e in errors.items():
        if e.size == 0:
            out[name] = {"n": 0}
            continue
        q = np.percentile(e, [5, 25, 50, 75, 95])
        out[name] = {
            "n": int(e.size),
            "median_pct": float(q[2]),
            "p5_p25_p75_p95_pct": [float(v) for v in q[[0, 1, 3, 4]]],
            "under_fraction": float((e < 0).mean()),
            "over_fraction": float((e > 0).mean()),
        }
    sp, ti = out.get("speed", {}), out.get("time", {})
    out["safe_skew"] = bool(
        sp.get("median_pct", 0) < 0
        and ti.get("median_pct", 0) > 0
        and sp.get("under_fraction", 0) > 0.5
        and ti.get("over_fraction", 0) > 0.5
    )
    return out


def plot_errors(errors: dict[str, np.ndarray], path: str | Path) -> Path:
    """Fig. 2-like histograms (log counts) of the test percent errors."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, (name, e) in zip(axes, errors.items(), strict=True):
        ax.hist(np.clip(e, -100, 300), bins=80, color="tab:blue", log=True)
        ax.axvline(0, color="k", lw=1)
        med = float(np.median(e)) if e.size else math.nan
        ax.set(
            xlabel=f"{name} percent error (%)",
            ylabel="count (log)",
            title=f"{name}: median {med:+.1f}%, n={e.size}",
        )
    fig.suptitle("BoundaryPredictor test-split percent errors (labels of 0 excluded)")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out


def run_training(
    dataset: str | Path, out: str | Path, config: TrainConfig | None = None, *, log=None, **fields
) -> dict:
    """Train on a dataset file; write ``model.pt`` (weights_only-loadable), ``train.json``
    (config, history, test-split percent-error summary) and ``errors.png`` (Fig. 2) to ``out``.
    ``config`` (default: Table IV) with ``fields`` over it (``seed=0, epochs=3, ...``)."""
    from volary.studies.boundary.dataset import load_dataset
    from volary.studies.boundary.model import save_checkpoint

    cfg = apply_overrides(config or TrainConfig(), fields)
    data = load_dataset(dataset)
    res = train(data, cfg, log=log)
    errs = percent_errors(res.model, res.split.x_test, res.split.y_test)
    summary = {
        "dataset": str(dataset),
        "dataset_config": data.config,
        "labelled_inputs": int(len(data.labelled().speed)),
        "all_crashed_inputs_left_out": int(
            len(data.labelled().speed) - len(data.labelled(True).speed)
        )
        if cfg.drop_crashed
        else 0,
        "train_rows": int(res.split.x_train.shape[0]),
        "test_rows": int(res.split.x_test.shape[0]),
        "labels_above_output_range": int(
            (res.split.y_train > 1).any(-1).sum() + (res.split.y_test > 1).any(-1).sum()
        ),
        "train_config": cfg.to_dict(),
        "best_epoch": res.best_epoch,
        "epochs_run": len(res.history),
        "test_errors": error_summary(errs),
        "history": res.history,
    }
    o = Path(out)
    o.mkdir(parents=True, exist_ok=True)
    meta = {k: v for k, v in summary.items() if k != "history"}
    save_checkpoint(res.model, o / "model.pt", meta)
    (o / "train.json").write_text(json.dumps(summary, indent=2))
    plot_errors(errs, o / "errors.png")
    return summary


__all__ = [
    "LossConfig",
    "run_training",
    "Split",
    "TrainConfig",
    "TrainResult",
    "error_summary",
    "evaluate_loss",
    "item_errors",
    "noisy_inputs",
    "percent_errors",
    "plot_errors",
    "soft_threshold_loss",
    "split_dataset",
    "train",
]
