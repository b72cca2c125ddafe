"""Deprecated import path: the run database (one SQLite file per run) moved to the FLYINGTRUST
study, the only code that uses it, :mod:`volary.studies.flyingtrust.db`. Its names are
re-exported here for one release, each with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.flyingtrust import db as _new

MOVED_TO = "volary.studies.flyingtrust.db"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
