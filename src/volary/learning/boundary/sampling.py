"""Deprecated import path: BoundaryPredictor's cost-minimizing sampling moved to
:mod:`volary.studies.boundary.sampling`. Its names are re-exported here for one release, each with a
DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.boundary import sampling as _new

MOVED_TO = "volary.studies.boundary.sampling"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
