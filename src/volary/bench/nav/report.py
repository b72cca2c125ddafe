"""Deprecated import path: the FLYINGTRUST report moved to :mod:`volary.studies.flyingtrust.report`.
Its names are re-exported here for one release, each with a DeprecationWarning naming the new
path."""

from volary.deprecation import forward, public_names
from volary.studies.flyingtrust import report as _new

MOVED_TO = "volary.studies.flyingtrust.report"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
