"""A Gaussian-splat appearance for any volary scene, consistent with its collision geometry.

The surfaces are the ones every ray caster sees (:func:`volary.sensors.raycast.base.
world_triangles`: obstacles, gate frames, the floor quad), so an RGB frame and a depth frame of
the same pose show the same world. Each triangle gets ``ceil(area / spacing^2)`` flat Gaussians
placed by a randomly shifted R2 low-discrepancy sequence (Roberts 2018) folded into the
triangle, so the surface is covered evenly without clumps or holes; each is a disc in the
triangle's plane (standard deviation ``disc * spacing`` in-plane, ``thin * spacing`` along the
normal), opacity ``opacity``, with a view-independent colour (SH DC term only, the higher
coefficients zero up to ``sh_degree``).

Colours: obstacles a muted colour per object id (golden-ratio hue), gates their own colour
(``gate_colour``), the floor a 1 m checkerboard; all modulated by a procedural texture (a sum
of random plane waves of 0.25-2 m wavelength), so optical flow has texture to track. Everything
is drawn from ``numpy.random.default_rng(seed)``: same (scene, seed, config), same splats.
"""

from __future__ import annotations

import colorsys
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from volary.errors import ConfigError
from volary.math.quaternion import quat_from_rotmat
from volary.sensors.splat.io import GaussianSplats, splats_from_colours
from volary.worlds.primitives import SceneSpec

_R2 = (0.7548776662466927, 0.5698402909980532)  # 1/g, 1/g^2 for the plastic number g


@dataclass(frozen=True)
class SynthConfig:
    """How densely and how a scene is dressed in Gaussians. Lengths in m."""

    spacing: float = 0.1  # mean distance between Gaussians on obstacles and gates
    floor_spacing: float = 0.25  # the same on the floor
    max_gaussians: int = 300_000  # both spacings grow together (x sqrt) to stay under this
    disc: float = 0.6  # in-plane standard deviation / spacing
    thin: float = 0.02  # normal standard deviation / spacing
    opacity: float = 0.95
    texture: float = 0.35  # texture contrast: colour x (1 - texture + texture * t), t in [0, 1]
    gate_colour: tuple[float, float, float] = (1.0, 0.45, 0.05)
    floor_colours: tuple[tuple[float, float, float], ...] = ((0.42, 0.45, 0.38), (0.3, 0.33, 0.28))
    sh_degree: int = 0
    ground: bool = True  # dress the floor z = bounds_min z over the bounds (the casters' floor)

    def __post_init__(self) -> None:
        for name in ("spacing", "floor_spacing", "disc", "thin"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ConfigError(f"synth.{name}: expected a finite value > 0, got {v}")
        if not 0 < self.opacity < 1:
            raise ConfigError(f"synth.opacity: expected a value in (0, 1), got {self.opacity}")
        if not 0 <= self.texture <= 1:
            raise ConfigError(f"synth.texture: expected a value in [0, 1], got {self.texture}")
        if not 0 <= self.sh_degree <= 3:
            raise ConfigError(f"synth.sh_degree: expected 0..3, got {self.sh_degree}")
        if self.max_gaussians < 1:
            raise ConfigError(f"synth.max_gaussians: expected >= 1, got {self.max_gaussians}")


def _areas(tris: np.ndarray) -> np.ndarray:
    return 0.5 * np.linalg.norm(np.cross(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0]), axis=1)


def _counts(areas: np.ndarray, floor: np.ndarray, cfg: SynthConfig) -> tuple[np.ndarray, float]:
    """Gaussians per triangle and the spacing scale that keeps the total under the budget."""
    spacing = np.where(floor, cfg.floor_spacing, cfg.spacing)
    scale = 1.0
    while True:
        n = np.ceil(areas / (spacing * scale) ** 2).astype(np.int64)
        n[areas <= 0] = 0
        if n.sum() <= cfg.max_gaussians:
            return n, scale
        scale *= math.sqrt(n.sum() / cfg.max_gaussians) * 1.01


def sample_triangles(tris: np.ndarray, counts: np.ndarray, rng: np.random.Generator):
    """``counts[t]`` points on triangle t from a randomly shifted R2 sequence folded into the
    triangle (uniform, low discrepancy). Returns points (P, 3) and their triangle index (P,)."""
    tri = np.repeat(np.arange(len(tris)), counts)
    start = np.concatenate(([0], np.cumsum(counts)[:-1]))
    k = np.arange(len(tri)) - np.repeat(start, counts)
    shift = rng.random((len(tris), 2))
    uv = (shift[tri] + k[:, None] * np.asarray(_R2)) % 1.0
    fold = uv.sum(1) > 1.0
    uv[fold] = 1.0 - uv[fold]
    a, b, c = tris[tri, 0], tris[tri, 1], tris[tri, 2]
    return a + uv[:, :1] * (b - a) + uv[:, 1:] * (c - a), tri


