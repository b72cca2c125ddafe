"""What a server flies: its configuration and the :class:`~volary.sim.World` built from it.

:func:`build_world` is public so that a flight through the service can be compared with the
same flight in-process (the service adds transport, never physics): both start from
``build_world(config)``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from volary.errors import ConfigError

ROLES = ("vehicle", "in_loop")
ACTOR_SHAPES = ("box", "cylinder", "sphere", "mesh")
SENSOR_KINDS = ("depth", "lidar", "tof", "rangefinder", "beacons", "splat")
TRACKS = ("alphapilot_2019",)
log = logging.getLogger(__name__)
FIRMWARES = ("ideal", "betaflight")  # ServeConfig.firmware: the vehicles' rate loop


@dataclass(frozen=True)
class SensorSpec:
    """One sensor of the server's rig: ``kind`` (one of :data:`SENSOR_KINDS`), the preset of
    that kind (``camera_config``, ``lidar_config``, ``tof_config``, ``rangefinder_config``
    names; ``beacons`` take a camera preset; ``splat``: ``WIDTHxHEIGHT`` of a photoreal RGB
    camera rendering the scene's Gaussian splats, 90 deg horizontal field of view, forward
    mount) and its rate (None: every control step)."""

    kind: str
    preset: str
    rate_hz: float | None = None


@dataclass(frozen=True)
class SlotSpec:
    """One vehicle slot. ``role``: ``"vehicle"`` (simulated: the client sends commands) or
    ``"in_loop"`` (the client sends poses; no dynamics). ``sensors``: names in
    :attr:`ServeConfig.sensors` this vehicle carries."""

    role: str = "vehicle"
    platform: str = "crazyflie"
    sensors: tuple[str, ...] = ()


@dataclass(frozen=True)
class ActorSpec:
    """A dynamic actor a client poses (role ``"actor"``): ``shape`` one of
    :data:`ACTOR_SHAPES` centred on the actor's origin; ``size`` (m): a box's full extents, a
    cylinder's (diameter, diameter, length) along its z, a sphere's (diameter, ...); a mesh:
    ``mesh``, an OBJ/STL/PLY file in the actor's frame (``size`` unused). The default is a
    standing person (a 0.5 x 1.8 m cylinder)."""

    shape: str = "cylinder"
    size: tuple[float, float, float] = (0.5, 0.5, 1.8)
    mesh: str | None = None

    def __post_init__(self) -> None:
        if self.shape not in ACTOR_SHAPES:
            raise ConfigError(f"actor shape: expected one of {ACTOR_SHAPES}, got {self.shape!r}")
        if self.shape == "mesh" and not self.mesh:
            raise ConfigError("actor shape 'mesh': give the mesh file (mesh=PATH)")
        if len(self.size) != 3 or not all(math.isfinite(v) and v > 0 for v in self.size):
            raise ConfigError(f"actor size: expected three sizes > 0 m, got {self.size!r}")

    def primitive(self) -> Any:
        """The actor's shape as a :mod:`volary.worlds.primitives` object in its own frame."""
        from volary.worlds.primitives import Box, Cylinder, Mesh, Sphere

        o = (0.0, 0.0, 0.0)
        sx, _, sz = self.size
        if self.shape == "box":
            return Box(center=o, size=self.size)
        if self.shape == "cylinder":
            return Cylinder(center=o, radius=sx / 2, length=sz)
        if self.shape == "sphere":
            return Sphere(center=o, radius=sx / 2)
        from volary.worlds.io import load_mesh

        m = load_mesh(str(self.mesh))
        return Mesh(m.vertices, m.triangles, name=str(self.mesh))


