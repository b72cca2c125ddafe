"""The MPC expert of SOUS VIDE (paper 000, Sec. IV, eq. 2) on the thrust + body-rate model (eq. 1).

Two controllers behind volary's Controller protocol, both tracking a reference trajectory (a
:class:`~volary.planning.PolyTrajectory`, a :class:`~volary.control.references.FigureEight`, or
any callable ``t -> FlatOutputs``) and commanding [f_th in 0..1, W_x, W_y, W_z rad/s], the
input of ``volary.dynamics``' thrust-rate model:

- :class:`NmpcController`: nonlinear MPC with CasADi, RK4, solved by a Gauss-Newton SQP whose
  iterates are rollouts of their inputs (warm-started from the shifted previous plan) with
  CasADi's bundled QP solvers (qrqp or osqp); one solve per env, in a loop.
- :class:`BatchedMpcController`: the same problem for every env at once by batched iLQR in torch
  (:mod:`volary.control.ilqr`), on any device.

The model (eq. 1 with volary's body drag, still air, rates applied directly):
p' = v, v' = -g e3 + R(q) (k_th f_th e3 - (D_lin + D_quad |v_B|) v_B) / m, q' = 0.5 q (x) [0, W],
with x = [p, v, q] (10), u = [f_th, W] (4), k_th the airframe's max collective thrust. The
reference window x_des, u_des comes from the flat outputs through differential flatness
(:func:`volary.planning.flat_to_state`): u_des = [thrust / k_th, body rates].

The setpoint of both controllers is the reference time (N, 1) in s, so
``sim.run(lambda t: [t], T)`` flies the reference from its start.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import IntEnum
from typing import Any

import numpy as np
import torch
from torch import Tensor

from volary.control import ilqr
from volary.dynamics.models import GRAVITY
from volary.dynamics.params import VehicleParams
from volary.dynamics.state import MultirotorState
from volary.errors import ConfigError, MissingDependencyError
from volary.math.quaternion import quat_rotate, quat_rotate_inverse
from volary.planning.flatness import flat_to_state
from volary.planning.trajectory import FlatOutputs

NX, NU = 10, 4  # state [p, v, q], input [f_th, W]
ANALYTIC_STAGES = 640  # envs x horizon from which the iLQR uses analytic Jacobians
DRAG_EPS = 1e-6  # (m/s)^2, smooths |v| at rest so the model is differentiable everywhere
Reference = Any  # PolyTrajectory, FigureEight or a callable t -> FlatOutputs


@dataclass(frozen=True)
class MpcConfig:
    """Horizon, weights and limits of eq. 2 (shared by both MPC controllers)."""

    horizon: int = 20  # N, stages
    dt: float = 0.05  # s, stage length (the control period when the MPC runs at 1/dt Hz)
    q_pos: tuple[float, float, float] = (400.0, 400.0, 400.0)  # 1/m^2
    q_vel: tuple[float, float, float] = (10.0, 10.0, 10.0)  # 1/(m/s)^2
    q_att: float = 20.0  # on each quaternion component (reference sign-aligned)
    r_thrust: float = 10.0  # on f_th - f_th_des (normalized)
    r_rate: tuple[float, float, float] = (0.5, 0.5, 0.5)  # 1/(rad/s)^2
    terminal_factor: float = 10.0  # Q_N = terminal_factor Q
    thrust_limits: tuple[float, float] = (0.0, 1.0)  # f_th range (fraction of max thrust)
    max_body_rate: tuple[float, float, float] = (10.0, 10.0, 6.0)  # rad/s, |W_i| bound
    max_iter: int = 5  # SQP / iLQR iterations per control step
    tol: float = 1e-6  # SQP: step inf-norm; iLQR: cost decrease / (1 + cost)
    qp_solver: str = "qrqp"  # CasADi conic plugin of the NMPC: "qrqp" or "osqp"

    def __post_init__(self) -> None:
        _positive_int(self, "horizon")
        _positive_int(self, "max_iter")
        _finite(self, "dt", lo=0.0)
        _finite(self, "tol", lo=0.0)
        _finite(self, "terminal_factor", lo=0.0, strict=False)
        _finite(self, "q_att", lo=0.0, strict=False)
        _finite(self, "r_thrust", lo=0.0)
        for name in ("q_pos", "q_vel", "r_rate", "max_body_rate"):
            _vector(self, name, 3, strict=name in ("r_rate", "max_body_rate"))
        lo, hi = _vector(self, "thrust_limits", 2, strict=False)
        if not lo < hi <= 1.0:
            raise ConfigError(f"thrust_limits: expected 0 <= lo < hi <= 1, got {(lo, hi)}")
        if self.qp_solver not in ("qrqp", "osqp"):
            raise ConfigError(f"qp_solver: expected 'qrqp' or 'osqp', got {self.qp_solver!r}")

    def state_weights(self) -> np.ndarray:
        """(10,) diagonal of Q."""
        return np.array([*self.q_pos, *self.q_vel, *(4 * [self.q_att])], dtype=np.float64)

    def input_weights(self) -> np.ndarray:
        """(4,) diagonal of R."""
        return np.array([self.r_thrust, *self.r_rate], dtype=np.float64)

    def input_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(4,) lower and upper limits of u = [f_th, W]."""
        w = np.asarray(self.max_body_rate, dtype=np.float64)
        return np.array([self.thrust_limits[0], *(-w)]), np.array([self.thrust_limits[1], *w])


