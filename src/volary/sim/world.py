"""The World: vehicles, their controllers and sensors, flying through one scene per env.

A World owns a :class:`~volary.sim.Simulator` (vehicles, controllers, physics), the per-env
scene and its collision queries, a ray caster (built on first use), a **sensor rig** (any
volary sensor at its own rate), optional gates, and the per-vehicle **episode status** that
end conditions (:mod:`volary.sim.terms`) write: which vehicles are still flying, why each one
stopped and when.

Several vehicles per env: ``vehicles_per_env=M`` flies ``N x M`` vehicles, flat index
``b = env * M + slot``. Vehicles of one env share its scene, see each other in every ray-cast
sensor (each vehicle is a sphere of its ``VehicleParams.radius``, object id
``VEHICLE_ID + slot``) and collide with each other (:func:`vehicle_contacts`).

>>> world = World("crazyflie", make_scenario("forest", 3), n_envs=8,
...               sensors={"depth": Sensing(camera_config("aerial_gym_64"), rate_hz=15)})
>>> world.reset(pos=torch.tensor(world.specs[0].start))
>>> world.step(setpoint)                                # one control period
>>> world.readings()["depth"].depth                     # due at 15 Hz, rendered on demand
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numba
import numpy as np
import torch
from torch import Tensor

from volary.errors import ConfigError, not_one_of
from volary.sim.downwash import downwash_scales, downwash_wake, emitter_constants
from volary.sim.simulator import Simulator
from volary.worlds.primitives import Scene, SceneSpec

VEHICLE_ID = 1_000_000  # object id of vehicle slot m in ray hits: VEHICLE_ID + m
COLLIDERS = ("sphere", "box")  # World(collider=...)


# rotor radii below a vehicle within which a World looks for a surface for the ground effect:
# at 10 radii the Cheeseman-Bennett gain is 1.0016
GROUND_EFFECT_RANGE = 10.0


@dataclass(frozen=True)
class Sensing:
    """One sensor of the rig: what it is, how often it reads, which vehicle slots carry it.

    ``sensor``: a ray-sensor config (``CameraConfig``, ``LidarConfig``, ``TofConfig``,
    ``RangefinderConfig``: built on the World's caster), an :class:`OnCaster` (a factory
    ``caster -> sensor``, such as IR beacons), or any callable
    ``(pos (B, 3), quat (B, 4)) -> reading`` (a splat camera, say). Its mount lives in
    its config. ``rate_hz``: None reads every control step; otherwise at most the control rate,
    read at the first control step at or after each sample time (exact for a divisor of the
    control rate). ``vehicles``: slots 0..M-1 that carry it (None: all); the others read as misses.
    """

    sensor: Any
    rate_hz: float | None = None
    vehicles: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Placement:
    """Poses of vehicles in the loop for :meth:`World.step`: ``mask`` (B,) bool selects them,
    ``pos`` (B, 3) m, ``quat`` (B, 4) [w, x, y, z] (normalized here unless unit to 1e-5),
    ``vel`` (B, 3) m/s (world) and ``omega`` (B, 3) rad/s (body), zero when None. Rows outside
    the mask are ignored."""

    mask: Tensor
    pos: Tensor
    quat: Tensor
    vel: Tensor | None = None
    omega: Tensor | None = None


@dataclass(frozen=True)
class OnCaster:
    """A rig sensor built on the World's ray caster, on its first reading:
    ``OnCaster(lambda caster: IrBeacons("aerial_gym_64", caster, spec))``."""

    build: Callable[[Any], Any]


class World:
    """N envs x M vehicles flying through their scenes with a sensor rig (module docstring).

    ``platforms``, ``controller``, ``gains`` and other keywords go to the Simulator (one
    platform per vehicle, tiled to ``n_envs * vehicles_per_env``), unless ``sim`` is a
    Simulator built already. ``scene``: None, one SceneSpec for every env, one per env, or a
    ``Scene`` stacked per vehicle. ``noise_seeds``: one seed per vehicle for its process noise
    (default: the Simulator's ``(seed, index)`` streams). ``gates``: a GateTracker per vehicle,
    advanced by every step for the vehicles still flying (the others' ``passed`` stands still).
    ``collider``: what hits the scene, ``"sphere"`` (``VehicleParams.radius``) or ``"box"`` (the
    oriented box that fits the frame, ``VehicleParams.collider_half``, turning with the
    vehicle; :mod:`volary.worlds.collider`). Vehicles and actors meet as spheres either way.
    ``sim_steps``: Simulator steps per control period (the World's ``dt`` is ``sim_steps``
    times the Simulator's); :attr:`inner` turns the period's command into each step's setpoint.
    """

    def __init__(
        self,
        platforms: Any = None,
        scene: SceneSpec | Sequence[SceneSpec] | Scene | None = None,
        *,
        n_envs: int | None = None,
        vehicles_per_env: int = 1,
        sensors: Mapping[str, Any] | None = None,
        gates: Any = None,
        noise_seeds: Sequence[int] | None = None,
        caster: Any = None,
        actors: Sequence[Any] | None = None,
        sim: Simulator | None = None,
        collider: str = "sphere",
        sim_steps: int = 1,
        **sim_kwargs: Any,
    ) -> None:
        self.sim_steps = _positive_int(sim_steps, "sim_steps")
        self.inner: Callable[[World, Any, int], Any] | None = None
        """``inner(world, command, k)``: the setpoint of the k-th of the ``sim_steps``
        Simulator steps of a control period, from the period's ``command`` and the state the
        step before left (a flight controller's rate loop: ``volary serve --firmware
        betaflight``). None: the command itself at every step."""
        if collider not in COLLIDERS:
            raise not_one_of("collider", collider, COLLIDERS)
        self.collider = collider
        self.m = _positive_int(vehicles_per_env, "vehicles_per_env")
        self.sim = sim if sim is not None else _simulator(platforms, n_envs, self.m, sim_kwargs)
        if sim is not None and (platforms is not None or sim_kwargs):
            raise ConfigError("sim: pass either a Simulator or platforms and its settings")
        if self.sim.n_envs % self.m:
            raise ConfigError(
                f"vehicles_per_env: expected a divisor of the {self.sim.n_envs} vehicles, "
                f"got {self.m}"
            )
        self.n = self.sim.n_envs // self.m
        if noise_seeds is not None:
            self.seed_noise(noise_seeds)
        self.specs, self.scene = self._scene(scene)
        self.actors: Any = None
        """:class:`~volary.sim.actors.Actors` of the World (``actors=``: their shapes), or
        None; place them with ``world.actors.place(k, pos, quat)``."""
        if actors is not None:
            from volary.sim.actors import Actors

            if self.scene is None:
                raise ConfigError("actors: a World with actors needs a scene (SceneSpecs)")
            self.actors = Actors(actors, self.n, device=self.device,
                                 dtype=self.sim.params.mass.dtype)  # fmt: skip
        self._caster = caster
        self.gates = gates
        self.rig = {name: _sensing(name, s, self) for name, s in (sensors or {}).items()}
        dev = self.device
        self.active = torch.ones(self.b, dtype=torch.bool, device=dev)
        """(B,) bool: the vehicle is flying its episode (ended ones still fly, hovering)."""
        self.cause = torch.full((self.b,), -1, dtype=torch.int64, device=dev)
        """(B,) int64: index into :attr:`cause_names` of why the vehicle stopped; -1: flying."""
        self.cause_names: list[str] = []
        self.end_time = torch.full((self.b,), math.nan, dtype=torch.float64, device=dev)
        """(B,) s of episode time when the vehicle stopped; NaN while flying."""
        self.t0 = self.sim.state.time.to(torch.float64).clone()  # (B,) s, episode starts
        self.tick = 0  # control steps since construction
        self.tick0 = 0  # the tick the current rollout began at (sensor and term schedules)
        self._cache: dict[str, tuple[int, Any]] = {}
        self._reach: tuple[Any, float] | None = None  # (params, ground-effect ray length m)
        self._downwash = self._downwash_scale()
        self._emitters: tuple[Any, Tensor, Tensor] | None = None  # (params, u_h, length)

    # ---- sizes and views ----------------------------------------------------------------------
    @property
    def b(self) -> int:
        """Vehicles in all: ``n * m``."""
        return self.sim.n_envs

    @property
    def device(self) -> torch.device:
        return self.sim.params.mass.device

    @property
    def state(self) -> Any:
        return self.sim.state

    @property
    def params(self) -> Any:
        return self.sim.params

    @property
    def dt(self) -> float:
        """Control period (s)."""
        return self.sim.dt if self.sim_steps == 1 else self.sim.dt * self.sim_steps

    @property
    def control_hz(self) -> float:
        """Control periods per second (the Simulator's control rate / ``sim_steps``)."""
        hz = self.sim.config.control_hz
        return hz if self.sim_steps == 1 else hz / self.sim_steps

    @property
    def elapsed(self) -> Tensor:
        """(B,) float64 s since each vehicle's episode began (:meth:`begin` / :meth:`reset`)."""
        return self.sim.state.time.to(torch.float64) - self.t0

    @property
    def env_of(self) -> Tensor:
        """(B,) int64 env index of every vehicle."""
        return torch.arange(self.b, device=self.device) // self.m

    @property
    def caster(self) -> Any:
        """The ray caster of the envs' scenes (Embree on CPU by default), built on first use;
        with several vehicles per env it also hits the other vehicles."""
        if self._caster is None:
            self._caster = _make_caster(self)
        elif isinstance(self._caster, str):
            self._caster = _make_caster(self, self._caster)
        return self._caster

    # ---- lifecycle ----------------------------------------------------------------------------
    def seed_noise(self, seeds: Sequence[int]) -> None:
        """Vehicle b's process noise (and IMU noise and biases, when it carries an IMU) from
        ``seeds[b]`` alone, not its index in the batch."""
        from volary.math import random as vrandom

        if len(seeds) != self.b:
            raise ConfigError(f"noise_seeds: expected {self.b} seeds, got {len(seeds)}")
        zero = torch.zeros(1, dtype=torch.int64, device=self.device)
        self.sim.keys = torch.cat([vrandom.env_keys(int(s), zero) for s in seeds])
        if self.sim.imu is not None:
            self.sim.imu.reseed(seeds)

    def reset(self, mask: Tensor | None = None, **pose: Any) -> Any:
        """Reset the masked vehicles (all when None) to rest at ``pos``/``quat``/``vel`` (see
        :meth:`Simulator.reset`), restart their gates and begin their episodes; sensors read
        again (a reading taken before the reset is not reused within the same step)."""
        state = self.sim.reset(mask, **pose)
        if self.gates is not None:
            self.gates.reset(mask)
        self.begin(mask)
        self._cache.clear()  # the reset vehicles moved: this step's readings are stale
        return state

    def restart_noise(self, mask: Tensor | None = None, *, sensors: bool = True) -> None:
        """Every noise stream of the masked vehicles (all when None) back where a new World's
        begins: process noise, IMU (its turn-on biases are drawn by the next :meth:`reset`) and,
        unless ``sensors`` is False, each sensor built so far (one not yet built starts there
        anyway). Call it, then :meth:`reset`, and a flight draws the same noise however many
        steps came before it (the ROS 1 bridge does this at each arming, keeping the sensors
        where the frames it read that tick left them: those are the flight's first)."""
        from volary.sensors.rays import noise_streams

        m = self._mask(mask)
        self.sim.restart_noise(m)
        for slot in self.rig.values() if sensors else ():
            sensor = slot.sensor.sensor if isinstance(slot.sensor, _Lazy) else slot.sensor
            if sensor is not None:
                for stream in noise_streams(sensor):
                    stream.restart(m)

    def begin(self, mask: Tensor | None = None) -> None:
        """Start the masked vehicles' episodes (all when None) without moving them: flying,
        no cause, the episode clock at zero."""
        m = self._mask(mask)
        now = self.sim.state.time.to(torch.float64)
        self.active = self.active | m
        self.cause = torch.where(m, -1, self.cause)
        self.end_time = torch.where(m, math.nan, self.end_time)
        self.t0 = torch.where(m, now, self.t0)

    def end(self, mask: Tensor, cause: str) -> Tensor:
        """Stop the masked vehicles still flying, for ``cause``; returns the ones it stopped."""
        stop = self._mask(mask) & self.active
        if bool(stop.any()):
            if cause not in self.cause_names:
                self.cause_names.append(cause)
            code = self.cause_names.index(cause)
            self.cause = torch.where(stop, code, self.cause)
            self.end_time = torch.where(stop, self.elapsed, self.end_time)
            self.active = self.active & ~stop
        return stop

    def causes(self) -> list[str]:
        """Every vehicle's cause name ("" while it flies)."""
        names = self.cause_names
        return [names[c] if c >= 0 else "" for c in self.cause.tolist()]

    def step(self, command: Any, place: Placement | None = None) -> Any:
        """One control period of every vehicle (``command``: the controller's setpoint).

        ``place``: vehicles in the loop (a real vehicle under motion capture, another
        simulator): their pose is given, not integrated. After the physics step their state
        is set to it (velocities zero unless given; ground and divergence flags cleared), before
        the gates, the sensors and the end conditions see it."""
        self._feel_surfaces()
        if self._downwash is not None:
            self._feel_downwash()
        if self.sim_steps == 1 and self.inner is None:
            state = self.sim.step(command)
        else:
            for k in range(self.sim_steps):
                state = self.sim.step(
                    command if self.inner is None else self.inner(self, command, k)
                )
        if place is not None:
            state = self._place(state, place)
        self.tick += 1
        if self.gates is not None:  # ended vehicles' courses stand still
            before = self.gates.passed
            self.gates.update(state.pos)
            self.gates.passed = torch.where(self.active[:, None], self.gates.passed, before)
        return state

    def _feel_surfaces(self) -> None:
        """The rotor ground effect over the scene (dynamics/aero.py A4), for vehicles with a
        rotor radius: once per control period a ray straight down from each vehicle's centre
        finds the scene surface under it within ``GROUND_EFFECT_RANGE`` rotor radii, and the
        Simulator takes its height (a horizontal surface at that height; -inf: none). Only the
        scene counts: a vehicle below is not a surface (its wake is downwash)."""
        p = self.sim.params
        if self.specs is None or not p.has_aero:
            return
        if self._reach is None or self._reach[0] is not p:  # one host read per parameter set
            self._reach = (p, float(p.aero[:, 5].max()) * GROUND_EFFECT_RANGE)
        reach = self._reach[1]
        if reach <= 0:
            return
        pos = self.sim.state.pos
        down = torch.zeros_like(pos)
        down[:, 2] = -1.0
        caster = self.caster
        cast = _ActiveCaster.cast if isinstance(caster, _ActiveCaster) else type(caster).cast
        hits = cast(caster, pos[:, None, :], down[:, None, :], reach)  # the scene, no vehicles
        d = hits.distance[:, 0].to(pos.dtype)
        h = torch.where(torch.isfinite(d), pos[:, 2] - d, -math.inf)  # heights or -inf: valid
        self.sim.disturbance = dataclasses.replace(self.sim.disturbance, surface=h)  # no sync

    def _downwash_scale(self) -> Tensor | None:
        """(B,) every vehicle's ``Airframe.downwash``, or None where no vehicle emits or each
        env flies one vehicle (then no wake is ever set)."""
        airframes = getattr(self.sim, "airframes", None)
        if self.m < 2 or not airframes:
            return None
        scale = downwash_scales(airframes, self.b)
        if max(scale) <= 0:
            return None
        p = self.sim.params
        return torch.tensor(scale, dtype=p.mass.dtype, device=p.mass.device)

    def _feel_downwash(self) -> None:
        """Downwash between the vehicles of each env (:mod:`volary.sim.downwash`): once per
        control period, from the poses at its start, the jets of the vehicles with
        ``Airframe.downwash`` > 0 give every vehicle of their env below them an air velocity,
        which the Simulator adds to the wind (``set_wake``)."""
        p, scale = self.sim.params, self._downwash
        assert scale is not None
        if self._emitters is None or self._emitters[0] is not p:
            self._emitters = (p, *emitter_constants(p, scale))
        _, u_h, length = self._emitters
        st = self.sim.state
        wake = downwash_wake(st.pos, st.quat, u_h, length, scale, self.m)  # finite by design
        self.sim.disturbance = dataclasses.replace(self.sim.disturbance, wake=wake)  # no sync

    # ---- sensors ------------------------------------------------------------------------------
    def due(self, name: str) -> bool:
        """Whether sensor ``name`` reads at the current control step: at the first control step
        at or after each of its sample times (rate 30 Hz under 100 Hz control: steps 0, 4, 7,
        10, ...; a divisor of the control rate: every control_hz / rate_hz steps)."""
        per_step = self.rig[_known(name, self.rig)].per_step
        k = self.tick - self.tick0
        return k == 0 or math.floor(k * per_step + 1e-9) > math.floor((k - 1) * per_step + 1e-9)

    def read(self, name: str) -> Any:
        """Sensor ``name``'s reading at the current step (rendered once per step, for the
        vehicles still flying; the others read as misses)."""
        slot = self.rig[_known(name, self.rig)]
        hit = self._cache.get(name)
        if hit is not None and hit[0] == self.tick:
            return hit[1]
        value = slot.read(self)
        self._cache[name] = (self.tick, value)
        return value

    def readings(self) -> dict[str, Any]:
        """The readings of every sensor due at the current control step, and ``"imu"`` (every
        step) when the Simulator carries an IMU (``World(..., imu="bmi085")``)."""
        out = {name: self.read(name) for name in self.rig if self.due(name)}
        if self.sim.imu_reading is not None:
            out["imu"] = self.sim.imu_reading
        return out

    # ---- queries ------------------------------------------------------------------------------
    def collision_events(self) -> Any:
        """Collision, ceiling and bounds events of every vehicle now (:mod:`volary.worlds`)."""
        from volary.worlds.collision import collision_events

        if self.scene is None:
            raise ConfigError("scene: the World has no scene to collide with")
        st, params = self.sim.state, self.sim.params
        if self.collider == "box":
            ev = collision_events(self.scene, st.pos, params.radius, quat=st.quat,
                                  box=params.collider_half.to(st.pos.dtype))  # fmt: skip
        else:
            ev = collision_events(self.scene, st.pos, params.radius)
        if self.actors is None:
            return ev
        pos, r = self.sim.state.pos, self.sim.params.radius.to(self.sim.state.pos.dtype)
        d, oid = self.actors.distance(pos, self.env_of)
        clear = d - r
        closer = clear < ev.clearance
        hit = clear < 0
        return dataclasses.replace(
            ev,
            collided=ev.collided | hit,
            object_id=torch.where(closer, oid, ev.object_id),
            contact_point=torch.where((hit & ~ev.collided)[:, None], pos, ev.contact_point),
            clearance=torch.minimum(ev.clearance, clear),
            bound_clearance=None if ev.bound_clearance is None
            else torch.minimum(ev.bound_clearance, clear),
        )  # fmt: skip

    def vehicle_contacts(self) -> Tensor:
        """(B,) bool: the vehicle's sphere touches another vehicle of its env."""
        return vehicle_contacts(self.sim.state.pos, self.sim.params.radius, self.m)

    # ---- helpers ------------------------------------------------------------------------------
    def _place(self, state: Any, place: Placement) -> Any:
        m = self._mask(place.mask)
        dtype, dev = state.pos.dtype, self.device
        want = {"pos": 3, "quat": 4, "vel": 3, "omega": 3}
        new = {}
        for name, width in want.items():
            v = getattr(place, name)
            if v is None:
                v = torch.zeros(self.b, width, dtype=dtype, device=dev)
            v = torch.as_tensor(v, dtype=dtype, device=dev)
            if v.shape != (self.b, width):
                raise ConfigError(
                    f"place.{name}: expected shape ({self.b}, {width}), got {tuple(v.shape)}"
                )
            if name == "quat":  # unit quaternions pass bit for bit (a played-back pose)
                norm = v.norm(dim=-1, keepdim=True)
                v = torch.where((norm - 1).abs() > 1e-5, v / norm.clamp_min(1e-12), v)
            new[name] = torch.where(m[:, None], v, getattr(state, name))
        for flag in ("landed", "crashed", "diverged"):
            new[flag] = getattr(state, flag) & ~m
        state = state.replace(**new)
        self.sim.state = state
        return state

    def _mask(self, mask: Tensor | None) -> Tensor:
        if mask is None:
            return torch.ones(self.b, dtype=torch.bool, device=self.device)
        m = torch.as_tensor(mask, device=self.device)
        if m.dtype != torch.bool or m.shape != (self.b,):
            raise ConfigError(
                f"mask: expected a bool tensor of shape ({self.b},), got {m.dtype} {tuple(m.shape)}"
            )
        return m

    def _scene(self, scene: Any) -> tuple[list[SceneSpec] | None, Scene | None]:
        if scene is None:
            return None, None
        if isinstance(scene, Scene):
            if scene.n_envs != self.b:
                raise ConfigError(
                    f"scene: expected a Scene stacked for {self.b} vehicles, got {scene.n_envs}"
                )
            return None, scene
        if isinstance(scene, str):  # a type name or a file: list("forest") was 6 letters
            raise ConfigError(
                f"scene: expected a SceneSpec, one per env, or a Scene, got the string {scene!r} "
                f"(a scenario: volary.worlds.make_scenario(TYPE, seed); a mesh or point-cloud "
                f"file: make_scenario('custom', 0, path=FILE))"
            )
        items = [scene] if isinstance(scene, SceneSpec) else list(scene)
        if not items or not all(isinstance(s, SceneSpec) for s in items):
            raise ConfigError("scene: expected a SceneSpec, one per env, or a Scene")
        if len(items) not in (1, self.n):
            raise ConfigError(f"scene: expected 1 or {self.n} SceneSpecs, got {len(items)}")
        specs = [items[i % len(items)] for i in range(self.n)]
        per_vehicle = [specs[b // self.m] for b in range(self.b)]
        dtype = self.sim.params.mass.dtype
        return specs, Scene.stack(per_vehicle, device=self.device, dtype=dtype)


# ---- the rig ------------------------------------------------------------------------------------
class _Slot:
    """A built sensor of the rig with its schedule."""

    def __init__(self, sensor: Any, per_step: float, vehicles: Tensor | None) -> None:
        self.sensor, self.per_step, self.vehicles = sensor, per_step, vehicles

    def read(self, world: World) -> Any:
        if isinstance(self.sensor, _Lazy):
            self.sensor.ready()  # the caster exists before its mask is set, first reading too
        active = world.active if self.vehicles is None else world.active & self.vehicles
        caster = world._caster
        if isinstance(caster, _ActiveCaster):
            caster.active = active
        st = world.sim.state
        return self.sensor(st.pos, st.quat)


def _sensing(name: str, spec: Any, world: World) -> _Slot:
    s = spec if isinstance(spec, Sensing) else Sensing(spec)
    per_step = 1.0  # samples per control step
    if s.rate_hz is not None:
        per_step = s.rate_hz / world.control_hz
        if not (math.isfinite(per_step) and 0 < per_step <= 1 + 1e-9):
            raise ConfigError(
                f"sensors[{name!r}].rate_hz: expected a rate in (0, control_hz="
                f"{world.control_hz:g}], got {s.rate_hz}"
            )
        per_step = min(per_step, 1.0)
    vehicles = None
    if s.vehicles is not None:
        slots = torch.as_tensor(list(s.vehicles), dtype=torch.int64)
        if slots.numel() and (slots.min() < 0 or slots.max() >= world.m):
            raise ConfigError(
                f"sensors[{name!r}].vehicles: expected slots in 0..{world.m - 1}, got {s.vehicles}"
            )
        slot_of = torch.arange(world.b) % world.m
        vehicles = torch.isin(slot_of, slots).to(world.device)
    return _Slot(_build_sensor(name, s.sensor, world), per_step, vehicles)


def ray_sensor_class(config: Any) -> Any:
    """The ray sensor a config builds (DepthCamera, Lidar, MultiZoneTof or Rangefinder), or
    None when ``config`` is not a ray-sensor config."""
    from volary.sensors import (
        CameraConfig,
        DepthCamera,
        Lidar,
        LidarConfig,
        MultiZoneTof,
        Rangefinder,
        RangefinderConfig,
        TofConfig,
    )

    kinds = {
        CameraConfig: DepthCamera,
        LidarConfig: Lidar,
        TofConfig: MultiZoneTof,
        RangefinderConfig: Rangefinder,
    }
    return next((cls for t, cls in kinds.items() if isinstance(config, t)), None)


def _build_sensor(name: str, sensor: Any, world: World) -> Any:
    if isinstance(sensor, str):
        sensor = sensor_preset(sensor, f"sensors[{name!r}]")
    cls = ray_sensor_class(sensor)
    if cls is not None:
        return _Lazy(partial(_ray_sensor, cls, sensor, world))
    if isinstance(sensor, OnCaster):
        return _Lazy(lambda: sensor.build(world.caster))
    if isinstance(sensor, type) or not callable(sensor):
        raise ConfigError(
            f"sensors[{name!r}]: expected a preset name (e.g. 'd455', 'os1_64'), a ray-sensor "
            f"config (CameraConfig, LidarConfig, TofConfig, RangefinderConfig), an OnCaster or "
            f"a callable (pos, quat) -> reading, got {sensor!r}"
        )
    return sensor


def sensor_preset(preset: str, where: str = "sensor") -> Any:
    """The config of a ray-sensor preset by its name: a depth camera (``d455``, ...), a LiDAR
    (``os1_64``, ...), a multi-zone ToF (``vl53l5cx``, ...) or a rangefinder (``flightgoggles``,
    ...); the names are distinct across the four kinds."""
    from volary.sensors import (
        CAMERA_PRESETS,
        LIDAR_PRESETS,
        RANGEFINDER_PRESETS,
        TOF_PRESETS,
        camera_config,
        lidar_config,
        rangefinder_config,
        tof_config,
    )

    kinds = (
        (CAMERA_PRESETS, camera_config),
        (LIDAR_PRESETS, lidar_config),
        (TOF_PRESETS, tof_config),
        (RANGEFINDER_PRESETS, rangefinder_config),
    )
    for presets, make in kinds:
        if preset in presets:
            return make(preset)
    names = ", ".join(n for presets, _ in kinds for n in presets)
    raise ConfigError(f"{where}: unknown sensor preset {preset!r}; presets: {names}")


def _ray_sensor(cls: Any, config: Any, world: World) -> Any:
    return cls(config, world.caster)


class _Lazy:
    """A ray sensor built on its first reading (the caster is built only when needed)."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self.build: Callable[[], Any] = build
        self.sensor: Any = None

    def ready(self) -> None:
        if self.sensor is None:
            self.sensor = self.build()

    def __call__(self, pos: Tensor, quat: Tensor) -> Any:
        self.ready()
        return self.sensor(pos, quat)


# ---- casting ------------------------------------------------------------------------------------
def _make_caster(world: World, backend: str = "auto") -> Any:
    from volary.sensors.raycast.registry import make_raycaster

    if world.specs is None:
        raise ConfigError("scene: ray-cast sensors need a World built from SceneSpecs")
    dtype = world.sim.params.mass.dtype
    shared = all(s is world.specs[0] for s in world.specs)
    # one scene shared by every vehicle: one single-scene caster takes the flying vehicles' rays
    specs = [world.specs[0]] if shared else [world.specs[b // world.m] for b in range(world.b)]
    inner = make_raycaster(specs, len(specs), backend=backend, device=world.device, dtype=dtype)
    if world.m == 1 and world.actors is None:
        return _ActiveCaster(inner, world.b, shared)
    return _VehicleCaster(inner, world, shared)


class _ActiveCaster:
    """Casts the rays of the flying vehicles only; the others read as misses. ``shared``: the
    inner caster holds one scene (every vehicle's rays go to it in one call), else one scene
    per vehicle."""

    name = "active"

    def __init__(self, inner: Any, n: int, shared: bool) -> None:
        self.inner, self.n_envs, self.shared = inner, n, shared
        self.device, self.dtype = inner.device, inner.dtype
        self.active = torch.ones(n, dtype=torch.bool, device=inner.device)

    def cast(self, origins: Tensor, directions: Tensor, max_range: float) -> Any:
        from volary.sensors.raycast.base import RayHits, miss_hits

        n, r = origins.shape[:2]
        if bool(self.active.all()):  # every vehicle flies: the same rays, no gather or scatter
            if not self.shared:
                return self.inner.cast(origins, directions, max_range)
            hits = self.inner.cast(
                origins.reshape(1, n * r, 3), directions.reshape(1, n * r, 3), max_range
            )
            return RayHits(
                hits.distance.reshape(n, r),
                hits.object_id.reshape(n, r),
                hits.normal.reshape(n, r, 3),
            )
        if not self.shared:
            hits = self.inner.cast(origins, directions, max_range)
            miss = miss_hits((n, r), self.device, self.dtype)
            keep = self.active[:, None]
            return RayHits(
                torch.where(keep, hits.distance, miss.distance),
                torch.where(keep, hits.object_id, miss.object_id),
                torch.where(keep[..., None], hits.normal, miss.normal),
            )
        idx = torch.nonzero(self.active)[:, 0]
        out = miss_hits((n, r), self.device, self.dtype)
        if len(idx) == 0:
            return out
        o = origins[idx].reshape(1, -1, 3)
        d = directions[idx].reshape(1, -1, 3)
        hits = self.inner.cast(o, d, max_range)
        dist, oid, nrm = out.distance.clone(), out.object_id.clone(), out.normal.clone()
        dist[idx] = hits.distance.reshape(len(idx), r)
        oid[idx] = hits.object_id.reshape(len(idx), r)
        nrm[idx] = hits.normal.reshape(len(idx), r, 3)
        return RayHits(dist, oid, nrm)


class _VehicleCaster(_ActiveCaster):
    """The scene plus the other vehicles of each env as spheres (ray-sphere intersection) and
    the World's dynamic actors (:mod:`volary.sim.actors`)."""

    name = "vehicles"

    def __init__(self, inner: Any, world: World, shared: bool) -> None:
        super().__init__(inner, world.b, shared)
        self.world = world

    def cast(self, origins: Tensor, directions: Tensor, max_range: float) -> Any:
        from volary.sensors.raycast.base import RayHits

        hits = super().cast(origins, directions, max_range)
        w = self.world
        if w.actors is not None:
            d, oid, nrm = w.actors.cast(origins, directions, max_range, w.env_of)
            closer = (d < hits.distance) & self.active[:, None]
            hits = RayHits(
                torch.where(closer, d, hits.distance),
                torch.where(closer, oid, hits.object_id),
                torch.where(closer[..., None], nrm, hits.normal),
            )
        if w.m == 1:
            return hits
        if origins.device.type == "cpu":
            pos, rad = w.sim.state.pos, w.sim.params.radius
            return _merge_sphere_hits(hits, origins, directions, pos, rad, w.m, max_range,
                                      self.active)  # fmt: skip
        d, oid, nrm = sphere_hits_reference(
            origins, directions, w.sim.state.pos.to(origins.dtype),
            w.sim.params.radius.to(origins.dtype), w.m, max_range,
        )  # fmt: skip
        closer = (d < hits.distance) & self.active[:, None]
        return RayHits(
            torch.where(closer, d, hits.distance),
            torch.where(closer, oid, hits.object_id),
            torch.where(closer[..., None], nrm, hits.normal),
        )


def sphere_hits(
    origins: Tensor, directions: Tensor, centers: Tensor, radius: Tensor, m: int, max_range: float
) -> tuple[Tensor, Tensor, Tensor]:
    """First hit of each vehicle's rays on the other vehicles of its env (spheres).

    ``origins``/``directions`` (B, R, 3) with unit directions, ``centers`` (B, 3), ``radius``
    (B,); B = N * m. Solves |o + t d - c|^2 = r^2 for the smallest t >= 0. Returns distance
    (B, R) (+inf: no hit within ``max_range``), object id ``VEHICLE_ID + slot`` (-1: none) and
    the outward unit normal (B, R, 3).

    On the CPU one compiled loop over rays and spheres (:func:`_sphere_hits_kernel`; the dense
    (B, R, m, 3) tensors of :func:`sphere_hits_reference` cost 18 ms a tick for 8 vehicles'
    64 x 64 cameras); elsewhere the batched torch reference.
    """
    if origins.device.type != "cpu":
        return sphere_hits_reference(origins, directions, centers, radius, m, max_range)
    from volary.sensors.raycast.base import miss_hits

    b, r = origins.shape[:2]
    misses = miss_hits((b, r), origins.device, origins.dtype)
    hits = _merge_sphere_hits(misses, origins, directions, centers, radius, m, max_range, None)
    return hits.distance, hits.object_id, hits.normal


def _merge_sphere_hits(
    hits: Any,
    origins: Tensor,
    directions: Tensor,
    centers: Tensor,
    radius: Tensor,
    m: int,
    max_range: float,
    active: Tensor | None,
) -> Any:
    """CPU: ``hits`` with each ``active`` vehicle's (None: every vehicle's) rays' nearest hit on
    the env's other vehicles put in where it is closer (written in place, one compiled loop)."""
    from volary.sensors.raycast.base import RayHits

    dt = origins.dtype
    o, d = origins.detach().contiguous().numpy(), directions.detach().to(dt).contiguous().numpy()
    c = centers.detach().to(dt).contiguous().numpy()
    rad = radius.detach().to(dt).contiguous().numpy()
    out = RayHits(*(t.contiguous() for t in (hits.distance, hits.object_id, hits.normal)))
    act = np.ones(o.shape[0], bool) if active is None else active.detach().cpu().numpy()
    one = o.dtype.type
    dist, oid, nrm = out.distance.numpy(), out.object_id.numpy(), out.normal.numpy()
    _sphere_hits_kernel(
        o, d, c, rad, m, one(max_range), one(1e-12), act, VEHICLE_ID, dist, oid, nrm
    )
    return out


@numba.njit(cache=True, nogil=True)
def _sphere_hits_kernel(
    o, d, c, rad, m, max_range, eps, active, id0, best, oid, normal
):  # pragma: no cover
    """Eq. of :func:`sphere_hits` per ray of an active vehicle: the nearest root t >= 0 (the
    far one from inside) of |o + t d - c_j|^2 = r_j^2 over the env's other slots j, first slot
    on ties, kept where it is nearer than ``best``; then id ``id0 + j`` and the normal
    (o + t d - c_j) / max(|.|, eps). The operations of :func:`sphere_hits_reference` in its
    order; only the square roots may round differently (torch's vectorized sqrt is not
    correctly rounded)."""
    for b in range(o.shape[0]):
        if not active[b]:
            continue
        base, me = (b // m) * m, b % m
        for r in range(o.shape[1]):
            ox, oy, oz = o[b, r, 0], o[b, r, 1], o[b, r, 2]
            dx, dy, dz = d[b, r, 0], d[b, r, 1], d[b, r, 2]
            tb, sb = best[b, r], -1
            for j in range(m):
                if j == me:
                    continue
                k = base + j
                cx, cy, cz = ox - c[k, 0], oy - c[k, 1], oz - c[k, 2]
                proj = cx * dx + cy * dy + cz * dz
                disc = proj * proj - ((cx * cx + cy * cy + cz * cz) - rad[k] * rad[k])
                if not disc >= 0:
                    continue
                root = np.sqrt(disc)
                t = -proj - root
                if not t >= 0:
                    t = -proj + root
                if t >= 0 and t <= max_range and t < tb:
                    tb, sb = t, j
            if sb < 0:
                continue
            k = base + sb
            best[b, r], oid[b, r] = tb, id0 + sb
            px = (ox + tb * dx) - c[k, 0]
            py = (oy + tb * dy) - c[k, 1]
            pz = (oz + tb * dz) - c[k, 2]
            n = np.sqrt(px * px + py * py + pz * pz)
            if n < eps:
                n = eps
            normal[b, r, 0], normal[b, r, 1], normal[b, r, 2] = px / n, py / n, pz / n


def sphere_hits_reference(
    origins: Tensor, directions: Tensor, centers: Tensor, radius: Tensor, m: int, max_range: float
) -> tuple[Tensor, Tensor, Tensor]:
    """:func:`sphere_hits` as batched torch: (B, R, m) candidate roots, the smallest kept (any
    device; the reference of the compiled CPU loop)."""
    b, r = origins.shape[:2]
    n = b // m
    c = centers.reshape(n, 1, m, 3).expand(n, m, m, 3).reshape(b, 1, m, 3)
    rad = radius.reshape(n, 1, m).expand(n, m, m).reshape(b, 1, m)
    oc = origins[:, :, None, :] - c  # (B, R, m, 3)
    proj = (oc * directions[:, :, None, :]).sum(-1)
    disc = proj * proj - ((oc * oc).sum(-1) - rad * rad)
    root = torch.sqrt(disc.clamp_min(0.0))
    t_near, t_far = -proj - root, -proj + root
    t = torch.where(t_near >= 0, t_near, t_far)  # inside a sphere: its far wall
    self_slot = (torch.arange(b, device=origins.device) % m)[:, None, None]
    ok = (disc >= 0) & (t >= 0) & (t <= max_range)
    ok = ok & (torch.arange(m, device=origins.device)[None, None, :] != self_slot)
    t = torch.where(ok, t, torch.inf)
    best, slot = t.min(dim=-1)  # (B, R)
    hit = torch.isfinite(best)
    point = origins + best.nan_to_num(posinf=0.0)[..., None] * directions
    center = c[:, 0].gather(1, slot[..., None].expand(b, r, 3))
    normal = torch.nn.functional.normalize(point - center, dim=-1)
    normal = torch.where(hit[..., None], normal, 0.0)
    oid = torch.where(hit, VEHICLE_ID + slot, -1)
    return best, oid, normal


def vehicle_contacts(pos: Tensor, radius: Tensor, m: int) -> Tensor:
    """(B,) bool: vehicle b's sphere overlaps another vehicle of its env (B = N * m)."""
    if m == 1:
        return torch.zeros(pos.shape[0], dtype=torch.bool, device=pos.device)
    n = pos.shape[0] // m
    p, r = pos.reshape(n, m, 3), radius.reshape(n, m)
    gap = (p[:, :, None] - p[:, None, :]).norm(dim=-1) - (r[:, :, None] + r[:, None, :])
    eye = torch.eye(m, dtype=torch.bool, device=pos.device)
    return ((gap < 0) & ~eye).any(-1).reshape(-1)


# ---- construction helpers -----------------------------------------------------------------------
def _simulator(platforms: Any, n_envs: int | None, m: int, kwargs: dict[str, Any]) -> Simulator:
    if platforms is None:
        raise ConfigError("platforms: expected a platform name, an Airframe or a list of them")
    if n_envs is not None:
        kwargs = {**kwargs, "n_envs": _positive_int(n_envs, "n_envs") * m}
    elif m > 1:
        count = 1 if isinstance(platforms, str) else len(list(platforms))
        kwargs = {**kwargs, "n_envs": count * m if count % m else count}
    return Simulator(platforms, **kwargs)


def _positive_int(v: Any, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ConfigError(f"{name}: expected an int >= 1, got {v!r}")
    return v


def _known(name: str, rig: Mapping[str, Any]) -> str:
    if name not in rig:
        from volary.errors import UnknownNameError

        raise UnknownNameError("sensor", name, list(rig))
    return name


__all__ = [
    "VEHICLE_ID",
    "Sensing",
    "World",
    "ray_sensor_class",
    "sphere_hits",
    "sphere_hits_reference",
    "vehicle_contacts",
]
