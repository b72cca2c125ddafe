"""The fused closed loop: a Simulator's controller, physics and IMU in one numba call.

``FusedLoop(sim)`` serves ``Simulator.step`` and ``Simulator.run`` when the backend is
``"numba"`` (the CPU default), the controller is a built-in :class:`MultirotorController` and the
model is the rigid body. A control step is one kernel call; ``run`` with a held setpoint or a
setpoint schedule is one call for the whole horizon (:mod:`volary.sim.fused_kernels`). The
torch code stays the reference: ``tests/test_fused.py`` checks every control mode against the
eager Simulator in float32 and float64.

What stays in torch, on the Simulator: resets (including the divergence reset, which the kernel
hands back by stopping after the step that diverged), disturbances, recording. The controller's
rate-loop state and the IMU's state live in the torch objects between calls; the loop reads them
back only when they were replaced (a reset), so a step costs one pack-free kernel call plus a
handful of tensor views.

Threads: above ``PARALLEL_MIN`` envs the kernel splits envs over numba's threads, as many as
``torch.get_num_threads()`` (one knob for both), which ``Simulator.step`` and ``run`` lower for
the call by the cores other processes are busy on (:mod:`volary.cpu`, measured while stepping;
one thread runs the serial kernel);
results do not depend on the thread count.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch
from torch.utils.weak import WeakIdKeyDictionary

from volary.control.rate import RateLoopState
from volary.dynamics.compiled import (
    _DIST_FIELDS,
    _PARAM_FIELDS,
    _Cached,
    _pack,
    compile_graph,
    pack_state,
    signature,
)
from volary.dynamics.numba_step import copy_padded, padded, physics_constants
from volary.dynamics.state import LazyState, MultirotorState, field_rows, lazy_state
from volary.dynamics.step import OnDivergence
from volary.sensors.imu import ImuReading

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from torch import Tensor

    from volary.control.controller import MultirotorController
    from volary.dynamics.params import VehicleParams
    from volary.dynamics.step import Disturbance, DynamicsConfig
    from volary.sensors.imu import Imu
    from volary.types import Controller


class _Substeps(Protocol):
    @property
    def substeps(self) -> int: ...


class LoopHost(Protocol):
    """What a closed loop here reads and writes of the :class:`~volary.sim.simulator.Simulator`
    it serves. The Simulator imports this module and hands itself in, so this module never
    imports the Simulator back."""

    state: MultirotorState
    imu_reading: ImuReading | None
    _params: VehicleParams  # read behind the ``params`` property where a call would cost

    @property
    def params(self) -> VehicleParams: ...
    @property
    def controller(self) -> Controller: ...
    @property
    def config(self) -> _Substeps: ...
    @property
    def dynamics(self) -> DynamicsConfig: ...
    @property
    def disturbance(self) -> Disturbance: ...
    @property
    def keys(self) -> Tensor: ...
    @property
    def imu(self) -> Imu | None: ...
    @property
    def n_envs(self) -> int: ...
    @property
    def dt(self) -> float: ...


_VERSION = attrgetter("_version")  # torch's in-place write counter
# tensor -> the tensor whose version counter it shares, for views that do not name it in _base
# (a dtype view: simulator._one_counter builds a few-env Simulator's objects so)
SHARED_COUNTERS: WeakIdKeyDictionary = WeakIdKeyDictionary()
_new = object.__new__
PARALLEL_MIN = 256  # envs; below, one thread (a parallel region costs ~10-20 us to start)


@dataclass
class LoopResult:
    """What a fused call produced: the commands (T, N, R) and, when recording, the states."""

    steps: int  # control steps done (fewer than asked when an env diverged and will be reset)
    commands: np.ndarray  # (T, N, R)
    rec_x: np.ndarray  # (T, K, N) or empty
    rec_flags: np.ndarray  # (T, 3, N) or empty


@dataclass
class LoopBuffers:
    """The arguments of :func:`~volary.sim.fused_kernels.env_step` besides the env, the step,
    the setpoint, the command output and the scratch (:meth:`FusedLoop.buffers`)."""

    p: np.ndarray  # airframe parameters (K_p, N), the physics'
    pc: np.ndarray  # the controller's model of them (the same array unless it was built for others)
    c: np.ndarray  # controller: allocation, limits, gains (K_c, N)
    d: np.ndarray  # disturbance (K_d, N)
    x: np.ndarray  # state (K, N), advanced in place
    tick: np.ndarray  # (N,) int64 physics ticks (the noise counter)
    flags: np.ndarray  # (3, N) bool [landed, crashed, diverged]
    keys: np.ndarray  # (N,) noise keys
    rate: np.ndarray  # (N, 10) rate-loop state (ctbr)
    imu: tuple  # IMU buffers (empty arrays without an IMU)
    mode: int  # control mode code
    cdt: float  # control period, s
    phys: np.ndarray  # physics constants
    iphys: np.ndarray  # integer physics constants


def supports(sim: LoopHost) -> bool:
    """Whether ``sim``'s loop can run fused: a built-in controller on the rigid body."""
    from volary.control.controller import MultirotorController
    from volary.dynamics.step import Model

    return type(sim.controller) is MultirotorController and sim.dynamics.model == Model.RIGID_BODY


