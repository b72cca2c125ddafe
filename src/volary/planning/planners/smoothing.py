"""Deprecated import path: the slate planner module ``smoothing`` moved to
:mod:`volary.studies.flyingtrust.planners.smoothing`. Its names are re-exported here for one
release, each with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.flyingtrust.planners import smoothing as _new

MOVED_TO = "volary.studies.flyingtrust.planners.smoothing"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
