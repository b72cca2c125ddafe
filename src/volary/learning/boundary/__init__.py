"""Deprecated import path: the BoundaryPredictor study (paper 002) moved to
:mod:`volary.studies.boundary` (its modules keep shims here). Its names are re-exported here for one
release, each with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies import boundary as _new

MOVED_TO = "volary.studies.boundary"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
