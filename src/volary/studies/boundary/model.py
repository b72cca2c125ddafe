"""The BoundaryPredictor network (paper 002 Sec. V-C, Table III) and its checkpoints.

Input: E normalized to [0, 1] between the Table II bounds (8). Layers: Linear 512 + LeakyReLU
(0.1); Linear 256 + Dropout + LeakyReLU (0.04); Linear 32 + Dropout + LeakyReLU (0.02); Linear
32 + LeakyReLU (0.02); Linear 2 + Sigmoid. The outputs are (v_i, t_0) normalized by
[2 m/s, 2 s] (Sec. V-C). The paper does not give the dropout rate; 0.1 is assumed.

Checkpoints go through :mod:`volary.learning.checkpoint`: tensors, numbers and strings only,
read with ``torch.load(path, weights_only=True)`` (DESIGN.md: never unpickle).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import Tensor, nn

from volary.errors import ConfigError
from volary.learning.checkpoint import (
    CheckpointKind,
    read_checkpoint,
    state_on_cpu,
    write_checkpoint,
)
from volary.studies.boundary.grid import N_FIELDS, check_inputs, normalize_inputs

OUTPUT_SCALE = (2.0, 2.0)  # m/s, s: output normalization (Sec. V-C)
# version 1, "volary.bp.checkpoint/1", is the legacy layout: a string tag, meta as JSON text
# (experiments/boundary/quarter-grid/results/model.pt is one)
CHECKPOINT_KIND = CheckpointKind(
    name="bp.model",
    title="BoundaryPredictor checkpoint",
    fields=("dropout", "state_dict"),
    version=2,
    legacy_format="volary.bp.checkpoint/1",
)
CHECKPOINT_FORMAT = CHECKPOINT_KIND.tag


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
    """Weights plus JSON metadata (training config, split, metrics), written atomically."""
    fields = {"dropout": model.dropout, "state_dict": state_on_cpu(model)}
    return write_checkpoint(path, CHECKPOINT_KIND, fields, meta)


def load_checkpoint(path: str | Path) -> tuple[BoundaryPredictor, dict]:
    """The network (eval mode) and its metadata; ``weights_only=True``. ``FileFormatError``
    naming the file and the field for a missing, foreign or malformed file."""
    ck = read_checkpoint(path, CHECKPOINT_KIND)
    with ck.reading("dropout"):  # what the network itself refuses names the file too
        model = BoundaryPredictor(dropout=ck.number("dropout", 0.0, 1.0))
    ck.load_state(model)
    if ck.version > 1:
        return model.eval(), ck.meta
    with ck.reading("meta"):  # version 1 (legacy layout) stored the metadata as a JSON string
        return model.eval(), json.loads(ck["meta"])


__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_KIND",
    "OUTPUT_SCALE",
    "BoundaryPredictor",
    "load_checkpoint",
    "save_checkpoint",
]
