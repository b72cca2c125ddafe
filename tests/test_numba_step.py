"""The numba kernel (``make_stepper(..., compile="numba")``) against the eager reference."""

from __future__ import annotations

import dataclasses
import importlib.util
import warnings

import numpy as np
import pytest
import torch

from test_compiled import _assert_close, _case
from volary.dynamics import DynamicsConfig, rollout
from volary.dynamics.compiled import make_stepper
from volary.dynamics.numba_step import LINE, copy_padded, padded
from volary.errors import ConfigError, UnknownNameError

pytest.importorskip("numba")


def _numba(cfg: DynamicsConfig, substeps: int):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a fallback to eager fails the test
        return make_stepper(cfg, substeps=substeps, compile="numba")


def _fast(cfg: DynamicsConfig, substeps: int, backend: str):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a fallback to eager fails the test
        return make_stepper(cfg, substeps=substeps, compile=backend)


# the fused kernels' shared guarantees, for each of them (warp: volary[warp], in the dev extras)
FUSED = [
    "numba",
    pytest.param("warp", marks=pytest.mark.skipif(
        importlib.util.find_spec("warp") is None, reason="warp-lang is not installed")),
]  # fmt: skip


@pytest.mark.parametrize(
    "cfg",
    [
        DynamicsConfig(),
        DynamicsConfig(ground=False),
        DynamicsConfig(integrator="euler"),
        DynamicsConfig(stochastic=False),
    ],
    ids=["rk4-ground-noise", "no-ground", "euler", "deterministic"],
)
@pytest.mark.parametrize("backend", FUSED)
def test_numba_matches_rollout_float32(cfg, backend):
    """100 steps (10 calls of 10 fused substeps), noise, gusts, wind, ground: 1e-5 relative."""
    p, s, w, d, k = _case(16)
    step, x = _fast(cfg, 10, backend), s
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for _ in range(10):
            x = step(p, x, w, d, k)
    _assert_close(rollout(p, s, w, d, k, cfg, 100), x, 1e-5)


@pytest.mark.parametrize("backend", FUSED)
def test_numba_matches_rollout_float64(backend):
    p, s, w, d, k = _case(8)
    p, s, d = p.to(dtype=torch.float64), s.to(dtype=torch.float64), d
    d = type(d)(
        **{f: getattr(d, f).double() for f in ("wind", "gust_std", "gust_tau", "force", "moment")}
    )
    w = w.double()
    cfg = DynamicsConfig()
    x = _fast(cfg, 50, backend)(p, s, w, d, k)
    _assert_close(rollout(p, s, w, d, k, cfg, 50), x, 1e-12)


def test_numba_padded_buffers_match_rollout_and_leave_the_input():
    """260 envs of float32 take the padded layout (numba_step.padded); the input state is not
    written (the kernel advances a copy)."""
    p, s, w, d, k = _case(260)
    cfg = DynamicsConfig()
    pos = s.pos.clone()
    step = _numba(cfg, 5)
    x = step(p, step(p, s, w, d, k), w, d, k)
    _assert_close(rollout(p, s, w, d, k, cfg, 10), x, 1e-5)
    assert torch.equal(s.pos, pos)


def test_padded_rows_are_an_odd_number_of_cache_lines_apart():
    a = np.arange(5 * 4096, dtype=np.float32).reshape(5, 4096)
    b = padded(a)
    assert np.array_equal(a, b) and b.shape == a.shape
    assert b.strides[0] % LINE == 0 and (b.strides[0] // LINE) % 2 == 1
    c = copy_padded(b)
    assert c.strides == b.strides and np.array_equal(c, b)
    c[0, 0] = -1.0
    assert b[0, 0] == 0.0  # a copy
    small = np.ones((5, 8), np.float64)  # 64 bytes a row: left contiguous
    assert padded(small).flags.c_contiguous and padded(small) is not small
    assert copy_padded(padded(small)).flags.c_contiguous


@pytest.mark.parametrize("backend", FUSED)
def test_numba_nan_command_flags_only_that_env(backend):
    p, s, w, d, k = _case(4)
    w = w.clone()
    w[1, 2] = float("nan")
    cfg = DynamicsConfig()
    out = _fast(cfg, 3, backend)(p, s, w, d, k)
    _assert_close(rollout(p, s, w, d, k, cfg, 3), out, 1e-5)
    assert out.diverged.tolist() == [False, True, False, False]
    assert torch.equal(out.pos[1], s.pos[1])  # the flagged env kept its last finite state


def _first(obj):
    """Env 0 of a dataclass of (N, ...) tensors."""
    return type(obj)(**{f.name: getattr(obj, f.name)[:1] for f in dataclasses.fields(obj)})


@pytest.mark.parametrize("backend", FUSED)
def test_numba_env0_independent_of_batch_size(backend):
    p, s, w, d, k = _case(8)
    cfg = DynamicsConfig()
    big = _fast(cfg, 20, backend)(p, s, w, d, k)
    one = _fast(cfg, 20, backend)(_first(p), _first(s), w[:1], _first(d), k[:1])
    for f in ("pos", "vel", "quat", "omega", "rotor_speed", "gust"):
        assert torch.equal(getattr(big, f)[:1], getattr(one, f)), f


def test_backend_names_are_checked():
    with pytest.raises(UnknownNameError, match="numba"):
        make_stepper(DynamicsConfig(), compile="cuda-graphs")
    with pytest.raises(ConfigError, match="rigid_body"):
        make_stepper(DynamicsConfig(model="thrust_rate"), compile="numba")
