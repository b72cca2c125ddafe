"""Batched vehicle parameters: every physical parameter is a tensor with the env dim first.

One batch may mix airframes with different rotor counts: rotors are padded to the largest count
with inert rotors (k_f = k_m = 0, max speed 0), which produce no force and get no allocation.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import torch
from torch import Tensor

from volary.dynamics.airframe import Airframe
from volary.errors import ConfigError


@dataclass(frozen=True)
class VehicleParams:
    """Physical parameters of N vehicles; R is the (padded) rotor count."""

    mass: Tensor  # (N,) kg
    inertia: Tensor  # (N, 3, 3) kg m^2
    inertia_inv: Tensor  # (N, 3, 3) 1/(kg m^2)
    rotor_pos: Tensor  # (N, R, 3) m, body frame
    rotor_axis: Tensor  # (N, R, 3) unit, body frame
    rotor_dir: Tensor  # (N, R) +1/-1 spin direction (0 on padded rotors)
    k_f: Tensor  # (N, R) N/(rad/s)^2
    k_m: Tensor  # (N, R) N m/(rad/s)^2
    w_min: Tensor  # (N, R) rad/s
    w_max: Tensor  # (N, R) rad/s
    tau_up: Tensor  # (N, R) s
    tau_down: Tensor  # (N, R) s
    drag_lin: Tensor  # (N, 3) N/(m/s)
    drag_quad: Tensor  # (N, 3) N/(m/s)^2
    drag_moment: Tensor  # (N, 3) N m/(rad/s)^2
    force_noise: Tensor  # (N,) N/sqrt(Hz)
    moment_noise: Tensor  # (N,) N m/sqrt(Hz)
    radius: Tensor  # (N,) m collision sphere
    collider_half: Tensor  # (N, 3) m half extents of the frame's box collider (body x, y, z)
    alloc: Tensor  # (N, 6, R) wrench = alloc @ T, T_i = k_f w|w| (N)
    alloc_pinv: Tensor  # (N, R, 6) pseudo-inverse over the controllable axes
    actuated: Tensor  # (N, 6) bool, wrench axes the rotors can produce independently
    max_thrust: Tensor  # (N,) N, collective thrust along body z at full speed
    rate_tau: Tensor  # (N,) s, body-rate lag of the thrust-rate model (0: rates applied directly)
    aero: Tensor  # (N, 6) rotor aerodynamics [k_d, k_z, k_flap, k_ax, k_tl, rho] (aero.COEFFS)

    @functools.cached_property
    def has_aero(self) -> bool:
        """Whether any vehicle has a rotor-aerodynamics coefficient (one host sync per
        parameter object): with none the steppers run the ideal-rotor code unchanged."""
        return bool((self.aero != 0).any())

    @property
    def n_envs(self) -> int:
        return int(self.mass.shape[0])

    @property
    def n_rotors(self) -> int:
        return int(self.k_f.shape[-1])

    @property
    def device(self) -> torch.device:
        return self.mass.device

    @property
    def dtype(self) -> torch.dtype:
        return self.mass.dtype

    @property
    def t_min(self) -> Tensor:
        """(N, R) smallest rotor thrust (N)."""
        return self.k_f * self.w_min * self.w_min.abs()

    @property
    def t_max(self) -> Tensor:
        """(N, R) largest rotor thrust (N)."""
        return self.k_f * self.w_max * self.w_max.abs()

    @staticmethod
    def from_airframes(
        airframes: Airframe | Sequence[Airframe],
        n_envs: int | None = None,
        *,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
        rate_tau: float = 0.0,
    ) -> VehicleParams:
        """Stack airframes into batched parameters.

        ``airframes`` is one airframe (repeated ``n_envs`` times) or one per env; a list shorter
        than ``n_envs`` is tiled, so ``n_envs=36`` with 36 platforms gives one of each.
        """
        afs = [airframes] if isinstance(airframes, Airframe) else list(airframes)
        if not afs or not all(isinstance(a, Airframe) for a in afs):
            raise ConfigError("airframes: expected an Airframe or a non-empty list of Airframes")
        n = len(afs) if n_envs is None else int(n_envs)
        if n < 1:
            raise ConfigError(f"n_envs: expected >= 1, got {n}")
        per_env = [afs[i % len(afs)] for i in range(n)]
        uniq = {id(a): _airframe_arrays(a, max(x.n_rotors for x in afs)) for a in afs}
        cols = {k: np.stack([uniq[id(a)][k] for a in per_env]) for k in uniq[id(afs[0])]}
        t = {k: torch.as_tensor(v, dtype=dtype, device=device) for k, v in cols.items()}
        t["actuated"] = t["actuated"] > 0.5
        t["rate_tau"] = torch.full((n,), float(rate_tau), dtype=dtype, device=device)
        return VehicleParams(**t)._known_aero(bool(np.any(cols["aero"] != 0)))

    def _known_aero(self, on: bool) -> VehicleParams:
        """Set :attr:`has_aero` from the host (no device read); returns self."""
        self.__dict__["has_aero"] = on
        return self

    def _aero_of(self, other: VehicleParams) -> VehicleParams:
        """Carry ``other``'s :attr:`has_aero` over when it is known (a sub-batch or a copy of
        it: true stays a safe answer, a vehicle without coefficients flies the same on the aero
        path); returns self."""
        if "has_aero" in other.__dict__:
            self.__dict__["has_aero"] = other.__dict__["has_aero"]
        return self

    def to(self, device: torch.device | str | None = None, dtype: torch.dtype | None = None):
        """Move every tensor (floating ones cast to ``dtype`` when given)."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = (
                v.to(device=device, dtype=dtype) if v.is_floating_point() else v.to(device)
            )
        return VehicleParams(**out)._aero_of(self)

    def index(self, idx: Any) -> VehicleParams:
        """A sub-batch (``idx`` a slice, index tensor or boolean mask over envs)."""
        sub = VehicleParams(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})
        return sub._aero_of(self)

    def replace(self, **changes: Tensor) -> VehicleParams:
        new = replace(self, **changes)
        return new if "aero" in changes else new._aero_of(self)


