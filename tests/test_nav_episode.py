"""The episode: one work unit flown in one Simulator batch -> one TrialResult per platform."""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace

import numpy as np
import pytest

from volary.errors import ConfigError, UnknownNameError
from volary.studies.flyingtrust import episode
from volary.studies.flyingtrust.episode import SPEED_REF_SHARE, run_unit
from volary.studies.flyingtrust.schema import (
    CAUSES,
    ROW_FIELDS,
    ProtocolSettings,
    TrialResult,
    WorkUnit,
)

PAIR = ("0.60kg-EMAX", "1.00kg-SunnySky")


def _open_line(scenario: str, config: int):
    """The fixed configuration with the uniform draw kept as is (``block_line=False``): in
    sudden drop 0 nothing then stands on the start-goal line, so straight flight succeeds."""
    from volary.worlds import make_scenario

    return make_scenario(scenario, config, block_line=False)


def _fly_open_drop():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(episode, "scene_spec", _open_line)
        return run_unit(WorkUnit("straight", "sudden_drop", 0, 0, PAIR, seed=3))


@pytest.fixture(scope="module")
def straight_rows():
    return _fly_open_drop()


def test_straight_unit_returns_one_complete_row_per_platform(straight_rows):
    rows = straight_rows
    assert [r.platform for r in rows] == list(PAIR)
    for r in rows:
        assert isinstance(r, TrialResult) and set(r.to_row()) == set(ROW_FIELDS)
        assert r.cause in CAUSES and r.algo == "straight" and r.seed == 3
        assert r.scenario == "sudden_drop" and r.config == 0 and r.trial == 0
        # the open line of sudden drop 0: straight flight reaches the goal
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
    again = _fly_open_drop()
    for a, b in zip(straight_rows, again, strict=True):
        ra, rb = a.to_row(), b.to_row()
        ra.pop("wall_time"), rb.pop("wall_time")
        assert ra == rb


class Faulty:
    """A planner whose behaviour depends on the platform: the episode must isolate each env."""

    name = "faulty"
    needs = frozenset()
    MODES = {
        "0.60kg-EMAX": "ok",
        "0.895kg-DJI": "raise",
        "0.90kg-DJI": "nan",
        "1.00kg-SunnySky": "hang",
        "1.20kg-JFRC": "never",
        "1.40kg-EMAX": "wrong",
        "0.55kg-UAV-1": "hang_in_compiled_code",
    }

    def __init__(self, **options):
        from volary.studies.flyingtrust.planners.straight import StraightPlanner

        self.inner = StraightPlanner()

    def reset(self, task):
        self.mode = self.MODES[task.platform]
        self.inner.reset(task)

    def plan(self, obs):
        ref = self.inner.plan(obs)
        if obs.t < 0.45 or self.mode == "ok":
            return None if self.mode == "never" else ref
        if self.mode == "raise":
            raise RuntimeError("planner bug")
        if self.mode == "nan":
            return replace(ref, positions=ref.positions * np.nan)
        if self.mode == "hang":
            time.sleep(30)
        if self.mode == "hang_in_compiled_code":
            # what CPython raises when the alarm strikes while a numba kernel has called back
            # into Python: the kernel returns with the timeout set, SystemError from it
            try:
                time.sleep(30)
            except BaseException as exc:
                raise SystemError(
                    "CPUDispatcher(_lbfgs) returned a result with an exception set"
                ) from exc
        if self.mode == "wrong":
            return {"positions": ref.positions}
        return None


SHORT = ProtocolSettings(time_limit=3.0, trial_wall_limit=1.0)


class ThreadProbe:
    """Records torch's and the native pools' thread counts whenever the episode calls it."""

    name = "thread_probe"
    needs = frozenset()
    seen: list[tuple[int, int]] = []

    def __init__(self, **options):
        pass

    def reset(self, task):
        pass

    def plan(self, obs):
        import torch
        from threadpoolctl import threadpool_info

        pools = max((d["num_threads"] for d in threadpool_info()), default=1)
        ThreadProbe.seen.append((torch.get_num_threads(), pools))
        return None


