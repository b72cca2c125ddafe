"""Deprecated import path: the FLYINGTRUST planner slate and its registry moved to
:mod:`volary.studies.flyingtrust.planners`. Its names are re-exported here for one release, each
with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.flyingtrust import planners as _new

MOVED_TO = "volary.studies.flyingtrust.planners"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
