"""Deprecated import path: the AlphaPilot challenge from sensors moved to
:mod:`volary.studies.alphapilot.challenge`. Its names are re-exported here for one release, each
with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.alphapilot import challenge as _new

MOVED_TO = "volary.studies.alphapilot.challenge"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
