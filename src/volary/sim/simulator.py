"""The Simulator: vehicles + controller + IMU at their rates, around a pure physics step.

The Simulator is a stateful shell (STYLE.md habit 1): it holds the batched parameters, state,
controller and sensors, and a physics stepper built once (optionally ``torch.compile``d, with
all substeps of a control period fused into one call).
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from volary.checks import SEED, count
from volary.control import Gains, make_controller
from volary.cpu import governed_torch_threads
from volary.device import checked as checked_device
from volary.device import host_sync_is_cheap
from volary.dynamics import (
    Airframe,
    Disturbance,
    DynamicsConfig,
    Model,
    MultirotorState,
    OnDivergence,
    VehicleParams,
    hover_speeds,
)
from volary.dynamics.compiled import make_stepper
from volary.errors import ConfigError
from volary.math import random as vrandom
from volary.sensors.imu import Imu, ImuConfig, ImuReading
from volary.sim.fused import PARALLEL_MIN as GOVERNED_MIN
from volary.sim.recording import Recorder, Trajectory
from volary.types import Controller

PlatformSpec = str | Airframe

# Envs up to which the numba loop's parameters, default gains, disturbance and noise keys are
# built as views of one buffer (_one_counter). Pickling such an object writes the whole buffer
# once per field (torch pickles a view with its storage), so this stays small: where the kernel
# takes a few microseconds an env, the ~35 version reads it saves are a large share of a step.
SHARED_COUNTER_MAX = 16


@dataclass(frozen=True)
class SimConfig:
    """Everything that shapes a Simulator besides its platforms."""

    n_envs: int | None = None  # default: one env per platform given
    device: str = "cpu"
    dtype: torch.dtype = torch.float32
    physics_hz: float = 960.0  # FlightGoggles' physics rate
    control_hz: float = 240.0  # must divide physics_hz
    model: str = "rigid_body"  # or "thrust_rate" (SOUS VIDE eq. 1)
    control: str = "position"  # any mode of volary.control.CONTROL_MODES
    integrator: str = "rk4"
    stochastic: bool = True
    ground: bool = True
    on_divergence: str = "reset"
    rate_tau: float = 0.0  # s, body-rate lag of the thrust-rate model
    seed: int = 0
    compile: bool | str = "auto"  # 'auto' (by device and model), False/'eager', True/'inductor',
    # 'numba' (see Simulator.backend)
    imu: str | ImuConfig | None = None
    record: bool = False

    @property
    def substeps(self) -> int:
        return int(round(self.physics_hz / self.control_hz))


def _airframes(platforms: PlatformSpec | Sequence[PlatformSpec]) -> list[Airframe]:
    from volary.platforms import get  # layer 2, imported on use to keep import light

    items = [platforms] if isinstance(platforms, str | Airframe) else list(platforms)
    if not items:
        raise ConfigError("platforms: expected a platform name, an Airframe or a list of them")
    return [p if isinstance(p, Airframe) else get(p) for p in items]


def _check_params(new: Any, old: VehicleParams) -> None:
    """``sim.params = new``: the same batch layout as ``old`` (kernels and state depend on it)."""
    if not isinstance(new, VehicleParams):
        raise ConfigError(f"params: expected a VehicleParams, got {type(new).__name__}")
    for what, got, want in (
        ("envs", new.n_envs, old.n_envs),
        ("rotors", new.n_rotors, old.n_rotors),
        ("device", new.device, old.device),
        ("dtype", new.dtype, old.dtype),
    ):
        if got != want:
            raise ConfigError(
                f"params: expected {what} {want} (those the Simulator was built with), got {got}"
            )


def _custom_controller(factory: Any, params: VehicleParams) -> Controller:
    if not callable(factory):
        raise ConfigError(f"controller: expected a factory params -> Controller, got {factory!r}")
    ctrl = factory(params)
    missing = [a for a in ("mode", "setpoint_size", "reset") if not hasattr(ctrl, a)]
    if missing or not callable(ctrl):
        raise ConfigError(
            f"controller: the factory returned {type(ctrl).__name__}, which lacks "
            f"{', '.join(missing) or '__call__'} of the Controller protocol"
        )
    return ctrl


#: envs one Simulator holds at most (a typo of 10**9 would allocate tens of GB first)
MAX_ENVS = 2**24


def _check_config(cfg: SimConfig) -> None:
    """SimConfig's scalar fields, declared, before anything is allocated (the names it looks up,
    control, model, integrator, imu and compile, are checked where they are resolved)."""
    count(1, MAX_ENVS, "simulated vehicles")(cfg.n_envs, "n_envs")
    SEED(cfg.seed, "seed")
    for name in ("stochastic", "ground", "record"):
        if not isinstance(getattr(cfg, name), bool):
            raise ConfigError(f"{name}: expected True or False, got {getattr(cfg, name)!r}")
    if cfg.dtype not in (torch.float32, torch.float64):
        raise ConfigError(f"dtype: expected torch.float32 or torch.float64, got {cfg.dtype!r}")
    tau = cfg.rate_tau
    if isinstance(tau, bool) or not isinstance(tau, int | float) or not 0 <= tau < math.inf:
        raise ConfigError(f"rate_tau: expected a time >= 0 s, got {tau!r}")
    _check_rates(cfg)


def _check_rates(cfg: SimConfig) -> None:
    for name in ("physics_hz", "control_hz"):
        v = getattr(cfg, name)
        if not (math.isfinite(v) and v > 0):
            raise ConfigError(f"{name}: expected a rate > 0 Hz, got {v}")
    ratio = cfg.physics_hz / cfg.control_hz
    if abs(ratio - round(ratio)) > 1e-9 or round(ratio) < 1:
        raise ConfigError(
            f"control_hz: expected a divisor of physics_hz={cfg.physics_hz}, got {cfg.control_hz}"
        )


class Simulator:
    """N multirotors flown by a controller at ``control_hz`` over physics at ``physics_hz``.

    >>> sim = Simulator("crazyflie", n_envs=64, control="position")
    >>> state = sim.step(torch.tensor([[0.0, 0.0, 1.0, 0.0]]).expand(64, 4))
    """

    _params: VehicleParams  # behind the checked ``params`` property
    _controller: Controller  # behind the ``controller`` property

    def __init__(
        self,
        platforms: PlatformSpec | Sequence[PlatformSpec],
        config: SimConfig | None = None,
        *,
        gains: Any = None,
        controller: Callable[[VehicleParams], Controller] | None = None,
        **overrides: Any,
    ) -> None:
        """``platforms``: catalogue names or Airframes (one per env, tiled to ``n_envs``);
        ``gains``: a :class:`volary.control.Gains`, or a function ``params -> Gains`` (e.g.
        ``lambda p: Gains.default(p).override(k_x=...)``); ``controller``: a factory
        ``params -> Controller`` replacing the built-in ``control`` mode (e.g.
        ``lambda p: NmpcController(p, reference)``; it must produce the command of ``model``);
        other keywords set SimConfig fields.
        """
        cfg = SimConfig(**overrides) if config is None else _replace(config, overrides)
        _check_config(cfg)
        checked_device(cfg.device)
        self.config = cfg
        self.airframes = _airframes(platforms)
        n = cfg.n_envs if cfg.n_envs is not None else len(self.airframes)
        self.params = VehicleParams.from_airframes(
            self.airframes, n, device=cfg.device, dtype=cfg.dtype, rate_tau=cfg.rate_tau
        )
        self.dynamics = DynamicsConfig(
            model=cfg.model,
            integrator=cfg.integrator,
            dt=1.0 / cfg.physics_hz,
            stochastic=cfg.stochastic,
            ground=cfg.ground,
            on_divergence=cfg.on_divergence,
        )
        self.backend = resolve_backend(cfg.compile, self.params.device, self.dynamics.model, n)
        self.disturbance = Disturbance.create(n, device=cfg.device, dtype=cfg.dtype)
        self.keys = vrandom.env_keys(cfg.seed, torch.arange(n, device=cfg.device))
        default_gains = controller is None and gains is None
        g = Gains.default(self.params) if default_gains else None
        if self.backend == "numba" and n <= SHARED_COUNTER_MAX:
            # a few vehicles on the numba loop: what is built here shares one version counter,
            # which the loop reads every step to see in-place edits (see _one_counter)
            self.params, g, self.disturbance, self.keys = _one_counter(
                self.params, g, self.disturbance, self.keys
            )
        if controller is not None:
            self.controller = _custom_controller(controller, self.params)
        else:
            g = g if default_gains else gains(self.params) if callable(gains) else gains
            self.controller = make_controller(cfg.control, self.params, model=cfg.model, gains=g)
        self._stepper = make_stepper(self.dynamics, cfg.substeps, compile=self.backend)
        self.imu = (
            None
            if cfg.imu is None
            else Imu(n, cfg.imu, seed=cfg.seed, device=cfg.device, dtype=cfg.dtype)
        )
        self._fused: Any = None  # the numba closed loop
        # a batch a parallel region splits: its steps take fewer threads when others are busy
        self._governed = n >= GOVERNED_MIN and torch.device(cfg.device).type == "cpu"
        self._compiled: Any = None  # the inductor closed loop
        self.imu_reading: ImuReading | None = None
        self.recorder = Recorder() if cfg.record else None
        self._run_recorder: Recorder | None = None
        self._last_reset: Tensor | None = None
        self._told_setpoint = False  # the non-finite setpoint warning is given once
        self._no_reset = torch.zeros(n, dtype=torch.bool, device=cfg.device)
        self._home = torch.zeros(n, 3, device=cfg.device, dtype=cfg.dtype)
        self._home[:, 2] = 1.0
        self.state = self._initial_state(n)
        self._built = True
        self._attach_loop()

    # ---- the vehicles' parameters, the controller and the closed loop that flies them -----
    @property
    def params(self) -> VehicleParams:
        """The vehicles' physical parameters. Assign new ones (e.g. randomized masses) of the
        same env count, rotor count, device and dtype; the controller keeps its own model of
        the vehicle until it is replaced too (``sim.controller = make_controller(mode, p)``)."""
        return self._params

    @params.setter
    def params(self, p: VehicleParams) -> None:
        if getattr(self, "_built", False):
            _check_params(p, self._params)
        self._params = p

    # ---- the controller and the closed loop that flies it ---------------------------------
    @property
    def controller(self) -> Controller:
        """The controller every step runs. Assigning another one (e.g. one built for the true
        parameters after ``sim.params`` was randomized) takes effect from the next step on
        every backend: the fused and compiled closed loops follow it, or step eagerly when it
        is not a built-in controller they can run."""
        return self._controller

    @controller.setter
    def controller(self, ctrl: Controller) -> None:
        if not getattr(self, "_built", False):  # __init__: the loop is attached at its end
            self._controller = ctrl
            return
        n = getattr(getattr(ctrl, "params", None), "n_envs", None)
        if n is not None and n != self.n_envs:
            raise ConfigError(
                f"controller: expected one built for {self.n_envs} envs "
                f"(e.g. make_controller(mode, sim.params)), got one for {n}"
            )
        self._controller = ctrl
        self._attach_loop()

    def _attach_loop(self) -> None:
        """The numba (``_fused``) or inductor (``_compiled``) closed loop for the current
        controller, or neither (eager steps): a loop of the same mode is handed the new
        controller; another mode or type gets a new loop."""
        import volary.sim.fused as fused

        loop = self._fused if self._fused is not None else self._compiled
        if self.backend not in ("numba", "inductor") or not fused.supports(self):
            self._fused = self._compiled = None
        elif loop is not None and loop.ctrl.mode == self._controller.mode:
            loop.use_controller(self._controller)
        elif self.backend == "numba":
            self._fused, self._compiled = fused.FusedLoop(self), None
        else:
            self._fused, self._compiled = None, fused.CompiledLoop(self)

    # ---- properties -----------------------------------------------------------------------
    @property
    def fused_loop(self) -> Any:
        """The numba closed loop (:class:`volary.sim.fused.FusedLoop`) serving this Simulator's
        steps, or None when it steps another way."""
        return self._fused

    @property
    def last_reset(self) -> Tensor:
        """(N,) bool: the envs the last step found diverged (and reset, with
        ``on_divergence="reset"``)."""
        return self._no_reset if self._last_reset is None else self._last_reset

    @property
    def n_envs(self) -> int:
        return self.params.n_envs

    @property
    def dt(self) -> float:
        """Control period (s)."""
        return 1.0 / self.config.control_hz

    @property
    def time(self) -> Tensor:
        return self.state.time

    # ---- reset ----------------------------------------------------------------------------
    def _initial_state(self, n: int) -> MultirotorState:
        s = MultirotorState.create(
            n, self.params.n_rotors, device=self.config.device, dtype=self.config.dtype
        )
        return s.replace(pos=self._home.clone(), rotor_speed=self._hover_command_speeds())

    def _hover_command_speeds(self) -> Tensor:
        if self.dynamics.model == Model.THRUST_RATE:
            from volary.dynamics.models import thrust_rate_rotor_speed

            u = torch.zeros(self.n_envs, 4, device=self.config.device, dtype=self.config.dtype)
            u[:, 0] = self.params.mass * 9.81 / self.params.max_thrust
            return thrust_rate_rotor_speed(self.params, u)
        return hover_speeds(self.params)

    def reset(
        self, mask: Tensor | None = None, *, pos: Any = None, quat: Any = None, vel: Any = None
    ) -> MultirotorState:
        """Reset the masked envs (all when None) to rest at ``pos`` (default: their home,
        [0, 0, 1] m), attitude ``quat`` (default level), rotors at hover speed.

        The env's noise stream continues (its counter is not rewound), so episodes differ.
        """
        n, dev, dt = self.n_envs, self.config.device, self.config.dtype
        m = torch.ones(n, dtype=torch.bool, device=dev) if mask is None else _mask(mask, n, dev)
        if pos is not None:
            self._home = torch.where(m[:, None], _vec(pos, n, 3, "pos", dev, dt), self._home)
        fresh = self._initial_state(n)
        if quat is not None:
            fresh = fresh.replace(quat=_vec(quat, n, 4, "quat", dev, dt))
        if vel is not None:
            fresh = fresh.replace(vel=_vec(vel, n, 3, "vel", dev, dt))
        fresh = fresh.replace(tick=self.state.tick, gust=torch.zeros_like(self.state.gust))
        self.state = self.state.where(m, fresh)
        self.controller.reset(m)
        if self.imu is not None:
            self.imu.reset(m)
        return self.state

    def restart_noise(self, mask: Tensor) -> None:
        """Put the masked envs' process-noise and IMU counters back at zero, where a new
        Simulator's begin: after the next :meth:`reset` (which draws the IMU's turn-on biases)
        they draw what a new one would, however many steps they took before. Other envs'
        counters are untouched."""
        m = _mask(mask, self.n_envs, self.config.device)
        tick = self.state.tick
        self.state = self.state.replace(tick=torch.where(m, torch.zeros_like(tick), tick))
        if self.imu is not None:
            self.imu.restart(m)

    # ---- disturbances ---------------------------------------------------------------------
    def set_wind(self, wind: Any = None, *, gust_std: Any = None, gust_tau: Any = None) -> None:
        """Constant wind (m/s, world) and gusts (std m/s, correlation time s), per env or all."""
        n, dev, dt = self.n_envs, self.config.device, self.config.dtype
        d = self.disturbance
        self.disturbance = dataclasses.replace(
            d,
            wind=d.wind if wind is None else _vec(wind, n, 3, "wind", dev, dt),
            gust_std=d.gust_std if gust_std is None else _scalar(gust_std, n, "gust_std", dev, dt),
            gust_tau=d.gust_tau if gust_tau is None else _scalar(gust_tau, n, "gust_tau", dev, dt),
        )

    def set_surface(self, height: Any) -> None:
        """Height (m, world z) of the surface under each vehicle that the rotor ground effect
        feels besides the ground plane (aero.py A4), per env or all; -inf: none. Held until
        changed; a World sets it from its scene."""
        n, dev, dt = self.n_envs, self.config.device, self.config.dtype
        h = torch.as_tensor(height, device=dev, dtype=dt)
        h = h.expand(n) if h.dim() == 0 else h
        if h.shape != (n,) or bool(torch.isnan(h).any()) or bool((h == math.inf).any()):
            raise ConfigError(
                f"height: expected a height in m or -inf (no surface), one or shape ({n},); "
                f"got shape {tuple(h.shape)}"
            )
        self.disturbance = dataclasses.replace(self.disturbance, surface=h)

    def set_wake(self, velocity: Any) -> None:
        """Air velocity (m/s, world) that other vehicles' downwash induces at each vehicle, per
        env or all; added to the wind. Held until changed; a World with several vehicles per
        env sets it."""
        n, dev, dt = self.n_envs, self.config.device, self.config.dtype
        self.disturbance = dataclasses.replace(
            self.disturbance, wake=_vec(velocity, n, 3, "velocity", dev, dt)
        )

    def apply_wrench(self, force: Any = None, moment: Any = None) -> None:
        """External force (N, world) and moment (N m, body), held until changed."""
        n, dev, dt = self.n_envs, self.config.device, self.config.dtype
        d = self.disturbance
        self.disturbance = dataclasses.replace(
            d,
            force=d.force if force is None else _vec(force, n, 3, "force", dev, dt),
            moment=d.moment if moment is None else _vec(moment, n, 3, "moment", dev, dt),
        )

    # ---- stepping -------------------------------------------------------------------------
    def step(self, setpoint: Any) -> MultirotorState:
        """One control period: controller, then ``substeps`` physics steps, then sensors.

        A CPU batch of ``PARALLEL_MIN`` envs or more runs on ``torch.get_num_threads()``
        threads less the cores other processes are busy on (:mod:`volary.cpu`)."""
        if self._governed:
            with governed_torch_threads():
                return self._step(setpoint)
        if self._fused is not None:
            return self._fused_step(setpoint)
        return self._step(setpoint)

    def _step(self, setpoint: Any) -> MultirotorState:
        if self._fused is not None:
            return self._fused_step(setpoint)
        sp = self._setpoint(setpoint)
        if self._compiled is not None:
            self._after_step(sp, self._compiled.step(sp))
            return self.state
        prev_vel = self.state.vel
        command = self.controller(self.state, sp, self.dt)
        self.state = self._stepper(self.params, self.state, command, self.disturbance, self.keys)
        if self.imu is not None:
            accel = (self.state.vel - prev_vel) / self.dt
            self.imu_reading = self.imu(self.state.quat, self.state.omega, accel, self.dt)
        self._after_step(sp, command)
        return self.state

    def _fused_step(self, setpoint: Any) -> MultirotorState:
        """step() on the fused loop: the setpoint goes to the kernel without torch calls."""
        loop = self._fused
        c = loop.last_setpoint  # the tensor passed last, unchanged: its array (host_setpoint's
        if (  # check, inlined: a call costs a tenth of a microsecond, a step a few)
            c is not None
            and setpoint is c[0]
            and setpoint._version == c[1]
            and setpoint.data_ptr() == c[2]
        ):
            host = c[3]
        else:
            host = loop.host_setpoint(setpoint)
        if host is None:  # anything unusual: torch's conversion and its checks
            host = _host(self._setpoint(setpoint))[None]
        if self.recorder is not None or self._run_recorder is not None:
            command = loop.step(host)
            sp = torch.from_numpy(host[0]).expand(self.n_envs, -1)
            self._after_step(sp, torch.from_numpy(command))
            return self.state
        loop.advance(host)
        if loop.diverged:
            self._handle_divergence(host[0])
        else:  # what _handle_divergence does when no env diverged
            self._last_reset = None
        return self.state

    def _after_step(self, sp: Tensor, command: Tensor) -> None:
        for rec in (self.recorder, self._run_recorder):
            if rec is not None:
                rec.add(float(self.state.time[0]), self.state, sp, command)
        self._handle_divergence(sp)

    def _handle_divergence(self, sp: Tensor | Any = None) -> None:
        """Reset (or leave frozen) the envs the physics flagged diverged; ``sp``, the step's
        setpoint, is looked at only when one did, to say once if it was the cause."""
        if self._fused is None:
            self._last_reset = self.state.diverged.clone()
            # on a GPU the masked reset below runs every step rather than wait for the answer
            cheap = host_sync_is_cheap(self._last_reset.device)
            any_diverged = not cheap or bool(self._last_reset.any())
        else:  # the kernel said whether a flag is set; read it only then
            cheap, any_diverged = True, self._fused.diverged  # the fused loop runs on the CPU
            self._last_reset = self.state.diverged.clone() if any_diverged else None
        if cheap and any_diverged and sp is not None and not self._told_setpoint:
            self._told_setpoint = _tell_non_finite(sp, self._last_reset, self.dynamics)
        if self.dynamics.on_divergence == OnDivergence.RESET and any_diverged:
            self.state = self.state.replace(diverged=torch.zeros_like(self.state.diverged))
            self.reset(self.last_reset)

    def run(self, setpoint: Any, duration: float) -> Trajectory:
        """Fly ``duration`` s and return the recorded trajectory of this run.

        ``setpoint``: one setpoint held throughout ((S,) or (N, S)); a schedule, one setpoint per
        control step, (T, N, S) or (T, 1, S) with T = ``duration * control_hz``; or a function
        ``setpoint(t) -> tensor`` called at each control step. With the fused backend a held
        setpoint or a schedule runs the whole horizon in one kernel call."""
        if not (math.isfinite(duration) and duration > 0):
            raise ConfigError(f"duration: expected a time > 0 s, got {duration}")
        steps = max(1, int(round(duration * self.config.control_hz)))
        sched = None if callable(setpoint) else self._schedule(setpoint, steps)
        if sched is not None and (self._fused is not None or self._compiled is not None):
            if self._fused is not None:
                traj = self._run_fused(sched, steps)
            else:
                traj = self._run_compiled(sched, steps)
            if self.recorder is not None:
                self.recorder.extend(traj)
            return traj
        self._run_recorder = Recorder()
        try:
            for k in range(steps):
                if sched is not None:
                    self.step(sched[k] if sched.shape[0] > 1 else sched[0])
                else:
                    self.step(setpoint(k * self.dt))
            return self._run_recorder.stack()
        finally:
            self._run_recorder = None

    def _schedule(self, setpoint: Any, steps: int) -> Tensor:
        """A held setpoint as a (1, N, S) schedule, or a checked (T, N, S) schedule."""
        sp = torch.as_tensor(setpoint, device=self.config.device, dtype=self.config.dtype)
        if sp.dim() < 3:
            return self._setpoint(sp)[None]
        want = (steps, self.n_envs, self.controller.setpoint_size)
        if sp.dim() != 3 or sp.shape[0] != steps or sp.shape[1] not in (1, self.n_envs):
            raise ConfigError(
                f"setpoint: a schedule must have shape {want} or ({steps}, 1, {want[2]}) "
                f"(one setpoint per control step of the run), got {tuple(sp.shape)}"
            )
        if sp.shape[2] != want[2]:
            raise ConfigError(
                f"setpoint: expected {want[2]} values per setpoint for control mode "
                f"{self.controller.mode!r}, got {sp.shape[2]}"
            )
        return sp.expand(steps, self.n_envs, want[2])

    def _run_fused(self, sched: Tensor, steps: int) -> Trajectory:
        """The horizon in kernel calls: one, or one more after each divergence reset."""
        sp = _host(sched)
        parts, k = [], 0
        while k < steps:
            with governed_torch_threads() if self._governed else nullcontext():  # volary.cpu
                res = self._fused(sp if sp.shape[0] == 1 else sp[k:], steps - k, record=True)
            parts.append((res, sp[:1] if sp.shape[0] == 1 else sp[k : k + res.steps]))
            k += res.steps
            self._handle_divergence(sp[0 if sp.shape[0] == 1 else k - 1])  # the last step's
        return _trajectory(parts, self.n_envs, self.params.n_rotors)

    def _run_compiled(self, sched: Tensor, steps: int) -> Trajectory:
        """The horizon on the inductor loop, recorded by reference: each step's graph outputs
        are new tensors that nothing writes to later, so the run keeps them and stacks once
        (instead of ten clones a step and a concatenation per field)."""
        loop = self._compiled
        xs, fls, cmds, sps = [], [], [], []
        for k in range(steps):
            sp = self._setpoint(sched[k] if sched.shape[0] > 1 else sched[0])
            if self._governed:  # the threads are decided again each step (volary.cpu)
                with governed_torch_threads():
                    cmds.append(loop.step(sp))
            else:
                cmds.append(loop.step(sp))
            xs.append(loop._last[1])
            fls.append(loop._last[2])
            sps.append(sp)
            self._handle_divergence(sp)
        return _trajectory_from(
            torch.stack(xs), torch.stack(fls), torch.stack(cmds), torch.stack(sps),
            self.params.n_rotors,
        )  # fmt: skip

    def trajectory(self) -> Trajectory:
        """Everything recorded since construction (``record=True``)."""
        if self.recorder is None:
            raise ConfigError("record: the Simulator was built with record=False")
        return self.recorder.stack()

    def _setpoint(self, setpoint: Any) -> Tensor:
        want = self.controller.setpoint_size
        if isinstance(setpoint, Tensor) and setpoint.shape == (self.n_envs, want):
            if setpoint.dtype == self.config.dtype and setpoint.device == self.params.device:
                return setpoint  # already what the controller takes
        sp = torch.as_tensor(setpoint, device=self.config.device, dtype=self.config.dtype)
        if sp.dim() == 1:
            sp = sp.expand(self.n_envs, -1)
        if sp.shape != (self.n_envs, want):
            raise ConfigError(
                f"setpoint: expected shape ({self.n_envs}, {want}) or ({want},) for control mode "
                f"{self.controller.mode!r}, got {tuple(sp.shape)}"
            )
        return sp


def resolve_backend(
    compile: bool | str, device: torch.device | str, model: Any, n_envs: int = 1
) -> str:
    """The backend of ``SimConfig.compile``. ``"auto"`` (the default) picks, for the rigid-body
    model on the CPU, the numba closed loop below ``INDUCTOR_MIN`` (1,024) envs and the
    inductor-compiled one from there (SIMD over envs; compiles once per process); eager for the
    thrust-rate model (no fused kernel) and on other devices. ``False``/``"eager"``,
    ``True``/``"inductor"`` and ``"numba"`` force a backend; a built-in controller then runs
    inside the fused call of ``"numba"`` and ``"inductor"``, a user's controller beside it."""
    from volary.dynamics.compiled import auto_backend

    if compile != "auto":
        return {True: "inductor", False: "eager"}.get(compile, compile)  # type: ignore[arg-type]
    return auto_backend(device, model, n_envs)


