"""Deprecated import path: the JSON and plots of volary race moved to
:mod:`volary.studies.alphapilot.reports`. Its names are re-exported here for one release, each with
a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.alphapilot import reports as _new

MOVED_TO = "volary.studies.alphapilot.reports"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
