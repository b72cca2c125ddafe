"""Deprecated import path: the named training recipes (the RL study's tasks and hyperparameters)
moved to :mod:`volary.studies.rl.recipes`. Its names are re-exported here for one release, each
with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.rl import recipes as _new

MOVED_TO = "volary.studies.rl.recipes"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
