"""Differential flatness of the multirotor: flat outputs [x, y, z, yaw] and their derivatives to
the full state, body rates, angular acceleration, thrust, torques and rotor speeds.

Mellinger & Kumar (ICRA 2011), Sec. III, in volary's conventions (world z-up, body FLU, R maps
body to world, gravity -9.81 e3), for the rigid-body model of FlightGoggles Sec. IV
(EQUATIONS.md) with its body drag compensated in still air (:func:`drag_terms`):
- thrust direction: m a = f z_B - m g e3 (drag-free), so t = a + g e3, z_B = t / |t|,
  f = m |t|; with drag, t gains e_h v / m and f a term along z_B (:func:`drag_terms`);
- attitude from yaw: x_C = [cos psi, sin psi, 0], y_B = z_B x x_C / |z_B x x_C|,
  x_B = y_B x z_B (the construction of :func:`volary.control.geometric.rotation_from_thrust_yaw`);
- body rates from dz_B/dt = q x_B - p y_B and dx_B/dt = r y_B - q z_B (R' = R hat(W)):
  with h = dz_B/dt = (j - (z_B . j) z_B) / |t|: p = -y_B . h, q = x_B . h (Mellinger eq. 7-8),
  and r = dx_B/dt . y_B, differentiated exactly through the yaw construction above (Mellinger's
  r = psi' z_W . z_B holds only for his Z-X-Y Euler parametrization at small tilt);
- angular acceleration: the time derivatives of the same three expressions (needs snap and the
  yaw acceleration), derived in this module's functions;
- torque: Euler's equation tau = J W' + W x J W + |W| C_a W (cancelling the aerodynamic moment);
- rotor thrusts from the wrench [0, 0, f, tau] through the airframe's allocation pseudo-inverse
  (Aerial Gym eq. 6-7), rotor speeds w = sign(T) sqrt(|T| / k_f), *not* clamped, so that
  :func:`feasible` can report how far outside the limits a trajectory goes.

Singularities: free fall (|t| -> 0) and z_B parallel to x_C (pitch of 90 deg towards the yaw
heading); both are clamped numerically and reported by :func:`feasible`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from volary.dynamics.airframe import Airframe
from volary.dynamics.models import GRAVITY
from volary.dynamics.params import VehicleParams
from volary.errors import ConfigError
from volary.math.quaternion import quat_from_rotmat, quat_to_rotmat
from volary.planning.trajectory import FlatOutputs, PolyTrajectory

SINGULAR_EPS = 1e-6  # |t| in m/s^2 and |z_B x x_C| below which flatness is singular


@dataclass(frozen=True)
class FlatState:
    """The full state and inputs that fly given flat outputs (SI; body quantities in B)."""

    pos: Tensor  # (..., 3) m, world
    vel: Tensor  # (..., 3) m/s, world
    quat: Tensor  # (..., 4) [w, x, y, z] body-to-world
    omega: Tensor  # (..., 3) rad/s, body rates
    omega_dot: Tensor  # (..., 3) rad/s^2, body angular acceleration
    thrust: Tensor  # (...,) N, collective thrust along z_B
    torque: Tensor  # (..., 3) N m, body torque the rotors must produce
    rotor_thrust: Tensor  # (..., R) N, per rotor (may be outside the rotor's range)
    rotor_speed: Tensor  # (..., R) rad/s, per rotor (not clamped to [w_min, w_max])
    singular: Tensor  # (...,) bool, free fall or z_B parallel to the yaw heading


def _dot(a: Tensor, b: Tensor) -> Tensor:
    return (a * b).sum(-1)


def _cross(a: Tensor, b: Tensor) -> Tensor:
    return torch.linalg.cross(a, b, dim=-1)


def thrust_vector(acc: Tensor) -> Tensor:
    """t = a + g e3 (m/s^2): the specific thrust the rotors must produce (Mellinger eq. 5)."""
    g = torch.zeros_like(acc)
    g[..., 2] = GRAVITY
    return acc + g


def yaw_frame(yaw: Tensor) -> tuple[Tensor, Tensor]:
    """x_C = [cos psi, sin psi, 0] and y_C = [-sin psi, cos psi, 0] (Mellinger eq. 6)."""
    c, s, z = torch.cos(yaw), torch.sin(yaw), torch.zeros_like(yaw)
    return torch.stack((c, s, z), -1), torch.stack((-s, c, z), -1)


def body_axes(t: Tensor, x_c: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(x_B, y_B, z_B, |z_B x x_C|): z_B = t/|t|, y_B = z_B x x_C normalized, x_B = y_B x z_B."""
    z_b = t / t.norm(dim=-1, keepdim=True).clamp_min(SINGULAR_EPS)
    n = _cross(z_b, x_c)
    n_norm = n.norm(dim=-1)
    y_b = n / n_norm.clamp_min(SINGULAR_EPS)[..., None]
    return _cross(y_b, z_b), y_b, z_b, n_norm


