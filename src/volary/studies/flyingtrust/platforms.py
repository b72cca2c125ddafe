"""The 36 FLYINGTRUST platforms (paper 004, Table I) as physically consistent quad-X airframes.

Table I publishes only (mass, TWR_max, alpha_xy_max, alpha_z_max). :func:`derive` picks the rest
by documented scaling laws (``volary/platforms/DESIGN.md``, "Deriving the FLYINGTRUST
airframes") and solves k_f, J_xx and k_m so that :func:`volary.platforms.indicators.indicators`
reproduces the table exactly. The result is the core catalogue's
``volary/platforms/data/flyingtrust.toml`` (checked in; the catalogue reads it, never this
module); regenerate it with

    python -m volary.studies.flyingtrust.platforms --write
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from volary.dynamics.models import GRAVITY
from volary.platforms.catalogue import DATA_DIR

DATA_FILE = DATA_DIR / "flyingtrust.toml"
TABLE1_SOURCE = "FLYINGTRUST (paper 004) Table I"

# (category, name, mass kg, TWR_max, alpha_xy_max rad/s^2, alpha_z_max rad/s^2), Table I.
TABLE1: tuple[tuple[str, str, float, float, float, float], ...] = (
    ("real", "0.60kg-EMAX", 0.60, 2.2, 114.7, 8.4),
    ("real", "0.895kg-DJI", 0.895, 3.3, 107.9, 14.1),
    ("real", "0.90kg-DJI", 0.90, 3.0, 139.2, 10.5),
    ("real", "1.00kg-SunnySky", 1.00, 6.0, 227.3, 13.9),
    ("real", "1.20kg-JFRC", 1.20, 1.4, 84.6, 7.2),
    ("real", "1.40kg-EMAX", 1.40, 2.5, 94.1, 6.0),
    ("real", "1.50kg-DJI", 1.50, 1.8, 85.8, 5.7),
    ("real", "1.80kg-SunnySky", 1.80, 2.3, 127.8, 7.7),
    ("real", "2.00kg-T-MOTOR", 2.00, 1.4, 55.6, 3.3),
    ("real", "2.50kg-HLY", 2.50, 1.5, 65.1, 4.6),
    ("real", "2.80kg-T-MOTOR", 2.80, 2.5, 79.9, 4.6),
    ("real", "3.00kg-T-MOTOR", 3.00, 2.2, 112.0, 7.6),
    ("real", "3.50kg-SunnySky", 3.50, 1.4, 116.2, 9.5),
    ("real", "3.80kg-T-MOTOR", 3.80, 1.4, 63.6, 4.1),
    ("real", "4.00kg-SunnySky", 4.00, 1.9, 83.7, 5.0),
    ("real", "4.50kg-T-MOTOR", 4.50, 1.8, 95.7, 6.8),
    ("real", "4.91kg-DJI", 4.91, 2.5, 69.6, 6.9),
    ("real", "5.45kg-JFRC", 5.45, 2.6, 75.8, 3.3),
    ("virtual", "0.55kg-UAV-1", 0.55, 3.6, 1383.7, 69.2),
    ("virtual", "0.68kg-Agile-Autonomy-DIY", 0.68, 3.0, 171.4, 17.4),
    ("virtual", "0.75kg-UAV-2", 0.75, 4.2, 1467.0, 73.3),
    ("virtual", "0.85kg-UAV-3", 0.85, 3.2, 1052.7, 52.6),
    ("virtual", "0.98kg-EGO-Planner-DIY", 0.98, 4.6, 1083.3, 57.7),
    ("virtual", "1.05kg-UAV-4", 1.05, 3.5, 950.7, 47.5),
    ("virtual", "1.20kg-UAV-5", 1.20, 4.0, 1164.8, 58.2),
    ("virtual", "1.50kg-UAV-6", 1.50, 3.8, 931.1, 46.5),
    ("virtual", "1.80kg-UAV-7", 1.80, 3.8, 969.3, 48.5),
    ("virtual", "2.00kg-UAV-8", 2.00, 3.2, 712.9, 35.6),
    ("virtual", "2.50kg-UAV-9", 2.50, 3.0, 692.8, 34.6),
    ("virtual", "2.80kg-UAV-10", 2.80, 3.4, 694.5, 34.7),
    ("virtual", "3.00kg-UAV-11", 3.00, 3.3, 697.4, 34.9),
    ("virtual", "3.50kg-UAV-12", 3.50, 3.1, 584.4, 29.2),
    ("virtual", "4.20kg-UAV-13", 4.20, 2.8, 553.4, 27.7),
    ("virtual", "4.50kg-UAV-14", 4.50, 2.9, 507.8, 25.4),
    ("virtual", "4.80kg-UAV-15", 4.80, 3.6, 587.3, 29.4),
    ("virtual", "5.00kg-UAV-16", 5.00, 3.5, 631.0, 31.5),
)


@dataclass(frozen=True)
class ScalingLaws:
    """The free choices of the derivation (DESIGN.md); every default is documented there."""

    arm_ref: float = 0.20  # m, arm of a 1 kg quad; arm_mass = arm_ref (m / 1 kg)^(1/3)
    kappa_max: float = 0.35  # 1, J_xx <= kappa_max m d^2 (mass no further out than the rotors)
    prop_radius_ratio: float = 0.5  # 1, propeller radius / arm (X frame: no overlap below 0.707)
    tip_speed: float = 130.0  # m/s, blade-tip speed at full throttle (about Mach 0.38)
    jzz_ratio: float = 1.8  # 1, J_zz / J_xx of a flat frame (<= 2 by the triangle inequality)
    tau_ref: float = 0.02  # s, motor time constant at 0.2 m arm, tau = tau_ref d / 0.2 m
    drag_cd: float = 1.0  # 1, bluff-body drag coefficient of the frame
    air_density: float = 1.225  # kg/m^3, ISA sea level


@dataclass(frozen=True)
class Derived:
    """Quad-X parameters of one platform (SI); see :func:`derive`."""

    arm: float  # m
    inertia: tuple[float, float, float]  # kg m^2, diagonal
    k_f: float  # N/(rad/s)^2
    k_m: float  # N m/(rad/s)^2
    max_rotor_speed: float  # rad/s
    motor_tau: float  # s
    drag_quadratic: tuple[float, float, float]  # N/(m/s)^2
    collider_radius: float  # m
    arm_rule: str  # which arm law was active


def derive(
    mass: float, twr: float, alpha_xy: float, alpha_z: float, laws: ScalingLaws = ScalingLaws()
) -> Derived:
    """Solve a quad X for Table I's (TWR_max, alpha_xy_max, alpha_z_max) at ``mass`` (kg).

    With T = k_f w_max^2 per rotor (eq. 1) and the cross-layout torques of eq. 5:
    TWR = 4 T / (m g) (eq. 2), alpha_xy = sqrt(2) d T / J_xx and alpha_z = 2 k_m w_max^2 / J_zz
    (eq. 9, roll for alpha_xy as in Sec. III-A).
    """
    thrust = twr * mass * GRAVITY / 4  # N per rotor at full speed
    arm_mass = laws.arm_ref * mass ** (1 / 3)
    arm_kappa = math.sqrt(2) * thrust / (alpha_xy * laws.kappa_max * mass)
    arm = max(arm_mass, arm_kappa)
    prop_radius = laws.prop_radius_ratio * arm
    w_max = laws.tip_speed / prop_radius
    j_xx = math.sqrt(2) * arm * thrust / alpha_xy
    j_zz = laws.jzz_ratio * j_xx
    k_m = alpha_z * j_zz / (2 * w_max**2)
    q = 0.5 * laws.air_density * laws.drag_cd
    return Derived(
        arm=arm,
        inertia=(j_xx, j_xx, j_zz),
        k_f=thrust / w_max**2,
        k_m=k_m,
        max_rotor_speed=w_max,
        motor_tau=laws.tau_ref * arm / 0.2,
        drag_quadratic=(q * 0.5 * arm**2, q * 0.5 * arm**2, q * arm**2),
        collider_radius=arm + prop_radius,
        arm_rule="mass law" if arm_mass >= arm_kappa else "inertia bound kappa_max",
    )


def _q(value: float | tuple[float, ...], unit: str, source: str) -> str:
    v = (
        f"[{', '.join(repr(float(x)) for x in value)}]"
        if isinstance(value, tuple)
        else repr(float(value))
    )
    return f'{{value = {v}, unit = "{unit}", source = "{source}"}}'


def _entry(row: tuple[str, str, float, float, float, float]) -> str:
    cat, name, mass, twr, axy, az = row
    d = derive(mass, twr, axy, az)
    law = "derived (platforms/DESIGN.md, FLYINGTRUST derivation)"
    lines = [
        f'["{name}"]',
        f'category = "flyingtrust-{cat}"',
        f'description = "FLYINGTRUST {cat} platform {name}, quad X; arm from the {d.arm_rule}"',
        'layout = {value = "quad_x", source = "assumed: cross layout, FLYINGTRUST eq. 5"}',
        f"mass = {_q(mass, 'kg', TABLE1_SOURCE + ' (platform name)')}",
        f"arm = {_q(d.arm, 'm', law + ': max(0.2 m (m/kg)^(1/3), kappa_max bound)')}",
        f"inertia = {_q(d.inertia, 'kg m^2', law + ': J_xx from alpha_xy, J_zz = 1.8 J_xx')}",
        f"k_f = {_q(d.k_f, 'N/(rad/s)^2', law + ': from TWR_max (eq. 2)')}",
        f"k_m = {_q(d.k_m, 'N m/(rad/s)^2', law + ': from alpha_z_max (eq. 5, 9)')}",
        f"max_rotor_speed = {_q(d.max_rotor_speed, 'rad/s', law + ': 130 m/s tip speed')}",
        f"min_rotor_speed = {_q(0.0, 'rad/s', 'FLYINGTRUST eq. 4-5: rotors may stop')}",
        f"motor_tau_up = {_q(d.motor_tau, 's', law + ': 0.02 s x arm / 0.2 m')}",
        f"motor_tau_down = {_q(d.motor_tau, 's', law + ': 0.02 s x arm / 0.2 m')}",
        f"drag_quadratic = {_q(d.drag_quadratic, 'N/(m/s)^2', law + ': 0.5 rho C_D A')}",
        f"collider_radius = {_q(d.collider_radius, 'm', law + ': arm + propeller radius')}",
        "",
        f'["{name}".table1]',
        f"twr_max = {_q(twr, '1', TABLE1_SOURCE)}",
        f"alpha_xy_max = {_q(axy, 'rad/s^2', TABLE1_SOURCE)}",
        f"alpha_z_max = {_q(az, 'rad/s^2', TABLE1_SOURCE)}",
    ]
    return "\n".join(lines) + "\n"


def render() -> str:
    """The text of ``data/flyingtrust.toml``."""
    head = (
        "# FLYINGTRUST platforms (paper 004, Table I) as quad-X airframes.\n"
        "# GENERATED by `python -m volary.studies.flyingtrust.platforms --write`; do not edit.\n"
        "# Table I gives mass and the three indicators; the other values follow the scaling\n"
        "# laws of src/volary/platforms/DESIGN.md and reproduce Table I exactly.\n\n"
        '[meta]\nformat = "volary-airframes"\nversion = 1\n\n'
    )
    return head + "\n".join(_entry(row) for row in TABLE1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {DATA_FILE.name}")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        DATA_FILE.write_text(text, encoding="utf-8")
        print(f"wrote {DATA_FILE} ({len(TABLE1)} platforms)")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
