"""Rotor aerodynamics beyond the ideal rotor: the one source of the equations every backend runs.

Per rotor i, in body axes (FLU), with the rotor at ``r`` on the unit thrust axis ``n`` turning
at ``w`` (rad/s), the body's air-relative velocity ``v`` (wind included) and rates ``W``:

- (A1) hub air velocity ``u = v + W x r``; (A2) axial inflow ``u_a = u . n``, in-plane
  ``u_p = u - u_a n``;
- (A3) inflow thrust ``T = k_f w|w| - k_ax |w| u_a + k_tl |w| |u_p|^2``: climbing through the
  rotor's own inflow lowers its thrust, edgewise flow raises it (blade-element momentum theory
  linearized about hover; Bangura and Mahony 2016; RotorPy's translational lift, Folk et al.
  2023);
- (A4) ground effect ``T_IGE = T / (1 - (rho / 4h)^2)`` for a rotor of radius ``rho`` at
  height ``h`` over a surface (Cheeseman and Bennett 1955; gym-pybullet-drones, Panerati et al.
  2021); the caller clamps ``h`` to ``[max(rho / 2, H_MIN), H_MAX]`` (at ``h = rho / 2`` the
  thrust is 4/3 of free air, about where the formula stops matching measurements);
- (A5) rotor drag, the H-force at the hub, ``H = -|w| (k_d u_p + k_z u_a n)`` (RotorPy's
  rotor drag matrix ``diag(k_d, k_d, k_z)``, Folk et al. 2023; Kai et al. 2017);
- (A6) blade flapping: flying edgewise tilts the disc away from the relative wind and the hub
  transmits a moment ``M = k_flap |w| (u_p x n)``, nose-up when flying forward (Mahony, Kumar
  and Corke 2012, Sec. IV; RotorPy's ``k_flap``).

The thrust (A3, A4) replaces ``k_f w|w|`` in the allocation product, so the rotor's reaction
torque scales with it; the H-force adds ``H`` and ``r x H`` and flapping adds ``M``.

Why one plain-Python function: the four backends (eager torch on ``(N, R)`` tensors, the SoA
graph inductor compiles on ``(N,)`` rows, numba on float scalars, Warp on scalars of its kernel
dtype) all run :func:`rotor_aero` itself: eager and SoA call it on tensors, numba compiles it
with ``numba.njit`` and Warp with ``wp.func`` (a generic function: its ``Any`` arguments take the
kernel's dtype). It therefore uses only ``+ - * /``, ``abs`` and no literals (a float literal in
Warp is float32 and would not mix with float64 arguments): adding an effect is one edit here,
and ``tests/test_aero.py`` checks every backend against it term by term.

Every coefficient 0 (the default of every platform that has none identified) switches the whole
path off: the steppers then run exactly the code they ran before (world parity).
"""

# No ``from __future__ import annotations``: Warp reads the ``Any`` annotations as types.
from typing import Any

H_MIN = 1e-3  # m, lowest height the ground effect is evaluated at (keeps 4h > 0 when rho = 0)
H_MAX = 1e3  # m, the height used where there is no ground (the factor is then 1 to 1e-9)
COEFFS = ("k_d", "k_z", "k_flap", "k_ax", "k_tl", "rho")  # VehicleParams.aero columns


def rotor_aero(
    w: Any,
    t: Any,
    vx: Any,
    vy: Any,
    vz: Any,
    ox: Any,
    oy: Any,
    oz: Any,
    rx: Any,
    ry: Any,
    rz: Any,
    nx: Any,
    ny: Any,
    nz: Any,
    h: Any,
    k_d: Any,
    k_z: Any,
    k_flap: Any,
    k_ax: Any,
    k_tl: Any,
    rho: Any,
):
    """One rotor's aerodynamics (A1-A6): ``(T, fx, fy, fz, mx, my, mz)``.

    ``w`` rotor speed (rad/s), ``t = k_f w|w|`` its ideal thrust (N), ``v`` the body's
    air-relative velocity and ``o`` its rates in body axes, ``r``/``n`` the rotor's position and
    unit axis, ``h`` its clamped height over the surface below (m). Returns the thrust ``T`` (N)
    along ``n`` and the extra force (H-force) and moment about the centre of mass (``r x H``
    plus flapping), body axes."""
    aw = abs(w)
    ux = vx + oy * rz - oz * ry  # (A1)
    uy = vy + oz * rx - ox * rz
    uz = vz + ox * ry - oy * rx
    ua = ux * nx + uy * ny + uz * nz  # (A2)
    px = ux - ua * nx
    py = uy - ua * ny
    pz = uz - ua * nz
    thrust = t + aw * (k_tl * (px * px + py * py + pz * pz) - k_ax * ua)  # (A3)
    h4 = h + h + h + h
    thrust = thrust * (h4 * h4 / (h4 * h4 - rho * rho))  # (A4): x / x is exactly 1 at rho = 0
    fx = -aw * (k_d * px + k_z * ua * nx)  # (A5)
    fy = -aw * (k_d * py + k_z * ua * ny)
    fz = -aw * (k_d * pz + k_z * ua * nz)
    c = k_flap * aw  # (A6)
    mx = ry * fz - rz * fy + c * (py * nz - pz * ny)
    my = rz * fx - rx * fz + c * (pz * nx - px * nz)
    mz = rx * fy - ry * fx + c * (px * ny - py * nx)
    return thrust, fx, fy, fz, mx, my, mz
