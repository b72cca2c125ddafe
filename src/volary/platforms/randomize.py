"""Random quadrotors for domain randomization (RAPTOR's idea: one policy trained over many
airframes so that it flies airframes it has never seen).

:func:`random_quad` draws one X-frame quad from :class:`QuadRanges`: mass log-uniform, arm,
normalized inertia, thrust-to-weight ratio, top rotor speed, motor time constant, torque ratio
and drag uniform. The default ranges enclose the 36 FLYINGTRUST platforms with a margin (their
mass 0.55-5.45 kg, arm 0.16-0.36 m, J_xx / (m arm^2) 0.05-0.35, J_zz / (m arm^2) 0.10-0.63,
TWR 1.4-6.0, motor tau 0.016-0.036 s, k_m / k_f 0.010-0.050 m), so a policy trained on them
is evaluated on those platforms as unseen draws from inside its training distribution.

Airframe ``index`` of ``seed`` comes from its own generator (``numpy`` seeded with
``(seed, index)``): the k-th airframe does not depend on how many are drawn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from volary.dynamics import GRAVITY, Airframe
from volary.errors import ConfigError
from volary.platforms.layouts import quad_x


@dataclass(frozen=True)
class QuadRanges:
    """Closed ranges (low, high) of a random quad's parameters (SI units)."""

    mass: tuple[float, float] = (0.4, 7.0)  # kg, log-uniform
    arm: tuple[float, float] = (0.12, 0.40)  # m, centre to rotor
    inertia_xy: tuple[float, float] = (0.04, 0.40)  # J_xx = J_yy, in units of m arm^2
    inertia_z: tuple[float, float] = (0.08, 0.70)  # J_zz, in units of m arm^2
    twr: tuple[float, float] = (1.3, 6.5)  # thrust-to-weight ratio at top rotor speed
    max_rotor_speed: tuple[float, float] = (800.0, 3000.0)  # rad/s
    motor_tau: tuple[float, float] = (0.01, 0.05)  # s, up and down alike
    torque_ratio: tuple[float, float] = (0.01, 0.055)  # m, k_m / k_f
    drag_quadratic: tuple[float, float] = (0.005, 0.05)  # N/(m/s)^2 along x and y; z twice

    def __post_init__(self) -> None:
        for f in fields(self):
            lo, hi = getattr(self, f.name)
            if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo <= hi):
                raise ConfigError(f"QuadRanges.{f.name}: expected 0 < low <= high, got "
                                  f"{getattr(self, f.name)!r}")  # fmt: skip
        if self.twr[0] <= 1.0:
            raise ConfigError(f"QuadRanges.twr: expected low > 1 (it must lift off), "
                              f"got {self.twr!r}")  # fmt: skip


def random_quad(seed: int, index: int, ranges: QuadRanges | None = None) -> Airframe:
    """Quad ``index`` of the stream ``seed`` (module docstring), named ``random-quad-S-I``."""
    for name, v in (("seed", seed), ("index", index)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ConfigError(f"{name}: expected an int >= 0, got {v!r}")
    r = ranges or QuadRanges()
    rng = np.random.default_rng([seed, index])
    u = rng.random(9)

    def lin(k: int, lohi: tuple[float, float]) -> float:
        return lohi[0] + float(u[k]) * (lohi[1] - lohi[0])

    mass = math.exp(lin(0, (math.log(r.mass[0]), math.log(r.mass[1]))))
    arm = lin(1, r.arm)
    j_xy, j_z = lin(2, r.inertia_xy) * mass * arm**2, lin(3, r.inertia_z) * mass * arm**2
    twr, w_max = lin(4, r.twr), lin(5, r.max_rotor_speed)
    k_f = twr * mass * GRAVITY / (4.0 * w_max**2)  # four rotors at top speed lift twr x the weight
    tau, c_d = lin(6, r.motor_tau), lin(8, r.drag_quadratic)
    pos, axes, dirs = quad_x(arm)
    return Airframe(
        name=f"random-quad-{seed}-{index}",
        mass=mass,
        inertia=((j_xy, 0.0, 0.0), (0.0, j_xy, 0.0), (0.0, 0.0, j_z)),
        rotor_positions=tuple(pos),
        rotor_axes=tuple(axes),
        rotor_directions=tuple(dirs),
        k_f=(k_f,),
        k_m=(lin(7, r.torque_ratio) * k_f,),
        max_rotor_speed=(w_max,),
        motor_tau_up=(tau,),
        motor_tau_down=(tau,),
        drag_quadratic=(c_d, c_d, 2.0 * c_d),
        sources={"all": "volary.platforms.randomize.random_quad (domain randomization)"},
    )


def random_quads(n: int, seed: int, ranges: QuadRanges | None = None) -> list[Airframe]:
    """Quads ``0 .. n-1`` of the stream ``seed``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"n: expected an int >= 1, got {n!r}")
    return [random_quad(seed, i, ranges) for i in range(n)]


__all__ = ["QuadRanges", "random_quad", "random_quads"]
