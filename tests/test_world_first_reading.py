"""World sensor rig: a vehicle whose episode ended reads as misses, first reading included."""

from __future__ import annotations

import torch

from volary.sensors.lidar import LidarConfig
from volary.sim import Sensing, World
from volary.worlds import make_scenario


def test_first_ray_reading_skips_vehicles_that_ended():
    spec = make_scenario("forest", 0)
    lidar = LidarConfig(channels=4, columns=32, max_range=20.0, min_range=0.0)
    world = World("0.60kg-EMAX", spec, n_envs=2, sensors={"lidar": Sensing(lidar)})
    world.reset(pos=torch.tensor(spec.start, dtype=torch.float32))
    world.end(torch.tensor([False, True]), "done")
    scan = world.read("lidar")  # the first reading builds the caster
    assert bool(scan.valid[0].any()) and not bool(scan.valid[1].any())
    assert world.caster.active.tolist() == [True, False]
