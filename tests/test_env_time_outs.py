"""End conditions declare whether they are time-outs (Isaac Lab's DoneTerm(time_out=True)), and
the envs and rollouts derive truncation from that: an episode that only a time limit ended is
truncated, not terminated; a crash is terminated."""

from __future__ import annotations

import torch

from volary.envs import make_env
from volary.envs.base import TorchVectorEnv
from volary.sim import World, rollout, terms

HOLD_Z = 1.0


class _Hold(TorchVectorEnv):
    """Two crazyflies holding their start point in position mode; ends: ``ends`` + max_steps."""

    def __init__(self, ends, max_steps: int) -> None:
        world = World("crazyflie", n_envs=2, control="position", control_hz=60.0,
                      physics_hz=240.0, stochastic=False, compile=False)  # fmt: skip
        super().__init__(2, 1, 4, "cpu", world=world, terms=ends, max_steps=max_steps)

    def _start(self, mask):
        return {"pos": torch.tensor([[0.0, 0.0, HOLD_Z]]).expand(2, 3)}

    def _setpoint(self, action):
        return torch.tensor([[0.0, 0.0, HOLD_Z, 0.0]]).expand(2, 4)

    def _observe(self):
        return torch.zeros(2, 1)

    def _reward(self, action, terminated, truncated):
        return torch.zeros(2), {}


def test_every_built_in_term_declares_whether_it_is_a_time_out() -> None:
    plain = [terms.collided, terms.out_of_volume, terms.out_of_bounds, terms.diverged,
             terms.crashed, terms.gates_done, terms.below(0.1), terms.tilted(1.0),
             terms.too_far(torch.zeros(3), 1.0), terms.reached(torch.zeros(3), 1.0)]  # fmt: skip
    assert [t.time_out for t in plain] == [False] * len(plain)
    assert terms.time_limit(1.0).time_out is True
    assert terms.is_time_out(terms.time_limit(1.0)) and not terms.is_time_out(lambda w: w)


def test_the_crash_rules_of_the_race_and_the_learned_flights_are_not_time_outs() -> None:
    from volary.bench.gate_race import crashed_out
    from volary.studies.boundary.deploy import _Crash as DeployCrash
    from volary.studies.sousvide.evaluate import _Crash as SousVideCrash

    for term in (crashed_out, DeployCrash, SousVideCrash):
        assert term.time_out is False and not terms.is_time_out(term)


def test_a_time_limit_term_truncates_and_does_not_terminate() -> None:
    # the state clock is float32 (0.4999997 s after 30 steps): a limit just under 0.5 s
    env = _Hold((terms.crashed, terms.time_limit(0.49)), max_steps=1000)
    env.reset(seed=0)
    for _ in range(29):
        _, _, term, trunc, _ = env.step(torch.zeros(2, 4))
        assert not term.any() and not trunc.any()
    _, _, term, trunc, info = env.step(torch.zeros(2, 4))  # 30 steps at 60 Hz = 0.5 s
    assert trunc.all() and not term.any() and info["done"].all()
    assert [env.term_names[c] for c in env.cause.tolist()] == ["time_limit"] * 2


def test_a_task_whose_only_end_is_its_step_limit_is_truncated_and_a_crash_terminated() -> None:
    env = make_env("hover", n_envs=2, seed=0, episode_s=1.0, start_range=(0.0, 0.0, 0.0),
                   start_speed=0.0, start_tilt=0.0, stochastic=False, physics_hz=240.0,
                   control_hz=60.0)  # fmt: skip
    env.reset(seed=0)
    act = torch.zeros(2, 4)
    act[1, 0] = -1.0  # env 1: no thrust, it falls onto the ground
    crash_seen = False
    for k in range(60):
        _, _, term, trunc, _ = env.step(act)
        if term[1]:
            crash_seen = True
            assert not trunc[1] and env.term_names[int(env.cause[1])] in ("crashed", "below")
        if k < 59:
            assert not term[0] and not trunc[0]
    assert crash_seen
    assert trunc[0] and not term[0] and env.term_names[int(env.cause[0])] == "step_limit"


def test_a_rollout_reports_which_vehicles_a_time_out_ended() -> None:
    world = World(
        "crazyflie",
        n_envs=2,
        control="position",
        control_hz=60.0,
        physics_hz=240.0,
        stochastic=False,
        compile=False,
    )
    world.reset(pos=torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]))
    hold = torch.tensor([[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, -5.0, 0.0]])  # env 1 dives
    ep = rollout(world, hold, (terms.below(0.5), terms.time_limit(1.0)), duration=2.0)
    assert ep.causes() == ["time_limit", "below"]
    assert ep.timed_out.tolist() == [True, False]
