"""Dynamic actors: objects posed from outside, seen by the rig and collided with."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from volary.errors import ConfigError
from volary.serve import protocol as P
from volary.sim import World
from volary.sim.actors import ACTOR_ID, Actors
from volary.worlds.primitives import Box, Cylinder, Mesh, SceneSpec

EMPTY = SceneSpec("empty", (-10.0, -10.0, 0.0), (10.0, 10.0, 5.0))
CAM = {"width": 9, "height": 7, "hfov": math.radians(60.0), "max_range": 9.0,
       "segmentation": True}  # fmt: skip


def _cube_mesh(half: float) -> Mesh:
    v = np.array([[x, y, z] for x in (-half, half) for y in (-half, half) for z in (-half, half)])
    f = [[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
         [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]]  # fmt: skip
    return Mesh(v, np.array(f))


def _world(shape, **kw) -> World:
    from volary.sensors.camera import CameraConfig

    w = World("crazyflie", EMPTY, n_envs=2, sensors={"depth": CameraConfig(**CAM)},
              actors=[shape], stochastic=False, **kw)  # fmt: skip
    w.reset(pos=torch.tensor([0.0, 0.0, 1.0]))
    return w


def _centre(w: World, b: int) -> tuple[float, int]:
    r = w.read("depth")
    return float(r.depth[b, 3, 4]), int(r.segmentation[b, 3, 4])


@pytest.mark.parametrize(
    "shape, face",
    [
        (Box(center=(0.0, 0.0, 0.0), size=(1.0, 1.0, 1.0)), 2.5),
        (Cylinder(center=(0.0, 0.0, 0.0), radius=0.5, length=2.0), 2.5),
        (_cube_mesh(0.5), 2.5),
    ],
    ids=["box", "cylinder", "mesh"],
)
def test_a_placed_actor_is_seen_only_in_its_env_and_where_it_is(shape, face):
    w = _world(shape)
    assert _centre(w, 0)[1] == -1  # not placed yet: absent
    w.actors.place(0, [3.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0], env=0)
    w._cache.clear()
    (d0, id0), (_, id1) = _centre(w, 0), _centre(w, 1)
    assert id0 == ACTOR_ID and d0 == pytest.approx(face, abs=0.02)
    assert id1 == -1  # env 1 has no actor
    w.actors.place(0, [6.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0], env=0)  # it moved away
    w._cache.clear()
    assert _centre(w, 0)[0] == pytest.approx(face + 3.0, abs=0.02)


def test_the_actor_pose_rotates_its_shape():
    """A 0.2 x 4 x 2 m board 4 m ahead faces the camera (its face 3.9 m away); turned 90 deg
    about z it is seen end-on, its near end 2 m away."""
    w = _world(Box(center=(0.0, 0.0, 0.0), size=(0.2, 4.0, 2.0)))
    w.actors.place(0, [4.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0])
    assert _centre(w, 0)[0] == pytest.approx(3.9, abs=0.02)
    yaw = math.pi / 2
    w.actors.place(0, [4.0, 0.0, 1.0], [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])
    w._cache.clear()
    assert _centre(w, 0)[0] == pytest.approx(2.0, abs=0.02)


def test_an_actor_that_reaches_the_vehicle_is_a_collision():
    w = _world(Box(center=(0.0, 0.0, 0.0), size=(1.0, 1.0, 1.0)))
    w.actors.place(0, [3.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0])
    ev = w.collision_events()
    assert not ev.collided.any() and ev.clearance[0] == pytest.approx(2.5 - 0.06, abs=0.05)
    w.actors.place(0, [0.4, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0], env=1)  # into env 1's vehicle
    ev = w.collision_events()
    assert ev.collided.tolist() == [False, True] and int(ev.object_id[1]) == ACTOR_ID
    w.actors.remove(0, env=1)
    assert not w.collision_events().collided.any()


def test_actor_inputs_are_checked():
    with pytest.raises(ConfigError, match="actors\\[0\\]"):
        Actors(["a box"], 1)
    with pytest.raises(ConfigError, match="scene"):
        World("crazyflie", None, n_envs=1, actors=[Box((0, 0, 0), (1, 1, 1))])
    a = Actors([Box((0, 0, 0), (1, 1, 1))], 2)
    with pytest.raises(ConfigError, match="index"):
        a.place(3, [0, 0, 0], [1, 0, 0, 0])


# ---- served: a client poses an actor -----------------------------------------------------------
def test_a_served_actor_appears_in_the_vehicles_depth_and_collisions_and_replays(tmp_path):
    """An actor client walks a person (cylinder) into the simulated vehicle's view and then into
    the vehicle: the depth image shows it, the vehicle's events report the
    collision, and the recording replays bit for bit."""
    pytest.importorskip("zmq")
    from test_serve import HOVER_CF, serving
    from volary.client import Client
    from volary.serve.recording import read_bag
    from volary.serve.replay import replay
    from volary.serve.world import ActorSpec, SensorSpec, ServeConfig, SlotSpec

    cfg = ServeConfig(slots=(SlotSpec(sensors=("depth",)),), scene="forest", seed=3,
                      sensors={"depth": SensorSpec("depth", "aerial_gym_64")},
                      actors=(ActorSpec(),))  # fmt: skip
    with serving(cfg, record=tmp_path / "bag") as srv:
        start = np.array(srv.world.state.pos[0].tolist())
        yaw = float(srv.world.specs[0].start_yaw)
        ahead = np.array([math.cos(yaw), math.sin(yaw), 0.0])
        with Client(srv.address) as sim, Client(srv.address, role="actor") as person:
            assert person.role == "actor" and person.slot == 0
            seen, hit = [], []
            for k in range(12):
                d = max(3.0 - 0.3 * k, 0.0)  # walks from 3 m ahead into the vehicle
                person.sock.send_multipart(P.encode({"op": "step", "pos": start + d * ahead,
                                                     "quat": [1.0, 0.0, 0.0, 0.0]}))  # fmt: skip
                obs = sim.step([HOVER_CF, 0.0, 0.0, 0.0])
                assert P.decode(person.sock.recv_multipart())["op"] == "obs"
                depth = obs["sensors"]["depth"]
                seen.append(float(depth["depth"][32, 32]))
                hit.append(obs["events"]["collided"])
    assert seen[0] == pytest.approx(3.0 - 0.25, abs=0.15)  # the cylinder's near side
    assert seen[4] < seen[0] - 1.0 and any(hit) and not hit[0]
    _, ticks = read_bag(tmp_path / "bag")
    assert sum(t == "/actor0/pose_in" for msgs in ticks.values() for t, _ in msgs) == 12
    again = replay(tmp_path / "bag")
    assert torch.equal(again.world.state.pos, srv.world.state.pos)
