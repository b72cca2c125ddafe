"""Deprecated import path: the policy export (ONNX, C header, plain-array npz) moved to the RL
study, :mod:`volary.studies.rl.export`, the only code that calls it (``volary rl export``). Its
names are re-exported here for one release, each with a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.rl import export as _new

MOVED_TO = "volary.studies.rl.export"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
