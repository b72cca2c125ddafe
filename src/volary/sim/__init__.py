"""Layer 4: the Simulator, the World that flies it through scenes with sensors, the named end
conditions and the one rollout loop every closed loop in volary uses."""

from volary.sim import terms
from volary.sim.actors import ACTOR_ID, Actors
from volary.sim.recording import Trajectory
from volary.sim.rollout import Episode, rollout
from volary.sim.simulator import SimConfig, Simulator
from volary.sim.world import OnCaster, Placement, Sensing, World

__all__ = [
    "ACTOR_ID",
    "Actors",
    "Episode",
    "OnCaster",
    "Placement",
    "Sensing",
    "SimConfig",
    "Simulator",
    "Trajectory",
    "World",
    "rollout",
    "terms",
]
