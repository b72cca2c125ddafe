"""Deprecated import path: BoundaryPredictor's candidate flights moved to
:mod:`volary.studies.boundary.flight`. Its names are re-exported here for one release, each with a
DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.boundary import flight as _new

MOVED_TO = "volary.studies.boundary.flight"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
