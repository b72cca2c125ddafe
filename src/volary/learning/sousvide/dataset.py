"""Deprecated import path: the SOUS VIDE expert dataset (HDF5) moved to
:mod:`volary.studies.sousvide.dataset`. Its names are re-exported here for one release, each with a
DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.sousvide import dataset as _new

MOVED_TO = "volary.studies.sousvide.dataset"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
