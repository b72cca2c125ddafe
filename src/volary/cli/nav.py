"""Deprecated import path: the ``volary bench run|resume|report|list`` commands moved to
:mod:`volary.studies.flyingtrust.cli` (``volary bench ...`` itself is unchanged). Its names are
re-exported here for one release, each with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.flyingtrust import cli as _new

MOVED_TO = "volary.studies.flyingtrust.cli"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
