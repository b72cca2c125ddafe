"""Policies trained on volary's ideal rate loop, flown through Betaflight 4.6.0's (issue 58,
part 4): the committed ``hover-fast`` and ``aerial-gym-quad`` checkpoints, from the same
initial states both ways.

Each recipe's task (``PositionTask`` with the checkpoint's training options: the 1 kg research
quad, hover at a fixed goal, 10 s episodes) draws N initial states (position, attitude,
velocity) with a seed that neither training (0), validation (1,000,003) nor the RL benchmarks
(7) used. Ideal: the env itself, deterministic actions, each env's first episode (what the
policy was trained on). Betaflight: for each initial state a fresh firmware with the
platform's profile (``volary.fc.profiles``) is booted on the ground (3 s), armed in acro (0.5
s), the vehicle is put in the initial state (rotors at hover speed), and the policy flies it
at the task's control rate from the same observation (built here as the env builds it), its
actions mapped to sticks:

- ``hover-fast`` (ctbr actions, 60 Hz): thrust (a0 + 1) / 2 T_max and FLU body rates a1..3 x
  (4, 4, 2) rad/s, as the env maps them, then ``volary.fc.ctbr.StickMap``; 960 Hz exchanges
  (16 per control step), 1920 Hz physics.
- ``aerial-gym-quad`` (rotor-thrust actions, 100 Hz): a rate loop takes no rotor thrusts, so
  they are translated: collective thrust = their sum, and the body rate the ideal vehicle
  would reach ``--horizon`` seconds ahead under their torque, W + H J^-1 (tau - W x J W);
  1 kHz exchanges, 2 kHz physics.

- ``aerial-gym-quad-ctbr`` and ``aerial-gym-quad-ctbr-bf`` (ctbr actions, 100 Hz): the
  aerial-gym-quad task retrained with ctbr actions, flown as ``hover-fast``; ``-bf`` was trained
  against Betaflight's measured rate response instead of the ideal loop's (``PositionTask``'s
  ``rate_model="lag"``: per axis the dead time + first-order lag ``--fit`` prints, fitted to
  rate-steps.json, x U(1 +- 0.3) per episode), ``-bf-thrust`` also with the delivered
  thrust x U(1 +- 0.1) (``thrust_spread``); their "ideal" row is that env as trained.
  The three aerial-gym variants share the task and the seed, so they start from the same 20
  states: each new one's flights are also paired with aerial-gym-quad's
  (``paired_with_aerial_gym_quad``: Betaflight minus aerial-gym-quad through Betaflight, and
  minus aerial-gym-quad on the ideal loop, the gap to close).

Terminations are the env's (ground contact, > 4 m from the goal, below 0.1 m, tilted past
1.4 rad, non-finite state), checked every control step; success: the episode reaches 10 s
within 0.2 m of the goal at under 0.5 m/s. Per episode: success, final distance, the mean
distance from 2 s on (settled error; episodes that ended early have none). Bootstrap 95 % CIs
(scipy.stats.bootstrap, percentile, 10,000 resamples; unit of replication: the episode's
initial state), paired where both loops flew the same state.

    P=experiments/rl/betaflight-transfer
    .venv/bin/python $P/policy.py --episodes 20 --sweep 0.015,0.06   # ~10 min
    .venv/bin/python $P/policy.py --recipes aerial-gym-quad-ctbr,aerial-gym-quad-ctbr-bf
    .venv/bin/python $P/policy.py --recipes aerial-gym-quad-ctbr-bf-thrust
    .venv/bin/python $P/policy.py --fit      # the lag + delay fit, nothing flown
    .venv/bin/python $P/policy.py --thrust-sweep   # StickMap's thrust vs delivered

``--thrust-sweep`` (issue 58) flies no policy: for each study platform, 0.3-1.5 x hover, the
collective thrust Betaflight delivers against StickMap's command (``volary.fc.ctbr
.measure_thrust``: held at rest, and flying a +-1 rad/s yaw square wave), with the platform's
profile and with Betaflight's default ``pidsum_limit_yaw`` 400; stored under ``thrust_map``.

Writes results/policies.json here (merging recipes run separately), prints a table.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from volary.envs.position import PositionTask, PositionTaskConfig
from volary.fc.betaflight import BetaflightLink, LinkConfig, Sticks, build
from volary.fc.ctbr import StickMap, measure_thrust
from volary.fc.profiles import RATE_PROFILES
from volary.math.quaternion import quat_to_rotmat
from volary.platforms import get
from volary.studies.rl.ppo import load_policy

HERE = Path(__file__).resolve().parent
SCRIPT = "experiments/rl/betaflight-transfer/policy.py"  # commands are stored from the repo root
OUT = HERE / "results" / "policies.json"
CHECKPOINTS = {  # from the repository root
    "hover-fast": "benchmarks/results/rl/hover-fast-body-rsl_rl/seed0/policy.pt",
    "aerial-gym-quad": (  # the RL study's position-tracking run
        "experiments/rl/position-tracking/results/seeds0-1/aerial-gym-quad/seed0/policy.pt"
    ),
    "aerial-gym-quad-ctbr": "benchmarks/results/rl/aerial-gym/aerial-gym-quad-ctbr/seed0/policy.pt",
    "aerial-gym-quad-ctbr-bf": (
        "benchmarks/results/rl/aerial-gym/aerial-gym-quad-ctbr-bf/seed0/policy.pt"
    ),
    "aerial-gym-quad-ctbr-bf-thrust": (
        "benchmarks/results/rl/aerial-gym/aerial-gym-quad-ctbr-bf-thrust/seed0/policy.pt"
    ),
}
BASE = "aerial-gym-quad"  # the rotor-thrust policy whose gap the ctbr variants try to close
# The -bf recipes were trained on the fit of the steps measured before the profiles' yaw PID-sum
# cap (pidsum_limit_yaw 400): those steps, kept as they were, are what --fit reproduces.
TRAINED_STEPS = HERE / "results" / "rate-steps-yawlimit400.json"
EVAL_SEED = 2026
BOOT_S, ARM_S = 3.0, 0.5


def task_config(meta: dict[str, Any], seed: int) -> PositionTaskConfig:
    """The checkpoint's training task, with the evaluation seed."""
    opts = {k: tuple(v) if isinstance(v, list) else v
            for k, v in meta.get("env_options", {}).items()}  # fmt: skip
    return PositionTaskConfig(**opts).replace(seed=seed)