@dataclass(frozen=True)
class ServeConfig:
    """The world a server hosts: its vehicle slots, the scene, the control level of the
    simulated vehicles, the sensors and the IMU preset (every vehicle; None: no IMU).

    ``scene``: a scenario type of :func:`volary.worlds.make_scenario` (with ``seed`` and the
    type's parameter overrides ``scene_params``, e.g. ``{"length": 20.0}`` for a shorter
    forest), a race track of :data:`TRACKS` (gates, IR beacons, gate passages), or None (open
    space).

    ``firmware``: whose rate loop flies the simulated vehicles' commands: ``"ideal"``
    (volary's, the default) or ``"betaflight"`` (one Betaflight 4.6.0 SITL process per vehicle
    slot, in lock-step, exchanging state and motor outputs once per physics step; control
    ``ctbr`` only: each command becomes acro sticks through :class:`volary.fc.ctbr.StickMap`;
    :class:`FirmwareLoop`)."""

    slots: tuple[SlotSpec, ...] = (SlotSpec(),)
    scene: str | None = "forest"
    seed: int = 0
    control: str = "ctbr"
    control_hz: float = 60.0
    physics_hz: float = 960.0
    imu: str | None = "bmi085"
    sensors: Mapping[str, SensorSpec] = field(default_factory=dict)
    sim_seed: int = 0
    actors: tuple[ActorSpec, ...] = ()
    scene_params: Mapping[str, Any] = field(default_factory=dict)
    firmware: str = "ideal"

    def __post_init__(self) -> None:
        if not self.slots:
            raise ConfigError("slots: expected at least one vehicle slot")
        for i, s in enumerate(self.slots):
            if s.role not in ROLES:
                raise ConfigError(f"slots[{i}].role: expected one of {ROLES}, got {s.role!r}")
            for name in s.sensors:
                if name not in self.sensors:
                    raise ConfigError(
                        f"slots[{i}].sensors: {name!r} is not in sensors ({sorted(self.sensors)})"
                    )
        for name, spec in self.sensors.items():
            if spec.kind not in SENSOR_KINDS:
                raise ConfigError(
                    f"sensors[{name!r}].kind: expected one of {SENSOR_KINDS}, got {spec.kind!r}"
                )
            if name == "imu":
                raise ConfigError("sensors: 'imu' is the IMU's name; set ServeConfig.imu")
        if not (isinstance(self.seed, int) and self.seed >= 0):
            raise ConfigError(f"seed: expected an int >= 0, got {self.seed!r}")
        if self.scene_params and (self.scene is None or self.scene in TRACKS):
            raise ConfigError("scene_params: only a scenario type takes parameters")
        if self.actors and self.scene is None:
            raise ConfigError("actors: need a scene (a scenario type or a race track)")
        if self.firmware not in FIRMWARES:
            raise ConfigError(f"firmware: expected one of {FIRMWARES}, got {self.firmware!r}")
        if self.firmware != "ideal":
            self._check_firmware()

    def _check_firmware(self) -> None:
        """What the Betaflight rate loop needs: CTBR commands, an IMU for its gyro, a profile
        for every simulated slot's platform (:data:`volary.fc.profiles.RATE_PROFILES`), at most
        ``LIMITS["fc_vehicles"]`` firmware processes."""
        from volary.fc.profiles import rate_profile
        from volary.inputs import LIMITS

        if self.control != "ctbr":
            raise ConfigError(
                f"control: firmware {self.firmware!r} flies ctbr commands (collective thrust and "
                f"body rates as acro sticks), got {self.control!r}"
            )
        if self.imu is None:
            raise ConfigError(f"imu: firmware {self.firmware!r} reads the IMU; give a preset")
        flown = self.role_slots("vehicle")
        most = int(LIMITS["fc_vehicles"].hi)
        if len(flown) > most:
            raise ConfigError(
                f"slots: firmware {self.firmware!r} runs one process per simulated vehicle, at "
                f"most {most}; got {len(flown)}"
            )
        for i in flown:
            rate_profile(self.slots[i].platform)

    def role_slots(self, role: str) -> list[int]:
        """Vehicle slots of ``role``; for ``"actor"``, the actor indices."""
        if role == "actor":
            return list(range(len(self.actors)))
        return [i for i, s in enumerate(self.slots) if s.role == role]


def scene_spec(config: ServeConfig) -> Any:
    """The SceneSpec of ``config.scene`` (None for open space)."""
    from volary.worlds import alphapilot_2019, make_scenario

    if config.scene is None:
        return None
    if config.scene == "alphapilot_2019":
        return alphapilot_2019()
    return make_scenario(config.scene, config.seed, **dict(config.scene_params))


