"""Unit Hamilton quaternions stored [w, x, y, z], body-to-world (DESIGN.md, Conventions).

Every function takes tensors with arbitrary leading dims ``(..., 4)`` / ``(..., 3)``.
The only place the [x, y, z, w] order appears is :func:`wxyz_to_xyzw` / :func:`xyzw_to_wxyz`,
the I/O-boundary helpers.
"""

from __future__ import annotations

import torch
from torch import Tensor


def quat_identity(*batch: int, device=None, dtype=torch.float32) -> Tensor:
    """Identity rotation, shape ``(*batch, 4)``."""
    q = torch.zeros(*batch, 4, device=device, dtype=dtype)
    q.select(-1, 0).fill_(1.0)
    return q


def quat_mul(p: Tensor, q: Tensor) -> Tensor:
    """Hamilton product p (x) q."""
    pw, px, py, pz = p.unbind(-1)
    qw, qx, qy, qz = q.unbind(-1)
    return torch.stack(
        (
            pw * qw - px * qx - py * qy - pz * qz,
            pw * qx + px * qw + py * qz - pz * qy,
            pw * qy - px * qz + py * qw + pz * qx,
            pw * qz + px * qy - py * qx + pz * qw,
        ),
        dim=-1,
    )


def quat_conj(q: Tensor) -> Tensor:
    """Conjugate (the inverse of a unit quaternion)."""
    return torch.cat((q[..., :1], -q[..., 1:]), -1)  # no constant tensor: no host copy on a GPU


def quat_normalize(q: Tensor, eps: float = 1e-12) -> Tensor:
    """Project onto the unit sphere."""
    return q / q.norm(dim=-1, keepdim=True).clamp_min(eps)


def quat_rotate(q: Tensor, v: Tensor) -> Tensor:
    """Rotate body vector v into the world: R(q) v, via v + 2w(u x v) + 2u x (u x v)."""
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * torch.linalg.cross(u, v, dim=-1)
    return v + w * t + torch.linalg.cross(u, t, dim=-1)


def quat_rotate_inverse(q: Tensor, v: Tensor) -> Tensor:
    """Rotate world vector v into the body: R(q)^T v."""
    return quat_rotate(quat_conj(q), v)


# R's entries (row-major) as 1 - 2 (q_a q_b + s q_c q_d) on the diagonal, 2 (q_a q_b + s q_c q_d)
# off it: (a, b, s) with a, b indices into the flattened outer product q q^T of [w, x, y, z]
_ROTMAT_TERMS = ((10, 15, 1.0), (6, 3, -1.0), (7, 2, 1.0), (6, 3, 1.0), (5, 15, 1.0),
                 (11, 1, -1.0), (7, 2, -1.0), (11, 1, 1.0), (5, 10, 1.0))  # fmt: skip
_ROTMAT_CONSTS: dict[tuple[torch.device, torch.dtype], tuple[Tensor, ...]] = {}


def _rotmat_consts(q: Tensor) -> tuple[Tensor, ...]:
    key = (q.device, q.dtype)
    if key not in _ROTMAT_CONSTS:
        a, b, s = zip(*_ROTMAT_TERMS, strict=True)
        _ROTMAT_CONSTS[key] = (
            torch.tensor(a, device=q.device),
            torch.tensor(b, device=q.device),
            torch.tensor(s, dtype=q.dtype, device=q.device),
            torch.tensor([k in (0, 4, 8) for k in range(9)], device=q.device),
        )
    return _ROTMAT_CONSTS[key]


def quat_to_rotmat(q: Tensor) -> Tensor:
    """Rotation matrix R (body-to-world), shape ``(..., 3, 3)``: the textbook entries (e.g.
    R_00 = 1 - 2 (y^2 + z^2), R_01 = 2 (x y - w z)) gathered from q q^T in 8 tensor ops instead
    of 40 (3x faster at small batch, where the controllers run); each entry is computed by the
    same floating-point operations, so the result is bit for bit the term-by-term one
    (tests/test_quaternion.py)."""
    a, b, s, diag = _rotmat_consts(q)
    qq = (q[..., :, None] * q[..., None, :]).flatten(-2)
    t = 2 * (qq.index_select(-1, a) + qq.index_select(-1, b) * s)
    return torch.where(diag, 1 - t, t).reshape(*q.shape[:-1], 3, 3)


