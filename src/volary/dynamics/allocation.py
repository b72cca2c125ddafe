"""Control allocation: wrench -> rotor thrusts -> rotor speeds (Aerial Gym eq. 6-7).

U_ref = B^+ W_ref with B the effectiveness matrix restricted to the axes the airframe controls
(all six for fully actuated frames, thrust + three moments otherwise). Saturation keeps the
collective thrust and roll/pitch moments first and gives up yaw first: the yaw part of the
solution is scaled down until every rotor is inside its limits, then the rest is clipped.
"""

from __future__ import annotations

import torch
from torch import Tensor

from volary.dynamics.params import VehicleParams


def allocate_thrusts(params: VehicleParams, wrench: Tensor) -> Tensor:
    """Per-rotor thrusts (N, R) in N for a desired body wrench (N, 6) [f; m], with saturation."""
    yaw_only = torch.zeros_like(wrench)
    yaw_only[..., 5] = wrench[..., 5]
    t_yaw = (params.alloc_pinv @ yaw_only[..., None])[..., 0]
    t_base = (params.alloc_pinv @ (wrench - yaw_only)[..., None])[..., 0]
    lo, hi = params.t_min, params.t_max
    t_base = torch.minimum(torch.maximum(t_base, lo), hi)
    scale = _largest_feasible_scale(t_base, t_yaw, lo, hi)
    return torch.minimum(torch.maximum(t_base + scale[..., None] * t_yaw, lo), hi)


def _largest_feasible_scale(base: Tensor, step: Tensor, lo: Tensor, hi: Tensor) -> Tensor:
    """Largest s in [0, 1] with lo <= base + s * step <= hi for every rotor, shape (N,)."""
    room = torch.where(step > 0, hi - base, base - lo)
    ratio = torch.where(
        step.abs() > 1e-12, room / step.abs().clamp_min(1e-12), torch.ones_like(step)
    )
    return ratio.clamp(0.0, 1.0).amin(dim=-1)


def thrusts_to_speeds(params: VehicleParams, thrust: Tensor) -> Tensor:
    """Rotor speeds (rad/s) giving thrusts T = k_f w|w|, clamped to each rotor's speed range."""
    w = torch.sign(thrust) * torch.sqrt(thrust.abs() / params.k_f.clamp_min(1e-30))
    w = torch.where(params.k_f > 0, w, torch.zeros_like(w))
    return torch.minimum(torch.maximum(w, params.w_min), params.w_max)


def allocate(params: VehicleParams, wrench: Tensor) -> Tensor:
    """Rotor speed commands (N, R) in rad/s for a desired body wrench (N, 6)."""
    return thrusts_to_speeds(params, allocate_thrusts(params, wrench))


def hover_speeds(params: VehicleParams) -> Tensor:
    """Rotor speeds (N, R) that hold the vehicle level in a hover (weight along body z)."""
    wrench = torch.zeros(params.n_envs, 6, dtype=params.dtype, device=params.device)
    wrench[..., 2] = params.mass * 9.81
    return allocate(params, wrench)