def _frames(tris: np.ndarray) -> np.ndarray:
    """(T, 3, 3) rotation per triangle: columns (first edge, in-plane normal to it, face normal)."""
    e1 = tris[:, 1] - tris[:, 0]
    n = np.cross(e1, tris[:, 2] - tris[:, 0])
    e1 /= np.linalg.norm(e1, axis=1, keepdims=True).clip(1e-12)
    n /= np.linalg.norm(n, axis=1, keepdims=True).clip(1e-12)
    return np.stack((e1, np.cross(n, e1), n), axis=-1)


def texture(points: np.ndarray, rng: np.random.Generator, waves: int = 6) -> np.ndarray:
    """Procedural texture in [0, 1] at points (P, 3): the mean of ``waves`` plane waves
    ``(1 + sin(k . p + phi)) / 2`` with random directions, 0.25-2 m wavelengths and phases."""
    d = rng.normal(size=(waves, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    k = d * (2 * math.pi / rng.uniform(0.25, 2.0, size=(waves, 1)))
    phase = rng.uniform(0, 2 * math.pi, size=waves)
    return (0.5 * (1 + np.sin(points @ k.T + phase))).mean(axis=1)


def object_colour(object_id: int) -> tuple[float, float, float]:
    """A muted colour per object id (golden-ratio hue steps, saturation 0.45, value 0.7)."""
    hue = (0.1 + 0.6180339887 * object_id) % 1.0
    return colorsys.hsv_to_rgb(hue, 0.45, 0.7)


def _base_colours(
    points: np.ndarray, ids: np.ndarray, floor: np.ndarray, gates: set[int], cfg: SynthConfig
) -> np.ndarray:
    table = {int(i): object_colour(int(i)) for i in np.unique(ids)}
    table.update({g: cfg.gate_colour for g in gates})
    col = np.asarray([table[int(i)] for i in ids], dtype=np.float64).reshape(-1, 3)
    if floor.any():
        fc = np.asarray(cfg.floor_colours, dtype=np.float64)
        cell = np.floor(points[floor, :2]).astype(np.int64).sum(1) % len(fc)
        col[floor] = fc[cell]
    return col


def synthesize(
    spec: SceneSpec, seed: int = 0, config: SynthConfig | None = None, **overrides: Any
) -> GaussianSplats:
    """Gaussian splats dressing every surface of ``spec`` (obstacles, gate frames, floor), with
    a per-Gaussian ``object_id`` (int32, the primitive's id; the floor has id 0) in ``extra``
    (saved as an extra PLY property). ``overrides`` replace fields of ``config``."""
    from dataclasses import replace

    from volary.sensors.raycast.base import FLOOR_ID, world_triangles

    if not isinstance(spec, SceneSpec):
        raise ConfigError(f"spec: expected a SceneSpec, got {type(spec).__name__}")
    cfg = replace(config or SynthConfig(), **overrides)
    tris, ids = world_triangles(spec, 24, cfg.ground)
    tris = tris.astype(np.float64)
    floor = np.zeros(len(tris), bool)
    if cfg.ground:
        floor[-2:] = True  # world_triangles appends the floor quad last
    rng = np.random.default_rng(seed)
    counts, scale = _counts(_areas(tris), floor, cfg)
    pts, tri = sample_triangles(tris, counts, rng)
    frames = _frames(tris)[tri]
    spacing = np.where(floor[tri], cfg.floor_spacing, cfg.spacing) * scale
    sigma = np.stack((spacing * cfg.disc, spacing * cfg.disc, spacing * cfg.thin), axis=-1)
    gates = {int(g.object_id) for g in spec.gates}
    col = _base_colours(pts, ids[tri], floor[tri], gates, cfg)
    col *= 1 - cfg.texture + cfg.texture * texture(pts, rng)[:, None]
    splats = splats_from_colours(
        torch.from_numpy(pts).float(),
        quat_from_rotmat(torch.from_numpy(frames)).float(),
        torch.from_numpy(sigma).float(),
        torch.full((len(pts),), cfg.opacity),
        torch.from_numpy(col.clip(0, 1)).float(),
        sh_degree=cfg.sh_degree,
    )
    oid = np.where(floor[tri], FLOOR_ID, ids[tri]).astype(np.int32)
    return replace(splats, extra={"object_id": oid})


def synthesize_scenario(
    scenario: str, seed: int = 0, config: SynthConfig | None = None, **overrides: Any
) -> tuple[SceneSpec, GaussianSplats]:
    """``make_scenario(scenario, seed)`` and its splats (synthesized with the same seed)."""
    from volary.worlds.scenarios import make_scenario

    spec = make_scenario(scenario, seed)
    return spec, synthesize(spec, seed, config, **overrides)


__all__ = [
    "SynthConfig",
    "object_colour",
    "sample_triangles",
    "synthesize",
    "synthesize_scenario",
    "texture",
]
