"""Deprecated import path: rsl_rl's learner (``volary rl train --learner rsl_rl``) moved to the
RL study, :mod:`volary.studies.rl.rsl`. Its names are re-exported here for one release, each
with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.rl import rsl as _new

MOVED_TO = "volary.studies.rl.rsl"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
