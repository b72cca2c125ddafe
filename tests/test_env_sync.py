"""An env step on a GPU never waits on the host: no synchronizing torch op in the step.

On CUDA, reading a tensor's value back (``bool(t.any())``, ``.item()``, ``nonzero``, boolean
indexing) makes the CPU wait for every queued kernel. The env and simulator loops skip that
question where :func:`volary.device.host_sync_is_cheap` says it is not cheap; here the CPU
run takes the GPU's branch (patched) and a dispatch mode counts the ops that would
synchronize. The same episodes come out either way.
"""

from __future__ import annotations

import collections

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from volary.envs import make_env

pytest.importorskip("warp")

# ops that read a device tensor's value back on the host
_SYNCING = {
    "aten._local_scalar_dense.default",
    "aten.nonzero.default",
    "aten.is_nonzero.default",
    "aten.equal.default",
    "aten.masked_select.default",
}


class _CountSyncs(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.hits: collections.Counter = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        bool_index = name.startswith("aten.index.Tensor") and any(
            getattr(i, "dtype", None) == torch.bool for i in args[1] if i is not None
        )
        if name in _SYNCING or bool_index:
            self.hits[name] += 1
        return func(*args, **(kwargs or {}))


def _as_on_gpu(monkeypatch) -> None:
    for mod in ("volary.envs.base", "volary.sim.simulator"):
        monkeypatch.setattr(f"{mod}.host_sync_is_cheap", lambda device: False)


def _episodes(task: str, steps: int):
    env = make_env(task, n_envs=32, seed=0, compile="warp", episode_s=0.5)
    obs, _ = env.reset(seed=3)
    gen = torch.Generator().manual_seed(0)
    out = [obs]
    counter = _CountSyncs()
    with counter:
        for _ in range(steps):
            a = torch.rand(32, env.act_dim, generator=gen) * 2 - 1
            obs, rew, term, trunc, info = env.step(a)
            out += [obs, rew, term, trunc, info["final_obs"]]
    return out, counter.hits


@pytest.mark.parametrize("task", ["hover", "reach"])
def test_env_step_on_the_gpu_branch_never_syncs_and_flies_the_same(task, monkeypatch):
    """60 steps of random actions (episodes of 30 steps end and restart, some crash): the GPU
    branch runs no synchronizing op, and every observation, reward and flag equals the CPU
    branch's."""
    cpu, cpu_hits = _episodes(task, 60)
    assert sum(cpu_hits.values()) > 0  # the CPU branch does ask (the counter sees it)
    _as_on_gpu(monkeypatch)
    gpu, gpu_hits = _episodes(task, 60)
    assert dict(gpu_hits) == {}
    for a, b in zip(cpu, gpu, strict=True):
        assert torch.equal(a, b)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("compile_", ["warp", "eager"])
def test_env_steps_on_cuda_raise_nothing_under_sync_debug_error(compile_):
    """On a real GPU: torch's own detector, set to raise on any synchronizing call, sees none
    in 40 steps with episodes ending and restarting."""
    env = make_env("hover", n_envs=256, seed=0, device="cuda", compile=compile_, episode_s=0.25)
    env.reset(seed=0)
    gen = torch.Generator(device="cuda").manual_seed(0)
    env.step(torch.zeros(256, env.act_dim, device="cuda"))  # first call: kernel builds
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(40):
            env.step(torch.rand(256, env.act_dim, device="cuda", generator=gen) * 2 - 1)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert int(env.episode_length.max()) < 40  # episodes of 15 steps ended and restarted
