"""The AlphaPilot challenge as it was posed (paper 001 Sec. V-C): what a contestant is told and
what it senses. The race itself (the World, the sensors, the score) is
:mod:`volary.studies.alphapilot.challenge`; the reference contestant is
:mod:`volary.studies.alphapilot.sensor_racer`.

A contestant knew the nominal course, that each gate would be moved within published bounds
by "random unknown perturbations", the vehicle, and its four sensors; it received sensor
streams and sent collective thrust + body rates to the acro loop. So here:

- :class:`Briefing` (before the start): the nominal course (all gates, their ids, the course
  order, the start pose), the perturbation bounds, the vehicle's published parameters, the
  control period and each sensor's configuration, mount and rate. Only what the 2019 teams
  were given: the IMU as :class:`PublishedImu` (noise densities and rate, no bias model), no
  detector noise, no course file path (docs/race-interface.md lists every field's source);
- :class:`ChallengeObservation` (every control step): the clock, the IMU sample and, when a
  sensor read at this step, its reading: IR beacons (pixels, gate id and corner index of each
  visible corner), the downward range and the stereo camera's depth image (depth and validity
  only: no object ids, no normals). Nothing else: no state, no gate poses;
- :class:`Contestant`: ``reset(briefing)`` then ``act(obs) -> (N, 4)`` CTBR commands
  ``[thrust N, w_x, w_y, w_z rad/s]``; optionally ``estimate()`` (its own belief, for the race
  report's estimation errors; never fed back).

Contestants are named in :data:`CONTESTANTS` (``"reference"``) or given as ``module:Class``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from torch import Tensor

from volary.dynamics.params import VehicleParams
from volary.errors import ConfigError
from volary.registry import Registry
from volary.sensors.camera import CameraConfig
from volary.sensors.imu import ImuConfig
from volary.sensors.rangefinder import RangefinderConfig
from volary.worlds import SceneSpec


@dataclass(frozen=True)
class PublishedImu:
    """The IMU as the 2019 challenge published it: the white noise of each sample (FlightGoggles'
    ``accelerometer_variance`` / ``gyroscope_variance`` per sample, as densities) and the sample
    rate. No turn-on bias or bias walk: those were not published in 2019, a contestant assumes
    its own."""

    accel_noise_density: float  # m/s^2/sqrt(Hz)
    gyro_noise_density: float  # rad/s/sqrt(Hz)
    rate_hz: float  # Hz, the rate the densities refer to

    @classmethod
    def of(cls, imu: ImuConfig) -> PublishedImu:
        """What a contestant is told of the simulated ``imu``."""
        return cls(imu.accel_noise_density, imu.gyro_noise_density, imu.rate_hz)


@dataclass(frozen=True)
class Briefing:
    """Everything a contestant knows before the start (module docstring)."""

    course: SceneSpec  # the nominal course: gates (ids = gate numbers), meta["order_index"]
    n_envs: int  # courses flown at once, one vehicle each
    vehicle: VehicleParams  # published vehicle parameters, one row per env, float64
    dt: float  # s, control period: act() is called once per period
    imu: PublishedImu  # published noise densities and rate (no bias parameters)
    camera: CameraConfig | None  # the beacon camera (intrinsics and mount); None: no beacons
    beacon_rate_hz: float | None
    rangefinder: RangefinderConfig | None  # downward range sensor; None: not carried
    range_rate_hz: float | None
    start_pos: tuple[float, float, float]
    start_yaw: float
    floor_z: float = 0.0  # m, the arena floor
    stereo: CameraConfig | None = None  # the stereo depth camera (intrinsics, mount, noise)
    stereo_rate_hz: float | None = None

    @property
    def bounds(self) -> dict[str, tuple[float, float, float]]:
        """Per gate name: (+-x m, +-y m, +-yaw deg) of its unknown perturbation."""
        return dict(self.course.meta.get("perturbation", {}))


@dataclass(frozen=True)
class BeaconReport:
    """One IR beacon frame: K = 4 G slots; only visible slots carry a pixel."""

    pixels: Tensor  # (N, K, 2) px (u right, v down), NaN where not reported
    visible: Tensor  # (N, K) bool, a reported beacon
    gate_id: Tensor  # (N, K) int64, the gate's id (its number) the report names
    corner: Tensor  # (N, K) int64, corner 0..3 of that gate


@dataclass(frozen=True)
class RangeReport:
    """One downward range reading."""

    range: Tensor  # (N,) m
    valid: Tensor  # (N,) bool


@dataclass(frozen=True)
class DepthReport:
    """One stereo depth frame (the camera of :attr:`Briefing.stereo`)."""

    depth: Tensor  # (N, H, W) m, z-depth along the optical axis; the config's fill if invalid
    valid: Tensor  # (N, H, W) bool, the matcher found a depth


@dataclass(frozen=True)
class ChallengeObservation:
    """What a contestant senses at one control step (module docstring)."""

    step: int  # control steps since the start
    time: Tensor  # (N,) s since the start
    accel: Tensor | None  # (N, 3) m/s^2 IMU specific force (body); None before the first step
    gyro: Tensor | None  # (N, 3) rad/s IMU body rate; None before the first step
    beacons: BeaconReport | None  # a fresh frame, or None
    range: RangeReport | None  # a fresh reading, or None
    depth: DepthReport | None = None  # a fresh stereo depth frame, or None


@runtime_checkable
class Contestant(Protocol):
    """A sensors-only racer (module docstring)."""

    def reset(self, briefing: Briefing) -> None: ...

    def act(self, obs: ChallengeObservation) -> Tensor: ...


CONTESTANTS: Registry[Any] = Registry(
    "contestant",
    {"reference": "volary.studies.alphapilot.sensor_racer:SensorRacer"},
    specs=True,
)
DEFAULT_CONTESTANT = "reference"


def make_contestant(name: str | Contestant) -> Contestant:
    """A contestant by registered name or ``module:Class`` (built with no arguments), or the
    object itself when it already has ``reset`` and ``act``."""
    if isinstance(name, Contestant) and not isinstance(name, type):
        return name
    if not isinstance(name, str):
        raise ConfigError(
            f"contestant: expected a name, 'module:Class' or an object with reset() and act(), "
            f"got {name!r}"
        )
    cls = CONTESTANTS.get(name)
    obj = cls() if isinstance(cls, type) else cls
    if not isinstance(obj, Contestant):
        raise ConfigError(f"contestant {name!r}: expected reset(briefing) and act(obs) methods")
    return obj


__all__ = [
    "BeaconReport",
    "Briefing",
    "CONTESTANTS",
    "ChallengeObservation",
    "Contestant",
    "DEFAULT_CONTESTANT",
    "DepthReport",
    "PublishedImu",
    "RangeReport",
    "make_contestant",
]
