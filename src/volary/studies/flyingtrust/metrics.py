"""Per-trial metrics of the benchmark's rows from a recorded track (numpy, float64), composed
from the one metric set in :mod:`volary.sim.metrics`.

A track is the vehicle's samples from the start waypoint (t = 0) to the end of the trial:
times ``t`` (K,) s, positions ``pos`` (K, 3) m and velocities ``vel`` (K, 3) m/s.

- path length: sum of the sample-to-sample distances (m);
- mean speed: path length / flight time; max speed: largest sampled |v| (m/s);
- collisions per metre: collision events / path length (FLYINGTRUST Sec. IV counts a trial's
  first collision and ends it);
- tracking error: mean over samples of the distance to the nearest point of the reference path
  (SOUS VIDE, paper 000 Sec. VI, "trajectory tracking error": the l2 distance of the drone's
  position to the nearest point of the desired trajectory); here the reference path is
  FLYINGTRUST's straight start-goal segment (004 Sec. IV-B);
- proximity: share (%) of samples within r = 0.3 m of the reference path (SOUS VIDE Sec. VI,
  "proximity percentile");
- final distance: |p_end - goal| (m).
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from volary.errors import ConfigError
from volary.sim import metrics
from volary.sim.metrics import first_entry_time, segment_distance, speeds


def _track(t: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t, pos = np.asarray(t, dtype=np.float64), np.asarray(pos, dtype=np.float64)
    if t.ndim != 1 or pos.shape != (t.shape[0], 3):
        raise ConfigError(f"track: expected t (K,) and pos (K, 3), got {t.shape} and {pos.shape}")
    return t, pos


def path_length(pos: np.ndarray) -> float:
    """Sum of |p_{k+1} - p_k| (m) over a (K, 3) track; 0 for fewer than two samples."""
    return float(metrics.path_length(np.asarray(pos, dtype=np.float64)))


def tracking_error(pos: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    """Mean distance (m) of the samples to the reference segment a-b (SOUS VIDE Sec. VI)."""
    return float(metrics.tracking_error(segment_distance(pos, a, b)))


def proximity(pos: np.ndarray, a: np.ndarray, b: np.ndarray, radius: float = 0.3) -> float:
    """Share (%) of samples within ``radius`` m of the reference segment (SOUS VIDE Sec. VI)."""
    return float(metrics.proximity(segment_distance(pos, a, b), radius))


def track_json(t: np.ndarray, pos: np.ndarray, every: int = 1) -> str:
    """Compact JSON ``[[t, x, y, z], ...]`` of every ``every``-th sample and the last one,
    rounded to ms and mm (for the report's failure plots)."""
    t, pos = _track(t, pos)
    if len(t) == 0:
        return "[]"
    idx = np.arange(0, len(t), max(1, int(every)))
    if idx[-1] != len(t) - 1:
        idx = np.append(idx, len(t) - 1)
    rows = [[round(float(t[i]), 3), *(round(float(v), 3) for v in pos[i])] for i in idx]
    return json.dumps(rows, separators=(",", ":"))


def trial_metrics(
    t: np.ndarray,
    pos: np.ndarray,
    vel: np.ndarray,
    *,
    start: np.ndarray,
    goal: np.ndarray,
    collisions: int = 0,
    proximity_radius: float = 0.3,
) -> dict[str, Any]:
    """Every per-trial metric of a track from the start waypoint to the end of the trial
    (field names of :class:`volary.studies.flyingtrust.schema.TrialResult`)."""
    t, pos = _track(t, pos)
    if len(t) == 0:
        raise ConfigError("track: expected at least one sample")
    length = path_length(pos)
    flight = float(t[-1] - t[0]) if len(t) else 0.0
    sp = speeds(vel)
    return {
        "flight_time": flight,
        "path_length": length,
        "mean_speed": length / flight if flight > 0 else 0.0,
        "max_speed": float(sp.max()) if len(sp) else math.nan,
        "collisions": int(collisions),
        "collisions_per_m": collisions / length
        if length > 1e-9
        else (0.0 if not collisions else math.nan),
        "tracking_error": tracking_error(pos, start, goal),
        "proximity": proximity(pos, start, goal, proximity_radius),
        "final_distance": float(np.linalg.norm(pos[-1] - np.asarray(goal, dtype=np.float64))),
    }


__all__ = [
    "first_entry_time",
    "path_length",
    "proximity",
    "segment_distance",
    "speeds",
    "track_json",
    "tracking_error",
    "trial_metrics",
]
