"""Named training recipes of the RL study: the task, env count, iterations, task options and
PPO fields a published result was trained with, so one name reproduces it
(``volary rl train --recipe NAME``; options given on the command line override the recipe's).

A recipe is data only (this module never imports ``volary.envs``); the study's CLI builds the
env. Results: ``experiments/rl/`` (Aerial Gym, cross-airframe, navigate) and
``benchmarks/results/rl/table.md`` (hover-fast).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from volary.errors import UnknownNameError


@dataclass(frozen=True)
class Recipe:
    """What ``volary rl train`` runs for a recipe name."""

    task: str  # a volary.envs task name
    envs: int
    iterations: int
    description: str  # one line: what it is for and where its figures are
    env: dict[str, Any] = field(default_factory=dict)  # task config fields (--env)
    ppo: dict[str, Any] = field(default_factory=dict)  # PPOConfig fields (--set)
    learner: str = "volary"  # volary's PPO or rsl_rl (--learner)
    npz: bool = False  # also write policy.npz (plain arrays + the task's deployment layout)
    stop_at: float | None = None  # validation success to stop at (--stop-at; EarlyStop)
    val_every: int = 10  # validate every K iterations (--val-every)
    val_first: int | None = None  # first validation after this many iterations (val_every's)
    val_episodes: int = 256  # validation episodes (--val-episodes)


# Aerial Gym's motor-control policy (paper 003, Sec. V-C): the state [e^W, R_6, R^T v, Omega],
# rotor thrust setpoints as actions, a 32-24 network, a 0.01 s control step. Not the paper's:
# the learner (rsl_rl's PPO here, Sample Factory there), 400 Hz RK4 physics under the 100 Hz
# control step, the reward (volary's position reward plus its precision term) and the airframes
# (volary's presets; the paper flew a ModalAI Voxl 2 Mini quad).
# experiments/rl/position-tracking/run.py trains these and measures tracking error on setpoint
# sequences.
_AERIAL_GYM_ENV: dict[str, Any] = {
    "control": "rotor_thrusts",
    "observation": "aerial_gym",
    "control_hz": 100.0,
    "physics_hz": 400.0,
    "compile": "numba",
    "goal": (0.0, 0.0, 2.0),
    "start_range": (2.0, 2.0, 1.0),  # covers the evaluation's setpoint jumps (up to 2, 2, 1 m)
    "precision_weight": 1.0,
}
_AERIAL_GYM_PPO: dict[str, Any] = {
    "hidden": (32, 24),
    "rollout_steps": 32,
    "epochs": 5,
    "minibatches": 4,
    "lr": 1e-3,
    "lr_schedule": "adaptive",
    "desired_kl": 0.01,
    "gamma": 0.99,  # 1 s at 100 Hz
    "normalize_obs": False,
    "normalize_rewards": True,
    "threads": 2,
}


# Betaflight 4.6.0 acro on research_quad_1kg (defaults, volary.fc.profiles): per FLU axis
# (roll, pitch, yaw) the first-order lag and dead time that fit its rate steps best (s).
BETAFLIGHT_RATE_LAG = (0.013, 0.014, 0.048)
BETAFLIGHT_RATE_DELAY = (0.017, 0.018, 0.069)


def _aerial_gym(platform: str, what: str, **env: Any) -> Recipe:
    return Recipe(
        task="hover",
        envs=1024,
        iterations=300,
        description=f"Aerial Gym's motor-thrust position-setpoint policy on the {what} "
        "(32-24 net, 0.01 s step; experiments/rl/position-tracking)",
        env={**_AERIAL_GYM_ENV, "platform": platform, **env},
        learner="rsl_rl",
        ppo=dict(_AERIAL_GYM_PPO),
    )


def _aerial_gym_ctbr(what: str, **env: Any) -> Recipe:
    """``aerial-gym-quad`` with ctbr actions (collective thrust + body rates, the task's
    ``max_rates``): what a flight controller's rate loop takes (issue 58,
    experiments/rl/betaflight-transfer/policy.py). Same task, reward, episode, platform, net and
    budget."""
    base = _aerial_gym("research_quad_1kg", "1 kg research quad", control="ctbr", **env)
    return replace(base, description=f"aerial-gym-quad with ctbr actions{what} "
                   "(issue 58: flown through Betaflight by "
                   "experiments/rl/betaflight-transfer/policy.py)")  # fmt: skip


RECIPES: dict[str, Recipe] = {
    # Issue 22's "time to a hover policy": benchmarks/rl_hover.py times this whole command.
    # Why these values (benchmarks/results/rl/table.md): the body-frame observation (the same
    # at every heading; with the world-frame layout the slow seeds were the ones whose policy
    # flew away from starts at one range of yaw: 40-150 iterations to a policy, 30-40 with
    # it), no observation normalization (its running mean of the goal error settles on the
    # policy's own hover offset and keeps it there), reward scaling, short rollouts for many
    # updates, the KL-adaptive step size, a 0.98 discount (0.8 s at 60 Hz), the fused numba
    # physics and two threads. It stops as soon as the deterministic policy succeeds in 97 %
    # of 64 validation episodes (another seed than training's and than the benchmark's
    # evaluation), checked every 5 iterations from the 20th (chosen on training seeds 5-9,
    # validated at every iteration: first policies at 19-43; the benchmark flies seeds 0-4);
    # 150 iterations at most. A check costs 0.04-0.33 s on 2 cores (64 x 10 s of flight in one
    # numba call, volary.envs.fused_position; stepped through the env it cost 1.0-1.8 s).
    "hover-fast": Recipe(
        task="hover",
        envs=512,
        iterations=150,
        stop_at=0.97,
        val_every=5,
        val_first=20,
        val_episodes=64,
        description="hover in seconds on a 2-core CPU (ctbr actions, body-frame observation; "
        "rsl_rl's learner, from the rl extra)",
        env={"compile": "numba", "observation": "body"},
        learner="rsl_rl",  # first to 95 % in benchmarks/rl_trainers.py; --learner volary works
        ppo={
            "rollout_steps": 16,
            "epochs": 5,
            "minibatches": 4,
            "lr": 1e-3,
            "lr_schedule": "adaptive",
            "desired_kl": 0.02,
            "gamma": 0.98,
            "normalize_obs": False,
            "normalize_rewards": True,
            "threads": 2,
        },
    ),
    # Issue 22's "one policy across airframes" (RAPTOR's idea): every env flies its own random
    # quad (volary.platforms.randomize: mass, inertia, TWR, top rotor speed, motor tau, drag),
    # the policy is told each airframe's hover thrust fraction (1 / TWR, a spec-sheet figure);
    # experiments/rl/cross-airframe/run.py evaluates it on the 36 FLYINGTRUST platforms.
    "cross-airframe": Recipe(
        task="hover",
        envs=1024,
        iterations=200,
        description="one ctbr hover policy for any quad: 1,024 random airframes, told each "
        "one's hover thrust fraction (experiments/rl/cross-airframe)",
        env={
            "compile": "numba",
            "random_airframes": True,
            "observation": "volary_twr",
            "precision_weight": 1.0,
        },  # fmt: skip
        learner="rsl_rl",
        ppo={
            "rollout_steps": 24,
            "epochs": 5,
            "minibatches": 4,
            "lr": 1e-3,
            "lr_schedule": "adaptive",
            "desired_kl": 0.01,
            "gamma": 0.98,
            "normalize_obs": False,
            "normalize_rewards": True,
            "threads": 2,
        },
    ),
    # Issue 21's learned planner (volary.studies.flyingtrust.planners.learned, NavRL-like):
    # navigate at the benchmark's 10 Hz planning rate (60 Hz control, 6 steps a decision) across
    # 64 forests and four FLYINGTRUST airframes from the smallest to the largest radius
    # (0.25-0.53 m; the policy is not told which it flies). policy.npz is what the planner ships
    # (volary/studies/flyingtrust/planners/data/learned_planner.npz).
    "learned-planner": Recipe(
        task="navigate",
        envs=256,
        iterations=300,
        description="the learned planner's policy: depth + goal -> velocity at 10 Hz, 64 "
        "forests, 4 airframes (writes policy.npz for volary.studies.flyingtrust.planners.learned)",
        env={
            "compile": "numba",
            "scenes": 64,
            "action_repeat": 6,
            "platform": ("0.55kg-UAV-1", "1.50kg-DJI", "2.80kg-T-MOTOR", "4.91kg-DJI"),
        },
        ppo={"threads": 1},
        npz=True,
    ),
    "aerial-gym-quad": _aerial_gym("research_quad_1kg", "1 kg research quad"),
    "aerial-gym-tilted-hexa": _aerial_gym("tilted_hexa", "tilted (fully actuated) hexa"),
    "aerial-gym-quad-ctbr": _aerial_gym_ctbr(" on volary's ideal rate loop"),
    # The same against Betaflight 4.6.0's measured rate response instead of the ideal loop's
    # (~7x slower in roll and pitch): per FLU axis a dead time and first-order lag fitted to
    # experiments/rl/betaflight-transfer/results/rate-steps-yawlimit400.json (research_quad_1kg,
    # the 100/200/400 deg/s steps jointly, measured with Betaflight's default pidsum_limit_yaw
    # 400 before the profile capped it at 100; experiments/rl/betaflight-transfer/policy.py --fit
    # prints it), x U(1 +- 0.3) per episode. Yaw's fit is poor (Betaflight's yaw overshot
    # 20-80 % then). The thrust-rate model has no numba kernel.
    "aerial-gym-quad-ctbr-bf": _aerial_gym_ctbr(
        " against Betaflight's measured rate response (lag + delay fit, +-30 %)",
        rate_model="lag",
        rate_lag=BETAFLIGHT_RATE_LAG,
        rate_delay=BETAFLIGHT_RATE_DELAY,
        rate_lag_spread=0.3,
        compile=False,
    ),
    # ... and with the delivered collective thrust x U(1 +- 0.1) per episode: through
    # Betaflight the -bf policy hovered 17 cm high (dev seed 2028; StickMap's throttle map
    # gives a little more than the commanded thrust), so its altitude loop must not rely on
    # an exact thrust map.
    "aerial-gym-quad-ctbr-bf-thrust": _aerial_gym_ctbr(
        " against Betaflight's measured rate response and a +-10 % thrust map",
        rate_model="lag",
        rate_lag=BETAFLIGHT_RATE_LAG,
        rate_delay=BETAFLIGHT_RATE_DELAY,
        rate_lag_spread=0.3,
        thrust_spread=0.1,
        compile=False,
    ),
}


def get_recipe(name: str) -> Recipe:
    """The recipe ``name``; ``UnknownNameError`` listing the known ones otherwise (the message
    every registry gives)."""
    try:
        return RECIPES[name]
    except KeyError:
        raise UnknownNameError("recipe", name, RECIPES) from None


__all__ = ["RECIPES", "Recipe", "get_recipe"]
