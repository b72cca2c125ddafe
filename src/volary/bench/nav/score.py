"""Deprecated import path: the FLYINGTRUST composite score (FinalScore, Table II) moved to
:mod:`volary.studies.flyingtrust.score`. Its names are re-exported here for one release, each
with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.flyingtrust import score as _new

MOVED_TO = "volary.studies.flyingtrust.score"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
