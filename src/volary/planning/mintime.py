"""Minimum-time segment durations (and pass-through speeds) by gradient descent.

``optimize_times`` scales a snap-optimal trajectory by one factor, so its tightest manoeuvre sets
the pace everywhere. Here every segment time T_i (and optionally the speed v_j with which the
trajectory crosses waypoint j along a given direction d_j, a linear velocity constraint of the
min-snap QP) is a free variable, and the objective is the time the trajectory would need after
the uniform rescale that puts it exactly on its limits:

    J(T, v) = (sum_i w_i T_i) sqrt(L(T, v)),  L = softmax_tau(load_k over samples k)

where each load is a ratio that scales about like 1/alpha^2 when the trajectory is slowed by
alpha (thrust / (margin T_max), (rotor speed / (margin w_max))^2, (body rate / limit)^2,
tan(tilt) / tan(limit), and 1 + (w_min - w) / (0.2 w_max) for rotors near their lower bound),
and softmax_tau(x) = log(sum exp(tau x)) / tau is a smooth maximum. The min-snap solve and the
flatness map are differentiable torch, so dJ/d(log T, log v) comes from autograd; Adam with a
cosine step schedule, the temperature raised half way. The best iterate by the *exact* uniform
rescale (``fastest_feasible``) is returned, so the result always meets the limits as
``feasible`` checks them. Batched: every problem of the batch descends independently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from volary.dynamics.airframe import Airframe
from volary.dynamics.params import VehicleParams
from volary.errors import ConfigError
from volary.planning.flatness import Limits, as_params, flat_to_state
from volary.planning.minsnap import min_snap
from volary.planning.timing import fastest_feasible, optimize_times
from volary.planning.trajectory import PolyTrajectory

LOW_ROTOR_SCALE = 0.2  # of w_max: the rotor-speed lower-bound load rises by 1 over this band


@dataclass(frozen=True)
class MinTimeResult:
    """The fastest trajectory found, its segment times and pass-through speeds."""

    traj: PolyTrajectory  # feasible (``fastest_feasible`` applied)
    durations: Tensor  # (N, M) s, = traj.durations
    speeds: Tensor | None  # (N, W) m/s along ``directions`` (NaN where free), or None
    objective: Tensor  # (N,) s, sum(w T) of ``traj`` (the weighted time that was minimized)


def limit_loads(
    traj: PolyTrajectory, vehicle: VehicleParams, limits: Limits, samples: int
) -> Tensor:
    """(N, K') every load ratio (module docstring) at ``samples`` times spread over each
    trajectory; 1 is on a limit, and each scales about like alpha^-2 under time scaling."""
    dur = traj.duration
    t = torch.linspace(0.0, 1.0, samples, dtype=dur.dtype, device=dur.device) * dur[..., None]
    st = flat_to_state(traj.evaluate(t), vehicle)
    p = as_params(vehicle, dur)
    max_thrust, w_max, w_min = p.max_thrust[:, None], p.w_max[:, None, :], p.w_min[:, None, :]
    active = p.k_f[:, None, :] > 0
    thrust = st.thrust / (limits.thrust_margin * max_thrust)
    rotor = torch.where(active, st.rotor_speed / (limits.rotor_margin * w_max), 0.0) ** 2
    low = torch.where(active, 1 + (w_min - st.rotor_speed) / (LOW_ROTOR_SCALE * w_max), 0.0)
    rate = (st.omega.norm(dim=-1) / limits.max_body_rate) ** 2
    zb = 1 - 2 * (st.quat[..., 1] ** 2 + st.quat[..., 2] ** 2)
    tilt = (1 - zb**2).clamp_min(1e-12).sqrt() / zb.clamp_min(1e-3) / math.tan(limits.max_tilt)
    flat = (thrust, rotor.flatten(-2), low.flatten(-2), rate, tilt)
    return torch.cat(flat, dim=-1)


def min_time(
    waypoints: Tensor,
    vehicle: VehicleParams | Airframe,
    limits: Limits | None = None,
    *,
    yaw: Tensor | None = None,
    derivatives: Tensor | None = None,
    directions: Tensor | None = None,
    weights: Tensor | None = None,
    durations: Tensor | None = None,
    speeds: Tensor | None = None,
    iters: int = 800,
    lr: float = 0.02,
    samples: int = 3000,
    check_every: int = 100,
) -> MinTimeResult:
    """Segment times (and pass-through speeds) that minimize the weighted time under limits.

    ``waypoints`` (N, W, 3) m; ``derivatives`` (N, W, 3, 4) fixed derivatives, NaN free (as
    :func:`volary.planning.min_snap`); ``directions`` (N, W, 3) unit vectors or NaN rows: at a
    waypoint with a direction the velocity is constrained to v_j d_j, v_j > 0 optimized (it
    overrides that waypoint's velocity in ``derivatives``); ``weights`` (M,) or (N, M) weight of
    each segment's time in the objective (default 1: total time; e.g. a smaller weight after the
    last gate of a race); ``durations`` (N or 1, M) and ``speeds`` (N or 1, W) warm-start the
    descent (default: the snap-optimal ratios of :func:`optimize_times` and its velocities along
    the directions).
    Returns a :class:`MinTimeResult`; the trajectory meets ``limits`` (``fastest_feasible``).
    """
    lim = limits if limits is not None else Limits()
    _check_descent(iters, lr, samples, check_every)
    wp = torch.as_tensor(waypoints, dtype=torch.float64)
    if wp.dim() != 3 or wp.shape[-1] != 3 or wp.shape[1] < 2:
        raise ConfigError(f"waypoints: expected shape (N, W >= 2, 3), got {tuple(wp.shape)}")
    p64 = as_params(vehicle, wp)
    base_der = _base_derivatives(wp, derivatives)
    dirs, mask = _directions(wp, directions)
    dur0, v_start = _start(wp, p64, lim, yaw, base_der, dirs, durations)
    w = (
        torch.ones_like(dur0)
        if weights is None
        else torch.as_tensor(weights, dtype=torch.float64).expand_as(dur0)
    )
    prob = _Problem(wp, p64, lim, yaw, base_der, dirs, mask, w)
    v0 = v_start if speeds is None else torch.where(mask, _scatter_speeds(speeds, mask, v_start),
                                                    v_start)  # fmt: skip
    best_dur, best_lv = _descend(prob, dur0, v0, iters, lr, samples, check_every)
    with torch.no_grad():
        traj = fastest_feasible(
            min_snap(wp, best_dur, yaw=yaw, derivatives=prob.derivatives(best_lv)), p64, lim
        )
    alpha = (traj.durations / best_dur)[:, :1]  # the uniform rescale slows every speed by it
    speeds_out = torch.where(mask, best_lv.exp() / alpha, math.nan) if prob.n_dir > 0 else None
    return MinTimeResult(traj, traj.durations, speeds_out, (traj.durations * w).sum(-1))


def _check_descent(iters: int, lr: float, samples: int, check_every: int) -> None:
    """ConfigError for descent options out of range."""
    for name, v in (("iters", iters), ("samples", samples), ("check_every", check_every)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"{name}: expected an int >= 1, got {v!r}")
    if not (math.isfinite(lr) and lr > 0):
        raise ConfigError(f"lr: expected a step size > 0, got {lr}")


def _start(
    wp: Tensor,
    p64: VehicleParams,
    lim: Limits,
    yaw: Tensor | None,
    base_der: Tensor,
    dirs: Tensor,
    durations: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """The descent's start: segment times (N, M) s (given, or the snap-optimal ratios at the
    fastest uniform scale) and speeds (N, W) m/s along the directions."""
    if durations is None:
        start = optimize_times(wp, p64, lim, yaw=yaw, derivatives=base_der, speed=8.0, iters=15)
        dur0 = start.durations
        v_start = (start.evaluate(start.knot_times).vel * dirs).sum(-1).clamp_min(0.5)
    else:
        dur0 = torch.as_tensor(durations, dtype=torch.float64)
        if dur0.dim() == 2 and dur0.shape[0] == 1:
            dur0 = dur0.expand(wp.shape[0], -1).clone()
        v_start = torch.full(wp.shape[:-1], 8.0, dtype=torch.float64)
    shape = (wp.shape[0], wp.shape[1] - 1)
    if tuple(dur0.shape) != shape or not bool((dur0 > 0).all()):
        raise ConfigError(f"durations: expected times > 0 s of shape {shape}, got {dur0.shape}")
    return dur0, v_start


@dataclass(frozen=True)
class _Problem:
    """One batch of min-time problems: what every iterate is evaluated against."""

    wp: Tensor  # (N, W, 3) m
    vehicle: VehicleParams  # float64
    lim: Limits
    yaw: Tensor | None
    base_der: Tensor  # (N, W, 3, 4) fixed derivatives (NaN: free)
    dirs: Tensor  # (N, W, 3) unit directions, zeros where free
    mask: Tensor  # (N, W) bool, a direction is given
    w: Tensor  # (N, M) weight of each segment's time

    @property
    def n_dir(self) -> int:
        """Most constrained directions of any problem (0: no speeds to optimize)."""
        return int(self.mask.sum(-1).max()) if self.mask.any() else 0

    def derivatives(self, log_v: Tensor) -> Tensor:
        """The fixed derivatives with the velocity v_j d_j where a direction is given."""
        vel = log_v.exp()[..., None] * self.dirs
        der = self.base_der.clone()
        der[..., 0, :3] = torch.where(self.mask[..., None], vel, self.base_der[..., 0, :3])
        return der

    def keep_best(
        self, dur: Tensor, log_v: Tensor, best: tuple[Tensor, Tensor, Tensor]
    ) -> tuple[Tensor, Tensor, Tensor]:
        """(best time, durations, log speeds) after scoring the iterate (``_keep_best``)."""
        return _keep_best(self.wp, dur, log_v, self.derivatives(log_v), self.yaw, self.vehicle,
                          self.lim, self.w, *best)  # fmt: skip


def _descend(
    prob: _Problem, dur0: Tensor, v0: Tensor, iters: int, lr: float, samples: int,
    check_every: int,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Adam on (log T, log v) from (``dur0``, ``v0``) (module docstring); the best iterate's
    (durations (N, M), log speeds (N, W)) by the exact rescale, checked every ``check_every``."""
    n_dir = prob.n_dir
    log_t = dur0.log().clone().requires_grad_(True)
    log_v = v0.clamp_min(0.1).log().clone().requires_grad_(n_dir > 0)
    opt = torch.optim.Adam([log_t] + ([log_v] if n_dir > 0 else []), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, iters, eta_min=lr / 10)
    best_t = torch.full(dur0.shape[:-1], math.inf, dtype=torch.float64)
    best = (best_t, dur0.clone(), log_v.detach().clone())
    with torch.no_grad():  # the start itself competes
        best = prob.keep_best(dur0, log_v, best)
    for it in range(iters):
        tau = 30.0 if it < iters * 3 // 8 else 100.0  # smooth max temperature
        dur = log_t.exp()
        traj = min_snap(prob.wp, dur, yaw=prob.yaw, derivatives=prob.derivatives(log_v))
        load = limit_loads(traj, prob.vehicle, prob.lim, samples)
        smax = torch.logsumexp(load * tau, dim=-1) / tau
        cost = (dur * prob.w).sum(-1) * smax.clamp_min(1e-9).sqrt()
        opt.zero_grad()
        cost.sum().backward()
        opt.step()
        sched.step()
        if (it + 1) % check_every == 0 or it == iters - 1:
            with torch.no_grad():
                best = prob.keep_best(log_t.exp(), log_v, best)
    return best[1], best[2]


