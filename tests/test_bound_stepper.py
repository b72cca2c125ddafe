"""``bind_stepper``: the physics stepped in place, against the reference ``rollout``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from test_compiled import _assert_close, _case
from volary.dynamics import Disturbance, DynamicsConfig, rollout
from volary.dynamics.bound import bind_stepper
from volary.dynamics.compiled import INDUCTOR_MIN
from volary.errors import ConfigError

pytest.importorskip("numba")


def _commands(w: torch.Tensor, calls: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [w * (1 + 0.05 * torch.randn(w.shape, generator=g, dtype=w.dtype)) for _ in range(calls)]


@pytest.mark.parametrize("backend", ["numba", "eager"])
def test_bound_stepper_follows_rollout_float32(backend):
    """10 calls of 10 substeps, a new command each call, wind, gusts, noise, ground."""
    p, s, w, d, k = _case(16)
    cfg = DynamicsConfig()
    bound = bind_stepper(cfg, p, s, dist=d, keys=k, substeps=10, compile=backend)
    ref = s
    for u in _commands(w, 10):
        bound.step(u)
        ref = rollout(p, ref, u, d, k, cfg, 10)
    _assert_close(ref, bound.state, 1e-5 if backend == "numba" else 1e-7)


def test_bound_numba_with_padded_buffers_follows_rollout():
    """260 envs of float32: the kernel's buffers are padded (numba_step.padded)."""
    p, s, w, d, k = _case(260)
    cfg = DynamicsConfig()
    bound = bind_stepper(cfg, p, s, dist=d, keys=k, substeps=4, compile="numba")
    ref = s
    for u in _commands(w, 3):
        bound.step(u)
        ref = rollout(p, ref, u, d, k, cfg, 4)
    _assert_close(ref, bound.state, 1e-5)


def test_bound_numba_follows_rollout_float64_and_takes_numpy_commands():
    p, s, w, d, k = _case(8)
    p, s = p.to(dtype=torch.float64), s.to(dtype=torch.float64)
    d = Disturbance(**{f: getattr(d, f).double() for f in d.__dataclass_fields__})
    cfg = DynamicsConfig()
    bound = bind_stepper(cfg, p, s, dist=d, keys=k, substeps=5, compile="numba")
    ref = s
    for u in _commands(w.double(), 6):
        bound.step(u.numpy())
        ref = rollout(p, ref, u, d, k, cfg, 5)
    _assert_close(ref, bound.state, 1e-12)


def test_state_is_a_snapshot_and_can_be_set():
    p, s, w, d, k = _case(4)
    bound = bind_stepper(DynamicsConfig(), p, s, dist=d, keys=k, substeps=4, compile="numba")
    bound.step(w)
    before = bound.state
    pos = before.pos.clone()
    bound.step(w)
    assert torch.equal(before.pos, pos)  # later steps do not write into an earlier snapshot
    assert not torch.equal(bound.state.pos, pos)
    bound.state = s  # back to the start: the same steps give the same result
    bound.step(w)
    _assert_close(rollout(p, s, w, d, k, DynamicsConfig(), 4), bound.state, 1e-5)
    assert torch.equal(s.tick, torch.zeros(4, dtype=torch.int64))  # the caller's state untouched


def test_a_command_written_in_place_is_applied():
    """A policy writing into one command buffer each step must not fly a stale command."""
    p, s, w, d, k = _case(4)
    cfg = DynamicsConfig()
    bound = bind_stepper(cfg, p, s, dist=d, keys=k, substeps=3, compile="numba")
    u = w.clone()
    ref = s
    for scale in (1.0, 0.5, 1.2):
        u.copy_(w * scale)
        bound.step(u)
        ref = rollout(p, ref, w * scale, d, k, cfg, 3)
    _assert_close(ref, bound.state, 1e-5)


def test_float64_command_on_float32_vehicles_is_converted_each_step():
    p, s, w, d, k = _case(4)
    cfg = DynamicsConfig()
    bound = bind_stepper(cfg, p, s, dist=d, keys=k, substeps=3, compile="numba")
    u = w.double().numpy().copy()
    ref = s
    for scale in (1.0, 0.7):
        u[:] = w.double().numpy() * scale
        bound.step(u)
        ref = rollout(p, ref, torch.from_numpy(u).float(), d, k, cfg, 3)
    _assert_close(ref, bound.state, 1e-5)


def test_disturbance_can_be_replaced():
    p, s, w, d, k = _case(4)
    cfg = DynamicsConfig()
    bound = bind_stepper(cfg, p, s, keys=k, substeps=8, compile="numba")
    bound.disturbance = d
    bound.step(w)
    _assert_close(rollout(p, s, w, d, k, cfg, 8), bound.state, 1e-5)


def test_auto_backend_by_batch_size_and_model():
    p, s, _, _, _ = _case(4)
    assert bind_stepper(DynamicsConfig(), p, s).backend == "numba"
    big, sb, _, _, _ = _case(INDUCTOR_MIN)
    assert bind_stepper(DynamicsConfig(), big, sb).backend == "inductor"
    thrust_rate = DynamicsConfig(model="thrust_rate")
    assert bind_stepper(thrust_rate, p, s).backend == "eager"
    with pytest.raises(ConfigError, match="rigid_body"):
        bind_stepper(thrust_rate, p, s, compile="numba")


def test_bad_inputs_name_the_argument():
    p, s, w, _, _ = _case(4)
    bound = bind_stepper(DynamicsConfig(), p, s, compile="numba")
    with pytest.raises(ConfigError, match=r"command: expected shape \(4, 4\)"):
        bound.step(w[:2])
    with pytest.raises(ConfigError, match="command: expected a tensor or numpy array"):
        bound.step([[1.0] * 4] * 4)
    with pytest.raises(ConfigError, match="substeps"):
        bind_stepper(DynamicsConfig(), p, s, substeps=0)
    with pytest.raises(ConfigError, match="compile"):
        bind_stepper(DynamicsConfig(), p, s, compile="fast")
    with pytest.raises(ConfigError, match="state: expected 4 envs"):
        bound.state = s.index(slice(0, 2))
    with pytest.raises(ConfigError, match="keys"):
        bind_stepper(DynamicsConfig(), p, s, keys=torch.zeros(3, dtype=torch.int64))
    assert np.isfinite(bound.state.pos.numpy()).all()
