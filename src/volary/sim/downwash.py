"""Downwash: the air one hovering vehicle blows onto the vehicles below it, as a turbulent jet.

Model: Bauersfeld, Muller, Ziegler, Coletti and Scaramuzza, "Robotics meets Fluid Dynamics: A
Characterization of the Induced Airflow below a Quadrotor as a Turbulent Jet", IEEE RA-L 2025,
arXiv 2403.13321. From flight data of six quadrotors (about 16 hours in a large motion-capture
hall) the paper finds that the combined flow of all the propellers is a round turbulent jet from
about 2.5 vehicle length scales below the vehicle on, and identifies one set of constants for
every vehicle once velocities are scaled by the hover-induced velocity and lengths by the motor
distance. The equations implemented here, for an emitter of mass ``m`` with ``n_p`` propellers
of radius ``R_p`` and length scale ``l``, at a point ``s`` m downstream along its jet axis and
``r`` m from that axis:

- (D1) hover-induced velocity (momentum theory, the weight shared by the disc area of all the
  propellers): ``U_H = sqrt(m g / (2 rho_air n_p pi R_p^2))``;
- (D2) centreline velocity, decaying as ``1 / (s - s_0)`` from a virtual origin ``s_0``:
  ``U_c = U_H B_d / (s / l - s_0 / l)``;
- (D3) half width, the radius where the velocity is half the centreline's, growing linearly:
  ``r_1/2 = S l (s / l - s_0 / l)``;
- (D4) radial profile, the self-similar profile of the round jet with a uniform eddy viscosity
  (Pope, Turbulent Flows, 2000, ch. 5): ``U = U_c / (1 + (sqrt(2) - 1) (r / r_1/2)^2)^2``.

Constants ``B_d = 10.11``, ``S = 0.07668``, ``s_0 / l = -5.817`` (the virtual origin 5.8 length
scales above the vehicle). The paper's full text could not be read here; these are the values of
its far-field fit (its Eq. 9) as two independent public implementations that cite it give them,
identically: the downwash example of the crazyflow simulator and the quadrotor airflow model of
the GADEN gas-dispersion simulator (which cites the RA-L version). For comparison, a classical
round jet has ``B ~ 5.8`` and ``S ~ 0.094`` (Pope, ch. 5), scaled by the nozzle velocity and
diameter, not by ``U_H`` and ``l``. ``l`` is the distance between diagonally opposite motors
(a quad-X's diagonal); for any layout this module takes twice the mean distance of the rotor
hubs from the body z axis, which is that diagonal for a symmetric quad, hexa or octo.

What volary adds, and what it leaves out:

- the jet leaves the emitter's centre of mass along ``-z_B`` (its thrust axis, FLU body), so a
  tilted vehicle's jet is tilted; the induced air velocity at a point is ``-U z_B``: the model
  gives the mean axial velocity magnitude, and its radial component (a few per cent of it in a
  jet) is not modelled;
- only points downstream (``s > 0``) feel it; between 0 and 2.5 ``l`` (the near field, four
  separate rotor jets merging) the far-field formula is used as it is, an extrapolation: at
  ``s = 0`` it gives ``1.74 U_H`` on the axis, the order of the 2 ``U_H`` of momentum theory's
  far wake;
- ``U_H`` is the hover value from the emitter's mass (as in the paper, measured in hover), not
  from its thrust at the moment; contributions of several emitters add;
- a dimensionless per-platform scale (``Airframe.downwash``; 1: as published, 0: emits none)
  multiplies the emitter's velocity.

:func:`downwash_wake` evaluates every emitter of an env at every other vehicle of that env at
once (``(N, M, M)`` pairs, no Python loop over vehicles), on any device and dtype;
``volary.sim.World`` calls it once per control period and hands the result to
``Simulator.set_wake``, where it joins the wind (body drag and every rotor effect feel it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from volary.dynamics.airframe import Airframe
from volary.dynamics.models import GRAVITY
from volary.errors import ConfigError

AIR_DENSITY = 1.225  # kg/m^3, ISA sea level
B_D = 10.11  # centreline decay constant (D2), Bauersfeld et al. far-field fit
SPREAD = 0.07668  # spreading rate of the half width (D3), same fit
S0 = -5.817  # virtual origin in length scales (D2, D3): 5.8 l above the vehicle
NEAR_FIELD = 2.5  # length scales below the vehicle from which the paper finds a jet
_A = math.sqrt(2.0) - 1.0  # (D4)


def hover_induced_velocity(
    mass: Tensor,
    prop_radius: Tensor,
    n_props: Tensor,
    air_density: float = AIR_DENSITY,
    gravity: float = GRAVITY,
) -> Tensor:
    """(D1) ``U_H`` (m/s) of vehicles of ``mass`` (kg) hovering on ``n_props`` propellers of
    radius ``prop_radius`` (m); any broadcastable shapes."""
    area = n_props * math.pi * prop_radius * prop_radius
    return torch.sqrt(mass * gravity / (2.0 * air_density * area))


def jet_speed(s: Tensor, r2: Tensor, u_h: Tensor, length: Tensor) -> Tensor:
    """(D2)-(D4): the jet's velocity magnitude (m/s) at ``s`` m downstream along its axis and
    squared distance ``r2`` (m^2) from the axis, for an emitter with hover-induced velocity
    ``u_h`` (m/s) and length scale ``length`` (m); 0 where ``s <= 0`` (upstream). Broadcasts."""
    x = torch.clamp(s, min=0.0) / length - S0  # (s - s_0) / l >= 5.8: no division by 0
    u_c = u_h * B_D / x  # (D2)
    half = SPREAD * x * length  # (D3), m
    q = 1.0 + _A * r2 / (half * half)
    return torch.where(s > 0, u_c / (q * q), torch.zeros_like(u_c))  # (D4)


def downwash_wake(
    pos: Tensor,
    quat: Tensor,
    u_h: Tensor,
    length: Tensor,
    scale: Tensor,
    vehicles_per_env: int,
) -> Tensor:
    """(B, 3) air velocity (m/s, world) that the other vehicles of each env induce at each
    vehicle, ``B = N * M`` vehicles with flat index ``b = env * M + slot``.

    ``pos`` (B, 3) m and ``quat`` (B, 4) [w, x, y, z] the vehicles' poses; ``u_h`` (B,) m/s
    their hover-induced velocities (:func:`hover_induced_velocity`), ``length`` (B,) m their
    length scales and ``scale`` (B,) their dimensionless downwash scales (0: emits none). A
    vehicle never feels its own jet; a non-finite emitter (a diverged vehicle) adds nothing."""
    if pos.dim() != 2 or pos.shape[-1] != 3:
        raise ConfigError(f"pos: expected shape (B, 3), got {tuple(pos.shape)}")
    b = pos.shape[0]
    m = int(vehicles_per_env)
    if m < 1 or b % m:
        raise ConfigError(f"vehicles_per_env: expected a divisor of the {b} vehicles, got {m}")
    if quat.shape != (b, 4):
        raise ConfigError(f"quat: expected shape ({b}, 4), got {tuple(quat.shape)}")
    for name, v in (("u_h", u_h), ("length", length), ("scale", scale)):
        if v.shape != (b,):
            raise ConfigError(f"{name}: expected shape ({b},), got {tuple(v.shape)}")
    n = b // m
    w, x, y, z = quat.unbind(-1)  # the jet axis of emitter i, -z_B = -R(q) e_z: (N, M_i, 1, 3)
    down = torch.stack((-2 * (x * z + w * y), 2 * (w * x - y * z), 2 * (x * x + y * y) - 1), -1)
    down = down.view(n, m, 1, 3)
    p = pos.view(n, m, 3)
    d = p[:, None, :, :] - p[:, :, None, :]  # (N, M_i, M_j, 3): receiver j minus emitter i
    s = (d * down).sum(-1)  # downstream distance along i's jet axis
    r2 = torch.clamp((d * d).sum(-1) - s * s, min=0.0)
    u = jet_speed(s, r2, u_h.view(n, m, 1), length.view(n, m, 1)) * scale.view(n, m, 1)
    eye = torch.eye(m, dtype=torch.bool, device=pos.device)
    feel = (s > 0) & ~eye & (scale.view(n, m, 1) > 0) & torch.isfinite(u)
    contrib = torch.where(feel[..., None], u[..., None] * down, torch.zeros_like(d))
    return contrib.sum(1).reshape(b, 3)


def length_scale(rotor_pos: Tensor, real: Tensor) -> Tensor:
    """(N,) m: twice the mean distance of the real rotors' hubs from the body z axis
    (``rotor_pos`` (N, R, 3), ``real`` (N, R) bool); a quad-X's motor diagonal."""
    radial = torch.sqrt(rotor_pos[..., 0] ** 2 + rotor_pos[..., 1] ** 2)
    count = real.sum(-1).clamp(min=1).to(radial.dtype)
    return 2.0 * torch.where(real, radial, torch.zeros_like(radial)).sum(-1) / count


