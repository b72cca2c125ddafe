"""Shared test fixtures: single-threaded torch and a device fixture (CUDA when present)."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(1)

try:  # property tests (Hypothesis): reproducible in CI, no example database written
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "volary",
        deadline=None,
        database=None,
        derandomize=True,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    settings.register_profile("explore", parent=settings.get_profile("volary"), derandomize=False)
    settings.load_profile("volary")
except ImportError:  # the dev extra installs it; test files that need it importorskip
    pass

_DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=_DEVICES)
def device(request) -> str:
    return request.param


def pytest_collection_modifyitems(config, items) -> None:
    """The ROS 1 test files' tests carry the ``ros1`` marker (``make test ROS1=skip``)."""
    for item in items:
        if item.path.name.startswith("test_ros1"):
            item.add_marker(pytest.mark.ros1)
