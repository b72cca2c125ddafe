"""The ``mapper`` navigation planner: map fusion, distance field, search, trajectory limits and
clearance, reset, and closed-loop flights on FLYINGTRUST scenes with a perfect-tracking
kinematic vehicle (depth rendered by the Embree camera, collisions from the scene SDF)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch
from scipy.ndimage import distance_transform_edt

from volary import platforms, worlds
from volary.errors import ConfigError
from volary.planning.navigation import (
    DepthCameraInfo,
    NavLimits,
    NavObservation,
    NavPlanner,
    NavReference,
    NavTask,
)
from volary.studies.flyingtrust.planners.mapper import MapperPlanner
from volary.studies.flyingtrust.planners.occupancy import FAR_CM, OccupancyGrid
from volary.studies.flyingtrust.planners.search import search

G = 9.81
FORWARD_Q = np.array([0.5, -0.5, 0.5, -0.5])  # R_BC of a camera looking along +x_B


def camera_info(width: int = 64, height: int = 64, hfov: float = math.radians(90.0)):
    f = (width / 2) / math.tan(hfov / 2)
    return DepthCameraInfo(width, height, f, f, width / 2, height / 2, 20.0, 10.0,
                           np.zeros(3), FORWARD_Q.copy())  # fmt: skip


def limits_of(platform: str, speed_cap: float = 4.0) -> NavLimits:
    """Limits from the catalogue indicators (the episode's own rule may differ in detail)."""
    a = platforms.get(platform)
    ind = platforms.indicators(a)
    twr = ind.twr_max
    return NavLimits(
        max_speed=speed_cap,
        max_acc=min(G * math.sqrt(max(twr**2 - 1.0, 0.0)), 15.0),
        max_vertical_acc=min((twr - 1.0) * G, 15.0),
        twr_max=twr,
        alpha_xy_max=ind.alpha_xy_max,
        alpha_z_max=ind.alpha_z_max,
        radius=float(a.radius),
    )


def make_task(spec, platform: str = "crazyflie", info=None) -> NavTask:
    lo = np.asarray(spec.bounds_min, dtype=np.float64)
    hi = np.asarray(spec.bounds_max, dtype=np.float64).copy()
    hi[2] = min(hi[2], spec.flight_ceiling)
    return NavTask(
        start=np.asarray(spec.start, dtype=np.float64),
        goal=np.asarray(spec.goal, dtype=np.float64),
        goal_radius=2.0,
        bounds_min=lo,
        bounds_max=hi,
        limits=limits_of(platform),
        time_limit=90.0,
        planner_rate_hz=10.0,
        depth=info or camera_info(),
        platform=platform,
    )


def yaw_quat(yaw: float) -> np.ndarray:
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


class KinematicFlight:
    """Perfect tracking: the vehicle is where the last reference says, rendered at 10 Hz."""

    def __init__(self, spec, task: NavTask) -> None:
        from volary.sensors import DepthCamera, camera_config
        from volary.sensors.raycast import make_raycaster

        info = task.depth
        cfg = camera_config(
            "ideal_64", width=info.width, height=info.height, max_range=info.max_range,
            segmentation=False, normals=False,
        )  # fmt: skip
        self.camera = DepthCamera(cfg, make_raycaster(spec, 1, backend="embree"))
        self.scene = worlds.Scene.stack([spec])
        self.spec, self.task = spec, task

    def depth(self, pos: np.ndarray, quat: np.ndarray) -> np.ndarray:
        r = self.camera(
            torch.as_tensor(pos[None], dtype=torch.float32),
            torch.as_tensor(quat[None], dtype=torch.float32),
        )
        d = r.depth[0].numpy().astype(np.float32)
        d[~r.valid[0].numpy()] = np.inf
        return d

    def _outside(self, p: np.ndarray, r: float) -> bool:
        """Floor contact, ceiling contact or the centre out of the lateral bounds."""
        lo, hi = self.task.bounds_min, self.task.bounds_max
        xy_out = (p[:, :2] < lo[:2]).any() or (p[:, :2] > hi[:2]).any()
        return bool(xy_out or (p[:, 2] - r < lo[2]).any() or (p[:, 2] + r > hi[2]).any())

    def fly(self, planner: NavPlanner, t_max: float = 60.0) -> dict:
        task = self.task
        planner.reset(task)
        pos = task.start.copy()
        vel = np.zeros(3)
        d = task.goal - task.start
        yaw = math.atan2(d[1], d[0])
        dt = 1.0 / task.planner_rate_hz
        track, t, ref = [pos.copy()], 0.0, None
        plan_time, calls, outcome = 0.0, 0, "timeout"
        while t < t_max:
            quat = yaw_quat(yaw)
            obs = NavObservation(t, pos.copy(), vel.copy(), quat, np.zeros(3),
                                 depth=self.depth(pos, quat))  # fmt: skip
            t0 = time.perf_counter()
            new = planner.plan(obs)
            plan_time += time.perf_counter() - t0
            calls += 1
            ref = new if new is not None else ref
            ts = t + np.linspace(0.0, dt, 6)[1:]
            if ref is None:
                p, v = np.repeat(pos[None], 5, 0), np.zeros((5, 3))
                y = np.full(5, yaw)
            else:
                p, v, _, y = ref.sample(ts)
            sd = worlds.scene_sdf(self.scene, torch.as_tensor(p[None], dtype=torch.float32))
            r = task.limits.radius
            hit = bool((sd.distance < r).any()) or self._outside(p, r)
            t += dt
            pos, vel, yaw = p[-1].copy(), v[-1].copy(), float(y[-1])
            track.append(pos.copy())
            if hit:
                outcome = "collision"
                break
            if np.linalg.norm(pos - task.goal) < 1.0 and np.linalg.norm(vel) < 0.2:
                outcome = "success"
                break
        return {
            "outcome": outcome,
            "t": t,
            "track": np.asarray(track),
            "plan_ms": 1e3 * plan_time / max(calls, 1),
            "calls": calls,
        }


class Straight:
    """Constant speed along the start-goal line (the straight baseline, for comparison)."""

    name, needs = "straight_test", frozenset()

    def reset(self, task: NavTask) -> None:
        self.task = task

    def plan(self, obs: NavObservation) -> NavReference:
        s, g = self.task.start, self.task.goal
        length = float(np.linalg.norm(g - s))
        times = np.linspace(0.0, length / 2.0, 200)
        pos = s + (g - s) * (times / times[-1])[:, None]
        vel = np.repeat(((g - s) / times[-1])[None], 200, 0)
        yaw = np.full(200, math.atan2(g[1] - s[1], g[0] - s[0]))
        return NavReference(0.0, times, pos, vel, np.zeros_like(pos), yaw)


# ---------------------------------------------------------------------- map and search
def wall_task(x_wall: float = 3.0) -> tuple[NavTask, object]:
    from volary.worlds import Box, SceneSpec

    spec = SceneSpec(
        "wall",
        (0.0, 0.0, 0.0),
        (12.0, 10.0, 3.0),
        obstacles=(Box((x_wall + 0.1, 5.0, 1.5), (0.2, 4.0, 3.0)),),
        start=(1.0, 5.0, 1.5),
        goal=(11.0, 5.0, 1.5),
        ceiling=3.0,
    )
    return make_task(spec), spec


def test_depth_fusion_marks_a_wall_at_its_distance():
    task, _ = wall_task()
    planner = MapperPlanner(pixel_stride=1)
    planner.reset(task)
    info = task.depth
    depth = np.full((info.height, info.width), 2.0, dtype=np.float32)  # wall 2 m ahead
    depth[:, :8] = np.inf  # no return in the leftmost columns
    obs = NavObservation(0.0, np.array([1.0, 5.0, 1.5]), np.zeros(3), yaw_quat(0.0), np.zeros(3),
                         depth=depth)  # fmt: skip
    planner.plan(obs)
    grid = planner.grid
    occ = np.argwhere(grid.occupied)
    centres = grid.center(occ)
    assert len(occ) > 50
    # every marked voxel contains a point of the plane x = 3 m
    assert np.all(np.abs(centres[:, 0] - 3.0) <= grid.res / 2 + 1e-9)
    # the plane spans y = 5 +- 2 m (90 deg FOV at 2 m) minus the blank left columns (+y side)
    f = info.fx
    y_right = 5.0 - 2.0 * (info.width / 2) / f
    y_left = 5.0 + 2.0 * (info.width / 2 - 8) / f
    assert centres[:, 1].min() < y_right + 0.3
    assert centres[:, 1].max() < y_left + grid.res
    assert centres[:, 1].max() > y_left - 0.3


def test_distance_field_matches_edt_within_truncation():
    grid = OccupancyGrid(np.zeros(3), np.array([6.0, 5.0, 3.0]), 0.2, truncation=1.5)
    rng = np.random.default_rng(0)
    grid.insert_points(rng.uniform([0, 0, 0], [6, 5, 3], size=(40, 3)))
    grid.insert_points(rng.uniform([0, 0, 0], [6, 5, 3], size=(40, 3)))  # incremental
    edt = distance_transform_edt(grid.occupied == 0) * grid.res
    inside = edt <= 1.5 - 1e-9
    got = grid.dist_cm / 100.0
    assert np.abs(got[inside] - edt[inside]).max() <= 0.006  # cm rounding
    assert np.all(grid.dist_cm[~inside] == FAR_CM)


def test_compiled_insertion_builds_the_reference_map():
    """Inserting depth points through the compiled kernel gives the numpy reference's map:
    occupancy, distance field, new-voxel counts and version, over incremental batches with
    repeated voxels, points outside the volume and NaN."""
    fast = OccupancyGrid(np.array([-2.0, -1.0, 0.0]), np.array([4.0, 3.0, 2.0]), 0.2)
    slow = OccupancyGrid(np.array([-2.0, -1.0, 0.0]), np.array([4.0, 3.0, 2.0]), 0.2)
    rng = np.random.default_rng(5)
    for n in (50, 200, 0, 200):
        pts = rng.uniform([-3.0, -2.0, -1.0], [5.0, 4.0, 3.0], size=(n, 3)).astype(np.float32)
        if n:
            pts = np.vstack([pts, pts[:10], [[np.nan, 0.0, 1.0]]])  # repeats and a NaN
        with np.errstate(invalid="ignore"):  # the reference casts NaN to a voxel index
            want = slow.insert_points_reference(pts)
        assert fast.insert_points(pts) == want
        assert np.array_equal(fast.occupied, slow.occupied)
        assert np.array_equal(fast.dist_cm, slow.dist_cm)
        assert (fast.n_occupied, fast.version) == (slow.n_occupied, slow.version)
    assert fast.insert_points(pts) == 0 and fast.version == slow.version  # nothing new
    assert fast.n_occupied > 100


def test_blocking_balls_blocks_every_offset_cell_inside_the_grid():
    """``block(cells, offsets)`` (topo's tube around a guide) zeroes exactly the cells
    cell + offset that lie inside the grid, and marks the map changed."""
    grid = OccupancyGrid(np.zeros(3), np.array([3.0, 2.0, 1.0]), 0.2)
    centres = np.array([[0, 0, 0], [7, 5, 2], [14, 9, 4]])
    ax = np.arange(-2, 3)
    off = np.stack(np.meshgrid(ax, ax, ax, indexing="ij"), -1).reshape(-1, 3)
    version = grid.version
    grid.block(centres, off)
    want = np.full(grid.shape, FAR_CM, np.uint8)
    cells = (centres[:, None] + off[None]).reshape(-1, 3)
    cells = cells[grid.inside(cells)]
    want[cells[:, 0], cells[:, 1], cells[:, 2]] = 0
    assert np.array_equal(grid.dist_cm, want) and grid.version == version + 1
    grid.block(np.array([[1, 1, 1]]))  # one cell
    assert grid.dist_cm[1, 1, 1] == 0 and grid.version == version + 2


def test_compiled_clearance_gives_the_reference_bits():
    """The compiled clearance (planners call it tens of thousands of times per trial) is the
    numpy reference to the bit: inside and outside the volume, on its faces, at the far
    truncation, for NaN and infinite points; a point is given as (3,) or (P, 3)."""
    grid = OccupancyGrid(np.array([-3.0, -5.0, 0.0]), np.array([7.0, 4.0, 6.0]), 0.2)
    rng = np.random.default_rng(3)
    grid.insert_points(rng.uniform(grid.lo, [0.0, 4.0, 6.0], size=(100, 3)))  # x <= 0 only
    top = grid.lo + np.array(grid.shape) * grid.res
    pts = rng.uniform(grid.lo - 1.0, grid.hi + 1.0, size=(2000, 3))
    special = [grid.lo, top, top - 1e-12, grid.hi, [np.nan, 0.0, 1.0], [np.inf, 0.0, 1.0],
               [0.0, -np.inf, 1.0], [4.0, -0.5, 3.0], [1.0, 1.0, 1.5]]  # fmt: skip
    pts = np.vstack([pts, special])
    with np.errstate(invalid="ignore"):  # the reference casts NaN and inf to voxel indices
        want = grid.clearance_reference(pts)
        single = grid.clearance_reference(pts[-1])
    got = grid.clearance(pts)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.isnan(got[-5]) and got[-4] == -np.inf and got[-2] == FAR_CM / 100 and (got < 0).any()
    assert np.array_equal(grid.clearance(pts[-1]), single)
    assert grid.clearance(np.zeros((0, 3))).shape == (0,)
    with pytest.raises(ConfigError, match="points"):
        grid.clearance(np.zeros((4, 2)))


def test_search_goes_around_a_known_obstacle():
    task, spec = wall_task()
    grid = OccupancyGrid(task.bounds_min, task.bounds_max, 0.2)
    ys, zs = np.meshgrid(np.arange(3.0, 7.0, 0.05), np.arange(0.0, 3.0, 0.05))
    wall = np.stack([np.full(ys.size, 3.1), ys.ravel(), zs.ravel()], -1)
    grid.insert_points(wall)
    path, reached, _ = search(grid, task.start, task.goal, thr=0.3)
    assert reached
    assert np.linalg.norm(path[-1] - task.goal) < 0.5
    clearance = grid.clearance(path)
    assert clearance.min() >= 0.3 - 1e-9
    assert np.abs(path[:, 1] - 5.0).max() > 2.0  # it went around the wall's end
    # and it never crosses the real wall: the scene SDF agrees
    scene = worlds.Scene.stack([spec])
    sd = worlds.scene_sdf(scene, torch.as_tensor(path[None], dtype=torch.float32))
    assert float(sd.distance.min()) > 0.1


def test_search_from_inside_the_inflation_escapes():
    grid = OccupancyGrid(np.zeros(3), np.array([6.0, 6.0, 3.0]), 0.2)
    grid.insert_points(np.array([[3.05, 3.05, 1.5]]))
    path, reached, _ = search(grid, np.array([3.3, 3.1, 1.5]), np.array([5.5, 5.5, 1.5]), 0.6)
    assert reached and len(path) > 2


def test_a_repeated_search_reuses_its_result_until_the_map_changes(monkeypatch):
    """The search cache is exact: a repeated query is answered without searching and equals a
    fresh search; a map change (new voxels, ``block`` on a scratch copy) is searched again."""
    import volary.studies.flyingtrust.planners.search as S

    task, _ = wall_task()
    grid = OccupancyGrid(task.bounds_min, task.bounds_max, 0.2)
    ys, zs = np.meshgrid(np.arange(3.0, 7.0, 0.05), np.arange(0.0, 3.0, 0.05))
    grid.insert_points(np.stack([np.full(ys.size, 3.1), ys.ravel(), zs.ravel()], -1))
    calls = []
    real = S._astar
    monkeypatch.setattr(S, "_astar", lambda *a: calls.append(1) or real(*a))
    first = search(grid, task.start, task.goal, thr=0.3)
    again = search(grid, task.start + 0.01, task.goal, thr=0.3)  # same voxels: from the cache
    assert len(calls) == 1 and np.array_equal(first[0], again[0]) and first[1:] == again[1:]
    grid.search_cache.clear()  # what an uncached search gives
    assert np.array_equal(search(grid, task.start, task.goal, thr=0.3)[0], first[0])
    assert len(calls) == 2
    scratch = grid.scratch()
    mid = grid.index(first[0][len(first[0]) // 3 : 2 * len(first[0]) // 3])
    ring = np.stack(np.meshgrid(*[np.arange(-2, 3)] * 3, indexing="ij"), -1).reshape(-1, 3)
    cells = (mid[:, None] + ring[None]).reshape(-1, 3)
    scratch.block(cells[grid.inside(cells)])  # the path's middle walled off, in the copy only
    blocked = search(scratch, task.start, task.goal, thr=0.3)
    assert len(calls) == 3 and not np.array_equal(blocked[0], first[0])
    assert np.array_equal(search(grid, task.start, task.goal, thr=0.3)[0], first[0])
    assert len(calls) == 3  # the original grid and its cache are untouched
    grid.insert_points(np.array([[4.0, 1.0, 1.5]]))  # new voxels: searched again
    search(grid, task.start, task.goal, thr=0.3)
    assert len(calls) == 4 and len(grid.search_cache) == 1


def test_trajectory_respects_limits_clearance_and_continuity():
    task, _ = wall_task()
    planner = MapperPlanner()
    planner.reset(task)
    # map the wall fully (as if it had been seen)
    ys, zs = np.meshgrid(np.arange(3.0, 7.0, 0.05), np.arange(0.0, 3.0, 0.05))
    planner.grid.insert_points(np.stack([np.full(ys.size, 3.1), ys.ravel(), zs.ravel()], -1))
    v0 = np.array([1.0, 0.3, 0.0])
    obs = NavObservation(0.0, task.start.copy(), v0, yaw_quat(0.0), np.zeros(3))
    ref = planner.plan(obs)
    assert ref is not None and ref.times[0] == 0.0
    assert np.allclose(ref.positions[0], task.start, atol=1e-9)
    assert np.allclose(ref.velocities[0], v0, atol=1e-6)
    lim = task.limits
    speed = np.linalg.norm(ref.velocities, axis=1)
    assert speed.max() <= lim.max_speed * 1.02
    acc_xy = np.linalg.norm(ref.accelerations[:, :2], axis=1)
    assert acc_xy.max() <= lim.max_acc * 1.02
    assert np.all(np.diff(ref.times) > 0)
    clearance = planner.grid.clearance(ref.positions)
    assert clearance[ref.times > 0.3].min() >= lim.radius + planner.options.hard_margin - 1e-9
    # the next plan starts where this reference is at that time (continuity)
    p, v, _, _ = ref.sample(np.array([0.1]))
    obs2 = NavObservation(0.1, p[0], v[0], yaw_quat(0.0), np.zeros(3))
    ref2 = planner.plan(obs2)
    assert np.allclose(ref2.positions[0], p[0], atol=1e-9)
    assert np.allclose(ref2.velocities[0], v[0], atol=1e-6)


def test_reset_clears_state_and_options_are_checked():
    task, _ = wall_task()
    planner = MapperPlanner()
    planner.reset(task)
    planner.grid.insert_points(np.array([[5.0, 5.0, 1.5]]))
    planner.plan(NavObservation(0.0, task.start.copy(), np.zeros(3), yaw_quat(0.0), np.zeros(3)))
    assert planner.grid.n_occupied == 1 and planner.stats["calls"] == 1
    planner.reset(task)
    assert planner.grid.n_occupied == 0 and not planner.grid.occupied.any()
    assert planner.stats["calls"] == 0 and planner._ref is None and planner._path is None
    assert isinstance(planner, NavPlanner)
    assert planner.needs == frozenset({"depth"})
    with pytest.raises(ConfigError, match="resolution"):
        MapperPlanner(resolution=-1.0)
    with pytest.raises(ConfigError, match="valid options"):
        MapperPlanner(resolutoin=0.2)
    with pytest.raises(ConfigError, match="depth"):
        MapperPlanner().reset(NavTask(**{**task.__dict__, "depth": None}))


# ---------------------------------------------------------------------- closed loop
def test_closed_loop_reaches_goal_behind_a_wall():
    task, spec = wall_task()
    result = KinematicFlight(spec, task).fly(MapperPlanner(), t_max=30.0)
    assert result["outcome"] == "success", result["outcome"]
    straight = KinematicFlight(spec, task).fly(Straight(), t_max=30.0)
    assert straight["outcome"] == "collision"


def _fly_config(kind: str, config: int, platform: str = "crazyflie"):
    spec = worlds.fixed_configurations(kind)[config]
    task = make_task(spec, platform)
    return KinematicFlight(spec, task).fly(MapperPlanner(), t_max=90.0), spec, task


def test_closed_loop_forest_config_1():
    result, spec, task = _fly_config("forest", 1)
    assert result["outcome"] == "success", (result["outcome"], result["t"])
    straight = KinematicFlight(spec, task).fly(Straight(), t_max=90.0)
    assert straight["outcome"] == "collision"


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind, config",
    [("maze", 0), ("narrow_gap", 0), ("random_cylinders", 1), ("perlin", 2), ("urban", 0)],
)
def test_closed_loop_where_straight_fails(kind, config):
    """Configurations where straight flight does not succeed (checked here as well)."""
    result, spec, task = _fly_config(kind, config)
    assert result["outcome"] == "success", (result["outcome"], result["t"])
    straight = KinematicFlight(spec, task).fly(Straight(), t_max=90.0)
    assert straight["outcome"] != "success"


def test_numpy_min_snap_matches_the_library():
    from volary.planning.minsnap import min_snap
    from volary.studies.flyingtrust.planners.smoothing import evaluate, min_snap_coefficients

    rng = np.random.default_rng(3)
    wp = np.cumsum(rng.uniform(-2, 2, size=(6, 3)), axis=0)
    dur = rng.uniform(0.4, 2.5, size=5)
    v0, a0 = np.array([1.0, -0.5, 0.2]), np.array([0.3, 0.1, -0.4])
    coeffs = min_snap_coefficients(wp, dur, np.array([v0, a0, [np.nan] * 3]), np.zeros((3, 3)))
    der = np.full((6, 3, 4), np.nan)
    der[0] = 0.0
    der[0, 0, :3], der[0, 1, :3], der[0, 2, :3] = v0, a0, np.nan
    der[-1] = 0.0
    ref = min_snap(torch.as_tensor(wp), torch.as_tensor(dur), derivatives=torch.as_tensor(der))
    ts = np.linspace(0.0, dur.sum(), 97)
    out = ref.evaluate(torch.as_tensor(ts))
    pos, vel, acc = evaluate(coeffs, dur, ts)
    assert np.allclose(pos, out.pos.numpy(), atol=1e-6)
    assert np.allclose(vel, out.vel.numpy(), atol=1e-6)
    assert np.allclose(acc, out.acc.numpy(), atol=1e-5)
