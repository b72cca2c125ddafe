"""Throughput of the physics step (env-steps/s): used by ``volary bench physics`` and
``benchmarks/physics.py``. Timings live here and in benchmarks/, never in tests."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from volary.dynamics import Disturbance, DynamicsConfig, MultirotorState, VehicleParams
from volary.dynamics.allocation import hover_speeds
from volary.dynamics.compiled import make_stepper
from volary.math import random as vrandom


@dataclass(frozen=True)
class Throughput:
    impl: str
    n_envs: int
    env_steps_per_s: float  # median over repeats
    iqr: float
    bytes_per_env: float


def _bytes(*objs) -> int:
    total = 0
    for o in objs:
        for v in vars(o).values():
            if isinstance(v, torch.Tensor):
                total += v.numel() * v.element_size()
    return total


def measure_volary(
    airframe,
    n_envs: int,
    *,
    device: str = "cpu",
    compile: bool | str = False,
    substeps: int = 1,
    repeats: int = 5,
    min_time: float = 0.3,
) -> Throughput:
    """Median env-steps/s of the rigid-body model (motor lag, drag, RK4, float32)."""
    cfg = DynamicsConfig(stochastic=False, ground=False)
    p = VehicleParams.from_airframes(airframe, n_envs, device=device)
    s = MultirotorState.create(n_envs, p.n_rotors, device=device, pos=[0.0, 0.0, 5.0])
    w = hover_speeds(p)
    s = s.replace(rotor_speed=w)
    d = Disturbance.create(n_envs, device=device)
    keys = vrandom.env_keys(0, torch.arange(n_envs, device=device))
    step = make_stepper(cfg, substeps, compile=compile)
    for _ in range(3):
        s = step(p, s, w, d, keys)
    calls = 1
    while True:  # calibrate calls per repeat to ~min_time
        t0 = time.perf_counter()
        for _ in range(calls):
            s = step(p, s, w, d, keys)
        _sync(device)
        if time.perf_counter() - t0 > min_time or calls > 1 << 16:
            break
        calls *= 2
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            s = step(p, s, w, d, keys)
        _sync(device)
        rates.append(calls * substeps * n_envs / (time.perf_counter() - t0))
    q = statistics.quantiles(rates, n=4) if len(rates) > 1 else [rates[0]] * 3
    backend = compile if isinstance(compile, str) else ("inductor" if compile else "eager")
    name = f"volary-{backend}"
    name += f"-x{substeps}" if substeps > 1 else ""
    return Throughput(name, n_envs, statistics.median(rates), q[2] - q[0], _bytes(p, s) / n_envs)


def _sync(device: str) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
