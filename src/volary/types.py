"""Protocols shared across layers: what a Controller and a Policy look like.

Only typing lives here, so every layer may import it. Each protocol has real implementations,
checked by ``tests/test_types_contracts.py``: a :class:`Controller` is what
``volary.control.make_controller`` builds for every control mode (and the MPC controllers), what
``volary.sim.Simulator`` flies; a :class:`Policy` is every registered sensors-only contestant
(``volary.planning.challenge.CONTESTANTS``), the SV-Net policy of every variant and the RL
actor-critic. Sensors and planners have no shared protocol here: each sensor has its own call
signature (``volary.sensors``), and the benchmark's planners follow
``volary.planning.navigation.NavPlanner``.
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
class Policy(Protocol):
    """A learned or scripted policy: observation batch -> action batch."""

    def act(self, observation: Any) -> torch.Tensor: ...
