"""FLYINGTRUST kinodynamic indicators (paper 004 Sec. III-A, eq. 1-11): hand formulas for plus
and cross quads, the generic definition against brute force, and Table I for all 36 platforms."""

from __future__ import annotations

import csv
import itertools
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from volary.dynamics import Airframe
from volary.platforms import indicators, layout, names, table1
from volary.platforms.catalogue import get
from volary.platforms.indicators import max_angular_acceleration, rotor_thrust_limits
from volary.studies.flyingtrust import platforms as ft

torch.set_num_threads(1)

G = 9.81
M, D, KF, KM, W, JXX, JYY, JZZ = 1.2, 0.2, 3e-6, 5e-8, 1500.0, 8e-3, 9e-3, 1.5e-2
SHARED_CSV = Path("/work/shared/data/flyingtrust_platforms.csv")


def _quad(kind: str, **kw) -> Airframe:
    pos, axes, dirs = layout(kind, D)
    args = dict(mass=M, inertia=(JXX, JYY, JZZ), k_f=KF, k_m=KM, max_rotor_speed=W)
    args.update(kw)
    return Airframe(name=kind, rotor_positions=pos, rotor_axes=axes, rotor_directions=dirs, **args)


def test_plus_quad_matches_eq_2_4_9():
    ind = indicators(_quad("quad_plus"))
    # eq. 4: tau_x = d c_T (w4^2 - w2^2) -> max with w4 = w_max, w2 = 0
    assert ind.twr_max == pytest.approx(4 * KF * W**2 / (M * G), rel=1e-12)
    assert ind.alpha_xy_max == pytest.approx(D * KF * W**2 / JXX, rel=1e-12)
    assert ind.alpha_z_max == pytest.approx(2 * KM * W**2 / JZZ, rel=1e-12)
    alpha = max_angular_acceleration(_quad("quad_plus"))
    assert alpha[1] == pytest.approx(D * KF * W**2 / JYY, rel=1e-12)


def test_cross_quad_matches_eq_2_5_9():
    ind = indicators(_quad("quad_x"))
    # eq. 5: tau_x = d c_T sqrt(2)/2 (w1^2 - w2^2 - w3^2 + w4^2): both rotors of one side count
    assert ind.twr_max == pytest.approx(4 * KF * W**2 / (M * G), rel=1e-12)
    assert ind.alpha_xy_max == pytest.approx(math.sqrt(2) * D * KF * W**2 / JXX, rel=1e-12)
    assert ind.alpha_z_max == pytest.approx(2 * KM * W**2 / JZZ, rel=1e-12)


def test_alpha_xy_is_roll_not_pitch():
    alpha = max_angular_acceleration(_quad("quad_x"))
    assert indicators(_quad("quad_x")).alpha_xy_max == alpha[0] != alpha[1]


def test_min_rotor_speed_shrinks_the_torque_range():
    w_min = 400.0
    ind = indicators(_quad("quad_plus", min_rotor_speed=w_min))
    assert ind.alpha_xy_max == pytest.approx(D * KF * (W**2 - w_min**2) / JXX, rel=1e-12)
    assert ind.alpha_z_max == pytest.approx(2 * KM * (W**2 - w_min**2) / JZZ, rel=1e-12)


@pytest.mark.parametrize("kind", ["quad_x", "hexa", "y6", "tilted_hexa"])
def test_generic_definition_equals_brute_force_over_thrust_box(kind):
    """max_T [J^-1 M T]_k over T in [T_min, T_max]^R is reached at a vertex of the box."""
    inertia = ((0.02, 0.001, -0.002), (0.001, 0.025, 0.0005), (-0.002, 0.0005, 0.04))
    pos, axes, dirs = layout(kind, 0.25)
    af = Airframe(
        name=kind,
        mass=2.0,
        inertia=inertia,
        rotor_positions=pos,
        rotor_axes=axes,
        rotor_directions=dirs,
        k_f=6e-6,
        k_m=1e-7,
        max_rotor_speed=1100.0,
        min_rotor_speed=200.0,
    )
    t_min, t_max = rotor_thrust_limits(af)
    c = np.linalg.solve(np.asarray(af.inertia), af.allocation_matrix()[3:])
    best = np.full(3, -np.inf)
    for pick in itertools.product((0, 1), repeat=af.n_rotors):
        t = np.where(np.asarray(pick) == 1, t_max, t_min)
        best = np.maximum(best, c @ t)
    np.testing.assert_allclose(max_angular_acceleration(af), best, rtol=1e-12)


def test_all_36_flyingtrust_platforms_reproduce_table1():
    rows = table1()
    assert len(rows) == 36
    errors = {}
    for name, published in rows.items():
        got = indicators(get(name))
        pairs = zip(got.as_tuple(), published.as_tuple(), strict=True)
        errors[name] = max(abs(g / p - 1) for g, p in pairs)
    worst = max(errors, key=errors.get)
    print(f"max relative indicator error over 36 platforms: {errors[worst]:.2e} ({worst})")
    assert errors[worst] < 0.01
    assert errors[worst] < 1e-9  # solved exactly, not fitted


def test_table1_rows_and_categories_match_paper_order():
    assert list(table1()) == [row[1] for row in ft.TABLE1]
    assert names("flyingtrust-real") == [r[1] for r in ft.TABLE1 if r[0] == "real"]
    assert len(names("flyingtrust-virtual")) == 18


@pytest.mark.skipif(not SHARED_CSV.exists(), reason="shared Table I CSV not present")
def test_embedded_table1_equals_shared_csv():
    with SHARED_CSV.open() as fh:
        lines = [ln for ln in fh if not ln.startswith("#")]
    rows = list(csv.DictReader(lines))
    want = [
        (
            r["category"],
            r["name"],
            float(r["mass_kg"]),
            float(r["twr_max"]),
            float(r["alpha_xy_max"]),
            float(r["alpha_z_max"]),
        )
        for r in rows
    ]
    assert want == list(ft.TABLE1)


def test_generated_data_file_is_up_to_date():
    assert ft.DATA_FILE.read_text(encoding="utf-8") == ft.render(), (
        "run `python -m volary.studies.flyingtrust.platforms --write`"
    )


def test_derivation_is_physically_plausible():
    laws = ft.ScalingLaws()
    for _cat, name, mass, *_ in ft.TABLE1:
        af = get(name)
        j = np.diag(af.inertia)
        kappa = j[0] / (mass * af.arm_length**2)
        assert 0.04 < kappa <= laws.kappa_max + 1e-12, name
        assert j[2] <= j[0] + j[1], name
        ratio = af.k_m[0] / af.k_f[0] / (2 * laws.prop_radius_ratio * af.arm_length)
        assert 0.04 < ratio < 0.2, name  # k_m / k_f as a fraction of the propeller diameter
        assert af.hover_rotor_speed < af.max_rotor_speed[0]