def thrust_direction_rate(z_b: Tensor, t_norm: Tensor, jerk: Tensor) -> Tensor:
    """h = dz_B/dt = (j - (z_B . j) z_B) / |t| (Mellinger eq. 7, per unit mass)."""
    return (jerk - _dot(z_b, jerk)[..., None] * z_b) / t_norm[..., None]


def thrust_direction_acc(
    z_b: Tensor, h: Tensor, t_norm: Tensor, jerk: Tensor, snap: Tensor
) -> Tensor:
    """d^2 z_B/dt^2 = (s - (z_B . s) z_B - (h . j) z_B - 2 (z_B . j) h) / |t|."""
    zs, hj, zj = _dot(z_b, snap), _dot(h, jerk), _dot(z_b, jerk)
    return (snap - (zs + hj)[..., None] * z_b - 2 * zj[..., None] * h) / t_norm[..., None]


def yaw_rate_body(
    axes: tuple[Tensor, Tensor, Tensor, Tensor], h: Tensor, yc: tuple[Tensor, Tensor], yaw_rate
) -> Tensor:
    """r = dx_B/dt . y_B = (-h . (x_C x x_B) + psi' y_C . y_B) / |z_B x x_C| (rad/s)."""
    x_b, y_b, _, n_norm = axes
    x_c, y_c = yc
    u = _cross(x_c, x_b)
    return (-_dot(h, u) + yaw_rate * _dot(y_c, y_b)) / n_norm.clamp_min(SINGULAR_EPS)


def body_rates(
    axes: tuple[Tensor, Tensor, Tensor, Tensor], h: Tensor, yc: tuple[Tensor, Tensor], yaw_rate
) -> Tensor:
    """W = [p, q, r] (rad/s, body): p = -y_B . h, q = x_B . h, r from :func:`yaw_rate_body`."""
    x_b, y_b = axes[0], axes[1]
    r = yaw_rate_body(axes, h, yc, yaw_rate)
    return torch.stack((-_dot(y_b, h), _dot(x_b, h), r), -1)


def angular_acceleration(
    axes: tuple[Tensor, Tensor, Tensor, Tensor],
    h: Tensor,
    h_dot: Tensor,
    yc: tuple[Tensor, Tensor],
    omega: Tensor,
    yaw_rate: Tensor,
    yaw_acc: Tensor,
) -> Tensor:
    """W' (rad/s^2, body), the time derivative of :func:`body_rates`:
    p' = r q - y_B . h', q' = -r p + x_B . h' (using dx_B/dt = r y_B - q z_B,
    dy_B/dt = -r x_B + p z_B, h . z_B = 0), and from r N = -h . u + psi' v with u = x_C x x_B,
    v = y_C . y_B, N = |z_B x x_C|:  r' N = -h' . u - h . u' + psi'' v + psi' v' - r N'."""
    x_b, y_b, z_b, n_norm = axes
    x_c, y_c = yc
    p, q, r = omega.unbind(-1)
    dp = r * q - _dot(y_b, h_dot)
    dq = -r * p + _dot(x_b, h_dot)
    dx_b = r[..., None] * y_b - q[..., None] * z_b
    dy_b = -r[..., None] * x_b + p[..., None] * z_b
    u = _cross(x_c, x_b)
    du = yaw_rate[..., None] * _cross(y_c, x_b) + _cross(x_c, dx_b)
    v = _dot(y_c, y_b)
    dv = -yaw_rate * _dot(x_c, y_b) + _dot(y_c, dy_b)
    dn = _dot(y_b, _cross(h, x_c)) + yaw_rate * _dot(y_b, _cross(z_b, y_c))
    num = -_dot(h_dot, u) - _dot(h, du) + yaw_acc * v + yaw_rate * dv - r * dn
    dr = num / n_norm.clamp_min(SINGULAR_EPS)
    return torch.stack((dp, dq, dr), -1)


