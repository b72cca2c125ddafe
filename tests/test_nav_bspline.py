"""The gradient-based planners' pieces (issue 21): the uniform B-spline, its cost terms and
their gradients, the kinodynamic search, EGO-Planner's {p, v} pairs, the topological guides;
and each of ``kinodynamic``, ``ego`` and ``topo`` flying past a wall it has to discover."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.interpolate import RegularGridInterpolator

from test_nav_mapper import KinematicFlight, Straight, wall_task
from volary.errors import ConfigError
from volary.studies.flyingtrust.planners import bspline, get_planner
from volary.studies.flyingtrust.planners.ego import EgoPlanner, plane_crossing
from volary.studies.flyingtrust.planners.kinodynamic import input_set, kino_search
from volary.studies.flyingtrust.planners.occupancy import OccupancyGrid
from volary.studies.flyingtrust.planners.topo import TopoPlanner

NEW = ("kinodynamic", "ego", "topo")


def _grid_with_wall(x: float = 4.0, half_width: float = 1.5) -> OccupancyGrid:
    """A 0.2 m grid over [-2, 14] x [-6, 6] x [0, 4] with a wall at x across |y| < half_width."""
    grid = OccupancyGrid(np.array([-2.0, -6.0, 0.0]), np.array([14.0, 6.0, 4.0]), 0.2, 2.0)
    ys = np.arange(-half_width, half_width + 1e-9, 0.1)
    zs = np.arange(0.1, 3.95, 0.1)
    yy, zz = np.meshgrid(ys, zs)
    grid.insert_points(np.stack([np.full(yy.size, x), yy.ravel(), zz.ravel()], -1))
    return grid


def _numeric_grad(fun, q: np.ndarray, h: float = 1e-6) -> np.ndarray:
    g = np.zeros_like(q)
    for idx in np.ndindex(q.shape):
        qp, qm = q.copy(), q.copy()
        qp[idx] += h
        qm[idx] -= h
        g[idx] = (fun(qp)[0] - fun(qm)[0]) / (2 * h)
    return g


# ---------------------------------------------------------------------------- the spline
def test_spline_starts_at_the_state_ends_at_rest_and_fits_its_own_knots():
    rng = np.random.default_rng(0)
    p0, v0, a0 = rng.normal(size=3), rng.normal(size=3), rng.normal(size=3)
    dt = 0.3
    head = bspline.start_points(p0, v0, a0, dt)
    truth = np.vstack([head, rng.normal(size=(5, 3)), np.repeat(rng.normal(size=(1, 3)), 3, 0)])
    t_end = bspline.duration(truth, dt)
    knots, _, _ = bspline.evaluate(truth, dt, dt * np.arange(round(t_end / dt) + 1))
    q = bspline.fit(knots, v0, a0, dt)
    np.testing.assert_allclose(q, truth, atol=1e-9)  # a spline's own knots give it back
    pos, vel, acc = bspline.evaluate(q, dt, np.array([0.0, t_end]))
    np.testing.assert_allclose([pos[0], vel[0], acc[0]], [p0, v0, a0], atol=1e-12)
    np.testing.assert_allclose([vel[1], acc[1]], np.zeros((2, 3)), atol=1e-12)
    np.testing.assert_allclose(pos[1], knots[-1], atol=1e-12)


def test_spline_derivatives_match_finite_differences():
    rng = np.random.default_rng(1)
    q, dt = rng.normal(size=(8, 3)), 0.25
    ts = np.linspace(0.01, bspline.duration(q, dt) - 0.01, 23)
    h = 1e-6
    p_hi, v_hi, _ = bspline.evaluate(q, dt, ts + h)
    p_lo, v_lo, _ = bspline.evaluate(q, dt, ts - h)
    _, vel, acc = bspline.evaluate(q, dt, ts)
    np.testing.assert_allclose(vel, (p_hi - p_lo) / (2 * h), atol=1e-6)
    np.testing.assert_allclose(acc, (v_hi - v_lo) / (2 * h), atol=1e-5)


def test_knots_along_keeps_three_spans():
    pos = np.array([[0.0, 0, 0], [0.1, 0, 0]])
    knots, dt = bspline.knots_along(pos, np.array([0.0, 0.1]), 0.5)
    assert len(knots) == 4 and math.isclose(dt, 0.1 / 3)


# ---------------------------------------------------------------------------- costs
def test_cost_gradients_match_finite_differences():
    rng = np.random.default_rng(2)
    q = np.cumsum(rng.normal(scale=0.6, size=(12, 3)), axis=0) + [0.0, 0.0, 2.0]
    grid = _grid_with_wall(x=float(q[5, 0]) + 0.1)
    terms = {
        "smoothness": bspline.smoothness,
        # tight limits so every excess branch is active
        "feasibility": lambda qq: bspline.feasibility(qq, 0.2, 1.0, 2.0, 1.5, 1.0),
        "esdf": lambda qq: bspline.esdf_cost(grid, qq, 1.5),
        "pairs": lambda qq: bspline.pair_cost(
            qq,
            np.array([2, 5, 5, 8]),
            q[[2, 5, 5, 8]] + 0.1,
            np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [0.6, 0.8, 0]]),
            0.3,
        ),  # fmt: skip
        "guide": lambda qq: bspline.guide_cost(qq, q[::-1] * 0.5),
    }
    for name, fun in terms.items():
        c, g = fun(q)
        assert c > 0, name
        np.testing.assert_allclose(g, _numeric_grad(fun, q), rtol=1e-4, atol=1e-5, err_msg=name)


def test_pair_cost_is_eq_2_3_of_the_paper():
    """Zero beyond s_f, cubic inside it, the quadratic continuation past the anchor."""
    s_f, v = 0.5, np.array([[1.0, 0.0, 0.0]])
    q = np.zeros((1, 3))
    for d, want in (
        (0.6, 0.0),
        (0.2, 0.3**3),
        (-0.3, 3 * s_f * 0.8**2 - 3 * s_f**2 * 0.8 + s_f**3),
    ):
        anchor = np.array([[-d, 0.0, 0.0]])  # d = (Q - p) . v
        c, _ = bspline.pair_cost(q, np.array([0]), anchor, v, s_f)
        assert math.isclose(c, want, abs_tol=1e-12), d


def test_clearance_gradient_matches_a_scipy_interpolator():
    grid = _grid_with_wall()
    rng = np.random.default_rng(3)
    pts = rng.uniform([2.0, -2.0, 0.8], [6.0, 2.0, 3.2], size=(400, 3))
    val, grad = bspline.clearance_gradient(grid, pts)
    axes = [grid.lo[i] + (np.arange(grid.shape[i]) + 0.5) * grid.res for i in range(3)]
    ref = RegularGridInterpolator(axes, grid.dist_cm / 100.0)(pts)
    lo_d, hi_d = pts - grid.lo, grid.hi - pts
    ref = np.minimum(ref, np.minimum(lo_d.min(-1), hi_d.min(-1)))
    np.testing.assert_allclose(val, ref, atol=1e-9)
    h = 1e-6
    for a in range(3):
        e = np.zeros(3)
        e[a] = h
        num = (bspline.clearance_gradient(grid, pts + e)[0] -
               bspline.clearance_gradient(grid, pts - e)[0]) / (2 * h)  # fmt: skip
        ok = np.abs(num - grad[:, a]) < 1e-4
        assert ok.mean() > 0.97  # only samples on a cell face or a kink differ


def _wall_problem() -> tuple[np.ndarray, object]:
    grid = _grid_with_wall(half_width=0.6)
    knots = np.stack([np.linspace(0.0, 8.0, 17), np.zeros(17), np.full(17, 2.0)], -1)
    q = bspline.fit(knots, np.zeros(3), np.zeros(3), 0.25)
    return q, grid


@pytest.mark.slow  # 10-30 s on 2 cores; make test-slow
def test_optimize_lowers_the_cost_and_keeps_the_ends():
    q, grid = _wall_problem()
    obj = bspline.Objective(w_smooth=0.1, w_esdf=10.0, grid=grid, d_thr=0.8)
    for reference in (False, True):
        out = bspline.optimize(q, obj, reference=reference)
        assert obj(out)[0] < 0.1 * obj(q)[0]
        np.testing.assert_array_equal(out[:3], q[:3])
        np.testing.assert_array_equal(out[-3:], q[-3:])
        assert grid.clearance(out[3:-3]).min() > 0.5  # pushed off the wall


def test_fused_objective_is_the_sum_of_its_terms():
    """The compiled objective the optimizer runs equals the separate Python terms (which the
    finite-difference test checks), every term active."""
    q, grid = _wall_problem()
    q = q + np.random.default_rng(4).normal(scale=0.2, size=q.shape)
    obj = bspline.Objective(
        dt=0.2, limits=(1.0, 2.0, 1.5, 1.0), w_smooth=0.1, w_feasibility=1.5, w_esdf=10.0,
        grid=grid, d_thr=0.8, w_pairs=2.0, s_f=0.5, w_guide=0.3, targets=q + 0.05,
        pairs=(np.array([4, 5, 5]), q[[4, 5, 5]] + 0.1, np.eye(3)),
    )  # fmt: skip
    terms = obj.terms()
    assert len(terms) == 5
    c, g = obj(q)
    assert math.isclose(c, sum(w * f(q)[0] for w, f in terms), rel_tol=1e-12)
    np.testing.assert_allclose(g, sum(w * f(q)[1] for w, f in terms), rtol=1e-12, atol=1e-12)


def test_compiled_lbfgs_matches_scipy():
    """The compiled L-BFGS (fast path) against scipy's L-BFGS-B (reference): the same
    minimizer of a convex objective (smoothness + guide pull: one minimum), and on the wall
    problem a cost within 0.1 % of the reference's."""
    q, grid = _wall_problem()
    rng = np.random.default_rng(5)
    convex = bspline.Objective(w_smooth=0.05, w_guide=1.0, targets=q + rng.normal(size=q.shape))
    a, b = bspline.optimize(q, convex), bspline.optimize(q, convex, reference=True)
    np.testing.assert_allclose(a, b, atol=1e-4)
    wall = bspline.Objective(dt=0.25, limits=(3.0, 4.0, 3.0, 3.0), w_smooth=0.1,
                             w_feasibility=1.0, w_esdf=10.0, grid=grid, d_thr=0.8)  # fmt: skip
    fast = wall(bspline.optimize(q, wall))[0]
    ref = wall(bspline.optimize(q, wall, reference=True))[0]
    assert fast <= ref * 1.001 + 1e-9
    assert fast < 1e-2 * wall(q)[0]


