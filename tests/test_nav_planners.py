"""Contract test of every registered navigation planner, and the planner registry."""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import volary.registry
from volary.errors import ConfigError, UnknownNameError
from volary.planning.navigation import (
    SENSORS,
    DepthCameraInfo,
    NavLimits,
    NavObservation,
    NavPlanner,
    NavReference,
    NavTask,
    RgbCameraInfo,
)
from volary.studies.flyingtrust.episode import _checked
from volary.studies.flyingtrust.planners import PLANNERS, available_planners, get_planner

W, H = 64, 48
FX = (W / 2) / math.tan(math.radians(45))
Q_CAM = np.array([0.5, -0.5, 0.5, -0.5])  # forward camera, OpenCV axes


def _task(goal=(20.0, 0.0, 1.5)) -> NavTask:
    return NavTask(
        start=np.array([0.0, 0.0, 1.5]),
        goal=np.array(goal),
        goal_radius=2.0,
        bounds_min=np.array([-5.0, -10.0, 0.0]),
        bounds_max=np.array([30.0, 10.0, 4.0]),
        limits=NavLimits(4.0, 5.0, 3.0, 2.5, 100.0, 8.0, 0.3),
        time_limit=90.0,
        planner_rate_hz=10.0,
        depth=DepthCameraInfo(W, H, FX, FX, W / 2, H / 2, 10.0, 10.0, np.zeros(3), Q_CAM),
        seed=1,
        platform="synthetic",
        rgb=RgbCameraInfo(W, H, FX, FX, W / 2, H / 2, 10.0, np.zeros(3), Q_CAM),
    )


def _depth_wall(dist: float | None, height: float = 1.5) -> np.ndarray:
    """Forward camera ``height`` m up, level: a floor below the horizon, and a wall ``dist`` m
    ahead."""
    v = (np.arange(H) + 0.5 - H / 2) / FX
    img = np.full((H, W), np.inf, dtype=np.float32)
    floor = np.where(v > 0, height / np.maximum(v, 1e-9), np.inf)  # z-depth of the floor
    img[:] = floor[:, None]
    if dist is not None:
        img = np.minimum(img, np.float32(dist))
    return np.where(img <= 10.0, img, np.inf).astype(np.float32)


@functools.lru_cache(maxsize=4)
def _rgb_open(wall: float | None = None) -> np.ndarray:
    """The benchmark's RGB frame from 1.5 m over an open floor (the synthesized splats of a
    floor-only scene, the sky above), with a wall ``wall`` m ahead if given; read-only."""
    from volary.sensors.splat import SKY, SplatCamera, synthesize, to_uint8
    from volary.worlds import Box, SceneSpec

    walls = () if wall is None else (Box((wall + 0.25, 0.0, 2.0), (0.5, 30.0, 4.0), 0.0, 1),)
    spec = SceneSpec("open", (-5.0, -20.0, 0.0), (40.0, 20.0, 6.0), walls)
    cam = SplatCamera(synthesize(spec, 0), W, H, math.pi / 2, background=SKY)
    img = to_uint8(cam(torch.tensor([[0.0, 0.0, 1.5]]), torch.tensor([[1.0, 0, 0, 0]])).rgb[0])
    out = img.numpy()
    out.flags.writeable = False
    return out


def _obs(t=0.0, depth=None, rgb=None) -> NavObservation:
    return NavObservation(
        t=t,
        position=np.array([0.0, 0.0, 1.5]),
        velocity=np.zeros(3),
        quat=np.array([1.0, 0.0, 0.0, 0.0]),
        omega=np.zeros(3),
        depth=depth,
        rgb=rgb,
    )


def _sensed(p, t: float) -> NavObservation:
    """An open-space observation with the sensors planner ``p`` needs."""
    depth = _depth_wall(None) if "depth" in p.needs else None
    return _obs(t, depth, _rgb_open() if "rgb" in p.needs else None)


@pytest.mark.parametrize("name", available_planners())
def test_planner_contract_open_space(name):
    """Every registered planner: reset, then plans toward the goal in open space."""
    p = get_planner(name)
    assert isinstance(p, NavPlanner) and p.name
    assert set(p.needs) <= SENSORS
    task = _task()
    p.reset(task)
    ref = None
    for k in range(10):
        out = p.plan(_sensed(p, 0.1 * k))
        assert _checked(out) is out
        ref = out if out is not None else ref
    assert isinstance(ref, NavReference), f"{name} never planned in open space"
    pos, vel, _, yaw = ref.sample(np.array([ref.times[0], ref.times[0] + 1.0]))
    assert pos[1, 0] > pos[0, 0] or vel[0, 0] > 0  # moves toward +x
    assert np.isfinite(yaw).all()


