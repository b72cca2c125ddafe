"""Deprecated import path: the dask executor of the FLYINGTRUST runner moved to
:mod:`volary.studies.flyingtrust.cluster`. Its names are re-exported here for one release, each
with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.flyingtrust import cluster as _new

MOVED_TO = "volary.studies.flyingtrust.cluster"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