class FusedLoop:
    """The numba closed loop of one Simulator (see the module docstring)."""

    def __init__(self, sim: LoopHost) -> None:
        import volary.sim.fused_kernels as fused_kernels
        from volary.control.numba_laws import MODE_CODES

        self.sim = sim
        self.ctrl: MultirotorController = sim.controller  # type: ignore[assignment]
        self.kernels = fused_kernels
        self.mode = MODE_CODES[sim.controller.mode]
        self.ctbr = sim.controller.mode == "ctbr"
        self.phys, self.iphys = physics_constants(sim.dynamics, sim.config.substeps)
        self.cdt = float(sim.dt)
        self.stop = sim.dynamics.on_divergence == OnDivergence.RESET
        self.r = sim.params.n_rotors
        self.params, self.dist = _Cached(_PARAM_FIELDS), _Cached(_DIST_FIELDS)
        self.ctrl_params = _Cached(_PARAM_FIELDS)
        self._last: tuple[LazyState, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._rate: tuple[RateLoopState, np.ndarray] | None = None
        self._consts: tuple | None = None
        self._base_counters: list | None = None  # _constants' counters but the disturbance's
        # (tensor, version, data_ptr, array) of the last tensor setpoint host_setpoint converted
        self.last_setpoint: tuple[Any, int, int, np.ndarray] | None = None
        # The serial kernel's compiled entry point for the argument types of the last advance(),
        # called directly (without numba's dispatch, a tenth of a one-vehicle step) while every
        # argument is known to have those types: see advance().
        self._entry: Any = None
        self._known = False
        self._imu_key: tuple[Any, int, int, np.ndarray] | None = None
        self.diverged = False  # whether the last call left an env diverged
        self.rows = field_rows(self.r)
        self.s = sim.controller.setpoint_size
        self._sp_shape, self._sp_view = (self.s,), (1, 1, self.s)  # one setpoint for all envs
        self.dtype = _np_dtype(sim.params.dtype)
        self._imu: tuple[tuple, np.ndarray, np.ndarray, np.ndarray] | None = None
        n, dt = sim.n_envs, self.dtype
        self._no_rate = np.zeros((n, 10), dt)
        self._no_imu = (np.zeros((12, 0), dt), np.zeros(0, dt), np.zeros(0, np.int64))
        self._no_rec = (np.zeros((0, 1, n), dt), np.zeros((0, 3, n), np.bool_))
        self._no_rec_x, self._no_rec_flags = self._no_rec
        self._no_imu_keys = np.zeros(0, np.int64)
        c = sim.imu.config if sim.imu is not None else None
        self._imu_cfg = np.array(
            [0.0] * 5
            if c is None
            else [
                c.accel_bias_random_walk,
                c.gyro_bias_random_walk,
                c.accel_noise_density,
                c.gyro_noise_density,
                c.rate_hz,
            ],
            dtype=np.float64,
        )
        self._no_imu_all = (*self._no_imu, self._no_imu_keys, self._imu_cfg)
        self._command = np.empty((1, n, self.r), dt)  # advance()'s command, overwritten
        self.serial = n < PARALLEL_MIN  # below, the serial kernel whatever the threads

    # ---- buffers --------------------------------------------------------------------------
    def use_controller(self, ctrl: MultirotorController) -> None:
        """Fly ``ctrl``, a built-in controller of this loop's mode, from the next step on
        (``Simulator.controller = ...``): its parameters, gains and rate-loop state."""
        self.ctrl, self._rate, self._consts = ctrl, None, None

    def _controller_buffer(self) -> np.ndarray:
        """(K_c, N) pseudo-inverse, thrust limit, actuation flag, gains (numba_laws layout),
        from the controller's own parameters, as the torch controller computes them."""
        p, g = self.ctrl.params, self.ctrl.gains
        n = p.n_envs
        cols = [
            p.alloc_pinv.reshape(n, -1),
            p.max_thrust[:, None],
            p.actuated.all(dim=-1).to(p.dtype)[:, None],
        ]
        cols += [getattr(g, name).reshape(n, w).to(p.dtype) for name, w in _gain_rows()]
        return padded(_pack(cols).numpy())

    def _state(self, state: MultirotorState) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fresh (x, tick, flags) arrays of ``state`` for the kernel to advance in place: copies
        of the last call's buffers while ``state`` is its unmodified output."""
        last = self._last
        if last is not None and state is last[0] and not state.modified():
            return copy_padded(last[1]), last[2].copy(), last[3].copy()
        self._known = False
        x, flags = pack_state(state)
        return padded(x.numpy()), state.tick.numpy().copy(), flags.numpy()

    def _rate_buffer(self) -> np.ndarray:
        if not self.ctbr:
            return self._no_rate
        s = self.ctrl.rate_state
        if self._rate is not None and self._rate[0] is s:
            return self._rate[1].copy()
        self._known = False
        fresh = s.fresh[:, None].to(s.rate.dtype)
        return torch.cat((s.rate, s.rate_dot, s.integral, fresh), 1).contiguous().numpy()

    def _imu_buffers(self) -> tuple:
        imu = self.sim.imu
        if imu is None:
            return self._no_imu_all
        last = self._imu
        if last is not None:
            ab, gb, reading, clock, tick = last[0]
            if (
                imu.accel_bias is ab
                and imu.gyro_bias is gb
                and imu.reading is reading
                and imu.clock is clock
                and imu.tick is tick
            ):
                _, ib, clock, tick = last
                return copy_padded(ib), clock.copy(), tick.copy(), self._imu_keys(), self._imu_cfg
        self._known = False
        r = imu.reading
        ib = padded(_pack([imu.accel_bias, imu.gyro_bias, r.accel, r.gyro]).numpy())
        clock = imu.clock.numpy().copy()
        return ib, clock, imu.tick.numpy().copy(), self._imu_keys(), self._imu_cfg

    def _imu_keys(self) -> np.ndarray:
        """The IMU's noise keys as an array, the same one while the tensor is the same object,
        version and storage (anything else may be another dtype: not a known type)."""
        keys, k = self.sim.imu.keys, self._imu_key
        if k is not None and keys is k[0] and keys._version == k[1] and keys.data_ptr() == k[2]:
            return k[3]
        self._known = False
        a = keys.numpy()
        self._imu_key = (keys, keys._version, keys.data_ptr(), a)
        return a

    # ---- the call -------------------------------------------------------------------------
    def _constants(self) -> tuple[np.ndarray, ...]:
        """(params, controller's params, controller, disturbance, noise keys) arrays; made
        anew when an object is replaced or a tensor of it modified in place (checked by
        identity and version counters: one read per counter, views of one buffer share theirs;
        ``set_`` and ``resize_`` count as modifications)."""
        sim, ctrl, c = self.sim, self.ctrl, self._consts
        if (
            c is not None
            and c[0] is sim._params
            and c[1] is ctrl.params
            and c[2] is ctrl.gains
            and c[4] is sim.keys
            and list(map(_VERSION, c[5])) == c[6]
        ):
            if c[3] is sim.disturbance:
                return c[7]
            if self._swap_disturbance(c):  # the disturbance alone was replaced
                return c[7]
        self._known = False
        p = padded(self.params.get(sim.params).numpy())
        own = ctrl.params is not sim.params  # a controller built for other parameters
        pc = padded(self.ctrl_params.get(ctrl.params).numpy()) if own else p
        dist = padded(self.dist.get(sim.disturbance).numpy())
        # the keys: a view, in-place writes show through
        arrays = (p, pc, self._controller_buffer(), dist, sim.keys.numpy())
        base = _counters(self._watched(dist=False))
        counters = None if base is None else _counters([*base, *self.dist.tensors])
        self._base_counters = base
        if counters is None:  # an inference tensor (no version counter): made every call
            self._consts = None
        else:
            key = (sim.params, ctrl.params, ctrl.gains, sim.disturbance, sim.keys)
            self._consts = (*key, counters, list(map(_VERSION, counters)), arrays)
        return arrays

    def _watched(self, dist: bool = True) -> list[torch.Tensor]:
        """Every tensor the kernel's constant arrays are made of (_controller_buffer reads
        three more parameters); ``dist=False``: all but the disturbance's."""
        sim, ctrl = self.sim, self.ctrl
        own = ctrl.params is not sim.params
        watched = [*self.params.tensors, *(self.dist.tensors if dist else ()), sim.keys]
        watched += [*self.ctrl_params.tensors] if own else []
        watched += [ctrl.params.alloc_pinv, ctrl.params.max_thrust, ctrl.params.actuated]
        watched += [getattr(ctrl.gains, f) for f, _ in _gain_rows()]
        return watched

    def _swap_disturbance(self, c: tuple) -> bool:
        """A new disturbance object and nothing else (a World's wake and surface, replaced every
        control period): its values are written into the array the kernel already reads, so
        every argument keeps its object and numba type and the step keeps skipping numba's
        dispatch (rebuilding cost ~1 ms a step at one env against ~0.1 ms for the whole step).
        False when the new one does not fit that array (then everything is made anew)."""
        sim = self.sim
        d_arr = c[7][3]
        new = self.dist.get(sim.disturbance).numpy()
        if new.shape != d_arr.shape or new.dtype != d_arr.dtype:
            return False
        d_arr[...] = new
        base = self._base_counters
        counters = None if base is None else _counters([*base, *self.dist.tensors])
        if counters is None:  # an inference tensor: no counter to watch
            return False
        self._consts = (*c[:3], sim.disturbance, *c[4:5], counters,
                        list(map(_VERSION, counters)), c[7])  # fmt: skip
        return True

    def host_setpoint(self, setpoint: Any) -> np.ndarray | None:
        """``setpoint`` as a (1, N or 1, S) host array without torch calls, or None when it is
        not a CPU tensor/array/list of shape (S,) or (N, S) (the caller then checks it). A tensor
        passed again unchanged (same object, version counter and storage) gives the same array
        back, of the one numba type every kept array has (:meth:`advance` relies on it)."""
        if isinstance(setpoint, torch.Tensor):
            c = self.last_setpoint
            if (
                c is not None
                and setpoint is c[0]
                and setpoint._version == c[1]
                and setpoint.data_ptr() == c[2]
            ):
                return c[3]
            if not setpoint.is_cpu or setpoint.requires_grad:
                return None
            a = setpoint.numpy()
            if a.dtype is self.dtype and a.shape == self._sp_shape and a.flags.c_contiguous:
                host = a.reshape(self._sp_view)  # a new tensor each step: no asarray, no copy
            else:
                host = self._host_array(a)
            if (
                host is not None
                and host.flags.aligned
                and host.flags.writeable
                and not setpoint.is_inference()  # no version counter to key the cache on
            ):  # a tensor's array is (dtype, 3 dims, C-contiguous, aligned, writeable): one type
                self.last_setpoint = (setpoint, setpoint._version, setpoint.data_ptr(), host)
            return host
        return self._host_array(setpoint)

    def _host_array(self, setpoint: Any) -> np.ndarray | None:
        try:
            a = np.asarray(setpoint, dtype=self.dtype)
        except (TypeError, ValueError):
            return None
        if a.shape == (self.s,) or a.shape == (self.sim.n_envs, self.s):
            return np.ascontiguousarray(a.reshape(1, -1, self.s))
        return None

    def buffers(self) -> LoopBuffers:
        """Fresh copies of everything :func:`~volary.sim.fused_kernels.env_step` reads and
        advances, from the Simulator's current state: for kernels that put their own logic
        (a task's observation, a policy, end conditions) around the control step. Hand the
        advanced buffers back with :meth:`publish`."""
        x, tick, flags = self._state(self.sim.state)
        p, pc, c, d, keys = self._constants()
        return LoopBuffers(p, pc, c, d, x, tick, flags, keys, self._rate_buffer(),
                           self._imu_buffers(), self.mode, self.cdt, self.phys,
                           self.iphys)  # fmt: skip

    def publish(self, b: LoopBuffers) -> None:
        """Make the buffers a kernel advanced (:meth:`buffers`) the Simulator's state."""
        self._entry = None  # the state's buffers are another kernel's
        self._publish(b.x, b.tick, b.flags, b.rate, b.imu)
        self.diverged = bool(b.flags[2].any())

    def step(self, sp: np.ndarray) -> np.ndarray:
        """One control step with the (1, N or 1, S) setpoint ``sp``; returns the (N, R) command
        (:meth:`advance` into a fresh array)."""
        cmds = np.empty((1, self.sim.n_envs, self.r), self.dtype)
        self.advance(sp, cmds)
        return cmds[0]

    def advance(self, sp: np.ndarray, cmds: np.ndarray | None = None) -> None:
        """One control step with the (1, N or 1, S) setpoint ``sp``; the (1, N, R) command goes
        to ``cmds``, by default a buffer this loop overwrites every call (``Simulator.step``
        when nothing records keeps no command).

        The common case skips numba's dispatch: when ``sp`` is the array :meth:`host_setpoint`
        keeps for a tensor and every other argument is the same object as in the last step or
        a copy of its output (the state, rate-loop and IMU buffers), the arguments have exactly
        the numba types of that step, whose compiled overload is called directly. Anything
        else (a replaced or edited object, a new setpoint tensor, ``run``, ``publish``) goes
        through the dispatcher, which checks the types, and names the overload anew."""
        sim = self.sim
        cmds = self._command if cmds is None else cmds
        if not self.serial:  # a batch the threads may split: _run picks the kernel
            x, tick, flags = self._state(sim.state)
            rate, imu = self._rate_buffer(), self._imu_buffers()
            self._run(x, tick, flags, rate, imu, sp, 1, cmds, self._no_rec)
            return
        c = self.last_setpoint
        typed = self._known = c is not None and sp is c[3]  # cleared by any new buffer below
        state, last = sim.state, self._last
        # (state.modified() and copy_padded, inlined: a call costs a tenth of a microsecond; a
        # state this loop made is over numpy buffers, its tensors never inference tensors)
        if (
            last is not None
            and state is last[0]
            and not any(map(_VERSION, state.__dict__["_made"]))
        ):
            x = last[1]
            x = x.copy() if x.base is None else copy_padded(x)
            tick, flags = last[2].copy(), last[3].copy()
        else:
            x, tick, flags = self._state(state)
        rate = self._rate_buffer() if self.ctbr else self._no_rate
        imu = self._no_imu_all if sim.imu is None else self._imu_buffers()
        ctrl, k = self.ctrl, self._consts  # _constants' check, inlined (a call is 0.1 us)
        if (
            k is not None
            and k[0] is sim._params
            and k[1] is ctrl.params
            and k[2] is ctrl.gains
            and k[3] is sim.disturbance
            and k[4] is sim.keys
            and list(map(_VERSION, k[5])) == k[6]
        ):
            p, pc, cc, d, keys = k[7]
        else:
            p, pc, cc, d, keys = self._constants()
        args = (p, pc, cc, d, x, tick, flags, keys, rate, sp, self.mode, self.cdt, self.phys,
                self.iphys, imu, cmds)  # fmt: skip
        entry = self._entry
        if self._known and entry is not None:
            diverged = entry(*args)
        else:
            kernel = _lane()
            diverged = kernel(*args)
            # the overload just run, for the next step whose arguments all have these types
            self._entry = _entry_point(kernel, args) if typed else None
        if self.ctbr or sim.imu is not None:
            self._publish(x, tick, flags, rate, imu)
        else:  # _publish without the rate loop and the IMU (and lazy_state), inlined
            state = sim.state = _new(LazyState)
            d = state.__dict__
            d["_src"], d["_made"] = (x, tick, flags, self.rows), []
            self._last = (state, x, tick, flags)
        self.diverged = diverged

    def _run(self, x, tick, flags, rate, imu, sp, steps: int, cmds, rec) -> int:
        """The dispatcher's kernel call (one or several threads), for ``run`` and big batches."""
        kernel = self.kernels.closed_loop
        n = x.shape[1]
        if n >= PARALLEL_MIN and torch.get_num_threads() > 1:
            import numba

            # the count Simulator.step/run chose (volary.cpu: less the cores others are busy on)
            threads = min(torch.get_num_threads(), _max_threads(numba))
            if threads > 1:  # one thread: the serial kernel, no parallel region to wait on
                numba.set_num_threads(threads)
                kernel = self.kernels.closed_loop_parallel
        p, pc, c, d, keys = self._constants()
        self._entry = None  # the next step's arguments are typed anew
        code = kernel(p, pc, c, d, x, tick, flags, keys, rate, sp, self.mode,
                      self.cdt, self.phys, self.iphys, imu, steps, self.stop, cmds,
                      *rec)  # fmt: skip
        self._publish(x, tick, flags, rate, imu)
        self.diverged = bool(code & 1)
        return code >> 1

    def __call__(self, setpoints: np.ndarray, steps: int, record: bool) -> LoopResult:
        """Run ``steps`` control steps from ``sim.state`` with ``setpoints`` (T, N, S), T = 1
        (held) or ``steps``; write the new state (and IMU, rate-loop state) to the Simulator."""
        sim = self.sim
        x, tick, flags = self._state(sim.state)
        rate, imu = self._rate_buffer(), self._imu_buffers()
        n = x.shape[1]
        cmds = np.empty((steps, n, self.r), x.dtype)
        if record:
            rec = (np.empty((steps, *x.shape), x.dtype), np.empty((steps, 3, n), np.bool_))
        else:
            rec = self._no_rec
        done = self._run(x, tick, flags, rate, imu, setpoints, steps, cmds, rec)
        return LoopResult(done, cmds, *rec)

    def _publish(self, x, tick, flags, rate, imu) -> None:
        """Hand the advanced buffers to the Simulator (and its controller and IMU).

        The state's tensor views are made on first access (:class:`LazyState`): each torch
        call costs about a microsecond, the scale of a whole one-vehicle control step, and a
        loop that does not look at every step's state should not pay for it."""
        sim = self.sim
        state = lazy_state(x, tick, flags, self.rows)  # fields become tensors on first access
        sim.state = state
        self._last = (state, x, tick, flags)
        if self.ctbr:
            s = _lazy_rate_state(rate)  # the rate loop's tensors, made when first read
            self.ctrl._rate = s
            self._rate = (s, rate)
        if sim.imu is not None:
            ib, clock, itick = imu[0], imu[1], imu[2]
            # (N, 3) views of the (12, N) buffer's rows: four from_numpy calls cost about half
            # of from_numpy + t + split (a Python-level torch function)
            ab, gb, acc, gyro = (torch.from_numpy(ib[k : k + 3].T) for k in (0, 3, 6, 9))
            imu_obj = sim.imu
            imu_obj.accel_bias, imu_obj.gyro_bias = ab, gb
            imu_obj.reading = ImuReading(acc, gyro)
            imu_obj.clock, imu_obj.tick = torch.from_numpy(clock), torch.from_numpy(itick)
            sim.imu_reading = imu_obj.reading
            now = (ab, gb, imu_obj.reading, imu_obj.clock, imu_obj.tick)
            self._imu = (now, ib, clock, itick)


class _LazyRateState(RateLoopState):
    """A RateLoopState over the loop's (N, 10) rate buffer [rate, rate_dot, integral, fresh]
    whose tensors are made on first access: the four views and the comparison cost about 50 us
    a step, the scale of a one-vehicle step, and most loops never read them."""

    def __getattr__(self, name: str) -> Any:  # only reached before the fields are made
        d = self.__dict__
        if "_buf" not in d or name not in ("rate", "rate_dot", "integral", "fresh"):
            raise AttributeError(name)
        if torch.is_inference_mode_enabled():  # normal tensors, as LazyState makes
            with torch.inference_mode(False):
                return self._make(d, name)
        return self._make(d, name)

    @staticmethod
    def _make(d: dict[str, Any], name: str) -> Any:
        rt = torch.from_numpy(d["_buf"])
        d.update(rate=rt[:, 0:3], rate_dot=rt[:, 3:6], integral=rt[:, 6:9], fresh=rt[:, 9] > 0.5)
        return d[name]

    def __reduce__(self) -> Any:  # pickles and copies as a plain RateLoopState
        return (RateLoopState, (self.rate, self.rate_dot, self.integral, self.fresh))


def _lazy_rate_state(buf: np.ndarray) -> RateLoopState:
    state = object.__new__(_LazyRateState)
    state.__dict__["_buf"] = buf
    return state


def _counters(tensors: list[torch.Tensor]) -> list[torch.Tensor] | None:
    """One tensor per distinct version counter among ``tensors`` (a view shares its base's,
    so the base stands for all its views), or None when one is an inference tensor (none)."""
    out: dict[int, torch.Tensor] = {}
    for t in tensors:
        if t.is_inference():
            return None
        base = SHARED_COUNTERS.get(t)
        if base is None:
            base = t._base if t._base is not None else t
        out.setdefault(id(base), base)
    return list(out.values())


def _lane() -> Any:
    """:func:`~volary.sim.fused_kernels.one_step` (importing the kernels module imports numba,
    so on first use, like the other kernels)."""
    from volary.sim.fused_kernels import one_step

    return one_step


def _entry_point(kernel: Any, args: tuple) -> Any:
    """The machine-code entry of ``kernel``'s compiled overload for exactly the numba types of
    ``args`` (the one the dispatcher just ran), or None when there is none to name."""
    try:
        sig = tuple(kernel.typeof_pyval(a) for a in args)
    except (TypeError, ValueError):  # pragma: no cover - the dispatcher typed them a moment ago
        return None
    cres = kernel.overloads.get(sig)
    return None if cres is None else cres.entry_point


def _gain_rows() -> tuple:
    from volary.control.numba_laws import GAIN_ROWS

    return GAIN_ROWS


def _max_threads(numba: Any) -> int:
    """numba's thread-pool size (NUMBA_NUM_THREADS, the core count by default)."""
    return int(numba.config.NUMBA_NUM_THREADS)


def _np_dtype(dtype: torch.dtype) -> np.dtype:
    return torch.empty(0, dtype=dtype).numpy().dtype


class CompiledLoop:
    """The closed loop for large batches: the built-in controller (torch) and the fused SoA
    physics substeps (:mod:`volary.dynamics.compiled`) in one inductor-compiled call per
    control step. inductor vectorizes over envs (SIMD), which the per-env numba kernel does not,
    so from ``INDUCTOR_MIN`` envs on the CPU this is the faster loop (and on a GPU the only
    fused one); the IMU and the rate-loop state run inside the same graph.

    The step is compiled as a pure function of tensors (:func:`compile_graph`: traced once,
    no dynamo guards per call): while it is traced, the controller's parameters, gains and
    rate-loop state and the IMU's state are swapped for the traced inputs, and what the
    controller and the IMU write is returned; every call passes their current tensors, so a
    new gains object or an in-place change is seen. Compiling takes tens of seconds once per
    process and batch size: the substeps run in a ``while_loop`` (one compiled body), which
    inductor does not cache on disk. Unrolled substeps are cached, but ran at half the speed
    (1.6-2.0 vs 3.4 M env-steps/s at N = 1024 on the 2-core machine) and took four minutes to
    compile the first time."""

    def __init__(self, sim: LoopHost) -> None:
        from volary.dynamics.compiled import _soa_rollout

        self.sim = sim
        self.ctrl: MultirotorController = sim.controller  # type: ignore[assignment]
        self.r = sim.params.n_rotors
        self.params, self.dist = _Cached(_PARAM_FIELDS), _Cached(_DIST_FIELDS)
        self.aero = sim.params.has_aero  # rotor aerodynamics: a static switch of the graph
        self.rollout = _soa_rollout(sim.dynamics, sim.config.substeps, self.r, self.aero)
        self.fn: Any = None  # compiled on the first step
        self.sig: tuple = ()
        self._known: list[Any] = []  # the inputs the next call is expected to pass
        self._unchecked = True
        self._last: tuple[Any, torch.Tensor, torch.Tensor, int, int] | None = None
        self._ctrl_in: tuple[Any, Any, list[torch.Tensor]] | None = None
        self._tick = sim.state.tick
        self.rows = field_rows(self.r)

    def use_controller(self, ctrl: MultirotorController) -> None:
        """Fly ``ctrl``, a built-in controller of this loop's mode, from the next step on: its
        parameters, gains and rate-loop state are the compiled graph's inputs, so the graph
        is reused."""
        self.ctrl, self._ctrl_in = ctrl, None

    def _closed(self, pbuf, dbuf, xbuf, tick, flags, keys, sp, rate, ctrl_in, imu_in):
        """One control step as a function of tensors only; run once, while it is traced."""
        from volary.dynamics.compiled import _state_from

        ctrl, imu, r, dt = self.ctrl, self.sim.imu, self.r, float(self.sim.dt)
        saved = _swap_controller(ctrl, _controller_objects(ctrl, ctrl_in), RateLoopState(*rate))
        saved_imu = _swap_imu(imu, imu_in) if imu is not None else None
        try:
            st = _state_from(xbuf, tick, flags, r)
            cmd = ctrl._law(st, sp, dt)
            s = ctrl._rate  # state fed back in: returned in the inputs' (contiguous) layout
            rate_out = tuple(t.contiguous() for t in (s.rate, s.rate_dot, s.integral, s.fresh))
            x, t, f = self.rollout(pbuf, dbuf, xbuf, cmd.t().contiguous(), tick, flags, keys)
            imu_out: tuple = ()
            if imu is not None:
                new = _state_from(x, t, f, r)
                imu(new.quat, new.omega, (new.vel - st.vel) / dt, dt)
                imu_out = tuple(t.contiguous() for t in _imu_tensors(imu)[1:])  # keys: same
        finally:
            _swap_controller(ctrl, saved[0], saved[1])
            if saved_imu is not None:
                _swap_imu(imu, saved_imu)
        return (x, t, f, cmd, *rate_out, *imu_out)

    def _controller_inputs(self) -> list[torch.Tensor]:
        """The controller's parameter and gain tensors and its actuation flags, contiguous;
        rebuilt only when ``params`` or ``gains`` is another object (frozen dataclasses)."""
        c, last = self.ctrl, self._ctrl_in
        if last is not None and last[0] is c.params and last[1] is c.gains:
            return last[2]
        tensors = [*_fields_of(c.params), *_fields_of(c.gains), c._fully_actuated]
        out = [t.contiguous() for t in tensors]
        self._ctrl_in = (c.params, c.gains, out)
        return out

    def step(self, sp: torch.Tensor) -> torch.Tensor:
        """One control step from ``sim.state`` with the (N, S) setpoint; returns the command."""
        sim = self.sim
        if sim.params.has_aero != self.aero:  # new parameters switched the aerodynamics
            from volary.dynamics.compiled import _soa_rollout

            self.aero = sim.params.has_aero
            self.rollout = _soa_rollout(sim.dynamics, sim.config.substeps, self.r, self.aero)
            self.fn, self.sig = None, ()
        x, flags = self._buffers(sim.state)
        p, d = self.params.get(sim.params), self.dist.get(sim.disturbance)
        r0 = self.ctrl.rate_state
        imu_in = _imu_tensors(sim.imu) if sim.imu is not None else ()
        args = (p, d, x, self._tick, flags, sim.keys, sp.contiguous(),
                (r0.rate, r0.rate_dot, r0.integral, r0.fresh),
                tuple(self._controller_inputs()), imu_in)  # fmt: skip
        flat = _flatten(args)
        # The graph is specialized on its inputs' shapes, strides and dtypes. Checking them costs
        # about 50 us a step, so they are checked only when an input is not one this loop made or
        # checked: the last call's outputs fed back, the cached parameter buffers, the keys.
        known = self._known or [None] * len(flat)
        if self.fn is None or any(
            k is not None and t is not k for t, k in zip(flat, known, strict=True)
        ):
            sig = signature(flat)
            if sig != self.sig:
                log.info("compiling the closed loop for %d envs (once per process)", sim.n_envs)
                spec = [len(a) if isinstance(a, tuple) else None for a in args]
                self.fn = compile_graph(lambda *a: self._closed(*_unflatten(a, spec)), flat)
                self.sig, self._unchecked = sig, True
        out = self.fn(*flat)  # on the threads Simulator.step chose (volary.cpu)
        # what the next call will pass if nothing was replaced (the setpoint: checked by shape,
        # dtype and device at the Simulator, made contiguous above)
        known = list(flat)
        known[2], known[3], known[4] = out[0], out[1], out[2]  # state, tick, flags
        known[6] = None
        known[7:11] = out[4:8]
        if sim.imu is not None:
            known[-6:] = out[8:14]
        if self._unchecked:  # once per graph: the outputs fed back have the inputs' layout
            self._unchecked = False
            sig = signature([k for k in known if k is not None])
            if sig != tuple(g for g, k in zip(self.sig, known, strict=True) if k is not None):
                raise RuntimeError("compiled closed loop: outputs do not match its inputs' layout")
        self._known = known
        x, tick, flags, cmd = out[:4]
        self.ctrl._rate = RateLoopState(*out[4:8])
        if sim.imu is not None:
            _set_imu(sim.imu, out[8:])
            sim.imu_reading = sim.imu.reading
        state = lazy_state(x, tick, flags, self.rows)  # fields become tensors on first access
        sim.state = state
        self._tick = tick
        self._last = (state, x, flags, x._version, flags._version)
        return cmd

    def _buffers(self, state: MultirotorState) -> tuple[torch.Tensor, torch.Tensor]:
        last = self._last
        if last is not None and state is last[0]:
            _, x, fl, xv, fv = last
            if x._version == xv and fl._version == fv and not state.modified():
                return x, fl
        self._tick = state.tick.contiguous()
        x, fl = pack_state(state)
        return x, fl


def _fields_of(obj: Any) -> list[torch.Tensor]:
    return [getattr(obj, f.name) for f in fields(obj)]


def _controller_objects(ctrl: Any, tensors: Any) -> tuple:
    """(params, gains, fully-actuated flags) of ``ctrl``'s types from a flat tensor list as
    :meth:`CompiledLoop._controller_inputs` makes it."""
    np_, ng = len(fields(ctrl.params)), len(fields(ctrl.gains))
    params = type(ctrl.params)(*tensors[:np_])
    gains = type(ctrl.gains)(*tensors[np_ : np_ + ng])
    return params, gains, tensors[np_ + ng]


def _swap_controller(ctrl: Any, objects: tuple, rate: RateLoopState) -> tuple:
    """Give ``ctrl`` these (params, gains, fully-actuated flags) and rate-loop state; returns
    what it had, to swap back."""
    saved = ((ctrl.params, ctrl.gains, ctrl._fully_actuated), ctrl._rate)
    ctrl.params, ctrl.gains, ctrl._fully_actuated = objects
    ctrl._rate = rate
    return saved


def _imu_tensors(imu: Any) -> tuple:
    """The IMU's state: noise keys and counter, biases, held reading, sample clock."""
    r = imu.reading
    return (imu.keys, imu.tick, imu.accel_bias, imu.gyro_bias, r.accel, r.gyro, imu.clock)


def _set_imu(imu: Any, tensors: Any) -> None:
    """Write an IMU state (as :func:`_imu_tensors` orders it, without the keys: the graph
    returns the six it changes)."""
    imu.tick, imu.accel_bias, imu.gyro_bias, acc, gyro, imu.clock = tensors
    imu.reading = ImuReading(acc, gyro)


def _swap_imu(imu: Any, tensors: tuple) -> tuple:
    saved = _imu_tensors(imu)
    imu.keys = tensors[0]
    _set_imu(imu, tensors[1:])
    return saved


def _flatten(args: tuple) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    for a in args:
        out.extend(a if isinstance(a, tuple) else (a,))
    return out


def _unflatten(flat: tuple, spec: list) -> list:
    """Inverse of :func:`_flatten`; ``spec`` has each argument's tuple length (None: a tensor)."""
    out, i = [], 0
    for k in spec:
        out.append(flat[i] if k is None else tuple(flat[i : i + k]))
        i += 1 if k is None else k
    return out