def build_world(config: ServeConfig) -> Any:
    """The World of ``config``: one env, a vehicle per slot (vehicles of one env see each other
    in ray-cast sensors), every vehicle at the scene's start (open space: [0, 0, 1] m, slots 1
    m apart along y)."""
    from volary.sim import Sensing, World

    spec = scene_spec(config)
    b = len(config.slots)
    sensors = {
        name: Sensing(
            _sensor(s, spec, config.seed),
            rate_hz=s.rate_hz,
            vehicles=tuple(i for i, slot in enumerate(config.slots) if name in slot.sensors),
        )
        for name, s in config.sensors.items()
    }
    settings: dict[str, Any] = {"control": config.control, "control_hz": config.control_hz,
                                "physics_hz": config.physics_hz, "imu": config.imu}  # fmt: skip
    if config.firmware != "ideal":  # the firmware's exchanges are the Simulator's steps
        settings.update(_firmware_settings(config))
    platforms = [s.platform for s in config.slots]
    world = World(
        platforms, spec, n_envs=1, vehicles_per_env=b, sensors=sensors, seed=config.sim_seed,
        actors=[a.primitive() for a in config.actors] or None, **settings,
    )  # fmt: skip
    if world.scene is not None and spec.meta.get("order_index") is not None:
        from volary.worlds import GateTracker

        world.gates = GateTracker.for_courses(world.scene, [spec] * world.b)
    pos, quat = start_poses(config, spec)
    world.reset(pos=pos, quat=quat)
    if config.firmware != "ideal":
        world.inner = FirmwareLoop(world, config)
    return world


def reset_slot(world: Any, config: ServeConfig, slot: int) -> None:
    """Put vehicle ``slot`` back at its start pose, at rest, with a fresh controller and IMU
    state (what a client's ``hello`` does to the slot it claims)."""
    pos, quat = start_poses(config, scene_spec(config) if world.specs is None else world.specs[0])
    mask = torch.zeros(world.b, dtype=torch.bool, device=world.device)
    mask[slot] = True
    world.reset(mask, pos=pos, quat=quat)
    if isinstance(world.inner, FirmwareLoop) and slot in world.inner.banks:
        world.inner.restart(world, slot)