# ---- ideal loop: the env itself ----------------------------------------------------------------
def fly_ideal(policy, cfg: PositionTaskConfig, n: int, seed: int) -> tuple[list[dict], dict]:
    """Every env's first episode in the task as trained; (episodes, their initial states)."""
    env = PositionTask(n, cfg)
    obs, _ = env.reset(seed=seed)
    s = env.world.state
    starts = {
        "pos": s.pos.double().numpy().copy(),
        "quat": s.quat.double().numpy().copy(),
        "vel": s.vel.double().numpy().copy(),
        "goal": env.goal.double().numpy().copy(),
    }
    out: list[dict | None] = [None] * n
    while any(o is None for o in out):
        obs, _, term, _, info = env.step(policy.act(obs, deterministic=True))
        for i in np.nonzero(info["done"].numpy())[0]:
            if out[i] is None:
                settled = float(info["settled_error"][i])
                out[i] = {"success": bool(info["success"][i]),
                          "final_distance": float(info["final_distance"][i]),
                          "settled_error": None if math.isnan(settled) else settled,
                          "terminated": bool(term[i]),
                          "steps": int(info["episode_length"][i])}  # fmt: skip
    return out, starts  # type: ignore[return-value]


# ---- Betaflight ---------------------------------------------------------------------------------
def observe(layout: str, goal, pos, vel, quat, omega, prev_action) -> torch.Tensor:
    """The task's observation of one vehicle (``PositionTask._observe``'s layouts)."""
    q = torch.as_tensor(quat, dtype=torch.float64)[None]
    rot = quat_to_rotmat(q)[0]
    e = torch.as_tensor(goal - pos, dtype=torch.float64)
    v = torch.as_tensor(vel, dtype=torch.float64)
    w = torch.as_tensor(omega, dtype=torch.float64)
    if layout == "body":
        parts = [rot.T @ e, rot.T @ v, rot[2, :], w, torch.as_tensor(prev_action).double()]
    elif layout == "aerial_gym":
        parts = [e, rot[:, :2].T.reshape(6), rot.T @ v, w]
    else:
        raise SystemExit(f"observation layout {layout!r} is not flown by this benchmark")
    return torch.cat(parts).to(torch.float32)[None]


