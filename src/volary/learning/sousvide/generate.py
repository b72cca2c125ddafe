"""Deprecated import path: SOUS VIDE's expert data generation (Algorithm 1) moved to
:mod:`volary.studies.sousvide.generate`. Its names are re-exported here for one release, each with a
DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.sousvide import generate as _new

MOVED_TO = "volary.studies.sousvide.generate"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