def start_poses(config: ServeConfig, spec: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, 3) start positions and (B, 4) attitudes: the scene's start (yaw from the spec),
    slots 1 m apart across the start heading."""
    b = len(config.slots)
    start = (0.0, 0.0, 1.0) if spec is None else tuple(spec.start)
    yaw = 0.0 if spec is None else float(spec.start_yaw)
    side = torch.tensor([-math.sin(yaw), math.cos(yaw), 0.0], dtype=torch.float64)
    offsets = torch.arange(b, dtype=torch.float64) - (b - 1) / 2
    pos = torch.tensor(start, dtype=torch.float64) + offsets[:, None] * side
    quat = torch.tensor([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]).expand(b, 4)
    return pos.float(), quat.float()


def _sensor(s: SensorSpec, spec: Any, seed: int) -> Any:
    from volary.sensors import camera_config, lidar_config, rangefinder_config, tof_config

    make = {
        "depth": camera_config,
        "lidar": lidar_config,
        "tof": tof_config,
        "rangefinder": rangefinder_config,
    }
    if s.kind in make:
        return make[s.kind](s.preset)
    if s.kind == "splat":
        return _splat_camera(s.preset, spec, seed)
    if spec is None or spec.meta.get("order_index") is None:
        raise ConfigError("sensors: 'beacons' need a scene with gates (a race track)")
    from volary.sensors import IrBeacons
    from volary.sim import OnCaster

    return OnCaster(lambda caster: IrBeacons(s.preset, caster, spec))


def _splat_camera(preset: str, spec: Any, seed: int) -> Any:
    """A ``(pos, quat) -> SplatImage`` camera over the scene's Gaussian splats (synthesized
    from the scene with its seed, as SOUS VIDE's scenes are; gsplat on CUDA where installed,
    the torch or numba path elsewhere)."""
    from volary.sensors.splat import SplatCamera, synthesize

    if spec is None:
        raise ConfigError("sensors: 'splat' needs a scene to synthesize splats from")
    w, _, h = preset.partition("x")
    if not (w.isdigit() and h.isdigit() and int(w) > 0 and int(h) > 0):
        raise ConfigError(f"splat preset: expected WIDTHxHEIGHT such as 64x64, got {preset!r}")
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # gsplat renders on CUDA
    return SplatCamera(synthesize(spec, seed).to(dev), int(w), int(h), math.pi / 2)


# ---- Betaflight's rate loop in the World (ServeConfig.firmware = "betaflight") ----------------
ARM_AFTER_S = 0.5  # s of valid RC before Betaflight 4.6.0 takes the arm switch (recovery delay)
ARM_WITHIN_S = 2.0  # s of firmware clock a fresh firmware gets to arm before it counts as lost


def _firmware_settings(config: ServeConfig) -> dict[str, Any]:
    """The World settings of a firmware-flown config: the Simulator in ``rotor_speeds`` mode
    stepping once per physics step (one firmware exchange each), ``sim_steps`` of them per
    control period, the IMU sampling at the exchange rate."""
    from volary.sensors.imu import imu_config

    ratio = config.physics_hz / config.control_hz
    steps = round(ratio)
    if abs(ratio - steps) > 1e-9 or steps < 1:
        raise ConfigError(
            f"control_hz: expected a divisor of physics_hz={config.physics_hz:g}, "
            f"got {config.control_hz:g}"
        )
    assert config.imu is not None  # ServeConfig checked it
    imu = dataclasses.replace(imu_config(config.imu), rate_hz=config.physics_hz)
    return {"control": "rotor_speeds", "control_hz": config.physics_hz, "imu": imu,
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
    ``"vehicle"`` slot (:class:`volary.fc.betaflight.FirmwareBank` of one, so a slot's
    firmware restarts alone), set as the World's :attr:`~volary.sim.World.inner`.

    Each control period's CTBR command (``[thrust N, p, q, r rad/s FLU]``) becomes an armed
    acro RC frame through the slot's :class:`volary.fc.ctbr.StickMap` (its platform's
    :data:`volary.fc.profiles.RATE_PROFILES` entry, also the firmware's configuration), held
    for the period; at every physics step the firmware gets that frame and the vehicle's state
    (the IMU's gyro and specific force, attitude, velocity, position) and its motor outputs
    become the rotor speed commands of the step (lock-step: the firmware's clock is the
    exchanges' count / ``physics_hz``).

    Arming: a fresh firmware (at construction, and at each :func:`reset_slot`, i.e. a client's
    ``hello``) is booted and armed before the vehicle flies: fed the vehicle at rest at its
    start pose with the arm switch off for :data:`ARM_AFTER_S` s, then on until its motors
    idle. Commands keep the switch on. A firmware that exits, stalls, or does not arm is
    lost: its vehicle's rotor commands are zero from then on (it falls), ``lost[slot]`` is set
    (the ``firmware_lost`` event of the slot's ``obs``), a :class:`FirmwareEvent` with the
    slot as ``vehicle`` goes to ``events``, and the World and the other slots go on."""

    setpoint_size = 4  # ctbr: [collective thrust N, p, q, r rad/s]

    def __init__(self, world: Any, config: ServeConfig, *, timeout_s: float = 10.0) -> None:
        from volary.fc.betaflight import FirmwareError, configure, find
        from volary.fc.ctbr import StickMap
        from volary.fc.profiles import rate_profile
        from volary.platforms import get

        if find() is None:
            raise FirmwareError(
                "betaflight SITL is not built: run `python -m volary.fc.betaflight build`"
            )
        self.hz = float(config.physics_hz)
        self.timeout_s = timeout_s
        self.platform = {s: config.slots[s].platform for s in config.role_slots("vehicle")}
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
        """A fresh firmware for ``slot``, booted and armed with its vehicle at rest where it
        is; None, or why it could not be (the slot then has no firmware)."""
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
            bank.commands(j / self.hz, [sticks], zero, force, quat, zero, pos)
            if not bank.alive[0]:
                bank.close()
                return f"lost while arming ({bank.events[-1].cause})"
            if j >= arm_at and float(bank.motors[0].max()) > 0.0:
                self.banks[slot], self.clock[slot] = bank, j + 1
                self.lost[slot] = False
                self._rest.add(slot)
                return None
        bank.close()
        return f"did not arm within {ARM_WITHIN_S:g} s of its clock"

    def restart(self, world: Any, slot: int) -> None:
        """A fresh firmware for ``slot`` (its vehicle just reset): booted and armed, or the
        slot's firmware is lost (an event; the server goes on)."""
        why = self._start(world, slot)
        if why is not None:
            self._lose(world, slot, why, "")

    def _lose(self, world: Any, slot: int, cause: str, log_tail: str) -> None:
        from volary.fc.betaflight import FirmwareEvent

        self.lost[slot] = True
        event = FirmwareEvent(time=world.tick * world.dt, vehicle=slot, cause=cause,
                              log_tail=log_tail)  # fmt: skip
        self.events.append(event)
        log.warning("serve: vehicle slot %d: betaflight firmware lost: %s", slot, cause)

    def __call__(self, world: Any, command: Any, k: int) -> torch.Tensor:
        """The rotor speed commands of the period's ``k``-th physics step (World.inner)."""
        live = [s for s, bank in self.banks.items() if bank is not None]
        if k == 0:
            cmd = torch.as_tensor(command).detach().cpu().double().numpy()
            self._sticks = {
                s: self.maps[self.platform[s]].sticks(float(cmd[s, 0]), cmd[s, 1:4]) for s in live
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
