"""Deprecated import path: FLYINGTRUST's episode (take-off, the 4 m/s cap, 90 s, 2 m goal radius)
moved to :mod:`volary.studies.flyingtrust.episode`. Its names are re-exported here for one
release, each with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.flyingtrust import episode as _new

MOVED_TO = "volary.studies.flyingtrust.episode"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