class Translate:
    """Normalized actions -> (collective thrust N, FLU body-rate command rad/s)."""

    def __init__(self, cfg: PositionTaskConfig, horizon: float) -> None:
        a = get(cfg.platform if isinstance(cfg.platform, str) else cfg.platform[0])
        self.control = cfg.control
        self.k_f = np.asarray(a.k_f)
        self.w_max = np.asarray(a.max_rotor_speed)
        self.max_thrust = float(a.max_thrust)
        self.rates = np.asarray(cfg.max_rates)
        self.alloc = np.asarray(a.allocation_matrix())
        self.inertia = np.asarray(a.inertia)
        self.horizon = horizon

    def __call__(self, action: np.ndarray, omega: np.ndarray) -> tuple[float, np.ndarray]:
        if self.control == "ctbr":
            return (action[0] + 1.0) * 0.5 * self.max_thrust, action[1:] * self.rates
        if self.control == "rotor_thrusts":
            f = (action + 1.0) * 0.5 * self.k_f * self.w_max**2
            wrench = self.alloc @ f
            torque = wrench[3:] - np.cross(omega, self.inertia @ omega)
            return float(wrench[2]), omega + self.horizon * np.linalg.solve(self.inertia, torque)
        raise SystemExit(f"control {self.control!r} is not flown by this benchmark")


def fly_betaflight(policy, cfg: PositionTaskConfig, starts: dict, horizon: float,
                   seed: int) -> list[dict]:  # fmt: skip
    """Each initial state flown by the policy through Betaflight's acro loop."""
    name = cfg.platform if isinstance(cfg.platform, str) else cfg.platform[0]
    rp = RATE_PROFILES[name]
    sticks_of = StickMap.for_platform(name, rp)
    per_step = 16 if cfg.control_hz == 60.0 else int(round(1000.0 / cfg.control_hz))
    rate = per_step * cfg.control_hz
    translate = Translate(cfg, horizon)
    act_dim = 4 if cfg.control == "ctbr" else get(name).n_rotors
    steps = int(round(cfg.episode_s * cfg.control_hz))
    settle = int(round(cfg.settle_s * cfg.control_hz))
    link = BetaflightLink(name, LinkConfig(profile=rp.profile(), rate_hz=rate,
                                           physics_hz=2 * rate, seed=seed))  # fmt: skip
    out = []
    try:
        for i in range(len(starts["pos"])):
            link.reset()
            for k in range(int((BOOT_S + ARM_S) * rate)):
                link.step(Sticks(throttle=0.0, arm=k >= BOOT_S * rate, angle=False))
            link.sim.reset(pos=torch.tensor(starts["pos"][i:i + 1]),
                           quat=torch.tensor(starts["quat"][i:i + 1]),
                           vel=torch.tensor(starts["vel"][i:i + 1]))  # fmt: skip
            out.append(_episode(link, policy, cfg, starts["goal"][i], translate, sticks_of,
                                act_dim, steps, settle, per_step))  # fmt: skip
            print(f"  betaflight episode {i}: {out[-1]}", flush=True)
    finally:
        link.close()
    return out


