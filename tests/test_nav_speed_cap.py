"""The protocol's speed cap (FLYINGTRUST Sec. IV-A, 4 m/s) holds for every planner: what the
runner gives the controller (references are retimed) and what the vehicle flies (the guard)."""

from __future__ import annotations

import numpy as np
import pytest

from volary.planning.navigation import NavReference
from volary.studies.flyingtrust import episode
from volary.studies.flyingtrust.episode import SPEED_REF_SHARE, retimed, run_unit
from volary.studies.flyingtrust.planners import PLANNERS
from volary.studies.flyingtrust.schema import ProtocolSettings, WorkUnit

# the two platforms that overshot a capped reference most without the guard (measured), and a
# light, agile one
FAST = ("4.91kg-DJI", "5.45kg-JFRC", "0.55kg-UAV-1")


def _open_line(scenario: str, config: int):
    from volary.worlds import make_scenario

    return make_scenario(scenario, config, block_line=False)


def _fly(algo: str, time_limit: float = 14.0):
    settings = ProtocolSettings(time_limit=time_limit)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(episode, "scene_spec", _open_line)
        return run_unit(WorkUnit(algo, "sudden_drop", 0, 0, FAST, seed=0, settings=settings))


@pytest.mark.parametrize("name", PLANNERS)
def test_every_registered_planner_flies_under_the_cap(name):
    rows = _fly(name)
    assert all(r.cause != "error" for r in rows), [r.error for r in rows]
    assert max(r.max_speed for r in rows) <= 4.0
    if name == "straight":  # it cruises at the planners' share of the cap
        assert min(r.max_speed for r in rows) >= 0.95 * 4.0 * SPEED_REF_SHARE


@pytest.mark.parametrize("planner", ["TooFastPlanner", "CarrotPlanner"])
def test_references_past_the_cap_are_held_to_it(planner):
    """A 10 m/s reference is retimed; a setpoint 30 m ahead is braked by the guard: both fly
    close to the cap, never past it."""
    rows = _fly(f"_nav_fakes:{planner}", time_limit=10.0)
    for r in rows:
        assert r.cause not in ("error", "over_speed"), r.error
        assert 0.85 * 4.0 <= r.max_speed <= 4.0, (r.platform, r.max_speed)


def test_retimed_keeps_the_path_and_scales_time():
    t = np.linspace(2.0, 4.0, 5)
    p = np.stack([8.0 * (t - 2.0), np.zeros(5), np.ones(5)], 1)
    v = np.tile([8.0, 0.0, 0.0], (5, 1))
    a = np.tile([1.0, 0.0, 0.0], (5, 1))
    ref = NavReference(2.0, t, p, v, a, np.zeros(5))
    slow = retimed(ref, 2.5, 4.0)
    np.testing.assert_array_equal(slow.positions, p)  # the same path
    np.testing.assert_allclose(slow.times, 2.5 + (t - 2.5) * 2.0)  # half as fast from t_now
    np.testing.assert_allclose(slow.velocities, v / 2.0)
    np.testing.assert_allclose(slow.accelerations, a / 4.0)
    assert np.linalg.norm(slow.sample(np.array([3.0]))[1], axis=1).max() <= 4.0
    assert retimed(ref, 2.5, 8.0) is ref  # within the cap: untouched
