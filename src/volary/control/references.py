"""Analytic reference trajectories as flat outputs, for tracking controllers and the MPC.

A reference is anything with ``evaluate(t) -> FlatOutputs`` (a :class:`PolyTrajectory`, or
:class:`FigureEight` here): times ``t`` of any shape give fields of shape ``t.shape + (3,)``
and ``t.shape`` (world frame z-up, SI units).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from volary.errors import ConfigError
from volary.planning.trajectory import FlatOutputs

_LENGTH_SAMPLES = 20000  # midpoint rule for the lap length (relative error < 1e-8)


@functools.lru_cache(maxsize=64)
def gerono_length(half_width: float) -> float:
    """Length (m) of one lap of x = a sin th, y = (a/2) sin 2th for th in [0, 2 pi)."""
    th = (np.arange(_LENGTH_SAMPLES) + 0.5) * (2.0 * math.pi / _LENGTH_SAMPLES)
    speed = half_width * np.hypot(np.cos(th), np.cos(2.0 * th))
    return float(speed.sum() * 2.0 * math.pi / _LENGTH_SAMPLES)


@dataclass(frozen=True)
class FigureEight:
    """A figure-eight (lemniscate of Gerono) in a horizontal plane, flown at constant phase rate.

    p(t) = c + [a sin(w t), (a/2) sin(2 w t), 0] with a = size / 2, so the eight is ``size`` m
    long (x) and size / 2 m wide (y); w = 2 pi / period, period = path_length / ``speed``, so
    ``speed`` is the *mean* speed along the path (the speed peaks at the crossing, sqrt(2) a w,
    and is lowest at the lobe tips). Yaw is held at ``yaw``. Every derivative is analytic:
    d^n/dt^n a sin(w t) = a w^n sin(w t + n pi / 2).

    Sizes: ``size`` (m) is the extent along x; :attr:`path_length` (m) is the arc length of one
    lap; :attr:`period` (s) is the time of one lap. The one figure-eight of volary: the MPC
    tests and benchmark and the tracking acceptance (``volary.bench.tracking``) all fly it.
    """

    size: float = 3.0  # m, extent along x
    speed: float = 2.0  # m/s, mean speed along the path
    height: float = 1.0  # m, altitude of the plane
    center: tuple[float, float] = (0.0, 0.0)  # m, (x, y) of the crossing point
    yaw: float = 0.0  # rad

    def __post_init__(self) -> None:
        for name in ("size", "speed"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ConfigError(f"{name}: expected a finite value > 0, got {v}")
        if not all(math.isfinite(v) for v in (self.height, self.yaw, *self.center)):
            raise ConfigError("height, center, yaw: expected finite values")

    @property
    def path_length(self) -> float:
        """Arc length of one lap (m)."""
        return gerono_length(self.size / 2.0)

    @property
    def period(self) -> float:
        """Time of one lap (s) at the mean speed: path_length / speed."""
        return self.path_length / self.speed

    @property
    def peak_speed(self) -> float:
        """Speed at the crossing point (m/s), the fastest point of the lap."""
        return math.sqrt(2.0) * self.size / 2.0 * self._omega

    @property
    def _omega(self) -> float:
        return 2.0 * math.pi / self.period

    def evaluate(self, t: Tensor | float) -> FlatOutputs:
        """Flat outputs at times ``t`` (any shape; float64 unless ``t`` is a float tensor)."""
        tt = torch.as_tensor(t)
        if not tt.is_floating_point():
            tt = tt.to(torch.float64)
        w, a = self._omega, self.size / 2.0
        d = [self._axis_derivative(tt, w, a, n) for n in range(5)]
        offset = tt.new_tensor([self.center[0], self.center[1], self.height])
        zeros = torch.zeros_like(tt)
        return FlatOutputs(
            pos=d[0] + offset,
            vel=d[1],
            acc=d[2],
            jerk=d[3],
            snap=d[4],
            yaw=zeros + self.yaw,
            yaw_rate=zeros,
            yaw_acc=zeros,
        )

    __call__ = evaluate

    @staticmethod
    def _axis_derivative(t: Tensor, w: float, a: float, n: int) -> Tensor:
        """(..., 3) n-th time derivative of [a sin(w t), (a/2) sin(2 w t), 0]."""
        shift = n * math.pi / 2.0
        x = a * w**n * torch.sin(w * t + shift)
        y = 0.5 * a * (2.0 * w) ** n * torch.sin(2.0 * w * t + shift)
        return torch.stack((x, y, torch.zeros_like(t)), dim=-1)


def figure_eight(
    size: float = 3.0, speed: float = 2.0, *, height: float = 1.0, yaw: float = 0.0
) -> FigureEight:
    """The figure-eight reference of ``size`` m at mean ``speed`` m/s (see :class:`FigureEight`)."""
    return FigureEight(size=size, speed=speed, height=height, yaw=yaw)


__all__ = ["FigureEight", "figure_eight", "gerono_length"]