def _episode(link, policy, cfg, goal, translate, sticks_of, act_dim, steps, settle,
             per_step) -> dict:  # fmt: skip
    s = link.sim.state
    state = [s.pos[0].numpy(), s.vel[0].numpy(), s.quat[0].numpy(), s.omega[0].numpy()]
    prev = np.zeros(act_dim, dtype=np.float32)
    errs: list[float] = []
    cos_tilt = math.cos(cfg.max_tilt)
    for k in range(steps):
        pos, vel, quat, omega = state
        obs = observe(cfg.observation, goal, pos, vel, quat, omega, prev)
        a = policy.act(obs, deterministic=True)[0].numpy().astype(np.float64)
        thrust, rates = translate(a, omega)
        sticks = sticks_of.sticks(thrust, rates)
        for _ in range(per_step):
            r = link.step(sticks)
        prev = a.astype(np.float32)
        state = [r.pos, r.vel, r.quat, r.omega]
        err = float(np.linalg.norm(goal - r.pos))
        errs.append(err)
        rot = quat_to_rotmat(torch.as_tensor(r.quat)[None])[0]
        causes = {
            "diverged": not np.all(np.isfinite(r.pos)),
            "crashed": bool(link.sim.state.crashed[0]),
            "too_far": err > cfg.max_distance,
            "below": r.pos[2] < cfg.min_height,
            "tilted": float(rot[2, 2]) < cos_tilt,
        }
        ended = [c for c, hit in causes.items() if hit]
        if ended:
            return {"success": False, "final_distance": err, "settled_error": None,
                    "terminated": True, "steps": k + 1, "cause": ended[0]}  # fmt: skip
    speed = float(np.linalg.norm(state[1]))
    tail = errs[settle - 1 :]
    return {"success": bool(errs[-1] < cfg.success_radius and speed < 0.5),
            "final_distance": errs[-1], "settled_error": float(np.mean(tail)),
            "terminated": False, "steps": steps}  # fmt: skip


# ---- Betaflight's rate response, fitted ------------------------------------------------------
def fit_rate_response(platform: str = "research_quad_1kg", path: Path = TRAINED_STEPS) -> dict:
    """Per FLU axis, the dead time L and lag tau (s) of y / size = 1 - exp(-(t - L) / tau) that
    fit Betaflight's recorded steps of every size at once (mean squared error over the
    normalized traces; grid 1 ms in L up to 0.1 s, 1 ms in tau up to 0.3 s), and its RMS."""
    rows = json.loads(path.read_text())["rows"]
    rate_hz = json.loads(path.read_text())["setup"]["rate_hz"]
    out = {}
    for axis in ("roll", "pitch", "yaw"):
        mine = [r for r in rows if (r["platform"], r["loop"], r["axis"]) ==
                (platform, "betaflight", axis)]  # fmt: skip
        y = np.array([np.asarray(r["trace_dps"]) / r["size_dps"] for r in mine])  # (S, T)
        t = np.arange(1, y.shape[1] + 1) / rate_hz
        delays, taus = np.arange(0.0, 0.1, 0.001), np.arange(0.002, 0.3, 0.001)
        err = np.empty((delays.size, taus.size))
        for i, delay in enumerate(delays):
            model = 1.0 - np.exp(-np.clip(t - delay, 0.0, None) / taus[:, None])  # (tau, T)
            err[i] = np.mean([np.mean((row - model) ** 2, axis=-1) for row in y], axis=0)
        i, j = np.unravel_index(int(err.argmin()), err.shape)
        out[axis] = {"delay_s": round(float(delays[i]), 3),
                     "tau_s": round(float(taus[j]), 3),
                     "rms_of_step": round(math.sqrt(float(err[i, j])), 3),
                     "sizes_dps": [r["size_dps"] for r in mine]}  # fmt: skip
    return {"platform": platform, "source": str(Path(SCRIPT).parent / "results" / path.name), **out}


# ---- statistics ---------------------------------------------------------------------------------
def ci(values: list[float], seed: int = 0) -> dict[str, Any]:
    """Mean and its bootstrap 95 % CI (percentile, 10,000 resamples)."""
    from scipy.stats import bootstrap

    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return {"mean": None, "ci95": None, "n": 0}
    if np.all(x == x[0]):
        return {"mean": float(x[0]), "ci95": [float(x[0]), float(x[0])], "n": int(x.size)}
    res = bootstrap((x,), np.mean, n_resamples=10_000, method="percentile",
                    random_state=np.random.default_rng(seed))  # fmt: skip
    lo, hi = res.confidence_interval
    return {"mean": float(x.mean()), "ci95": [float(lo), float(hi)], "n": int(x.size)}


