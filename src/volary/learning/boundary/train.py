"""Deprecated import path: BoundaryPredictor's training moved to
:mod:`volary.studies.boundary.train`. Its names are re-exported here for one release, each with a
DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.boundary import train as _new

MOVED_TO = "volary.studies.boundary.train"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
