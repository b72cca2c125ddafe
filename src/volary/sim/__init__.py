"""Layer 4: the Simulator that runs vehicles, controllers and sensors at their rates."""

from volary.sim.recording import Trajectory
from volary.sim.simulator import SimConfig, Simulator

__all__ = ["SimConfig", "Simulator", "Trajectory"]
