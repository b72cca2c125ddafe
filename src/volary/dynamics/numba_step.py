"""The rigid-body physics step as a numba kernel: the small-batch CPU fast path of ``rollout``.

At a handful of envs, a torch step is all dispatch overhead (tens of microseconds per op
graph), whatever the compiler. Here the same equations as :mod:`volary.dynamics.step` run as a
scalar loop, env by env, substep by substep, inside one machine-code call, on the same
structure-of-arrays buffers ``(K, N)`` as the inductor path (:mod:`volary.dynamics.compiled`
packs them). The kernels live in :mod:`volary.dynamics.numba_kernels` (equations listed there).

Parity with the reference (``tests/test_numba_step.py``): stage values are rounded to the
buffer dtype like torch's, but scalar temporaries are float64, so float32 results agree to
float32 rounding, not bit for bit. ``numba`` is imported on first use; the kernels compile
once per dtype and are cached on disk by numba, so later processes load them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from volary.dynamics.step import DynamicsConfig
from volary.errors import ConfigError, MissingDependencyError
from volary.math.integrators import Integrator

LINE = 64  # bytes in a cache line
PAD_MIN = 1024  # bytes in a row of a kernel buffer from which rows are padded (see padded)


def _kernels() -> Callable:
    """Import (and so compile, or load from numba's disk cache) the in-place physics kernel."""
    try:
        import volary.dynamics.numba_kernels as numba_kernels
    except ImportError as e:  # pragma: no cover - numba is a core dependency
        raise MissingDependencyError("numba", "fast") from e
    return numba_kernels.advance_all


def padded(a: np.ndarray) -> np.ndarray:
    """A (K, N) copy of ``a`` for the kernels: from ``PAD_MIN`` bytes a row, its rows are N
    rounded up to an odd number of cache lines apart.

    The kernels read one env's K values down a column. With the rows N * itemsize bytes apart
    and N a power of two, those K addresses fall in the same few cache sets and evict each
    other: the physics kernel ran 0.80 M substeps/s at N = 4096 against 1.67 M at N = 4000, the
    hover env 135 k env-steps/s against 218 k. An odd number of lines spreads them over all
    sets. Shorter rows stay contiguous: the whole buffer is in L1 there, and a padded copy
    costs a microsecond, a twentieth of a one-vehicle control step. (A kernel is compiled
    once for each layout, contiguous and strided.)"""
    k, n = a.shape
    if n * a.itemsize < PAD_MIN:
        return a.copy()
    lines = -(-n * a.itemsize // LINE)
    lines += 1 - lines % 2
    out = np.empty((k, lines * LINE // a.itemsize), a.dtype)[:, :n]
    out[...] = a
    return out


def copy_padded(a: np.ndarray) -> np.ndarray:
    """A copy of an array made by :func:`padded`, in the same layout (a padded one is copied
    as its whole buffer in one go: a third of :func:`padded`'s cost)."""
    return a.copy() if a.base is None else a.base.copy()[:, : a.shape[1]]


def physics_constants(cfg: DynamicsConfig, substeps: int) -> tuple[np.ndarray, np.ndarray]:
    """The kernels' ``phys`` = [dt, ground height, crash speed] and ``iphys`` = [substeps, rk4,
    stochastic, ground] arrays of a physics config."""
    rk4 = Integrator(cfg.integrator) == Integrator.RK4
    phys = np.array([cfg.dt, cfg.ground_height, cfg.crash_speed], dtype=np.float64)
    iphys = np.array([substeps, rk4, cfg.stochastic, cfg.ground], dtype=np.int64)
    return phys, iphys


class _NumpyViews:
    """``tensor.numpy()`` of recently seen tensors: parameters, disturbances and keys are the
    same tensors call after call, and the state passed in is usually the last call's output
    (``.numpy()`` costs about half a microsecond, a tenth of a small step). With ``make``, the
    array kept is ``make(t.numpy())``, a copy: only for buffers that are replaced, never written,
    when they change (``compiled._Cached``'s)."""

    SIZE = 8

    def __init__(self, make: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        self.items: list[tuple[Tensor, np.ndarray]] = []
        self.make = make

    def get(self, t: Tensor) -> np.ndarray:
        for k, a in self.items:
            if k is t:
                return a
        a = t.numpy() if self.make is None else self.make(t.numpy())
        self.put(t, a)
        return a

    def put(self, t: Tensor, a: np.ndarray) -> None:
        self.items = [(t, a), *self.items[: self.SIZE - 1]]


def soa_rollout(cfg: DynamicsConfig, substeps: int) -> Callable:
    """``run(pbuf, dbuf, xbuf, command, tick, flags, keys) -> (x, tick, flags)`` on CPU SoA
    buffers (``compiled._soa_rollout``'s signature, but the command stays ``(N, R)``),
    ``substeps`` steps in one kernel call."""
    kernel = _kernels()
    phys, iphys = physics_constants(cfg, substeps)
    views, constants = _NumpyViews(), _NumpyViews(padded)

    def run(
        pbuf: Tensor,
        dbuf: Tensor,
        xbuf: Tensor,
        command: Tensor,
        tick: Tensor,
        flags: Tensor,
        keys: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor]:
        if xbuf.device.type != "cpu":
            raise ConfigError(f"compile='numba': expected CPU tensors, got {xbuf.device}")
        g, pad = views.get, constants.get
        x = padded(g(xbuf))  # the kernel advances copies in place: the inputs stay as they were
        t, fl = g(tick).copy(), g(flags).copy()
        kernel(pad(pbuf), pad(dbuf), x, g(command), t, fl, g(keys), phys, iphys)
        out = (x, t, fl)
        xt, tt, ft = (torch.from_numpy(a) for a in out)
        for tensor, array in zip((xt, tt, ft), out, strict=True):
            views.put(tensor, array)
        return xt, tt, ft

    return run
