"""Batched ray casting against scenes: the interface, the torch reference, Embree and Warp."""

from volary.sensors.raycast.base import FLOOR_ID, RayCaster, RayHits
from volary.sensors.raycast.embree_backend import EmbreeCaster
from volary.sensors.raycast.registry import BACKENDS, auto_backend, make_raycaster
from volary.sensors.raycast.torch_backend import TorchCaster
from volary.sensors.raycast.warp_backend import WarpCaster

__all__ = [
    "BACKENDS",
    "FLOOR_ID",
    "EmbreeCaster",
    "RayCaster",
    "RayHits",
    "TorchCaster",
    "WarpCaster",
    "auto_backend",
    "make_raycaster",
]
