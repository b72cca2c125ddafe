"""Batched iterative LQR (Gauss-Newton DDP) on the MPC model, in torch, for many vehicles at once.

Solves SOUS VIDE eq. 2 (min sum_k dx_k' Q dx_k + du_k' R du_k + dx_N' Q_N dx_N subject to
x_k+1 = f_d(x_k, u_k) and box limits on u) for B problems in parallel: linearize f_d along
the current rollout (batched forward differences), a Riccati backward pass per problem (Li &
Todorov 2004; Tassa, Erez & Todorov 2012 for the regularized form), then a forward rollout
with a line search over step sizes evaluated side by side. Limits are applied by clamping in
the forward pass, so every plan is a true rollout of the model (dynamically feasible).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

Step2 = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]  # (x, u) -> (A, B) of a Step
Step = Callable[[Tensor, Tensor], Tensor]  # (x (..., B, nx), u (..., B, nu)) -> x_next (..., B, nx)
ALPHAS = (1.0, 0.5, 0.25, 0.1)  # line-search step sizes, tried side by side
FD_STEP = 1e-7  # forward-difference step of the linearization (float64)


@dataclass(frozen=True)
class LqrCost:
    """Diagonal quadratic tracking cost of eq. 2 (weights broadcast over problems)."""

    q: Tensor  # (nx,) stage state weights
    r: Tensor  # (nu,) stage input weights
    q_terminal: Tensor  # (nx,) terminal state weights
    u_min: Tensor  # (B, nu) lower input limits
    u_max: Tensor  # (B, nu) upper input limits


@dataclass(frozen=True)
class IlqrResult:
    """Plans and diagnostics of a batched solve (B problems, horizon H)."""

    x: Tensor  # (B, H + 1, nx) rollout of the plan
    u: Tensor  # (B, H, nu) planned inputs
    cost: Tensor  # (B,) eq. 2 cost of the plan
    converged: Tensor  # (B,) bool, last cost decrease <= tol (1 + cost)
    iterations: int  # iterations run (the batch stops when every problem has converged)


def rollout(step: Step, x0: Tensor, u: Tensor) -> Tensor:
    """(B, H + 1, nx) states from x0 (B, nx) under inputs u (B, H, nu)."""
    xs = [x0]
    for k in range(u.shape[1]):
        xs.append(step(xs[-1], u[:, k]))
    return torch.stack(xs, dim=1)


def tracking_cost(x: Tensor, u: Tensor, x_ref: Tensor, u_ref: Tensor, c: LqrCost) -> Tensor:
    """(...,) eq. 2 cost of states (..., H + 1, nx) and inputs (..., H, nu)."""
    dx, du = x - x_ref, u - u_ref
    stage = (c.q * dx[..., :-1, :] ** 2).sum((-1, -2)) + (c.r * du**2).sum((-1, -2))
    return stage + (c.q_terminal * dx[..., -1, :] ** 2).sum(-1)


def linearize(
    step: Step, x: Tensor, u: Tensor, *, shift_invariant: int = 0, h: float = FD_STEP
) -> tuple[Tensor, Tensor]:
    """Jacobians A = df/dx (..., nx, nx), B = df/du (..., nx, nu) at (x, u) (..., nx / nu) by
    forward differences, all perturbations in one batched call of ``step`` (float64 with
    h = 1e-7: errors ~1e-7 relative, harmless for Gauss-Newton search directions).

    The first ``shift_invariant`` state coordinates enter ``step`` only as x_next = x + g(rest)
    (position in a translation-invariant model): their columns are unit vectors, not computed.
    """
    nx, nu = x.shape[-1], u.shape[-1]
    n, k = nx + nu, shift_invariant
    eye = torch.eye(n, dtype=x.dtype, device=x.device)
    delta = torch.cat((torch.zeros_like(eye[:1]), h * eye[k:]))
    xu = torch.cat((x, u), dim=-1) + delta.view(-1, *([1] * (x.dim() - 1)), n)
    f = step(xu[..., :nx], xu[..., nx:])  # (1 + n - k, ..., nx)
    diff = ((f[1:] - f[:1]) / h).movedim(0, -1)  # (..., nx, n - k)
    fixed = eye[:nx, :k].expand(*diff.shape[:-1], k)
    jac = torch.cat((fixed, diff), dim=-1)
    return jac[..., :nx], jac[..., nx:]


def backward_pass(
    a: Tensor, b: Tensor, x: Tensor, u: Tensor, x_ref: Tensor, u_ref: Tensor, c: LqrCost, mu: float
) -> tuple[Tensor, Tensor]:
    """Riccati recursion of the Gauss-Newton model: gains K (B, H, nu, nx), k (B, H, nu).

    Q_x = q dx + A' v, Q_u = r du + B' v, Q_xx = q + A' V A, Q_uu = r + B' V B + mu I,
    Q_ux = B' V A; K = -Q_uu^-1 Q_ux, k = -Q_uu^-1 Q_u; V, v updated with the gains.
    """
    h = u.shape[1]
    v_xx = torch.diag_embed(c.q_terminal.expand_as(x[:, -1]))
    v_x = c.q_terminal * (x[:, -1] - x_ref[:, -1])
    eye_u = mu * torch.eye(u.shape[-1], dtype=u.dtype, device=u.device)
    gains_k, gains_ff = [], []
    for i in reversed(range(h)):
        at, bt = a[:, i].transpose(-1, -2), b[:, i].transpose(-1, -2)
        q_x = c.q * (x[:, i] - x_ref[:, i]) + (at @ v_x[..., None])[..., 0]
        q_u = c.r * (u[:, i] - u_ref[:, i]) + (bt @ v_x[..., None])[..., 0]
        vb = v_xx @ b[:, i]
        q_xx = torch.diag_embed(c.q.expand_as(q_x)) + at @ v_xx @ a[:, i]
        q_uu = torch.diag_embed(c.r.expand_as(q_u)) + bt @ vb + eye_u
        q_ux = vb.transpose(-1, -2) @ a[:, i]
        chol = torch.linalg.cholesky(0.5 * (q_uu + q_uu.transpose(-1, -2)))
        gain = -torch.cholesky_solve(q_ux, chol)
        ff = -torch.cholesky_solve(q_u[..., None], chol)[..., 0]
        kt = gain.transpose(-1, -2)
        v_x = q_x + (kt @ (q_uu @ ff[..., None] + q_u[..., None]))[..., 0]
        v_x = v_x + (q_ux.transpose(-1, -2) @ ff[..., None])[..., 0]
        v_xx = q_xx + kt @ q_uu @ gain + kt @ q_ux + q_ux.transpose(-1, -2) @ gain
        v_xx = 0.5 * (v_xx + v_xx.transpose(-1, -2))
        gains_k.append(gain)
        gains_ff.append(ff)
    return torch.stack(gains_k[::-1], dim=1), torch.stack(gains_ff[::-1], dim=1)


def forward_pass(
    step: Step, x: Tensor, u: Tensor, gain: Tensor, ff: Tensor, c: LqrCost
) -> tuple[Tensor, Tensor]:
    """Closed-loop rollouts for every step size in ALPHAS: states (S, B, H + 1, nx) and
    clamped inputs (S, B, H, nu), with u = clamp(u + alpha k + K (x_new - x))."""
    s = len(ALPHAS)
    alpha = torch.tensor(ALPHAS, dtype=u.dtype, device=u.device)[:, None, None]
    lo, hi = c.u_min.expand(s, -1, -1), c.u_max.expand(s, -1, -1)
    xn = [x[:, 0].expand(s, -1, -1)]
    us = []
    for i in range(u.shape[1]):
        dx = xn[-1] - x[:, i]
        ui = u[:, i] + alpha * ff[:, i] + (gain[:, i] @ dx[..., None])[..., 0]
        ui = torch.minimum(torch.maximum(ui, lo), hi)
        us.append(ui)
        xn.append(step(xn[-1], ui))
    return torch.stack(xn, dim=2), torch.stack(us, dim=2)


def ilqr(
    step: Step,
    x0: Tensor,
    u_init: Tensor,
    x_ref: Tensor,
    u_ref: Tensor,
    c: LqrCost,
    *,
    max_iter: int,
    tol: float,
    mu: float = 1e-6,
    shift_invariant: int = 0,
    jacobians: Step2 | None = None,
) -> IlqrResult:
    """Batched iLQR from the initial guess ``u_init`` (B, H, nu) (clamped to the limits).

    ``step`` advances states (..., B, nx): the model's per-problem parameters have the problem
    dim B last among the batch dims, so they broadcast over step sizes and horizon stages.
    A problem keeps its plan when no step size lowers its cost (it has converged).
    ``jacobians``: (x, u) (..., B, nx / nu) -> (A, B) of ``step``; default :func:`linearize`
    (forward differences, ``shift_invariant`` as there).
    """
    u = torch.minimum(torch.maximum(u_init, c.u_min[:, None]), c.u_max[:, None])
    x = rollout(step, x0, u)
    cost = tracking_cost(x, u, x_ref, u_ref, c)
    converged = torch.zeros_like(cost, dtype=torch.bool)
    iterations = 0
    while iterations < max_iter:
        iterations += 1
        xt, ut = x[:, :-1].transpose(0, 1), u.transpose(0, 1)  # (H, B, ...)
        if jacobians is None:
            a, b = linearize(step, xt, ut, shift_invariant=shift_invariant)
        else:
            a, b = jacobians(xt, ut)
        gain, ff = backward_pass(a.transpose(0, 1), b.transpose(0, 1), x, u, x_ref, u_ref, c, mu)
        xs, us = forward_pass(step, x, u, gain, ff, c)
        costs = tracking_cost(xs, us, x_ref, u_ref, c)  # (S, B)
        costs = torch.where(torch.isfinite(costs), costs, torch.full_like(costs, torch.inf))
        best_cost, best = costs.min(dim=0)
        better = best_cost < cost
        pick = best[None, :, None, None]
        x_new = xs.gather(0, pick.expand(1, *xs.shape[1:]))[0]
        u_new = us.gather(0, pick.expand(1, *us.shape[1:]))[0]
        x = torch.where(better[:, None, None], x_new, x)
        u = torch.where(better[:, None, None], u_new, u)
        decrease = cost - torch.where(better, best_cost, cost)
        cost = torch.where(better, best_cost, cost)
        converged = decrease <= tol * (1.0 + cost)
        if bool(converged.all()):
            break
    return IlqrResult(x=x, u=u, cost=cost, converged=converged, iterations=iterations)


__all__ = ["ALPHAS", "IlqrResult", "LqrCost", "ilqr", "linearize", "rollout", "tracking_cost"]
