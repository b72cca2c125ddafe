"""Accelerometer and gyroscope with white noise and bias random walk, batched over envs.

Model (FlightGoggles Sec. IV-E; Aerial Gym Sec. III-D2; EQUATIONS.md):
    a_meas = R^T (dv/dt - g) + b_a + n_a        w_meas = W + b_w + n_w
    db/dt = eta  (discrete: b += N(0, sigma_b^2 dt))
A white noise of density sigma (unit/sqrt(Hz)) sampled at rate f has standard deviation
sigma sqrt(f). Noise comes from volary's counter-based streams, so env i's readings depend only
on (seed, i) and not on the batch size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from volary.errors import ConfigError
from volary.math import random as vrandom
from volary.math.quaternion import quat_rotate_inverse
from volary.registry import Registry

_DEG = math.pi / 180.0
_G = 9.81


@dataclass(frozen=True)
class ImuConfig:
    """Noise parameters (SI) and output rate of an IMU."""

    accel_noise_density: float = 0.0  # m/s^2/sqrt(Hz)
    gyro_noise_density: float = 0.0  # rad/s/sqrt(Hz)
    accel_bias_random_walk: float = 0.0  # m/s^3/sqrt(Hz)
    gyro_bias_random_walk: float = 0.0  # rad/s^2/sqrt(Hz)
    accel_bias_init: float = 0.0  # m/s^2, std of the turn-on bias per axis
    gyro_bias_init: float = 0.0  # rad/s, std of the turn-on bias per axis
    rate_hz: float = 240.0  # output rate; readings are held between updates
    source: str = ""

    def __post_init__(self) -> None:
        for name in (
            "accel_noise_density",
            "gyro_noise_density",
            "accel_bias_random_walk",
            "gyro_bias_random_walk",
            "accel_bias_init",
            "gyro_bias_init",
        ):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ConfigError(f"imu.{name}: expected a finite value >= 0, got {v}")
        if not (math.isfinite(self.rate_hz) and self.rate_hz > 0):
            raise ConfigError(f"imu.rate_hz: expected > 0 Hz, got {self.rate_hz}")


_IMU_PRESETS: dict[str, ImuConfig] = {
    "ideal": ImuConfig(source="noise-free"),
    # Bosch BMI085 datasheet (BST-BMI085-DS001): accel 175 ug/sqrt(Hz), gyro 0.014 deg/s/sqrt(Hz)
    # typical. The datasheet gives no random walk: the bias walks are typical consumer-MEMS
    # values (assumed, stated here).
    "bmi085": ImuConfig(
        accel_noise_density=175e-6 * _G,
        gyro_noise_density=0.014 * _DEG,
        accel_bias_random_walk=1e-3,
        gyro_bias_random_walk=1e-4,
        accel_bias_init=0.02,
        gyro_bias_init=0.1 * _DEG,
        rate_hz=400.0,
        source="Bosch BMI085 datasheet typical noise densities; bias walks assumed",
    ),
    # VectorNav VN-100 datasheet: gyro 0.0035 deg/s/sqrt(Hz), accel 0.14 mg/sqrt(Hz);
    # in-run bias stability 10 deg/h (gyro), 0.04 mg (accel) used to scale the bias walks.
    "vn100": ImuConfig(
        accel_noise_density=0.14e-3 * _G,
        gyro_noise_density=0.0035 * _DEG,
        accel_bias_random_walk=4e-5,
        gyro_bias_random_walk=1e-5,
        accel_bias_init=0.04e-3 * _G,
        gyro_bias_init=10.0 * _DEG / 3600.0,
        rate_hz=200.0,
        source="VectorNav VN-100 datasheet noise densities and bias stability",
    ),
    # FlightGoggles vehicle config (flightgoggles_imu parameters and their defaults in the
    # dynamics node): per-sample variances 0.005 (accel) and 0.003 (gyro) at the 960 Hz physics
    # rate, converted to densities: sigma = sqrt(var / f); turn-on bias variances 0.005
    # (m/s^2)^2 and 0.003 (rad/s)^2; bias process auto-correlations 1e-7 (m^2/s^5, rad^2/s^3),
    # i.e. random walks of sqrt(1e-7) per sqrt(s) (paper 001 Sec. IV-E: a_meas = ... + b_a).
    "flightgoggles": ImuConfig(
        accel_noise_density=math.sqrt(0.005 / 960.0),
        gyro_noise_density=math.sqrt(0.003 / 960.0),
        accel_bias_random_walk=math.sqrt(1e-7),
        gyro_bias_random_walk=math.sqrt(1e-7),
        accel_bias_init=math.sqrt(0.005),
        gyro_bias_init=math.sqrt(0.003),
        rate_hz=960.0,
        source="FlightGoggles vehicle configuration (imu variances, bias init variances and "
        "bias process auto-correlations)",
    ),
}
IMU_PRESETS: Registry[ImuConfig] = Registry("imu preset", _IMU_PRESETS)


def imu_config(spec: str | ImuConfig) -> ImuConfig:
    """A preset by name or a config as is; unknown names list the presets."""
    return IMU_PRESETS.resolve(spec, ImuConfig)


@dataclass(frozen=True)
class ImuReading:
    """One batched IMU sample."""

    accel: Tensor  # (N, 3) m/s^2, specific force in the body frame
    gyro: Tensor  # (N, 3) rad/s, body rates


def specific_force(quat: Tensor, accel_world: Tensor) -> Tensor:
    """R^T (dv/dt - g): what an ideal accelerometer reads (m/s^2, body frame)."""
    g = accel_world.new_tensor([0.0, 0.0, -_G])
    return quat_rotate_inverse(quat, accel_world - g)


class Imu:
    """Batched IMU with per-env biases, a per-env noise stream and a configurable rate."""

    def __init__(
        self,
        n_envs: int,
        config: str | ImuConfig = "bmi085",
        *,
        seed: int = 0,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        self.config = imu_config(config)
        self.n_envs, self.dtype = n_envs, dtype
        self.keys = vrandom.env_keys(seed ^ 0x1A2B3C, torch.arange(n_envs, device=device))
        self.tick = torch.zeros(n_envs, dtype=torch.int64, device=device)
        z = torch.zeros(n_envs, 3, device=device, dtype=dtype)
        self.accel_bias, self.gyro_bias = z.clone(), z.clone()
        self.reading = ImuReading(z.clone(), z.clone())
        self.clock = torch.full((n_envs,), -1.0, device=device, dtype=dtype)  # s since sample
        self.reset()

    def reseed(self, seeds: Sequence[int]) -> None:
        """Env i's noise and biases from ``seeds[i]`` alone (not its index in the batch); draws
        new turn-on biases."""
        if len(seeds) != self.n_envs:
            raise ConfigError(f"seeds: expected {self.n_envs} seeds, got {len(seeds)}")
        zero = torch.zeros(1, dtype=torch.int64, device=self.tick.device)
        self.keys = torch.cat([vrandom.env_keys(int(s) ^ 0x1A2B3C, zero) for s in seeds])
        self.tick = torch.zeros_like(self.tick)
        self.reset()

    def rewind(self, mask: Tensor, tick: Tensor) -> None:
        """Put the masked envs' noise streams back at counter ``tick`` (N,) (a value of
        :attr:`tick` kept from before): from there they draw again what they drew then. Other
        envs' streams are untouched."""
        self.tick = torch.where(mask, tick, self.tick)

    def restart(self, mask: Tensor) -> None:
        """The masked envs' noise streams back where a new IMU's stand: after the one draw of
        its turn-on biases at construction, so a :meth:`reset` then draws what a new IMU's
        first reset draws. Other envs' streams are untouched."""
        self.rewind(mask, torch.ones_like(self.tick))

    def _normal(self, n: int) -> Tensor:
        out = vrandom.normal(self.keys, self.tick, n, dtype=self.dtype)
        self.tick = self.tick + 1
        return out

    def reset(self, mask: Tensor | None = None) -> None:
        """Draw new turn-on biases for the masked envs (all when None). Only the masked envs'
        noise streams advance: an env's readings never depend on when others reset."""
        c = self.config
        m = (
            torch.ones(self.n_envs, dtype=torch.bool, device=self.tick.device)
            if mask is None
            else mask
        )
        n = vrandom.normal(self.keys, self.tick, 6, dtype=self.dtype)
        self.tick = self.tick + m.to(self.tick.dtype)
        ab, gb = c.accel_bias_init * n[:, :3], c.gyro_bias_init * n[:, 3:]
        self.accel_bias = torch.where(m[:, None], ab, self.accel_bias)
        self.gyro_bias = torch.where(m[:, None], gb, self.gyro_bias)
        self.clock = torch.where(m, torch.full_like(self.clock, -1.0), self.clock)

    def __call__(self, quat: Tensor, omega: Tensor, accel_world: Tensor, dt: float) -> ImuReading:
        """Advance by ``dt`` s; envs whose sample is due get a new reading, others hold theirs."""
        c = self.config
        n = self._normal(12)
        self.accel_bias = self.accel_bias + c.accel_bias_random_walk * math.sqrt(dt) * n[:, 0:3]
        self.gyro_bias = self.gyro_bias + c.gyro_bias_random_walk * math.sqrt(dt) * n[:, 3:6]
        sq = math.sqrt(c.rate_hz)
        accel = specific_force(quat, accel_world) + self.accel_bias
        accel = accel + c.accel_noise_density * sq * n[:, 6:9]
        gyro = omega + self.gyro_bias + c.gyro_noise_density * sq * n[:, 9:12]
        period = 1.0 / c.rate_hz
        fresh = self.clock < 0  # just reset: sample now
        tick = self.clock + dt
        due = fresh | (tick >= period - 1e-9)
        self.clock = torch.where(
            fresh, torch.zeros_like(tick), torch.where(due, tick - period, tick)
        )
        due = due[:, None]
        self.reading = ImuReading(
            torch.where(due, accel, self.reading.accel), torch.where(due, gyro, self.reading.gyro)
        )
        return self.reading
