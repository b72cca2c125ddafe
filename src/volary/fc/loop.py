"""Betaflight's rate loop inside a :class:`~volary.sim.World` (the World's ``inner`` hook):
the vehicles' commands (CTBR, or raw RC sticks: :data:`CONTROLS`) fly through one Betaflight
4.6.0 SITL process per vehicle, in lock-step with the World's physics steps. ``volary serve
--firmware betaflight`` and the ROS bridges use it (:mod:`volary.serve.world`); so does
:mod:`volary.fc.env`."""

from __future__ import annotations

import dataclasses
import logging
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from volary.errors import ConfigError

log = logging.getLogger(__name__)
ARM_AFTER_S = 0.5  # s of valid RC before Betaflight 4.6.0 takes the arm switch (recovery delay)
ARM_WITHIN_S = 2.0  # s of firmware clock a fresh firmware gets to arm before it counts as lost
CONTROLS = ("ctbr", "sticks")  # the control levels a firmware-flown vehicle takes
STICKS = ("roll", "pitch", "yaw", "throttle", "arm", "angle")
"""The order of a ``sticks`` setpoint, one Betaflight RC frame
(:class:`~volary.fc.betaflight.Sticks`): roll, pitch and yaw sticks in [-1, 1] (+1: roll right,
pitch forward i.e. nose down, yaw clockwise seen from above: a pilot's sticks), throttle in
[0, 1], then the arm and angle-mode switches in [0, 1] (> 0.5: on; angle off flies acro)."""
_STICK_LIMITS = ("stick", "stick", "stick", "throttle_stick", "switch", "switch")  # inputs.LIMITS


def stick_setpoint(values: Any, arg: str = "command") -> np.ndarray:
    """``values`` (6 numbers in :data:`STICKS` order) as a float64 vector, each within its
    declared limit (``volary.inputs.LIMITS``), else ConfigError naming ``arg``'s element and
    stick, e.g. ``command[3] (throttle): expected a finite number in [0, 1] ...``."""
    from volary.inputs import within

    row = np.asarray(values, dtype=np.float64).reshape(-1)
    if row.size != len(STICKS):
        raise ConfigError(f"{arg}: expected {len(STICKS)} numbers {STICKS}, got {row.size}")
    for i, (name, limit) in enumerate(zip(STICKS, _STICK_LIMITS, strict=True)):
        within(float(row[i]), limit, f"{arg}[{i}] ({name})")
    return row


def sticks_of(row: Any) -> Any:
    """A ``sticks`` setpoint (:data:`STICKS` order) as the :class:`~volary.fc.betaflight.Sticks`
    RC frame the firmware gets (switches on above 0.5)."""
    from volary.fc.betaflight import Sticks

    roll, pitch, yaw, throttle, arm, angle = (float(v) for v in row)
    return Sticks(roll=roll, pitch=pitch, yaw=yaw, throttle=throttle, arm=arm > 0.5,
                  angle=angle > 0.5)  # fmt: skip


def world_settings(control_hz: float, physics_hz: float, imu: str) -> dict[str, Any]:
    """The :class:`~volary.sim.World` settings of a firmware-flown world: the Simulator in
    ``rotor_speeds`` mode stepping once per physics step (one firmware exchange each),
    ``sim_steps`` of them per control period, the IMU preset ``imu`` sampling at the exchange
    rate. ``control_hz`` must divide ``physics_hz``."""
    from volary.sensors.imu import imu_config

    ratio = physics_hz / control_hz
    steps = round(ratio)
    if abs(ratio - steps) > 1e-9 or steps < 1:
        raise ConfigError(
            f"control_hz: expected a divisor of physics_hz={physics_hz:g}, got {control_hz:g}"
        )
    config = dataclasses.replace(imu_config(imu), rate_hz=physics_hz)
    return {"control": "rotor_speeds", "control_hz": physics_hz, "imu": config,
            "sim_steps": steps}  # fmt: skip


def _close_banks(banks: dict[int, Any]) -> None:
    for bank in banks.values():
        if bank is not None:
            bank.close()


def _body_gravity(quat: np.ndarray) -> np.ndarray:
    """The specific force (m/s^2, body FLU) of a vehicle at rest with attitude ``quat``."""
    w, x, y, z = (float(v) for v in quat)
    # the third row of R(q) (body -> world) is the world's z axis in body coordinates
    return 9.81 * np.array([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)])


