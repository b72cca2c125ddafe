"""The Simulator API: rates, resets, determinism, divergence policy, recording, IMU."""

from __future__ import annotations

import pytest
import torch

from _airframes import hexa, quad_x
from volary.errors import ConfigError, UnknownNameError
from volary.sim import Simulator

HOLD = torch.tensor([0.0, 0.0, 1.0, 0.0])


def test_position_hover_with_mixed_batch():
    sim = Simulator([quad_x(), hexa()], n_envs=4, stochastic=False)
    sim.run(HOLD, 2.0)
    assert sim.state.pos.sub(torch.tensor([0.0, 0.0, 1.0])).norm(dim=-1).max() < 0.01
    assert sim.params.n_rotors == 6


def test_setpoint_shape_and_config_errors_name_the_argument():
    sim = Simulator(quad_x(), n_envs=3)
    with pytest.raises(ConfigError, match=r"setpoint: expected shape \(3, 4\)"):
        sim.step(torch.zeros(3, 5))
    with pytest.raises(ConfigError, match="control_hz"):
        Simulator(quad_x(), control_hz=250.0)
    with pytest.raises(UnknownNameError, match="position"):
        Simulator(quad_x(), control="teleport")
    with pytest.raises(ConfigError, match="mask"):
        sim.reset(torch.tensor([1, 0, 1]))
    with pytest.raises(ConfigError, match="device: expected 'cpu', 'cuda' or 'cuda:N', got 'cdua'"):
        Simulator(quad_x(), device="cdua")  # torch's own error lists every backend it knows
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="device: 'cuda', but no CUDA device is available"):
            Simulator(quad_x(), device="cuda")


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"n_envs": 2.5}, "n_envs: expected an integer in [1, 16777216]"),  # TypeError in torch
        ({"n_envs": True}, "n_envs: expected an integer"),
        ({"n_envs": 10**12}, "n_envs: expected an integer in [1, 16777216]"),  # allocated first
        ({"seed": "a"}, "seed: expected an integer in [0, 4294967295]"),  # ValueError from int()
        ({"seed": 2**32}, "seed: expected an integer"),  # aliased seed 0's streams (32-bit key)
        ({"seed": -1}, "seed: expected an integer"),
        ({"stochastic": "no"}, "stochastic: expected True or False"),  # a truthy string: noise on
        ({"dtype": torch.int32}, "dtype: expected torch.float32 or torch.float64"),
        ({"rate_tau": -0.1}, "rate_tau: expected a time >= 0 s"),
    ],
)
def test_simulator_config_values_are_checked_before_anything_is_built(kw, says):
    with pytest.raises(ConfigError) as e:
        Simulator("crazyflie", **kw)
    assert str(e.value).startswith(says), str(e.value)


def test_reset_mask_touches_only_masked_envs():
    sim = Simulator(quad_x(), n_envs=3, stochastic=False)
    sim.run(torch.tensor([1.0, 0.0, 1.5, 0.0]), 1.0)
    before = sim.state
    sim.reset(torch.tensor([False, True, False]), pos=[0.0, 0.0, 2.0])
    assert torch.equal(sim.state.pos[[0, 2]], before.pos[[0, 2]])
    assert sim.state.pos[1].tolist() == [0.0, 0.0, 2.0]
    assert sim.state.time[1] == 0.0 and sim.state.time[0] > 0.99


def _noisy(n: int, seed: int = 3):
    af = quad_x().replace(force_noise=0.05, moment_noise=0.002, drag_quadratic=(0.1, 0.1, 0.2))
    sim = Simulator(af, n_envs=n, seed=seed, imu="bmi085")
    sim.set_wind([1.0, 0.0, 0.0], gust_std=0.5, gust_tau=0.5)
    sim.run(torch.tensor([0.5, -0.5, 1.2, 0.3]), 0.5)
    return sim


def test_same_seed_same_trajectory_and_batch_size_independence():
    a, b, big = _noisy(2), _noisy(2), _noisy(512)
    assert torch.equal(a.state.pos, b.state.pos)
    torch.testing.assert_close(big.state.pos[0], a.state.pos[0], rtol=0, atol=1e-5)
    torch.testing.assert_close(big.imu_reading.gyro[0], a.imu_reading.gyro[0], rtol=0, atol=1e-4)
    assert not torch.equal(_noisy(2, seed=4).state.pos, a.state.pos)
    assert not torch.equal(a.state.pos[0], a.state.pos[1])  # each env has its own stream


def test_imu_reads_gravity_reaction_in_hover():
    sim = Simulator(quad_x(), n_envs=2, imu="ideal", stochastic=False)
    sim.run(HOLD, 0.5)
    torch.testing.assert_close(
        sim.imu_reading.accel, torch.tensor([[0.0, 0.0, 9.81]] * 2), atol=0.05, rtol=0
    )


@pytest.mark.parametrize("policy", ["reset", "terminate"])
def test_nan_setpoint_in_one_env_is_contained(policy):
    ref = Simulator(quad_x(), n_envs=3, stochastic=False, on_divergence=policy)
    sim = Simulator(quad_x(), n_envs=3, stochastic=False, on_divergence=policy)
    sp = torch.tensor([[0.5, 0.0, 1.0, 0.0]] * 3)
    bad = sp.clone()
    bad[1, 0] = float("nan")
    with pytest.warns(RuntimeWarning, match=rf"setpoint: non-finite .* env\(s\) 1; .*'{policy}'"):
        for _ in range(24):
            ref.step(sp)
            sim.step(bad)
    assert torch.equal(sim.state.pos[[0, 2]], ref.state.pos[[0, 2]])
    assert torch.isfinite(sim.state.pos).all()
    if policy == "reset":
        assert sim.last_reset.tolist() == [False, True, False]
        assert sim.state.time[1] == 0.0
    else:
        assert sim.state.diverged.tolist() == [False, True, False]