def test_run_unit_flies_on_one_thread_and_restores_the_callers_pools():
    """A 36-platform mapper unit flew 28 of 36 rows differently with two BLAS/OpenMP threads
    than with one: run_unit pins every pool to one thread, so rows do not depend on how the
    caller (inline, a dask thread worker, a notebook) set its threads."""
    import torch
    from threadpoolctl import threadpool_info, threadpool_limits

    unit = WorkUnit(f"{__name__}:ThreadProbe", "sudden_drop", 0, 0, PAIR[:1], 0, (), SHORT)
    before = torch.get_num_threads()
    ThreadProbe.seen.clear()
    try:
        torch.set_num_threads(2)
        with threadpool_limits(limits=2):
            run_unit(unit)
            assert torch.get_num_threads() == 2
            assert max(d["num_threads"] for d in threadpool_info()) == 2
    finally:
        torch.set_num_threads(before)
    assert len(ThreadProbe.seen) >= 10 and set(ThreadProbe.seen) == {(1, 1)}


def test_planner_faults_become_error_rows_and_do_not_stop_the_batch():
    unit = WorkUnit(f"{__name__}:Faulty", "sudden_drop", 0, 0, tuple(Faulty.MODES), 0, (), SHORT)
    rows = {r.platform: r for r in run_unit(unit)}
    causes = {p: rows[p].cause for p in Faulty.MODES}
    assert causes == {
        "0.60kg-EMAX": "timeout",  # flies on, 3 s are too short to reach the goal
        "0.895kg-DJI": "error",
        "0.90kg-DJI": "error",
        "1.00kg-SunnySky": "error",
        "1.20kg-JFRC": "no_plan",
        "1.40kg-EMAX": "error",
        "0.55kg-UAV-1": "error",
    }
    assert "RuntimeError: planner bug" in rows["0.895kg-DJI"].error
    assert "non-finite" in rows["0.90kg-DJI"].error
    assert "wall-clock limit" in rows["1.00kg-SunnySky"].error
    # a time-out that struck inside compiled code is still reported as the time-out
    assert rows["0.55kg-UAV-1"].error == rows["1.00kg-SunnySky"].error
    assert "expected NavReference" in rows["1.40kg-EMAX"].error
    for p in ("0.895kg-DJI", "0.90kg-DJI", "1.00kg-SunnySky", "1.40kg-EMAX", "0.55kg-UAV-1"):
        assert 0.4 <= rows[p].flight_time <= 0.6 and not rows[p].success
    ok = rows["0.60kg-EMAX"]
    assert ok.path_length > 5.0 and math.isclose(ok.flight_time, 3.0, abs_tol=0.11)
    assert rows["1.20kg-JFRC"].path_length < 0.5  # held the start waypoint
    # an env's row does not depend on the other envs of its batch
    alone = run_unit(replace(unit, platforms=("0.60kg-EMAX",)))[0].to_row()
    mixed = ok.to_row()
    alone.pop("wall_time"), mixed.pop("wall_time")
    assert alone == mixed


def test_run_unit_rejects_bad_units():
    with pytest.raises(ConfigError):
        run_unit("straight")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        run_unit(WorkUnit("straight", "forest", 0, 0, (), 0))
    with pytest.raises(UnknownNameError):
        run_unit(WorkUnit("straight", "jungle", 0, 0, ("0.60kg-EMAX",), 0))


# ---- metrics on hand-made tracks ----------------------------------------------------------
def test_metrics_of_a_hand_made_track():
    from volary.studies.flyingtrust.metrics import first_entry_time, track_json, trial_metrics

    t = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    pos = np.array([[0, 0, 1], [3, 0, 1], [6, 0.4, 1], [6, 4.4, 1], [9, 4.4, 1]], float)
    vel = np.array([[0, 0, 0], [3, 0, 0], [0, 4, 0], [3, 0, 0], [0, 0, 0]], float)
    m = trial_metrics(t, pos, vel, start=[0, 0, 1], goal=[10, 0, 1], collisions=1)
    length = 3 + math.hypot(3, 0.4) + 4 + 3
    assert math.isclose(m["path_length"], length)
    assert m["flight_time"] == 4.0 and math.isclose(m["mean_speed"], length / 4)
    assert m["max_speed"] == 4.0
    assert math.isclose(m["collisions_per_m"], 1 / length) and m["collisions"] == 1
    assert math.isclose(m["tracking_error"], (0 + 0 + 0.4 + 4.4 + 4.4) / 5)
    assert math.isclose(m["proximity"], 40.0)  # 2 of 5 samples within 0.3 m
    assert math.isclose(m["final_distance"], math.hypot(1, 4.4))
    assert first_entry_time(t, pos, [6, 0, 1], 2.0) == 2.0
    assert math.isnan(first_entry_time(t, pos, [60, 0, 1], 2.0))
    rows = json.loads(track_json(t + 0.00049, pos + 0.0004, every=3))
    assert rows == [[0.0, 0.0, 0.0, 1.0], [3.0, 6.0, 4.4, 1.0], [4.0, 9.0, 4.4, 1.0]]


