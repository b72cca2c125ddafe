"""Where reading a tensor's value back on the host is cheap.

A step that asks ``bool(mask.any())`` to skip work nobody needs (no env diverged, no episode
ended) pays a host synchronization on a GPU: the CPU waits for every queued kernel, and the next
step's kernels cannot be queued behind this one's. On the CPU the question costs nothing and
skipping the work saves time. So the loops of :mod:`volary.sim` and :mod:`volary.envs` ask
:func:`host_sync_is_cheap` first and, where it is not, do the masked work unconditionally (a
masked reset with an all-False mask changes nothing): the GPU step then never waits on the host
(``tests/test_env_sync.py`` counts the synchronizing ops).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


def host_sync_is_cheap(device: torch.device | str) -> bool:
    """True on the CPU (a tensor's value is already on the host); False on CUDA and other
    accelerators, where reading it back waits for the device."""
    return torch.device(device).type == "cpu"


def checked(device: torch.device | str, name: str = "device") -> torch.device:
    """``device`` as a torch device, or a ConfigError naming ``name``: not a device string
    (torch's own error lists every backend it was built for), or CUDA asked of a host without
    it (torch would fail later, at the first tensor)."""
    from volary.errors import ConfigError

    try:
        d = torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError(f"{name}: expected 'cpu', 'cuda' or 'cuda:N', got {device!r}") from None
    if d.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{name}: {str(device)!r}, but no CUDA device is available here")
    return d


def resolve(device: torch.device | str) -> torch.device:
    """``device`` as its tensors report it: ``"cuda"`` becomes ``cuda:<current index>``, so
    ``tensor.device == resolve(device)`` holds for a tensor made with ``device=device``
    (``torch.device("cuda") != torch.device("cuda:0")``)."""
    d = torch.device(device)
    if d.type != "cpu" and d.index is None:
        return torch.empty(0, device=d).device
    return d


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block on ``n`` torch CPU threads and give the caller's setting back after (a
    trainer pins its count so its sums, and so its results, do not follow the environment)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
