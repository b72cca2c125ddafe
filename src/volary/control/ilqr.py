"""Deprecated import path: the batched iLQR solver of the MPC expert moved to the SOUS VIDE
study, :mod:`volary.studies.sousvide.ilqr`. Its names are re-exported here for one release, each
with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.sousvide import ilqr as _new

MOVED_TO = "volary.studies.sousvide.ilqr"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
