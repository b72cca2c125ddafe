"""Deprecated import path: FLYINGTRUST's per-trial metrics moved to
:mod:`volary.studies.flyingtrust.metrics`. Its names are re-exported here for one release, each
with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.flyingtrust import metrics as _new

MOVED_TO = "volary.studies.flyingtrust.metrics"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
