"""Geometric tracking control on SE(3), one function per equation, any leading batch dims.

Lee, Leok & McClamroch (2010/2011) as used by Aerial Gym (paper 003 Sec. III-C, EQUATIONS.md),
with the trajectory feed-forward of Mellinger & Kumar (ICRA 2011), the controller the
BoundaryPredictor paper (002 Sec. II-B) flies its min-snap references with.
Rotation matrices R map body to world; e3 = [0, 0, 1]; gravity is -9.81 e3.
"""

from __future__ import annotations

import torch
from torch import Tensor

from volary.dynamics.models import GRAVITY
from volary.math.quaternion import vee


def _bmv(m: Tensor, v: Tensor) -> Tensor:
    """Batched matrix-vector product (..., 3, 3) x (..., 3)."""
    return (m * v[..., None, :]).sum(-1)  # not ``@``: compilers fuse this, not a bmm


def mtm(a: Tensor, b: Tensor) -> Tensor:
    """A^T B for batched 3x3 matrices (elementwise products summed: fusable, unlike a bmm)."""
    return (a[..., :, :, None] * b[..., :, None, :]).sum(-3)


def desired_force(
    mass: Tensor,
    e_x: Tensor,
    e_v: Tensor,
    acc_ff: Tensor,
    k_x: Tensor,
    k_v: Tensor,
) -> Tensor:
    """F = -k_x e_x - k_v e_v + m g e3 + m a_d (N, world); Aerial Gym III-C, Lee eq. 12."""
    g = torch.zeros_like(acc_ff)
    g[..., 2] = GRAVITY
    return -k_x * e_x - k_v * e_v + mass[..., None] * (g + acc_ff)


def limit_force(F: Tensor, mass: Tensor, max_thrust: Tensor, max_tilt: Tensor) -> Tensor:
    """Saturate a desired world force: vertical part in [0.1 m g, T_max], horizontal part so the
    tilt stays below ``max_tilt`` and the total below T_max (altitude keeps priority)."""
    fz = torch.minimum(torch.maximum(F[..., 2], 0.1 * mass * GRAVITY), max_thrust)
    room = (max_thrust * max_thrust - fz * fz).clamp_min(0.0).sqrt()
    lim = torch.minimum(fz * torch.tan(max_tilt), room)
    fxy = F[..., :2]
    n = fxy.norm(dim=-1)
    scale = torch.where(n > lim, lim / n.clamp_min(1e-9), torch.ones_like(n))
    return torch.cat((fxy * scale[..., None], fz[..., None]), dim=-1)


def rotation_from_thrust_yaw(b3: Tensor, yaw: Tensor) -> Tensor:
    """R_d = [b1, b2, b3] with b3 the thrust direction and b1 fixed by the yaw through
    chi = [cos yaw, sin yaw, 0]: b2 = b3 x chi / |b3 x chi|, b1 = b2 x b3 (Aerial Gym III-C)."""
    b3 = b3 / b3.norm(dim=-1, keepdim=True).clamp_min(1e-9)
    chi = torch.stack((torch.cos(yaw), torch.sin(yaw), torch.zeros_like(yaw)), dim=-1)
    b2 = torch.linalg.cross(b3, chi, dim=-1)
    b2 = b2 / b2.norm(dim=-1, keepdim=True).clamp_min(1e-9)
    b1 = torch.linalg.cross(b2, b3, dim=-1)
    return torch.stack((b1, b2, b3), dim=-1)


def collective_thrust(F: Tensor, R: Tensor, max_thrust: Tensor) -> Tensor:
    """f = F . R e3, clamped to [0, T_max] (N); Lee eq. 15."""
    return (F * R[..., :, 2]).sum(-1).clamp_min(0.0).minimum(max_thrust)


def attitude_error(R: Tensor, R_d: Tensor) -> Tensor:
    """e_R = 0.5 vee(R_d^T R - R^T R_d) (body frame); Aerial Gym III-C, Lee eq. 10."""
    m = mtm(R_d, R)
    return 0.5 * vee(m - m.transpose(-1, -2))


def rate_error(R: Tensor, R_d: Tensor, omega: Tensor, omega_d: Tensor) -> Tensor:
    """e_W = W - R^T R_d W_d (rad/s, body frame); Lee eq. 11."""
    return omega - _bmv(mtm(R, R_d), omega_d)


def gyroscopic_moment(inertia: Tensor, omega: Tensor) -> Tensor:
    """W x J W (N m), the term that cancels the rigid body's gyroscopic coupling."""
    return torch.linalg.cross(omega, _bmv(inertia, omega), dim=-1)


def lee_moment(
    inertia: Tensor,
    omega: Tensor,
    e_R: Tensor,
    e_W: Tensor,
    k_R: Tensor,
    k_W: Tensor,
) -> Tensor:
    """M = -k_R e_R - k_W e_W + W x J W (N m, body); Aerial Gym III-C."""
    return -k_R * e_R - k_W * e_W + gyroscopic_moment(inertia, omega)


def flat_body_rates(
    R_d: Tensor, thrust: Tensor, mass: Tensor, jerk: Tensor, yaw_rate: Tensor
) -> Tensor:
    """Desired body rates from differential flatness (Mellinger & Kumar 2011, Sec. III):
    h_w = m/u1 (j - (z_B . j) z_B), p = -h_w . y_B, q = h_w . x_B, r = yaw_rate z_W . z_B."""
    x_b, y_b, z_b = R_d[..., :, 0], R_d[..., :, 1], R_d[..., :, 2]
    j_perp = jerk - (z_b * jerk).sum(-1, keepdim=True) * z_b
    h_w = (mass / thrust.clamp_min(1e-6))[..., None] * j_perp
    p = -(h_w * y_b).sum(-1)
    q = (h_w * x_b).sum(-1)
    r = yaw_rate * z_b[..., 2]
    return torch.stack((p, q, r), dim=-1)
