"""Piecewise-polynomial flat-output trajectories [x, y, z, yaw] and their batched evaluation.

A trajectory of M segments stores, per segment i and flat axis a, the coefficients c_k of
p(tau) = sum_k c_k tau^k in *local* time tau in [0, T_i] (ascending powers, degree D - 1 = 7
for min-snap). Evaluation is torch only, so a trajectory lives on any device and any dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from volary.errors import ConfigError

N_AXES = 4  # flat outputs: x, y, z (m) and yaw (rad)
MAX_ORDER = 4  # evaluate position through snap


@dataclass(frozen=True)
class FlatOutputs:
    """Flat outputs and their derivatives at sample times (world frame z-up, SI units)."""

    pos: Tensor  # (..., 3) m
    vel: Tensor  # (..., 3) m/s
    acc: Tensor  # (..., 3) m/s^2
    jerk: Tensor  # (..., 3) m/s^3
    snap: Tensor  # (..., 3) m/s^4
    yaw: Tensor  # (...,) rad
    yaw_rate: Tensor  # (...,) rad/s
    yaw_acc: Tensor  # (...,) rad/s^2

    def setpoint(self) -> Tensor:
        """The ``mellinger`` control setpoint (..., 14): [p, v, a, jerk, yaw, yaw_rate]."""
        return torch.cat(
            (
                self.pos,
                self.vel,
                self.acc,
                self.jerk,
                self.yaw[..., None],
                self.yaw_rate[..., None],
            ),
            dim=-1,
        )


def falling_factorial(k: Tensor, r: int) -> Tensor:
    """k (k-1) ... (k-r+1): the factor d^r/dtau^r tau^k = falling(k, r) tau^(k-r)."""
    out = torch.ones_like(k)
    for i in range(r):
        out = out * (k - i)
    return out


def derivative_basis(tau: Tensor, n_coeffs: int, order: int) -> Tensor:
    """(..., D) row b with d^order p / dtau^order = b . c for p(tau) = sum_k c_k tau^k."""
    k = torch.arange(n_coeffs, device=tau.device, dtype=tau.dtype)
    powers = tau[..., None] ** (k - order).clamp_min(0)
    return torch.where(k >= order, falling_factorial(k, order) * powers, torch.zeros_like(powers))


@dataclass(frozen=True)
class PolyTrajectory:
    """Piecewise polynomials in [x, y, z, yaw], batched over independent trajectories."""

    coeffs: Tensor  # (..., M, 4, D) ascending powers of local time, per segment and flat axis
    durations: Tensor  # (..., M) s, segment durations T_i > 0

    def __post_init__(self) -> None:
        c, d = self.coeffs, self.durations
        if c.dim() < 3 or c.shape[-2] != N_AXES:
            raise ConfigError(f"coeffs: expected shape (..., M, 4, D), got {tuple(c.shape)}")
        if d.shape != c.shape[:-2]:
            raise ConfigError(
                f"durations: expected shape {tuple(c.shape[:-2])}, got {tuple(d.shape)}"
            )

    @property
    def n_segments(self) -> int:
        return int(self.durations.shape[-1])

    @property
    def batch_shape(self) -> torch.Size:
        return self.durations.shape[:-1]

    @property
    def duration(self) -> Tensor:
        """(...,) total duration in s."""
        return self.durations.sum(-1)

    @property
    def knot_times(self) -> Tensor:
        """(..., M + 1) times of the waypoints (segment boundaries) in s, starting at 0."""
        z = torch.zeros_like(self.durations[..., :1])
        return torch.cat((z, self.durations.cumsum(-1)), dim=-1)

    def to(
        self, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> PolyTrajectory:
        return PolyTrajectory(
            self.coeffs.to(device=device, dtype=dtype),
            self.durations.to(device=device, dtype=dtype),
        )

    def index(self, idx: object) -> PolyTrajectory:
        """A sub-batch of trajectories (indexing the leading batch dims)."""
        return PolyTrajectory(self.coeffs[idx], self.durations[idx])  # type: ignore[index]

    def scaled(self, alpha: Tensor | float) -> PolyTrajectory:
        """The same path flown ``alpha`` times slower: T_i -> alpha T_i, c_k -> c_k / alpha^k.

        Derivative r scales by alpha^-r (velocity 1/alpha, acceleration 1/alpha^2, ...).
        ``alpha`` is a float or a (...,) tensor, one factor per trajectory.
        """
        a = torch.as_tensor(alpha, dtype=self.durations.dtype, device=self.durations.device)
        k = torch.arange(self.coeffs.shape[-1], device=a.device, dtype=a.dtype)
        factor = a[..., None, None, None] ** (-k)
        return PolyTrajectory(self.coeffs * factor, self.durations * a[..., None])

    def derivative(self, t: Tensor | float, order: int) -> Tensor:
        """d^order/dt^order of all four flat axes at times ``t``: (..., K, 4).

        ``t`` is (K,) (shared), or (..., K) broadcasting with the batch. Outside [0, duration]
        the trajectory holds its end pose: the end position and yaw, all derivatives zero.
        """
        if not 0 <= order < self.coeffs.shape[-1]:
            raise ConfigError(f"order: expected 0..{self.coeffs.shape[-1] - 1}, got {order}")
        c, tau, inside = self._locate(t)
        out = (c * derivative_basis(tau, c.shape[-1], order)[..., None, :]).sum(-1)
        return out if order == 0 else out * inside[..., None]

    def evaluate(self, t: Tensor | float) -> FlatOutputs:
        """Position through snap and yaw, yaw rate, yaw acceleration at times ``t``.

        Shapes: ``t`` (K,) or (..., K) -> fields (..., K, 3) and (..., K). Outside
        [0, duration] the end pose is held at rest (see :meth:`derivative`).
        """
        c, tau, inside = self._locate(t)
        d = [
            (c * derivative_basis(tau, c.shape[-1], r)[..., None, :]).sum(-1)
            * (inside[..., None] if r > 0 else 1.0)
            for r in range(MAX_ORDER + 1)
        ]
        return FlatOutputs(
            pos=d[0][..., :3],
            vel=d[1][..., :3],
            acc=d[2][..., :3],
            jerk=d[3][..., :3],
            snap=d[4][..., :3],
            yaw=d[0][..., 3],
            yaw_rate=d[1][..., 3],
            yaw_acc=d[2][..., 3],
        )

    def _locate(self, t: Tensor | float) -> tuple[Tensor, Tensor, Tensor]:
        """Coefficients (..., K, 4, D) of the segment holding each time, the local time, and
        (..., K) 1.0 where t is inside [0, duration] (0.0 outside, where the end is held)."""
        dur = self.durations
        tt = torch.as_tensor(t, dtype=dur.dtype, device=dur.device)
        if tt.dim() == 0:
            tt = tt[None]
        shape = torch.broadcast_shapes(self.batch_shape, tt.shape[:-1])
        tt = tt.expand(*shape, tt.shape[-1])
        dur = dur.expand(*shape, dur.shape[-1])
        starts = dur.cumsum(-1) - dur
        total = dur.sum(-1, keepdim=True)
        inside = ((tt >= 0) & (tt <= total)).to(dur.dtype)
        tt = torch.minimum(tt.clamp_min(0.0), total)
        seg = torch.searchsorted(starts[..., 1:].contiguous(), tt.contiguous(), right=True)
        tau = torch.minimum(tt - starts.gather(-1, seg), dur.gather(-1, seg))
        coeffs = self.coeffs.expand(*shape, *self.coeffs.shape[-3:])
        idx = seg[..., None, None].expand(*seg.shape, *coeffs.shape[-2:])
        return coeffs.gather(-3, idx), tau, inside

    def snap_cost(self) -> Tensor:
        """(..., 4) integral of the squared snap per flat axis, sum over segments (Mellinger &
        Kumar 2011, Sec. IV, the cost of their QP with k_r = 4)."""
        q = snap_cost_matrix(self.durations, self.coeffs.shape[-1])  # (..., M, D, D)
        c = self.coeffs
        return torch.einsum("...mak,...mkl,...mal->...a", c, q, c)


def snap_cost_matrix(durations: Tensor, n_coeffs: int) -> Tensor:
    """Q (..., M, D, D) with int_0^T (p'''')^2 dtau = c^T Q c for ascending coefficients c:
    Q_kl = f_k f_l T^(k+l-7) / (k+l-7) for k, l >= 4, f_k = k(k-1)(k-2)(k-3)."""
    k = torch.arange(n_coeffs, device=durations.device, dtype=durations.dtype)
    f = torch.where(k >= 4, falling_factorial(k, 4), torch.zeros_like(k))
    e = (k[:, None] + k[None, :] - 7).clamp_min(1.0)
    return (f[:, None] * f[None, :] / e) * durations[..., None, None] ** e
