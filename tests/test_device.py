"""volary.device.resolve: a device as its tensors report it (``cuda`` -> ``cuda:0``), so a
user's ``device="cuda"`` and the tensors an env returns compare equal."""

from __future__ import annotations

import pytest
import torch

from volary.device import host_sync_is_cheap, resolve


def test_resolve_keeps_the_cpu_and_explicit_indices():
    assert resolve("cpu") == torch.device("cpu") == torch.zeros(1).device
    assert resolve(torch.device("cpu")) == torch.device("cpu")
    assert resolve("cuda:1") == torch.device("cuda", 1)  # an explicit index is kept as given
    assert host_sync_is_cheap("cpu") and not host_sync_is_cheap("cuda:0")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_resolve_gives_cuda_its_index():
    d = resolve("cuda")
    assert d == torch.zeros(1, device="cuda").device and d.index is not None
