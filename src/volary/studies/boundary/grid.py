"""The Table II grid of BoundaryPredictor inputs E_i (paper 002, Sec. V-B, eq. 6, Table II).

E_i = (v_{i-1}, z_{i-1}, d_0, theta_0, z_i, d_f, theta_f, z_{i+1}) (eq. 6): the speed through the
previous gate, the three gate heights, and the polar positions of gate i around gate i-1 and of
gate i+1 around gate i (see ``sampling.py`` for the frame). Every field is a NumPy ``linspace``
over its Table II range; the grid is their Cartesian product, 129,600 inputs, enumerated in C
order (the first field varies slowest).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from volary.errors import ConfigError

FIELDS = ("v_prev", "z_prev", "d0", "theta0", "z_i", "d_f", "theta_f", "z_next")
N_FIELDS = len(FIELDS)
GRID_SIZE = 129_600  # paper 002 Sec. V-B


@dataclass(frozen=True)
class Axis:
    """One field of E: ``count`` points of ``numpy.linspace(low, high, count)``."""

    low: float
    high: float
    count: int


@dataclass(frozen=True)
class GridSpec:
    """The ranges of E's fields (Table II), in the order of ``FIELDS``."""

    axes: tuple[Axis, ...]

    def __post_init__(self) -> None:
        if len(self.axes) != N_FIELDS:
            raise ConfigError(f"axes: expected {N_FIELDS} axes {FIELDS}, got {len(self.axes)}")
        for name, a in zip(FIELDS, self.axes, strict=True):
            if a.count < 1 or not (math.isfinite(a.low) and math.isfinite(a.high)):
                raise ConfigError(f"axes.{name}: expected finite bounds and count >= 1, got {a}")
            if a.high < a.low:
                raise ConfigError(f"axes.{name}: expected low <= high, got {a}")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.count for a in self.axes)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def low(self) -> np.ndarray:
        return np.array([a.low for a in self.axes])

    @property
    def high(self) -> np.ndarray:
        return np.array([a.high for a in self.axes])

    def values(self) -> list[np.ndarray]:
        """The ``linspace`` points of each field."""
        return [np.linspace(a.low, a.high, a.count) for a in self.axes]

    def to_dict(self) -> dict[str, list[float]]:
        return {n: [a.low, a.high, a.count] for n, a in zip(FIELDS, self.axes, strict=True)}


HEIGHT = Axis(0.3, 0.525, 2)  # m, the two gate heights (Sec. V-A)
TABLE_II = GridSpec(
    (
        Axis(0.0, 1.0, 10),  # v_{i-1} m/s
        HEIGHT,  # z_{i-1}
        Axis(0.8, 1.5, 6),  # d_0 m
        Axis(-math.pi / 4, math.pi / 4, 15),  # theta_0 rad
        HEIGHT,  # z_i
        Axis(0.8, 1.5, 6),  # d_f m
        Axis(-math.pi / 4, math.pi / 4, 3),  # theta_f rad (Table II's theta_1)
        HEIGHT,  # z_{i+1}
    )
)


def grid_inputs(indices: np.ndarray | Tensor | None = None, spec: GridSpec = TABLE_II) -> Tensor:
    """E vectors (K, 8) float64 of the flat grid ``indices`` (all ``spec.size`` when None)."""
    idx = np.arange(spec.size) if indices is None else np.asarray(indices)
    if idx.ndim != 1 or (idx.size and (idx.min() < 0 or idx.max() >= spec.size)):
        raise ConfigError(f"indices: expected a 1-D array of grid indices in [0, {spec.size})")
    sub = np.unravel_index(idx.astype(np.int64), spec.shape)
    cols = [v[s] for v, s in zip(spec.values(), sub, strict=True)]
    return torch.as_tensor(np.stack(cols, axis=-1).reshape(-1, N_FIELDS), dtype=torch.float64)


def subset_indices(fraction: float, seed: int, spec: GridSpec = TABLE_II) -> np.ndarray:
    """Sorted flat indices of a random ``fraction`` of the grid (at least one), chosen by
    ``seed`` (the whole grid, in order, for 1.0)."""
    if not (isinstance(fraction, int | float) and 0 < fraction <= 1):
        raise ConfigError(f"fraction: expected a grid fraction in (0, 1], got {fraction!r}")
    if fraction == 1:
        return np.arange(spec.size)
    k = max(1, int(round(fraction * spec.size)))
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(spec.size, size=k, replace=False))


def check_inputs(e: Tensor, name: str = "inputs", spec: GridSpec = TABLE_II) -> Tensor:
    """``e`` as a float64 (K, 8) tensor; raises ConfigError unless finite and inside the Table II
    ranges (1e-9 slack)."""
    t = torch.as_tensor(e, dtype=torch.float64)
    if t.dim() != 2 or t.shape[-1] != N_FIELDS:
        raise ConfigError(f"{name}: expected shape (K, {N_FIELDS}) {FIELDS}, got {tuple(t.shape)}")
    if not bool(torch.isfinite(t).all()):
        raise ConfigError(f"{name}: expected finite values, got NaN or inf")
    lo, hi = torch.as_tensor(spec.low) - 1e-9, torch.as_tensor(spec.high) + 1e-9
    out = (t < lo) | (t > hi)
    if bool(out.any()):
        col = int(out.any(0).nonzero()[0])
        raise ConfigError(
            f"{name}: field {FIELDS[col]} expected in [{spec.low[col]:.4g}, {spec.high[col]:.4g}]"
            f", got {t[out.any(1), col][0].item():.4g}"
        )
    return t


def normalize_inputs(e: Tensor, spec: GridSpec = TABLE_II) -> Tensor:
    """E scaled to [0, 1] per field between the Table II bounds (Sec. V-C)."""
    lo = torch.as_tensor(spec.low, dtype=e.dtype, device=e.device)
    hi = torch.as_tensor(spec.high, dtype=e.dtype, device=e.device)
    return (e - lo) / (hi - lo).clamp_min(1e-12)


__all__ = [
    "FIELDS",
    "GRID_SIZE",
    "TABLE_II",
    "Axis",
    "GridSpec",
    "check_inputs",
    "grid_inputs",
    "normalize_inputs",
    "subset_indices",
]
