"""``python -m volary.envs.warm`` (``make venv`` runs it once, after ``python -m
volary.sim.warm``): compile the one-call evaluation kernel of
:mod:`volary.envs.fused_position` into numba's disk cache by evaluating a zero MLP on a few
hover tasks. It sits above the tasks it builds (``fused_position`` serves ``PositionTask`` and
imports no task registry)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, cast

import numpy as np

from volary.device import torch_threads
from volary.envs import make_env
from volary.envs.fused_position import PARALLEL_MIN
from volary.envs.policy import MlpPolicy
from volary.envs.position import first_episodes
from volary.sim.fused import PARALLEL_MIN as PADDED_FROM

if TYPE_CHECKING:
    from volary.envs.position import PositionTask


def warm_cache() -> dict[str, float]:
    """Compile the evaluation kernel into numba's disk cache, so that no later process
    compiles it (9-13 s a variant on the 2-core machine, which a first ``volary rl train
    --recipe hover-fast`` would otherwise pay in its first validation and a first ``volary rl
    eval`` in its evaluation); seconds per variant. Four variants: serial and parallel, each on
    the Simulator's contiguous buffers (fewer than :data:`volary.sim.fused.PARALLEL_MIN` envs)
    and on its padded ones. ``make venv`` runs it once, after
    :func:`volary.sim.warm.warm_cache`."""
    out = {}
    for n, threads in ((8, 1), (PADDED_FROM, 1), (PARALLEL_MIN, 2), (PADDED_FROM, 2)):
        with torch_threads(threads):
            t = time.perf_counter()
            env = cast("PositionTask", make_env("hover", n_envs=n, compile="numba", episode_s=0.1))
            obs_dim = int(env.single_observation_space.shape[0])  # type: ignore[index]
            w = (np.zeros((8, obs_dim), np.float32), np.zeros((env.act_dim, 8), np.float32))
            b = (np.zeros(8, np.float32), np.zeros(env.act_dim, np.float32))
            first_episodes(env, MlpPolicy(w, b), seed=0)
            out[f"N={n} threads={threads}"] = time.perf_counter() - t
    return out


if __name__ == "__main__":
    for name, s in warm_cache().items():
        print(f"numba evaluation kernel {name}: {s:.1f} s")
