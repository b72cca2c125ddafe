"""Explicit integrators over a tuple of tensors (the state's fields), FlightGoggles Sec. IV.

A derivative function maps ``state_tuple -> derivative_tuple`` with the same structure.
Quaternion fields are integrated additively and re-normalized by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum

from torch import Tensor

from volary.registry import parse_enum

Fields = tuple[Tensor, ...]
Derivative = Callable[[Fields], Fields]


class Integrator(StrEnum):
    """Explicit integration schemes, picked by name (``"euler"`` or ``"rk4"``)."""

    EULER = "euler"
    RK4 = "rk4"


def _axpy(x: Sequence[Tensor], a: float, d: Sequence[Tensor]) -> Fields:
    return tuple(xi + a * di for xi, di in zip(x, d, strict=True))


def euler_step(f: Derivative, x: Fields, dt: float) -> Fields:
    """x_{k+1} = x_k + dt f(x_k)."""
    return _axpy(x, dt, f(x))


def rk4_step(f: Derivative, x: Fields, dt: float) -> Fields:
    """Classic 4th-order Runge-Kutta step."""
    k1 = f(x)
    k2 = f(_axpy(x, 0.5 * dt, k1))
    k3 = f(_axpy(x, 0.5 * dt, k2))
    k4 = f(_axpy(x, dt, k3))
    return tuple(
        xi + (dt / 6.0) * (a + 2.0 * b + 2.0 * c + d)
        for xi, a, b, c, d in zip(x, k1, k2, k3, k4, strict=True)
    )


_STEPS = {Integrator.EULER: euler_step, Integrator.RK4: rk4_step}


def integrate(method: Integrator | str, f: Derivative, x: Fields, dt: float) -> Fields:
    """One step of the named integrator; unknown names raise with the valid ones listed."""
    return _STEPS[parse_enum(Integrator, method, "integrator")](f, x, dt)
