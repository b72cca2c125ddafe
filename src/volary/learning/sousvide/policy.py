"""Deprecated import path: the deployable SV-Net policy moved to
:mod:`volary.studies.sousvide.policy`. Its names are re-exported here for one release, each with a
DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.sousvide import policy as _new

MOVED_TO = "volary.studies.sousvide.policy"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