def _host(t: Tensor) -> Any:
    """A C-contiguous numpy array of a CPU tensor (setpoints are often expanded views)."""
    import numpy as np

    return np.ascontiguousarray(t.detach().numpy())


def _trajectory(parts: list, n: int, r: int) -> Trajectory:
    """A Trajectory from the fused loop's recorded chunks [(LoopResult, setpoints)]."""
    import numpy as np

    xs = np.concatenate([res.rec_x[: res.steps] for res, _ in parts])
    fl = np.concatenate([res.rec_flags[: res.steps] for res, _ in parts])
    cmd = np.concatenate([res.commands[: res.steps] for res, _ in parts])
    sps = [np.broadcast_to(s, (res.steps, n, s.shape[-1])) for res, s in parts]
    return _trajectory_from(
        torch.from_numpy(xs), torch.from_numpy(fl), torch.from_numpy(cmd),
        torch.from_numpy(np.concatenate(sps)), r,
    )  # fmt: skip


def _trajectory_from(xs: Tensor, flags: Tensor, cmd: Tensor, sp: Tensor, r: int) -> Trajectory:
    """A Trajectory from recorded packed states (T, K, N), flags (T, 3, N) [landed, crashed,
    diverged], commands (T, N, R) and setpoints (T, N, S)."""
    x = xs.transpose(1, 2)  # (T, N, K)
    pos, vel, quat, om, w, _, time = torch.split_with_sizes(x, (3, 3, 4, 3, r, 3, 1), 2)
    return Trajectory(
        time=time[:, 0, 0].to(torch.get_default_dtype()).cpu(),
        pos=pos.contiguous().cpu(),
        vel=vel.contiguous().cpu(),
        quat=quat.contiguous().cpu(),
        omega=om.contiguous().cpu(),
        rotor_speed=w.contiguous().cpu(),
        setpoint=sp.contiguous().cpu(),
        command=cmd.contiguous().cpu(),
        diverged=flags[:, 2].contiguous().cpu(),
        crashed=flags[:, 1].contiguous().cpu(),
    )


