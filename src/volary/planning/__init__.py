"""Layer 3 planning: min-snap polynomial trajectories, time allocation, differential flatness."""

from volary.planning.minsnap import min_snap, rest_to_rest, single_segment
from volary.planning.trajectory import FlatOutputs, PolyTrajectory

__all__ = ["FlatOutputs", "PolyTrajectory", "min_snap", "rest_to_rest", "single_segment"]