def _positive_int(cfg: MpcConfig, name: str) -> None:
    v = getattr(cfg, name)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ConfigError(f"{name}: expected an integer >= 1, got {v!r}")


def _finite(cfg: MpcConfig, name: str, lo: float, strict: bool = True) -> float:
    v = getattr(cfg, name)
    ok = isinstance(v, int | float) and math.isfinite(v) and (v > lo if strict else v >= lo)
    if not ok:
        raise ConfigError(
            f"{name}: expected a finite value {'>' if strict else '>='} {lo}, got {v!r}"
        )
    return float(v)


def _vector(cfg: MpcConfig, name: str, n: int, strict: bool) -> tuple[float, ...]:
    v = getattr(cfg, name)
    try:
        vals = tuple(float(x) for x in v)
    except (TypeError, ValueError):
        vals = ()
    bad = len(vals) != n or not all(
        math.isfinite(x) and (x > 0 if strict else x >= 0) for x in vals
    )
    if bad:
        kind = "> 0" if strict else ">= 0"
        raise ConfigError(f"{name}: expected {n} finite values {kind}, got {v!r}")
    return vals


class MpcStatus(IntEnum):
    """Outcome of one env's MPC step (``controller.last_status``)."""

    SOLVED = 0  # converged to tol
    ITER_LIMIT = 1  # max_iter reached; the (feasible) iterate is applied
    FALLBACK_PLAN = 2  # solve failed: input of the shifted previous plan
    FALLBACK_CONTROLLER = 3  # solve failed, no plan left: the fallback controller's command
    FALLBACK_REFERENCE = 4  # solve failed, nothing else: the reference feed-forward u_des


# ---- model (torch) -----------------------------------------------------------------------------
@dataclass(frozen=True)
class MpcPlant:
    """Per-env parameters of the MPC model (float64 unless moved)."""

    mass: Tensor  # (B,) kg
    max_thrust: Tensor  # (B,) N, k_th of eq. 1
    drag_lin: Tensor  # (B, 3) N/(m/s), body axes
    drag_quad: Tensor  # (B, 3) N/(m/s)^2, body axes

    @staticmethod
    def from_params(params: VehicleParams, dtype: torch.dtype = torch.float64) -> MpcPlant:
        return MpcPlant(*(getattr(params, f.name).to(dtype) for f in fields(MpcPlant)))

    def theta(self) -> np.ndarray:
        """(B, 8) [m, k_th, D_lin, D_quad] for the CasADi model."""
        cols = (self.mass[:, None], self.max_thrust[:, None], self.drag_lin, self.drag_quad)
        return torch.cat(cols, dim=-1).detach().cpu().double().numpy()


def model_derivative(plant: MpcPlant, x: Tensor, u: Tensor) -> Tensor:
    """dx/dt of the MPC model (SOUS VIDE eq. 1 + body drag), x (..., B, 10), u (..., B, 4)."""
    return _derivative(plant, x, *_input_terms(plant, u))


def _input_terms(plant: MpcPlant, u: Tensor) -> tuple[Tensor, Tensor]:
    """Parts of the derivative fixed by the held input: the body thrust acceleration
    [0, 0, k_th f_th / m] (..., 3) and 0.5 Omega(W) (..., 4, 4) with q' = 0.5 Omega(W) q
    (= 0.5 q (x) [0, W] for [w, x, y, z] quaternions)."""
    zero = torch.zeros_like(u[..., 0])
    acc = torch.stack((zero, zero, plant.max_thrust * u[..., 0] / plant.mass), dim=-1)
    wx, wy, wz = u[..., 1], u[..., 2], u[..., 3]
    omega = torch.stack(
        (
            torch.stack((zero, -wx, -wy, -wz), dim=-1),
            torch.stack((wx, zero, wz, -wy), dim=-1),
            torch.stack((wy, -wz, zero, wx), dim=-1),
            torch.stack((wz, wy, -wx, zero), dim=-1),
        ),
        dim=-2,
    )
    return acc, 0.5 * omega


def _derivative(plant: MpcPlant, x: Tensor, thrust_acc: Tensor, half_omega: Tensor) -> Tensor:
    vel, quat = x[..., 3:6], x[..., 6:10]
    v_b = quat_rotate_inverse(quat, vel)
    speed = torch.sqrt((v_b * v_b).sum(-1, keepdim=True) + DRAG_EPS)
    acc_b = thrust_acc - (plant.drag_lin + plant.drag_quad * speed) * v_b / plant.mass[..., None]
    acc = quat_rotate(quat, acc_b) + _GRAVITY.to(x)
    return torch.cat((vel, acc, (half_omega @ quat[..., None])[..., 0]), dim=-1)


_GRAVITY = torch.tensor([0.0, 0.0, -GRAVITY], dtype=torch.float64)


