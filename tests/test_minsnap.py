"""Min-snap: eq. 2 single segment, multi-segment continuity/waypoints/optimality vs a generic QP
solver, batched evaluation, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from volary.errors import ConfigError
from volary.planning import PolyTrajectory, min_snap, rest_to_rest, single_segment
from volary.planning import minsnap as ms
from volary.planning.trajectory import derivative_basis, snap_cost_matrix

JOINT_TOL = 1e-6  # acceptance: continuity to snap at every joint


def paper_eq2(b0: np.ndarray, bf: np.ndarray, t: float) -> np.ndarray:
    """BoundaryPredictor eq. 2 written out literally: descending coefficients [p7 .. p0]."""
    a = np.array(
        [
            [0, 0, 0, 0, 0, 0, 0, 1],
            [0, 0, 0, 0, 0, 0, 1, 0],
            [0, 0, 0, 0, 0, 2, 0, 0],
            [0, 0, 0, 0, 6, 0, 0, 0],
            [t**7, t**6, t**5, t**4, t**3, t**2, t, 1],
            [7 * t**6, 6 * t**5, 5 * t**4, 4 * t**3, 3 * t**2, 2 * t, 1, 0],
            [42 * t**5, 30 * t**4, 20 * t**3, 12 * t**2, 6 * t, 2, 0, 0],
            [210 * t**4, 120 * t**3, 60 * t**2, 24 * t, 6, 0, 0, 0],
        ],
        dtype=float,
    )
    return np.linalg.solve(a, np.concatenate((b0, bf)))


def _joint_jumps(traj: PolyTrajectory, order: int) -> torch.Tensor:
    """|left limit - right limit| of derivative ``order`` at every interior joint, (..., M-1, 4)."""
    c, dur = traj.coeffs, traj.durations
    left = (c[..., :-1, :, :] * derivative_basis(dur[..., :-1], 8, order)[..., None, :]).sum(-1)
    zero = torch.zeros_like(dur[..., 1:])
    right = (c[..., 1:, :, :] * derivative_basis(zero, 8, order)[..., None, :]).sum(-1)
    return (left - right).abs()


def _problem(n: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    wp = torch.cumsum(torch.rand(n, 3, generator=g, dtype=torch.float64) * 2 - 0.5, dim=0)
    dur = 0.6 + torch.rand(n - 1, generator=g, dtype=torch.float64)
    yaw = torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1
    return wp, dur, yaw


@pytest.mark.parametrize("t", [0.3, 1.0, 2.7])
def test_single_segment_equals_eq2(t):
    rng = np.random.default_rng(1)
    b0, bf = rng.normal(size=4), rng.normal(size=4)
    ours = single_segment(torch.tensor(b0), torch.tensor(bf), t).numpy()
    ref = paper_eq2(b0, bf, t)[::-1]
    np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=1e-9)


def test_single_segment_batched_and_min_snap_agree():
    rng = np.random.default_rng(2)
    b0, bf = torch.tensor(rng.normal(size=(5, 4))), torch.tensor(rng.normal(size=(5, 4)))
    t = torch.tensor(rng.uniform(0.5, 2.0, size=5))
    batched = single_segment(b0, bf, t)
    for i in range(5):
        ref = paper_eq2(b0[i].numpy(), bf[i].numpy(), float(t[i]))[::-1]
        np.testing.assert_allclose(batched[i].numpy(), ref, rtol=1e-9, atol=1e-9)
    # min_snap with both ends fully fixed on the x axis is the same polynomial
    wp = torch.zeros(5, 2, 3, dtype=torch.float64)
    wp[:, 0, 0], wp[:, 1, 0] = b0[:, 0], bf[:, 0]
    wp[:, 1, 1] = 1.0  # keep the waypoints distinct through y
    der = torch.zeros(5, 2, 3, 4, dtype=torch.float64)
    der[:, 0, :, 0], der[:, 1, :, 0] = b0[:, 1:], bf[:, 1:]
    traj = min_snap(wp, t[:, None], derivatives=der)
    torch.testing.assert_close(traj.coeffs[:, 0, 0], batched, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("n", [3, 7, 12])
def test_multi_segment_continuous_to_snap_and_hits_waypoints(n):
    wp, dur, yaw = _problem(n, seed=n)
    traj = min_snap(wp, dur, yaw=yaw)
    for order in range(5):
        assert float(_joint_jumps(traj, order).max()) < JOINT_TOL, order
    at = traj.evaluate(traj.knot_times)
    torch.testing.assert_close(at.pos, wp, rtol=0, atol=1e-9)
    torch.testing.assert_close(at.yaw, yaw, rtol=0, atol=1e-9)
    for field in (at.vel, at.acc, at.jerk):  # rest to rest
        assert float(field[[0, -1]].abs().max()) < 1e-9


def _scipy_min_snap_cost(wp: np.ndarray, dur: np.ndarray) -> float:
    """The same QP on raw coefficients, one axis, solved by a generic solver (SLSQP): positions
    at both ends of every segment, continuity of derivatives 1..4 at joints, rest to rest."""
    from scipy.optimize import minimize

    m = len(dur)

    def basis(t: float, r: int) -> np.ndarray:
        return derivative_basis(torch.tensor(t, dtype=torch.float64), 8, r).numpy()

    rows, rhs = [], []

    def add(entries: list[tuple[int, np.ndarray]], value: float) -> None:
        row = np.zeros(8 * m)
        for seg, b in entries:
            row[8 * seg : 8 * seg + 8] += b
        rows.append(row)
        rhs.append(value)

    for i in range(m):
        add([(i, basis(0.0, 0))], wp[i])
        add([(i, basis(dur[i], 0))], wp[i + 1])
    for i in range(m - 1):
        for r in range(1, 5):
            add([(i, basis(dur[i], r)), (i + 1, -basis(0.0, r))], 0.0)
    for r in range(1, 4):
        add([(0, basis(0.0, r))], 0.0)
        add([(m - 1, basis(dur[-1], r))], 0.0)
    a_eq, b_eq = np.array(rows), np.array(rhs)
    q = snap_cost_matrix(torch.tensor(dur), 8).numpy()
    big_q = np.zeros((8 * m, 8 * m))
    for i in range(m):
        big_q[8 * i : 8 * i + 8, 8 * i : 8 * i + 8] = q[i]
    x0 = np.linalg.lstsq(a_eq, b_eq, rcond=None)[0]
    res = minimize(
        lambda x: x @ big_q @ x,
        x0,
        jac=lambda x: 2 * big_q @ x,
        constraints=[{"type": "eq", "fun": lambda x: a_eq @ x - b_eq, "jac": lambda x: a_eq}],
        method="SLSQP",
        options={"maxiter": 1000, "ftol": 1e-10},
    )
    assert res.success, res.message
    assert np.abs(a_eq @ res.x - b_eq).max() < 1e-6
    return float(res.fun)


@pytest.mark.parametrize("n", [4, 8, 12])
def test_snap_cost_not_above_generic_qp(n):
    pytest.importorskip("scipy")
    wp, dur, _ = _problem(n, seed=10 + n)
    traj = min_snap(wp, dur)
    ours = traj.snap_cost()[:3]
    for axis in range(3):
        ref = _scipy_min_snap_cost(wp[:, axis].numpy(), dur.numpy())
        assert float(ours[axis]) <= ref * (1 + 1e-7) + 1e-9, (axis, float(ours[axis]), ref)


@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_banded_solver_matches_dense_reference(batch):
    """The block-elimination fast path against the dense Cholesky reference (same system)."""
    g = torch.Generator().manual_seed(7)
    w = 9
    dur = 0.3 + torch.rand(*batch, w - 1, generator=g, dtype=torch.float64) * 2
    values = torch.randn(*batch, 4, w, 4, generator=g, dtype=torch.float64)
    fixed = torch.rand(*batch, 4, w, 4, generator=g) < 0.3
    fixed[..., 0] = True  # positions
    fixed[..., 0, :] = True  # rest to rest
    fixed[..., -1, :] = True
    n = 4 * w
    dense = ms.solve_derivatives(
        ms.snap_hessian(dur), values.reshape(*batch, 4, n), fixed.reshape(*batch, 4, n)
    ).reshape(values.shape)
    banded = ms.solve_derivatives_banded(dur, values, fixed)
    scale = float(dense.abs().max())
    torch.testing.assert_close(banded, dense, rtol=1e-8, atol=1e-9 * scale)
    torch.testing.assert_close(banded[fixed], values[fixed], rtol=0, atol=1e-12 * scale)


def _racer_like_batch(n: int, w: int = 13) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` problems shaped like the AlphaPilot racer's replans (W = 13, start derivatives
    fixed, gate velocities fixed, the rest free)."""
    g = torch.Generator().manual_seed(11)
    wp = torch.cumsum(1.0 + torch.rand(n, w, 3, generator=g, dtype=torch.float64) * 9, 1)
    dur = 0.5 + torch.rand(n, w - 1, generator=g, dtype=torch.float64) * 2
    der = torch.full((n, w, 3, 4), math.nan, dtype=torch.float64)
    der[:, 0, :, :3] = torch.randn(n, 3, 3, generator=g, dtype=torch.float64)
    der[:, 1:-1, 0, :3] = torch.randn(n, w - 2, 3, generator=g, dtype=torch.float64) * 5
    return wp, dur, der


