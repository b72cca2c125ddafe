"""Controllers at every abstraction level, batched over envs, picked by name.

``make_controller(mode, params, model=..., gains=...)`` returns a :class:`MultirotorController`
whose call maps (state, setpoint, dt) to the command of the dynamics model: rotor speeds (N, R)
for ``rigid_body``, [f_th, W_x, W_y, W_z] (N, 4) for ``thrust_rate``. See DESIGN.md for the
cascade and the setpoint table.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

import torch
from torch import Tensor

import volary.control.geometric as geo
from volary.control.gains import Gains
from volary.control.rate import RateLoopState, lowpass_step, rate_moment, rate_pid
from volary.dynamics.allocation import allocate, thrusts_to_speeds
from volary.dynamics.params import VehicleParams
from volary.dynamics.state import MultirotorState
from volary.dynamics.step import Model
from volary.errors import ConfigError
from volary.math.quaternion import quat_from_euler, quat_to_rotmat
from volary.registry import parse_enum


class ControlMode(StrEnum):
    """Control levels, lowest first (setpoints in SI, world frame z-up, body FLU)."""

    ROTOR_SPEEDS = "rotor_speeds"  # (N, R) rad/s
    ROTOR_THRUSTS = "rotor_thrusts"  # (N, R) N
    WRENCH = "wrench"  # (N, 6) body [f; m] N, N m
    CTBR = "ctbr"  # (N, 4) [collective thrust N, W_x, W_y, W_z rad/s]
    ATTITUDE = "attitude"  # (N, 4) [collective thrust N, roll, pitch, yaw rad]
    ACCELERATION = "acceleration"  # (N, 4) [a_x, a_y, a_z m/s^2, yaw rad]
    VELOCITY = "velocity"  # (N, 4) [v_x, v_y, v_z m/s, yaw rad]
    POSITION = "position"  # (N, 4) [x, y, z m, yaw rad]
    POSE = "pose"  # (N, 6) [x, y, z m, roll, pitch, yaw rad]
    MELLINGER = "mellinger"  # (N, 14) [p, v, a, jerk, yaw, yaw_rate]


CONTROL_MODES: tuple[str, ...] = tuple(m.value for m in ControlMode)
_FIXED_SIZES = {
    ControlMode.WRENCH: 6,
    ControlMode.CTBR: 4,
    ControlMode.ATTITUDE: 4,
    ControlMode.ACCELERATION: 4,
    ControlMode.VELOCITY: 4,
    ControlMode.POSITION: 4,
    ControlMode.POSE: 6,
    ControlMode.MELLINGER: 14,
}
_RIGID_ONLY = (ControlMode.ROTOR_SPEEDS, ControlMode.ROTOR_THRUSTS, ControlMode.WRENCH)


def make_controller(
    mode: str,
    params: VehicleParams,
    *,
    model: str | Model = "rigid_body",
    gains: Gains | None = None,
) -> MultirotorController:
    """The controller of ``mode`` for the vehicles ``params`` flying the dynamics ``model``.

    Unknown modes or models raise UnknownNameError listing the valid names; rotor- and
    wrench-level modes with the thrust-rate model raise ConfigError.
    """
    m = parse_enum(ControlMode, mode, "control mode")
    dyn = parse_enum(Model, model, "model")
    if dyn == Model.THRUST_RATE and m in _RIGID_ONLY:
        raise ConfigError(
            f"mode {m.value!r} commands rotors and needs model 'rigid_body'; the 'thrust_rate' "
            "model takes [f_th, body rates]: use 'ctbr' or a higher mode"
        )
    g = Gains.default(params) if gains is None else gains
    if not isinstance(g, Gains):
        raise ConfigError(f"gains: expected volary.control.Gains or None, got {type(g).__name__}")
    g.check(params)
    return MultirotorController(m, params, dyn, g)


class MultirotorController:
    """One control mode for N envs; holds the rate-loop filter/integrator state (ctbr)."""

    def __init__(self, mode: ControlMode, params: VehicleParams, model: Model, gains: Gains):
        self.mode: str = mode.value
        self.params, self.model, self.gains = params, model, gains
        self.setpoint_size: int = _FIXED_SIZES.get(mode, params.n_rotors)
        self._rate = RateLoopState.create(params.n_envs, device=params.device, dtype=params.dtype)
        self._law: Callable[[MultirotorState, Tensor, float], Tensor] = {
            ControlMode.ROTOR_SPEEDS: self._rotor_speeds,
            ControlMode.ROTOR_THRUSTS: self._thrusts,
            ControlMode.WRENCH: self._wrench,
            ControlMode.CTBR: self._ctbr,
            ControlMode.ATTITUDE: self._attitude,
            ControlMode.ACCELERATION: self._acceleration,
            ControlMode.VELOCITY: self._velocity,
            ControlMode.POSITION: self._position,
            ControlMode.POSE: self._pose,
            ControlMode.MELLINGER: self._mellinger,
        }[mode]
        full = params.actuated.all(dim=-1)
        self._fully_actuated = full  # (N,) bool: pose mode uses body forces on these envs

    @property
    def rate_state(self) -> RateLoopState:
        """Filter and integrator state of the acro loop (used by the ``ctbr`` mode)."""
        return self._rate

    def __call__(self, state: MultirotorState, setpoint: Tensor, dt: float) -> Tensor:
        """The dynamics command for ``setpoint`` (N, setpoint_size), held for ``dt`` seconds."""
        n = self.params.n_envs
        if tuple(setpoint.shape) != (n, self.setpoint_size):
            raise ConfigError(
                f"setpoint: mode {self.mode!r} expects shape ({n}, {self.setpoint_size}), "
                f"got {tuple(setpoint.shape)}"
            )
        if setpoint.device != self.params.device:
            raise ConfigError(
                f"setpoint: expected device {self.params.device}, got {setpoint.device}"
            )
        if not dt > 0:
            raise ConfigError(f"dt: expected a control period > 0 s, got {dt}")
        return self._law(state, setpoint.to(self.params.dtype), float(dt))

    def reset(self, mask: Tensor | None = None) -> None:
        """Clear integrators and filters of the envs where ``mask`` (N,) is True (all if None)."""
        if mask is None:
            mask = torch.ones(self.params.n_envs, dtype=torch.bool, device=self.params.device)
        self._rate = self._rate.reset(mask.to(device=self.params.device, dtype=torch.bool))

    # ---- rotor and wrench levels (rigid-body model only) -------------------------------------
    def _rotor_speeds(self, state: MultirotorState, sp: Tensor, dt: float) -> Tensor:
        return torch.minimum(torch.maximum(sp, self.params.w_min), self.params.w_max)

    def _thrusts(self, state: MultirotorState, sp: Tensor, dt: float) -> Tensor:
        return thrusts_to_speeds(self.params, sp)

    def _wrench(self, state: MultirotorState, sp: Tensor, dt: float) -> Tensor:
        return allocate(self.params, sp)

    # ---- body-rate level: FlightGoggles acro loop --------------------------------------------
    def _ctbr(self, state: MultirotorState, sp: Tensor, dt: float) -> Tensor:
        thrust, rate_cmd = sp[:, 0], sp[:, 1:]
        if self.model == Model.THRUST_RATE:
            return self._thrust_rate_command(thrust, rate_cmd)
        moment = self._rate_loop(state.omega, rate_cmd, dt)
        return allocate(self.params, self._wrench_from(thrust, moment))

    def _rate_loop(self, omega: Tensor, rate_cmd: Tensor, dt: float) -> Tensor:
        g, s = self.gains, self._rate
        fresh = s.fresh[:, None]
        y = torch.where(fresh, omega, s.rate)
        y_dot = torch.where(fresh, torch.zeros_like(omega), s.rate_dot)
        integral = torch.where(fresh, torch.zeros_like(omega), s.integral)
        y, y_dot = lowpass_step(
            y, y_dot, omega, g.lpf_stiffness[:, None], g.lpf_damping[:, None], dt
        )
        alpha, integral = rate_pid(
            rate_cmd - y, integral, y_dot, g.rate_p, g.rate_i, g.rate_d, g.rate_i_bound, dt
        )
        self._rate = RateLoopState(y, y_dot, integral, torch.zeros_like(s.fresh))
        return rate_moment(self.params.inertia, omega, alpha)

    # ---- attitude level: Lee geometric control -----------------------------------------------
    def _attitude(self, state: MultirotorState, sp: Tensor, dt: float) -> Tensor:
        R_d = quat_to_rotmat(quat_from_euler(sp[:, 1], sp[:, 2], sp[:, 3]))
        thrust = sp[:, 0].clamp_min(0.0).minimum(self.params.max_thrust)
        return self._attitude_stage(state, thrust, R_d, torch.zeros_like(sp[:, 1:]))

    def _attitude_stage(
        self,
        state: MultirotorState,
        thrust: Tensor,
        R_d: Tensor,
        omega_d: Tensor,
        force_body: Tensor | None = None,
    ) -> Tensor:
        """Track (R_d, W_d) with collective thrust ``thrust``: Lee moment + allocation for the
        rigid body, a P law on e_R for the thrust-rate model. ``force_body`` (N, 3) replaces
        [0, 0, thrust] in the allocated wrench (fully-actuated pose control)."""
        R = quat_to_rotmat(state.quat)
        e_R = geo.attitude_error(R, R_d)
        if self.model == Model.THRUST_RATE:
            ff = geo._bmv(geo.mtm(R, R_d), omega_d)
            return self._thrust_rate_command(thrust, ff - self.gains.k_att_rate * e_R)
        e_W = geo.rate_error(R, R_d, state.omega, omega_d)
        g = self.gains
        moment = geo.lee_moment(self.params.inertia, state.omega, e_R, e_W, g.k_R, g.k_W)
        return allocate(self.params, self._wrench_from(thrust, moment, force_body))

    # ---- translational levels: Lee position / velocity / acceleration, pose, Mellinger -------
    def _acceleration(self, state: MultirotorState, sp: Tensor, dt: float) -> Tensor:
        z = torch.zeros_like(sp[:, :3])
        return self._track_force(state, z, z, sp[:, :3], sp[:, 3])

    def _velocity(self, state: MultirotorState, sp: Tensor, dt: float) -> Tensor:
        z = torch.zeros_like(sp[:, :3])
        e_v = state.vel - sp[:, :3]
        F = geo.desired_force(self.params.mass, z, e_v, z, z, self.gains.k_v_vel)
        return self._track(state, F, sp[:, 3])

    def _position(self, state: MultirotorState, sp: Tensor, dt: float) -> Tensor:
        z = torch.zeros_like(sp[:, :3])
        return self._track_force(state, state.pos - sp[:, :3], state.vel, z, sp[:, 3])

    def _mellinger(self, state: MultirotorState, sp: Tensor, dt: float) -> Tensor:
        e_x, e_v = state.pos - sp[:, 0:3], state.vel - sp[:, 3:6]
        return self._track_force(state, e_x, e_v, sp[:, 6:9], sp[:, 12], sp[:, 9:12], sp[:, 13])

    def _track_force(
        self,
        state: MultirotorState,
        e_x: Tensor,
        e_v: Tensor,
        acc: Tensor,
        yaw: Tensor,
        jerk: Tensor | None = None,
        yaw_rate: Tensor | None = None,
    ) -> Tensor:
        g = self.gains
        F = geo.desired_force(self.params.mass, e_x, e_v, acc, g.k_x, g.k_v)
        return self._track(state, F, yaw, jerk, yaw_rate)

    def _track(
        self,
        state: MultirotorState,
        F: Tensor,
        yaw: Tensor,
        jerk: Tensor | None = None,
        yaw_rate: Tensor | None = None,
    ) -> Tensor:
        """Desired world force -> (thrust, R_d, W_d) -> attitude stage (Lee / Mellinger)."""
        p = self.params
        F = geo.limit_force(F, p.mass, p.max_thrust, self.gains.max_tilt)
        R_d = geo.rotation_from_thrust_yaw(F, yaw)
        thrust = geo.collective_thrust(F, quat_to_rotmat(state.quat), p.max_thrust)
        if jerk is None or yaw_rate is None:  # static: set-point modes have no feed-forward
            omega_d = torch.zeros_like(F)
        else:
            omega_d = geo.flat_body_rates(R_d, F.norm(dim=-1), p.mass, jerk, yaw_rate)
        return self._attitude_stage(state, thrust, R_d, omega_d)

    def _pose(self, state: MultirotorState, sp: Tensor, dt: float) -> Tensor:
        """Fully-actuated envs: world force from position PD, rotated into the body and allocated
        with the attitude moments. Under-actuated envs (and the thrust-rate model) ignore roll and
        pitch and fly like ``position`` with the setpoint's yaw."""
        z = torch.zeros_like(sp[:, :3])
        as_position = self._track_force(state, state.pos - sp[:, :3], state.vel, z, sp[:, 5])
        if self.model == Model.THRUST_RATE:
            return as_position
        g, p = self.gains, self.params
        F = geo.desired_force(p.mass, state.pos - sp[:, :3], state.vel, z, g.k_x, g.k_v)
        R = quat_to_rotmat(state.quat)
        f_body = (R * F[..., :, None]).sum(-2)  # R^T F
        R_d = quat_to_rotmat(quat_from_euler(sp[:, 3], sp[:, 4], sp[:, 5]))
        full = self._attitude_stage(state, f_body[:, 2], R_d, z, force_body=f_body)
        return torch.where(self._fully_actuated[:, None], full, as_position)

    # ---- output stages -------------------------------------------------------------------------
    def _wrench_from(
        self,
        thrust: Tensor,
        moment: Tensor,
        force_body: Tensor | None = None,
    ) -> Tensor:
        if force_body is None:
            z = torch.zeros_like(thrust)
            force_body = torch.stack((z, z, thrust), dim=-1)
        return torch.cat((force_body, moment), dim=-1)

    def _thrust_rate_command(self, thrust: Tensor, rates: Tensor) -> Tensor:
        f_th = (thrust / self.params.max_thrust).clamp(0.0, 1.0)
        return torch.cat((f_th[:, None], rates), dim=-1)
