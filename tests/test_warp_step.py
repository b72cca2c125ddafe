"""The fused Warp physics kernel (``make_stepper(..., compile="warp")``) against the eager
reference, on Warp's CPU device (the same kernel source runs on CUDA: ``-m gpu`` below)."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

from test_compiled import _assert_close, _case
from volary.dynamics import (
    Disturbance,
    DynamicsConfig,
    MultirotorState,
    VehicleParams,
    hover_speeds,
    rollout,
)
from volary.dynamics.compiled import make_stepper
from volary.errors import ConfigError
from volary.math.random import env_keys
from volary.platforms import get as platform

pytest.importorskip("warp")


def _warp(cfg: DynamicsConfig, substeps: int):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a fallback to eager fails the test
        return make_stepper(cfg, substeps=substeps, compile="warp")


def _run(step, p, s, w, d, k, calls: int):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for _ in range(calls):
            s = step(p, s, w, d, k)
    return s


# parity with the eager step (float32 1e-5 over 100 steps in four configurations, float64
# 1e-12), the NaN-command and batch-size guarantees: tests/test_numba_step.py, for both kernels


def _double(p, s, w, d):
    d = type(d)(
        **{f: getattr(d, f).double() for f in ("wind", "gust_std", "gust_tau", "force", "moment")}
    )
    return p.to(dtype=torch.float64), s.to(dtype=torch.float64), w.double(), d


def test_warp_tilted_hexa_and_the_input_left_alone():
    """Six tilted rotors (another kernel build, a full allocation matrix); the input state is
    not written."""
    af = dataclasses.replace(platform("tilted_hexa"), force_noise=0.05)  # with process noise
    p = VehicleParams.from_airframes(af, 5)
    s = MultirotorState.create(5, 6, pos=[0.0, 0.0, 1.0])
    w = hover_speeds(p) * torch.linspace(0.95, 1.05, 6)
    d, k = Disturbance.create(5), env_keys(3, torch.arange(5))
    before = s.pos.clone()
    x = _warp(DynamicsConfig(), 20)(p, s, w, d, k)
    _assert_close(rollout(p, s, w, d, k, DynamicsConfig(), 20), x, 1e-5)
    assert torch.equal(s.pos, before)
    assert not torch.equal(x.omega, s.omega)  # the tilted rotors turned it


def test_warp_rejects_the_thrust_rate_model():
    with pytest.raises(ConfigError, match="rigid_body"):
        make_stepper(DynamicsConfig(model="thrust_rate"), compile="warp")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_warp_on_cuda_matches_the_cpu_reference():
    """The same kernel on a GPU: float32 within 1e-5, float64 within 1e-12 of the eager step."""
    p, s, w, d, k = _case(64)
    cfg = DynamicsConfig()
    ref = rollout(p, s, w, d, k, cfg, 40)
    dev = torch.device("cuda")
    pc, sc, dc = (
        p.to(device=dev),
        s.to(device=dev),
        type(d)(**{f.name: getattr(d, f.name).to(dev) for f in dataclasses.fields(d)}),
    )
    x = _run(_warp(cfg, 10), pc, sc, w.to(dev), dc, k.to(dev), 4)
    _assert_close(ref, x.to(device=torch.device("cpu")), 1e-5)
    p64, s64, w64, d64 = _double(p, s, w, d)
    ref64 = rollout(p64, s64, w64, d64, k, cfg, 40)
    d64c = type(d64)(**{f.name: getattr(d64, f.name).to(dev) for f in dataclasses.fields(d64)})
    x64 = _warp(cfg, 40)(p64.to(device=dev), s64.to(device=dev), w64.to(dev), d64c, k.to(dev))
    _assert_close(ref64, x64.to(device=torch.device("cpu")), 1e-12)