def _base_derivatives(wp: Tensor, derivatives: Tensor | None) -> Tensor:
    shape = (*wp.shape[:-1], 3, 4)
    if derivatives is None:
        return torch.full(shape, math.nan, dtype=torch.float64)
    der = torch.as_tensor(derivatives, dtype=torch.float64)
    if tuple(der.shape) != shape:
        raise ConfigError(f"derivatives: expected shape {shape}, got {tuple(der.shape)}")
    return der


def _directions(wp: Tensor, directions: Tensor | None) -> tuple[Tensor, Tensor]:
    """Unit directions (N, W, 3) (zeros where free) and the (N, W) mask of constrained ones."""
    if directions is None:
        return torch.zeros_like(wp), torch.zeros(wp.shape[:-1], dtype=torch.bool)
    d = torch.as_tensor(directions, dtype=torch.float64)
    if d.shape != wp.shape:
        raise ConfigError(f"directions: expected shape {tuple(wp.shape)}, got {tuple(d.shape)}")
    mask = torch.isfinite(d).all(-1)
    norm = torch.where(mask, d.norm(dim=-1), 1.0)
    if bool((norm < 1e-9).any()):
        raise ConfigError("directions: expected non-zero vectors (or NaN rows for free ones)")
    return torch.where(mask[..., None], d / norm[..., None], 0.0), mask


