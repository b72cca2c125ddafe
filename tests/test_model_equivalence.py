"""Thrust-rate model (SOUS VIDE eq. 1) vs rigid-body model with a fast rate loop: the same
closed-loop manoeuvre gives the same trajectory within a stated tolerance.

Both vehicles are flown by the same outer loop (position -> [thrust, body rates]). The
thrust-rate model applies the rates directly; the rigid body tracks them with the FlightGoggles
acro loop (rate PID + allocation, here with a fast P gain) over motor lag.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from _airframes import quad_x
from volary.control import Gains, make_controller
from volary.dynamics import Disturbance, DynamicsConfig, MultirotorState, VehicleParams, rollout
from volary.dynamics.allocation import hover_speeds

# Stated tolerance on the position gap over the 5 s manoeuvre (two steps of 1.22 m): 8 cm at
# the peak (measured 7.1 cm, mostly in z: the rigid body's thrust goes through the 20 ms motor
# lag, the thrust-rate model's does not), 1 mm once settled (measured 0.2 mm).
TOLERANCE_M = 0.08
SETTLED_TOLERANCE_M = 1e-3


def setpoint(t: float) -> torch.Tensor:
    return torch.tensor([[1.0, 0.5, 1.5, 0.5]]) if t < 2.5 else torch.tensor([[0.0, 0.0, 1.0, 0.0]])


def fly(model: str, n_steps: int = 1200, control_dt: float = 1 / 240) -> torch.Tensor:
    af = quad_x()
    p = VehicleParams.from_airframes(af, 1, dtype=torch.float64)
    outer = make_controller("position", p, model="thrust_rate")
    inner = make_controller(
        "ctbr", p, gains=Gains.default(p).override(rate_p=60.0, rate_i=0.0, rate_d=0.0)
    )
    cfg = DynamicsConfig(model=model, stochastic=False, ground=False)
    s = MultirotorState.create(1, 4, dtype=torch.float64, pos=[0.0, 0.0, 1.0])
    s = s.replace(rotor_speed=hover_speeds(p))
    d, keys = Disturbance.create(1, dtype=torch.float64), torch.arange(1)
    path = []
    for k in range(n_steps):
        u = outer(s, setpoint(k * control_dt).double(), control_dt)  # [f_th, W]
        if model == "rigid_body":
            ctbr = torch.cat((u[:, :1] * p.max_thrust[:, None], u[:, 1:]), dim=-1)
            cmd = inner(s, ctbr, control_dt)
        else:
            cmd = u
        s = rollout(p, s, cmd, d, keys, cfg, 4)
        path.append(s.pos[0])
    return torch.stack(path)


@pytest.mark.slow  # 10-30 s on 2 cores; make test-slow
def test_thrust_rate_model_matches_rigid_body_with_fast_rate_loop():
    rigid, tr = fly("rigid_body"), fly("thrust_rate")
    gap = (rigid - tr).norm(dim=-1)
    assert gap.max() < TOLERANCE_M, f"max position gap {gap.max():.4f} m"
    assert gap[-1] < SETTLED_TOLERANCE_M, f"settled gap {gap[-1]:.5f} m"
    assert (tr[-1] - torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)).norm() < 0.05
    assert (tr[int(2.4 * 240)] - torch.tensor([1.0, 0.5, 1.5], dtype=torch.float64)).norm() < 0.1


def test_field_names_stay_in_sync():  # the test above relies on these gain names
    assert {"rate_p", "rate_i", "rate_d"} <= {f.name for f in dataclasses.fields(Gains)}