def summary(eps: list[dict]) -> dict[str, Any]:
    settled = [e["settled_error"] for e in eps if e["settled_error"] is not None]
    return {
        "success": ci([float(e["success"]) for e in eps]),
        "final_distance_m": ci([e["final_distance"] for e in eps]),
        "settled_error_m": ci(settled),
        "terminated": int(sum(e["terminated"] for e in eps)),
    }


def paired(ideal: list[dict], bf: list[dict]) -> dict[str, Any]:
    """Betaflight minus ideal, per initial state."""
    return {
        "success": ci(
            [float(b["success"]) - float(i["success"]) for i, b in zip(ideal, bf, strict=True)]
        ),
        "final_distance_m": ci(
            [b["final_distance"] - i["final_distance"] for i, b in zip(ideal, bf, strict=True)]
        ),  # fmt: skip
    }


def versus_base(data: dict[str, Any], recipe: str) -> dict[str, Any] | None:
    """``recipe``'s flights paired with aerial-gym-quad's from the same initial states."""
    base, r = data["recipes"].get(BASE), data["recipes"][recipe]
    if base is None or recipe == BASE or base["eval_seed"] != r["eval_seed"]:
        return None
    mine, theirs = r["per_episode"], base["per_episode"]
    if (mine["start_pos"], mine["goal"]) != (theirs["start_pos"], theirs["goal"]):
        return None
    return {"betaflight_minus_base_betaflight": paired(theirs["betaflight"], mine["betaflight"]),
            "betaflight_minus_base_ideal": paired(theirs["ideal"], mine["betaflight"])}  # fmt: skip


def run_recipe(
    recipe: str,
    n: int,
    seed: int,
    horizon: float,
    sweep: tuple[float, ...] = (),
    checkpoint: Path | None = None,
) -> dict[str, Any]:
    path = checkpoint or HERE.parents[2] / CHECKPOINTS[recipe]  # paths from the repository root
    policy, _, meta = load_policy(path)
    cfg = task_config(meta, seed)
    t0 = time.perf_counter()
    ideal, starts = fly_ideal(policy, cfg, n, seed)
    t1 = time.perf_counter()
    bf = fly_betaflight(policy, cfg, starts, horizon, seed)
    t2 = time.perf_counter()
    swept = {}
    if cfg.control == "rotor_thrusts":  # the translation's one free constant
        for h in sweep:
            other = fly_betaflight(policy, cfg, starts, h, seed)
            swept[str(h)] = {"betaflight": summary(other),
                             "betaflight_minus_ideal": paired(ideal, other),
                             "per_episode": other}  # fmt: skip
    return {
        "checkpoint": str(checkpoint) if checkpoint else CHECKPOINTS[recipe],
        "trained": {k: meta.get(k) for k in ("recipe", "seed", "iterations", "env_options")},
        "eval_seed": seed,
        "episodes": n,
        "action_map": ("ctbr as the env maps it" if cfg.control == "ctbr" else
                       f"rotor thrusts -> sum and W + H J^-1 (tau - W x J W), H = {horizon} s"),
        "ideal": summary(ideal),
        "betaflight": summary(bf),
        "betaflight_minus_ideal": paired(ideal, bf),
        "per_episode": {"ideal": ideal, "betaflight": bf,
                        "start_pos": starts["pos"].round(4).tolist(),
                        "goal": starts["goal"].round(4).tolist()},
        "wall_s": {"ideal": round(t1 - t0, 1), "betaflight": round(t2 - t1, 1)},
        "horizon_sweep": swept,
    }  # fmt: skip


def thrust_sweep() -> dict[str, Any]:
    """Delivered / commanded collective thrust per platform, method and yaw PID-sum limit."""
    import dataclasses

    fractions = (0.3, 0.5, 0.75, 1.0, 1.25, 1.5)
    out: dict[str, Any] = {"profiles": {n: rp.pidsum_limit_yaw for n, rp in RATE_PROFILES.items()}}
    for name, rp in RATE_PROFILES.items():
        for limit in sorted({rp.pidsum_limit_yaw, 400}):  # the profile's and the default
            prof = dataclasses.replace(rp, pidsum_limit_yaw=limit)
            for method in ("held", "yaw"):
                rows = measure_thrust(name, fractions, prof, method=method)
                key = f"{name} / pidsum_limit_yaw {limit} / {method}"
                out[key] = [round(r["ratio"], 4) for r in rows]
                print(f"{key}: delivered / commanded {out[key]}", flush=True)
    return {"fractions_of_hover": list(fractions), "delivered_over_commanded": out}


