"""Layer 1: vehicle state, airframe parameters, rotor/motor models, drag, disturbances,
rigid-body and thrust-rate models, allocation, and one ``physics_step`` that composes them."""

from volary.dynamics.airframe import Airframe
from volary.dynamics.allocation import allocate, allocate_thrusts, hover_speeds, thrusts_to_speeds
from volary.dynamics.bound import BoundStepper, bind_stepper
from volary.dynamics.models import GRAVITY
from volary.dynamics.params import VehicleParams
from volary.dynamics.state import MultirotorState
from volary.dynamics.step import (
    Disturbance,
    DynamicsConfig,
    Model,
    OnDivergence,
    physics_step,
    rollout,
)

__all__ = [
    "Airframe",
    "BoundStepper",
    "bind_stepper",
    "allocate",
    "allocate_thrusts",
    "hover_speeds",
    "thrusts_to_speeds",
    "GRAVITY",
    "VehicleParams",
    "MultirotorState",
    "DynamicsConfig",
    "Disturbance",
    "Model",
    "OnDivergence",
    "physics_step",
    "rollout",
]
