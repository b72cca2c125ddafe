"""The state of N multirotors: a frozen dataclass of tensors, env dim first."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

import torch
from torch import Tensor

from volary.math.quaternion import quat_identity


@dataclass(frozen=True)
class MultirotorState:
    """Kinematic, rotor and status state of N vehicles (world frame z-up, body FLU)."""

    pos: Tensor  # (N, 3) m, world
    vel: Tensor  # (N, 3) m/s, world
    quat: Tensor  # (N, 4) [w, x, y, z] body-to-world
    omega: Tensor  # (N, 3) rad/s, body
    rotor_speed: Tensor  # (N, R) rad/s
    gust: Tensor  # (N, 3) m/s, world, gust part of the wind (Gauss-Markov)
    time: Tensor  # (N,) s since the env's last reset
    tick: Tensor  # (N,) int64 physics steps taken by the env (its noise counter; kept on reset)
    landed: Tensor  # (N,) bool, resting on the ground plane
    crashed: Tensor  # (N,) bool, hit the ground faster than the crash speed
    diverged: Tensor  # (N,) bool, a NaN/inf state or command was caught in this env

    @staticmethod
    def create(
        n_envs: int,
        n_rotors: int,
        *,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
        pos: Any = None,
        rotor_speed: Any = None,
    ) -> MultirotorState:
        """N vehicles at rest, level, at ``pos`` (default origin), rotors at ``rotor_speed``."""
        z3 = torch.zeros(n_envs, 3, device=device, dtype=dtype)
        f = torch.zeros(n_envs, dtype=torch.bool, device=device)
        p = z3.clone() if pos is None else torch.as_tensor(pos, device=device, dtype=dtype)
        w = torch.zeros(n_envs, n_rotors, device=device, dtype=dtype)
        if rotor_speed is not None:
            w = w + torch.as_tensor(rotor_speed, device=device, dtype=dtype)
        return MultirotorState(
            pos=p.expand(n_envs, 3).clone(),
            vel=z3.clone(),
            quat=quat_identity(n_envs, device=device, dtype=dtype),
            omega=z3.clone(),
            rotor_speed=w,
            gust=z3.clone(),
            time=torch.zeros(n_envs, device=device, dtype=dtype),
            tick=torch.zeros(n_envs, dtype=torch.int64, device=device),
            landed=f.clone(),
            crashed=f.clone(),
            diverged=f.clone(),
        )

    @property
    def n_envs(self) -> int:
        return int(self.pos.shape[0])

    def replace(self, **changes: Tensor) -> MultirotorState:
        return replace(self, **changes)

    def where(self, mask: Tensor, other: MultirotorState) -> MultirotorState:
        """Per env: ``other`` where ``mask`` (N,) is True, else self."""
        out = {}
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            m = mask.reshape(-1, *([1] * (a.dim() - 1)))
            out[f.name] = torch.where(m, b, a)
        return MultirotorState(**out)

    def index(self, idx: Any) -> MultirotorState:
        return MultirotorState(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    def to(self, device=None, dtype=None) -> MultirotorState:
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = (
                v.to(device=device, dtype=dtype) if v.is_floating_point() else v.to(device)
            )
        return MultirotorState(**out)
