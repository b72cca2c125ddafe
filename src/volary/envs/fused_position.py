"""A position task's evaluation in one numba call: every env flies its first episode under a
deterministic MLP policy, observation, policy, control step, end conditions and score inside
the kernel.

Why: an early-stopped training run validates its policy every few iterations (issue 22's
time to a hover policy). Stepped through :class:`~volary.envs.position.PositionTask` a
validation of 64 ten-second episodes costs 1.0-1.8 s on the 2-core machine, almost all of it
per-step torch overhead on small tensors (the rotation matrix, the reward, the terms, the
policy's three linear layers), not the physics. Here the loop runs per env inside the kernel
around the same control step (:func:`volary.sim.fused_kernels.env_step`), so the physics, the
noise streams and the start states are the torch path's own.

The torch path stays the reference: ``tests/test_fused_eval.py`` checks episodes, returns,
success and tracking errors against :meth:`PositionTask.step` driven by the same policy, and
each reward term (:meth:`PositionTask.reward_terms`, :func:`_reward_terms` here) and each end
condition (the task's terms, :func:`_end_terms` here) of both on the same random states, so a
change to one side only fails there.
The kernel computes the observation, the reward and the policy in float64 and rounds where the
torch path holds float32, so the two agree to float32 rounding, not bit for bit (torch's
matrix products sum in another order); a trajectory that grazes a threshold (the success
radius, a termination) may fall on the other side of it.

This module holds the kernels and sees arrays only; :mod:`volary.envs.position` packs a task
into them (``first_episodes``, ``task_constants``), so the task imports the kernels and not
the other way round.

What it covers: the ``hover`` and ``reach`` tasks with every observation layout and action
mode, one goal per episode (``goal_hold_s`` 0), on the numba backend (``compile="numba"``,
the CPU default of the recipes); a policy that is an MLP with tanh between its layers and an
optional observation normalizer (:class:`MlpPolicy`). Anything else returns None and the
caller steps the env.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from volary.control.numba_laws import rotmat
from volary.dynamics.numba_kernels import jit
from volary.numba_cache import guard
from volary.sim import fused_kernels
from volary.sim.fused_kernels import _scratch, env_step

NUMBA_SOURCES = guard(__file__, fused_kernels)

LAYOUT_CODES = {"volary": 0, "aerial_gym": 1, "volary_twr": 2, "body": 3}
# PositionTask's, in order (the env's step limit last)
END_TERMS = ("diverged", "crashed", "too_far", "below", "tilted", "step_limit")
# the reward terms the kernel writes, in envs.position.REWARD_TERMS's order (a test checks it;
# the task imports this module, not the other way round)
REWARD_TERMS = ("close", "close_and_slow", "body_rates", "action_change", "precision", "crash")
PARALLEL_MIN = 64  # envs; from here the kernel splits envs over numba's threads
BLOCK = 8  # envs per parallel work item (a whole episode each: small blocks balance the load)


@jit
def _tanh(v):
    """tanh in float64 from expm1 (exact to a few float64 ulps, also near 0): a third of the
    cost of libm's tanh, which was most of a policy's forward pass."""
    e = np.expm1(-2.0 * abs(v))
    t = -e / (2.0 + e)
    return t if v >= 0 else -t


@jit
def _forward(sizes, flat, norm, clip, obs, h0, h1, act):
    """act = clip(mlp(norm(obs)), -1, 1); NaN -> 0 (the env's action check). Each layer's
    output is rounded to float32 as torch's float32 layers round it; the outputs are the inner
    loop (the weights are stored transposed), so it vectorizes without reordering any sum."""
    d = sizes[0]
    for i in range(d):
        v = np.float64(obs[i])
        if clip > 0.0:
            v = np.float64(np.float32((v - norm[0, i]) / norm[1, i]))
            v = min(max(v, -clip), clip)
        h0[i] = v
    off = 0
    layers = sizes.shape[0] - 1
    for layer in range(layers):
        din, dout = sizes[layer], sizes[layer + 1]
        src = h0 if layer % 2 == 0 else h1
        dst = h1 if layer % 2 == 0 else h0
        bias = off + din * dout
        for o in range(dout):
            dst[o] = flat[bias + o]
        for i in range(din):
            xi = src[i]
            w = flat[off + i * dout : off + (i + 1) * dout]
            for o in range(dout):
                dst[o] += w[o] * xi
        for o in range(dout):
            v = np.float64(np.float32(dst[o]))
            if layer < layers - 1:
                v = np.float64(np.float32(_tanh(v)))
            dst[o] = v
        off = bias + dout
    out = h0 if layers % 2 == 0 else h1
    for j in range(act.shape[0]):
        v = out[j]
        act[j] = 0.0 if np.isnan(v) else min(max(v, -1.0), 1.0)


@jit
def _observe(x, n, goal, prev, hover, layout, obs):
    """:meth:`PositionTask._observe` of env ``n`` into ``obs`` (float32, NaN -> 0,
    +-inf -> +-1e3)."""
    _finite_obs(obs, _layout(x, n, goal, prev, hover, layout, obs))


@jit
def _layout(x, n, goal, prev, hover, layout, obs):
    """Env ``n``'s observation in ``layout``'s order (:data:`LAYOUT_CODES`) into ``obs``;
    how many values it wrote."""
    rm = rotmat(x[6, n], x[7, n], x[8, n], x[9, n])  # body to world, row-major
    e0, e1, e2 = goal[n, 0] - x[0, n], goal[n, 1] - x[1, n], goal[n, 2] - x[2, n]
    if layout == 3:  # body: R^T e, R^T v, R^T e_z (R's third row), omega, previous action
        k = _put_rt(obs, 0, rm, e0, e1, e2)
        k = _put_rt(obs, k, rm, x[3, n], x[4, n], x[5, n])
        for i in range(3):
            obs[k + i] = rm[6 + i]
        return _put_rates(obs, k + 3, x, n, prev, True)
    obs[0], obs[1], obs[2] = e0, e1, e2  # the world-frame layouts lead with e
    if layout == 1:  # aerial_gym: e, columns 1 and 2 of R, R^T v, omega
        for col in range(2):
            for row in range(3):
                obs[3 + 3 * col + row] = rm[3 * row + col]
        k = _put_rt(obs, 9, rm, x[3, n], x[4, n], x[5, n])
        return _put_rates(obs, k, x, n, prev, False)
    for i in range(3):  # volary, volary_twr: e, v, R, omega, previous action [, hover]
        obs[3 + i] = x[3 + i, n]
    for i in range(9):
        obs[6 + i] = rm[i]
    k = _put_rates(obs, 15, x, n, prev, True)
    if layout == 2:
        obs[k] = hover[n]
        k += 1
    return k


@jit
def _put_rt(obs, k, rm, v0, v1, v2):
    """obs[k:k+3] = R^T v for the world vector v (``rm`` body to world, row-major); k + 3."""
    for i in range(3):
        obs[k + i] = rm[i] * v0 + rm[3 + i] * v1 + rm[6 + i] * v2
    return k + 3


@jit
def _put_rates(obs, k, x, n, prev, with_prev):
    """obs[k:] = body rates of env n [and the previous action]; the index after them."""
    for i in range(3):
        obs[k + i] = x[10 + i, n]
    k += 3
    if with_prev:
        for j in range(prev.shape[0]):
            obs[k + j] = prev[j]
        k += prev.shape[0]
    return k


@jit
def _finite_obs(obs, k):
    """NaN -> 0, +-inf -> +-1e3 in obs[:k] (the torch path's nan_to_num)."""
    for i in range(k):
        v = obs[i]
        if np.isnan(v):
            obs[i] = 0.0
        elif np.isinf(v):
            obs[i] = 1e3 if v > 0 else -1e3


@jit
def _fly_env(n, p, pc, c, d, x, tick, flags, keys, rate, imu, mode, cdt, phys, iphys, sizes, flat,
             norm, clip, scale, offset, goal, hover, task, ints, out_f, out_i, s, cmds,
             sp):  # fmt: skip
    """Env ``n``'s first episode (the module docstring); results into column n of the outs."""
    a_dim = offset.shape[0]
    width = sizes.max()
    obs = np.zeros(sizes[0], np.float32)
    h0 = np.zeros(width, np.float64)
    h1 = np.zeros(width, np.float64)
    act = np.zeros(a_dim, np.float64)
    prev = np.zeros(a_dim, np.float32)
    terms = np.zeros(len(REWARD_TERMS), np.float64)
    crash, precision_w, radius = task[3], task[4], task[6]
    layout, max_steps, settle = ints[0], ints[1], ints[2]
    ret = np.float32(0.0)
    err_sum, settled_sum, settled_n = 0.0, 0.0, 0.0
    for k in range(max_steps):
        _observe(x, n, goal, prev, hover, layout, obs)
        _forward(sizes, flat, norm, clip, obs, h0, h1, act)
        for j in range(a_dim):
            sp[0, j] = (np.float32(act[j]) + offset[j]) * scale[n, j]
        env_step(n, 0, p, pc, c, d, x, flags, tick, keys, rate, sp, mode, cdt, phys, iphys,
                 imu, cmds, s)  # fmt: skip
        # the task's terms (PositionTask): diverged, crashed, too_far, below, tilted
        diverged, crashed, too_far, below, tilted = _end_terms(x, n, goal, flags, task)
        terminated = diverged or crashed or too_far or below or tilted
        truncated = (not terminated) and k + 1 >= max_steps  # the env's StepLimit
        # the reward (PositionTask.reward_terms, summed as PositionTask._reward sums them)
        _reward_terms(x, n, goal, act, prev, terminated, task, terms)
        rew = terms[0] + terms[1] + terms[2] + terms[3]
        if precision_w > 0:
            rew += terms[4]
        if terminated:
            rew += terms[5]
        if np.isnan(rew):
            rew = crash
        e0, e1, e2 = goal[n, 0] - x[0, n], goal[n, 1] - x[1, n], goal[n, 2] - x[2, n]
        err = math.sqrt(e0 * e0 + e1 * e1 + e2 * e2)
        speed = math.sqrt(x[3, n] ** 2 + x[4, n] ** 2 + x[5, n] ** 2)
        ret = np.float32(ret + np.float32(rew))
        # tracking error (PositionTask._tracking), one goal per episode
        err_sum += err
        if k + 1 >= settle:
            settled_sum += err
            settled_n += 1.0
        for j in range(a_dim):
            prev[j] = np.float32(act[j])
        if terminated or truncated:
            out_f[0, n] = ret
            out_i[0, n] = k + 1
            out_i[1, n] = truncated and err < radius and speed < 0.5
            out_f[1, n] = math.inf if np.isnan(err) else err
            out_f[2, n] = err_sum / (k + 1) if truncated else math.nan
            has = truncated and settled_n > 0
            out_f[3, n] = settled_sum / settled_n if has else math.nan
            return


@jit
def _end_terms(x, n, goal, flags, task):
    """PositionTask's end conditions for env ``n`` of the state ``x`` (K, N) and its
    [landed, crashed, diverged] ``flags`` (3, N), in its terms' order: (diverged, crashed,
    too_far, below, tilted). ``task``: [max_distance, min_height, cos(max_tilt), ...]."""
    e0, e1, e2 = goal[n, 0] - x[0, n], goal[n, 1] - x[1, n], goal[n, 2] - x[2, n]
    err = math.sqrt(e0 * e0 + e1 * e1 + e2 * e2)
    finite = np.isfinite(x[0, n]) and np.isfinite(x[1, n]) and np.isfinite(x[2, n])
    qx, qy = x[7, n], x[8, n]
    r22 = 1 - 2 * (qx * qx + qy * qy)
    diverged = bool(flags[2, n]) or not finite
    return diverged, bool(flags[1, n]), err > task[0], x[2, n] < task[1], r22 < task[2]


@jit
def _reward_terms(x, n, goal, act, prev, terminated, task, out):
    """:meth:`PositionTask.reward_terms` of env ``n`` into ``out`` (:data:`REWARD_TERMS`
    order), for the action ``act`` (rounded to float32 as the env holds it) after ``prev``.
    ``task``: [.., .., .., crash_penalty, precision_weight, precision_scale, ..]."""
    e0, e1, e2 = goal[n, 0] - x[0, n], goal[n, 1] - x[1, n], goal[n, 2] - x[2, n]
    err = math.sqrt(e0 * e0 + e1 * e1 + e2 * e2)
    speed = math.sqrt(x[3, n] ** 2 + x[4, n] ** 2 + x[5, n] ** 2)
    om = math.sqrt(x[10, n] ** 2 + x[11, n] ** 2 + x[12, n] ** 2)
    change = 0.0
    for j in range(act.shape[0]):
        dj = np.float32(act[j]) - prev[j]
        change += dj * dj
    close = math.exp(-err)
    out[0] = close
    out[1] = 0.5 * close * math.exp(-speed)
    out[2] = -0.02 * om
    out[3] = -0.05 * change
    out[4] = task[4] * math.exp(-err / task[5])
    out[5] = task[3] if terminated else 0.0


@jit
def episodes(p, pc, c, d, x, tick, flags, keys, rate, imu, mode, cdt, phys, iphys, sizes, flat,
              norm, clip, scale, offset, goal, hover, task, ints, out_f, out_i):  # fmt: skip
    """Every env's first episode, one env after another (envs never interact)."""
    r = ints[3]
    s = _scratch(13 + r, r, x)
    cmds = np.empty((1, x.shape[1], r), x.dtype)
    sp = np.empty((1, offset.shape[0]), x.dtype)
    for n in range(x.shape[1]):
        _fly_env(n, p, pc, c, d, x, tick, flags, keys, rate, imu, mode, cdt, phys, iphys,
                 sizes, flat, norm, clip, scale, offset, goal, hover, task, ints, out_f, out_i,
                 s, cmds, sp)  # fmt: skip


@numba.njit(cache=True, nogil=True, fastmath=False, error_model="numpy", parallel=True)
def episodes_parallel(p, pc, c, d, x, tick, flags, keys, rate, imu, mode, cdt, phys, iphys, sizes,
                       flat, norm, clip, scale, offset, goal, hover, task, ints, out_f,
                       out_i):  # fmt: skip
    """:func:`episodes` with the envs split over numba's threads (results do not depend on
    the thread count: every env's episode is its own)."""
    r = ints[3]
    n_env = x.shape[1]
    cmds = np.empty((1, n_env, r), x.dtype)
    nb = (n_env + BLOCK - 1) // BLOCK
    for b in numba.prange(nb):
        s = _scratch(13 + r, r, x)
        sp = np.empty((1, offset.shape[0]), x.dtype)
        for n in range(b * BLOCK, min((b + 1) * BLOCK, n_env)):
            _fly_env(n, p, pc, c, d, x, tick, flags, keys, rate, imu, mode, cdt, phys, iphys,
                     sizes, flat, norm, clip, scale, offset, goal, hover, task, ints, out_f,
                     out_i, s, cmds, sp)  # fmt: skip


__all__ = [
    "BLOCK",
    "END_TERMS",
    "LAYOUT_CODES",
    "PARALLEL_MIN",
    "REWARD_TERMS",
    "episodes",
    "episodes_parallel",
]
