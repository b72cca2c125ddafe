"""Deprecated import path: the benchmark statistics (configuration-cluster bootstrap, Holm,
the SOUS VIDE metrics) moved to the FLYINGTRUST study, the only code that uses them,
:mod:`volary.studies.flyingtrust.stats`. Its names are re-exported here for one release, each
with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.flyingtrust import stats as _new

MOVED_TO = "volary.studies.flyingtrust.stats"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
