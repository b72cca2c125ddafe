"""Collision geometry for a splat scene: an occupancy grid of its opaque Gaussians.

A loaded splat (a photo reconstruction) has no meshes, so crashes are detected against the
voxels its opaque Gaussians occupy: every Gaussian with peak opacity >= ``min_opacity`` marks
the voxel of its mean and of the points ``mean +- extent sigma_k e_k`` along each axis k whose
standard deviation exceeds a quarter voxel (so a large flat Gaussian fills its extent, not just
its centre voxel). Voxels hit by fewer than ``min_count`` Gaussians are dropped (isolated
"floaters" of a reconstruction). The grid becomes a :class:`volary.worlds.VoxelGrid`, whose
merged boxes are ordinary scene obstacles, so ``collision_events``, ``CollisionMonitor``, the
ray casters and the planners all see the same solid world.

The grid is exact for what it is (cells of edge ``voxel``): obstacles grow by up to one voxel,
thin structures thinner than one voxel still occupy a full cell, and the *inside* of a closed
surface is not filled (the surface shell is, which is what a collision check from outside
needs; a vehicle that tunnels through a shell in one step is not caught, as with any
discrete check).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from volary.errors import ConfigError
from volary.math.quaternion import quat_normalize, quat_to_rotmat
from volary.sensors.splat.io import GaussianSplats
from volary.worlds.fields import VoxelGrid
from volary.worlds.primitives import SceneSpec


def _anchor_points(splats: GaussianSplats, keep: torch.Tensor, extent: float, voxel: float):
    """Means of kept Gaussians, plus mean +- extent sigma_k e_k for axes with sigma_k > voxel/4."""
    mu = splats.means[keep].double()
    rot = quat_to_rotmat(quat_normalize(splats.quats[keep].double()))
    sig = splats.scales[keep].double()
    pts = [mu]
    for k in range(3):
        big = sig[:, k] > voxel / 4
        off = rot[big, :, k] * (extent * sig[big, k, None])
        pts += [mu[big] + off, mu[big] - off]
    return torch.cat(pts).numpy()


def occupancy(
    splats: GaussianSplats,
    voxel: float = 0.2,
    *,
    min_opacity: float = 0.5,
    min_count: int = 1,
    extent: float = 1.0,
    below: float | None = None,
    object_id: int = 1,
) -> VoxelGrid:
    """The voxels (edge ``voxel`` m, aligned to multiples of it) occupied by opaque Gaussians.

    min_opacity: peak opacity a Gaussian needs to count. min_count: Gaussian anchors a voxel
    needs. extent: anchors at +- extent standard deviations along large axes. below: drop
    Gaussians whose mean z is below this (e.g. the floor, already the scene's lower bound).
    """
    if splats.means.dim() != 2:
        raise ConfigError("splats: expected one scene (G, 3), not per-env splats")
    if not (math.isfinite(voxel) and voxel > 0):
        raise ConfigError(f"voxel: expected > 0 m, got {voxel}")
    if not 0 <= min_opacity < 1 or min_count < 1 or not extent >= 0:
        raise ConfigError(
            f"min_opacity, min_count, extent: expected [0, 1), >= 1, >= 0; got "
            f"{min_opacity}, {min_count}, {extent}"
        )
    keep = splats.opacities >= min_opacity
    if below is not None:
        keep &= splats.means[:, 2] >= below
    if not bool(keep.any()):
        raise ConfigError(f"splats: no Gaussian with opacity >= {min_opacity} to voxelize")
    pts = _anchor_points(splats, keep, extent, voxel)
    cell = np.floor(pts / voxel).astype(np.int64)
    cells, counts = np.unique(cell, axis=0, return_counts=True)
    cells = cells[counts >= min_count]
    if len(cells) == 0:
        raise ConfigError(f"min_count: no voxel holds {min_count} Gaussian anchors")
    return VoxelGrid.from_points((cells + 0.5) * voxel, voxel, object_id, "splat occupancy")


def splat_scene(
    splats: GaussianSplats,
    voxel: float = 0.2,
    *,
    bounds: tuple[Sequence[float], Sequence[float]] | None = None,
    start: Sequence[float] | None = None,
    goal: Sequence[float] | None = None,
    name: str = "splat",
    margin: float = 1.0,
    **occupancy_kw: float,
) -> SceneSpec:
    """A SceneSpec whose obstacles are the merged boxes of :func:`occupancy`. Bounds default
    to the kept Gaussians' extent plus ``margin`` (floor at the lowest voxel); start and goal to
    the centres of the -x and +x margin slabs at mid height (as ``scene_from_file``)."""
    grid = occupancy(splats, voxel, **occupancy_kw)  # type: ignore[arg-type]
    lo = np.asarray(grid.origin)
    hi = lo + np.asarray(grid.occupied.shape) * grid.voxel
    if bounds is None:
        bmin, bmax = lo - margin, hi + margin
        bmin[2] = lo[2]
    else:
        bmin, bmax = np.asarray(bounds[0], float), np.asarray(bounds[1], float)
    mid = 0.5 * (bmin + bmax)
    s = np.array([bmin[0] + margin / 2, mid[1], mid[2]]) if start is None else np.asarray(start)
    g = np.array([bmax[0] - margin / 2, mid[1], mid[2]]) if goal is None else np.asarray(goal)

    def v3(a: np.ndarray) -> tuple[float, float, float]:
        return (float(a[0]), float(a[1]), float(a[2]))

    return SceneSpec(
        name,
        v3(bmin),
        v3(bmax),
        grid.to_boxes(),
        start=v3(s),
        goal=v3(g),
        meta={"voxel": voxel, "occupied_voxels": int(grid.occupied.sum())},
    )


__all__ = ["occupancy", "splat_scene"]