def body_torque(inertia: Tensor, drag_moment: Tensor, omega: Tensor, omega_dot: Tensor) -> Tensor:
    """tau = J W' + W x J W + |W| C_a W (N m, body): Euler's equation with the aerodynamic
    moment m_a = -|W| C_a W cancelled (FlightGoggles Sec. IV)."""
    jw = (inertia @ omega[..., None])[..., 0]
    jdw = (inertia @ omega_dot[..., None])[..., 0]
    aero = omega.norm(dim=-1, keepdim=True) * drag_moment * omega
    return jdw + _cross(omega, jw) + aero


def rotor_thrusts(alloc_pinv: Tensor, thrust: Tensor, torque: Tensor) -> Tensor:
    """Per-rotor thrusts T = B^+ [0, 0, f, tau] (N), unsaturated (Aerial Gym eq. 6-7)."""
    z = torch.zeros_like(torque[..., :2])
    wrench = torch.cat((z, thrust[..., None], torque), dim=-1)
    return (alloc_pinv @ wrench[..., None])[..., 0]


def rotor_speeds(k_f: Tensor, thrust: Tensor) -> Tensor:
    """w = sign(T) sqrt(|T| / k_f) (rad/s), 0 on padded rotors; not clamped."""
    w = torch.sign(thrust) * torch.sqrt(thrust.abs() / k_f.clamp_min(1e-30))
    return torch.where(k_f > 0, w, torch.zeros_like(w))


def as_params(vehicle: VehicleParams | Airframe, like: Tensor) -> VehicleParams:
    """VehicleParams in ``like``'s dtype and device (one env for an Airframe)."""
    if isinstance(vehicle, Airframe):
        return VehicleParams.from_airframes(vehicle, device=like.device, dtype=like.dtype)
    if not isinstance(vehicle, VehicleParams):
        raise ConfigError(
            f"vehicle: expected an Airframe or VehicleParams, got {type(vehicle).__name__}"
        )
    return vehicle.to(device=like.device, dtype=like.dtype)


def _per_env(x: Tensor, batch: torch.Size, tail: int) -> Tensor:
    """View a parameter (N, *tail) as (N, 1, ..., 1, *tail) to broadcast with ``batch``."""
    n = x.shape[0]
    if n != 1 and (len(batch) == 0 or batch[0] != n):
        raise ConfigError(
            f"vehicle: expected 1 env or the flat outputs' leading dim {tuple(batch[:1])}, "
            f"got {n} envs"
        )
    extra = max(len(batch) - 1, 0)
    return x.reshape(n, *([1] * extra), *x.shape[x.dim() - tail :])


def speed_weighted_velocity(vel: Tensor, acc: Tensor, jerk: Tensor) -> tuple[Tensor, ...]:
    """u = |v| v and its first two time derivatives (the quadratic-drag term), with
    d|v|/dt = v^ . a and d^2|v|/dt^2 = (a . a + v . j - (v^ . a)^2) / |v| (|v| clamped)."""
    speed = vel.norm(dim=-1, keepdim=True)
    safe = speed.clamp_min(SINGULAR_EPS)
    s1 = _dot(vel, acc)[..., None] / safe
    s2 = (_dot(acc, acc) + _dot(vel, jerk))[..., None] / safe - s1 * s1 / safe
    s2 = torch.where(speed > SINGULAR_EPS, s2, torch.zeros_like(s2))
    return speed * vel, s1 * vel + speed * acc, s2 * vel + 2 * s1 * acc + speed * jerk


