"""Deprecated import path: the ``volary bp`` commands moved to :mod:`volary.studies.boundary.cli`
(``volary bp ...`` itself is unchanged). Its names are re-exported here for one release, each with
a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.boundary import cli as _new

MOVED_TO = "volary.studies.boundary.cli"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
