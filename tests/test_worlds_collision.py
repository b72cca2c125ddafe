"""Collision events (sphere vs scene, ceiling, bounds) and the first-hit monitor in a flight."""

from __future__ import annotations

import math

import pytest
import torch

from _airframes import quad_x
from volary.errors import ConfigError
from volary.sim import Simulator
from volary.worlds import Box, Scene, SceneSpec, Sphere
from volary.worlds.collision import CollisionMonitor, collision_events

WALL_X = 3.0  # m, near face of the wall


def _wall_spec() -> SceneSpec:
    wall = Box((WALL_X + 0.25, 0.0, 2.0), (0.5, 20.0, 4.0), object_id=5)
    return SceneSpec("wall", (-10, -10, -1), (10, 10, 6), obstacles=(wall,), ceiling=4.0)


def test_events_sphere_ceiling_bounds(device):
    spec = SceneSpec(
        "s",
        (-5, -5, 0),
        (5, 5, 5),
        ceiling=3.0,
        obstacles=(Sphere((0.0, 0.0, 1.0), 0.5, object_id=3),),
    )
    scene = Scene.stack(spec, n_envs=5, device=device)
    pos = torch.tensor(
        [
            [0.0, 0.0, 1.7],
            [0.0, 0.0, 1.5 + 0.19],
            [0.0, 0.0, 2.95],
            [6.0, 0.0, 1.0],
            [0.0, 0.6, 1.0],
        ],
        device=device,
    )
    ev = collision_events(scene, pos, 0.2)
    assert ev.collided.tolist() == [False, True, False, False, True]
    assert ev.above_ceiling.tolist() == [False, False, True, False, False]
    assert ev.out_of_bounds.tolist() == [False, False, False, True, False]
    assert ev.object_id.tolist() == [3] * 5
    assert torch.allclose(ev.contact_point[1], torch.tensor([0.0, 0.0, 1.5], device=device))
    assert torch.allclose(ev.contact_point[4], torch.tensor([0.0, 0.5, 1.0], device=device))
    assert torch.isnan(ev.contact_point[0]).all()
    assert abs(ev.clearance[0].item() - 0.0) < 1e-6


def test_per_env_radius_and_input_errors(device):
    scene = Scene.stack(_wall_spec(), n_envs=2, device=device)
    pos = torch.tensor([[WALL_X - 0.15, 0.0, 1.0]] * 2, device=device)
    ev = collision_events(scene, pos, torch.tensor([0.1, 0.2], device=device))
    assert ev.collided.tolist() == [False, True]
    with pytest.raises(ConfigError, match=r"pos: expected a tensor of shape \(2, 3\)"):
        collision_events(scene, pos[:1], 0.1)
    with pytest.raises(ConfigError, match="radius"):
        collision_events(scene, pos, torch.ones(3))


def test_wall_hit_time_within_one_physics_step():
    """Fly straight at a wall at constant speed; the monitor, stepped every physics step, flags
    the hit at t* = (x_wall - r - x0) / v within one physics step (1/960 s)."""
    speeds = torch.tensor([2.0, 3.0, 4.0])
    sim = Simulator(
        quad_x(), n_envs=3, physics_hz=960.0, control_hz=960.0, control="velocity", stochastic=False
    )
    x0 = 1.5
    sim.reset(pos=[x0, 0.0, 1.0], vel=torch.stack([speeds, 0 * speeds, 0 * speeds], -1))
    scene = Scene.stack(_wall_spec(), n_envs=3)
    mon = CollisionMonitor(scene, sim.params.radius)
    r = sim.params.radius
    t_star = (WALL_X - r - x0) / speeds
    dt = 1.0 / 960.0
    sp = torch.stack([speeds, 0 * speeds, 0 * speeds, 0 * speeds], -1)
    for _ in range(int(math.ceil(t_star.max().item() / dt)) + 10):
        mon.update(sim.step(sp))
    assert mon.collided.all()
    err = (mon.time - t_star).abs()
    print(f"wall-hit time error {err.tolist()} s")
    assert (err <= dt).all(), f"hit-time error {err.tolist()} s > one physics step {dt:.5f} s"
    assert (mon.object_id == 5).all()
    assert torch.allclose(mon.contact_point[:, 0], torch.full((3,), WALL_X), atol=1e-4)
    assert torch.isnan(mon.violation_time).all()
    mon.reset(torch.tensor([True, False, False]))
    assert mon.collided.tolist() == [False, True, True]
