"""Deprecated import path: what an AlphaPilot contestant is told and senses moved to
:mod:`volary.studies.alphapilot.interface`. Its names are re-exported here for one release, each
with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.alphapilot import interface as _new

MOVED_TO = "volary.studies.alphapilot.interface"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
