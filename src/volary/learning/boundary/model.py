"""Deprecated import path: the BoundaryPredictor network and its checkpoints moved to
:mod:`volary.studies.boundary.model`. Its names are re-exported here for one release, each with a
DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.boundary import model as _new

MOVED_TO = "volary.studies.boundary.model"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
