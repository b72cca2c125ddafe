"""Time-of-flight range sensors: a multi-zone ToF imager (VL53L5CX-like) and a single-point
downward rangefinder (FlightGoggles' altimeter).

Models:
- Multi-zone ToF (FlightGoggles Sec. III-C3 "multi-point time-of-flight range sensors using ray
  casts"; Aerial Gym Sec. III-D1 "range for ToF sensors"): the square FOV is split into
  zones_y x zones_x zones; each zone casts sub_rays x sub_rays rays through the centres of a
  regular sub-grid of the zone (pinhole geometry, OpenCV frame: zone row 0 is the top). The zone
  distance is the **range** along the rays, reduced over the sub-rays that return: "min"
  (default; the VL53L5CX's "closest target first" order) or "mean". A zone with no return is
  invalid.
- Rangefinder (FlightGoggles Sec. III-C3, LightWare SF11/B [19]): one ray along -z_B from the
  mount point; range limits and noise of the SF11/B.
Noise sigma(r) = noise_std + noise_quadratic r^2 and dropouts from per-env counter streams.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from volary.errors import ConfigError
from volary.registry import Registry
from volary.sensors.rays import (
    FORWARD_CAMERA,
    Mount,
    RangePoints,
    RayBundle,
    RaySensor,
    cast_bundle,
    check_fov,
    check_positive_int,
    check_ray_config,
    in_range,
    noisy_ranges,
    pinhole_rays,
    pose_args,
    preset_config,
)

_DEG = math.pi / 180.0


@dataclass(frozen=True)
class TofConfig:
    """Multi-zone ToF; fov is the full horizontal = vertical FOV (rad); mount is T_BS of its
    OpenCV-style frame (default looking along +x_B). invalid_value None means ``max_range``."""

    zones_x: int = 8
    zones_y: int = 8
    fov: float = 45.0 * _DEG
    sub_rays: int = 4  # per zone and axis
    reduction: str = "min"
    min_range: float = 0.02
    max_range: float = 4.0
    invalid_value: float | None = None
    noise_std: float = 0.0
    noise_quadratic: float = 0.0
    dropout: float = 0.0
    mount: Mount = FORWARD_CAMERA
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        check_positive_int(
            "tof", zones_x=self.zones_x, zones_y=self.zones_y, sub_rays=self.sub_rays
        )
        check_fov("tof", "fov", self.fov)
        if self.reduction not in ("min", "mean"):
            raise ConfigError(f"tof.reduction: expected 'min' or 'mean', got {self.reduction!r}")
        check_ray_config("tof", self)

    @property
    def fill_value(self) -> float:
        return self.max_range if self.invalid_value is None else self.invalid_value


@dataclass(frozen=True)
class RangefinderConfig:
    """Single-point range sensor casting along -z of its FLU mount frame (default: -z_B)."""

    min_range: float = 0.2
    max_range: float = 120.0
    invalid_value: float | None = None
    noise_std: float = 0.0
    noise_quadratic: float = 0.0
    dropout: float = 0.0
    mount: Mount = Mount()
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        check_ray_config("rangefinder", self)

    @property
    def fill_value(self) -> float:
        return self.max_range if self.invalid_value is None else self.invalid_value


_TOF_PRESETS: dict[str, TofConfig] = {
    # ST VL53L5CX datasheet (DS13754): 8x8 zones, 45 deg x 45 deg FoV (63 deg diagonal),
    # ranging 2 cm - 4 m. The noise is assumed (a few percent): a 1 cm floor plus 0.005 r^2
    # (0.09 m, ~2 % at 4 m). Aerial Gym ships an idealized VL53L5CX config.
    "vl53l5cx": TofConfig(
        noise_std=0.01,
        noise_quadratic=0.005,
        source="ST VL53L5CX datasheet DS13754 (8x8, 45x45 deg, 0.02-4 m); Aerial Gym (003) "
        "Sec. III-D1",
    ),
    "vl53l5cx_4x4": TofConfig(
        zones_x=4,
        zones_y=4,
        sub_rays=8,
        noise_std=0.01,
        noise_quadratic=0.005,
        source="ST VL53L5CX datasheet DS13754, 4x4 resolution mode",
    ),
}
TOF_PRESETS: Registry[TofConfig] = Registry("tof preset", _TOF_PRESETS)

_RANGEFINDER_PRESETS: dict[str, RangefinderConfig] = {
    # FlightGoggles Sec. III-C3: downward single-point range finder with the noise of the
    # LightWare SF11/B [19]: 0.2-120 m, accuracy +-0.1 m (taken as 2 sigma -> 0.05 m).
    "flightgoggles": RangefinderConfig(
        min_range=0.2,
        max_range=120.0,
        noise_std=0.05,
        source="FlightGoggles (001) Sec. III-C3; LightWare SF11/B manual rev 8 (0.2-120 m, "
        "+-0.1 m)",
    ),
    "ideal": RangefinderConfig(min_range=0.0, max_range=100.0, source="noise-free"),
}
RANGEFINDER_PRESETS: Registry[RangefinderConfig] = Registry(
    "rangefinder preset", _RANGEFINDER_PRESETS
)


def tof_config(spec: str | TofConfig, **overrides: Any) -> TofConfig:
    """A ToF preset by name (or a config as is) with overrides; unknown names list presets."""
    return preset_config(TOF_PRESETS, spec, TofConfig, overrides)


def rangefinder_config(spec: str | RangefinderConfig, **overrides: Any) -> RangefinderConfig:
    """A rangefinder preset by name (or a config) with overrides; unknown names list presets."""
    return preset_config(RANGEFINDER_PRESETS, spec, RangefinderConfig, overrides)


@dataclass(frozen=True)
class TofReading(RangePoints):
    """One batched multi-zone frame (N envs, zones_y x zones_x); ``points``: one per zone along
    its centre ray, (N, Zy*Zx, 3)."""

    range: Tensor  # (N, Zy, Zx) m; invalid_value where no sub-ray returns
    valid: Tensor  # (N, Zy, Zx) bool
    origin: Tensor  # (N, 3) m
    rotation: Tensor  # (N, 3, 3) R_WS
    rays: Tensor  # (Zy*Zx, 3) unit zone-centre rays, sensor frame


@dataclass(frozen=True)
class RangeReading(RangePoints):
    """One batched single-point reading; ``points``: the return point, (N, 1, 3)."""

    range: Tensor  # (N,) m; invalid_value where invalid
    valid: Tensor  # (N,) bool
    origin: Tensor  # (N, 3) m
    rotation: Tensor  # (N, 3, 3) R_WS
    rays: Tensor  # (1, 3) the beam in the sensor frame, (0, 0, -1)


class MultiZoneTof(RaySensor):
    """Batched multi-zone ToF: ``tof(pos (N,3), quat (N,4))`` or ``tof(state)``."""

    config: TofConfig
    _resolve = staticmethod(tof_config)
    _salt = 0x70F

    def _build(self) -> None:
        c = self.config
        s = c.sub_rays
        raw = pinhole_rays(c.zones_x * s, c.zones_y * s, c.fov, c.fov)  # (Zy s, Zx s, 3)
        raw = raw.reshape(c.zones_y, s, c.zones_x, s, 3).permute(0, 2, 1, 3, 4)
        sub = raw.reshape(-1, 3)  # zone-major: (Zy, Zx, s, s)
        self.bundle = RayBundle(
            sub / sub.norm(dim=-1, keepdim=True), c.mount, self.device, self.dtype
        )
        centre = pinhole_rays(c.zones_x, c.zones_y, c.fov, c.fov).reshape(-1, 3)
        self.centre_rays = (centre / centre.norm(dim=-1, keepdim=True)).to(self.device, self.dtype)

    def __call__(self, pos: Any, quat: Tensor | None = None) -> TofReading:
        """Per-zone ranges for body poses (or a state)."""
        p, q = pose_args(pos, quat, self.n_envs, self.device, self.dtype)
        c = self.config
        origin, dirs, r_ws = self.bundle.world(p, q)
        d = cast_bundle(self.caster, origin, dirs, c.max_range).distance
        ok = in_range(d, c.min_range, c.max_range)
        d = d.reshape(self.n_envs, c.zones_y * c.zones_x, c.sub_rays**2)
        ok = ok.reshape(d.shape)
        zone = zone_distance(d, ok, c.reduction)
        rng, valid = noisy_ranges(
            zone,
            ok.any(-1),
            std=c.noise_std,
            std_quadratic=c.noise_quadratic,
            dropout=c.dropout,
            stream=self.noise,
        )
        out = torch.where(valid, rng, c.fill_value)
        shape = (self.n_envs, c.zones_y, c.zones_x)
        return TofReading(out.reshape(shape), valid.reshape(shape), origin, r_ws, self.centre_rays)


def zone_distance(d: Tensor, ok: Tensor, reduction: str) -> Tensor:
    """Zone range (N, Z) from sub-ray ranges d (N, Z, S) with returns ``ok``: the minimum
    (closest target) or the mean over returning sub-rays; 0 where none returns."""
    if reduction == "min":
        z = torch.where(ok, d, torch.full_like(d, math.inf)).amin(-1)
        return torch.where(torch.isfinite(z), z, torch.zeros_like(z))
    s = torch.where(ok, d, torch.zeros_like(d)).sum(-1)
    return s / ok.sum(-1).clamp_min(1).to(d.dtype)


class Rangefinder(RaySensor):
    """Batched single-point range sensor along -z of its mount (FlightGoggles' altimeter)."""

    config: RangefinderConfig
    _resolve = staticmethod(rangefinder_config)
    _salt = 0xA17

    def _build(self) -> None:
        beam = torch.tensor([[0.0, 0.0, -1.0]], dtype=torch.float64)
        self.bundle = RayBundle(beam, self.config.mount, self.device, self.dtype)

    def __call__(self, pos: Any, quat: Tensor | None = None) -> RangeReading:
        """Range along the beam for body poses (or a state)."""
        p, q = pose_args(pos, quat, self.n_envs, self.device, self.dtype)
        c = self.config
        origin, dirs, r_ws = self.bundle.world(p, q)
        d = cast_bundle(self.caster, origin, dirs, c.max_range).distance
        rng, valid = noisy_ranges(
            d,
            in_range(d, c.min_range, c.max_range),
            std=c.noise_std,
            std_quadratic=c.noise_quadratic,
            dropout=c.dropout,
            stream=self.noise,
        )
        out = torch.where(valid, rng, c.fill_value)
        return RangeReading(out[:, 0], valid[:, 0], origin, r_ws, self.bundle.dirs_s)
