"""The episode: one work unit flown in one Simulator batch -> one TrialResult per platform."""

from __future__ import annotations

import json
import math

import pytest

from volary.bench.nav.episode import run_unit
from volary.bench.nav.schema import CAUSES, ROW_FIELDS, TrialResult, WorkUnit

PAIR = ("0.60kg-EMAX", "1.00kg-SunnySky")


@pytest.fixture(scope="module")
def straight_rows():
    return run_unit(WorkUnit("straight", "sudden_drop", 0, 0, PAIR, seed=3))


def test_straight_unit_returns_one_complete_row_per_platform(straight_rows):
    rows = straight_rows
    assert [r.platform for r in rows] == list(PAIR)
    for r in rows:
        assert isinstance(r, TrialResult) and set(r.to_row()) == set(ROW_FIELDS)
        assert r.cause in CAUSES and r.algo == "straight" and r.seed == 3
        assert r.scenario == "sudden_drop" and r.config == 0 and r.trial == 0
        # the open sudden-drop configuration 0: the straight line reaches the goal
        assert r.success and r.cause == "success" and r.error == ""
        assert r.final_distance <= 2.0 and 0 < r.time_to_goal < r.flight_time < 90
        assert r.max_speed <= 4.0 * 1.25 and r.path_length > 40
        assert r.tracking_error < 0.3 and r.proximity > 90
        assert r.collisions == 0 and r.collisions_per_m == 0
        assert math.isclose(r.mean_speed, r.path_length / r.flight_time)
        assert r.sim_time > r.flight_time and r.wall_time > 0
        track = json.loads(r.track)
        assert track[0][0] == 0.0 and math.isclose(track[-1][0], r.flight_time, abs_tol=0.03)
        assert all(len(p) == 4 for p in track)


def test_run_unit_is_deterministic(straight_rows):
    again = run_unit(WorkUnit("straight", "sudden_drop", 0, 0, PAIR, seed=3))
    for a, b in zip(straight_rows, again, strict=True):
        ra, rb = a.to_row(), b.to_row()
        ra.pop("wall_time"), rb.pop("wall_time")
        assert ra == rb