def _fmt(c: dict) -> str:
    if c["mean"] is None:
        return "-"
    lo, hi = c["ci95"]
    return f"{c['mean']:.3f} [{lo:.3f}, {hi:.3f}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipes", default=",".join(CHECKPOINTS))
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=EVAL_SEED)
    ap.add_argument(
        "--horizon",
        type=float,
        default=0.03,
        help="s, rotor-thrust policies: the rate command looks this far ahead",
    )
    ap.add_argument(
        "--sweep",
        default="",
        help="s, comma-separated: rotor-thrust policies also flown with these horizons",
    )
    ap.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="fly this policy.pt instead of the recipe's committed one (one recipe)",
    )
    ap.add_argument("--tag", default="", help="stored as 'RECIPE (TAG)' beside other runs")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument(
        "--fit",
        action="store_true",
        help="print Betaflight's fitted rate response (the -bf recipe's), fly nothing",
    )
    ap.add_argument(
        "--thrust-sweep",
        action="store_true",
        help="measure Betaflight's delivered vs StickMap's commanded thrust, fly no policy",
    )
    args = ap.parse_args(argv)
    if args.thrust_sweep:
        build()
        torch.set_num_threads(1)
        data = json.loads(args.out.read_text()) if args.out.is_file() else {}
        data["thrust_map"] = {"command": f"{SCRIPT} --thrust-sweep",
                              **thrust_sweep()}  # fmt: skip
        args.out.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {args.out}")
        return 0
    if args.fit:
        print(json.dumps(fit_rate_response(), indent=1))
        return 0
    build()
    torch.set_num_threads(1)
    data = json.loads(args.out.read_text()) if args.out.is_file() else {}
    data.setdefault("recipes", {})
    data["what"] = "policies trained on volary's ideal rate loop, flown through Betaflight 4.6.0"
    data["unit_of_replication"] = "episode initial state"
    for recipe in args.recipes.split(","):
        sweep = tuple(float(h) for h in args.sweep.split(",") if h)
        r = run_recipe(recipe, args.episodes, args.seed, args.horizon, sweep, args.checkpoint)
        r["command"] = " ".join([SCRIPT, *(argv or sys.argv[1:])])
        name = f"{recipe} ({args.tag})" if args.tag else recipe
        data["recipes"][name] = r
        if r["trained"]["env_options"].get("rate_model") == "lag":
            r["betaflight_rate_fit"] = fit_rate_response()
        vs = versus_base(data, name)
        if vs is not None:
            r["paired_with_aerial_gym_quad"] = vs
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(
        "| recipe | loop | success [95 % CI] | final distance (m) | settled error (m) | "
        "terminated |"
    )
    print("|---|---|---|---|---|---|")
    for recipe, r in data["recipes"].items():
        for loop in ("ideal", "betaflight"):
            s = r[loop]
            print(
                f"| {recipe} | {loop} | {_fmt(s['success'])} | {_fmt(s['final_distance_m'])} "
                f"| {_fmt(s['settled_error_m'])} | {s['terminated']}/{r['episodes']} |"
            )
        for h, sw in r.get("horizon_sweep", {}).items():
            s = sw["betaflight"]
            print(
                f"| {recipe} | betaflight, H = {h} s | {_fmt(s['success'])} | "
                f"{_fmt(s['final_distance_m'])} | {_fmt(s['settled_error_m'])} | "
                f"{s['terminated']}/{r['episodes']} |"
            )
    print(f"\nPaired with {BASE} (same initial states; per state, mean [95 % CI]):")
    print("| recipe | vs | success | final distance (m) |")
    print("|---|---|---|---|")
    for recipe, r in data["recipes"].items():
        for vs, d in r.get("paired_with_aerial_gym_quad", {}).items():
            print(f"| {recipe} | {vs} | {_fmt(d['success'])} | {_fmt(d['final_distance_m'])} |")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
