"""One vehicle's physical description, validated once: the unit every catalogue entry becomes.

Rotor conventions (body frame B, FLU): rotor i sits at ``rotor_positions[i]`` (m), pushes along
the unit ``rotor_axes[i]`` with thrust k_f w|w| (N), and exerts a reaction moment
``rotor_directions[i] * k_m * w|w|`` about that axis. ``rotor_directions[i] = +1`` for a rotor
turning clockwise seen from above (its drag torque on the body is counter-clockwise, +z),
-1 for counter-clockwise (FlightGoggles Sec. IV; EQUATIONS.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from volary.errors import ConfigError

Vec3 = tuple[float, float, float]
# Airframe fields of the rotor aerodynamics, in the order of dynamics.aero.COEFFS
AERO_FIELDS = (
    "rotor_drag_inplane",
    "rotor_drag_axial",
    "flapping",
    "inflow_axial",
    "translational_lift",
    "ground_effect_radius",
)


def _vec(name: str, value: Any, n: int | None = None) -> tuple[float, ...]:
    arr = np.asarray(value, dtype=float).reshape(-1)
    if n is not None and arr.size == 1:
        arr = np.full(n, float(arr[0]))
    if n is not None and arr.size != n:
        raise ConfigError(f"{name}: expected {n} values, got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f"{name}: expected finite values, got {arr.tolist()}")
    return tuple(float(a) for a in arr)


@dataclass(frozen=True)
class Airframe:
    """A multirotor's rigid-body, rotor, motor and drag parameters (SI units).

    Per-rotor fields accept a scalar (same for every rotor) or one value per rotor.
    """

    name: str
    mass: float  # kg
    inertia: tuple[Vec3, Vec3, Vec3]  # kg m^2, body frame about the centre of mass
    rotor_positions: tuple[Vec3, ...]  # m, body frame
    rotor_axes: tuple[Vec3, ...]  # unit thrust directions, body frame
    rotor_directions: tuple[float, ...]  # +1 clockwise (reaction torque +axis), -1 otherwise
    k_f: tuple[float, ...]  # N/(rad/s)^2, thrust = k_f w|w|
    k_m: tuple[float, ...]  # N m/(rad/s)^2, reaction torque = k_m w|w|
    max_rotor_speed: tuple[float, ...]  # rad/s
    min_rotor_speed: tuple[float, ...] = (0.0,)  # rad/s
    motor_tau_up: tuple[float, ...] = (0.02,)  # s, first-order lag when speeding up
    motor_tau_down: tuple[float, ...] = (0.02,)  # s, when slowing down
    drag_linear: Vec3 = (0.0, 0.0, 0.0)  # N/(m/s), body axes
    drag_quadratic: Vec3 = (0.0, 0.0, 0.0)  # N/(m/s)^2, f = -c |v| v per body axis
    drag_moment: Vec3 = (0.0, 0.0, 0.0)  # N m/(rad/s)^2, m_a = -|W| C_a W
    force_noise: float = 0.0  # N/sqrt(Hz), stochastic force intensity sigma_f
    moment_noise: float = 0.0  # N m/sqrt(Hz), stochastic moment intensity sigma_m
    collider_radius: float | None = None  # m; default: arm length + 0.3 * arm length
    frame_height: float | None = None  # m, props to landing gear; default: half the arm length
    # rotor aerodynamics (dynamics/aero.py, equations A3-A6); 0 = the effect is off
    rotor_drag_inplane: float = 0.0  # N/((rad/s)(m/s)), H-force -|w| k_d u_p (A5)
    rotor_drag_axial: float = 0.0  # N/((rad/s)(m/s)), H-force -|w| k_z u_a n (A5)
    flapping: float = 0.0  # N m/((rad/s)(m/s)), blade-flapping moment k_flap |w| u_p x n (A6)
    inflow_axial: float = 0.0  # N/((rad/s)(m/s)), thrust loss -k_ax |w| u_a (A3)
    translational_lift: float = 0.0  # N/((rad/s)(m/s)^2), thrust gain k_tl |w| |u_p|^2 (A3)
    ground_effect_radius: float = 0.0  # m, rotor radius rho of the ground effect (A4)
    # downwash on the vehicles below (volary.sim.downwash, Bauersfeld et al. 2025's jet); 0 = off
    downwash: float = 0.0  # 1, scale of the published jet velocity (1: as published)
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        n = len(self.rotor_positions)
        if n < 1:
            raise ConfigError(f"{self.name}: rotor_positions: expected at least one rotor")
        set_ = object.__setattr__
        set_(self, "inertia", _inertia(self.name, self.inertia))
        set_(self, "rotor_positions", _rows(f"{self.name}: rotor_positions", self.rotor_positions))
        axes = _rows(f"{self.name}: rotor_axes", self.rotor_axes, n)
        norms = [math.sqrt(sum(c * c for c in a)) for a in axes]
        if min(norms) < 1e-9:
            raise ConfigError(f"{self.name}: rotor_axes: expected non-zero vectors")
        set_(
            self,
            "rotor_axes",
            tuple(tuple(c / m for c in a) for a, m in zip(axes, norms, strict=False)),
        )
        for fname in (
            "rotor_directions",
            "k_f",
            "k_m",
            "max_rotor_speed",
            "min_rotor_speed",
            "motor_tau_up",
            "motor_tau_down",
        ):
            set_(self, fname, _vec(f"{self.name}: {fname}", getattr(self, fname), n))
        for fname in ("drag_linear", "drag_quadratic", "drag_moment"):
            set_(self, fname, _vec(f"{self.name}: {fname}", getattr(self, fname), 3))
        self._check_ranges()

    def _check_ranges(self) -> None:
        def positive(fname: str, values: Sequence[float], strict: bool = True) -> None:
            bad = [v for v in values if not (v > 0 if strict else v >= 0) or not math.isfinite(v)]
            if bad:
                sign = "> 0" if strict else ">= 0"
                raise ConfigError(
                    f"{self.name}: {fname}: expected finite values {sign}, got {bad[0]}"
                )

        positive("mass", [self.mass])
        positive("k_f", self.k_f)
        positive("k_m", self.k_m, strict=False)
        positive("max_rotor_speed", self.max_rotor_speed)
        positive("motor_tau_up", self.motor_tau_up)
        positive("motor_tau_down", self.motor_tau_down)
        positive("drag_linear", self.drag_linear, strict=False)
        positive("drag_quadratic", self.drag_quadratic, strict=False)
        positive("drag_moment", self.drag_moment, strict=False)
        positive("force_noise", [self.force_noise], strict=False)
        for fname in ("collider_radius", "frame_height"):
            if getattr(self, fname) is not None:
                positive(fname, [getattr(self, fname)])
        positive("moment_noise", [self.moment_noise], strict=False)
        for fname in AERO_FIELDS:
            positive(fname, [getattr(self, fname)], strict=False)
        positive("downwash", [self.downwash], strict=False)
        if self.downwash > 0:
            self._check_downwash()
        if any(d not in (-1.0, 1.0) for d in self.rotor_directions):
            raise ConfigError(f"{self.name}: rotor_directions: expected +1 or -1 per rotor")
        if any(lo > hi for lo, hi in zip(self.min_rotor_speed, self.max_rotor_speed, strict=False)):
            raise ConfigError(f"{self.name}: min_rotor_speed: expected <= max_rotor_speed")
        rank = np.linalg.matrix_rank(self.allocation_matrix()[2:], tol=1e-9)
        if rank < 4:
            raise ConfigError(
                f"{self.name}: allocation matrix: rank {rank} for the controlled axes "
                "(thrust, roll, pitch, yaw); expected 4: the rotors cannot control this vehicle"
            )

    def _check_downwash(self) -> None:
        """The jet needs a propeller radius (momentum theory's disc area) and rotors off the
        body z axis (its length scale)."""
        if self.ground_effect_radius <= 0 and self.prop_radius <= 0:
            raise ConfigError(
                f"{self.name}: downwash: needs a propeller radius: set ground_effect_radius or a "
                "collider_radius larger than the arm length"
            )
        if max(math.hypot(p[0], p[1]) for p in self.rotor_positions) < 1e-9:
            raise ConfigError(f"{self.name}: downwash: needs rotors off the body z axis")

    @property
    def aero(self) -> tuple[float, ...]:
        """The rotor-aerodynamics coefficients in ``aero.COEFFS`` order (all 0: none)."""
        return tuple(float(getattr(self, f)) for f in AERO_FIELDS)

    @property
    def n_rotors(self) -> int:
        return len(self.rotor_positions)

    @property
    def arm_length(self) -> float:
        """Largest rotor distance from the centre of mass (m)."""
        return float(max(np.linalg.norm(p) for p in self.rotor_positions))

    @property
    def radius(self) -> float:
        """Collision-sphere radius (m)."""
        return self.collider_radius if self.collider_radius is not None else 1.3 * self.arm_length

    @property
    def prop_radius(self) -> float:
        """Propeller radius (m) the collision sphere implies: its radius minus the arm length
        (the sphere is arm + propeller radius), at least 0."""
        return max(0.0, self.radius - self.arm_length)

    @property
    def collider_half_extents(self) -> Vec3:
        """Half extents (m, body x, y, z) of the oriented box that fits the frame: the rotor
        discs' span in x and y (max |r_x|, |r_y| over rotors + propeller radius) and half the
        frame height above and below the rotor plane (max |r_z| + height / 2)."""
        r = np.abs(np.asarray(self.rotor_positions))
        height = self.frame_height if self.frame_height is not None else 0.5 * self.arm_length
        rp = self.prop_radius
        return (float(r[:, 0].max() + rp), float(r[:, 1].max() + rp),
                float(r[:, 2].max() + height / 2))  # fmt: skip

    def allocation_matrix(self) -> np.ndarray:
        """A (6, R): body wrench [f; m] = A T for per-rotor thrusts T_i = k_f w_i|w_i| (N).

        Column i is [a_i ; r_i x a_i + s_i (k_m/k_f) a_i] (FlightGoggles IV, EQUATIONS.md).
        """
        r = np.asarray(self.rotor_positions)
        a = np.asarray(self.rotor_axes)
        ratio = np.asarray(self.rotor_directions) * np.asarray(self.k_m) / np.asarray(self.k_f)
        moment = np.cross(r, a) + ratio[:, None] * a
        return np.concatenate((a.T, moment.T), axis=0)

    @property
    def fully_actuated(self) -> bool:
        """True when the rotors span all six wrench axes (tilted-rotor frames)."""
        return bool(np.linalg.matrix_rank(self.allocation_matrix(), tol=1e-9) == 6)

    @property
    def max_thrust(self) -> float:
        """Largest collective thrust along body z (N), every rotor at max speed."""
        a = self.allocation_matrix()
        t = np.asarray(self.k_f) * np.asarray(self.max_rotor_speed) ** 2
        return float((a[2] * t).sum())

    @property
    def hover_rotor_speed(self) -> float:
        """Equal rotor speed (rad/s) whose body-z thrust balances gravity."""
        a = self.allocation_matrix()
        return float(math.sqrt(self.mass * 9.81 / float((a[2] * np.asarray(self.k_f)).sum())))

    def with_moment_gain(self, gain: Sequence[float]) -> Airframe:
        """A copy whose rotors make ``gain`` = (roll, pitch, yaw) times the body moments: rotor
        y positions scaled by the roll gain, x positions by the pitch gain, k_m by the yaw gain
        (thrust unchanged). Identified vehicles need it: a Crazyflie's measured angular
        accelerations are some 30-60 times smaller than its rotor model implies
        (``volary sysid``, experiments/sysid/nanobench)."""
        g = _vec(f"{self.name}: moment_gain", gain, 3)
        if min(g) <= 0:
            raise ConfigError(f"{self.name}: moment_gain: expected values > 0, got {list(g)}")
        pos = np.asarray(self.rotor_positions) * np.array([g[1], g[0], 1.0])
        return self.replace(rotor_positions=pos, k_m=np.asarray(self.k_m) * g[2])

    def replace(self, **changes: Any) -> Airframe:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)


def _rows(name: str, value: Any, n: int | None = None) -> tuple[Vec3, ...]:
    arr = np.asarray(value, dtype=float)
    if arr.ndim != 2 or arr.shape[1] != 3 or (n is not None and arr.shape[0] != n):
        want = f"({n}, 3)" if n is not None else "(R, 3)"
        raise ConfigError(f"{name}: expected shape {want}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f"{name}: expected finite values")
    return tuple(tuple(float(c) for c in row) for row in arr)  # type: ignore[misc]


def _inertia(name: str, value: Any) -> tuple[Vec3, Vec3, Vec3]:
    arr = np.asarray(value, dtype=float)
    if arr.shape == (3,):
        arr = np.diag(arr)
    if arr.shape != (3, 3) or not np.all(np.isfinite(arr)):
        raise ConfigError(f"{name}: inertia: expected 3 diagonal values or a finite 3x3 matrix")
    if not np.allclose(arr, arr.T) or np.linalg.eigvalsh(arr).min() <= 0:
        raise ConfigError(f"{name}: inertia: expected a symmetric positive-definite matrix")
    return tuple(tuple(float(c) for c in row) for row in arr)  # type: ignore[return-value]
