"""Counter-based random numbers: env i's draws depend only on (seed, env id, counter, draw index).

torch's generators produce a different stream when the tensor size changes (CPU ``randn``
switches to a vectorized path at 16 elements), so per-env noise drawn from one generator would
make env 0's trajectory depend on the batch size. A stateless integer hash (32-bit values held in
int64, exact on every device) gives each env its own reproducible stream instead.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

_MASK32 = 0xFFFFFFFF


def hash32(x: Tensor) -> Tensor:
    """A 32-bit avalanche hash (lowbias32 constants) of int64 tensors holding values < 2^32."""
    x = x & _MASK32
    x = x ^ (x >> 16)
    x = (x * 0x21F0AAAD) & _MASK32
    x = x ^ (x >> 15)
    x = (x * 0x735A2D97) & _MASK32
    return x ^ (x >> 15)


def env_keys(seed: int, env_ids: Tensor) -> Tensor:
    """One stream key per env from a user seed and the env's global index, shape (N,) int64."""
    s = hash32(torch.tensor(int(seed) & _MASK32, dtype=torch.int64, device=env_ids.device))
    return hash32(env_ids.to(torch.int64) * 0x9E3779B1 + s)


def uniform(keys: Tensor, counter: Tensor, n: int, dtype=torch.float32) -> Tensor:
    """Uniform draws in (0, 1), shape (*keys.shape, n): draw j of step ``counter`` for each key."""
    j = torch.arange(n, device=keys.device, dtype=torch.int64)
    h = hash32(hash32(keys[..., None] ^ (counter[..., None] * 0x85EBCA6B)) + j * 0xC2B2AE35)
    return (h.to(torch.float64 if dtype == torch.float64 else torch.float32) + 0.5) / 2.0**32


def normal(keys: Tensor, counter: Tensor, n: int, dtype=torch.float32) -> Tensor:
    """Standard normal draws (Box-Muller), shape (*keys.shape, n)."""
    m = (n + 1) // 2
    u = uniform(keys, counter, 2 * m, dtype=dtype).to(dtype)
    r = torch.sqrt(-2.0 * torch.log(u[..., :m]))
    th = 2.0 * math.pi * u[..., m:]
    return torch.cat((r * torch.cos(th), r * torch.sin(th)), dim=-1)[..., :n]
