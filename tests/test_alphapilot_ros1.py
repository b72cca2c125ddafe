"""Issue 57: the AlphaPilot reference racer through FlightGoggles' ROS 1 interface
(:mod:`volary.studies.alphapilot.ros1_node`) and in process.

Fast tests need no ROS master: the briefing built from the bridge's parameters is the in-process
one, a perturbed course is served with the nominal course published, and FlightGoggles'
messages (genpy classes, built in a process of their own: a process is ROS 1 or ROS 2) become
observations in volary's frames and units. The slow test flies a perturbed course through
``volary ros1 serve`` and compares it with ``run_challenge`` on the same course.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from volary.errors import ConfigError
from volary.ros1.env import missing_ros1

WHY = missing_ros1()
needs_ros1 = pytest.mark.skipif(WHY is not None, reason=str(WHY))
COURSE_SEED, COURSE_INDEX, NOISE_SEED = 0, 4, 0  # a course the reference racer completes
CONTROL_HZ = 240.0  # the in-process challenge's control rate


def _bridge_params(**options: Any) -> tuple[dict[str, Any], Any]:
    """The bridge's parameters as ``rospy.get_param("/uav")`` returns them, and its course."""
    from volary.ros1.bridge import CAMERA, RANGER, Ros1Options, serve_config
    from volary.ros1.params import fg_params
    from volary.sensors import camera_config, rangefinder_config
    from volary.serve.host import WorldHost

    host = WorldHost(serve_config(Ros1Options(**options)))
    spec = host.world.specs[0]
    flat = fg_params(host.world, spec, camera_config(CAMERA), rangefinder_config(RANGER), "r")
    uav: dict[str, Any] = {}
    for key, value in flat.items():
        if key.startswith("/uav/"):
            *path, leaf = key.split("/")[2:]
            node = uav
            for part in path:
                node = node.setdefault(part, {})
            node[leaf] = value
    return uav, spec


def _camera_info() -> Any:
    """What camera_info and /tf_static carry for the bridge's camera (topics.py)."""
    from volary.sensors import camera_config
    from volary.serve.roscommon import to_ros_quat
    from volary.studies.alphapilot.ros1_node import CameraInfo

    cam = camera_config("flightgoggles")
    fx, fy, cx, cy = (float(v) for v in cam.intrinsics)
    k = (fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0)
    return CameraInfo(cam.width, cam.height, k, cam.mount.translation,
                      to_ros_quat(cam.mount.rotation))  # fmt: skip


def test_the_briefing_from_the_ros_interface_is_the_in_process_one() -> None:
    """Served a perturbed course, the node is briefed with the nominal course (gates, ids,
    order, bounds, start), the vehicle, IMU, camera and laser the in-process challenge briefs;
    the vehicle to the float32 precision its parameters are published in."""
    from volary.bench.gate_race import RACE_PLATFORM
    from volary.sensors import camera_config, rangefinder_config
    from volary.sensors.imu import imu_config
    from volary.sim import World
    from volary.studies.alphapilot.ros1_node import briefing_from_ros
    from volary.worlds import alphapilot_2019

    uav, served = _bridge_params(control_hz=CONTROL_HZ, course_seed=COURSE_SEED,
                                 course_index=COURSE_INDEX)  # fmt: skip
    brief = briefing_from_ros(uav, _camera_info(), CONTROL_HZ)
    nominal = alphapilot_2019()
    assert [g.corners for g in served.gates] != [g.corners for g in nominal.gates]
    assert brief.course.gates == nominal.gates  # corners, names, ids, frame geometry
    for key in ("order", "order_index", "perturbation", "timeout_s", "gate_width"):
        assert brief.course.meta[key] == nominal.meta[key], key
    assert brief.start_pos == pytest.approx(nominal.start)
    assert brief.start_yaw == pytest.approx(nominal.start_yaw, abs=1e-12)
    assert brief.dt == pytest.approx(1 / CONTROL_HZ) and brief.n_envs == 1

    world = World([RACE_PLATFORM], [nominal], control="ctbr", control_hz=CONTROL_HZ)
    want = world.params.to(dtype=torch.float64)
    for f in fields(want):
        got, exp = getattr(brief.vehicle, f.name), getattr(want, f.name)
        assert got.dtype == exp.dtype and got.shape == exp.shape, f.name
        torch.testing.assert_close(got, exp, rtol=1e-6, atol=1e-12, msg=f.name)
    imu = imu_config("flightgoggles")
    assert set(vars(brief.imu)) == {"accel_noise_density", "gyro_noise_density", "rate_hz"}
    for name in vars(brief.imu):  # what 2019 published, and nothing of the bias model
        assert getattr(brief.imu, name) == pytest.approx(getattr(imu, name), rel=1e-12), name
    cam = camera_config("flightgoggles")
    assert brief.camera is not None and brief.camera.mount == cam.mount
    torch.testing.assert_close(brief.camera.intrinsics, cam.intrinsics, rtol=1e-12, atol=0.0)
    assert brief.rangefinder == rangefinder_config("flightgoggles")
    assert brief.beacon_rate_hz == brief.range_rate_hz == 60.0


