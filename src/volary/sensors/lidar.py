"""Ray-cast LiDARs: Ouster-like spinning patterns and a hemispherical dome, batched over envs.

Model (Aerial Gym Sec. III-D1, Fig. 4b): one ray per (channel, column); the reported value is
the range along the ray. Sensor frame S is FLU (x forward, y left, z up; DOWNWARD/other mounts
via T_BS). Channel k of C has elevation el_k = vfov_max - k (vfov_max - vfov_min) / (C - 1)
(row 0 is the top beam, as in an Ouster range image); column j of A has azimuth
az_j = hfov / 2 - (j + 0.5) hfov / A (column 0 on the left, sweeping clockwise seen from above,
as Ouster's "staggered -> destaggered" image reads left to right). Pattern "dome": elevations
from 0 (horizon) to vfov_max = pi / 2 (zenith), full 360 deg azimuth (Aerial Gym's OS-Dome).
Noise sigma(r) = noise_std + noise_quadratic r^2 and random dropouts, per-env streams.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from volary.errors import ConfigError
from volary.registry import Registry
from volary.sensors.rays import (
    Mount,
    RangePoints,
    RayBundle,
    RaySensor,
    cast_bundle,
    check_finite,
    check_positive_int,
    check_ray_config,
    in_range,
    noisy_ranges,
    pose_args,
    preset_config,
    spherical_rays,
)

_DEG = math.pi / 180.0


@dataclass(frozen=True)
class LidarConfig:
    """A ray-cast LiDAR; angles rad, lengths m. invalid_value None means ``max_range``."""

    channels: int = 16
    columns: int = 512
    vfov_min: float = -22.5 * _DEG  # elevation of the lowest beam
    vfov_max: float = 22.5 * _DEG  # elevation of the highest beam
    hfov: float = 2.0 * math.pi  # horizontal span, centred on +x_S
    min_range: float = 0.3
    max_range: float = 100.0
    invalid_value: float | None = None
    noise_std: float = 0.0
    noise_quadratic: float = 0.0
    dropout: float = 0.0
    mount: Mount = Mount()
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        check_positive_int("lidar", channels=self.channels, columns=self.columns)
        check_finite("lidar", vfov_min=self.vfov_min, vfov_max=self.vfov_max, hfov=self.hfov)
        if not -math.pi / 2 <= self.vfov_min <= self.vfov_max <= math.pi / 2:
            raise ConfigError(
                f"lidar.vfov_min: expected -pi/2 <= vfov_min <= vfov_max <= pi/2, "
                f"got {self.vfov_min}, {self.vfov_max}"
            )
        if self.channels > 1 and self.vfov_min == self.vfov_max:
            raise ConfigError("lidar.vfov_max: several channels need vfov_max > vfov_min")
        if not 0 < self.hfov <= 2 * math.pi:
            raise ConfigError(f"lidar.hfov: expected a span in (0, 2 pi] rad, got {self.hfov}")
        check_ray_config("lidar", self)

    @property
    def fill_value(self) -> float:
        return self.max_range if self.invalid_value is None else self.invalid_value

    def elevations(self) -> Tensor:
        """(C,) rad, top beam first."""
        if self.channels == 1:
            return torch.tensor([(self.vfov_min + self.vfov_max) / 2], dtype=torch.float64)
        return torch.linspace(self.vfov_max, self.vfov_min, self.channels, dtype=torch.float64)

    def azimuths(self) -> Tensor:
        """(A,) rad, leftmost column first (counter-clockwise positive about +z_S)."""
        j = torch.arange(self.columns, dtype=torch.float64)
        return self.hfov / 2 - (j + 0.5) * self.hfov / self.columns


def _ouster(
    model: str, channels: int, vfov_deg: float, max_range: float, min_range: float
) -> LidarConfig:
    return LidarConfig(
        channels=channels,
        columns=1024,
        vfov_min=-vfov_deg / 2 * _DEG,
        vfov_max=vfov_deg / 2 * _DEG,
        min_range=min_range,
        max_range=max_range,
        noise_std=0.01,
        source=f"Ouster {model} datasheet (rev 7): {vfov_deg:g} deg uniform vertical FOV, "
        f"1024x10 mode, range {min_range:g}-{max_range:g} m, ~1 cm precision (idealized "
        "like Aerial Gym's Ouster configs)",
    )


_LIDAR_PRESETS: dict[str, LidarConfig] = {
    **{f"os0_{c}": _ouster("OS0", c, 90.0, 50.0, 0.3) for c in (16, 32, 64, 128)},
    **{f"os1_{c}": _ouster("OS1", c, 45.0, 120.0, 0.5) for c in (16, 32, 64, 128)},
    # Ouster OS Dome: 180 deg vertical FOV (hemisphere), 128 channels; Aerial Gym ships an
    # "OS-Dome" config and shows its pattern in Fig. 4b. 512 columns as the 512x10 mode.
    "dome": LidarConfig(
        channels=64,
        columns=512,
        vfov_min=0.0,
        vfov_max=math.pi / 2,
        min_range=0.3,
        max_range=20.0,
        noise_std=0.01,
        source="Ouster OS Dome datasheet (hemispherical 180 deg FOV, 20 m at 10 % reflectivity)"
        "; Aerial Gym (003) Sec. III-D1 / Fig. 4b dome LiDAR; 64x512 pattern",
    ),
}
LIDAR_PRESETS: Registry[LidarConfig] = Registry("lidar preset", _LIDAR_PRESETS)


def lidar_config(spec: str | LidarConfig, **overrides: Any) -> LidarConfig:
    """A preset by name (or a config as is) with field overrides; unknown names list presets."""
    return preset_config(LIDAR_PRESETS, spec, LidarConfig, overrides)


@dataclass(frozen=True)
class LidarReading(RangePoints):
    """One batched scan (N envs, C channels, A columns); ``points``: (N, C*A, 3)."""

    range: Tensor  # (N, C, A) m along each beam; invalid_value where invalid
    valid: Tensor  # (N, C, A) bool
    object_id: Tensor  # (N, C, A) int64, -1 where no return
    origin: Tensor  # (N, 3) m, sensor origin in the world
    rotation: Tensor  # (N, 3, 3) R_WS
    rays: Tensor  # (C*A, 3) unit beams in the sensor frame

    def save(self, path: str | Path, env: int = 0) -> Path:
        """Env ``env``'s scan: ``x.png`` a top view of its world-frame points coloured by
        height, ``x.npz`` the arrays (range, valid, world-frame points)."""
        from volary.sensors.plots import lidar_png, save_reading

        pts = self.points("world")
        arrays = {"range": self.range, "valid": self.valid, "points": pts}
        return save_reading(path, env, arrays, lambda out, i: lidar_png(out, pts[i]))


class Lidar(RaySensor):
    """Batched ray-cast LiDAR: ``lidar(pos (N,3), quat (N,4))`` or ``lidar(state)``."""

    config: LidarConfig
    _resolve = staticmethod(lidar_config)
    _salt = 0x11DA7

    def _build(self) -> None:
        c = self.config
        dirs = spherical_rays(c.elevations(), c.azimuths()).reshape(-1, 3)
        self.bundle = RayBundle(dirs, c.mount, self.device, self.dtype)

    def __call__(self, pos: Any, quat: Tensor | None = None) -> LidarReading:
        """Scan from body poses ``pos (N, 3)``, ``quat (N, 4)`` (or a state)."""
        p, q = pose_args(pos, quat, self.n_envs, self.device, self.dtype)
        c = self.config
        origin, dirs, r_ws = self.bundle.world(p, q)
        hits = cast_bundle(self.caster, origin, dirs, c.max_range)
        hit = in_range(hits.distance, c.min_range, c.max_range)
        rng, valid = noisy_ranges(
            hits.distance,
            hit,
            std=c.noise_std,
            std_quadratic=c.noise_quadratic,
            dropout=c.dropout,
            stream=self.noise,
        )
        out = torch.where(valid, rng, c.fill_value)
        ids = torch.where(hit, hits.object_id, -1)
        shape = (self.n_envs, c.channels, c.columns)
        return LidarReading(
            out.reshape(shape),
            valid.reshape(shape),
            ids.reshape(shape),
            origin,
            r_ws,
            self.bundle.dirs_s,
        )
