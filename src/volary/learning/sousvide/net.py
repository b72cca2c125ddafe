"""Deprecated import path: SV-Net and its checkpoints moved to :mod:`volary.studies.sousvide.net`.
Its names are re-exported here for one release, each with a DeprecationWarning naming the new
path."""

from volary.deprecation import forward, public_names
from volary.studies.sousvide import net as _new

MOVED_TO = "volary.studies.sousvide.net"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