def _one_counter(*objs: Any) -> tuple:
    """``objs`` (dataclasses of contiguous tensors the Simulator built, tensors, or None) again,
    with every tensor a view of one byte buffer: the same values, shapes, dtypes and device,
    and one version counter for all (a view shares its base's; ``fused.SHARED_COUNTERS`` names
    the buffer, as a dtype view has no ``_base``), so the fused loop sees an in-place edit of
    any of them in one read. Objects with another field are returned as they are."""
    from dataclasses import fields, is_dataclass

    from volary.sim.fused import SHARED_COUNTERS

    def tensors(obj: Any) -> dict[str, Any] | None:
        if obj is None or isinstance(obj, Tensor):
            return {"": obj} if obj is not None else {}
        if not is_dataclass(obj):
            return None
        ts = {f.name: getattr(obj, f.name) for f in fields(obj)}
        return ts if all(isinstance(t, Tensor) for t in ts.values()) else None

    parts = [tensors(o) for o in objs]
    flat = [t for p in parts if p for t in p.values()]
    if not flat or not all(t.is_contiguous() for t in flat):
        return objs
    sizes = [-(-t.numel() * t.element_size() // 16) * 16 for t in flat]  # 16-byte aligned
    raw = torch.empty(sum(sizes), dtype=torch.uint8, device=flat[0].device)
    views, start = [], 0
    for t, size in zip(flat, sizes, strict=True):
        nbytes = t.numel() * t.element_size()
        v = raw[start : start + nbytes].view(t.dtype).view(t.shape).copy_(t)
        SHARED_COUNTERS[v] = raw
        views.append(v)
        start += size
    out, it = [], iter(views)
    for obj, p in zip(objs, parts, strict=True):
        if not p:
            out.append(obj)
        elif isinstance(obj, Tensor):
            out.append(next(it))
        else:
            out.append(type(obj)(**{k: next(it) for k in p}))
    return tuple(out)


def _replace(cfg: SimConfig, overrides: dict[str, Any]) -> SimConfig:
    from dataclasses import replace

    return replace(cfg, **overrides)


def _mask(mask: Any, n: int, device: str) -> Tensor:
    m = torch.as_tensor(mask, device=device)
    if m.dtype != torch.bool or m.shape != (n,):
        raise ConfigError(
            f"mask: expected a bool tensor of shape ({n},), got {m.dtype} {tuple(m.shape)}"
        )
    return m


def _tell_non_finite(sp: Any, diverged: Tensor | None, dynamics: Any) -> bool:
    """Warn (once per Simulator: the caller keeps the answer) when a diverged env's setpoint
    held NaN or inf; True when it did. Called only after a divergence, so the step's hot path
    pays nothing for it (``step`` does not check each setpoint: a few microseconds a step)."""
    import warnings

    t = torch.as_tensor(sp)
    bad = ~torch.isfinite(t.reshape(-1, t.shape[-1])).all(-1)
    if diverged is None or not bool(bad.any()):
        return False
    envs = (diverged if bad.numel() == 1 else bad).nonzero().flatten().tolist()  # 1: for all
    shown = ", ".join(map(str, envs[:8])) + (", ..." if len(envs) > 8 else "")
    what = ("reset at the end of the step" if dynamics.on_divergence == OnDivergence.RESET
            else "frozen until reset")  # fmt: skip
    warnings.warn(
        f"setpoint: non-finite values (NaN or inf) for env(s) {shown}; the physics flagged them "
        f"diverged and they were {what} (on_divergence={str(dynamics.on_divergence)!r}). "
        "Check the values passed to step()/run(); this warning is given once.",
        RuntimeWarning,
        stacklevel=_user_stacklevel(),
    )
    return True


def _user_stacklevel() -> int:
    """``warnings.warn``'s stacklevel, for its caller, of the first frame outside volary (the
    warning then names the user's line, from whichever path of step() or run() it came)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # src/volary
    frame, level = sys._getframe(2), 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(root):
        frame, level = frame.f_back, level + 1
    return level


def _finite(v: Any, t: Tensor) -> bool:
    """Whether ``t`` (made from the caller's ``v``) is finite; True without looking for a tensor
    the caller already has on a GPU (reading the answer back would wait for the device: a
    non-finite pose or disturbance there is caught by the physics' divergence guard instead)."""
    if isinstance(v, Tensor) and not host_sync_is_cheap(v.device):
        return True
    return bool(torch.isfinite(t).all())


def _vec(v: Any, n: int, k: int, name: str, device: str, dtype: torch.dtype) -> Tensor:
    t = torch.as_tensor(v, device=device, dtype=dtype)
    if t.shape == (k,):
        t = t.expand(n, k)
    if t.shape != (n, k) or not _finite(v, t):
        raise ConfigError(
            f"{name}: expected finite values of shape ({k},) or ({n}, {k}), got {tuple(t.shape)}"
        )
    return t.clone()


def _scalar(v: Any, n: int, name: str, device: str, dtype: torch.dtype) -> Tensor:
    t = torch.as_tensor(v, device=device, dtype=dtype)
    t = t.expand(n) if t.dim() == 0 else t
    if t.shape != (n,) or not _finite(v, t):
        raise ConfigError(f"{name}: expected a finite scalar or shape ({n},), got {tuple(t.shape)}")
    return t.clone()


__all__ = ["SimConfig", "Simulator"]