@pytest.mark.parametrize("compile", ["numba", "eager"])
def test_a_non_finite_setpoint_is_explained_once_and_only_when_it_was_the_cause(compile):
    """step() does not check each setpoint (its hot path is microseconds), but a divergence
    that a NaN setpoint caused says so, once, at the user's line; one the state caused does not."""
    import warnings

    sim = Simulator(quad_x(), n_envs=2, stochastic=False, compile=compile)
    sp = torch.tensor([0.0, 0.0, 1.0, 0.0])
    sim.state = sim.state.replace(vel=torch.tensor([[0.0, 0.0, 0.0], [float("nan"), 0.0, 0.0]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sim.step(sp)  # env 1 diverges from its state, not its setpoint: nothing to tell
    assert sim.last_reset.tolist() == [False, True]
    with pytest.warns(RuntimeWarning, match=r"env\(s\) 0, 1; ") as told:
        sim.step(torch.full((4,), float("inf")))  # one setpoint for all envs
    assert told[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sim.step(torch.tensor([[float("nan"), 0.0, 1.0, 0.0], [0.0, 0.0, 1.0, 0.0]]))  # once


def test_recording_and_csv(tmp_path):
    sim = Simulator(quad_x(), n_envs=2, record=True)
    sim.run(HOLD, 0.25)
    traj = sim.trajectory()
    assert traj.pos.shape == (60, 2, 3) and traj.setpoint.shape == (60, 2, 4)
    path = traj.to_csv(tmp_path / "log.csv", env=1)
    lines = path.read_text().splitlines()
    assert lines[0].startswith("t,x,y,z") and len(lines) == 61


def test_thrust_rate_model_hovers_under_position_control():
    sim = Simulator(quad_x(), n_envs=2, model="thrust_rate", stochastic=False)
    sim.run(torch.tensor([0.3, 0.0, 1.0, 0.0]), 3.0)
    assert sim.state.pos.sub(torch.tensor([0.3, 0.0, 1.0])).norm(dim=-1).max() < 0.02


@pytest.mark.slow
def test_compiled_simulator_matches_eager():
    kw = dict(n_envs=4, seed=1, stochastic=True)
    af = quad_x().replace(force_noise=0.02, drag_quadratic=(0.1, 0.1, 0.2))
    eager, fast = Simulator(af, **kw), Simulator(af, compile=True, **kw)
    target = torch.tensor([0.4, -0.2, 1.3, 0.2])
    a, b = eager.run(target, 1.0), fast.run(target, 1.0)
    torch.testing.assert_close(b.pos, a.pos, rtol=0, atol=1e-4)
    torch.testing.assert_close(b.rotor_speed, a.rotor_speed, rtol=1e-4, atol=1e-2)


def test_numba_simulator_matches_eager():
    """compile='numba' (the small-batch CPU kernel) flies the same closed loop as eager."""
    pytest.importorskip("numba")
    kw = dict(n_envs=4, seed=1, stochastic=True)
    af = quad_x().replace(force_noise=0.02, drag_quadratic=(0.1, 0.1, 0.2))
    eager, fast = Simulator(af, **kw), Simulator(af, compile="numba", **kw)
    target = torch.tensor([0.4, -0.2, 1.3, 0.2])
    a, b = eager.run(target, 1.0), fast.run(target, 1.0)
    torch.testing.assert_close(b.pos, a.pos, rtol=0, atol=1e-4)
    torch.testing.assert_close(b.rotor_speed, a.rotor_speed, rtol=1e-4, atol=1e-2)


def test_controller_factory_replaces_the_built_in_mode():
    from volary.control import make_controller
    from volary.errors import ConfigError

    sim = Simulator("crazyflie", n_envs=2, controller=lambda p: make_controller("velocity", p))
    assert sim.controller.mode == "velocity"
    for _ in range(240):
        sim.step(torch.tensor([0.5, 0.0, 0.0, 0.0]))
    assert abs(float(sim.state.vel[0, 0]) - 0.5) < 0.05  # it flies the velocity setpoint
    with pytest.raises(ConfigError, match="controller"):
        Simulator("crazyflie", controller=lambda p: object())


def test_new_params_must_keep_the_batch_layout():
    """``sim.params = p`` takes randomized values of the same layout; another env count, rotor
    count or dtype is refused naming what was expected (the kernels once ran on silently)."""
    sim = Simulator("crazyflie", n_envs=2)
    sim.params = sim.params.replace(mass=sim.params.mass * 1.1)  # same layout: taken
    for other, what in (
        (Simulator("crazyflie", n_envs=3).params, "envs 2"),
        (Simulator("hexa", n_envs=2).params, "rotors 4"),
        (Simulator("crazyflie", n_envs=2, dtype=torch.float64).params, "dtype torch.float32"),
    ):
        with pytest.raises(ConfigError, match=f"params: expected {what}"):
            sim.params = other
    with pytest.raises(ConfigError, match="expected a VehicleParams"):
        sim.params = {"mass": 1.0}