def drag_terms(
    params: VehicleParams, batch: torch.Size, flat: FlatOutputs
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Body drag as flat quantities, for f_a = -R (D_lin + D_quad |v|) R^T v (volary.dynamics
    ``body_drag``, no wind) with equal x and y coefficients: then R D R^T = e_h I +
    (e_z - e_h) z_B z_B^T, so m a = -m g e3 - e_h v + (f - (e_z - e_h) z_B . v) z_B: the thrust
    direction is that of t = a + g e3 + e_h v / m (Faessler, Franchi & Scaramuzza, RA-L 2018,
    Sec. IV, for linear drag; here with the speed-dependent e = d + c |v|).

    Returns (e_h v / m and its first two time derivatives (..., 3), e_z - e_h (...,)) in SI.
    Unequal x/y coefficients use their mean (then the result is approximate).
    """
    lin = _per_env(params.drag_lin, batch, 1)
    quad = _per_env(params.drag_quad, batch, 1)
    mass = _per_env(params.mass, batch, 0)[..., None]
    d_h, c_h = lin[..., :2].mean(-1, keepdim=True), quad[..., :2].mean(-1, keepdim=True)
    u, du, ddu = speed_weighted_velocity(flat.vel, flat.acc, flat.jerk)
    speed = flat.vel.norm(dim=-1)
    gap = (lin[..., 2] - d_h[..., 0]) + (quad[..., 2] - c_h[..., 0]) * speed
    return (
        (d_h * flat.vel + c_h * u) / mass,
        (d_h * flat.acc + c_h * du) / mass,
        (d_h * flat.jerk + c_h * ddu) / mass,
        gap,
    )


def flat_to_state(
    flat: FlatOutputs, vehicle: VehicleParams | Airframe, *, drag: bool = True
) -> FlatState:
    """Full state, inputs and rotor speeds from flat outputs (module docstring, Mellinger Sec. III).

    ``flat`` fields are (..., 3) / (...,); ``vehicle`` is one Airframe, or VehicleParams whose
    env dim is 1 or the first dim of the flat outputs (further dims, e.g. times, broadcast).
    ``drag``: compensate the airframe's body drag in still air (:func:`drag_terms`; exact for
    equal x/y drag coefficients, as in every catalogue airframe); False: drag-free model.
    """
    params = as_params(vehicle, flat.pos)
    batch = flat.yaw.shape
    t, dt, ddt = thrust_vector(flat.acc), flat.jerk, flat.snap
    gap = torch.zeros_like(flat.yaw)
    if drag:
        f0, f1, f2, gap = drag_terms(params, batch, flat)
        t, dt, ddt = t + f0, dt + f1, ddt + f2
    t_norm = t.norm(dim=-1)
    yc = yaw_frame(flat.yaw)
    axes = body_axes(t, yc[0])
    t_safe = t_norm.clamp_min(SINGULAR_EPS)
    h = thrust_direction_rate(axes[2], t_safe, dt)
    h_dot = thrust_direction_acc(axes[2], h, t_safe, dt, ddt)
    omega = body_rates(axes, h, yc, flat.yaw_rate)
    omega_dot = angular_acceleration(axes, h, h_dot, yc, omega, flat.yaw_rate, flat.yaw_acc)
    inertia = _per_env(params.inertia, batch, 2)
    torque = body_torque(inertia, _per_env(params.drag_moment, batch, 1), omega, omega_dot)
    thrust = _per_env(params.mass, batch, 0) * t_norm + gap * _dot(axes[2], flat.vel)
    rotor_t = rotor_thrusts(_per_env(params.alloc_pinv, batch, 2), thrust, torque)
    quat = quat_from_rotmat(torch.stack(axes[:3], dim=-1))
    return FlatState(
        pos=flat.pos,
        vel=flat.vel,
        quat=quat,
        omega=omega,
        omega_dot=omega_dot,
        thrust=thrust,
        torque=torque,
        rotor_thrust=rotor_t,
        rotor_speed=rotor_speeds(_per_env(params.k_f, batch, 1), rotor_t),
        singular=(t_norm < SINGULAR_EPS) | (axes[3] < SINGULAR_EPS),
    )


def rotor_speed_command(
    traj: PolyTrajectory,
    t: Tensor,
    vehicle: VehicleParams | Airframe,
    *,
    h: float = 1e-4,
    drag: bool = True,
) -> Tensor:
    """Open-loop rotor speed commands (..., K, R) in rad/s that make the motors *reach* the
    flatness rotor speeds w(t) through their first-order lag (FlightGoggles Sec. IV,
    EQUATIONS.md): w_cmd = w + tau dw/dt, tau = tau_up when speeding up else tau_down, dw/dt by
    central differences of step ``h`` s (one-sided within ``h`` of the ends; 0 outside
    [0, T]). Not clamped: compare with the rotor limits yourself.
    """
    params = as_params(vehicle, traj.durations)
    tt = torch.as_tensor(t, dtype=traj.durations.dtype, device=traj.durations.device)

    def speeds(x: Tensor) -> Tensor:
        return flat_to_state(traj.evaluate(x), params, drag=drag).rotor_speed

    total = traj.duration[..., None]
    lo = torch.minimum((tt - h).clamp_min(0.0), total)  # stay on the trajectory's own side of
    hi = torch.minimum((tt + h).clamp_min(0.0), total)  # its ends: one-sided there
    span = (hi - lo)[..., None]
    w = speeds(tt)
    w_dot = torch.where(span > 0, (speeds(hi) - speeds(lo)) / span.clamp_min(1e-300), 0.0)
    batch = w.shape[:-1]
    tau = torch.where(
        w_dot > 0, _per_env(params.tau_up, batch, 1), _per_env(params.tau_down, batch, 1)
    )
    return w + tau * w_dot


def feedforward_setpoint(flat: FlatOutputs, params: VehicleParams, *, drag: bool = True) -> Tensor:
    """``mellinger`` setpoint (N, 14) for flat outputs with fields (N, 3) / (N,).

    With ``drag``, a_ff = f z_B / m - g e3 (f and z_B from :func:`flat_to_state`, drag included)
    and j_ff = j + d/dt(e_h v / m) (:func:`drag_terms`): the thrust the drag model needs is fed
    forward (Faessler, Franchi & Scaramuzza, RA-L 2018, Sec. IV); without, the plain trajectory
    derivatives (:meth:`FlatOutputs.setpoint`).
    """
    sp = flat.setpoint()
    if not drag:
        return sp
    p = params if params.dtype == flat.pos.dtype else params.to(dtype=flat.pos.dtype)
    st = flat_to_state(flat, p)
    z_b = quat_to_rotmat(st.quat)[..., :, 2]
    acc = st.thrust[..., None] * z_b / p.mass[..., None]
    acc[..., 2] -= GRAVITY
    _, d_jerk, _, _ = drag_terms(p, flat.yaw.shape, flat)
    return torch.cat((sp[..., :6], acc, flat.jerk + d_jerk, sp[..., 12:]), dim=-1)


# ---- feasibility -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """Kinematic and actuator limits a trajectory must respect (SI; inf = unchecked).

    Rotor speeds are always checked against the airframe's [w_min, w_max] (scaled by
    ``rotor_margin``); collective thrust against ``thrust_margin`` times its max thrust (TWR).
    """

    max_speed: float = math.inf  # m/s
    max_acc: float = math.inf  # m/s^2
    max_body_rate: float = math.inf  # rad/s, norm of W
    max_tilt: float = math.pi  # rad, angle between z_B and z_W
    thrust_margin: float = 1.0  # usable fraction of the max collective thrust, (0, 1]
    rotor_margin: float = 1.0  # usable fraction of each rotor's max speed, (0, 1]

    def __post_init__(self) -> None:
        for f in ("max_speed", "max_acc", "max_body_rate", "max_tilt"):
            v = getattr(self, f)
            if math.isnan(v) or v <= 0:
                raise ConfigError(f"limits.{f}: expected a value > 0, got {v}")
        for f in ("thrust_margin", "rotor_margin"):
            v = getattr(self, f)
            if not 0 < v <= 1:
                raise ConfigError(f"limits.{f}: expected a fraction in (0, 1], got {v}")


@dataclass(frozen=True)
class FeasibilityReport:
    """Peaks over the sampled times, per trajectory, and whether each limit holds."""

    ok: Tensor  # (...,) bool, every check below passes
    max_speed: Tensor  # (...,) m/s
    max_acc: Tensor  # (...,) m/s^2
    max_body_rate: Tensor  # (...,) rad/s
    max_tilt: Tensor  # (...,) rad
    max_thrust_ratio: Tensor  # (...,) peak collective thrust / (thrust_margin * max thrust)
    max_rotor_ratio: Tensor  # (...,) peak rotor speed / (rotor_margin * w_max), worst rotor
    min_rotor_margin: Tensor  # (...,) rad/s, lowest w - w_min (negative: below the minimum)
    singular: Tensor  # (...,) bool, a sample hit a flatness singularity
    violations: tuple[str, ...]  # one line per violated limit (trajectory index, value)

    def __str__(self) -> str:
        if not self.violations:
            return "feasible"
        return "infeasible: " + "; ".join(self.violations)


def sample_count(traj: PolyTrajectory, dt: float, per_segment: int = 16) -> Tensor:
    """K_i = max(ceil(duration_i / dt), per_segment M) + 1 samples for each trajectory i (an
    int64 tensor of the batch shape): a trajectory's checks do not depend on its batch mates."""
    if not (math.isfinite(dt) and dt > 0):
        raise ConfigError(f"dt: expected a finite sample step > 0 s, got {dt}")
    steps = torch.ceil(traj.duration / dt).to(torch.int64)
    return steps.clamp(min=per_segment * traj.n_segments) + 1