@pytest.mark.parametrize("method", ["dense", "banded"])
def test_a_forced_solve_gives_each_problem_the_same_bits_in_any_batch(method):
    """With ``method`` given, a problem's coefficients are bit for bit the same solved alone and
    among 40 (the batch the racer's replans reach); ``"auto"`` switches solver with the batch
    size, so there a problem's last bits depend on its batch (the module docstring)."""
    wp, dur, der = _racer_like_batch(40)
    batch = min_snap(wp, dur, derivatives=der, method=method).coeffs
    for i in (0, 17, 39):
        alone = min_snap(wp[i : i + 1], dur[i : i + 1], derivatives=der[i : i + 1], method=method)
        assert torch.equal(alone.coeffs[0], batch[i]), (method, i)


def test_auto_is_the_dense_solve_for_one_problem_and_the_banded_for_a_large_batch():
    wp, dur, der = _racer_like_batch(40)
    one = (wp[:1], dur[:1])
    assert torch.equal(min_snap(*one, derivatives=der[:1]).coeffs,
                       min_snap(*one, derivatives=der[:1], method="dense").coeffs)  # fmt: skip
    assert torch.equal(min_snap(wp, dur, derivatives=der).coeffs,
                       min_snap(wp, dur, derivatives=der, method="banded").coeffs)  # fmt: skip
    with pytest.raises(ConfigError, match="method"):
        min_snap(*one, method="qr")


