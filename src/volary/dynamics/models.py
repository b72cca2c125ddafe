"""Force, moment and derivative functions of the two vehicle models (one equation each).

Rigid-body model: FlightGoggles Sec. IV (EQUATIONS.md), any rotor geometry.
Thrust-rate model: SOUS VIDE eq. 1 (9-state FiGS model), optional first-order rate lag.
Fields are tuples ``(pos, vel, quat, omega, rotor_speed)`` so the integrators can combine them.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

import volary.dynamics.aero as aero
from volary.dynamics.params import VehicleParams
from volary.math.quaternion import quat_mul, quat_rotate, quat_rotate_inverse

GRAVITY = 9.81  # m/s^2, along -z of the world frame
Fields = tuple[Tensor, Tensor, Tensor, Tensor, Tensor]


def gravity_vector(like: Tensor) -> Tensor:
    """g = [0, 0, -9.81] m/s^2 with the dtype and device of ``like``."""
    g = like.new_zeros(3)
    g.narrow(0, 2, 1).fill_(-GRAVITY)  # a fill, not a copy from the host (no GPU sync)
    return g


def motor_lag(w: Tensor, w_cmd: Tensor, tau_up: Tensor, tau_down: Tensor) -> Tensor:
    """dw/dt = (w_cmd - w) / tau, tau_up when speeding up else tau_down (rad/s^2)."""
    tau = torch.where(w_cmd.abs() > w.abs(), tau_up, tau_down)
    return (w_cmd - w) / tau


def rotor_thrusts(k_f: Tensor, w: Tensor) -> Tensor:
    """Per-rotor thrust T_i = k_f w_i |w_i| (N), shape (N, R)."""
    return k_f * w * w.abs()


def rotor_wrench(params: VehicleParams, w: Tensor) -> Tensor:
    """Body wrench [f; m] (N, N m), shape (N, 6): sum of rotor forces, arm and reaction moments."""
    return (params.alloc @ rotor_thrusts(params.k_f, w)[..., None])[..., 0]


def body_drag(params: VehicleParams, v_rel_body: Tensor) -> Tensor:
    """f_a = -(D_lin v + D_quad |v| v) in body axes (N); FlightGoggles' -c_d ||v|| v isotropic."""
    speed = v_rel_body.norm(dim=-1, keepdim=True)
    return -(params.drag_lin + params.drag_quad * speed) * v_rel_body


def aero_moment(params: VehicleParams, omega: Tensor) -> Tensor:
    """m_a = -||W|| C_a W (N m), FlightGoggles Sec. IV."""
    return -omega.norm(dim=-1, keepdim=True) * params.drag_moment * omega


def euler_rotation(params: VehicleParams, omega: Tensor, moment: Tensor) -> Tensor:
    """J dW/dt = m - W x (J W), solved for dW/dt (rad/s^2)."""
    jw = (params.inertia @ omega[..., None])[..., 0]
    rhs = moment - torch.linalg.cross(omega, jw, dim=-1)
    return (params.inertia_inv @ rhs[..., None])[..., 0]


def quat_derivative(quat: Tensor, omega: Tensor) -> Tensor:
    """dq/dt = 0.5 q (x) [0, W]."""
    return 0.5 * quat_mul(quat, torch.cat((torch.zeros_like(omega[..., :1]), omega), dim=-1))


def rotor_heights(
    params: VehicleParams, pos: Tensor, quat: Tensor, ground: Tensor | float | None
) -> Tensor:
    """(N, R) height of each rotor hub over the surface at ``z = ground`` under it (m; a number
    or one per env, None or -inf: none), clamped to ``[max(rho / 2, H_MIN), H_MAX]`` for the
    ground effect (aero.py A4)."""
    r = params.n_rotors
    if ground is None:
        ground = -math.inf
    g = torch.as_tensor(ground, dtype=pos.dtype, device=pos.device).reshape(-1, 1)
    hub = quat_rotate(quat[:, None, :].expand(-1, r, -1), params.rotor_pos)
    h = pos[:, 2:3] + hub[..., 2] - g
    lo = (0.5 * params.aero[:, 5:6]).clamp_min(aero.H_MIN)
    return torch.minimum(torch.maximum(h, lo), h.new_tensor(aero.H_MAX))


