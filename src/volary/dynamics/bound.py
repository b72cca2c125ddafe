"""The physics of fixed vehicles stepped in place: ``bind_stepper``.

:func:`volary.dynamics.compiled.make_stepper` is functional, ``state = step(params, state,
command, dist, keys)``: every call packs or reuses buffers and hands back a new
``MultirotorState``. At one vehicle that bookkeeping (tens of microseconds of Python and torch
calls) costs ten times the physics. A :class:`BoundStepper` is bound once to its vehicles'
parameters, disturbance and noise keys and owns their state as packed buffers, the way a
simulator written in C++ owns its state structs (l2f's ``step(env, params, state, action,
next, rng)``, MuJoCo's ``mj_step(model, data)``): ``step(command)`` advances that state in place
and returns nothing; ``state`` reads it back.

- numba backend (the CPU default below ``INDUCTOR_MIN`` envs): ``step`` is one call of
  :func:`volary.dynamics.numba_kernels.advance_all` on the packed buffers (no allocation, no
  torch call); ``state`` is a snapshot (copies of the buffers) whose tensors are made on first
  access (:class:`~volary.dynamics.state.LazyState`).
- inductor, warp and eager: ``step`` runs ``make_stepper``'s stepper and keeps its output
  (every call makes new tensors, so ``state`` needs no copy).

Same equations, same results as ``rollout`` with ``substeps`` steps per call (parity:
``tests/test_bound_stepper.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from volary.dynamics.compiled import (
    _DIST_FIELDS,
    _PARAM_FIELDS,
    _Cached,
    auto_backend,
    make_stepper,
    pack_state,
)
from volary.dynamics.numba_step import padded, physics_constants
from volary.dynamics.params import VehicleParams
from volary.dynamics.state import MultirotorState, field_rows, lazy_state
from volary.dynamics.step import Disturbance, DynamicsConfig, Model
from volary.errors import ConfigError


class BoundStepper:
    """``substeps`` physics steps per :meth:`step` of the vehicles it was bound to (see the
    module docstring); build it with :func:`bind_stepper`."""

    def __init__(
        self,
        cfg: DynamicsConfig,
        params: VehicleParams,
        state: MultirotorState,
        dist: Disturbance,
        keys: Tensor,
        substeps: int,
        backend: str,
    ) -> None:
        self.cfg, self.params, self.keys, self.substeps = cfg, params, keys, substeps
        self.backend = backend
        self.n, self.r = params.n_envs, params.n_rotors
        self._cmd_src: Any = None  # the last command object and its kernel view
        self._cmd: Any = None
        if backend == "numba":
            import volary.dynamics.numba_kernels as numba_kernels

            self._kernel = numba_kernels.advance_all
            self._p = padded(_Cached(_PARAM_FIELDS).get(params).numpy())
            self._keys = keys.numpy()
            self._phys, self._iphys = physics_constants(cfg, substeps)
            self._rows = field_rows(self.r)
            self._dtype = self._p.dtype
        else:
            self._fn = make_stepper(cfg, substeps, compile=backend)
        self.disturbance = dist
        self.state = state

    # ---- state and disturbance ------------------------------------------------------------
    @property
    def state(self) -> MultirotorState:
        """The vehicles' state now: a snapshot, later steps do not change it."""
        if self.backend != "numba":
            return self._state
        return lazy_state(self._x.copy(), self._tick.copy(), self._flags.copy(), self._rows)

    @state.setter
    def state(self, state: MultirotorState) -> None:
        _check_state(state, self.params)
        if self.backend != "numba":
            self._state = state
            return
        x, flags = pack_state(state)  # new buffers: the caller's tensors are not aliased
        self._x, self._flags = padded(x.numpy()), flags.numpy()
        self._tick = state.tick.numpy().copy()

    @property
    def disturbance(self) -> Disturbance:
        """Wind, gusts and external force/moment; assign a new one to change them."""
        return self._dist

    @disturbance.setter
    def disturbance(self, dist: Disturbance) -> None:
        if not isinstance(dist, Disturbance) or dist.wind.shape[0] != self.n:
            raise ConfigError(f"dist: expected a Disturbance of {self.n} envs, got {dist!r:.80}")
        self._dist = dist
        if self.backend == "numba":
            self._d = padded(_Cached(_DIST_FIELDS).get(dist).numpy())

    # ---- stepping -------------------------------------------------------------------------
    def step(self, command: Tensor | np.ndarray) -> None:
        """``substeps`` physics steps with the rotor-speed command ``command`` (N, R) rad/s
        held; the state advances in place."""
        if self.backend != "numba":
            if command is not self._cmd_src:
                self._cmd = self._command(command)
                self._cmd_src = command
            self._state = self._fn(self.params, self._state, self._cmd, self._dist, self.keys)
            return
        if command is not self._cmd_src:
            host = self._command(command)
            self._cmd = np.ascontiguousarray(host, dtype=self._dtype)
            # an unconverted array is the caller's memory: in-place writes to it are seen
            self._cmd_src = command if self._cmd is host else None
        self._kernel(self._p, self._d, self._x, self._cmd, self._tick, self._flags, self._keys,
                     self._phys, self._iphys)  # fmt: skip

    def _command(self, command: Any) -> Any:
        """``command`` checked (shape (N, R), numeric, on the vehicles' device) and in the form
        the backend takes: a host array for numba, else a tensor of the vehicles' dtype."""
        if not isinstance(command, (Tensor, np.ndarray)):
            raise ConfigError(
                f"command: expected a tensor or numpy array of shape ({self.n}, {self.r}), "
                f"got {type(command).__name__}"
            )
        if tuple(command.shape) != (self.n, self.r):
            raise ConfigError(
                f"command: expected shape ({self.n}, {self.r}) (envs, rotors), "
                f"got {tuple(command.shape)}"
            )
        if self.backend == "numba":
            return _host(command)
        return torch.as_tensor(command, device=self.params.device, dtype=self.params.dtype)


