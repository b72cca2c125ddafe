"""Gaussian-splat scenes (3DGS PLY I/O, synthesis from scenarios, collision geometry) and the
batched EWA splat renderer (torch reference, torch pair path for any device, numba CPU path,
optional gsplat on CUDA). See ``volary/sensors/DESIGN.md``."""

from volary.sensors.splat.camera import SKY, SplatCamera, to_uint8
from volary.sensors.splat.collision import occupancy, splat_scene
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
from volary.sensors.splat.render import BACKENDS, SplatImage, camera_poses, look_at, render
from volary.sensors.splat.synth import SynthConfig, synthesize, synthesize_scenario

__all__ = [
    "SKY",
    "BACKENDS",
    "GaussianSplats",
    "PlyLayout",
    "SplatCamera",
    "SplatImage",
    "SynthConfig",
    "align",
    "camera_poses",
    "load_ply",
    "look_at",
    "occupancy",
    "render",
    "save_ply",
    "sh_basis",
    "sh_colour",
    "splat_scene",
    "splats_from_colours",
    "synthesize",
    "synthesize_scenario",
    "to_uint8",
]
