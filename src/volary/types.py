"""Protocols shared across layers: what a Controller, Sensor, Planner and Policy look like.

Only typing lives here, so every layer may import it.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch


@runtime_checkable
class Controller(Protocol):
    """Maps (vehicle state, setpoint) to the command of a lower level, batched over envs.

    ``reset(mask)`` clears internal state (integrators, filters) of the envs where mask is True.
    ``setpoint_size`` is the width of the (N, setpoint_size) setpoint it takes.
    """

    mode: str
    setpoint_size: int

    def __call__(self, state: Any, setpoint: Any, dt: float) -> torch.Tensor: ...

    def reset(self, mask: torch.Tensor | None = None) -> None: ...


@runtime_checkable
class Sensor(Protocol):
    """Produces a batched measurement from the simulator state at its own rate."""

    def __call__(self, state: Any, dt: float, generator: torch.Generator | None) -> Any: ...


@runtime_checkable
class Planner(Protocol):
    """Produces a reference (path or trajectory) from an observation of a scenario."""

    def plan(self, observation: Any) -> Any: ...


@runtime_checkable
class Policy(Protocol):
    """A learned or scripted policy: observation batch -> action batch."""

    def act(self, observation: Any) -> torch.Tensor: ...