def _host(command: Any) -> np.ndarray:
    if isinstance(command, Tensor):
        if command.device.type != "cpu":
            raise ConfigError(f"command: expected a CPU tensor (numba), got {command.device}")
        return command.detach().numpy()
    return command


def _check_state(state: Any, params: VehicleParams) -> None:
    if not isinstance(state, MultirotorState):
        raise ConfigError(f"state: expected a MultirotorState, got {type(state).__name__}")
    want = (params.n_envs, params.n_rotors)
    got = (state.n_envs, int(state.rotor_speed.shape[-1]))
    if got != want:
        raise ConfigError(f"state: expected {want[0]} envs of {want[1]} rotors, got {got}")


def bind_stepper(
    cfg: DynamicsConfig,
    params: VehicleParams,
    state: MultirotorState,
    *,
    dist: Disturbance | None = None,
    keys: Tensor | None = None,
    seed: int = 0,
    substeps: int = 1,
    compile: bool | str = "auto",
) -> BoundStepper:
    """A :class:`BoundStepper` of ``params`` starting from ``state``.

    ``dist`` defaults to no wind or disturbance; ``keys`` (N,) int64 to
    ``env_keys(seed, arange(N))``, as a Simulator makes them. ``compile`` is ``make_stepper``'s
    (``False``/``"eager"``, ``True``/``"inductor"``, ``"numba"``) or ``"auto"``: numba on the CPU
    below ``INDUCTOR_MIN`` envs, inductor from there, eager for the thrust-rate model and off
    the CPU. Parameters and keys are read once, here; bind again after changing them."""
    from volary.math.random import env_keys

    if not isinstance(params, VehicleParams):
        raise ConfigError(f"params: expected VehicleParams, got {type(params).__name__}")
    if not isinstance(substeps, int) or substeps < 1:
        raise ConfigError(f"substeps: expected an int >= 1, got {substeps!r}")
    n, device = params.n_envs, params.device
    if compile == "auto":
        backend = auto_backend(device, cfg.model, n)
    else:
        backend = {True: "inductor", False: "eager"}.get(compile, compile)  # type: ignore[arg-type]
        if backend not in ("eager", "inductor", "numba", "warp"):
            raise ConfigError(
                f"compile: expected 'auto', 'eager', 'inductor', 'numba', 'warp', True or False, "
                f"got {compile!r}"
            )
    on_cpu = torch.device(device).type == "cpu"
    if backend == "numba" and not (on_cpu and Model(cfg.model) == Model.RIGID_BODY):
        raise ConfigError("compile='numba': expected the rigid_body model on the CPU")
    if dist is None:
        dist = Disturbance.create(n, device=device, dtype=params.dtype)
    if keys is None:
        keys = env_keys(seed, torch.arange(n, device=device))
    elif tuple(keys.shape) != (n,) or keys.dtype != torch.int64:
        raise ConfigError(f"keys: expected ({n},) int64, got {tuple(keys.shape)} {keys.dtype}")
    return BoundStepper(cfg, params, state, dist, keys, substeps, backend)