def _airframe_arrays(a: Airframe, r_pad: int) -> dict[str, np.ndarray]:
    r = a.n_rotors
    pad = r_pad - r

    def rotors(v: Sequence[float], fill: float = 0.0) -> np.ndarray:
        return np.concatenate((np.asarray(v, float), np.full(pad, fill)))

    def rows(v: Sequence[Sequence[float]], fill: Sequence[float]) -> np.ndarray:
        return np.concatenate((np.asarray(v, float), np.tile(np.asarray(fill, float), (pad, 1))))

    alloc = np.concatenate((a.allocation_matrix(), np.zeros((6, pad))), axis=1)
    actuated = _actuated_axes(a.allocation_matrix())
    masked = alloc * actuated[:, None]
    inertia = np.asarray(a.inertia)
    return {
        "mass": np.asarray(a.mass),
        "inertia": inertia,
        "inertia_inv": np.linalg.inv(inertia),
        "rotor_pos": rows(a.rotor_positions, (0, 0, 0)),
        "rotor_axis": rows(a.rotor_axes, (0, 0, 1)),
        "rotor_dir": rotors(a.rotor_directions),
        "k_f": rotors(a.k_f),
        "k_m": rotors(a.k_m),
        "w_min": rotors(a.min_rotor_speed),
        "w_max": rotors(a.max_rotor_speed),
        "tau_up": rotors(a.motor_tau_up, 1.0),
        "tau_down": rotors(a.motor_tau_down, 1.0),
        "drag_lin": np.asarray(a.drag_linear),
        "drag_quad": np.asarray(a.drag_quadratic),
        "drag_moment": np.asarray(a.drag_moment),
        "force_noise": np.asarray(a.force_noise),
        "moment_noise": np.asarray(a.moment_noise),
        "radius": np.asarray(a.radius),
        "collider_half": np.asarray(a.collider_half_extents),
        "alloc": alloc,
        "alloc_pinv": np.linalg.pinv(masked, rcond=1e-9),
        "actuated": actuated.astype(float),
        "max_thrust": np.asarray(a.max_thrust),
        "aero": np.asarray(a.aero),
    }


def _actuated_axes(alloc: np.ndarray) -> np.ndarray:
    """Wrench axes controlled independently: all six for full rank, else (f_z, m_x, m_y, m_z)."""
    if np.linalg.matrix_rank(alloc, tol=1e-9) == 6:
        return np.ones(6, dtype=bool)
    return np.array([False, False, True, True, True, True])