def test_metrics_beyond_the_segment_ends_and_degenerate_tracks():
    from volary.studies.flyingtrust.metrics import segment_distance, trial_metrics

    d = segment_distance(np.array([[-3.0, 4, 0], [13, 0, 0], [5, -2, 0]]), [0, 0, 0], [10, 0, 0])
    np.testing.assert_allclose(d, [5.0, 3.0, 2.0])
    m = trial_metrics([0.0], [[1.0, 0, 0]], [[0.0, 0, 0]], start=[0, 0, 0], goal=[1, 0, 0])
    assert m["path_length"] == 0 and m["collisions_per_m"] == 0 and m["final_distance"] == 0
    with pytest.raises(ConfigError):
        trial_metrics([0.0, 1.0], [[0, 0, 0]], [[0, 0, 0]], start=[0, 0, 0], goal=[1, 0, 0])


class Spy:
    """Records what the episode hands a planner that needs both sensors; flies straight."""

    name = "spy"
    needs = frozenset({"depth", "lidar"})
    seen: list = []

    def __init__(self):
        from volary.studies.flyingtrust.planners.straight import StraightPlanner

        self.inner = StraightPlanner()

    def reset(self, task):
        self.task = task
        self.inner.reset(task)

    def plan(self, obs):
        Spy.seen.append((self.task, obs))
        return self.inner.plan(obs)


def test_sensors_and_task_handed_to_planners():
    Spy.seen.clear()
    settings = ProtocolSettings(time_limit=0.25)
    run_unit(WorkUnit(f"{__name__}:Spy", "forest", 0, 0, ("0.60kg-EMAX",), 5, (), settings))
    task, obs = Spy.seen[0]
    assert len(Spy.seen) == 3 and [o.t for _, o in Spy.seen] == pytest.approx([0, 0.1, 0.2])
    cam, lid = task.depth, task.lidar
    assert obs.depth.shape == (cam.height, cam.width) and obs.depth.dtype == np.float32
    assert obs.lidar.shape == (len(lid.directions),)
    for img, rng in ((obs.depth, cam.max_range), (obs.lidar, lid.max_range)):
        finite = np.isfinite(img)
        assert finite.any() and (img[finite] > 0).all() and (img[finite] <= rng).all()
        assert np.isposinf(img[~finite]).all()
    np.testing.assert_allclose(obs.position, task.start, atol=0.05)
    assert task.limits.max_speed == pytest.approx(4.0 * SPEED_REF_SHARE)
    assert 0 < task.limits.max_acc <= 4.0
    assert task.limits.radius > 0 and task.goal_radius == 2.0 and task.platform == "0.60kg-EMAX"
    assert task.bounds_max[2] == 3.0 and task.time_limit == 0.25


class RgbSpy(Spy):
    """A planner that sees the RGB camera and the depth camera (to compare the two)."""

    needs = frozenset({"depth", "rgb"})
    seen: list = []

    def plan(self, obs):
        RgbSpy.seen.append((self.task, obs))
        return self.inner.plan(obs)


