"""Rotor geometries: where rotors sit, where they push and which way they spin.

Each function returns ``(positions, axes, directions)`` in the body frame (FLU, m), ready for
:class:`volary.dynamics.Airframe`. Angles start at the +x (forward) axis and grow towards +y;
directions alternate so that yaw reaction torques cancel at hover.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from volary.errors import ConfigError
from volary.registry import Registry

Layout = tuple[list[tuple[float, float, float]], list[tuple[float, float, float]], list[float]]


def ring(n: int, arm: float, offset_deg: float = 0.0, first_dir: float = 1.0) -> Layout:
    """``n`` coplanar rotors on a circle of radius ``arm`` (m), thrust along +z_B."""
    if n < 3 or arm <= 0:
        raise ConfigError(f"ring: expected n >= 3 rotors and arm > 0 m, got n={n}, arm={arm}")
    pos, axes, dirs = [], [], []
    for i in range(n):
        a = math.radians(offset_deg) + 2 * math.pi * i / n
        pos.append((arm * math.cos(a), arm * math.sin(a), 0.0))
        axes.append((0.0, 0.0, 1.0))
        dirs.append(first_dir * (-1.0) ** i)
    return pos, axes, dirs


def quad_plus(arm: float) -> Layout:
    """Quad '+': rotors on the body axes, front rotor clockwise."""
    return ring(4, arm, 0.0)


def quad_x(arm: float) -> Layout:
    """Quad 'X': rotors at 45 degrees between the body axes, front-left clockwise."""
    return ring(4, arm, 45.0)


def hexa(arm: float) -> Layout:
    """Flat hexacopter, front rotor on +x."""
    return ring(6, arm, 0.0)


def octo(arm: float) -> Layout:
    """Flat octocopter, front rotor on +x."""
    return ring(8, arm, 0.0)


def y6(arm: float, gap: float | None = None) -> Layout:
    """Y6 coaxial: three arms at 120 degrees (one pointing backwards), an upper and a lower
    rotor of opposite spin on each; ``gap`` (m) between the two rotor planes (default arm/4)."""
    g = arm / 4 if gap is None else gap
    pos, axes, dirs = [], [], []
    for ang in (60.0, 180.0, 300.0):
        a = math.radians(ang)
        for level, spin in ((0.5 * g, 1.0), (-0.5 * g, -1.0)):  # upper and lower rotor
            pos.append((arm * math.cos(a), arm * math.sin(a), level))
            axes.append((0.0, 0.0, 1.0))
            dirs.append(spin)
    return pos, axes, dirs


def tilted_hexa(arm: float, tilt_deg: float = 30.0) -> Layout:
    """Fully-actuated hexacopter: rotor i tilted by +-``tilt_deg`` about its arm, alternating,
    so the rotor forces span lateral directions too (six independent wrench axes)."""
    pos, _, dirs = ring(6, arm, 0.0)
    t = math.radians(tilt_deg)
    axes = []
    for i, (x, y, _z) in enumerate(pos):
        ux, uy = x / arm, y / arm  # arm direction; tilt about it moves thrust tangentially
        s = t if i % 2 == 0 else -t
        tx, ty = -uy, ux
        axes.append((math.sin(s) * tx, math.sin(s) * ty, math.cos(s)))
    return pos, axes, dirs


LAYOUTS: Registry[Callable[..., Layout]] = Registry(
    "layout",
    {
        "quad_plus": quad_plus,
        "quad_x": quad_x,
        "hexa": hexa,
        "octo": octo,
        "y6": y6,
        "tilted_hexa": tilted_hexa,
    },
)


def layout(name: str, arm: float) -> Layout:
    """The named layout with arm length ``arm`` (m); unknown names list the valid ones."""
    return LAYOUTS.get(name)(arm)
