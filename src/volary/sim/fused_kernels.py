"""The closed loop as numba kernels: controller, physics substeps and IMU of every control step
of a horizon in one call (the CPU fast path of ``Simulator.step`` and ``Simulator.run``).

Per control step k and env n, exactly the order of ``Simulator.step``: the built-in control law
(:func:`volary.control.numba_laws.command`) on the state at the start of the period, command
sanitizing and clamping, ``substeps`` physics steps with the command held
(:func:`volary.dynamics.numba_kernels.advance`), then the IMU on the period's finite-difference
acceleration (:func:`volary.sensors.numba_imu.imu_update`). The loop runs steps outside, envs
inside, so with ``stop`` set it returns after the first step that left an env diverged (the
Simulator resets those envs in torch, as its step would, and calls again for the rest).

``closed_loop`` runs envs in one thread; ``closed_loop_parallel`` splits them into blocks over
numba's threads (envs never interact, so results do not depend on the thread count). Both are
module-level ``cache=True`` functions: compiled once per dtype, then loaded from disk.
Importing this module imports numba.
"""

from __future__ import annotations

import numba
import numpy as np

from volary.control import numba_laws
from volary.control.numba_laws import command
from volary.dynamics import numba_kernels
from volary.dynamics.numba_kernels import advance, jit, make_scratch, sanitize
from volary.numba_cache import guard
from volary.sensors import numba_imu
from volary.sensors.numba_imu import imu_update

NUMBA_SOURCES = guard(__file__, numba_kernels, numba_laws, numba_imu)

BLOCK = 64  # envs per parallel work item


@jit
def _scratch(nk, r, like):
    """Per-thread scratch: physics (make_scratch), state copy, two commands, IMU draws."""
    dt = like.dtype
    cc = np.empty(2, dt)
    cc[0], cc[1] = -2.0, 2.0 * np.pi
    return (
        make_scratch(nk, like),
        np.empty(nk, dt),
        np.empty(r, dt),
        np.empty(r, dt),
        np.empty(12, dt),
        np.empty(12, dt),
        cc,
        np.empty(3, np.float64),
    )


@jit
def _env_step(n, k, p, pc, c, d, x, flags, tick, keys, rate, sp, mode, cdt, phys, iphys, imu, cmds,
              s):  # fmt: skip
    """Control step k of env n, in place on the state buffers; the command goes to cmds[k, n].
    ``p``: the vehicle's parameters (physics); ``pc``: the controller's model of them (mass,
    inertia, rotor constants; the same array unless the controller was built for other
    parameters: the torch controller, the reference, uses its own)."""
    phys_scr, xc, cmd, cmd2, u, nz, cc, acc = s
    ib, iclock, itick, ikeys, icfg = imu
    r = cmd.shape[0]
    nk = 13 + r
    for i in range(nk):
        xc[i] = x[i, n]
    command(pc, c, n, r, xc, sp[n if sp.shape[0] > 1 else 0], rate[n], mode, cdt, cmd)
    for j in range(r):
        cmds[k, n, j] = cmd[j]
    bad = sanitize(p, n, r, cmd, cmd2)
    advance(p, d, x, flags, tick, keys, n, r, cmd2, bad, phys, iphys, phys_scr)
    if ib.shape[1] > 0:
        for i in range(3):
            acc[i] = (x[3 + i, n] - xc[3 + i]) / cdt
        q = (x[6, n], x[7, n], x[8, n], x[9, n])
        om = (x[10, n], x[11, n], x[12, n])
        imu_update(ib, iclock, itick, ikeys[n], n, q, om, acc, cdt, icfg, u, cc, nz)


env_step = _env_step  # the public name, for kernels that build their own loop around it


@jit
def _record(k, x, flags, rec_x, rec_flags):
    if rec_x.shape[0] > 0:
        rec_x[k] = x
        rec_flags[k] = flags


@jit
def _any_diverged(flags):
    for n in range(flags.shape[1]):
        if flags[2, n]:
            return True
    return False


@jit
def closed_loop(p, pc, c, d, x, tick, flags, keys, rate, sp, mode, cdt, phys, iphys, imu, steps,
                stop, cmds, rec_x, rec_flags):  # fmt: skip
    """``steps`` control steps of every env, in place on (x, tick, flags, rate, imu buffers);
    ``sp`` (T, N, S) with T = 1 (held) or ``steps`` and N = 1 (shared) or
    the env count. Returns the steps done (< steps when
    ``stop`` and an env diverged), times two, plus one when an env is diverged at the end."""
    r = cmds.shape[2]
    s = _scratch(13 + r, r, x)
    for k in range(steps):
        spk = sp[k if sp.shape[0] > 1 else 0]
        for n in range(x.shape[1]):
            _env_step(n, k, p, pc, c, d, x, flags, tick, keys, rate, spk, mode, cdt, phys,
                      iphys, imu, cmds, s)  # fmt: skip
        _record(k, x, flags, rec_x, rec_flags)
        if stop and _any_diverged(flags):
            return 2 * (k + 1) + 1
    return 2 * steps + _any_diverged(flags)


@jit
def one_step(p, pc, c, d, x, tick, flags, keys, rate, sp, mode, cdt, phys, iphys, imu, cmds):
    """``closed_loop`` for one unrecorded step with the setpoint ``sp`` (1, N or 1, S): the
    same :func:`_env_step` per env, four arguments fewer to convert (``Simulator.step``'s lane
    below ``PARALLEL_MIN`` envs). Returns whether an env is diverged. (Defined here, beside
    the kernels it calls: numba's disk cache tracks the file a function is defined in.)"""
    r = cmds.shape[2]
    s = _scratch(13 + r, r, x)
    spk = sp[0]
    for n in range(x.shape[1]):
        _env_step(n, 0, p, pc, c, d, x, flags, tick, keys, rate, spk, mode, cdt, phys, iphys,
                  imu, cmds, s)  # fmt: skip
    return _any_diverged(flags)


@numba.njit(cache=True, nogil=True, fastmath=False, error_model="numpy", parallel=True)
def closed_loop_parallel(p, pc, c, d, x, tick, flags, keys, rate, sp, mode, cdt, phys, iphys,
                         imu, steps, stop, cmds, rec_x, rec_flags):  # fmt: skip
    """:func:`closed_loop` with the envs of each step split into blocks over numba's threads."""
    r = cmds.shape[2]
    n_env = x.shape[1]
    nb = (n_env + BLOCK - 1) // BLOCK
    for k in range(steps):
        spk = sp[k if sp.shape[0] > 1 else 0]
        for b in numba.prange(nb):
            s = _scratch(13 + r, r, x)
            for n in range(b * BLOCK, min((b + 1) * BLOCK, n_env)):
                _env_step(n, k, p, pc, c, d, x, flags, tick, keys, rate, spk, mode, cdt,
                          phys, iphys, imu, cmds, s)  # fmt: skip
        _record(k, x, flags, rec_x, rec_flags)
        if stop and _any_diverged(flags):
            return 2 * (k + 1) + 1
    return 2 * steps + _any_diverged(flags)