def model_step(plant: MpcPlant, x: Tensor, u: Tensor, dt: float) -> Tensor:
    """x_k+1 = f_d(x_k, u_k): one RK4 step of ``dt`` s with u held (eq. 2's f_d)."""
    terms = _input_terms(plant, u)
    k1 = _derivative(plant, x, *terms)
    k2 = _derivative(plant, x + (0.5 * dt) * k1, *terms)
    k3 = _derivative(plant, x + (0.5 * dt) * k2, *terms)
    k4 = _derivative(plant, x + dt * k3, *terms)
    return x + (dt / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


def _rotation_jacobians(w: Tensor, r: Tensor, vec: Tensor) -> tuple[Tensor, Tensor]:
    """d/dw and d/dr (..., 3), (..., 3, 3) of the quat_rotate formula
    v' = v + 2 w (r x v) + 2 r x (r x v) = v + 2 w (r x v) + 2 (r (r . v) - v (r . r))."""
    cross = torch.linalg.cross(r, vec, dim=-1)
    d_w = 2.0 * cross
    eye = torch.eye(3, dtype=vec.dtype, device=vec.device)
    vx = _skew(vec)
    d_r = -2.0 * w[..., None, None] * vx + 2.0 * (
        (r * vec).sum(-1)[..., None, None] * eye
        + r[..., :, None] * vec[..., None, :]
        - 2.0 * vec[..., :, None] * r[..., None, :]
    )
    return d_w, d_r


def _skew(v: Tensor) -> Tensor:
    """[v]x (..., 3, 3) with [v]x a = v x a."""
    z = torch.zeros_like(v[..., 0])
    x, y, w = v.unbind(-1)
    return torch.stack(
        (torch.stack((z, -w, y), -1), torch.stack((w, z, -x), -1), torch.stack((-y, x, z), -1)),
        dim=-2,
    )


def model_jacobians(plant: MpcPlant, x: Tensor, u: Tensor) -> tuple[Tensor, Tensor]:
    """Analytic df/dx (..., 10, 10) and df/du (..., 10, 4) of :func:`model_derivative`."""
    vel, quat = x[..., 3:6], x[..., 6:10]
    qw, qv = quat[..., 0], quat[..., 1:]
    thrust_acc, half_omega = _input_terms(plant, u)
    v_b = quat_rotate_inverse(quat, vel)
    speed = torch.sqrt((v_b * v_b).sum(-1, keepdim=True) + DRAG_EPS)
    m = plant.mass[..., None]
    drag = plant.drag_lin + plant.drag_quad * speed  # (..., 3)
    acc_b = thrust_acc - drag * v_b / m
    # d acc_b / d v_b = -(diag(drag) + (D_quad v_b) v_b^T / s) / m
    dab_dvb = (
        -(
            torch.diag_embed(drag)
            + (plant.drag_quad * v_b)[..., :, None] * v_b[..., None, :] / speed[..., None]
        )
        / m[..., None]
    )
    rot = _rotmat(quat)
    # v_b = rotate(conj q) v: d/dqw, d/dqv (the vector part enters with a minus sign)
    dvb_dw, dvb_dr = _rotation_jacobians(qw, -qv, vel)
    dvb_dq = torch.cat((dvb_dw[..., None], -dvb_dr), dim=-1)  # (..., 3, 4)
    da_dw, da_dr = _rotation_jacobians(qw, qv, acc_b)
    da_dq = torch.cat((da_dw[..., None], da_dr), dim=-1) + rot @ dab_dvb @ dvb_dq
    da_dv = rot @ dab_dvb @ rot.transpose(-1, -2)
    zeros = torch.zeros(*x.shape[:-1], 10, 10, dtype=x.dtype, device=x.device)
    fx = zeros.clone()
    fx[..., 0:3, 3:6] = torch.eye(3, dtype=x.dtype, device=x.device)
    fx[..., 3:6, 3:6] = da_dv
    fx[..., 3:6, 6:10] = da_dq
    fx[..., 6:10, 6:10] = half_omega
    fu = zeros[..., :4].clone()
    fu[..., 3:6, 0] = rot[..., :, 2] * (plant.max_thrust / plant.mass)[..., None]
    fu[..., 6:10, 1:4] = 0.5 * _quat_rate_matrix(quat)
    return fx, fu


def _rotmat(q: Tensor) -> Tensor:
    """R(q) (..., 3, 3) of the quat_rotate formula (columns: rotated unit vectors)."""
    eye = torch.eye(3, dtype=q.dtype, device=q.device)
    cols = [quat_rotate(q, eye[i].expand_as(q[..., 1:])) for i in range(3)]
    return torch.stack(cols, dim=-1)


def _quat_rate_matrix(q: Tensor) -> Tensor:
    """d(q (x) [0, W])/dW (..., 4, 3) for [w, x, y, z] quaternions."""
    w, x, y, z = q.unbind(-1)
    return torch.stack(
        (
            torch.stack((-x, -y, -z), -1),
            torch.stack((w, -z, y), -1),
            torch.stack((z, w, -x), -1),
            torch.stack((-y, x, w), -1),
        ),
        dim=-2,
    )


def model_step_jacobians(plant: MpcPlant, x: Tensor, u: Tensor, dt: float) -> tuple[Tensor, Tensor]:
    """A = d f_d / dx (..., 10, 10), B = d f_d / du (..., 10, 4) of :func:`model_step`, by the
    chain rule through the four RK4 stages (exact up to round-off)."""
    terms = _input_terms(plant, u)
    eye = torch.eye(NX, dtype=x.dtype, device=x.device)
    k = _derivative(plant, x, *terms)
    fx, fu = model_jacobians(plant, x, u)
    kx, ku = fx, fu
    sum_x, sum_u = kx, ku
    for c, wgt in ((0.5, 2.0), (0.5, 2.0), (1.0, 1.0)):
        xs = x + (c * dt) * k
        k = _derivative(plant, xs, *terms)
        fx, fu = model_jacobians(plant, xs, u)
        kx, ku = fx @ (eye + (c * dt) * kx), fx @ ((c * dt) * ku) + fu
        sum_x, sum_u = sum_x + wgt * kx, sum_u + wgt * ku
    return eye + (dt / 6.0) * sum_x, (dt / 6.0) * sum_u


# ---- reference windowing -----------------------------------------------------------------------
def _as_reference(reference: Reference, params: VehicleParams) -> Callable[[Tensor], FlatOutputs]:
    """A function (N, K) times -> FlatOutputs with fields (N, K, ...), on the params' device."""
    from volary.planning.trajectory import PolyTrajectory

    if isinstance(reference, PolyTrajectory):
        traj = reference.to(device=params.device, dtype=torch.float64)
        return traj.evaluate
    fn = getattr(reference, "evaluate", reference)
    if not callable(fn):
        raise ConfigError(
            "reference: expected a PolyTrajectory, an object with evaluate(t) or a callable "
            f"t -> FlatOutputs, got {type(reference).__name__}"
        )
    return fn


class ReferenceWindow:
    """x_des (N, H + 1, 10) at t + k dt and u_des (N, H, 4) at the stage midpoints t + (k + ½) dt
    from the flat outputs (SOUS VIDE Sec. IV: X_des, U_des by the differential-flatness map)."""

    def __init__(self, reference: Reference, params: VehicleParams, cfg: MpcConfig) -> None:
        self._fn = _as_reference(reference, params)
        self._params = params.to(dtype=torch.float64)
        self._offsets = torch.arange(2 * cfg.horizon + 1, dtype=torch.float64) * (cfg.dt / 2)
        self._offsets = self._offsets.to(params.device)

    def flat(self, t: Tensor) -> FlatOutputs:
        """Flat outputs at times ``t`` (N, K), checked for shape."""
        out = self._fn(t)
        if not isinstance(out, FlatOutputs) or out.pos.shape != (*t.shape, 3):
            got = tuple(out.pos.shape) if isinstance(out, FlatOutputs) else type(out).__name__
            raise ConfigError(
                f"reference: expected FlatOutputs with pos of shape {(*t.shape, 3)} for times "
                f"{tuple(t.shape)}, got {got}"
            )
        return FlatOutputs(*(getattr(out, f.name).to(torch.float64) for f in fields(out)))

    def __call__(self, t0: Tensor, quat: Tensor) -> tuple[Tensor, Tensor]:
        """Window from times ``t0`` (N,) s; quaternions sign-aligned with ``quat`` (N, 4)."""
        fs = flat_to_state(self.flat(t0[:, None] + self._offsets), self._params)
        q = align_quaternions(fs.quat, quat.to(torch.float64))
        thrust = fs.thrust / self._params.max_thrust[:, None]
        x = torch.cat((fs.pos, fs.vel, q), dim=-1)[:, 0::2]
        u = torch.cat((thrust[..., None], fs.omega), dim=-1)[:, 1::2]
        return x, u


def align_quaternions(q: Tensor, q0: Tensor) -> Tensor:
    """Flip signs of q (N, K, 4) so q[:, 0] . q0 >= 0 and consecutive quaternions agree (the
    cost of eq. 2 compares quaternion components; q and -q are the same attitude)."""
    first = (q[:, :1] * q0[:, None]).sum(-1)
    steps = (q[:, 1:] * q[:, :-1]).sum(-1)
    sign = torch.where(torch.cat((first, steps), dim=1) < 0, -1.0, 1.0).to(q.dtype)
    return q * sign.cumprod(dim=1)[..., None]


def state_vector(state: MultirotorState) -> Tensor:
    """(N, 10) float64 [p, v, q] of the MPC model."""
    return torch.cat((state.pos, state.vel, state.quat), dim=-1).to(torch.float64)


def shift_plan(plan: Tensor, elapsed: Tensor, dt: float) -> Tensor:
    """Plan (N, K, d) at stages k + elapsed / dt, by linear interpolation (last stage held)."""
    k = plan.shape[1]
    s = torch.arange(k, dtype=plan.dtype, device=plan.device) + (elapsed / dt)[:, None]
    s = s.clamp(0.0, k - 1.0)
    lo = s.floor().long().clamp_max(k - 1)
    hi = (lo + 1).clamp_max(k - 1)
    w = (s - lo.to(s.dtype))[..., None]
    idx = plan.shape[-1]
    p_lo = plan.gather(1, lo[..., None].expand(-1, -1, idx))
    p_hi = plan.gather(1, hi[..., None].expand(-1, -1, idx))
    return (1.0 - w) * p_lo + w * p_hi


# ---- shared controller shell -------------------------------------------------------------------
class _MpcBase:
    """Setpoint checks, plan memory, fallbacks and status bookkeeping shared by both MPCs."""

    mode: str = "mpc"
    setpoint_size: int = 1  # the reference time in s

    def __init__(
        self,
        params: VehicleParams,
        reference: Reference,
        config: MpcConfig | None = None,
        *,
        fallback: Any = None,
    ) -> None:
        cfg = MpcConfig() if config is None else config
        if not isinstance(cfg, MpcConfig):
            raise ConfigError(f"config: expected an MpcConfig or None, got {type(cfg).__name__}")
        if fallback is not None and getattr(fallback, "mode", None) not in (
            "mellinger",
            "position",
        ):
            raise ConfigError(
                "fallback: expected a controller with mode 'mellinger' or 'position' (thrust-rate "
                f"model) or None, got {type(fallback).__name__}"
            )
        self.config, self.params, self.fallback = cfg, params, fallback
        self.window = ReferenceWindow(reference, params, cfg)
        n, dev = params.n_envs, params.device
        self.last_status = torch.zeros(n, dtype=torch.int64)  # MpcStatus per env (cpu)
        self.last_iterations = torch.zeros(n, dtype=torch.int64)
        self.last_solve_time = 0.0  # s, wall time of the last call's solves (all envs)
        self.failures = torch.zeros(n, dtype=torch.int64)  # failed solves since construction
        self._u_plan = torch.zeros(n, cfg.horizon, NU, dtype=torch.float64, device=dev)
        self._plan_time = torch.full((n,), math.nan, dtype=torch.float64, device=dev)
        lo, hi = cfg.input_bounds()
        self._u_lo = torch.as_tensor(lo, device=dev)
        self._u_hi = torch.as_tensor(hi, device=dev)
        self._warned = False
        self._setup(params)

    def _setup(self, params: VehicleParams) -> None:
        """The solver's own state (after the shared state above)."""
        raise NotImplementedError

    def reset(self, mask: Tensor | None = None) -> None:
        """Forget the warm-start plans of the envs where ``mask`` (N,) is True (all if None)."""
        n = self.params.n_envs
        m = torch.ones(n, dtype=torch.bool) if mask is None else mask.to("cpu", torch.bool)
        if m.shape != (n,):
            raise ConfigError(f"mask: expected shape ({n},), got {tuple(m.shape)}")
        self._plan_time[m.to(self._plan_time.device)] = math.nan
        self.last_status[m] = MpcStatus.SOLVED

    def _times(self, setpoint: Any, dt: float) -> Tensor:
        n = self.params.n_envs
        sp = torch.as_tensor(setpoint)
        if tuple(sp.shape) != (n, 1):
            raise ConfigError(
                f"setpoint: mode {self.mode!r} expects the reference time of shape ({n}, 1), "
                f"got {tuple(sp.shape)}"
            )
        if not dt > 0:
            raise ConfigError(f"dt: expected a control period > 0 s, got {dt}")
        return sp[:, 0].to(device=self.params.device, dtype=torch.float64)

    def _elapsed(self, t: Tensor) -> tuple[Tensor, Tensor]:
        """Time since each env's plan began and whether that plan still covers now."""
        elapsed = t - self._plan_time
        horizon = self.config.horizon * self.config.dt
        usable = torch.isfinite(elapsed) & (elapsed >= 0) & (elapsed < horizon)
        return torch.nan_to_num(elapsed, nan=0.0), usable

    def _fallback(
        self, failed: Tensor, state: MultirotorState, t: Tensor, u_ref0: Tensor, dt: float
    ) -> tuple[Tensor, Tensor]:
        """Commands (N, 4) and statuses (N,) for the envs whose solve ``failed`` (N,)."""
        if not bool(failed.any()):
            return u_ref0, torch.full_like(t, MpcStatus.FALLBACK_REFERENCE, dtype=torch.int64)
        elapsed, usable = self._elapsed(t)
        u_plan = shift_plan(self._u_plan, elapsed, self.config.dt)[:, 0]
        status = torch.full_like(t, MpcStatus.FALLBACK_REFERENCE, dtype=torch.int64)
        u = u_ref0.clone()
        if self.fallback is not None:
            u_fb = self._fallback_command(state, t, dt)
            ok = torch.isfinite(u_fb).all(-1)
            u = torch.where(ok[:, None], u_fb, u)
            status = torch.where(ok, int(MpcStatus.FALLBACK_CONTROLLER), status)
        u = torch.where(usable[:, None], u_plan, u)
        status = torch.where(usable, int(MpcStatus.FALLBACK_PLAN), status)
        u = torch.nan_to_num(u, nan=0.0)
        self._warn(failed, status)
        return self._clip(u), status

    def _fallback_command(self, state: MultirotorState, t: Tensor, dt: float) -> Tensor:
        flat = self.window.flat(t[:, None])
        sp = flat.setpoint()[:, 0]
        if self.fallback.mode == "position":
            sp = torch.cat((flat.pos[:, 0], flat.yaw[:, :1]), dim=-1)
        sp = sp.to(self.params.dtype)
        return self.fallback(state, sp, dt).to(torch.float64)

    def _clip(self, u: Tensor) -> Tensor:
        return torch.minimum(torch.maximum(u, self._u_lo), self._u_hi)

    def _warn(self, failed: Tensor, status: Tensor) -> None:
        self.failures += failed.cpu().long()
        if self._warned or not bool(failed.any()):
            return
        self._warned = True
        envs = torch.nonzero(failed).flatten().tolist()
        names = sorted({MpcStatus(int(s)).name for s in status[failed].tolist()})
        warnings.warn(
            f"{type(self).__name__}: MPC solve failed in env(s) {envs[:10]}; fell back to "
            f"{', '.join(names)}. Later failures are only reported in controller.last_status "
            "(this warning is shown once).",
            RuntimeWarning,
            stacklevel=3,
        )

    def _output(self, u: Tensor) -> Tensor:
        return u.to(device=self.params.device, dtype=self.params.dtype)


# ---- CasADi NMPC -------------------------------------------------------------------------------
def _casadi() -> Any:
    try:
        import casadi
    except ImportError:
        raise MissingDependencyError("casadi", "mpc") from None
    return casadi


class GaussNewtonSqp:
    """The NLP of eq. 2 built once in CasADi and solved by Gauss-Newton SQP.

    Variables w = [x_0, u_0, x_1, ..., u_N-1, x_N] (multiple-shooting layout); the cost is
    quadratic in w, so its Hessian H = 2 diag(weights) is exact and constant. Each iteration
    solves the QP min ½ dw' H dw + grad' dw s.t. J_g(w) dw = -g(w) (the linearized dynamics),
    the input bounds and x_0 fixed to the measured state, with CasADi's ``conic`` plugin (qrqp or
    osqp), then steps the inputs along du and rolls them out (no gaps at any iterate).
    """

    def __init__(self, cfg: MpcConfig) -> None:
        ca = _casadi()
        self.cfg, n = cfg, cfg.horizon
        self.nw = NX * (n + 1) + NU * n
        w = ca.SX.sym("w", self.nw)
        theta = ca.SX.sym("theta", 8)
        step = self._discrete_model(ca, cfg.dt)
        defects = []
        for k in range(n):
            xk, uk = self._x(w, k), self._u(w, k)
            defects.append(step(xk, uk, theta) - self._x(w, k + 1))
        g = ca.vertcat(*defects)
        jac = ca.jacobian(g, w)
        self.constraints = ca.Function("g", [w, theta], [g, jac])
        self.rollout = self._rollout_function(ca, step, n)
        self.weights = self._weight_vector()
        hess = ca.DM(np.diag(2.0 * self.weights))
        self.hess = ca.DM(ca.sparsify(hess))
        opts: dict[str, Any] = {"error_on_fail": False}
        if cfg.qp_solver == "qrqp":
            opts.update(print_iter=False, print_header=False, print_info=False)
        else:
            opts["osqp"] = {"verbose": False, "eps_abs": 1e-8, "eps_rel": 1e-8, "polish": True}
        self.qp = ca.conic(
            "mpc_qp", cfg.qp_solver, {"h": self.hess.sparsity(), "a": jac.sparsity()}, opts
        )
        self.step = step
        lo, hi = cfg.input_bounds()
        self.lbw = np.full(self.nw, -np.inf)
        self.ubw = np.full(self.nw, np.inf)
        for k in range(n):
            sl = slice(k * (NX + NU) + NX, (k + 1) * (NX + NU))
            self.lbw[sl], self.ubw[sl] = lo, hi

    @staticmethod
    def _x(w: Any, k: int) -> Any:
        return w[k * (NX + NU) : k * (NX + NU) + NX]

    @staticmethod
    def _u(w: Any, k: int) -> Any:
        return w[k * (NX + NU) + NX : (k + 1) * (NX + NU)]

    @staticmethod
    def _discrete_model(ca: Any, dt: float) -> Any:
        """f_d: RK4 of :func:`model_derivative` written in CasADi symbols."""
        x, u, th = ca.SX.sym("x", NX), ca.SX.sym("u", NU), ca.SX.sym("th", 8)
        qw, qx, qy, qz = x[6], x[7], x[8], x[9]
        qv = x[7:10]

        def rotate(w: Any, vec: Any, v: Any) -> Any:  # the formula of quat_rotate
            t = 2 * ca.cross(vec, v)
            return v + w * t + ca.cross(vec, t)

        v_b = rotate(qw, -qv, x[3:6])
        speed = ca.sqrt(ca.sumsqr(v_b) + DRAG_EPS)
        acc_b = ca.vertcat(0, 0, th[1] * u[0] / th[0]) - (th[2:5] + th[5:8] * speed) * v_b / th[0]
        acc = rotate(qw, qv, acc_b) + ca.vertcat(0, 0, -GRAVITY)
        wx, wy, wz = u[1], u[2], u[3]
        q_dot = 0.5 * ca.vertcat(
            -qx * wx - qy * wy - qz * wz,
            qw * wx + qy * wz - qz * wy,
            qw * wy - qx * wz + qz * wx,
            qw * wz + qx * wy - qy * wx,
        )
        f = ca.Function("f", [x, u, th], [ca.vertcat(x[3:6], acc, q_dot)])
        k1 = f(x, u, th)
        k2 = f(x + dt / 2 * k1, u, th)
        k3 = f(x + dt / 2 * k2, u, th)
        k4 = f(x + dt * k3, u, th)
        return ca.Function("f_d", [x, u, th], [x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)])

    def _weight_vector(self) -> np.ndarray:
        q, r = self.cfg.state_weights(), self.cfg.input_weights()
        stage = np.concatenate((q, r))
        return np.concatenate((np.tile(stage, self.cfg.horizon), self.cfg.terminal_factor * q))

    def pack(self, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        """w from states (N + 1, 10) and inputs (N, 4)."""
        n = self.cfg.horizon
        xu = np.concatenate((x[:n], u), axis=1).reshape(-1)
        return np.concatenate((xu, x[n]))

    def unpack(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = self.cfg.horizon
        xu = w[: n * (NX + NU)].reshape(n, NX + NU)
        return np.concatenate((xu[:, :NX], w[None, n * (NX + NU) :])), xu[:, NX:]

    @staticmethod
    def _rollout_function(ca: Any, step: Any, n: int) -> Any:
        """(x_0, u (4 N), theta) -> w: the inputs and the states they produce (no gaps)."""
        x0, u, theta = ca.SX.sym("x0", NX), ca.SX.sym("u", NU * n), ca.SX.sym("theta", 8)
        parts, xk = [x0], x0
        for k in range(n):
            uk = u[k * NU : (k + 1) * NU]
            xk = step(xk, uk, theta)
            parts += [uk, xk]
        return ca.Function("rollout", [x0, u, theta], [ca.vertcat(*parts)])

    def _inputs(self, w: np.ndarray) -> np.ndarray:
        return self.unpack(w)[1].reshape(-1)

    def cost(self, w: np.ndarray, w_ref: np.ndarray) -> float:
        return float(np.sum(self.weights * (w - w_ref) ** 2))

    def solve(
        self, x0: np.ndarray, w_ref: np.ndarray, theta: np.ndarray, u: np.ndarray
    ) -> tuple[np.ndarray, MpcStatus | None, int]:
        """SQP from the inputs ``u`` (N, 4); returns (w, SOLVED / ITER_LIMIT or None on failure,
        iterations). Every iterate is the rollout of its inputs from x_0, so it is dynamically
        feasible: the QP gives the search direction du, the step is the largest of 1, ½, ...,
        1/64 whose rollout lowers the cost (none: the plan is kept, ITER_LIMIT)."""
        lo, hi = self.lbw[NX : NX + NU], self.ubw[NX : NX + NU]
        u = np.clip(u, lo, hi).reshape(-1)
        w = np.asarray(self.rollout(x0, u, theta)).ravel()
        if not np.isfinite(w).all():
            return w, None, 0
        lbw, ubw = self.lbw.copy(), self.ubw.copy()
        lbw[:NX] = ubw[:NX] = x0
        cost = self.cost(w, w_ref)
        for it in range(1, self.cfg.max_iter + 1):
            g, jac = self.constraints(w, theta)
            grad = 2.0 * self.weights * (w - w_ref)
            sol = self.qp(h=self.hess, g=grad, a=jac, lba=-g, uba=-g, lbx=lbw - w, ubx=ubw - w)
            dw = np.asarray(sol["x"]).ravel()
            if not self.qp.stats().get("success", False) or not np.isfinite(dw).all():
                return w, None, it
            if np.abs(dw).max() < self.cfg.tol:
                return w, MpcStatus.SOLVED, it
            step = self._line_search(x0, theta, w, self._inputs(dw), w_ref, cost)
            if step is None:
                return w, MpcStatus.ITER_LIMIT, it
            w, cost = step
        return w, MpcStatus.ITER_LIMIT, self.cfg.max_iter

    def _line_search(
        self,
        x0: np.ndarray,
        theta: np.ndarray,
        w: np.ndarray,
        du: np.ndarray,
        w_ref: np.ndarray,
        cost: float,
    ) -> tuple[np.ndarray, float] | None:
        """First step size alpha in 1, ½, ..., 1/64 whose rollout of u + alpha du (clipped)
        has a lower cost; None when none has."""
        u = self._inputs(w)
        lo = np.tile(self.lbw[NX : NX + NU], self.cfg.horizon)
        hi = np.tile(self.ubw[NX : NX + NU], self.cfg.horizon)
        for k in range(7):
            trial = np.clip(u + 0.5**k * du, lo, hi)
            w_new = np.asarray(self.rollout(x0, trial, theta)).ravel()
            c = self.cost(w_new, w_ref)
            if np.isfinite(c) and c < cost:
                return w_new, c
        return None


class NmpcController(_MpcBase):
    """SOUS VIDE's MPC expert (eq. 2) with CasADi: one Gauss-Newton SQP solve per env and step.

    >>> ctrl = NmpcController(params, figure_eight(3.0, 2.0))
    >>> u = ctrl(state, t[:, None], dt)  # (N, 4) [f_th, W_x, W_y, W_z] for the thrust-rate model

    The solver is built once (for the config; per-env mass, thrust and drag enter as parameters)
    and warm-started from the previous plan shifted by the elapsed time. A failed solve (state or
    reference window not finite, QP failure, non-finite iterate) falls back, per env, to the shifted
    previous plan, else to ``fallback`` (a 'mellinger' or 'position' controller of the thrust-rate
    model), else to the reference feed-forward; ``last_status`` (N,) holds the
    :class:`MpcStatus` codes and a RuntimeWarning is issued once.
    """

    mode = "mpc"

    def _setup(self, params: VehicleParams) -> None:
        self.solver = GaussNewtonSqp(self.config)
        self._theta = MpcPlant.from_params(params).theta()
        self._w = np.zeros((params.n_envs, self.solver.nw))

    def __call__(self, state: MultirotorState, setpoint: Any, dt: float) -> Tensor:
        """Thrust-rate command (N, 4) at reference times ``setpoint`` (N, 1) s."""
        t = self._times(setpoint, dt)
        x_ref, u_ref = self.window(t, state.quat)
        x0 = state_vector(state).cpu().numpy()
        xr, ur = x_ref.cpu().numpy(), u_ref.cpu().numpy()
        guess = self._guess(t, u_ref).cpu().numpy()
        n = self.params.n_envs
        status = torch.zeros(n, dtype=torch.int64)
        start = time.perf_counter()
        for i in range(n):
            status[i], self.last_iterations[i] = self._solve_env(i, x0[i], xr[i], ur[i], guess[i])
        self.last_solve_time = time.perf_counter() - start
        return self._finish(status, state, t, u_ref, dt)

    def _solve_env(
        self, i: int, x0: np.ndarray, xr: np.ndarray, ur: np.ndarray, guess: np.ndarray
    ) -> tuple[int, int]:
        s = self.solver
        if not (np.isfinite(x0).all() and np.isfinite(xr).all() and np.isfinite(ur).all()):
            return -1, 0
        try:
            w, st, it = s.solve(x0, s.pack(xr, ur), self._theta[i], guess)
        except RuntimeError:  # CasADi raises on NaN/inf met inside its functions
            return -1, 0
        if st is None:
            return -1, it
        self._w[i] = w
        return int(st), it

    def _guess(self, t: Tensor, u_ref: Tensor) -> Tensor:
        """Warm-start inputs (N, H, 4): the previous plan shifted to now where it still covers
        now, else the reference feed-forward (the solver rolls them out from the state)."""
        elapsed, usable = self._elapsed(t)
        shifted = shift_plan(self._u_plan, elapsed, self.config.dt)
        return torch.where(usable[:, None, None], shifted, u_ref).nan_to_num()

    def _finish(
        self, status: Tensor, state: MultirotorState, t: Tensor, u_ref: Tensor, dt: float
    ) -> Tensor:
        failed = status < 0
        dev = self.params.device
        w = torch.as_tensor(self._w, device=dev)
        u_new = w[:, NX : NX + NU]
        u_fb, st_fb = self._fallback(failed.to(dev), state, t, u_ref[:, 0], dt)
        u = torch.where(failed.to(dev)[:, None], u_fb, u_new)
        self.last_status = torch.where(failed, st_fb.cpu(), status)
        ok = ~failed.to(dev)
        plans = w[:, :-NX].view(len(w), -1, NX + NU)[..., NX:]
        self._u_plan = torch.where(ok[:, None, None], plans, self._u_plan)
        self._plan_time = torch.where(ok, t, self._plan_time)
        return self._output(u)


# ---- batched iLQR MPC --------------------------------------------------------------------------
class BatchedMpcController(_MpcBase):
    """The MPC of eq. 2 for all N envs in one batched iLQR solve in torch (any device).

    Same reference, config, setpoint, outputs, fallbacks and ``last_status`` as
    :class:`NmpcController`. Computations run in float64 on the params' device. Each control
    step runs up to ``config.max_iter`` iLQR iterations from the shifted previous plan; iLQR
    plans are rollouts of the model, so a plan is always dynamically feasible and a solve fails
    only when it turns non-finite (then the env falls back as in :class:`NmpcController`).
    """

    mode = "mpc_batched"

    def _setup(self, params: VehicleParams) -> None:
        self.plant = MpcPlant.from_params(params)
        # analytic Jacobians pay off from ~640 linearized stages (measured crossover on CPU)
        self._analytic = params.n_envs * self.config.horizon >= ANALYTIC_STAGES
        dev, n = params.device, params.n_envs
        lo, hi = self._u_lo.expand(n, NU), self._u_hi.expand(n, NU)
        self.cost = ilqr.LqrCost(
            q=torch.as_tensor(self.config.state_weights(), device=dev),
            r=torch.as_tensor(self.config.input_weights(), device=dev),
            q_terminal=torch.as_tensor(
                self.config.terminal_factor * self.config.state_weights(), device=dev
            ),
            u_min=lo,
            u_max=hi,
        )

    def _step(self, x: Tensor, u: Tensor) -> Tensor:
        return model_step(self.plant, x, u, self.config.dt)

    def _jacobians(self, x: Tensor, u: Tensor) -> tuple[Tensor, Tensor]:
        return model_step_jacobians(self.plant, x, u, self.config.dt)

    def __call__(self, state: MultirotorState, setpoint: Any, dt: float) -> Tensor:
        """Thrust-rate command (N, 4) at reference times ``setpoint`` (N, 1) s."""
        t = self._times(setpoint, dt)
        x_ref, u_ref = self.window(t, state.quat)
        x0 = state_vector(state)
        elapsed, usable = self._elapsed(t)
        shifted = shift_plan(self._u_plan, elapsed, self.config.dt)
        u_init = torch.where(usable[:, None, None], shifted, u_ref)
        bad_in = ~(torch.isfinite(x0).all(-1) & torch.isfinite(x_ref).all((-1, -2)))
        bad_in = bad_in | ~torch.isfinite(u_ref).all((-1, -2))
        x0 = torch.where(bad_in[:, None], x_ref[:, 0].nan_to_num(), x0)
        res = self._solve(x0, u_init.nan_to_num(), x_ref.nan_to_num(), u_ref.nan_to_num())
        failed = bad_in | ~(torch.isfinite(res.u).all((-1, -2)) & torch.isfinite(res.cost))
        status = torch.where(res.converged, int(MpcStatus.SOLVED), int(MpcStatus.ITER_LIMIT))
        u_fb, st_fb = self._fallback(failed, state, t, u_ref[:, 0], dt)
        u = torch.where(failed[:, None], u_fb, res.u[:, 0])
        self.last_status = torch.where(failed, st_fb, status).cpu()
        self.last_iterations[:] = res.iterations
        self._u_plan = torch.where(failed[:, None, None], self._u_plan, res.u)
        self._plan_time = torch.where(failed, self._plan_time, t)
        return self._output(u)

    def _solve(self, x0: Tensor, u_init: Tensor, x_ref: Tensor, u_ref: Tensor) -> ilqr.IlqrResult:
        start = time.perf_counter()
        res = ilqr.ilqr(
            self._step,
            x0,
            u_init,
            x_ref,
            u_ref,
            self.cost,
            max_iter=self.config.max_iter,
            tol=self.config.tol,
            shift_invariant=3,  # f_d depends on the position only through p_k+1 = p_k + ...
            jacobians=self._jacobians if self._analytic else None,
        )
        if x0.is_cuda:
            torch.cuda.synchronize(x0.device)
        self.last_solve_time = time.perf_counter() - start
        return res


__all__ = [
    "BatchedMpcController",
    "GaussNewtonSqp",
    "MpcConfig",
    "MpcPlant",
    "MpcStatus",
    "NmpcController",
    "ReferenceWindow",
    "align_quaternions",
    "model_derivative",
    "model_step",
]