def rotor_aero_wrench(
    params: VehicleParams, w: Tensor, v_body: Tensor, omega: Tensor, height: Tensor
) -> tuple[Tensor, Tensor]:
    """(per-rotor thrust (N, R) N, extra body wrench (N, 6)) of :func:`aero.rotor_aero` (A1-A6)
    on ``(N, R)`` components: the thrust goes through the allocation, the wrench adds on."""
    p, a = params, params.aero[:, None, :]
    out = aero.rotor_aero(
        w,
        rotor_thrusts(p.k_f, w),
        *(v_body[:, None, i] for i in range(3)),
        *(omega[:, None, i] for i in range(3)),
        *(p.rotor_pos[..., i] for i in range(3)),
        *(p.rotor_axis[..., i] for i in range(3)),
        height,
        *(a[..., i] for i in range(6)),
    )
    return out[0], torch.stack(out[1:], dim=-1).sum(dim=-2)


def rigid_body_derivative(
    params: VehicleParams,
    x: Fields,
    w_cmd: Tensor,
    wind: Tensor,
    force_w: Tensor,
    moment_b: Tensor,
    ground: Tensor | float | None = None,
) -> Fields:
    """Time derivative of the rigid-body multirotor with motor lag and drag (FlightGoggles IV).

    ``force_w`` (world) and ``moment_b`` (body) gather external and stochastic disturbances.
    Vehicles with rotor-aerodynamics coefficients (``params.has_aero``) add aero.py's A1-A6,
    the ground effect over the surface at ``z = ground`` (per env or one; None: none).
    """
    pos, vel, quat, omega, w = x
    v_body = quat_rotate_inverse(quat, vel - wind)
    if params.has_aero:
        height = rotor_heights(params, pos, quat, ground)
        thrust, extra = rotor_aero_wrench(params, w, v_body, omega, height)
        wrench = (params.alloc @ thrust[..., None])[..., 0] + extra
    else:
        wrench = rotor_wrench(params, w)
    f_body = wrench[..., :3] + body_drag(params, v_body)
    acc = gravity_vector(vel) + (quat_rotate(quat, f_body) + force_w) / params.mass[..., None]
    moment = wrench[..., 3:] + aero_moment(params, omega) + moment_b
    return (
        vel,
        acc,
        quat_derivative(quat, omega),
        euler_rotation(params, omega, moment),
        motor_lag(w, w_cmd, params.tau_up, params.tau_down),
    )


def thrust_rate_derivative(
    params: VehicleParams,
    x: Fields,
    u: Tensor,
    wind: Tensor,
    force_w: Tensor,
    moment_b: Tensor,
) -> Fields:
    """SOUS VIDE eq. 1: dv/dt = g + (k_th f_th / m) z_B (+ body drag), dq/dt = 0.5 q (x) [0, W].

    ``u = [f_th, W_cmd]`` with f_th in [0, 1] and k_th the airframe's max collective thrust.
    Body rates follow W_cmd through a first-order lag of ``params.rate_tau`` (0: W = W_cmd,
    set by :func:`thrust_rate_apply_rates` before integration). ``moment_b`` is unused: the
    model has no rotational dynamics beyond the rate lag.
    """
    pos, vel, quat, omega, w = x
    thrust = (params.max_thrust * u[..., 0])[..., None]
    f_body = body_drag(params, quat_rotate_inverse(quat, vel - wind))
    f_body = f_body + torch.cat((torch.zeros_like(thrust), torch.zeros_like(thrust), thrust), -1)
    acc = gravity_vector(vel) + (quat_rotate(quat, f_body) + force_w) / params.mass[..., None]
    tau = params.rate_tau[..., None]
    omega_dot = torch.where(
        tau > 0, (u[..., 1:] - omega) / tau.clamp_min(1e-6), torch.zeros_like(omega)
    )
    return vel, acc, quat_derivative(quat, omega), omega_dot, torch.zeros_like(w)


def thrust_rate_apply_rates(params: VehicleParams, omega: Tensor, u: Tensor) -> Tensor:
    """Rates of the lag-free thrust-rate model: W = W_cmd where rate_tau == 0."""
    return torch.where(params.rate_tau[..., None] > 0, omega, u[..., 1:])


def thrust_rate_rotor_speed(params: VehicleParams, u: Tensor) -> Tensor:
    """Equal rotor speeds (rad/s) that give the commanded collective thrust, for logging."""
    thrust = params.max_thrust * u[..., 0].clamp(0.0, 1.0)
    kz = (params.alloc[..., 2, :] * params.k_f).sum(-1).clamp_min(1e-12)
    return torch.sqrt(thrust / kz)[..., None] * (params.k_f > 0)
