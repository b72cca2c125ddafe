"""The BoundaryPredictor network (paper 002 Sec. V-C, Table III) and its checkpoints.

Input: E normalized to [0, 1] between the Table II bounds (8). Layers: Linear 512 + LeakyReLU
(0.1); Linear 256 + Dropout + LeakyReLU (0.04); Linear 32 + Dropout + LeakyReLU (0.02); Linear
32 + LeakyReLU (0.02); Linear 2 + Sigmoid. The outputs are (v_i, t_0) normalized by
[2 m/s, 2 s] (Sec. V-C). The paper does not give the dropout rate; 0.1 is assumed.

Checkpoints hold only tensors, numbers and strings, so they load with
``torch.load(path, weights_only=True)`` (DESIGN.md: never unpickle).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import Tensor, nn

from volary.errors import ConfigError, FileFormatError
from volary.learning.boundary.grid import N_FIELDS, check_inputs, normalize_inputs

OUTPUT_SCALE = (2.0, 2.0)  # m/s, s: output normalization (Sec. V-C)
CHECKPOINT_FORMAT = "volary.bp.checkpoint/1"


class BoundaryPredictor(nn.Module):
    """Table III. ``forward`` maps normalized E (..., 8) to normalized (v, t_0) (..., 2)."""

    def __init__(self, dropout: float = 0.1) -> None:
        super().__init__()
        if not 0 <= dropout < 1:
            raise ConfigError(f"dropout: expected a rate in [0, 1), got {dropout}")
        self.dropout = float(dropout)
        self.net = nn.Sequential(
            nn.Linear(N_FIELDS, 512),
            nn.LeakyReLU(0.1),
            nn.Linear(512, 256),
            nn.Dropout(dropout),
            nn.LeakyReLU(0.04),
            nn.Linear(256, 32),
            nn.Dropout(dropout),
            nn.LeakyReLU(0.02),
            nn.Linear(32, 32),
            nn.LeakyReLU(0.02),
            nn.Linear(32, 2),
            nn.Sigmoid(),
        )

    def forward(self, e_normalized: Tensor) -> Tensor:
        return self.net(e_normalized)

    @torch.no_grad()
    def predict(self, e: Tensor) -> tuple[Tensor, Tensor]:
        """(v_i m/s, t_0 s), each (K,), for raw inputs E (K, 8) inside the Table II ranges."""
        x = check_inputs(e, "e")
        p = next(self.parameters())
        was = self.training
        self.eval()
        y = self(normalize_inputs(x).to(p.dtype)) * p.new_tensor(OUTPUT_SCALE)
        self.train(was)
        return y[:, 0].double(), y[:, 1].double()


def save_checkpoint(model: BoundaryPredictor, path: str | Path, meta: dict) -> Path:
    """Weights plus JSON metadata (training config, split, metrics)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "format": CHECKPOINT_FORMAT,
            "dropout": model.dropout,
            "state_dict": model.state_dict(),
            "meta": json.dumps(meta),
        },
        out,
    )
    return out


def load_checkpoint(path: str | Path) -> tuple[BoundaryPredictor, dict]:
    """The network (eval mode) and its metadata; ``weights_only=True``."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"checkpoint: no file at {p}")
    try:
        ck = torch.load(p, weights_only=True, map_location="cpu")
    except Exception as err:  # noqa: BLE001 - any unreadable file is a format error
        raise FileFormatError(f"{p}: not a BoundaryPredictor checkpoint ({err})") from None
    if not isinstance(ck, dict) or ck.get("format") != CHECKPOINT_FORMAT:
        raise FileFormatError(f"{p}: expected format {CHECKPOINT_FORMAT!r}")
    try:
        model = BoundaryPredictor(dropout=float(ck["dropout"]))
        model.load_state_dict(ck["state_dict"])
        meta = json.loads(ck["meta"])
    except (KeyError, RuntimeError, TypeError, ValueError) as err:
        raise FileFormatError(f"{p}: malformed BoundaryPredictor checkpoint ({err})") from None
    model.eval()
    return model, meta


__all__ = [
    "OUTPUT_SCALE",
    "BoundaryPredictor",
    "load_checkpoint",
    "save_checkpoint",
]