def test_objective_rejects_missing_data():
    with pytest.raises(ValueError, match="w_esdf needs a grid"):
        bspline.Objective(w_esdf=1.0)(np.zeros((8, 3)))
    with pytest.raises(ValueError, match="targets of shape"):
        bspline.Objective(w_guide=1.0, targets=np.zeros((3, 3)))(np.zeros((8, 3)))


# ---------------------------------------------------------------------------- searches
def test_kino_search_reaches_the_goal_around_a_wall_within_the_limits():
    grid = _grid_with_wall()
    res = kino_search(grid, np.array([0.0, 0.0, 2.0]), np.zeros(3), np.array([9.0, 0.0, 2.0]),
                      0.45, v_max=3.0, a_xy=4.0, a_up=3.0, a_down=3.0)  # fmt: skip
    assert res.reached
    np.testing.assert_allclose(res.positions[-1], [9.0, 0.0, 2.0], atol=1e-9)
    assert np.linalg.norm(res.velocities[-1]) < 1e-9  # at rest at the goal
    assert np.linalg.norm(res.velocities, axis=1).max() <= 3.0 * 1.05 + 1e-9
    assert grid.clearance(res.positions).min() >= 0.45 - 1e-9
    assert np.abs(res.positions[:, 1]).max() > 1.5  # went around the wall
    # the samples are one motion: positions integrate the velocities
    dt = np.diff(res.times)
    mid = 0.5 * (res.velocities[1:] + res.velocities[:-1])
    drift = np.abs(np.cumsum(mid * dt[:, None], 0) - (res.positions[1:] - res.positions[0]))
    assert drift.max() < 0.05


