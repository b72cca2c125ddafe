"""PositionTask's measured rate response (``rate_model="lag"``, issue 58): a step command's
body rate follows dead time + first-order lag, the attitude turns by its integral, and the
recipe trained against Betaflight's fit builds and flies."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch

from volary.envs.position import PositionTask, PositionTaskConfig
from volary.errors import ConfigError
from volary.math.quaternion import quat_conj, quat_mul
from volary.studies.rl.recipes import get_recipe

HZ = 100.0


def _at_rest(**kw) -> PositionTaskConfig:
    return PositionTaskConfig(control="ctbr", observation="aerial_gym", control_hz=HZ,
                              physics_hz=400.0, goal=(0, 0, 2),
                              start_range=(0, 0, 0), start_speed=0.0, start_tilt=0.0,
                              stochastic=False, rate_model="lag", **kw)  # fmt: skip


def _response(t: float, size: float, delay: float, tau: float) -> tuple[float, float]:
    """The continuous step response at t: (rate, its integral)."""
    s = max(t - delay, 0.0)
    return size * (1 - math.exp(-s / tau)), size * (s - tau * (1 - math.exp(-s / tau)))


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_a_rate_step_follows_the_fitted_delay_and_time_constant(axis: int) -> None:
    lag, delay = [0.013, 0.014, 0.048], [0.017, 0.018, 0.069]
    env = PositionTask(2, _at_rest(rate_lag=tuple(lag), rate_delay=tuple(delay)))
    obs, _ = env.reset(seed=5)
    q0 = env.world.state.quat[0].double()
    size = 1.5  # rad/s
    action = torch.zeros(2, 4)
    action[:, 0] = float(env.world.params.mass[0] * 9.81 / env._max_thrust[0]) * 2 - 1
    action[:, 1 + axis] = size / env.config.max_rates[axis]
    for k in range(1, 16):
        obs, *_ = env.step(action)
        rate, angle = _response(k / HZ, size, delay[axis], lag[axis])
        assert obs[0, -3 + axis].item() == pytest.approx(rate, abs=1e-4)  # the gyro's rate
        assert obs[0, -3 + (axis + 1) % 3].item() == pytest.approx(0.0, abs=1e-6)
        rel = quat_mul(quat_conj(q0), env.world.state.quat[0].double())  # body frame at t = 0
        assert 2 * math.asin(rel[1 + axis].item()) == pytest.approx(angle, abs=2e-4)
    # 63 % of the step one time constant after the dead time: the fit's tau, not the loop's
    assert _response(delay[axis] + lag[axis], 1, delay[axis], lag[axis])[0] == pytest.approx(
        1 - math.exp(-1)
    )


def test_the_betaflight_recipe_builds_randomizes_around_the_fit_and_keeps_the_starts() -> None:
    rec = get_recipe("aerial-gym-quad-ctbr-bf")
    opts = {**rec.env, "seed": 3}
    env = PositionTask(64, PositionTaskConfig(**opts))
    plain = PositionTask(64, PositionTaskConfig(**{**opts, "rate_lag_spread": 0.0}))
    env.reset(seed=3)
    plain.reset(seed=3)
    assert torch.equal(env.world.state.pos, plain.world.state.pos)  # same initial states
    assert torch.equal(env.goal, plain.goal)
    fit = torch.tensor(opts["rate_lag"], dtype=torch.float64)
    ratio = env._lag.tau / fit
    assert ratio.min() >= 0.7 and ratio.max() <= 1.3 and ratio.std() > 0.1
    assert torch.equal(plain._lag.tau, fit.expand(64, 3))
    hover = torch.zeros(64, 4)
    for _ in range(20):
        obs, reward, term, trunc, info = env.step(hover)
    assert torch.isfinite(obs).all() and env.world.sim.dynamics.model.value == "thrust_rate"
    assert get_recipe("aerial-gym-quad-ctbr").env["control"] == "ctbr"
    assert PositionTask(2, PositionTaskConfig())._lag is None  # default off: the rate loop


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"rate_model": "fast"}, "rate_model"),
        ({"rate_model": "lag", "control": "rotor_thrusts"}, "rate_model"),
        ({"rate_lag": (0.01, -0.01, 0.0)}, "rate_lag"),
        ({"rate_delay": (0.01, math.nan, 0.0)}, "rate_delay"),
        ({"rate_delay": (0.01, 0.0)}, "rate_delay"),
        ({"rate_lag_spread": 1.0}, "rate_lag_spread"),
    ],
)
def test_bad_rate_response_options_are_one_line_errors(kw: dict, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        PositionTaskConfig(**kw)
    assert str(err.value).startswith(f"{field}: expected") and "\n" not in str(err.value)


def test_the_recipes_lags_are_the_fit_of_the_committed_betaflight_steps() -> None:
    from volary.studies.rl.recipes import BETAFLIGHT_RATE_DELAY, BETAFLIGHT_RATE_LAG

    path = Path(__file__).resolve().parents[1] / "experiments/rl/betaflight-transfer/policy.py"
    spec = importlib.util.spec_from_file_location("fc_policy_bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fit = module.fit_rate_response("research_quad_1kg")
    axes = ("roll", "pitch", "yaw")
    assert tuple(fit[a]["tau_s"] for a in axes) == BETAFLIGHT_RATE_LAG
    assert tuple(fit[a]["delay_s"] for a in axes) == BETAFLIGHT_RATE_DELAY
    assert fit["roll"]["rms_of_step"] < 0.1  # roll and pitch are first-order + delay; yaw is not


def test_thrust_spread_scales_the_delivered_thrust_per_episode_and_keeps_the_starts() -> None:
    base = _at_rest(rate_lag=(0.01, 0.01, 0.01))
    env = PositionTask(32, base.replace(thrust_spread=0.1))
    plain = PositionTask(32, base)
    env.reset(seed=4)
    plain.reset(seed=4)
    assert torch.equal(env.world.state.pos, plain.world.state.pos)
    gain = env._thrust_gain
    assert 0.9 <= gain.min() and gain.max() <= 1.1 and gain.std() > 0.03
    action = torch.zeros(32, 4)  # half the max thrust: climbs at 0.5 T_max / m - g
    env.step(action)
    plain.step(action)
    # at rest the first step's vertical speed is linear in the delivered thrust
    g = 9.81 * 0.01
    dv = env.world.state.vel[:, 2] + g
    dv_plain = plain.world.state.vel[:, 2] + g
    assert torch.allclose(dv / dv_plain, gain, rtol=1e-3)
    with pytest.raises(ConfigError, match="^thrust_spread: expected 0"):
        PositionTaskConfig(control="rotor_thrusts", thrust_spread=0.1)
