"""A deterministic MLP policy as plain arrays: what an env's one-call evaluation
(:mod:`volary.envs.fused_position`) runs, whichever learner trained it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from volary.errors import ConfigError


@dataclass(frozen=True)
class MlpPolicy:
    """A deterministic policy as plain arrays: ``a = clip(mlp(norm(obs)), -1, 1)``, tanh between
    the layers, none after the last.

    ``weights[l]``: (out, in) float32, ``biases[l]``: (out,) float32; ``obs_mean`` and
    ``obs_std`` ((D,) float32) and ``obs_clip``: the normalizer ``clip((o - mean) / std)``,
    None for none."""

    weights: tuple[np.ndarray, ...]
    biases: tuple[np.ndarray, ...]
    obs_mean: np.ndarray | None = None
    obs_std: np.ndarray | None = None
    obs_clip: float = math.inf

    def __post_init__(self) -> None:
        if not self.weights or len(self.weights) != len(self.biases):
            raise ConfigError("MlpPolicy: expected one bias per weight matrix, at least one layer")
        width = self.weights[0].shape[1]
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            if w.ndim != 2 or w.shape[1] != width or b.shape != (w.shape[0],):
                raise ConfigError(
                    f"MlpPolicy: layer {i} expected ({w.shape[0]}, {width}) weights and "
                    f"({w.shape[0]},) biases, got {w.shape}, {b.shape}"
                )
            width = w.shape[0]
        if (self.obs_mean is None) != (self.obs_std is None):
            raise ConfigError("MlpPolicy: obs_mean and obs_std go together")

    @property
    def obs_dim(self) -> int:
        return int(self.weights[0].shape[1])

    @property
    def act_dim(self) -> int:
        return int(self.weights[-1].shape[0])

    def packed(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """(sizes (L+1,) int64, flat float64 [W_0^T, b_0, W_1^T, b_1, ...] (each W^T (in,
        out), row-major), (2, D) float64 mean/std, clip; 0 for no normalizer) for a kernel."""
        sizes = np.array([self.obs_dim, *(w.shape[0] for w in self.weights)], np.int64)
        flat = np.concatenate([a.astype(np.float32).astype(np.float64).ravel()
                               for w, b in zip(self.weights, self.biases, strict=True)
                               for a in (w.T, b)])  # fmt: skip
        if self.obs_mean is None:
            norm = np.zeros((2, self.obs_dim), np.float64)
            clip = 0.0
        else:
            norm = np.stack([np.asarray(self.obs_mean, np.float32),
                             np.asarray(self.obs_std, np.float32)]).astype(np.float64)  # fmt: skip
            clip = float(self.obs_clip)
        return sizes, flat, norm, clip


__all__ = ["MlpPolicy"]
