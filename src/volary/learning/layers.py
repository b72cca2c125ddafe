"""Deprecated import path: the network layers (``Coords``) moved to the RL study,
:mod:`volary.studies.rl.layers`, their only user. Its names are re-exported here for one
release, each with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.rl import layers as _new

MOVED_TO = "volary.studies.rl.layers"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
