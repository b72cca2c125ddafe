"""volary.sim core pieces the RL envs rely on: the ``out_of_bounds`` term and a World's sensor
readings after a reset within one control step."""

from __future__ import annotations

import torch

from volary.sim import World, terms
from volary.worlds import make_scenario


def test_out_of_bounds_fires_for_a_centre_outside_the_box_only() -> None:
    spec = make_scenario("forest", 0, length=20.0, width=10.0, density=1e-9)
    world = World("crazyflie", spec, n_envs=3, control="position", stochastic=False)
    lo, hi = torch.tensor(spec.bounds_min), torch.tensor(spec.bounds_max)
    mid = (lo + hi) / 2
    pos = torch.stack((mid, mid + torch.tensor([0.0, 0.0, 1e3]), mid))
    pos[2, 0] = lo[0] - 0.01
    world.reset(pos=pos)
    assert terms.out_of_bounds(world).tolist() == [False, True, True]
    assert terms.out_of_bounds(World("crazyflie", None, n_envs=2)).tolist() == [False, False]


def test_a_reset_makes_sensors_read_again_within_the_same_step() -> None:
    spec = make_scenario("forest", 0, length=20.0, width=10.0)
    world = World("crazyflie", spec, n_envs=2, sensors={"pos": lambda p, q: p.clone()})
    world.reset(pos=torch.tensor(spec.start))
    world.step(torch.tensor([*spec.start, 0.0]))
    before = world.read("pos")
    assert world.read("pos") is before  # cached within the step
    moved = torch.tensor(spec.start) + torch.tensor([1.0, 0.0, 0.0])
    world.reset(torch.tensor([True, False]), pos=moved)
    after = world.read("pos")
    torch.testing.assert_close(after[0], moved)
    torch.testing.assert_close(after[1], before[1])
