"""The FlightGoggles acro (body-rate) loop, paper 001 Sec. IV-F and EQUATIONS.md.

Measured rates pass a second-order low-pass filter d2y/dt2 = k_s (u - y) - k_d dy/dt, a PID on
the rate error gives a commanded angular acceleration, and the moment J alpha + W x J W goes to
allocation with the collective thrust. The filter is discretized with backward (implicit) Euler,
as FlightGoggles does: A-stable, so any control dt is safe (forward Euler of the 30 Hz filter
goes unstable for dt > ~7.5 ms, e.g. at 100 Hz control).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from volary.control.geometric import gyroscopic_moment


@dataclass(frozen=True)
class RateLoopState:
    """Filter and integrator state of the rate loop of N envs."""

    rate: Tensor  # (N, 3) rad/s, filtered body rate y
    rate_dot: Tensor  # (N, 3) rad/s^2, its derivative dy/dt
    integral: Tensor  # (N, 3) rad, integral of the rate error
    fresh: Tensor  # (N,) bool, set by reset: the next update starts the filter at the measurement

    @staticmethod
    def create(n_envs: int, *, device=None, dtype=torch.float32) -> RateLoopState:
        z = torch.zeros(n_envs, 3, device=device, dtype=dtype)
        fresh = torch.ones(n_envs, dtype=torch.bool, device=device)
        return RateLoopState(rate=z, rate_dot=z.clone(), integral=z.clone(), fresh=fresh)

    def reset(self, mask: Tensor) -> RateLoopState:
        """Zero the integrator and restart the filter of the envs where ``mask`` (N,) is True."""
        m = mask[:, None]
        zero = torch.zeros_like(self.rate)
        return RateLoopState(
            rate=torch.where(m, zero, self.rate),
            rate_dot=torch.where(m, zero, self.rate_dot),
            integral=torch.where(m, zero, self.integral),
            fresh=self.fresh | mask,
        )


def lowpass_step(
    y: Tensor,
    y_dot: Tensor,
    u: Tensor,
    k_s: Tensor,
    k_d: Tensor,
    dt: float,
) -> tuple[Tensor, Tensor]:
    """One backward-Euler step of d2y/dt2 = k_s (u - y) - k_d dy/dt (FlightGoggles IV-F1)."""
    det = 1.0 + k_d * dt + k_s * dt * dt
    y_dot_new = (y_dot + k_s * dt * (u - y)) / det
    return y + dt * y_dot_new, y_dot_new


def rate_pid(
    err: Tensor,
    integral: Tensor,
    rate_dot: Tensor,
    kp: Tensor,
    ki: Tensor,
    kd: Tensor,
    bound: Tensor,
    dt: float,
) -> tuple[Tensor, Tensor]:
    """alpha = kp e + ki int(e) - kd dy/dt (rad/s^2), integral clipped (FlightGoggles IV-F2).

    Returns (alpha, new integral)."""
    integral = torch.minimum(torch.maximum(integral + dt * err, -bound), bound)
    return kp * err + ki * integral - kd * rate_dot, integral


def rate_moment(inertia: Tensor, omega: Tensor, alpha: Tensor) -> Tensor:
    """Body moment m = J alpha + W x J W (N m) realising the angular acceleration alpha."""
    return (inertia * alpha[..., None, :]).sum(-1) + gyroscopic_moment(inertia, omega)