def test_rgb_camera_sees_the_scene_the_depth_camera_sees():
    """A planner that needs "rgb" gets (H, W, 3) uint8 frames of the scene's splat appearance,
    pixel for pixel aligned with the depth camera: obstacles within 5 m are never sky, and the
    camera info matches the depth camera's."""
    from volary.studies.flyingtrust.episode import RGB_SKY

    RgbSpy.seen.clear()
    unit = WorkUnit(f"{__name__}:RgbSpy", "forest", 0, 0, ("0.60kg-EMAX",), 5, (),
                    ProtocolSettings(time_limit=0.25))  # fmt: skip
    run_unit(unit)
    task, obs = RgbSpy.seen[0]
    cam, rgb = task.depth, task.rgb
    assert (rgb.width, rgb.height, rgb.fx, rgb.fy, rgb.cx, rgb.cy) == (
        cam.width, cam.height, cam.fx, cam.fy, cam.cx, cam.cy)  # fmt: skip
    assert np.array_equal(rgb.q_body_cam, cam.q_body_cam) and rgb.rate_hz == cam.rate_hz
    assert obs.rgb.shape == (cam.height, cam.width, 3) and obs.rgb.dtype == np.uint8
    assert obs.lidar is None  # only what the planner needs
    sky = np.abs(obs.rgb.astype(float) - 255 * np.array(RGB_SKY)).max(-1) <= 3
    near = np.isfinite(obs.depth) & (obs.depth < 5.0)
    assert near.sum() > 100 and not sky[near].any()
    assert sky.sum() > 100  # forest 0 shows sky above its trees
    Spy.seen.clear()  # a planner without "rgb" gets none
    run_unit(replace(unit, algo=f"{__name__}:Spy"))
    assert Spy.seen[0][1].rgb is None


def test_reactive_unit_is_deterministic():
    unit = WorkUnit("reactive", "forest", 1, 1, PAIR, 2, (), ProtocolSettings(time_limit=4.0))
    a, b = run_unit(unit), run_unit(unit)
    for ra, rb in zip(a, b, strict=True):
        da, db = ra.to_row(), rb.to_row()
        da.pop("wall_time"), db.pop("wall_time")
        assert da == db
    assert all(r.path_length > 3.0 for r in a)


def test_the_box_collider_changes_only_what_counts_as_a_hit(straight_rows):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(episode, "scene_spec", _open_line)
        unit = WorkUnit("straight", "sudden_drop", 0, 0, PAIR, seed=3,
                        settings=ProtocolSettings(collider="box"))  # fmt: skip
        rows = run_unit(unit)
    for a, b in zip(straight_rows, rows, strict=True):  # no contact: the same flight and row
        assert {**a.to_row(), "wall_time": 0} == {**b.to_row(), "wall_time": 0}
    with pytest.raises(ConfigError, match="settings.collider"):
        ProtocolSettings(collider="capsule")


def test_planners_keep_the_box_half_width_from_obstacles():
    from volary.planning.navigation import NavLimits

    sphere = NavLimits(4.0, 5.0, 3.0, 2.5, 100.0, 8.0, 0.3)
    box = replace(sphere, half_extents=(0.24, 0.22, 0.05))
    assert sphere.plan_radius == 0.3 and box.plan_radius == 0.24


class Closing(Spy):
    """A planner that owns a resource (a ROS 1 relay's nodes, a socket) and frees it in close();
    the 0.895 kg DJI's plan raises, the 1.00 kg SunnySky's close raises."""

    closed: list = []

    def plan(self, obs):
        if self.task.platform == "0.895kg-DJI":
            raise RuntimeError("planner bug")
        return self.inner.plan(obs)

    def close(self):
        Closing.closed.append(self.task.platform)
        if self.task.platform == "1.00kg-SunnySky":
            raise OSError("socket already gone")


def test_every_planner_is_closed_once_when_its_unit_ends():
    """The unit closes each planner when its flight is over, also after a planner fault, so a
    planner's end-of-trial work (the ROS relay's timing line) is never lost with the worker; a
    failing close() warns and leaves the rows as flown."""
    Closing.closed.clear()
    platforms = ("0.60kg-EMAX", "0.895kg-DJI", "1.00kg-SunnySky")
    settings = ProtocolSettings(time_limit=0.25)
    unit = WorkUnit(f"{__name__}:Closing", "forest", 0, 0, platforms, 5, (), settings)
    with pytest.warns(UserWarning, match="socket already gone"):
        rows = {r.platform: r for r in run_unit(unit)}
    assert sorted(Closing.closed) == sorted(platforms)
    assert rows["0.895kg-DJI"].cause == "error" and "planner bug" in rows["0.895kg-DJI"].error
    assert rows["1.00kg-SunnySky"].cause != "error"
