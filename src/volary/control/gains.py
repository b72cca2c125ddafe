"""Per-env controller gains: one frozen dataclass of tensors, defaults scaled to each airframe.

Default gains are written as closed-loop natural frequencies and damping ratios and turned into
physical gains with each env's mass and inertia (k_x = m wn^2, k_R = J wn^2, ...), so the same
defaults fly a 27 g Crazyflie and a 5 kg quad. The attitude bandwidth is further capped by the
motor time constant (slow motors get a slower attitude loop) and the position bandwidth stays
within 0.2-0.35 of the attitude bandwidth (0.2 on fast motors, lifted towards a 3.2 rad/s floor on
slow ones), keeping the cascade separated on every airframe.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

import torch
from torch import Tensor

from volary.dynamics.params import VehicleParams
from volary.errors import ConfigError

# FlightGoggles acro loop (paper 001 Sec. IV-F; FlightGoggles vehicle config [rate_controller]).
# The PID outputs angular acceleration, so these transfer across airframes unchanged.
FG_LPF_STIFFNESS = 35530.5758439217  # 1/s^2, k_s: 30 Hz cutoff
FG_LPF_DAMPING = 266.572976289502  # 1/s, k_d: damping ratio 0.707
FG_RATE_P = 9.0  # (rad/s^2)/(rad/s)
FG_RATE_I = 3.0  # (rad/s^2)/rad
FG_RATE_D = 0.3  # (rad/s^2)/(rad/s^2)
FG_RATE_I_BOUND = 1000.0  # rad, bound on the integral of the rate error

# Geometric (Lee) cascade, as natural frequencies (rad/s) and damping ratios.
ATT_WN_MAX = 16.0  # rad/s, roll/pitch attitude bandwidth on fast motors
ATT_WN_MOTOR = 0.32  # attitude wn <= ATT_WN_MOTOR / tau_motor (motor lag caps the bandwidth)
ATT_WN_MIN = 3.0  # rad/s
ATT_ZETA = 0.9
YAW_WN_RATIO = 0.4  # yaw wn / roll-pitch wn (rotor drag torques give little yaw authority)
# Position wn: POS_WN_RATIO x attitude wn (cascade separation), but at least POS_WN_FLOOR as long
# as that stays within POS_WN_RATIO_MAX x attitude wn. The floor only lifts slow-motor airframes
# (attitude wn capped below 16 rad/s by the motor lag); with the plain 0.2 ratio the 5 kg quads
# with 35 ms motors tracked the figure-eight acceptance (tests/test_tracking.py) with 8-9 cm RMS.
POS_WN_RATIO = 0.2
POS_WN_RATIO_MAX = 0.35
POS_WN_FLOOR = POS_WN_RATIO * ATT_WN_MAX  # rad/s, 3.2: the fast-motor position bandwidth
POS_ZETA = 0.9
VEL_WN_RATIO = 0.4  # velocity-mode loop: k_v = m * VEL_WN_RATIO * att wn (first order)
THRUST_RATE_ATT_P = 10.0  # 1/s, attitude P law of the thrust-rate model: W_cmd = -k e_R
MAX_TILT = math.radians(45.0)  # rad


@dataclass(frozen=True)
class Gains:
    """Gains of every control level for N envs (override per env with :meth:`override`)."""

    lpf_stiffness: Tensor  # (N,) 1/s^2, k_s of the FlightGoggles rate low-pass filter
    lpf_damping: Tensor  # (N,) 1/s, k_d of the rate low-pass filter
    rate_p: Tensor  # (N, 3) 1/s, rate PID proportional (rad/s^2 per rad/s)
    rate_i: Tensor  # (N, 3) 1/s^2, rate PID integral
    rate_d: Tensor  # (N, 3) -, rate PID derivative (on the filtered rate)
    rate_i_bound: Tensor  # (N, 3) rad, bound on the rate-error integral
    k_R: Tensor  # (N, 3) N m/rad, Lee attitude gain (body axes)
    k_W: Tensor  # (N, 3) N m s/rad, Lee angular-rate gain
    k_att_rate: Tensor  # (N, 3) 1/s, thrust-rate model: body rate per rad of attitude error
    k_x: Tensor  # (N, 3) N/m, Lee position gain (world axes)
    k_v: Tensor  # (N, 3) N s/m, Lee velocity gain in position/pose/mellinger modes
    k_v_vel: Tensor  # (N, 3) N s/m, velocity gain of the velocity mode
    max_tilt: Tensor  # (N,) rad, largest tilt the translational modes command

    @staticmethod
    def default(params: VehicleParams) -> Gains:
        """Gains scaled to each env's mass, inertia and motor time constant."""
        n = params.n_envs
        m = params.mass[:, None]
        j = torch.diagonal(params.inertia, dim1=-2, dim2=-1)
        wn_att = (ATT_WN_MOTOR / _motor_tau(params)).clamp(ATT_WN_MIN, ATT_WN_MAX)[:, None]
        wn = wn_att * wn_att.new_tensor([1.0, 1.0, YAW_WN_RATIO])
        wn_pos = torch.minimum(
            (POS_WN_RATIO * wn_att).clamp_min(POS_WN_FLOOR), POS_WN_RATIO_MAX * wn_att
        )

        def full(v: float, *shape: int) -> Tensor:
            return torch.full((n, *shape), v, device=params.device, dtype=params.dtype)

        return Gains(
            lpf_stiffness=full(FG_LPF_STIFFNESS),
            lpf_damping=full(FG_LPF_DAMPING),
            rate_p=full(FG_RATE_P, 3),
            rate_i=full(FG_RATE_I, 3),
            rate_d=full(FG_RATE_D, 3),
            rate_i_bound=full(FG_RATE_I_BOUND, 3),
            k_R=j * wn * wn,
            k_W=j * 2.0 * ATT_ZETA * wn,
            k_att_rate=full(THRUST_RATE_ATT_P, 3),
            k_x=(m * wn_pos * wn_pos).expand(n, 3).clone(),
            k_v=(m * 2.0 * POS_ZETA * wn_pos).expand(n, 3).clone(),
            k_v_vel=(m * VEL_WN_RATIO * wn_att).expand(n, 3).clone(),
            max_tilt=full(MAX_TILT),
        )

    @property
    def n_envs(self) -> int:
        return int(self.max_tilt.shape[0])

    def override(self, **changes: Any) -> Gains:
        """A copy with some gains changed; scalars, per-axis (3,) and per-env values broadcast."""
        out = {}
        for name, value in changes.items():
            if name not in {f.name for f in fields(self)}:
                valid = ", ".join(f.name for f in fields(self))
                raise ConfigError(f"gains: unknown gain {name!r}; valid names: {valid}")
            ref = getattr(self, name)
            t = torch.as_tensor(value, device=ref.device, dtype=ref.dtype)
            try:
                out[name] = torch.broadcast_to(t, ref.shape).clone()
            except RuntimeError:
                raise ConfigError(
                    f"gains.{name}: expected a shape broadcastable to {tuple(ref.shape)}, "
                    f"got {tuple(t.shape)}"
                ) from None
        return replace(self, **out)

    def index(self, idx: Any) -> Gains:
        """A sub-batch of envs."""
        return Gains(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    def check(self, params: VehicleParams) -> None:
        """Raise ConfigError unless every gain has the env dim of ``params`` and its device."""
        for f in fields(self):
            v = getattr(self, f.name)
            if v.shape[0] != params.n_envs or v.device != params.device:
                raise ConfigError(
                    f"gains.{f.name}: expected {params.n_envs} envs on {params.device}, "
                    f"got shape {tuple(v.shape)} on {v.device}"
                )


def _motor_tau(params: VehicleParams) -> Tensor:
    """(N,) slowest motor time constant (s) among the env's real (non-padded) rotors."""
    tau = torch.maximum(params.tau_up, params.tau_down)
    tau = torch.where(params.k_f > 0, tau, torch.zeros_like(tau))
    return tau.amax(dim=-1).clamp_min(1e-4)
