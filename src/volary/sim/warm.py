"""``python -m volary.sim.warm`` (``make venv`` runs it once): compile the numba closed loop of
:mod:`volary.sim.fused` into numba's disk cache by flying a few Simulators, so that no later
process compiles it. It sits above the Simulator it builds (``fused`` serves the Simulator and
knows nothing of it)."""

from __future__ import annotations

import time

import torch

from volary.device import torch_threads
from volary.sim.fused import PARALLEL_MIN
from volary.sim.simulator import Simulator


def warm_cache(dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.float64)) -> dict:
    """Compile the numba closed-loop kernels (one and several threads) for ``dtypes`` into
    numba's disk cache, so that no later process compiles them; returns seconds per kernel
    (a few tenths when the cache is already filled). ``make venv`` runs this once."""
    out = {}
    for dtype in dtypes:
        # one env: contiguous buffers; PARALLEL_MIN: padded ones (numba_step.padded), on one
        # thread and on several; with and without an IMU (its buffer is typed by layout too)
        for n, threads in ((1, 1), (PARALLEL_MIN, 1), (PARALLEL_MIN, 2)):
            for imu in (None, "ideal"):
                with torch_threads(threads):
                    t = time.perf_counter()
                    sim = Simulator("crazyflie", n_envs=n, dtype=dtype, imu=imu)
                    sim.step([0.0, 0.0, 1.0, 0.0])
                    name = f"{str(dtype).removeprefix('torch.')} N={n} threads={threads} imu={imu}"
                    out[name] = time.perf_counter() - t
    return out


if __name__ == "__main__":
    for name, s in warm_cache().items():
        print(f"numba closed loop {name}: {s:.1f} s")