def _scatter_speeds(speeds: Tensor, mask: Tensor, like: Tensor) -> Tensor:
    """Warm-start speeds (N or 1, W) m/s taken where a direction is given, ``like`` elsewhere."""
    sp = torch.as_tensor(speeds, dtype=torch.float64)
    if sp.dim() != 2 or sp.shape[-1] != mask.shape[-1]:
        raise ConfigError(f"speeds: expected shape (N, {mask.shape[-1]}), got {tuple(sp.shape)}")
    sp = sp.expand_as(like)
    if not bool((sp[mask] > 0).all()):
        raise ConfigError("speeds: expected speeds > 0 m/s where a direction is given")
    return torch.where(mask, sp, like)


def _keep_best(
    wp: Tensor,
    dur: Tensor,
    log_v: Tensor,
    der: Tensor,
    yaw: Tensor | None,
    vehicle: VehicleParams,
    lim: Limits,
    w: Tensor,
    best_t: Tensor,
    best_dur: Tensor,
    best_lv: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:
    """Score the current iterate by the exact uniform rescale; keep it where it is better."""
    traj = fastest_feasible(min_snap(wp, dur, yaw=yaw, derivatives=der), vehicle, lim)
    t = (traj.durations * w).sum(-1)
    better = t < best_t
    return (
        torch.where(better, t, best_t),
        torch.where(better[:, None], dur.detach(), best_dur),
        torch.where(better[:, None], log_v.detach(), best_lv),
    )
