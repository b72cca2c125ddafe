"""Deprecated import path: what the FLYINGTRUST protocol can detect (power) moved to
:mod:`volary.studies.flyingtrust.power`. Its names are re-exported here for one release, each
with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.flyingtrust import power as _new

MOVED_TO = "volary.studies.flyingtrust.power"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
