"""Deprecated import path: FLYINGTRUST's end conditions (collision, goal dwell) moved to
:mod:`volary.studies.flyingtrust.terms`. Its names are re-exported here for one release, each
with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.flyingtrust import terms as _new

MOVED_TO = "volary.studies.flyingtrust.terms"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
