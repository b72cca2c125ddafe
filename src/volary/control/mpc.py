"""Deprecated import path: the MPC expert (CasADi NMPC and batched iLQR) moved to the SOUS VIDE
study, :mod:`volary.studies.sousvide.mpc`. Its names are re-exported here for one release, each
with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.sousvide import mpc as _new

MOVED_TO = "volary.studies.sousvide.mpc"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
