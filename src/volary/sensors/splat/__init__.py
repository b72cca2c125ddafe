"""Gaussian-splat scenes (3DGS PLY I/O, synthesis from scenarios, collision geometry) and the
batched EWA splat renderer (torch reference, numba CPU tile path, optional gsplat on CUDA)."""

from volary.sensors.splat.io import (
    GaussianSplats,
    PlyLayout,
    align,
    load_ply,
    save_ply,
    sh_basis,
    sh_colour,
    splats_from_colours,
)
from volary.sensors.splat.render import SplatImage, camera_poses, look_at, render

__all__ = [
    "GaussianSplats",
    "PlyLayout",
    "SplatImage",
    "align",
    "camera_poses",
    "load_ply",
    "look_at",
    "render",
    "save_ply",
    "sh_basis",
    "sh_colour",
    "splats_from_colours",
]
