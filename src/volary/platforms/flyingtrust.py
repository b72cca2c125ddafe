"""Deprecated import path: the derivation of the 36 FLYINGTRUST airframes from Table I (the
generator of ``data/flyingtrust.toml``) moved to the FLYINGTRUST study,
:mod:`volary.studies.flyingtrust.platforms`. Its names are re-exported here for one release, each
with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.flyingtrust import platforms as _new

MOVED_TO = "volary.studies.flyingtrust.platforms"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