def test_kino_search_partial_plan_stops_at_the_horizon():
    grid = _grid_with_wall(x=13.0)
    res = kino_search(grid, np.array([0.0, 0.0, 2.0]), np.zeros(3), np.array([40.0, 0.0, 2.0]),
                      0.4, v_max=3.0, a_xy=4.0, a_up=3.0, a_down=3.0, horizon=5.0,
                      shot_range=1.0)  # fmt: skip
    assert not res.reached
    assert np.linalg.norm(res.positions[-1] - res.positions[0]) >= 5.0


def test_kino_search_reuses_a_repeated_query_until_the_map_changes(monkeypatch):
    """The kinodynamic search's cache is exact: a repeated query (same state, goal and map) is
    answered without searching and equals a fresh search, read-only; another start state, or
    new voxels, are searched again; reused node arrays leave no trace between searches."""
    import volary.studies.flyingtrust.planners.kinodynamic as K

    grid = _grid_with_wall()
    calls = []
    real = K._kino_astar
    monkeypatch.setattr(K, "_kino_astar", lambda *a: calls.append(1) or real(*a))
    p0, goal = np.array([0.0, 0.0, 2.0]), np.array([9.0, 0.0, 2.0])
    kw = dict(v_max=3.0, a_xy=4.0, a_up=3.0, a_down=3.0)
    first = kino_search(grid, p0, np.zeros(3), goal, 0.45, **kw)
    again = kino_search(grid, p0.copy(), np.zeros(3), goal, 0.45, **kw)
    assert len(calls) == 1 and again is first
    with pytest.raises(ValueError, match="read-only"):
        first.positions[0, 0] = 1.0
    moving = kino_search(grid, p0, np.array([0.5, 0.0, 0.0]), goal, 0.45, **kw)
    assert len(calls) == 2 and not np.array_equal(moving.positions, first.positions)
    grid.search_cache.clear()  # a fresh search, after another one used the node arrays
    fresh = kino_search(grid, p0, np.zeros(3), goal, 0.45, **kw)
    assert len(calls) == 3
    for a, b in zip((fresh.times, fresh.positions, fresh.velocities),
                    (first.times, first.positions, first.velocities), strict=True):  # fmt: skip
        np.testing.assert_array_equal(a, b)
    assert (fresh.reached, fresh.expansions) == (first.reached, first.expansions)
    assert grid.insert_points(np.array([[2.0, 3.0, 2.0]])) == 1  # new voxels: searched again
    kino_search(grid, p0, np.zeros(3), goal, 0.45, **kw)
    assert len(calls) == 4


