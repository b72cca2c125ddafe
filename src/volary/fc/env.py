"""volary's position envs (``hover``, ``reach``) flown through Betaflight 4.6.0 SITL's rate loop
instead of volary's ideal one (issue 58): a policy sends the env's CTBR actions and one
firmware per env turns them into motor outputs, in lock-step with the physics.

    >>> from volary.fc.env import make_firmware_env
    >>> env = make_firmware_env("hover", n_envs=2, seed=0)   # two Betaflight processes
    >>> obs, info = env.reset(seed=0)                          # booted, armed, at the starts
    >>> obs, reward, terminated, truncated, info = env.step(torch.zeros(2, 4))
    >>> env.close()                                            # stops the firmwares

The task is :class:`volary.envs.PositionTask` unchanged (observation, reward, end conditions,
start draws, the ``ctbr`` action map: thrust (a0 + 1) / 2 x max thrust, body rates a1..3 x
``max_rates``); only the World under it differs: :class:`volary.fc.loop.FirmwareLoop` is its
rate loop (each control step's CTBR command becomes armed acro sticks through
:class:`volary.fc.ctbr.StickMap`, held for the step; ``exchange_hz`` state/motor exchanges a
simulated second, ``physics_hz`` of physics, the IMU preset ``imu`` feeding the firmware's gyro
and accelerometer). Layer 5 (``volary.fc``), so the layer-4 envs stay free of firmware.

Resets: every env that starts an episode (``reset``, or the same-step autoreset of an env that
ended) gets a fresh firmware process, booted and armed with its vehicle at rest at the drawn
start pose (:meth:`FirmwareLoop.restart`), then flies from the drawn start state (with its
velocity); the other envs' firmwares are not touched. A fresh boot, not a disarm/re-arm: a
Betaflight that keeps running carries its PID integrators, filter states and arming history into
the next episode, which an episode of the ideal env does not. It costs a boot per episode,
run in the step that resets the env (about 0.08 s of wall time each, measured on a loaded
2-core host).

A lost firmware (it exits, stalls past ``timeout_s`` of wall time, or does not arm) terminates
its env's episode in that step with the cause ``firmware_lost`` (the first of
:attr:`term_names`, ahead of the ideal env's five); the event is in :attr:`events`; the env's
autoreset boots it a fresh firmware; the other envs go on as if nothing happened.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Annotated, Any, Literal

import torch
from pydantic import Field
from torch import Tensor

from volary.envs import ENVS, env_config
from volary.envs.position import PositionTask, PositionTaskConfig
from volary.errors import ConfigError
from volary.inputs import LIMITS, Positive, Strict, Text, validated, within
from volary.sim import World
from volary.sim.terms import end_term, term_name

FIRMWARE_ENVS = ("hover", "reach")  # the registered PositionTask envs
MAX_EXCHANGE_HZ = 8000.0  # Betaflight's gyro loop rate: faster exchanges would repeat its PID


class FirmwareOptions(Strict):
    """How the firmware flies the env: ``firmware`` (only ``"betaflight"``), ``imu`` (a volary
    IMU preset: the firmware's gyro and accelerometer), ``exchange_hz`` (state/motor exchanges
    per simulated second; a multiple of the task's ``control_hz``, at most 8 kHz, the firmware's
    gyro loop rate), ``timeout_s`` (wall seconds, at most an hour, a firmware may take to answer
    one exchange before it counts as lost)."""

    firmware: Literal["betaflight"] = "betaflight"
    imu: Text = "bmi085"
    exchange_hz: Annotated[Positive, Field(le=MAX_EXCHANGE_HZ)] = 960.0
    timeout_s: Annotated[Positive, Field(le=3600.0)] = 10.0


def make_firmware_env(
    name: str,
    n_envs: int = 2,
    firmware: str = "betaflight",
    *,
    imu: str = "bmi085",
    exchange_hz: float = 960.0,
    timeout_s: float = 10.0,
    **options: Any,
) -> FirmwarePositionTask:
    """The registered position env ``name`` (``"hover"`` or ``"reach"``) with ``n_envs`` envs,
    each flown by its own ``firmware`` process; ``options`` are the task config's fields, as for
    :func:`volary.envs.make_env` (``physics_hz`` defaults to twice ``exchange_hz`` here, 1920
    Hz, the rate ``experiments/rl/betaflight-transfer/policy.py`` flew). Every option is checked
    before a firmware starts; a bad one raises a one-line :class:`ConfigError` naming it. Close
    the env (or use it as a context manager) to stop the processes; they start at the first
    ``reset``.
    Without the SITL build, :class:`volary.fc.betaflight.FirmwareError` says how to build it."""
    if name not in FIRMWARE_ENVS:
        known = "a registered env" if name in ENVS else "an env name"
        raise ConfigError(
            f"name: expected one of {', '.join(FIRMWARE_ENVS)} (the position envs a firmware "
            f"flies), got {name!r} ({known})"
        )
    n = within(n_envs, LIMITS["fc_vehicles"], "n_envs")
    fw = validated(
        FirmwareOptions,
        {"firmware": firmware, "imu": imu, "exchange_hz": exchange_hz, "timeout_s": timeout_s},
        "make_firmware_env",
        error=ConfigError,
    )
    if "physics_hz" not in options:
        options["physics_hz"] = 2.0 * fw.exchange_hz
    return FirmwarePositionTask(n, env_config(name, **options), fw)


class FirmwarePositionTask(PositionTask):
    """:class:`PositionTask` whose vehicles Betaflight flies (module docstring): one firmware
    process per env, started at the first :meth:`reset`. Use :func:`make_firmware_env`."""

    def __init__(
        self, n_envs: int, config: PositionTaskConfig, firmware: FirmwareOptions | None = None
    ) -> None:
        from volary.fc.betaflight import FirmwareError, find

        fw = firmware or FirmwareOptions()
        platforms = _check(n_envs, config, fw)
        if find() is None:
            raise FirmwareError(
                "betaflight SITL is not built: run `python -m volary.fc.betaflight build`"
            )
        # the parent builds the task (terms, action map, observation) over an ideal World that
        # is replaced below: PositionTask has no hook for its World
        super().__init__(n_envs, replace(config, compile=False))
        self.config = config
        self.options = fw
        self.world = _firmware_world(n_envs, config, platforms, fw)
        self.platforms = platforms
        self.firmware: Any = None
        """The :class:`volary.fc.loop.FirmwareLoop` flying the envs (None before the first
        reset and after :meth:`close`)."""
        self.terms = (self._lost_term(), *self.terms)
        self.term_names = tuple(term_name(t) for t in self.terms)
        self._fired = torch.zeros(len(self.terms), n_envs, dtype=torch.bool, device=self.device)

    def _lost_term(self) -> Any:
        @end_term(time_out=False)
        def firmware_lost(world: World) -> Tensor:
            """The env's firmware was lost (exited, stalled or did not arm)."""
            if self.firmware is None:
                return torch.zeros(world.b, dtype=torch.bool, device=world.device)
            return torch.as_tensor(self.firmware.lost.copy(), device=world.device)

        return firmware_lost

    @property
    def events(self) -> list[Any]:
        """:class:`volary.fc.betaflight.FirmwareEvent` of every firmware lost so far
        (``vehicle``: the env index; ``time``: the World's clock, s; ``cause``; ``log_tail``)."""
        return [] if self.firmware is None else list(self.firmware.events)

    def _reset_envs(self, mask: Tensor) -> None:
        """The masked envs' next episode (the task's draws), each with a fresh firmware booted
        and armed at its start pose; the first call starts every env's firmware."""
        super()._reset_envs(mask)
        if self.firmware is None:
            from volary.fc.loop import FirmwareLoop

            flown = dict(enumerate(self.platforms))
            self.firmware = FirmwareLoop(
                self.world, flown, self.options.exchange_hz, timeout_s=self.options.timeout_s
            )
            self.world.inner = self.firmware
            return
        for slot in torch.nonzero(mask).flatten().tolist():
            self.firmware.restart(self.world, int(slot))

    def evaluate_mlp(self, policy: Any, seed: int) -> None:
        """None: the one-call numba evaluation flies the ideal rate loop, so a policy is always
        stepped through the firmware here."""
        return None

    def close(self, **kwargs: Any) -> None:
        """Stop every firmware process (a later :meth:`reset` starts new ones)."""
        if self.firmware is not None:
            self.firmware.close()
            self.firmware = None
            self.world.inner = None
        self._started = False

    def __enter__(self) -> FirmwarePositionTask:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check(n_envs: int, cfg: PositionTaskConfig, fw: FirmwareOptions) -> list[str]:
    """Every env's platform name, after the checks a firmware-flown task needs (one-line
    ConfigErrors naming the option)."""
    from volary.fc.profiles import RATE_PROFILES
    from volary.sensors.imu import IMU_PRESETS

    within(n_envs, LIMITS["fc_vehicles"], "n_envs")
    if cfg.control != "ctbr":
        raise ConfigError(
            f"control: a firmware flies ctbr actions (collective thrust and body rates as acro "
            f"sticks), got {cfg.control!r}"
        )
    rate_model = getattr(cfg, "rate_model", "loop")  # a lag model would replace the firmware
    if rate_model != "loop":
        raise ConfigError(f"rate_model: the firmware is the rate response; expected 'loop', "
                          f"got {rate_model!r}")  # fmt: skip
    if cfg.random_airframes:
        raise ConfigError(
            "random_airframes: a firmware flies catalogue platforms with a rate profile "
            f"({', '.join(RATE_PROFILES)}), got True"
        )
    names = [cfg.platform] if isinstance(cfg.platform, str) else list(cfg.platform)
    for p in names:
        if p not in RATE_PROFILES:
            raise ConfigError(
                f"platform: expected a platform with a Betaflight rate profile "
                f"({', '.join(RATE_PROFILES)}), got {p!r}"
            )
    if cfg.device != "cpu":
        raise ConfigError(f"device: a firmware-flown env runs on 'cpu', got {cfg.device!r}")
    if fw.imu not in IMU_PRESETS.names():
        raise ConfigError(
            f"imu: expected an IMU preset ({', '.join(IMU_PRESETS.names())}), got {fw.imu!r}"
        )
    _multiple(fw.exchange_hz, cfg.control_hz, "exchange_hz", "control_hz")
    _multiple(cfg.physics_hz, fw.exchange_hz, "physics_hz", "exchange_hz")
    return [names[i % len(names)] for i in range(n_envs)]


def _multiple(value: float, of: float, name: str, other: str) -> None:
    ratio = value / of
    if not math.isfinite(ratio) or round(ratio) < 1 or abs(ratio - round(ratio)) > 1e-9:
        raise ConfigError(f"{name}: expected a whole multiple of {other}={of:g} Hz, got {value:g}")


def _firmware_world(
    n_envs: int, cfg: PositionTaskConfig, platforms: list[str], fw: FirmwareOptions
) -> World:
    """The task's World with the firmware's settings: the Simulator in ``rotor_speeds`` mode at
    the exchange rate, ``exchange_hz / control_hz`` of its steps per control step."""
    from volary.fc.loop import world_settings

    settings = world_settings(cfg.control_hz, fw.exchange_hz, fw.imu)
    return World(
        platforms,
        n_envs=n_envs, physics_hz=cfg.physics_hz, stochastic=cfg.stochastic,
        on_divergence="terminate", device=cfg.device, seed=cfg.seed, compile=cfg.compile,
        **settings,
    )  # fmt: skip
