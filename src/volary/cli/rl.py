"""Deprecated import path: the ``volary rl`` commands moved to :mod:`volary.studies.rl.cli` (the
RL study's typer app, which :mod:`volary.cli.main` mounts as ``volary rl``). Its names are
re-exported here for one release, each with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.rl import cli as _new

MOVED_TO = "volary.studies.rl.cli"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