@pytest.mark.parametrize("name", available_planners())
def test_planner_instances_are_independent_and_deterministic(name):
    outs = []
    for _ in range(2):
        p = get_planner(name)
        p.reset(_task())
        out = None
        for k in range(3):
            out = p.plan(_sensed(p, 0.1 * k))
        outs.append(out)
    a, b = outs
    assert (a is None) == (b is None)
    if a is not None:
        np.testing.assert_array_equal(a.positions, b.positions)
        np.testing.assert_array_equal(a.times, b.times)


def test_straight_flies_the_line_at_the_cap():
    p = get_planner("straight")
    p.reset(_task())
    ref = p.plan(_obs())
    pos, vel, acc, yaw = ref.sample(np.linspace(0, 10, 101))
    assert np.abs(pos[:, 1:] - [0.0, 1.5]).max() < 1e-12 and np.allclose(yaw, 0.0)
    assert np.isclose(np.linalg.norm(vel, axis=1).max(), 4.0)
    np.testing.assert_allclose(ref.positions[-1], [20.0, 0.0, 1.5], atol=1e-9)
    assert np.abs(acc).max() <= 5.0 + 1e-9
    slow = get_planner("straight", speed=2.0)
    slow.reset(_task())
    assert np.isclose(np.linalg.norm(slow.plan(_obs()).velocities, axis=1).max(), 2.0)


def test_reactive_avoids_a_wall_ahead():
    p = get_planner("reactive")
    p.reset(_task())
    open_ref = p.plan(_obs(0.0, _depth_wall(None)))
    assert abs(open_ref.yaws[-1]) < 0.05  # straight at the goal
    p.reset(_task())
    blocked = p.plan(_obs(0.0, _depth_wall(1.0)))  # a wall across the whole view
    assert np.linalg.norm(blocked.velocities[0]) < 0.6  # brakes (and turns)
    assert abs(blocked.yaws[-1]) > 0.5


def test_reactive_steers_through_a_gap():
    img = _depth_wall(None)
    img[:, : W // 2 + 12] = np.minimum(img[:, : W // 2 + 12], 3.0)  # wall on the left/centre
    p = get_planner("reactive")
    p.reset(_task())
    ref = p.plan(_obs(0.0, img))
    assert ref.yaws[-1] < -0.1  # turns right (negative yaw), toward the open side


def test_registry_names_and_errors():
    assert set(PLANNERS) >= {"straight", "reactive", "mapper"}
    assert {"straight", "reactive"} <= set(available_planners())
    with pytest.raises(UnknownNameError) as info:
        get_planner("strait")
    assert "straight" in str(info.value) and "module:Class" in str(info.value)
    with pytest.raises(ConfigError, match="bad options"):
        get_planner("straight", sped=3.0)
    with pytest.raises(ConfigError):
        get_planner("straight", speed=-1.0)
    with pytest.raises(ConfigError, match="cannot import"):
        get_planner("no_such_pkg.mod:Planner")
    with pytest.raises(ConfigError, match="has no"):
        get_planner("volary.studies.flyingtrust.planners.straight:Nope")
    with pytest.raises(ConfigError, match="NavPlanner"):
        get_planner("builtins:object")


class Hover:
    """A user planner: holds the start."""

    name = "hover"
    needs = frozenset()

    def __init__(self, height: float = 0.0) -> None:
        self.height = height

    def reset(self, task):
        self.task = task

    def plan(self, obs):
        p = self.task.start + [0, 0, self.height]
        return NavReference(obs.t, np.array([obs.t]), p[None], np.zeros((1, 3)),
                            np.zeros((1, 3)), np.zeros(1))  # fmt: skip


def test_module_class_spec_and_entry_points(monkeypatch):
    p = get_planner(f"{__name__}:Hover", height=1.0)
    assert isinstance(p, Hover) and p.height == 1.0
    ep = SimpleNamespace(name="hoverer", load=lambda: Hover)
    monkeypatch.setattr(volary.registry, "entry_points", lambda group: [ep])
    assert isinstance(get_planner("hoverer"), Hover)
    assert "hoverer" in available_planners()
    with pytest.raises(UnknownNameError, match="hoverer"):
        get_planner("nope")
    # a run checks its names the same way before it starts: an installed entry point flies,
    # a mistyped module is refused now (not flown as a run of error rows), a remote name is
    # the planner host's to resolve
    from volary.studies.flyingtrust.run import check_algo_names

    check_algo_names(["straight", "hoverer", f"{__name__}:Hover"])
    with pytest.raises(ConfigError, match="cannot import 'no_such_module'"):
        check_algo_names(["no_such_module:Planner"])
    with pytest.raises(UnknownNameError, match="unknown algorithm 'nope'; .*hoverer"):
        check_algo_names(["nope"])
    check_algo_names(["no_such_module:Planner"], remote={"no_such_module:Planner"})
