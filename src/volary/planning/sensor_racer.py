"""Deprecated import path: the AlphaPilot reference contestant moved to
:mod:`volary.studies.alphapilot.sensor_racer`. Its names are re-exported here for one release, each
with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.alphapilot import sensor_racer as _new

MOVED_TO = "volary.studies.alphapilot.sensor_racer"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
