"""Deprecated import path: running one work unit (the FLYINGTRUST runner's executors) moved to
:mod:`volary.studies.flyingtrust.units`. Its names are re-exported here for one release, each
with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.flyingtrust import units as _new

MOVED_TO = "volary.studies.flyingtrust.units"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
