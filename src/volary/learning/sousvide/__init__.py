"""Deprecated import path: the SOUS VIDE study (paper 000) moved to :mod:`volary.studies.sousvide`
(its modules keep shims here). Its names are re-exported here for one release, each with a
DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies import sousvide as _new

MOVED_TO = "volary.studies.sousvide"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
