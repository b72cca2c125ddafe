"""Tracking acceptance: every catalogue quad flies a figure-eight with the Mellinger mode.

Reference (:data:`TRACKING_REFERENCE`, a :class:`volary.control.references.FigureEight`): the
1:2 Lissajous figure-eight x = (L/2) sin(theta), y = (L/4) sin(2 theta), z = h, yaw = 0,
theta = w t, L = ``size``, flown at a constant phase rate w chosen so one lap of arc length
``path_length`` takes ``period`` = path_length / v_avg seconds (v_avg = ``speed``, the average
speed). Position through snap are analytic.

Feed-forward (:func:`volary.planning.flatness.feedforward_setpoint`, re-exported here): the
``mellinger`` setpoint [p, v, a, j, yaw, yaw rate] with the acceleration and jerk replaced by
those of the *thrust vector* the flatness model needs (``volary.planning.flatness.drag_terms``:
t = a + g e3 + e_h v / m, Faessler, Franchi & Scaramuzza, RA-L 2018, Sec. IV), so the body drag
the Mellinger law does not model is fed forward; ``drag=False`` gives the plain trajectory
derivatives.

Protocol (:func:`track_figure_eight`): all platforms in one mixed batch, deterministic physics
(960 Hz RK4, the numba kernel on CPU; 240 Hz control), each env reset onto the reference at
theta = 0 (the crossing point, where the reference acceleration is zero, so a level vehicle at
the reference velocity is on the trajectory up to the jerk-driven body rates); the first
``settle_laps`` laps are a lead-in, the RMS and peak position errors are taken over the next lap,
sampled after every control step against the reference at the state's time. The flight is
two :func:`volary.sim.rollout` calls on one :class:`volary.sim.World` (lead-in, measured lap),
ended vehicles (ground crash, divergence) flagged ``crashed`` but flown to the end.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from volary.control.references import FigureEight
from volary.errors import ConfigError
from volary.planning.flatness import feedforward_setpoint

TRACKING_REFERENCE = FigureEight(size=3.0, speed=2.0, height=1.5)
"""The acceptance reference: 3 m x 1.5 m at 1.5 m height, 2 m/s mean speed, yaw 0."""


@dataclass(frozen=True)
class TrackingResult:
    """Position errors of each env over the measured lap."""

    platforms: tuple[str, ...]  # one name per env
    rms: Tensor  # (N,) m, RMS position error over the measured lap
    peak: Tensor  # (N,) m, largest position error over the measured lap
    lap_time: float  # s
    settle_time: float  # s, lead-in before the measured lap
    crashed: Tensor  # (N,) bool, hit the ground or diverged during the flight


def track_figure_eight(
    platforms: Sequence[str],
    *,
    ref: FigureEight | None = None,
    settle_laps: float = 1.0,
    drag_feedforward: bool = True,
    device: str = "cpu",
    gains: object = None,
) -> TrackingResult:
    """Fly ``ref`` (default :data:`TRACKING_REFERENCE`) with every platform in one batch (module
    docstring) and measure the errors."""
    from volary.sim import World, rollout  # layer 4, imported on use
    from volary.sim.terms import crashed, diverged

    f = ref if ref is not None else TRACKING_REFERENCE
    if not (math.isfinite(settle_laps) and settle_laps >= 0):
        raise ConfigError(f"settle_laps: expected a lap count >= 0, got {settle_laps}")
    world = World(
        list(platforms),
        control="mellinger",
        stochastic=False,
        device=device,
        gains=gains,
        compile="numba" if device == "cpu" else False,
    )
    n = world.b
    start = f.evaluate(torch.zeros(n, dtype=torch.float64))
    world.reset(pos=start.pos, vel=start.vel)
    hz = world.sim.config.control_hz
    p64 = world.params.to(dtype=torch.float64)
    k_settle, k_lap = round(settle_laps * f.period * hz), round(f.period * hz)

    def reference(first: int) -> Callable[[Any, int], Tensor]:
        """Feed-forward setpoints at t = (first + k) / hz for step k of a rollout."""

        def act(world: Any, k: int) -> Tensor:
            t = torch.full((n,), (first + k) / hz, dtype=torch.float64, device=device)
            return feedforward_setpoint(f.evaluate(t), p64, drag=drag_feedforward)

        return act

    def error(world: Any) -> Tensor:
        want = f.evaluate(world.state.time.double()).pos
        return (world.state.pos.double() - want).norm(dim=-1)

    ends = (crashed, diverged)  # recorded as crashed; every vehicle flies the whole time
    rollout(world, reference(0), ends, steps=k_settle, stop_when_done=False)
    lap = rollout(world, reference(k_settle), ends, steps=k_lap, begin=False,
                  stop_when_done=False, record={"error": error})  # fmt: skip
    sq = torch.zeros(n, dtype=torch.float64, device=device)
    peak = torch.zeros_like(sq)
    for err in lap.records["error"]:  # step by step, as the errors came (same float sums)
        sq, peak = sq + err * err, torch.maximum(peak, err)
    return TrackingResult(
        platforms=tuple(platforms),
        rms=(sq / k_lap).sqrt(),
        peak=peak,
        lap_time=f.period,
        settle_time=k_settle / hz,
        crashed=lap.ended,
    )


__all__ = [
    "TRACKING_REFERENCE",
    "FigureEight",
    "TrackingResult",
    "feedforward_setpoint",
    "track_figure_eight",
]
