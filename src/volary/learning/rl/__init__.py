"""Deprecated import path: the PPO trainer moved to the RL study, the only code that trains with
it, :mod:`volary.studies.rl.ppo` (``volary.learning.rl.ppo``, ``.recipes`` and ``.rsl`` are shims
too). Its names are re-exported here for one release, each with a DeprecationWarning naming the
new path."""

from volary.deprecation import forward, public_names
from volary.studies.rl import ppo as _new

MOVED_TO = "volary.studies.rl.ppo"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