class FirmwareLoop:
    """Betaflight flies the World's simulated vehicles: one Betaflight 4.6.0 SITL process per
    vehicle it flies (:class:`volary.fc.betaflight.FirmwareBank` of one, so each firmware
    restarts alone), set as the World's :attr:`~volary.sim.World.inner`; "slot" below is a
    vehicle index of the World (a server's vehicle slot).

    ``control="ctbr"`` (the default): each control period's command (``[thrust N, p, q, r
    rad/s FLU]``) becomes an armed acro RC frame through the slot's
    :class:`volary.fc.ctbr.StickMap` (its platform's :data:`volary.fc.profiles.RATE_PROFILES`
    entry, also the firmware's configuration). ``control="sticks"``: the command is the RC
    frame itself (:data:`STICKS`: sticks, throttle, arm and angle switches; values outside
    [-1, 1] / [0, 1] are clipped as the receiver would; a server checks them first, see
    :func:`stick_setpoint`). Either frame is held for the period; at every physics step the
    firmware gets that frame and the vehicle's state (the IMU's gyro and specific force,
    attitude, velocity, position) and its motor outputs become the rotor speed commands of the
    step (lock-step: the firmware's clock is the exchanges' count / ``physics_hz``).

    Arming: a fresh firmware (at construction, and at each :meth:`restart`, e.g. a server
    client's ``hello``) is booted and fed the vehicle at rest at its start pose with valid RC,
    arm switch off, for :data:`ARM_AFTER_S` s (Betaflight's RC recovery delay). With ``ctbr``
    it is then armed (switch on until its motors idle) before the vehicle flies, and commands
    keep the switch on. With ``sticks`` it is left disarmed: the commands' arm switch arms it
    at once, as a pilot does, and disarms it. A firmware that exits, stalls, or does not arm is
    lost: its vehicle's rotor commands are zero from then on (it falls), ``lost[slot]`` is set
    (the ``firmware_lost`` event of the slot's ``obs``), a :class:`FirmwareEvent` with the
    slot as ``vehicle`` goes to ``events``, and the World and the other slots go on."""

    setpoint_size = 4  # ctbr: [collective thrust N, p, q, r rad/s]; sticks: 6 (STICKS)

    def __init__(
        self,
        world: Any,
        platforms: Mapping[int, str],
        hz: float,
        *,
        timeout_s: float = 10.0,
        control: str = "ctbr",
    ) -> None:
        """``platforms``: vehicle index -> platform name of every vehicle the firmware flies
        (the others get zero rotor commands); ``hz``: the exchange rate, the World's physics
        rate; ``control``: one of :data:`CONTROLS`, what a command row is."""
        from volary.fc.betaflight import FirmwareError, configure, find
        from volary.fc.ctbr import StickMap
        from volary.fc.profiles import rate_profile
        from volary.platforms import get

        if control not in CONTROLS:
            raise ConfigError(f"control: expected one of {CONTROLS}, got {control!r}")
        if find() is None:
            raise FirmwareError(
                "betaflight SITL is not built: run `python -m volary.fc.betaflight build`"
            )
        self.control = control
        self.setpoint_size = len(STICKS) if control == "sticks" else 4
        self.hz = float(hz)
        self.timeout_s = timeout_s
        self.platform = dict(platforms)
        names = set(self.platform.values())
        self.airframe = {p: get(p) for p in names}
        self.eeprom = {p: configure(rate_profile(p).profile()) for p in names}
        self.maps = {p: StickMap.for_platform(p, rate_profile(p)) for p in names}
        self.banks: dict[int, Any] = {s: None for s in self.platform}
        self.clock: dict[int, int] = {s: 0 for s in self.platform}  # exchanges on its clock
        self.lost = np.zeros(world.b, dtype=bool)
        """(B,) per slot: its firmware was lost (the ``firmware_lost`` event)."""
        self.events: list[Any] = []
        """:class:`volary.fc.betaflight.FirmwareEvent` of every lost firmware (``vehicle``:
        the slot; ``time``: the World's clock)."""
        self._rest: set[int] = set()  # slots whose next exchange reads the vehicle at rest
        self._sticks: dict[int, Any] = {}
        self._finalizer = weakref.finalize(self, _close_banks, self.banks)
        for s in self.platform:
            why = self._start(world, s)
            if why is not None:
                self.close()
                raise FirmwareError(f"betaflight: vehicle slot {s}: {why}")

    def _start(self, world: Any, slot: int) -> str | None:
        """A fresh firmware for ``slot``, booted with its vehicle at rest where it is and armed
        (``ctbr``) or ready to arm (``sticks``); None, or why it could not be (the slot then
        has no firmware)."""
        from volary.fc.betaflight import FirmwareBank, FirmwareError, Sticks

        old, self.banks[slot] = self.banks[slot], None
        if old is not None:
            old.close()
        p = self.platform[slot]
        try:
            bank = FirmwareBank([self.airframe[p]], [self.eeprom[p]], timeout_s=self.timeout_s)
        except FirmwareError as e:
            return f"did not boot: {e}"
        st = world.sim.state
        quat = st.quat[slot].double().numpy()[None]
        pos, zero = st.pos[slot].double().numpy()[None], np.zeros((1, 3))
        force = _body_gravity(quat[0])[None]
        arm_at = round(ARM_AFTER_S * self.hz)
        for j in range(round(ARM_WITHIN_S * self.hz)):
            sticks = Sticks(throttle=0.0, arm=j >= arm_at, angle=False)
            if self.control == "sticks" and j == arm_at:  # ready: the client arms it
                self._ready(slot, bank, j)
                return None
            bank.commands(j / self.hz, [sticks], zero, force, quat, zero, pos)
            if not bank.alive[0]:
                bank.close()
                return f"lost while arming ({bank.events[-1].cause})"
            if j >= arm_at and float(bank.motors[0].max()) > 0.0:
                self._ready(slot, bank, j + 1)
                return None
        bank.close()
        return f"did not arm within {ARM_WITHIN_S:g} s of its clock"

    def _ready(self, slot: int, bank: Any, clock: int) -> None:
        self.banks[slot], self.clock[slot] = bank, clock
        self.lost[slot] = False
        self._rest.add(slot)

    def restart(self, world: Any, slot: int) -> None:
        """A fresh firmware for ``slot`` (its vehicle just reset): booted and armed (``ctbr``)
        or ready to arm (``sticks``), or the slot's firmware is lost (an event; the server goes
        on)."""
        why = self._start(world, slot)
        if why is not None:
            self._lose(world, slot, why, "")

    def _lose(self, world: Any, slot: int, cause: str, log_tail: str) -> None:
        from volary.fc.betaflight import FirmwareEvent

        self.lost[slot] = True
        event = FirmwareEvent(time=world.tick * world.dt, vehicle=slot, cause=cause,
                              log_tail=log_tail)  # fmt: skip
        self.events.append(event)
        log.warning("vehicle %d: betaflight firmware lost: %s", slot, cause)

    def _check(self, cmd: np.ndarray) -> None:
        """Every flown vehicle's command row within its limits before any frame is sent: a
        NaN stick would read as a full one in the firmware's RC frame, a NaN thrust or rate as
        whatever the stick mapping clips it to. (``volary serve`` checks its clients' commands
        already; this is the check for a World flown with a FirmwareLoop directly.)"""
        for s in self.platform:
            if self.control == "sticks":
                stick_setpoint(cmd[s], f"command[{s}]")
            elif not np.isfinite(cmd[s, :4]).all():
                raise ConfigError(
                    f"command[{s}]: expected finite [collective thrust N, p, q, r rad/s], "
                    f"got {cmd[s, :4].tolist()}"
                )

    def __call__(self, world: Any, command: Any, k: int) -> torch.Tensor:
        """The rotor speed commands of the period's ``k``-th physics step (World.inner)."""
        live = [s for s, bank in self.banks.items() if bank is not None]
        if k == 0:
            cmd = torch.as_tensor(command).detach().cpu().double().numpy()
            self._check(cmd)
            if self.control == "sticks":
                self._sticks = {s: sticks_of(cmd[s]) for s in live}
            else:
                maps = self.maps
                self._sticks = {
                    s: maps[self.platform[s]].sticks(float(cmd[s, 0]), cmd[s, 1:4]) for s in live
                }
        st = world.sim.state
        pos, vel = st.pos.double().numpy(), st.vel.double().numpy()
        quat, omega = st.quat.double().numpy(), st.omega.double().numpy()
        reading = world.sim.imu_reading
        for s in live:
            if reading is None or s in self._rest:  # no sample since its reset: at rest
                gyro, force = omega[s], _body_gravity(quat[s])
            else:
                gyro, force = reading.gyro[s].double().numpy(), reading.accel[s].double().numpy()
            row = slice(s, s + 1)
            self.banks[s].send(self.clock[s] / self.hz, [self._sticks[s]], gyro[None],
                               force[None], quat[row], vel[row], pos[row])  # fmt: skip
        out = np.zeros((world.b, world.params.n_rotors))
        for s in live:
            bank = self.banks[s]
            rotor = bank.receive(self.clock[s] / self.hz)
            self.clock[s] += 1
            if bank.alive[0]:
                out[s] = rotor[0]
                continue
            lost = bank.events[-1]
            bank.close()
            self.banks[s] = None
            self._lose(world, s, lost.cause, lost.log_tail)
        self._rest.difference_update(live)
        return torch.from_numpy(out).to(world.params.mass.dtype)

    def close(self) -> None:
        """Stop every firmware process."""
        _close_banks(self.banks)
        for s in self.banks:
            self.banks[s] = None
