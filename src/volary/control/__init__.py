"""Layer 3: controllers at every abstraction level (rotor speeds up to Mellinger tracking),
batched over envs with per-env gains. See ``DESIGN.md`` beside this file."""

from volary.control.controller import (
    CONTROL_MODES,
    ControlMode,
    MultirotorController,
    make_controller,
)
from volary.control.gains import Gains
from volary.control.rate import RateLoopState

__all__ = [
    "CONTROL_MODES",
    "ControlMode",
    "MultirotorController",
    "make_controller",
    "Gains",
    "RateLoopState",
]