def sample_times(traj: PolyTrajectory, samples: int | Tensor) -> Tensor:
    """(..., K) times spread evenly over each trajectory's own duration, the ends included.

    ``samples`` is one count for all or a per-trajectory count tensor; with the latter, K is the
    largest count and a shorter trajectory repeats its final time (a repeated sample changes no
    peak), so a trajectory is sampled the same way whatever else is in the batch."""
    dur = traj.duration
    if isinstance(samples, Tensor):
        k = samples.to(device=dur.device).expand(dur.shape)
        j = torch.arange(int(k.max()), device=dur.device, dtype=dur.dtype)
        last = (k - 1).to(dur.dtype)[..., None]
        return dur[..., None] * torch.minimum(j, last) / last
    s = torch.linspace(0.0, 1.0, samples, dtype=dur.dtype, device=dur.device)
    return dur[..., None] * s


def feasible(
    traj: PolyTrajectory,
    vehicle: VehicleParams | Airframe,
    limits: Limits | None = None,
    *,
    dt: float = 0.01,
    samples: int | Tensor | None = None,
) -> FeasibilityReport:
    """Check a trajectory (batch) against ``limits`` and the airframe's rotor speeds and TWR,
    at ``samples`` evenly spread times per trajectory (default :func:`sample_count`: every
    ``dt`` s at most and at least 16 times per segment, counted per trajectory)."""
    lim = limits if limits is not None else Limits()
    k = sample_count(traj, dt) if samples is None else samples
    if isinstance(k, bool) or int(k.min() if isinstance(k, Tensor) else k) < 2:
        raise ConfigError(f"samples: expected at least 2, got {k}")
    flat = traj.evaluate(sample_times(traj, k))
    return check_flat(flat, flat_to_state(flat, vehicle), vehicle, lim)


