"""Deprecated import path: the process-pool runner moved to the FLYINGTRUST study, the only code
that runs it, :mod:`volary.studies.flyingtrust.runner`. Its names are re-exported here for one
release, each with a DeprecationWarning naming the new path; so are the names this module lost
to :mod:`volary.studies.flyingtrust.run` before (``MOVED_NAMES``)."""

from typing import Any

from volary.deprecation import forward, forward_names, public_names
from volary.studies.flyingtrust import runner as _new

MOVED_TO = "volary.studies.flyingtrust.runner"
MOVED_NAMES = {
    "check_algo_names": "volary.studies.flyingtrust.run",
    "stored_suite": "volary.studies.flyingtrust.run",
}
_moved_name = forward_names(__name__, MOVED_NAMES)
_moved_module, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)


def __getattr__(name: str) -> Any:
    return _moved_name(name) if name in MOVED_NAMES else _moved_module(name)
