"""The AlphaPilot course's factory arena (issue 57): walls, roof, pillars and machines around the
gates, the same every time, clear of the racing line of every course the generators draw, seen
by the stereo camera, collidable, and not handed to the contestant."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from volary.errors import ConfigError
from volary.math.quaternion import quat_from_euler
from volary.sensors import DepthCamera, camera_config
from volary.sensors.raycast.registry import make_raycaster
from volary.studies.alphapilot.challenge import run_challenge
from volary.studies.alphapilot.interface import Briefing, ChallengeObservation
from volary.studies.alphapilot.sensor_racer import SensorRacer
from volary.worlds import alphapilot_2019
from volary.worlds.factory import FACTORY_ID
from volary.worlds.tracks import ARENAS, COURSE_GENERATORS, alphapilot_2019_courses

QUICK = {"iters": 20, "samples": 200}  # a rough nominal plan: these tests fly seconds, not laps


def box_distance(points: np.ndarray, spec) -> np.ndarray:
    """(P, B) m from each point to each of the spec's (yawed) boxes; 0 inside."""
    c = np.array([b.center for b in spec.obstacles])
    half = np.array([b.size for b in spec.obstacles]) / 2
    yaw = np.array([b.yaw for b in spec.obstacles])
    rel = points[:, None, :] - c[None]
    cy, sy = np.cos(yaw), np.sin(yaw)
    local = np.stack(
        (cy * rel[..., 0] + sy * rel[..., 1], -sy * rel[..., 0] + cy * rel[..., 1], rel[..., 2]), -1
    )
    return np.linalg.norm(np.maximum(np.abs(local) - half, 0.0), axis=-1)


def racing_line_points(spec, step: float = 0.1) -> np.ndarray:
    """The polyline through the start and the course gates' centres in order, every ``step``."""
    pts = [np.asarray(spec.start, dtype=float)]
    pts += [np.asarray(spec.gates[i].center) for i in spec.meta["order_index"]]
    out = []
    for a, b in zip(pts[:-1], pts[1:], strict=True):
        k = max(1, int(np.ceil(np.linalg.norm(b - a) / step)))
        out.append(a + np.linspace(0, 1, k + 1)[:, None] * (b - a))
    return np.concatenate(out)


def test_the_factory_has_walls_pillars_and_machines_inside_the_bounds():
    empty, spec = alphapilot_2019(), alphapilot_2019(arena="factory")
    assert empty.obstacles == () and set(ARENAS) == {"empty", "factory"}
    assert spec.gates == empty.gates and spec.bounds_min == empty.bounds_min
    assert alphapilot_2019(arena="factory").obstacles == spec.obstacles  # one hall, every time
    height = spec.bounds_max[2] - spec.bounds_min[2]
    walls = [b for b in spec.obstacles if max(b.size) > 40]
    pillars = [b for b in spec.obstacles if b.size[:2] == (0.6, 0.6) and b.size[2] > 0.9 * height]
    machines = [b for b in spec.obstacles if max(b.size) <= 3.0]
    assert len(walls) == 5 and len(pillars) >= 15 and len(machines) >= 15
    assert len(walls) + len(pillars) + len(machines) == len(spec.obstacles)
    ids = [b.object_id for b in spec.obstacles]
    assert min(ids) == FACTORY_ID and len(set(ids)) == len(ids)
    assert FACTORY_ID > max(g.object_id for g in spec.gates)
    corners = np.concatenate([
        np.array(b.center) + (np.array(b.size) / 2) * np.array(s)
        for b in spec.obstacles for s in np.array(np.meshgrid(*[[-1, 1]] * 3)).T.reshape(-1, 3)
    ]).reshape(-1, 3)  # fmt: skip
    reach = np.hypot(*np.array([b.size[:2] for b in machines]).T).max() / 2  # yawed boxes
    assert (corners >= np.array(spec.bounds_min) - reach - 1e-9).all()
    assert (corners <= np.array(spec.bounds_max) + reach + 1e-9).all()
    for b in machines:
        assert b.center[2] == pytest.approx(b.size[2] / 2)  # standing on the floor
    with pytest.raises(ConfigError, match="arena"):
        alphapilot_2019(arena="warehouse")


@pytest.mark.parametrize("generator", sorted(COURSE_GENERATORS.names()))
def test_nothing_stands_within_3_m_of_the_racing_line_of_any_course(generator):
    """200 courses of every generator setting: the polyline through the start and the drawn
    course gates keeps 3 m from every box of the hall, and no gate touches one."""
    courses = alphapilot_2019_courses(200, 7, generator, arena="factory")
    hall = courses[0].obstacles
    worst_line, worst_gate = math.inf, math.inf
    for spec in courses:
        assert spec.obstacles == hall
        worst_line = min(worst_line, float(box_distance(racing_line_points(spec), spec).min()))
        frames = np.concatenate([np.asarray(g.corners) for g in spec.gates])
        worst_gate = min(worst_gate, float(box_distance(frames, spec).min()))
    assert worst_line >= 3.0, worst_line
    assert worst_gate >= 0.5, worst_gate


def test_the_stereo_camera_sees_the_hall_at_the_start():
    """On the nominal course at the start, most valid depth pixels lie on the hall's structure
    (not on gates, not on the floor); in the empty arena none do."""
    share = {}
    for arena in ARENAS:
        spec = alphapilot_2019(arena=arena)
        cfg = replace(camera_config("flightgoggles_stereo"), segmentation=True)
        cam = DepthCamera(cfg, make_raycaster([spec], 1))
        q = quat_from_euler(*(torch.tensor([v], dtype=torch.float64)
                              for v in (0.0, 0.0, spec.start_yaw)))  # fmt: skip
        r = cam(torch.tensor([spec.start], dtype=torch.float64), q)
        seg, valid = r.segmentation[0], r.valid[0]
        share[arena] = float(((seg >= FACTORY_ID) & valid).sum() / valid.sum())
    assert share["empty"] == 0.0
    assert share["factory"] > 0.5, share


class Hover:
    def reset(self, briefing: Briefing) -> None:
        self.briefing = briefing

    def act(self, obs: ChallengeObservation) -> torch.Tensor:
        b = self.briefing
        return torch.cat(((b.vehicle.mass * 9.81).float()[:, None], torch.zeros(b.n_envs, 3)), -1)


def test_the_hall_is_collidable_and_not_briefed():
    """A vehicle hovering against a machine crashes there (the race's collision rule), in the
    empty arena it does not; the contestant's briefing has the gates but not the hall."""
    spec = alphapilot_2019(arena="factory")
    crate = next(b for b in spec.obstacles if max(b.size) <= 3.0)
    start = (crate.center[0], crate.center[1], crate.size[2] + 0.1)  # just above its top
    out = {}
    for arena in ARENAS:
        course = replace(alphapilot_2019(arena=arena), start=start)
        spy = Hover()
        res = run_challenge([course], spy, seed=0, time_limit_s=0.5)
        out[arena] = bool(res.race.collided[0])
        assert spy.briefing.course.obstacles == () and "arena" not in spy.briefing.course.meta
        assert spy.briefing.course.gates == spec.gates
    assert out == {"empty": False, "factory": True}


@pytest.mark.slow  # 10-30 s on 2 cores; make test-slow
def test_the_reference_contestant_passes_the_first_gates_in_the_factory():
    res = run_challenge([alphapilot_2019(arena="factory")], SensorRacer(**QUICK), seed=0,
                        time_limit_s=8.0)  # fmt: skip
    assert int(res.race.gates_passed[0]) >= 3 and not bool(res.race.collided[0])
