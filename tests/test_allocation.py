"""Control allocation: exact inverse when feasible, yaw given up first under saturation."""

from __future__ import annotations

import torch

from _airframes import hexa, quad_x, tilted_hexa
from volary.dynamics import VehicleParams, allocate_thrusts
from volary.dynamics.allocation import allocate
from volary.dynamics.models import rotor_wrench


def _wrench(p: VehicleParams, fz: float, mx: float, my: float, mz: float, fx: float = 0.0):
    return torch.tensor([[fx, 0.0, fz, mx, my, mz]], dtype=p.dtype).expand(p.n_envs, 6)


def test_feasible_wrench_is_reproduced_exactly():
    for af in (quad_x(), hexa()):
        p = VehicleParams.from_airframes(af, 2, dtype=torch.float64)
        want = _wrench(p, af.mass * 9.81, 0.05, -0.03, 0.002)
        got = rotor_wrench(p, allocate(p, want))
        torch.testing.assert_close(got[:, 2:], want[:, 2:], rtol=1e-9, atol=1e-9)


def test_fully_actuated_frame_produces_lateral_force():
    af = tilted_hexa()
    p = VehicleParams.from_airframes(af, 1, dtype=torch.float64)
    assert p.actuated.all()
    want = _wrench(p, af.mass * 9.81, 0.0, 0.0, 0.0, fx=3.0)
    torch.testing.assert_close(rotor_wrench(p, allocate(p, want)), want, rtol=1e-9, atol=1e-9)


def test_saturation_gives_up_yaw_before_thrust_and_roll():
    af = quad_x()
    p = VehicleParams.from_airframes(af, 1, dtype=torch.float64)
    want = _wrench(p, af.mass * 9.81 * 1.5, 0.2, 0.0, 5.0)  # yaw far beyond the rotors' reach
    t = allocate_thrusts(p, want)
    assert (t >= p.t_min - 1e-12).all() and (t <= p.t_max + 1e-12).all()
    got = (p.alloc @ t[..., None])[..., 0]
    torch.testing.assert_close(got[:, 2:5], want[:, 2:5], rtol=1e-9, atol=1e-9)  # thrust, roll
    assert 0 < got[0, 5] < want[0, 5]  # yaw reduced, same sign


def test_padded_rotors_get_no_thrust():
    p = VehicleParams.from_airframes([quad_x(), hexa()], 2, dtype=torch.float64)
    t = allocate_thrusts(p, _wrench(p, 20.0, 0.1, 0.1, 0.01))
    assert torch.equal(t[0, 4:], torch.zeros(2, dtype=torch.float64))
