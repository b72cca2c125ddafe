"""Deprecated import path: the Table II grid of BoundaryPredictor inputs moved to
:mod:`volary.studies.boundary.grid`. Its names are re-exported here for one release, each with a
DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.boundary import grid as _new

MOVED_TO = "volary.studies.boundary.grid"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
