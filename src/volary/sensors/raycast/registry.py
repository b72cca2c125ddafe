"""Backends by name, and :func:`make_raycaster`, the one way sensors build a caster.

Backend modules import their optional package (embreex, warp) only when a caster is built, so
importing this registry loads neither.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

import torch

from volary.registry import Registry
from volary.sensors.raycast.base import CasterFactory, RayCaster
from volary.sensors.raycast.embree_backend import EmbreeCaster
from volary.sensors.raycast.torch_backend import TorchCaster
from volary.sensors.raycast.warp_backend import WarpCaster
from volary.worlds.primitives import SceneSpec

BACKENDS: Registry[CasterFactory] = Registry(
    "ray-cast backend",
    {"torch": TorchCaster, "embree": EmbreeCaster, "warp": WarpCaster},
    hints=["auto"],
)


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def auto_backend(device: torch.device | str) -> str:
    """Warp on a CUDA device if warp is installed; else Embree on the CPU if embreex is
    installed; else the torch reference (any device)."""
    kind = torch.device(device).type
    if kind == "cuda" and _importable("warp"):
        return "warp"
    if kind == "cpu" and _importable("embreex"):
        return "embree"
    return "torch"


def make_raycaster(
    specs: SceneSpec | Sequence[SceneSpec],
    n_envs: int | None = None,
    *,
    backend: str = "auto",
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    ground: bool = True,
    segments: int = 64,
) -> RayCaster:
    """A caster for one scene per env (a shorter list is tiled to ``n_envs``).

    backend: "auto" (see :func:`auto_backend`) or a name of :data:`BACKENDS`; ground adds the
    floor z = bounds_min z (object id ``FLOOR_ID``); segments: cylinder/sphere tessellation of
    the mesh backends (the torch reference is exact). Raises UnknownNameError listing the
    backends, MissingDependencyError naming the extra to install.
    """
    name = auto_backend(device) if backend == "auto" else backend
    return BACKENDS.get(name)(
        specs, n_envs, device=device, dtype=dtype, ground=ground, segments=segments
    )