def quat_from_rotmat(r: Tensor) -> Tensor:
    """Quaternion [w, x, y, z] with w >= 0 from a rotation matrix (Shepperd's method, batched)."""
    m = r
    tr = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
    cands = torch.stack(
        (
            torch.stack(
                (
                    1 + tr,
                    m[..., 2, 1] - m[..., 1, 2],
                    m[..., 0, 2] - m[..., 2, 0],
                    m[..., 1, 0] - m[..., 0, 1],
                ),
                -1,
            ),
            torch.stack(
                (
                    m[..., 2, 1] - m[..., 1, 2],
                    1 + 2 * m[..., 0, 0] - tr,
                    m[..., 0, 1] + m[..., 1, 0],
                    m[..., 0, 2] + m[..., 2, 0],
                ),
                -1,
            ),
            torch.stack(
                (
                    m[..., 0, 2] - m[..., 2, 0],
                    m[..., 0, 1] + m[..., 1, 0],
                    1 + 2 * m[..., 1, 1] - tr,
                    m[..., 1, 2] + m[..., 2, 1],
                ),
                -1,
            ),
            torch.stack(
                (
                    m[..., 1, 0] - m[..., 0, 1],
                    m[..., 0, 2] + m[..., 2, 0],
                    m[..., 1, 2] + m[..., 2, 1],
                    1 + 2 * m[..., 2, 2] - tr,
                ),
                -1,
            ),
        ),
        dim=-2,
    )  # (..., 4 candidates, 4)
    diag = torch.stack((tr, m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]), -1)
    best = diag.argmax(-1, keepdim=True)[..., None].expand(*diag.shape[:-1], 1, 4)
    q = quat_normalize(torch.gather(cands, -2, best).squeeze(-2))
    return torch.where(q[..., :1] < 0, -q, q)


def quat_from_axis_angle(axis: Tensor, angle: Tensor) -> Tensor:
    """Rotation of ``angle`` rad about unit ``axis`` (..., 3)."""
    half = 0.5 * angle[..., None]
    return torch.cat((torch.cos(half), torch.sin(half) * axis), dim=-1)


def quat_from_euler(roll: Tensor, pitch: Tensor, yaw: Tensor) -> Tensor:
    """Z-Y-X (yaw, pitch, roll) intrinsic Euler angles in rad to a quaternion: R = Rz Ry Rx."""
    cr, sr = torch.cos(roll / 2), torch.sin(roll / 2)
    cp, sp = torch.cos(pitch / 2), torch.sin(pitch / 2)
    cy, sy = torch.cos(yaw / 2), torch.sin(yaw / 2)
    return torch.stack(
        (
            cr * cp * cy + sr * sp * sy,
            sr * cp * cy - cr * sp * sy,
            cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy,
        ),
        dim=-1,
    )


def quat_to_euler(q: Tensor) -> Tensor:
    """Quaternion to Z-Y-X Euler angles [roll, pitch, yaw] in rad, shape (..., 3)."""
    w, x, y, z = q.unbind(-1)
    roll = torch.atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = torch.asin((2 * (w * y - z * x)).clamp(-1.0, 1.0))
    yaw = torch.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return torch.stack((roll, pitch, yaw), dim=-1)


def quat_integrate(q: Tensor, omega_body: Tensor, dt: float | Tensor) -> Tensor:
    """Exact integration of dq/dt = 0.5 q (x) [0, W] for constant body rate W over dt."""
    angle = omega_body.norm(dim=-1, keepdim=True) * dt
    half = 0.5 * angle
    # sin(h)/|W| written stably: dt/2 * sinc(h/pi)
    scale = 0.5 * dt * torch.special.sinc(half / torch.pi)
    dq = torch.cat((torch.cos(half), scale * omega_body), dim=-1)
    return quat_mul(q, dq)


def hat(v: Tensor) -> Tensor:
    """Skew-symmetric matrix of v, so that hat(a) b = a x b. Shape (..., 3, 3)."""
    x, y, z = v.unbind(-1)
    o = torch.zeros_like(x)
    return torch.stack((o, -z, y, z, o, -x, -y, x, o), dim=-1).reshape(*v.shape[:-1], 3, 3)


def vee(m: Tensor) -> Tensor:
    """Inverse of :func:`hat` for a skew-symmetric (..., 3, 3) matrix."""
    return torch.stack((m[..., 2, 1], m[..., 0, 2], m[..., 1, 0]), dim=-1)


def wxyz_to_xyzw(q: Tensor) -> Tensor:
    """I/O boundary: volary's [w, x, y, z] to the [x, y, z, w] order of SciPy, ROS, gsplat."""
    return torch.cat((q[..., 1:], q[..., :1]), dim=-1)


def xyzw_to_wxyz(q: Tensor) -> Tensor:
    """I/O boundary: [x, y, z, w] (SciPy, ROS, gsplat) to volary's [w, x, y, z]."""
    return torch.cat((q[..., 3:], q[..., :3]), dim=-1)
