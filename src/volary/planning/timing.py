"""Segment-time allocation for min-snap trajectories: given, proportional, or optimized.

- ``given``: the caller's durations (checked by :func:`volary.planning.min_snap`).
- ``proportional``: T_i = |p_i+1 - p_i| / v_nominal (straight-line distance at a nominal speed).
- ``optimized``: (1) the time *ratios* minimize the snap cost at a fixed total time, by gradient
  descent on the segment times (Mellinger & Kumar, ICRA 2011, Sec. IV, their time-allocation
  step; here the gradient comes from autograd through the closed-form solve); (2) the whole
  trajectory is then scaled in time, T_i -> alpha T_i, to the smallest alpha whose samples meet
  the speed, acceleration, thrust (TWR), rotor-speed and body-rate limits of the airframe
  (bisection on log alpha per trajectory; velocity scales as 1/alpha, acceleration as
  1/alpha^2, body rates as 1/alpha, so the limits tighten monotonically as alpha shrinks
  except for thrust *minima*, which the bisection treats the same way).
"""

from __future__ import annotations

import math
from enum import StrEnum

import torch
from torch import Tensor

from volary.dynamics.airframe import Airframe
from volary.dynamics.params import VehicleParams
from volary.errors import ConfigError
from volary.planning.flatness import Limits, as_params, feasible, sample_count
from volary.planning.minsnap import DUPLICATE_TOL, min_snap
from volary.planning.trajectory import PolyTrajectory
from volary.registry import parse_enum

MAX_SCALE_DOUBLINGS = 20  # alpha up to 2^20 before a trajectory is declared infeasible
BISECTION_STEPS = 30  # log2-alpha bracket shrinks 2^-30 (relative precision ~1e-9 * bracket)
FINAL_CHECK_STEPS, FINAL_CHECK_FACTOR = 50, 1.001  # slow down until the result's own samples pass


class TimeAllocation(StrEnum):
    """How :func:`plan` picks the segment times."""

    GIVEN = "given"
    PROPORTIONAL = "proportional"
    OPTIMIZED = "optimized"


def proportional_times(waypoints: Tensor, speed: float = 1.0) -> Tensor:
    """T_i = |p_i+1 - p_i| / speed (s), (..., W-1), for waypoints (..., W, 3) m and speed m/s.

    Two consecutive waypoints at the same position get zero time: a ConfigError (give the
    durations explicitly, e.g. to turn on the spot).
    """
    if not (math.isfinite(speed) and speed > 0):
        raise ConfigError(f"speed: expected a finite nominal speed > 0 m/s, got {speed}")
    wp = torch.as_tensor(waypoints, dtype=torch.float64)
    if wp.dim() < 2 or wp.shape[-1] != 3 or wp.shape[-2] < 2:
        raise ConfigError(f"waypoints: expected shape (..., W >= 2, 3), got {tuple(wp.shape)}")
    if not bool(torch.isfinite(wp).all()):
        raise ConfigError("waypoints: expected finite values, got NaN/inf")
    dist = (wp[..., 1:, :] - wp[..., :-1, :]).norm(dim=-1)
    if bool((dist < DUPLICATE_TOL).any()):
        i = int(torch.nonzero(dist < DUPLICATE_TOL)[0, -1])
        raise ConfigError(
            f"waypoints: expected consecutive positions to differ for proportional times, got "
            f"waypoints {i} and {i + 1} at the same position; drop one or give durations"
        )
    return dist / speed


def refine_ratios(
    waypoints: Tensor,
    durations: Tensor,
    *,
    yaw: Tensor | None = None,
    derivatives: Tensor | None = None,
    iters: int = 30,
) -> Tensor:
    """Segment times with the same total that lower the snap cost (Mellinger & Kumar Sec. IV).

    Gradient descent with backtracking on z, T = T_total softmax(z), minimizing the log of the
    total snap cost (x, y, z and yaw); gradients by autograd through :func:`min_snap`.
    """
    dur = torch.as_tensor(durations, dtype=torch.float64).detach()
    total = dur.sum(-1, keepdim=True)
    z = dur.log().clone()

    def cost(zz: Tensor) -> Tensor:
        tt = total * torch.softmax(zz, dim=-1)
        traj = min_snap(waypoints, tt, yaw=yaw, derivatives=derivatives)
        return traj.snap_cost().sum(-1).clamp_min(1e-300).log()

    step = torch.ones_like(total[..., 0])
    for _ in range(iters):
        zz = z.detach().requires_grad_(True)
        c = cost(zz)
        (g,) = torch.autograd.grad(c.sum(), zz)
        with torch.no_grad():
            trial = z - step[..., None] * g
            better = cost(trial) < c
            z = torch.where(better[..., None], trial, z)
            step = torch.where(better, step * 1.5, step * 0.3)
    return (total * torch.softmax(z, dim=-1)).detach()