def test_input_set_respects_the_horizontal_limit():
    u = input_set(4.0, 3.0, 2.0)
    assert len(u) == 21 * 3
    assert np.linalg.norm(u[:, :2], axis=1).max() <= 4.0 * math.sqrt(1.25) + 1e-9
    assert set(np.unique(u[:, 2])) == {-2.0, 0.0, 3.0}


def test_plane_crossing_and_ego_pairs_push_through_the_wall_to_the_guide():
    path = np.array([[0.0, 0, 0], [0, 2, 0], [2, 2, 0], [2, 0, 0]])
    p = plane_crossing(path, np.array([1.0, 0.5, 0.0]), np.array([1.0, 0.0, 0.0]))
    np.testing.assert_allclose(p, [1.0, 2.0, 0.0])
    planner = EgoPlanner()
    task, _ = wall_task()
    planner.reset(task)
    planner.grid = _grid_with_wall(x=3.0, half_width=1.0)
    planner.grid.lo, planner.grid.hi = planner.grid.lo, planner.grid.hi
    knots = np.stack([np.linspace(0.0, 6.0, 13), np.full(13, 0.3), np.full(13, 1.5)], -1)
    q = bspline.fit(knots, np.zeros(3), np.zeros(3), 0.3)
    idx, anchors, dirs = planner._new_pairs(q, set())
    assert idx.size > 0 and set(idx.tolist()) <= set(range(3, len(q) - 3))
    # the repulsive directions point sideways toward the guide, around the wall's +y end
    assert (dirs[:, 1] > 0.5).all()
    # anchors lie on the obstacle's surface: the voxel map turns free there
    assert (planner.grid.clearance(anchors) >= 0.5 * planner.grid.res - 1e-9).all()


