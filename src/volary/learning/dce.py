"""Deprecated import path: the deep collision encoder moved to the RL study,
:mod:`volary.studies.rl.dce`. Its names are re-exported here for one release, each with a
DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.rl import dce as _new

MOVED_TO = "volary.studies.rl.dce"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
