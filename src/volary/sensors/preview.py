"""PNG previews of a scene as its sensors see it: the depth image and LiDAR scan from the start
pose (the figure writers themselves live in :mod:`volary.sensors.plots`, which the sensors use)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from volary.math.quaternion import quat_from_euler
from volary.sensors.camera import DepthCamera, camera_config
from volary.sensors.lidar import Lidar, lidar_config
from volary.sensors.plots import depth_png, lidar_png
from volary.sensors.raycast import make_raycaster


def preview_sensors(
    spec: Any,
    out_dir: str | Path,
    stem: str,
    *,
    backend: str = "auto",
    camera: str = "d455",
    lidar: str = "os1_64",
) -> list[Path]:
    """Depth image and LiDAR scan (world frame, top view) from ``spec``'s start pose (level,
    facing ``start_yaw``), noise-free; writes ``{stem}-depth.png`` and ``{stem}-lidar.png``."""
    caster = make_raycaster(spec, 1, backend=backend)
    pos = torch.tensor([spec.start], dtype=caster.dtype)
    z = torch.zeros(1, dtype=caster.dtype)
    quat = quat_from_euler(z, z, z + spec.start_yaw)
    cam = DepthCamera(camera_config(camera, noise_quadratic=0.0, invalid_value=math.nan), caster)
    scan = Lidar(lidar_config(lidar, noise_std=0.0), caster)(pos, quat)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [
        depth_png(out / f"{stem}-depth.png", cam(pos, quat).depth, title="z-depth [m]"),
        lidar_png(out / f"{stem}-lidar.png", scan.points("world"), title=f"{lidar} scan"),
    ]
