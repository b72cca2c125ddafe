"""Deprecated import path: the AlphaPilot race (rules, leaderboard, the flight; the rules every gate
race shares are core, volary.bench.gate_race) moved to :mod:`volary.studies.alphapilot.race`. Its
names are re-exported here for one release, each with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.alphapilot import race as _new

MOVED_TO = "volary.studies.alphapilot.race"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
