"""Deprecated import path: the SOUS VIDE flight scene moved to :mod:`volary.studies.sousvide.scene`.
Its names are re-exported here for one release, each with a DeprecationWarning naming the new
path."""

from volary.deprecation import forward, public_names
from volary.studies.sousvide import scene as _new

MOVED_TO = "volary.studies.sousvide.scene"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