def test_topo_guides_pass_the_obstacle_on_different_sides():
    planner = TopoPlanner()
    task, _ = wall_task()
    planner.reset(task)
    planner.grid = _grid_with_wall(x=4.0, half_width=0.6)
    first = np.stack([np.linspace(0.0, 8.0, 41), np.zeros(41), np.full(41, 2.0)], -1)
    first[15:26, 1] = 1.4  # the first guide passes on +y
    guides = planner._guides(first)
    assert len(guides) >= 2
    side = [float(np.mean(g[np.abs(g[:, 0] - 4.0) < 0.5][:, 1])) for g in guides[:2]]
    assert side[0] > 0.5 and (side[1] < -0.5 or abs(side[1] - side[0]) > 0.8)


# ---------------------------------------------------------------------------- planners
@pytest.mark.parametrize(
    ("name", "off_path_search"), [("mapper", True), ("ego", False), ("topo", False)]
)
def test_guiding_search_triggers(name, off_path_search):
    """The mapper re-searches when the vehicle is ``deviation`` m off its path; EGO and PGO,
    whose splines leave the guide by design, re-search on a blocked path or on time only."""
    task, _ = wall_task(x_wall=9.0)
    planner = get_planner(name)
    planner.reset(task)
    planner._path = np.stack([np.linspace(1.0, 11.0, 51), np.full(51, 5.0), np.full(51, 1.5)], -1)
    planner._path_reached, planner._path_time = True, planner._t
    assert not planner._needs_search(np.array([1.2, 5.0, 1.5]))  # on the path, nothing new
    assert planner._needs_search(np.array([1.2, 6.5, 1.5])) is off_path_search  # 1.5 m off
    planner._t += planner.options.search_period
    assert planner._needs_search(np.array([1.4, 6.5, 1.5]))  # the period is up
    planner._path_time = planner._t
    planner.grid.clear()
    planner.grid.insert_points(
        np.array([[3.0, 5.0, 1.5]])
    )  # an obstacle on the path, within the horizon
    assert planner._needs_search(np.array([1.6, 5.0, 1.5]))


@pytest.mark.parametrize("name", NEW)
def test_new_planner_discovers_and_passes_a_wall(name):
    """Perfect tracking, 10 Hz depth: the wall is unknown at the start, found by the camera,
    avoided; the straight flight through it collides."""
    task, spec = wall_task()
    planner = get_planner(name)
    result = KinematicFlight(spec, task).fly(planner, t_max=30.0)
    assert result["outcome"] == "success", (name, result["outcome"], planner.stats)
    assert planner.stats["fits"] > 0 and planner.stats["searches"] > 0
    assert KinematicFlight(spec, task).fly(Straight(), t_max=30.0)["outcome"] == "collision"


@pytest.mark.parametrize("name", NEW)
def test_new_planner_options_are_checked(name):
    with pytest.raises(ConfigError, match=f"{name} options .*unknown"):
        get_planner(name, not_an_option=1.0)
    with pytest.raises(ConfigError, match="ctrl_spacing"):
        get_planner(name, ctrl_spacing=-1.0)
    with pytest.raises(ConfigError, match="optimizer: expected one of lbfgs, scipy"):
        get_planner(name, optimizer="adam")