def test_fixed_intermediate_derivatives_are_met():
    wp, dur, _ = _problem(5, seed=3)
    der = rest_to_rest(5)
    der[2, 0, :3] = torch.tensor([0.5, -0.2, 0.1], dtype=torch.float64)  # velocity at wp 2
    der[3, 1, 0] = 0.3  # x acceleration at wp 3
    traj = min_snap(wp, dur, derivatives=der)
    at = traj.evaluate(traj.knot_times)
    torch.testing.assert_close(at.vel[2], der[2, 0, :3], rtol=0, atol=1e-9)
    assert abs(float(at.acc[3, 0]) - 0.3) < 1e-9
    assert float(_joint_jumps(traj, 4).max()) < JOINT_TOL  # jerk stayed free: snap continuous


def test_batched_problems_match_one_by_one():
    probs = [_problem(6, seed=s) for s in range(3)]
    wp = torch.stack([p[0] for p in probs])
    dur = torch.stack([p[1] for p in probs])
    yaw = torch.stack([p[2] for p in probs])
    batch = min_snap(wp, dur, yaw=yaw)
    t = torch.linspace(-0.1, 6.0, 57, dtype=torch.float64)
    out = batch.evaluate(t)
    for i, (w, d, y) in enumerate(probs):
        one = min_snap(w, d, yaw=y).evaluate(t)
        torch.testing.assert_close(out.pos[i], one.pos, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(out.snap[i], one.snap, rtol=1e-8, atol=1e-8)
        torch.testing.assert_close(out.yaw_acc[i], one.yaw_acc, rtol=1e-9, atol=1e-9)


def test_evaluate_derivatives_match_finite_differences(device):
    wp, dur, yaw = _problem(5, seed=4)
    traj = min_snap(wp, dur, yaw=yaw).to(device=device)
    t = torch.linspace(0.05, float(traj.duration) - 0.05, 40, dtype=torch.float64, device=device)
    h = 1e-5
    a, lo, hi = traj.evaluate(t), traj.evaluate(t - h), traj.evaluate(t + h)
    assert a.pos.device.type == torch.device(device).type
    pairs = [("pos", "vel"), ("vel", "acc"), ("acc", "jerk"), ("jerk", "snap")]
    pairs += [("yaw", "yaw_rate"), ("yaw_rate", "yaw_acc")]
    for f, df in pairs:
        fd = (getattr(hi, f) - getattr(lo, f)) / (2 * h)
        torch.testing.assert_close(fd, getattr(a, df), rtol=1e-5, atol=1e-4)


def test_per_trajectory_times_and_clamping():
    wp, dur, _ = _problem(4, seed=5)
    traj = min_snap(torch.stack((wp, wp + 1)), torch.stack((dur, 2 * dur)))
    t = torch.stack((torch.tensor([0.0, 1e6]), torch.tensor([-3.0, 1e6]))).double()
    out = traj.evaluate(t)  # (2, 2, 3): per-trajectory times; outside: end pose held at rest
    torch.testing.assert_close(out.pos[0, 1], wp[-1], rtol=0, atol=1e-9)
    for f in (out.vel, out.acc, out.jerk, out.snap):
        assert float(f[0, 1].abs().max()) == 0.0 and float(f[1, 0].abs().max()) == 0.0
    assert float(traj.derivative(t, 4)[1, 0].abs().max()) == 0.0
    torch.testing.assert_close(out.pos[1, 0], wp[0] + 1, rtol=0, atol=1e-9)
    assert out.setpoint().shape == (2, 2, 14)


def test_time_scaling_scales_derivatives():
    wp, dur, yaw = _problem(4, seed=6)
    traj = min_snap(wp, dur, yaw=yaw)
    slow = traj.scaled(2.0)
    t = torch.linspace(0, float(traj.duration), 11, dtype=torch.float64)
    a, b = traj.evaluate(t), slow.evaluate(2 * t)
    torch.testing.assert_close(b.pos, a.pos)
    torch.testing.assert_close(b.acc, a.acc / 4)
    torch.testing.assert_close(b.snap, a.snap / 16)
    # the min-snap solution of the scaled times is the scaled solution
    resolved = min_snap(wp, 2 * dur, yaw=yaw)
    torch.testing.assert_close(resolved.coeffs, slow.coeffs, rtol=1e-8, atol=1e-10)


def test_yaw_unwrapped_the_short_way():
    wp = torch.tensor([[0.0, 0, 1], [1, 0, 1], [2, 0, 1]], dtype=torch.float64)
    yaw = torch.tensor([3.0, -3.0, 3.0], dtype=torch.float64)
    traj = min_snap(wp, torch.ones(2, dtype=torch.float64), yaw=yaw)
    at = traj.evaluate(traj.knot_times).yaw
    assert abs(float(at[1]) - (2 * math.pi - 3.0)) < 1e-9
    assert abs(float(at[2]) - 3.0) < 1e-9


# ---- bad input ---------------------------------------------------------------------------------


def _wp3() -> torch.Tensor:
    return torch.tensor([[0.0, 0, 1], [1, 0, 1], [2, 1, 1]], dtype=torch.float64)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"waypoints": [[0.0, 0, 1], [0.0, 0, 1], [1, 1, 1]]}, "waypoints 0 and 1 equal"),
        ({"waypoints": [[0.0, 0, 1], [float("nan"), 0, 1], [1, 1, 1]]}, "NaN/inf at index"),
        ({"waypoints": [[0.0, 0, 1]]}, r"W >= 2"),
        ({"waypoints": [[0.0, 0], [1.0, 1]]}, r"\(\.\.\., W >= 2, 3\)"),
        ({"durations": [1.0, 0.0]}, "durations: expected finite segment times > 0 s, got 0.0"),
        ({"durations": [1.0, -2.0]}, "got -2.0"),
        ({"durations": [1.0, float("nan")]}, "durations"),
        ({"durations": [1.0]}, r"durations: expected shape \(\.\.\., 2\)"),
        ({"yaw": [0.0, float("nan"), 0.0]}, "yaw: expected finite"),
        ({"derivatives": torch.zeros(2, 3, 4)}, r"derivatives: expected shape"),
        ({"derivatives": torch.full((3, 3, 4), float("inf"))}, "got inf"),
        ({"waypoints": "abc"}, "waypoints: expected a numeric array"),
    ],
)
def test_bad_input_raises_clear_errors(kwargs, match):
    args = {"waypoints": _wp3(), "durations": [1.0, 1.0]} | kwargs
    wp, dur = args.pop("waypoints"), args.pop("durations")
    with pytest.raises(ConfigError, match=match):
        min_snap(wp, dur, **args)


def test_mismatched_batches_raise():
    wp = torch.stack((_wp3(), _wp3() + 1))  # 2 problems
    with pytest.raises(ConfigError, match="batch dims: expected broadcastable"):
        min_snap(wp, torch.ones(3, 2))  # 3 problems' durations


def test_single_segment_rejects_bad_time():
    with pytest.raises(ConfigError, match="duration"):
        single_segment(torch.zeros(4), torch.ones(4), 0.0)
