"""Deprecated import path: the ROS 1 planners of the FLYINGTRUST benchmark (ros1:NAME) moved to
:mod:`volary.studies.flyingtrust.ros1`. Its names are re-exported here for one release, each with
a DeprecationWarning naming the new path."""

from volary.deprecation import forward, public_names
from volary.studies.flyingtrust import ros1 as _new

MOVED_TO = "volary.studies.flyingtrust.ros1"
__getattr__, __dir__ = forward(__name__, _new)
__all__ = public_names(_new)
