"""The position envs flown through Betaflight 4.6.0 SITL (``volary.fc.env``, issue 58): the
committed ``hover-fast`` policy holds the goal through the firmware's rate loop, two runs of a
seed are identical, a killed firmware ends its own env's episode only (cause
``firmware_lost``), a reset gives only the reset envs fresh firmwares, bad options are refused
before any firmware starts.

The flights need the built SITL (``python -m volary.fc.betaflight build``; make test does it)
and skip, saying so, without it; the option checks run everywhere. Loopback only.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from unittest import mock

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from volary.errors import ConfigError
from volary.fc.betaflight import find
from volary.fc.env import FirmwarePositionTask, make_firmware_env
from volary.inputs import LIMITS

needs_sitl = pytest.mark.skipif(
    find() is None,
    reason="Betaflight SITL not built: run `python -m volary.fc.betaflight build`",
)
CHECKPOINT = (
    Path(__file__).resolve().parents[1]
    / "benchmarks/results/rl/hover-fast-body-rsl_rl/seed0/policy.pt"
)
SEED = 5  # the starts: 0.99 m and 0.88 m from the goal, tilted, moving
# hover-fast's training options (body observation, numba physics), 4 s episodes: the policy
# settles to its steady 0.14 m offset in about 3 s (10 s in the slow test)
OPTIONS = {"observation": "body", "compile": "numba", "seed": SEED, "episode_s": 4.0}


@pytest.fixture(scope="module")
def policy():
    from volary.studies.rl.ppo import load_policy

    torch.set_num_threads(1)
    return load_policy(CHECKPOINT)[0]


def _pids(env: FirmwarePositionTask) -> list[int]:
    return [bank.firmwares[0].pid for bank in env.firmware.banks.values()]


def _fly(env, policy, steps: int, kill: tuple[int, int] | None = None) -> list[dict]:
    """``steps`` env steps under the deterministic policy from ``reset(seed=SEED)``; per step
    the obs and flags. ``kill``: (step, env) whose firmware gets SIGKILL before that step."""
    obs, _ = env.reset(seed=SEED)
    rows = []
    for k in range(steps):
        if kill is not None and k == kill[0]:
            os.kill(env.firmware.banks[kill[1]].firmwares[0].pid, signal.SIGKILL)
        obs, reward, term, trunc, info = env.step(policy.act(obs, deterministic=True))
        rows.append({"obs": obs.clone(), "reward": reward.clone(), "term": term.clone(),
                     "trunc": trunc.clone(), "cause": env.cause.clone(),
                     "success": info["success"].clone(),
                     "final_distance": info["final_distance"].clone()})  # fmt: skip
    return rows


@pytest.fixture(scope="module")
def reference(policy) -> list[dict]:
    """One 2-env, 4 s hover episode of hover-fast through Betaflight (seed SEED)."""
    if find() is None:
        pytest.skip("Betaflight SITL not built")
    with make_firmware_env("hover", 2, **OPTIONS) as env:
        return _fly(env, policy, env.max_steps)


@needs_sitl
def test_hover_fast_holds_the_goal_through_betaflight(reference):
    """Both envs fly the whole episode and end it by time inside the success band (within
    0.2 m of the goal, under 0.5 m/s), from starts 0.9-1.0 m away."""
    assert not any(bool(r["term"].any()) for r in reference)
    last = reference[-1]
    assert bool(last["trunc"].all()) and bool(last["success"].all()), last["final_distance"]
    assert float(last["final_distance"].max()) < 0.2
    assert float(reference[0]["obs"][:, :3].norm(dim=-1).min()) > 0.8  # it had to fly there


@needs_sitl
def test_a_seed_repeats_and_a_killed_firmware_ends_its_env_only(policy, reference):
    """The same seed again, with SIGKILL to env 0's firmware 3 s in: until then both envs'
    observations and rewards are the reference's bit for bit; that step env 0 terminates with
    ``firmware_lost`` (an event names it) and autoresets onto a fresh firmware that flies its
    next episode; env 1 flies its whole episode bit for bit as without the kill."""
    kill_at = 180
    with make_firmware_env("hover", 2, **OPTIONS) as env:
        hit = _fly(env, policy, len(reference), kill=(kill_at, 0))
        assert [e.vehicle for e in env.events] == [0] and "SIGKILL" in env.events[0].cause
        assert not env.firmware.lost.any()  # env 0 got a fresh one at its autoreset
    lost = env.term_names.index("firmware_lost")
    for k, (a, b) in enumerate(zip(reference, hit, strict=True)):
        rows = slice(None) if k < kill_at else 1  # env 1 never noticed
        assert torch.equal(a["obs"][rows], b["obs"][rows]), k
        assert torch.equal(a["reward"][rows], b["reward"][rows]), k
    assert hit[kill_at]["term"].tolist() == [True, False]
    assert hit[kill_at]["cause"].tolist() == [lost, -1]
    assert not any(bool(r["term"].any()) for k, r in enumerate(hit) if k != kill_at)
    assert hit[-1]["trunc"].tolist() == [False, True]  # env 0 is 59 steps into its next one


@needs_sitl
@pytest.mark.parametrize("name", ["hover", "reach"])
def test_a_masked_reset_restarts_only_those_envs_firmwares(name):
    with make_firmware_env(name, 2, seed=1) as env:
        env.reset(seed=1)
        before = _pids(env)
        env.step(torch.zeros(2, 4))
        env.reset(options={"mask": torch.tensor([False, True])})
        after = _pids(env)
        assert after[0] == before[0] and after[1] != before[1]
        assert env.episode_length.tolist() == [1, 0]
    assert env.firmware is None  # closed: every process stopped
    with pytest.raises(OSError):
        os.kill(after[0], 0)


BAD = [
    ({"control": "velocity"}, "control"),
    ({"control": "rotor_thrusts"}, "control"),
    ({"platform": "x500"}, "platform"),
    ({"platform": ("crazyflie", "x500")}, "platform"),
    ({"random_airframes": True}, "random_airframes"),
    ({"rate_model": "lag", "rate_lag": (0.02, 0.02, 0.05)}, "rate_model"),
    ({"n_envs": int(LIMITS["fc_vehicles"].hi) + 1}, "n_envs"),
    ({"n_envs": 0}, "n_envs"),
    ({"n_envs": True}, "n_envs"),
    ({"firmware": "px4"}, "firmware"),
    ({"imu": "nope"}, "imu"),
    ({"exchange_hz": 1000.0}, "exchange_hz"),  # not a multiple of the 60 Hz control rate
    ({"exchange_hz": float("nan")}, "exchange_hz"),
    ({"exchange_hz": 60e6}, "exchange_hz"),
    ({"exchange_hz": "960"}, "exchange_hz"),
    ({"physics_hz": 1000.0}, "physics_hz"),
    ({"timeout_s": 0.0}, "timeout_s"),
    ({"device": "cuda"}, "device"),
    ({"colour": "red"}, "colour"),
    ({"name": "navigate"}, "name"),
]


@contextlib.contextmanager
def no_firmware():
    """Fails the test if a firmware process would start."""
    import volary.fc.betaflight as bf

    def refuse(*a, **k):
        raise AssertionError("a firmware process was started")

    with (
        mock.patch.object(bf.FirmwareBank, "__init__", refuse),
        mock.patch.object(bf.Firmware, "__init__", refuse),
    ):
        yield


@pytest.mark.parametrize(("bad", "option"), BAD, ids=[o for _, o in BAD])
def test_bad_options_are_one_line_config_errors_before_any_firmware_starts(bad, option):
    kw = {"name": "hover", "n_envs": 2, **bad}
    with no_firmware(), pytest.raises(ConfigError) as e:
        env = make_firmware_env(kw.pop("name"), **kw)
        env.reset(seed=0)  # not reached
    msg = str(e.value)
    assert "\n" not in msg and option in msg, msg


def test_without_the_sitl_build_the_env_says_how_to_build_it():
    from volary.fc.betaflight import FirmwareError

    with no_firmware(), mock.patch("volary.fc.betaflight.find", lambda: None):
        with pytest.raises(FirmwareError, match="python -m volary.fc.betaflight build"):
            make_firmware_env("hover", 2)


NOT_A_COUNT = st.one_of(
    st.integers(max_value=0),
    st.integers(min_value=int(LIMITS["fc_vehicles"].hi) + 1),
    st.floats().filter(lambda x: not (x.is_integer() and 1 <= x <= LIMITS["fc_vehicles"].hi)),
    st.text(max_size=3),
    st.none(),
)


@given(NOT_A_COUNT)
def test_n_envs_outside_the_firmware_limit_is_refused(n):
    with no_firmware(), pytest.raises(ConfigError, match="^n_envs: "):
        make_firmware_env("hover", n).reset(seed=0)


@needs_sitl
@pytest.mark.slow
def test_hover_fast_full_episodes_at_the_default_rates(policy):
    """The task as trained (10 s episodes) at the env's default rates (960 Hz exchanges, 1920 Hz
    torch physics), 3 envs: every first episode ends by time in the success band, and each env
    that ended starts its next one on a fresh firmware."""
    with make_firmware_env("hover", 3, observation="body", seed=SEED) as env:
        obs, _ = env.reset(seed=SEED)
        pids = _pids(env)
        for _ in range(env.max_steps):
            obs, _, term, trunc, info = env.step(policy.act(obs, deterministic=True))
            assert not bool(term.any())
        assert bool(trunc.all()) and bool(info["success"].all()), info["final_distance"]
        assert all(a != b for a, b in zip(pids, _pids(env), strict=True))
        assert bool((env.episode_length == 0).all())
