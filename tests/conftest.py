"""Shared test fixtures: single-threaded torch and a device fixture (CUDA when present)."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(1)

_DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=_DEVICES)
def device(request) -> str:
    return request.param
