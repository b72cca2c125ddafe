"""One set of trajectory metrics for every closed loop (benchmark rows, SOUS VIDE evaluation).

Each function takes numpy arrays or torch tensors with any leading batch dims and computes in
the namespace it is given (so a benchmark row, computed in numpy float64, and a batched SOUS VIDE
evaluation, in torch, get the same formula and the same numbers they always had). A track is
positions ``(..., K, 3)`` m sampled in time order; a distance profile is ``(..., K)`` m.

- path length: sum of the sample-to-sample distances (m);
- tracking error: mean distance of the samples to the reference path (SOUS VIDE, paper 000
  Sec. VI, "trajectory tracking error": the l2 distance of the drone's position to the
  nearest point of the desired trajectory);
- proximity: share (%) of samples within r of the reference path (SOUS VIDE Sec. VI,
  "proximity percentile");
- distances to a reference: to a segment (FLYINGTRUST's straight start-goal line, paper 004
  Sec. IV-B) or to a sampled path (SOUS VIDE's desired trajectory);
- collisions: rising edges of an in-collision flag; speeds; first entry into a goal ball.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor

Array = Any  # np.ndarray | torch.Tensor


def _is_torch(x: Array) -> bool:
    return isinstance(x, Tensor)


def _norm(x: Array) -> Array:
    """|x| over the last axis."""
    return x.norm(dim=-1) if _is_torch(x) else np.linalg.norm(x, axis=-1)


def _mean(x: Array) -> Array:
    return x.mean(dim=-1) if _is_torch(x) else x.mean(axis=-1)


def path_length(pos: Array) -> Array:
    """Metres travelled along a track ``(..., K, 3)`` -> ``(...)``; 0 for fewer than 2 samples."""
    if _is_torch(pos):
        return (pos[..., 1:, :] - pos[..., :-1, :]).norm(dim=-1).sum(dim=-1)
    return np.linalg.norm(np.diff(np.asarray(pos), axis=-2), axis=-1).sum(axis=-1)


def segment_distance(pos: Array, a: Array, b: Array) -> Array:
    """Distance ``(..., K)`` m of points ``pos (..., K, 3)`` to the segment from ``a`` to ``b``."""
    if _is_torch(pos):
        a, b = torch.as_tensor(a, dtype=pos.dtype), torch.as_tensor(b, dtype=pos.dtype)
        d = b - a
        dd = float(d @ d)
        s = torch.zeros(pos.shape[:-1], dtype=pos.dtype) if dd == 0.0 else (
            ((pos - a) @ d / dd).clamp(0.0, 1.0))  # fmt: skip
        return (pos - (a + s[..., None] * d)).norm(dim=-1)
    pos = np.asarray(pos, dtype=np.float64)
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    d = b - a
    dd = float(d @ d)
    s = np.zeros(pos.shape[:-1]) if dd == 0.0 else np.clip((pos - a) @ d / dd, 0.0, 1.0)
    return np.linalg.norm(pos - (a + s[..., None] * d), axis=-1)


def path_distance(flown: Tensor, desired: Tensor) -> Tensor:
    """l2 distance of each flown point ``(..., K, 3)`` to the nearest desired point ``(P, 3)``."""
    d = torch.cdist(flown.reshape(-1, 3).double(), desired.double())
    return d.min(dim=-1).values.reshape(flown.shape[:-1])


def tracking_error(dist: Array) -> Array:
    """Trajectory tracking error (000 Sec. VI): mean distance to the reference, (..., K) ->
    (...); NaN without samples."""
    if dist.shape[-1] == 0:
        return math.nan if dist.ndim == 1 else _full_nan(dist)
    return _mean(dist)


def proximity(dist: Array, radius: float = 0.3) -> Array:
    """Proximity percentile (000 Sec. VI): % of the samples within ``radius`` m of the
    reference, (..., K) -> (...); NaN without samples."""
    if dist.shape[-1] == 0:
        return math.nan if dist.ndim == 1 else _full_nan(dist)
    inside = dist <= radius
    return 100.0 * (inside.double().mean(dim=-1) if _is_torch(dist) else inside.mean(axis=-1))


def count_hits(in_collision: Tensor) -> Tensor:
    """Collisions = rising edges of the in-collision flag ``(..., K)`` -> ``(...)`` int64."""
    c = in_collision.bool()
    prev = torch.cat((torch.zeros_like(c[..., :1]), c[..., :-1]), dim=-1)
    return (c & ~prev).sum(dim=-1)


def speeds(vel: Array) -> Array:
    """|v| m/s of sampled velocities ``(..., 3)``."""
    return _norm(vel) if _is_torch(vel) else _norm(np.asarray(vel, dtype=np.float64))


def first_entry_time(t: Array, pos: Array, goal: Array, radius: float) -> float:
    """First sample time (s) of a track ``t (K,)``, ``pos (K, 3)`` within ``radius`` m of the
    goal; NaN if never."""
    t, pos = np.asarray(t, dtype=np.float64), np.asarray(pos, dtype=np.float64)
    inside = np.linalg.norm(pos - np.asarray(goal, dtype=np.float64), axis=1) <= radius
    return float(t[np.argmax(inside)]) if inside.any() else math.nan


def _full_nan(dist: Array) -> Array:
    if _is_torch(dist):
        return torch.full(dist.shape[:-1], math.nan, dtype=torch.float64)
    return np.full(dist.shape[:-1], math.nan)


__all__ = [
    "count_hits",
    "first_entry_time",
    "path_distance",
    "path_length",
    "proximity",
    "segment_distance",
    "speeds",
    "tracking_error",
]
