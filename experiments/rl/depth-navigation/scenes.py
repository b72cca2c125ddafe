"""PPO ``navigate`` policies on the scenes they trained on and on unseen ones, beside a
baseline that flies along the observed goal vector (no depth).

A policy trained on one scene (``scenes=1``) can learn that forest's route instead of seeing;
this flies each policy, and the goal-vector baseline, on each scene seed (alone: all envs of
the case on that scene) with ``evaluate_policy`` (every env's first episode, 256 per case).

    .venv/bin/python experiments/rl/depth-navigation/scenes.py \
        --policy "1 scene=out/rl/navigate-ppo-s0/policy.pt" \
        --policy "64 scenes=out/rl/navigate-64scenes-s0/policy.pt"

(the two policies: README.md beside this script). Writes ``--out`` (default
``results/scenes-1-vs-64-forests.json`` beside this script) and prints a table.
``GoalFollower`` is shared with ``latent.py`` and ``learners.py``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent


class GoalFollower:
    """Velocity along the goal vector at 0.75 x max speed, yaw turned towards it (no depth)."""

    def __init__(self, obs_dim: int) -> None:
        self.obs_dim = obs_dim

    def to(self, device: torch.device) -> GoalFollower:
        return self

    def eval(self) -> GoalFollower:
        return self

    def act(self, obs: torch.Tensor, deterministic: bool = True, generator=None) -> torch.Tensor:
        from volary.envs.navigate import goal_follower_action

        return goal_follower_action(obs)


def main(argv: list[str] | None = None) -> int:
    from volary.envs import make_env
    from volary.studies.rl.ppo import evaluate_policy, load_policy

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", action="append", required=True, help="LABEL=policy.pt (repeat)")
    ap.add_argument("--scene-seeds", default="0,1,2,3,4,1000,1001,1002,1003,1004")
    ap.add_argument("--envs", type=int, default=256)
    ap.add_argument("--episodes", type=int, default=256)
    ap.add_argument("--seed", type=int, default=7, help="evaluation seed (starts, noise)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "scenes-1-vs-64-forests.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    policies, trained = {}, {}
    for item in args.policy:
        label, _, path = item.partition("=")
        net, _, meta = load_policy(path)
        policies[label], trained[label] = net, {"path": path, **meta}
    first = next(iter(trained.values()))
    opts = {k: tuple(v) if isinstance(v, list) else v
            for k, v in (first.get("env_options") or {}).items()}  # fmt: skip
    obs_dim = next(iter(policies.values())).obs_dim
    policies["goal follower"] = GoalFollower(obs_dim)
    seeds = [int(x) for x in args.scene_seeds.split(",")]
    rows = []
    for scene in seeds:
        env = make_env("navigate", n_envs=args.envs, seed=args.seed,
                       **{**opts, "scene_seed": scene, "scenes": 1})  # fmt: skip
        for name, pol in policies.items():
            r = evaluate_policy(env, pol, args.episodes, deterministic=True, seed=args.seed)
            rows.append({"scene_seed": scene, "policy": name, **r})
            print(f"scene {scene} {name}: success {r['success_rate']:.1%}", flush=True)
    table = Table(title=f"navigate: success over {args.episodes} episodes per scene")
    table.add_column("scene seed", justify="right")
    for name in policies:
        table.add_column(name, justify="right")
    rate = {(r["scene_seed"], r["policy"]): r["success_rate"] for r in rows}
    for scene in seeds:
        table.add_row(str(scene), *(f"{rate[(scene, p)]:.1%}" for p in policies))
    Console().print(table)
    doc = {"benchmark": "rl_navigate", "policies": trained, "eval_seed": args.seed, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