def check_flat(
    flat: FlatOutputs, st: FlatState, vehicle: VehicleParams | Airframe, lim: Limits
) -> FeasibilityReport:
    """The peaks of sampled flat outputs (..., K) and their flat state against the limits."""
    p = as_params(vehicle, flat.pos)
    batch = flat.yaw.shape
    w_max = _per_env(p.w_max, batch, 1)
    active = _per_env(p.k_f, batch, 1) > 0
    rotor_ratio = torch.where(active, st.rotor_speed / (lim.rotor_margin * w_max), 0.0)
    low = torch.where(active, st.rotor_speed - _per_env(p.w_min, batch, 1), math.inf)
    tilt = torch.acos(_tilt_cos(st.quat).clamp(-1.0, 1.0))
    max_thrust = lim.thrust_margin * _per_env(p.max_thrust, batch, 0)
    peaks = {
        "max_speed": flat.vel.norm(dim=-1).amax(-1),
        "max_acc": flat.acc.norm(dim=-1).amax(-1),
        "max_body_rate": st.omega.norm(dim=-1).amax(-1),
        "max_tilt": tilt.amax(-1),
        "max_thrust_ratio": (st.thrust / max_thrust).amax(-1),
        "max_rotor_ratio": rotor_ratio.amax((-2, -1)),
        "min_rotor_margin": low.amin((-2, -1)),
        "singular": st.singular.any(-1),
    }
    bounds = {
        "max_speed": lim.max_speed,
        "max_acc": lim.max_acc,
        "max_body_rate": lim.max_body_rate,
        "max_tilt": lim.max_tilt,
        "max_thrust_ratio": 1.0,
        "max_rotor_ratio": 1.0,
    }
    bad = {k: peaks[k] > v for k, v in bounds.items()}
    bad["min_rotor_margin"] = peaks["min_rotor_margin"] < 0
    bad["singular"] = peaks["singular"]
    ok = torch.ones_like(peaks["singular"])
    for b in bad.values():
        ok = ok & ~b
    return FeasibilityReport(ok=ok, violations=_describe(peaks, bad, bounds), **peaks)


def _tilt_cos(quat: Tensor) -> Tensor:
    """z_B . z_W = 1 - 2 (x^2 + y^2) for q = [w, x, y, z]."""
    return 1 - 2 * (quat[..., 1] ** 2 + quat[..., 2] ** 2)


def _describe(peaks: dict, bad: dict, bounds: dict) -> tuple[str, ...]:
    out = []
    for name, mask in bad.items():
        if not bool(mask.any()):
            continue
        idx = tuple(int(i) for i in torch.nonzero(mask)[0]) if mask.dim() else ()
        where = f" (trajectory {list(idx)})" if idx else ""
        if name == "singular":
            out.append(f"flatness singular: free fall or z_B along the yaw heading{where}")
            continue
        value = float(peaks[name][idx] if idx else peaks[name])
        out.append(f"{name} {value:.4g} vs limit {bounds.get(name, 0.0):.4g}{where}")
    return tuple(out)