def fastest_feasible(
    traj: PolyTrajectory,
    vehicle: VehicleParams | Airframe,
    limits: Limits | None = None,
    *,
    dt: float = 0.01,
) -> PolyTrajectory:
    """``traj`` scaled in time (per trajectory) to the smallest factor that passes
    :func:`volary.planning.flatness.feasible` at the unscaled trajectory's sample points
    (``dt`` apart at scale 1); ConfigError when no factor up to 2^20 does."""
    lim = limits if limits is not None else Limits()
    _check_hover(vehicle, lim, traj.durations)
    k = sample_count(traj, dt)  # the same points along the path for every scaling

    def ok(alpha: Tensor) -> Tensor:
        return feasible(traj.scaled(alpha), vehicle, lim, samples=k).ok

    one = torch.ones_like(traj.duration)
    hi, lo = one.clone(), one.clone()
    for _ in range(MAX_SCALE_DOUBLINGS):  # grow hi until feasible
        good = ok(hi)
        if bool(good.all()):
            break
        hi = torch.where(good, hi, 2 * hi)
    else:
        if not bool(ok(hi).all()):
            report = feasible(traj.scaled(hi), vehicle, lim, samples=k)
            raise ConfigError(f"limits: no time scaling up to {hi.max():.3g}x is {report}")
    for _ in range(MAX_SCALE_DOUBLINGS):  # shrink lo until infeasible (or tiny)
        good = ok(lo)
        if not bool(good.any()):
            break
        lo = torch.where(good, lo / 2, lo)
    lo = torch.minimum(lo, hi)
    for _ in range(BISECTION_STEPS):
        mid = torch.sqrt(lo * hi)
        good = ok(mid)
        hi = torch.where(good, mid, hi)
        lo = torch.where(good, lo, mid)
    for _ in range(FINAL_CHECK_STEPS):  # pass feasible()'s own sampling of the result too
        good = feasible(traj.scaled(hi), vehicle, lim, dt=dt).ok
        if bool(good.all()):
            break
        hi = torch.where(good, hi, hi * FINAL_CHECK_FACTOR)
    return traj.scaled(hi)


def _check_hover(vehicle: VehicleParams | Airframe, lim: Limits, like: Tensor) -> None:
    """The vehicle must at least hover inside the limits, or no time scaling can help."""
    p = as_params(vehicle, like)
    twr = lim.thrust_margin * p.max_thrust / (p.mass * 9.81)
    if bool((twr <= 1.0).any()):
        raise ConfigError(
            f"limits: expected a usable thrust-to-weight ratio > 1, got {float(twr.min()):.3g} "
            f"(thrust_margin {lim.thrust_margin}); the vehicle cannot hover"
        )


def optimize_times(
    waypoints: Tensor,
    vehicle: VehicleParams | Airframe,
    limits: Limits | None = None,
    *,
    yaw: Tensor | None = None,
    derivatives: Tensor | None = None,
    speed: float = 1.0,
    iters: int = 30,
    dt: float = 0.01,
) -> PolyTrajectory:
    """Min-snap trajectory with time ratios optimized for snap and the total time minimized
    under ``limits`` (module docstring): proportional start at ``speed``, :func:`refine_ratios`,
    then :func:`fastest_feasible`."""
    dur = proportional_times(waypoints, speed)
    if iters > 0 and dur.shape[-1] > 1:
        dur = refine_ratios(waypoints, dur, yaw=yaw, derivatives=derivatives, iters=iters)
    traj = min_snap(waypoints, dur, yaw=yaw, derivatives=derivatives)
    return fastest_feasible(traj, vehicle, limits, dt=dt)


def plan(
    waypoints: Tensor,
    times: Tensor | str = "proportional",
    *,
    yaw: Tensor | None = None,
    derivatives: Tensor | None = None,
    speed: float = 1.0,
    vehicle: VehicleParams | Airframe | None = None,
    limits: Limits | None = None,
) -> PolyTrajectory:
    """One entry point: ``times`` is a tensor of durations (given), ``"proportional"`` (at
    ``speed``) or ``"optimized"`` (needs ``vehicle``; :func:`optimize_times`)."""
    if not isinstance(times, str):
        return min_snap(waypoints, times, yaw=yaw, derivatives=derivatives)
    how = parse_enum(TimeAllocation, times, "time allocation")
    if how == TimeAllocation.GIVEN:
        raise ConfigError("times: 'given' expects the durations tensor itself, got the name")
    if how == TimeAllocation.PROPORTIONAL:
        dur = proportional_times(waypoints, speed)
        return min_snap(waypoints, dur, yaw=yaw, derivatives=derivatives)
    if vehicle is None:
        raise ConfigError("vehicle: expected an Airframe or VehicleParams for 'optimized' times")
    return optimize_times(waypoints, vehicle, limits, yaw=yaw, derivatives=derivatives, speed=speed)
