"""Parity of the fused stepper (make_stepper) with the eager reference ``rollout``."""

from __future__ import annotations

import warnings

import pytest
import torch

from volary.dynamics import (
    Airframe,
    Disturbance,
    DynamicsConfig,
    MultirotorState,
    VehicleParams,
    hover_speeds,
    rollout,
)
from volary.dynamics.compiled import _SoAStepper, make_stepper
from volary.platforms import layout

FIELDS = ("pos", "vel", "quat", "omega", "rotor_speed", "gust", "time")


def _case(n: int, seed: int = 0):
    pos, axes, dirs = layout("quad_x", 0.08)
    af = Airframe(
        name="fg",
        mass=1.0,
        inertia=(0.0049, 0.0053, 0.0098),
        rotor_positions=pos,
        rotor_axes=axes,
        rotor_directions=dirs,
        k_f=1.91e-6,
        k_m=2.6e-7,
        max_rotor_speed=2200.0,
        drag_linear=(0.01, 0.02, 0.03),
        drag_quadratic=(0.1, 0.1, 0.2),
        drag_moment=(1e-4,) * 3,
        force_noise=0.05,
        moment_noise=1e-3,
    )
    g = torch.Generator().manual_seed(seed)
    p = VehicleParams.from_airframes(af, n)
    w = hover_speeds(p) * (1 + 0.05 * torch.randn(n, 4, generator=g))
    s = MultirotorState.create(n, 4, pos=[0.0, 0.0, 0.05]).replace(
        rotor_speed=w.clone(), omega=torch.randn(n, 3, generator=g)
    )
    z = Disturbance.create(n)
    d = Disturbance(
        wind=torch.randn(n, 3, generator=g),
        gust_std=torch.full((n,), 0.5),
        gust_tau=torch.full((n,), 0.3),
        force=z.force,
        moment=z.moment,
    )
    return p, s, w, d, torch.arange(n)


def _assert_close(ref: MultirotorState, out: MultirotorState, rtol: float) -> None:
    for f in FIELDS:
        a, b = getattr(ref, f), getattr(out, f)
        err = ((a - b).abs().max() / a.abs().max().clamp_min(1e-6)).item()
        assert err < rtol, f"{f}: relative error {err:.2e} > {rtol:.0e}"
    for f in ("tick", "landed", "crashed", "diverged"):
        assert torch.equal(getattr(ref, f), getattr(out, f)), f


def test_eager_stepper_is_rollout():
    p, s, w, d, k = _case(8)
    cfg = DynamicsConfig()
    out = make_stepper(cfg, substeps=5)(p, s, w, d, k)
    _assert_close(rollout(p, s, w, d, k, cfg, 5), out, 1e-7)


@pytest.mark.parametrize("ground", [True, False])
def test_soa_formulation_matches_rollout_uncompiled(ground):
    """The component (SoA) equations, run eagerly, follow the reference for 100 steps."""
    p, s, w, d, k = _case(16)
    cfg = DynamicsConfig(ground=ground)
    step, x = _SoAStepper(cfg, 10, "eager"), s
    for _ in range(10):
        x = step(p, x, w, d, k)
    _assert_close(rollout(p, s, w, d, k, cfg, 100), x, 1e-5)


def test_soa_nan_command_is_caught_like_rollout():
    p, s, w, d, k = _case(4)
    w = w.clone()
    w[1, 2] = float("nan")
    cfg = DynamicsConfig()
    out = _SoAStepper(cfg, 3, "eager")(p, s, w, d, k)
    _assert_close(rollout(p, s, w, d, k, cfg, 3), out, 1e-6)
    assert out.diverged.tolist() == [False, True, False, False]


@pytest.mark.slow
@pytest.mark.parametrize("substeps", [1, 4])
def test_compiled_matches_rollout(substeps):
    """float32, 100 steps, stochastic forces and gusts, ground contact: within 1e-5 relative."""
    p, s, w, d, k = _case(32)
    cfg = DynamicsConfig()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a fallback to eager fails the test
        step, x = make_stepper(cfg, substeps=substeps, compile=True), s
        for _ in range(100 // substeps):
            x = step(p, x, w, d, k)
    _assert_close(rollout(p, s, w, d, k, cfg, 100), x, 1e-5)


def test_compile_failure_falls_back_to_eager(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no compiler")

    import volary.dynamics.compiled as compiled

    monkeypatch.setattr(compiled, "compile_graph", broken)
    p, s, w, d, k = _case(4)
    cfg = DynamicsConfig()
    step = make_stepper(cfg, substeps=2, compile=True)
    with pytest.warns(RuntimeWarning, match="falling back to eager"):
        out = step(p, s, w, d, k)
    _assert_close(rollout(p, s, w, d, k, cfg, 2), out, 1e-7)


def test_chunked_batches_match_rollout(monkeypatch):
    """Above CHUNK envs the step runs chunk by chunk (cache-resident); same results."""
    import volary.dynamics.compiled as compiled

    monkeypatch.setattr(compiled, "CHUNK", 5)
    p, s, w, d, k = _case(13)
    cfg = DynamicsConfig()
    step, x = _SoAStepper(cfg, 4, "eager"), s
    for _ in range(5):
        x = step(p, x, w, d, k)
    _assert_close(rollout(p, s, w, d, k, cfg, 20), x, 1e-5)
