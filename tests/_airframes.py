"""Plausible airframes built from layouts, for tests that must not depend on the catalogue."""

from __future__ import annotations

from volary.dynamics import Airframe
from volary.platforms import layout


def _frame(name: str, kind: str, arm: float, **kw) -> Airframe:
    pos, axes, dirs = layout(kind, arm)
    return Airframe(name=name, rotor_positions=pos, rotor_axes=axes, rotor_directions=dirs, **kw)


def quad_x() -> Airframe:
    """1 kg quad X, arm 0.12 m, thrust-to-weight 3.7."""
    return _frame(
        "quad_x",
        "quad_x",
        0.12,
        mass=1.0,
        inertia=(0.005, 0.005, 0.009),
        k_f=1.9e-6,
        k_m=2.6e-8,
        max_rotor_speed=2200.0,
    )


def hexa() -> Airframe:
    """2 kg flat hexacopter, arm 0.2 m, thrust-to-weight 2.8."""
    return _frame(
        "hexa",
        "hexa",
        0.2,
        mass=2.0,
        inertia=(0.02, 0.02, 0.035),
        k_f=1.9e-6,
        k_m=2.6e-8,
        max_rotor_speed=2200.0,
    )


def tilted_hexa() -> Airframe:
    """2 kg fully-actuated hexacopter, rotors tilted +-30 deg about their arms."""
    pos, axes, dirs = layout("tilted_hexa", 0.2)
    return Airframe(
        name="tilted_hexa",
        rotor_positions=pos,
        rotor_axes=axes,
        rotor_directions=dirs,
        mass=2.0,
        inertia=(0.02, 0.02, 0.035),
        k_f=1.9e-6,
        k_m=2.6e-8,
        max_rotor_speed=2200.0,
    )


def crazyflie() -> Airframe:
    """27 g Crazyflie-2-like quad X (parameters in the range RotorPy/crazyflow publish)."""
    return _frame(
        "crazyflie",
        "quad_x",
        0.046,
        mass=0.027,
        inertia=(1.4e-5, 1.4e-5, 2.2e-5),
        k_f=2.3e-8,
        k_m=7.8e-10,
        max_rotor_speed=2500.0,
    )


def heavy_quad() -> Airframe:
    """5 kg quad X, arm 0.3 m, slower motors (40 ms), thrust-to-weight 2.5."""
    return _frame(
        "heavy_quad",
        "quad_x",
        0.3,
        mass=5.0,
        inertia=(0.08, 0.08, 0.14),
        k_f=2.1e-5,
        k_m=3.4e-7,
        max_rotor_speed=1200.0,
        motor_tau_up=0.04,
        motor_tau_down=0.04,
    )
