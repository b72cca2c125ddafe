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


def _kernels() -> Callable:
    """Import (and so compile, or load from numba's disk cache) the rollout kernel."""
    try:
        from volary.dynamics import numba_kernels
    except ImportError as e:  # pragma: no cover - numba is a core dependency
        raise MissingDependencyError("numba", "fast") from e
    return numba_kernels.rollout


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
    (``.numpy()`` costs about half a microsecond, a tenth of a small step)."""

    SIZE = 8

    def __init__(self) -> None:
        self.items: list[tuple[Tensor, np.ndarray]] = []

    def get(self, t: Tensor) -> np.ndarray:
        for k, a in self.items:
            if k is t:
                return a
        a = t.numpy()
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
    views = _NumpyViews()

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
        g = views.get
        out = kernel(g(pbuf), g(dbuf), g(xbuf), g(command), g(tick), g(flags), g(keys), phys, iphys)
        x, t, fl = (torch.from_numpy(a) for a in out)
        for tensor, array in zip((x, t, fl), out, strict=True):
            views.put(tensor, array)
        return x, t, fl

    return run
