"""What a server flies: its configuration and the :class:`~volary.sim.World` built from it.

:func:`build_world` is public so that a flight through the service can be compared with the
same flight in-process (the service adds transport, never physics): both start from
``build_world(config)``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from volary.errors import ConfigError, UnknownNameError, not_one_of

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

    def ray_config(self) -> Any:
        """The preset's config (mount, intrinsics, ...) for the ray-cast kinds (depth, lidar,
        tof, rangefinder): what the World builds the sensor from; None for beacons and splat."""
        from volary.sensors import camera_config, lidar_config, rangefinder_config, tof_config

        make = {"depth": camera_config, "lidar": lidar_config, "tof": tof_config,
                "rangefinder": rangefinder_config}  # fmt: skip
        return make[self.kind](self.preset) if self.kind in make else None


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
            raise not_one_of("actor shape", self.shape, ACTOR_SHAPES, shown=str(ACTOR_SHAPES))
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
    forest), a race track of :data:`TRACKS` (gates, IR beacons, gate passages; ``scene_params``
    ``{"course_seed": s, "course": i}`` serves the perturbed course ``i`` of
    ``alphapilot_2019_courses(i + 1, s)`` instead of the nominal one), or None (open space).

    ``firmware``: whose rate loop flies the simulated vehicles' commands: ``"ideal"``
    (volary's, the default) or ``"betaflight"`` (one Betaflight 4.6.0 SITL process per vehicle
    slot, in lock-step, exchanging state and motor outputs once per physics step;
    :class:`volary.fc.loop.FirmwareLoop`). A firmware flies ``control`` ``"ctbr"`` (each command
    becomes acro sticks through :class:`volary.fc.ctbr.StickMap`; armed at a client's hello)
    or ``"sticks"`` (each command is the raw RC frame, ``[roll, pitch, yaw, throttle, arm,
    angle]``, :data:`volary.fc.loop.STICKS`; the client arms it); ``"sticks"`` needs a
    firmware.

    ``noise_keys``: one key per slot, or empty (the default: every stream from ``sim_seed`` and
    the slot's index). With keys, slot i's process and IMU noise (``World(noise_seeds=)``) and
    its sensors' noise (``env_ids``, sensor seed 0) are drawn from key i alone. With
    :func:`volary.studies.alphapilot.race.noise_key` of a course x noise-seed pair, the World
    as built draws what that pair draws in ``volary race``, and so does a flight started with
    ``World.restart_noise`` then a reset (the ROS 1 bridge's arming, and a client's ``hello``
    on ``volary serve``: every client's flight draws the pair's noise from its start)."""

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
    noise_keys: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.slots:
            raise ConfigError("slots: expected at least one vehicle slot")
        for i, s in enumerate(self.slots):
            if s.role not in ROLES:
                raise not_one_of(f"slots[{i}].role", s.role, ROLES, shown=str(ROLES))
            for name in s.sensors:
                if name not in self.sensors:
                    raise ConfigError(
                        f"slots[{i}].sensors: {name!r} is not in sensors ({sorted(self.sensors)})"
                    )
        for name, spec in self.sensors.items():
            if spec.kind not in SENSOR_KINDS:
                raise not_one_of(
                    f"sensors[{name!r}].kind", spec.kind, SENSOR_KINDS, shown=str(SENSOR_KINDS)
                )
            if name == "imu":
                raise ConfigError("sensors: 'imu' is the IMU's name; set ServeConfig.imu")
        if not (isinstance(self.seed, int) and self.seed >= 0):
            raise ConfigError(f"seed: expected an int >= 0, got {self.seed!r}")
        self._check_noise_keys()
        if self.scene_params and self.scene is None:
            raise ConfigError("scene_params: only a scenario type or a race track takes parameters")
        if self.scene in TRACKS:
            _check_track_params(self.scene_params)
        if self.actors and self.scene is None:
            raise ConfigError("actors: need a scene (a scenario type or a race track)")
        if self.firmware not in FIRMWARES:
            raise not_one_of("firmware", self.firmware, FIRMWARES, shown=str(FIRMWARES))
        if self.control == "sticks" and self.firmware == "ideal":
            raise ConfigError(
                "control: 'sticks' (raw RC frames) needs a flight-controller firmware "
                "(firmware='betaflight'), got firmware 'ideal'"
            )
        if self.firmware != "ideal":
            self._check_firmware()

    def _check_noise_keys(self) -> None:
        keys = self.noise_keys
        if not isinstance(keys, tuple):
            raise ConfigError(f"noise_keys: expected a tuple of ints, got {keys!r}")
        if keys and len(keys) != len(self.slots):
            raise ConfigError(
                f"noise_keys: expected one key per slot ({len(self.slots)}), got {len(keys)}"
            )
        for k in keys:
            if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < 2**31:
                raise ConfigError(f"noise_keys: expected ints in [0, 2**31), got {k!r}")

    def _check_firmware(self) -> None:
        """What the Betaflight rate loop needs: CTBR or sticks commands, an IMU for its gyro, a
        profile for every simulated slot's platform (:data:`volary.fc.profiles.RATE_PROFILES`),
        at most ``LIMITS["fc_vehicles"]`` firmware processes."""
        from volary.fc.loop import CONTROLS
        from volary.fc.profiles import rate_profile
        from volary.inputs import LIMITS

        if self.control not in CONTROLS:
            raise ConfigError(
                f"control: firmware {self.firmware!r} flies ctbr commands (collective thrust and "
                f"body rates as acro sticks) or sticks (raw RC frames), got {self.control!r}"
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
    """The SceneSpec of ``config.scene`` (None for open space; a track's perturbed course when
    its ``scene_params`` name one, :data:`TRACK_PARAMS`)."""
    from volary.worlds import alphapilot_2019, make_scenario

    if config.scene is None:
        return None
    if config.scene == "alphapilot_2019":
        params = dict(config.scene_params)
        arena = str(params.get("arena", "empty"))
        if "course_seed" not in params:
            return alphapilot_2019(arena=arena)
        from volary.worlds import alphapilot_2019_courses

        index, generator = int(params.get("course", 0)), str(params.get("generator", "volary"))
        courses = alphapilot_2019_courses(index + 1, int(params["course_seed"]),
                                          generator=generator, arena=arena)  # fmt: skip
        return courses[index]
    return make_scenario(config.scene, config.seed, **dict(config.scene_params))


# a race track's perturbed course and arena (scene_spec)
TRACK_PARAMS = ("course_seed", "course", "generator", "arena")


def check_course_setting(kind: str, value: Any, name: str) -> None:
    """A race track's ``arena`` (one of ``worlds.tracks.ARENAS``) or course ``generator`` (a
    ``COURSE_GENERATORS`` name) ``kind``, refused under the argument ``name``."""
    from volary.worlds.tracks import ARENAS, COURSE_GENERATORS

    if kind == "arena":
        if value not in ARENAS:
            raise not_one_of(name, value, ARENAS, shown=str(ARENAS))
        return
    try:
        COURSE_GENERATORS.get(value)
    except UnknownNameError as e:  # the known names, under the argument's name
        raise ConfigError(f"{name}: {e}") from None


def _check_track_params(params: Mapping[str, Any]) -> None:
    """A race track takes ``course_seed`` (ints >= 0; without it, the nominal course),
    ``course`` (which course of ``alphapilot_2019_courses(course + 1, course_seed,
    generator)``), ``generator`` (a course-generator setting, default ``volary``) and ``arena``
    (``empty``, the default, or ``factory``)."""
    for k, v in params.items():
        if k not in TRACK_PARAMS:
            raise ConfigError(f"scene_params: a race track takes {TRACK_PARAMS}, got {k!r}")
        if k in ("arena", "generator"):
            check_course_setting(k, v, f"scene_params[{k!r}]")
        elif isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**32:
            raise ConfigError(f"scene_params[{k!r}]: expected an int in [0, 2**32), got {v!r}")
    for k in ("course", "generator"):
        if k in params and "course_seed" not in params:
            raise ConfigError(f"scene_params: {k!r} needs 'course_seed' (which draw of courses)")


def build_world(config: ServeConfig) -> Any:
    """The World of ``config``: one env, a vehicle per slot (vehicles of one env see each other
    in ray-cast sensors), every vehicle at the scene's start (open space: [0, 0, 1] m, slots 1
    m apart along y)."""
    from volary.sim import Sensing, World

    spec = scene_spec(config)
    b = len(config.slots)
    keys = list(config.noise_keys) or None
    sensors = {
        name: Sensing(
            _sensor(s, spec, config.seed, keys),
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
        actors=[a.primitive() for a in config.actors] or None, noise_seeds=keys, **settings,
    )  # fmt: skip
    if world.scene is not None and spec.meta.get("order_index") is not None:
        from volary.worlds import GateTracker

        world.gates = GateTracker.for_courses(world.scene, [spec] * world.b)
    pos, quat = start_poses(config, spec)
    world.reset(pos=pos, quat=quat)
    if config.firmware != "ideal":
        from volary.fc.loop import FirmwareLoop

        flown = {s: config.slots[s].platform for s in config.role_slots("vehicle")}
        world.inner = FirmwareLoop(world, flown, config.physics_hz, control=config.control)
    return world


def reset_slot(world: Any, config: ServeConfig, slot: int) -> None:
    """Put vehicle ``slot`` back at its start pose, at rest, with a fresh controller and IMU
    state (what a client's ``hello`` does to the slot it claims)."""
    pos, quat = start_poses(config, scene_spec(config) if world.specs is None else world.specs[0])
    mask = torch.zeros(world.b, dtype=torch.bool, device=world.device)
    mask[slot] = True
    world.reset(mask, pos=pos, quat=quat)
    from volary.fc.loop import FirmwareLoop

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


def _sensor(s: SensorSpec, spec: Any, seed: int, keys: list[int] | None = None) -> Any:
    """The World's sensor for ``s``; with ``keys`` (ServeConfig.noise_keys) its noise streams
    follow the vehicles' keys (``env_ids``), as the sensors of ``volary race`` do."""
    from volary.sim import OnCaster

    config = s.ray_config()
    if config is not None:
        if keys is None:
            return config
        from volary.sim.world import ray_sensor_class

        cls = ray_sensor_class(config)
        return OnCaster(lambda caster: cls(config, caster, env_ids=keys))
    if s.kind == "splat":
        return _splat_camera(s.preset, spec, seed)
    if spec is None or spec.meta.get("order_index") is None:
        raise ConfigError("sensors: 'beacons' need a scene with gates (a race track)")
    from volary.sensors import IrBeacons

    return OnCaster(lambda caster: IrBeacons(s.preset, caster, spec, env_ids=keys))


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


def _firmware_settings(config: ServeConfig) -> dict[str, Any]:
    """The World settings of a firmware-flown config: the Simulator in ``rotor_speeds`` mode
    stepping once per physics step (one firmware exchange each), ``sim_steps`` of them per
    control period, the IMU sampling at the exchange rate."""
    from volary.fc.loop import world_settings

    assert config.imu is not None  # ServeConfig checked it
    return world_settings(config.control_hz, config.physics_hz, config.imu)