def emitter_constants(params, scale: Tensor) -> tuple[Tensor, Tensor]:
    """``(u_h, length)`` (B,) of :func:`downwash_wake` from a ``VehicleParams`` batch: ``U_H``
    (D1) from the mass, the real rotors (non-zero spin direction) and the propeller radius
    (``ground_effect_radius`` where set, else the collision sphere's ``Airframe.prop_radius``),
    ``l`` from the rotor positions; 0 for vehicles whose ``scale`` is 0."""
    real = params.rotor_dir != 0
    rho = params.aero[:, 5]
    arm = torch.linalg.vector_norm(params.rotor_pos, dim=-1).amax(-1)
    prop = torch.where(rho > 0, rho, torch.clamp(params.radius - arm, min=0.0))
    on = scale > 0
    n_props = real.sum(-1).to(prop.dtype)
    safe = torch.where(on, prop, torch.ones_like(prop))
    u_h = hover_induced_velocity(params.mass, safe, n_props)
    u_h = torch.where(on, u_h, torch.zeros_like(u_h))
    length = torch.where(on, length_scale(params.rotor_pos, real), torch.ones_like(prop))
    return u_h, length


def downwash_scales(airframes: Sequence[Airframe], count: int) -> list[float]:
    """Every vehicle's ``Airframe.downwash``, the ``airframes`` tiled to ``count`` as a
    Simulator tiles its platforms."""
    return [float(airframes[i % len(airframes)].downwash) for i in range(count)]


__all__ = [
    "AIR_DENSITY",
    "B_D",
    "NEAR_FIELD",
    "S0",
    "SPREAD",
    "downwash_scales",
    "downwash_wake",
    "emitter_constants",
    "hover_induced_velocity",
    "jet_speed",
    "length_scale",
]
