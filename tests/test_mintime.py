"""Minimum-time allocation (volary.planning.mintime): feasible, faster than a uniform rescale,
velocity constraints along given directions honoured, bad input rejected."""

from __future__ import annotations

import math

import pytest
import torch

import volary.platforms as platforms
from volary.errors import ConfigError
from volary.planning import Limits, feasible, optimize_times
from volary.planning.mintime import min_time

F64 = torch.float64
LIM = Limits(thrust_margin=0.9, rotor_margin=0.95, max_body_rate=12.0, max_tilt=math.radians(70))


def _course() -> tuple[torch.Tensor, torch.Tensor]:
    """A zigzag with one sharp turn: a uniform rescale is set by that turn alone."""
    wp = torch.tensor(
        [[0, 0, 1], [4, 0, 1.5], [8, 0.5, 1.5], [8.5, 4, 2], [4, 5, 1.5], [0, 5, 1]], dtype=F64
    )[None]
    der = torch.full((1, 6, 3, 4), math.nan, dtype=F64)
    der[:, 0] = 0.0
    return wp, der


def test_min_time_is_feasible_and_faster_than_one_uniform_scale():
    fg = platforms.get("flightgoggles")
    wp, der = _course()
    res = min_time(wp, fg, LIM, derivatives=der, iters=150, samples=600, check_every=25)
    assert bool(feasible(res.traj, fg, LIM).ok.all())
    uniform = optimize_times(wp, fg, LIM, derivatives=der, speed=6.0, iters=15)
    assert float(res.traj.duration[0]) < 0.97 * float(uniform.duration[0])
    # the trajectory still starts at rest and hits every waypoint
    flat = res.traj.evaluate(
        torch.cat([torch.zeros(1, 1, dtype=F64), res.traj.knot_times[:, 1:]], 1)
    )
    torch.testing.assert_close(flat.pos, wp, atol=1e-6, rtol=0)
    assert float(flat.vel[0, 0].norm()) < 1e-9


def test_pass_through_velocity_follows_the_given_direction():
    fg = platforms.get("flightgoggles")
    wp, der = _course()
    d = torch.full_like(wp, math.nan)
    d[0, 2] = torch.tensor([0.0, 1.0, 0.0], dtype=F64)  # cross waypoint 2 heading +y
    res = min_time(wp, fg, LIM, derivatives=der, directions=d, iters=60, samples=400)
    vel = res.traj.evaluate(res.traj.knot_times[:, 2:3]).vel[0, 0]
    assert float(vel[1]) > 0.5
    torch.testing.assert_close(vel[[0, 2]], torch.zeros(2, dtype=F64), atol=1e-6, rtol=0)
    assert res.speeds is not None
    assert float(res.speeds[0, 2]) == pytest.approx(float(vel.norm()), rel=1e-6)
    assert bool(torch.isnan(res.speeds[0, [0, 1, 3, 4, 5]]).all())
    assert bool(feasible(res.traj, fg, LIM).ok.all())


def test_bad_input_names_the_argument():
    fg = platforms.get("flightgoggles")
    wp, der = _course()
    with pytest.raises(ConfigError, match="waypoints"):
        min_time(wp[0], fg, LIM)
    with pytest.raises(ConfigError, match="iters"):
        min_time(wp, fg, LIM, iters=0)
    with pytest.raises(ConfigError, match="durations"):
        min_time(wp, fg, LIM, durations=-torch.ones(1, 5, dtype=F64))
    with pytest.raises(ConfigError, match="directions"):
        min_time(wp, fg, LIM, directions=torch.zeros_like(wp))
    with pytest.raises(ConfigError, match="derivatives"):
        min_time(wp, fg, LIM, derivatives=der[:, :3])
