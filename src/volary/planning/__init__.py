"""Layer 3 planning: min-snap polynomial trajectories, time allocation, differential flatness.

Example (float64 throughout; ``traj`` moves to any device with ``traj.to("cuda")``)::

    import torch
    import volary.platforms
    from volary.planning import Limits, feasible, flat_to_state, min_snap, optimize_times

    wp = torch.tensor([[0.0, 0, 1], [1, 0.5, 1.2], [2, 0, 1]], dtype=torch.float64)
    traj = min_snap(wp, torch.tensor([1.0, 1.0]), yaw=torch.tensor([0.0, 0.5, 0.0]))
    flat = traj.evaluate(torch.linspace(0, 2, 201))  # pos/vel/acc/jerk/snap (201, 3), yaw (201,)
    cf = volary.platforms.get("crazyflie")
    state = flat_to_state(flat, cf)  # quat, omega, thrust, torque, rotor_speed (201, 4) ...
    print(feasible(traj, cf, Limits(max_speed=3.0)))  # "feasible" or the violated limits
    fast = optimize_times(wp, cf, Limits(max_speed=3.0, max_body_rate=10.0))  # minimum time
    setpoint = fast.evaluate(torch.tensor([0.5])).setpoint()  # (1, 14) for the mellinger mode
"""

from volary.planning.flatness import (
    FeasibilityReport,
    FlatState,
    Limits,
    feasible,
    feedforward_setpoint,
    flat_to_state,
    rotor_speed_command,
)
from volary.planning.minsnap import min_snap, rest_to_rest, single_segment
from volary.planning.timing import (
    TimeAllocation,
    fastest_feasible,
    optimize_times,
    plan,
    proportional_times,
    refine_ratios,
)
from volary.planning.trajectory import FlatOutputs, PolyTrajectory

__all__ = [
    "FeasibilityReport",
    "FlatOutputs",
    "FlatState",
    "Limits",
    "PolyTrajectory",
    "TimeAllocation",
    "fastest_feasible",
    "feasible",
    "feedforward_setpoint",
    "flat_to_state",
    "min_snap",
    "optimize_times",
    "plan",
    "proportional_times",
    "refine_ratios",
    "rest_to_rest",
    "rotor_speed_command",
    "single_segment",
]