def test_a_perturbed_course_is_served_with_the_nominal_course_published() -> None:
    """``--course-seed``: the World flies ``alphapilot_2019_courses(i + 1, seed)[i]``, the
    parameters' ``nominal_location`` are the nominal course's and ``location`` (the reporter's
    truth) the perturbed one's; bad course settings are refused by name."""
    from volary.ros1.bridge import Ros1Options
    from volary.serve.world import ServeConfig
    from volary.worlds import alphapilot_2019, alphapilot_2019_courses

    uav, served = _bridge_params(course_seed=3, course_index=2)
    drawn = alphapilot_2019_courses(3, 3)[2]
    nominal = alphapilot_2019()
    assert served.name == drawn.name and served.gates == drawn.gates
    for gate, base in zip(drawn.gates, nominal.gates, strict=True):
        np.testing.assert_array_equal(uav[gate.name]["nominal_location"], base.corners)
        np.testing.assert_array_equal(uav[gate.name]["location"], gate.corners)
    with pytest.raises(ConfigError, match="course_index"):
        Ros1Options(course_seed=0, course_index=-1)
    with pytest.raises(ConfigError, match="course_seed"):
        Ros1Options(course_seed=1.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'length'"):
        ServeConfig(scene="alphapilot_2019", scene_params={"length": 3})
    with pytest.raises(ConfigError, match="needs 'course_seed'"):
        ServeConfig(scene="alphapilot_2019", scene_params={"course": 3})


def test_a_course_of_another_generator_is_served_in_the_factory() -> None:
    """``--courses-from`` and ``--arena``: the World flies the course ``volary race
    --courses-from moved`` flies, inside the factory hall (its walls, pillars and machines in
    the served scene), while the parameters publish the nominal gates and nothing of the hall
    (2019 published none); bad settings are refused by name."""
    from volary.ros1.bridge import Ros1Options
    from volary.serve.world import ServeConfig
    from volary.worlds import alphapilot_2019, alphapilot_2019_courses

    uav, served = _bridge_params(course_seed=3, course_index=2, generator="moved", arena="factory")
    drawn = alphapilot_2019_courses(3, 3, "moved", "factory")[2]
    assert served.gates == drawn.gates and served.obstacles == drawn.obstacles
    assert served.gates != alphapilot_2019_courses(3, 3)[2].gates  # another generator's draw
    assert len(served.obstacles) > 10 and served.meta["arena"] == "factory"
    nominal = alphapilot_2019()
    for gate, base in zip(drawn.gates, nominal.gates, strict=True):
        np.testing.assert_array_equal(uav[gate.name]["nominal_location"], base.corners)
    assert not any("obstacle" in k or "factory" in k for k in uav)
    _, hall = _bridge_params(arena="factory")  # the nominal course in the hall
    assert hall.gates == nominal.gates and hall.obstacles == served.obstacles
    for kw, name in (({"arena": "hall"}, "arena"), ({"generator": "nope"}, "generator")):
        with pytest.raises(ConfigError, match=name):
            Ros1Options(**kw)
    bad = (({"course_seed": 1, "generator": "nope"}, "generator"), ({"arena": "hall"}, "arena"),
           ({"generator": "moved"}, "course_seed"))  # fmt: skip
    for params, name in bad:
        with pytest.raises(ConfigError, match=name):
            ServeConfig(scene="alphapilot_2019", scene_params=params)


CONVERT = r"""
import json, sys
from volary.ros1.env import import_rospy
from volary.ros1.msgs import ensure_messages
d = ensure_messages(sys.argv[1])
rospy = import_rospy([d.python, d.overlay])
from flightgoggles.msg import IRMarker, IRMarkerArray
from sensor_msgs.msg import Imu, Range
from std_msgs.msg import String
from volary.ros1 import topics as T
from volary.studies.alphapilot.ros1_node import observation, range_report, stamp_of
from volary.worlds import alphapilot_2019
from volary.sensors import rangefinder_config
import types
ranger = rangefinder_config("flightgoggles")
brief = types.SimpleNamespace(course=alphapilot_2019(), rangefinder=ranger)
t = 1.0 + 5 / 240
imu = T.imu(rospy, t, [0.25, -0.5, 9.75], [0.1, -0.2, 0.3], 0.005, 0.003)
ir = IRMarkerArray(header=T.header(rospy, t), markers=[
    IRMarker(landmarkID=String("Gate10"), markerID=String("1"), x=512.25, y=100.5, z=0.0),
    IRMarker(landmarkID=String("Gate2"), markerID=String("4"), x=1.0 / 3.0, y=767.0, z=0.0),
    IRMarker(landmarkID=String("Gate99"), markerID=String("1"), x=5.0, y=5.0, z=0.0),
    IRMarker(landmarkID=String("Gate2"), markerID=String("x"), x=5.0, y=5.0, z=0.0)])
hit = T.rangefinder(rospy, t, types.SimpleNamespace(range=[4.2]), ranger, "uav/imu")
miss = T.rangefinder(rospy, t, types.SimpleNamespace(range=[ranger.max_range]), ranger, "uav/imu")
low = T.rangefinder(rospy, t, types.SimpleNamespace(range=[0.17]), ranger, "uav/imu")
obs = observation(7, 1 / 240, imu, ir, hit, brief)
none = observation(8, 1 / 240, imu, None, miss, brief)
b = obs.beacons
vis = b.visible[0].nonzero().flatten().tolist()
print(json.dumps({
    "stamp": stamp_of(imu), "step": obs.step, "time": obs.time.tolist(),
    "accel": obs.accel.tolist(), "gyro": obs.gyro.tolist(), "dtype": str(obs.accel.dtype),
    "slots": vis, "pixels": [b.pixels[0, s].tolist() for s in vis],
    "gate_id": [int(b.gate_id[0, s]) for s in vis], "corner": [int(b.corner[0, s]) for s in vis],
    "k": b.pixels.shape[1], "hidden_nan": bool(b.pixels[0, ~b.visible[0]].isnan().all()),
    "range": [obs.range.range.tolist(), obs.range.valid.tolist()],
    "miss": [none.range.range.tolist(), none.range.valid.tolist()],
    "low": [range_report(low, ranger).range.tolist(), range_report(low, ranger).valid.tolist()],
    "no_beacons": none.beacons is None,
}))
"""


@needs_ros1
def test_flightgoggles_messages_become_observations(tmp_path: Path) -> None:
    """genpy messages as the bridge publishes them: the IMU (FLU, specific force) passes
    unchanged as float32 body vectors; each IR marker lands in slot 4 g + (markerID - 1) of its
    gate, with the gate's number as id, its float32 pixel, the rest NaN, unknown gates and
    markers left out; the laser's negative range is a positive distance, its no-return
    reading invalid."""
    from volary.worlds import alphapilot_2019

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", CONVERT, str(tmp_path / "m")], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["stamp"] == pytest.approx(1.0 + 5 / 240, abs=1e-9)
    assert got["step"] == 7 and got["time"] == pytest.approx([7 / 240])
    assert got["accel"] == [[0.25, -0.5, 9.75]] and got["dtype"] == "torch.float32"
    assert got["gyro"][0] == pytest.approx([0.1, -0.2, 0.3], rel=1e-7)
    names = [g.name for g in alphapilot_2019().gates]
    g10, g2 = names.index("Gate10"), names.index("Gate2")
    assert got["k"] == 4 * len(names)
    assert got["slots"] == sorted([4 * g10, 4 * g2 + 3])
    by_slot = dict(zip(got["slots"], zip(got["pixels"], got["gate_id"], got["corner"],
                                         strict=True), strict=True))  # fmt: skip
    assert by_slot[4 * g10] == ([512.25, 100.5], 10, 0)
    px, gid, corner = by_slot[4 * g2 + 3]
    assert px == [pytest.approx(np.float32(1 / 3), abs=0), 767.0] and (gid, corner) == (2, 3)
    assert got["hidden_nan"]
    (rng, ok), (miss, miss_ok) = got["range"], got["miss"]
    assert rng == [pytest.approx(4.2, rel=1e-6)] and ok == [True]
    assert miss_ok == [False] and got["no_beacons"]
    # a noisy return under min_range (0.2 m) is a return, as the in-process sensor reports it
    assert got["low"] == [[pytest.approx(0.17, rel=1e-6)], [True]]
    assert not math.isnan(miss[0])


@pytest.mark.slow
@needs_ros1
def test_reference_racer_flies_a_perturbed_course_through_ros1(tmp_path: Path) -> None:
    """The reference racer, as a ROS 1 node on FlightGoggles' topics, races a perturbed course
    served by ``volary ros1 serve`` (lock-step, 240 Hz): it answers every IMU tick with the
    tick's beacons and range in hand, and the bridge scores its lap with the race rule. Served
    with the pair's noise key, armed on a frame tick, it flies the flight ``run_challenge``
    flies in process with FlightGoggles' arming rule: the same gates, each passed within two
    ticks of the in-process time (the bridge stamps passages on its ticks and starts the lap
    one tick after arming; the in-process race interpolates)."""
    from volary.bench.gate_race import race_score
    from volary.studies.alphapilot.ros1_node import race_in_process, race_over_ros1
    from volary.worlds import alphapilot_2019_courses

    ros = race_over_ros1(COURSE_SEED, COURSE_INDEX, NOISE_SEED, tmp_path,
                         control_hz=CONTROL_HZ, timeout_s=900.0)  # fmt: skip
    context = json.dumps(ros)[:1500]
    assert ros["result"] in ("Challenge Completed", "Collision"), context
    assert ros["steps"] > 2 * CONTROL_HZ and ros["skipped_steps"] == 0, context
    assert ros["missing_frames"] == {"ir": 0, "range": 0}, context
    assert ros["gates_passed"] >= 1 and ros["arming_thrust"] >= 9.9, context
    done = ros["result"] == "Challenge Completed"
    want = race_score(torch.tensor([ros["gates_passed"]]),
                      torch.tensor([ros["lap_time"]], dtype=torch.float64),
                      torch.tensor([done]), torch.tensor([not done]), 300.0)  # fmt: skip
    assert ros["score"] == pytest.approx(float(want[0]), abs=1e-9), context

    course = alphapilot_2019_courses(COURSE_INDEX + 1, COURSE_SEED)[COURSE_INDEX]
    res = race_in_process([course], NOISE_SEED, control_hz=CONTROL_HZ).race
    local = [float(t) for t in res.gate_times[0] if math.isfinite(float(t))]
    print(f"ROS 1: {ros['result']}, {ros['gates_passed']}/11 gates, lap {ros['lap_time']:.4f} s; "
          f"in process: {len(local)}/11 gates, lap {float(res.time[0]):.4f} s; "
          f"ROS wall {ros['wall_s']:.0f} s")  # fmt: skip
    assert done == (bool(res.finished[0]) and not bool(res.collided[0])), context
    assert len(ros["gate_times"]) == len(local) == ros["gates_passed"], context
    np.testing.assert_allclose(ros["gate_times"], local, rtol=0, atol=2 / CONTROL_HZ)


class _Scripted:
    """A contestant that flies fixed commands and keeps what it observed."""

    def __init__(self, commands: torch.Tensor) -> None:
        self.commands, self.seen = commands, []

    def reset(self, briefing: Any) -> None:
        self.seen.clear()

    def act(self, obs: Any) -> torch.Tensor:
        self.seen.append(obs)
        return self.commands[min(int(obs.step), len(self.commands) - 1)][None]


def test_a_served_course_with_the_pairs_noise_key_draws_what_volary_race_draws() -> None:
    """``volary ros1 serve --noise-key K`` (ServeConfig.noise_keys) with K the challenge's key of
    a course x noise-seed pair: the served World's IMU, beacons and range read what
    ``run_challenge`` gives that pair's contestant, bit for bit, under the same commands (the
    slow test below flies the whole lap both ways)."""
    from volary.ros1.bridge import Ros1Options, serve_config
    from volary.serve.world import build_world
    from volary.studies.alphapilot.challenge import run_challenge
    from volary.studies.alphapilot.race import noise_key
    from volary.studies.alphapilot.ros1_node import ros1_sensors
    from volary.worlds import alphapilot_2019_courses

    seed, steps = 3, 24
    course = alphapilot_2019_courses(COURSE_INDEX + 1, COURSE_SEED)[COURSE_INDEX]
    gen = torch.Generator().manual_seed(0)
    commands = torch.tensor([9.9, 0.0, 0.0, 0.0]) + 0.3 * torch.randn(steps + 1, 4, generator=gen)
    racer = _Scripted(commands.double())
    run_challenge([course], racer, seed=seed, sensors=ros1_sensors(), control_hz=CONTROL_HZ,
                  time_limit_s=steps / CONTROL_HZ)  # fmt: skip
    options = Ros1Options(control_hz=CONTROL_HZ, course_seed=COURSE_SEED,
                          course_index=COURSE_INDEX, noise_key=noise_key(course, seed))  # fmt: skip
    world = build_world(serve_config(options))
    for k, obs in enumerate(racer.seen[:steps]):
        if k:
            assert torch.equal(world.sim.imu_reading.accel, obs.accel.to(torch.float32)), k
            assert torch.equal(world.sim.imu_reading.gyro, obs.gyro.to(torch.float32)), k
        if obs.range is not None:
            assert world.due("range") and world.due("ir"), k
            assert torch.equal(world.read("range").range, obs.range.range.to(torch.float32)), k
            px = world.read("ir").pixels
            assert torch.equal(px.isfinite(), obs.beacons.pixels.isfinite()), k
            assert torch.equal(px.nan_to_num(), obs.beacons.pixels.to(px.dtype).nan_to_num()), k
        world.step(commands[k].float()[None])
    other = build_world(serve_config(replace(options, noise_key=noise_key(course, seed + 1))))
    for k in range(8):
        other.step(commands[k].float()[None])
    assert not torch.equal(other.sim.imu_reading.accel, racer.seen[8].accel.to(torch.float32))
