"""The rigid-body physics step as one Warp kernel: the large-batch GPU fast path of ``rollout``.

One thread per env runs all ``substeps`` with the state in registers
(:mod:`volary.dynamics._warp_physics`), reading the packed structure-of-arrays buffers of
:mod:`volary.dynamics.compiled` in place through ``wp.from_torch`` (no copy, any CUDA device or
the CPU). On a GPU the eager step is memory-bound at ~633 bytes per env-step; this kernel reads
and writes each buffer once per call, so ``substeps`` steps cost about what one does.

Warp also runs on the CPU (one thread, compiled with its bundled clang), which is how the parity
tests run without a GPU (``tests/test_numba_step.py``, parametrized over both fused kernels,
and ``tests/test_warp_step.py``): float32 within 1e-5 and float64 within 1e-12 of the eager
reference over 100 steps with noise, gusts, wind and ground contact. Warp is
imported on first use (``pip install volary[warp]``); each (dtype, rotor count, integrator,
noise, ground) combination compiles once and is cached on disk by Warp.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from volary.dynamics.step import DynamicsConfig
from volary.errors import ConfigError, MissingDependencyError
from volary.math.integrators import Integrator


def _warp() -> Any:
    """The warp module, initialized once."""
    try:
        import warp as wp
    except ImportError as e:
        raise MissingDependencyError("warp-lang", "warp") from e
    wp.init()
    return wp


def _wp_device(t: Tensor) -> str:
    return "cpu" if t.device.type == "cpu" else f"cuda:{t.device.index or 0}"


class WarpRollout:
    """``run(pbuf, dbuf, xbuf, command, tick, flags, keys, out=None) -> (x, tick, flags)``:
    ``substeps`` steps of ``cfg`` in one kernel launch on SoA buffers (``compiled._soa_rollout``'s
    signature, but the command stays ``(N, R)``). Results go to new buffers, or to ``out`` =
    (x, tick, flags), which may be the inputs themselves (in place)."""

    def __init__(self, cfg: DynamicsConfig, substeps: int, aero: bool = False) -> None:
        self.wp = _warp()
        self.cfg, self.substeps, self.aero = cfg, substeps, aero
        self.rk4 = Integrator(cfg.integrator) == Integrator.RK4
        self.kernels: dict[tuple, Any] = {}

    def kernel(self, dtype: torch.dtype, n_rotors: int) -> Any:
        key = (dtype, n_rotors)
        if key not in self.kernels:
            import volary.dynamics._warp_physics as _warp_physics

            if dtype not in (torch.float32, torch.float64):
                raise ConfigError(f"compile='warp': expected float32 or float64, got {dtype}")
            scalar = self.wp.float32 if dtype == torch.float32 else self.wp.float64
            cfg = self.cfg
            self.kernels[key] = _warp_physics.build(
                scalar, n_rotors, self.rk4, bool(cfg.stochastic), bool(cfg.ground), self.aero
            )
        return self.kernels[key]

    def __call__(
        self, *buffers: Tensor, out: tuple[Tensor, Tensor, Tensor] | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """``buffers`` = (pbuf, dbuf, xbuf, command, tick, flags, keys), as the other SoA
        rollouts take them."""
        pbuf, dbuf, xbuf, command, tick, flags, keys = buffers
        wp, cfg = self.wp, self.cfg
        n, r = command.shape
        dtype = xbuf.dtype
        if out is None:
            out = (torch.empty_like(xbuf), torch.empty_like(tick), torch.empty_like(flags))
        u = command if command.dtype == dtype else command.to(dtype)
        arrays = [
            wp.from_torch(a) for a in (pbuf, dbuf, u, xbuf, tick, flags, keys.to(torch.int64), *out)
        ]
        stream = None
        if xbuf.device.type == "cuda":  # after the torch work queued before it, like a torch op
            stream = wp.stream_from_torch(torch.cuda.current_stream(xbuf.device))
        wp.launch(
            self.kernel(dtype, r),
            dim=n,
            inputs=[
                *arrays,
                float(cfg.dt),
                float(cfg.ground_height),
                float(cfg.crash_speed),
                int(self.substeps),
            ],
            device=_wp_device(xbuf),
            stream=stream,
        )
        return out


def soa_rollout(cfg: DynamicsConfig, substeps: int, aero: bool = False) -> Callable:
    """The Warp kernel as a ``compiled._SoAStepper`` function (new output buffers per call);
    ``aero``: with the rotor aerodynamics (aero.py)."""
    return WarpRollout(cfg, substeps, aero)
