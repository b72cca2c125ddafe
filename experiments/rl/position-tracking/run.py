"""Aerial Gym's motor-control position-setpoint task (paper 003, Sec. V-C) reproduced on volary:
train ``volary rl train --recipe aerial-gym-quad`` and ``aerial-gym-tilted-hexa`` for several
seeds (the paper trained 5), then fly every policy on setpoint sequences and report its
position tracking error beside the paper's 0.09 m (real robot, average across seeds).

Evaluation (``volary rl eval``, deterministic actions, eval seed 7, held out from training):
``--episodes`` episodes of 20 s, each a sequence of four setpoints held 5 s, drawn from
(0, 0, 2) + U(+-1, +-1, +-0.5) m, the first flown to from a start U(+-1, +-1, +-0.5) m off it
(with the task's random velocity, tilt and yaw). Per episode
flown to its end: ``mean_error`` (mean |e| over every step, transients included) and
``settled_error`` (mean |e| over the steps at least 2 s after a setpoint change). Episodes that
terminate early (crash, too far, flipped) have no tracking error and are counted apart.
Unit of replication: the training seed. Runs interleave the platforms seed by seed.

    .venv/bin/python experiments/rl/position-tracking/run.py --seeds 0,1,2,3,4

Writes ``--out`` (default ``results/seeds0-4.json`` beside this script), each run's report,
learning curve and eval under the folder of the same name (``results/seeds0-4/``), a plot of |e|
over time (``seeds0-4.png``), and prints a table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))  # for _cli
from _cli import threads_env, volary_command  # noqa: E402  (shared with benchmarks/rl_hover.py)

HERE = Path(__file__).resolve().parent
RECIPES = ("aerial-gym-quad", "aerial-gym-tilted-hexa")
PAPER_ERROR_M = 0.09  # Sec. V-C: average position tracking error across seeds, real robot
EVAL_ENV = ["goal=(0,0,2)", "goal_range=(1,1,0.5)", "start_range=(1,1,0.5)", "goal_hold_s=5",
            "episode_s=20", "settle_s=2"]  # fmt: skip
EVAL_SEED = 7


def run(recipe: str, seed: int, work: Path, threads: int, episodes: int) -> dict:
    out = work / recipe / f"seed{seed}"
    shutil.rmtree(out, ignore_errors=True)
    train = [*volary_command(), "rl", "train", "--recipe", recipe, "--seed", str(seed),
             "--out", str(out), "--log-every", "50"]  # fmt: skip
    t0 = time.perf_counter()
    subprocess.run(train, check=True, env=threads_env(threads), stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    ev = [*volary_command(), "rl", "eval", "--policy", str(out / "policy.pt"), "--task", "hover",
          "--episodes", str(episodes), "--envs", str(min(episodes, 256)),
          "--seed", str(EVAL_SEED), "--out", str(out)]  # fmt: skip
    for item in EVAL_ENV:
        ev += ["--env", item]
    subprocess.run(ev, check=True, env=threads_env(threads), stdout=subprocess.DEVNULL)
    res = json.loads((out / "eval.json").read_text())
    report = json.loads((out / "report.json").read_text())
    m = res["metrics"]
    return {
        "recipe": recipe, "seed": seed, "train_process_s": wall,
        "samples": report["samples"], "iterations": report["iterations"],
        "episodes": res["episodes"],
        "flown_to_the_end": m["mean_error"]["episodes"],
        "settled_error_m": m["settled_error"]["mean"],
        "settled_error_median_m": m["settled_error"]["median"],
        "mean_error_m": m["mean_error"]["mean"],
        "final_distance_median_m": m["final_distance"]["median"],
        "success": res["success_rate"],
        "command": " ".join(train[1:]), "eval_command": " ".join(ev[1:]),
    }  # fmt: skip


def error_over_time(policy: Path, episodes: int) -> dict:
    """|e|(t) of ``episodes`` setpoint-sequence episodes (the evaluation's protocol): median and
    10th/90th percentiles per step, for the plot."""
    import torch

    from volary.envs import make_env
    from volary.studies.rl.ppo import load_policy

    net, _, meta = load_policy(policy, "cpu")
    opts = {k: tuple(v) if isinstance(v, list) else v for k, v in meta["env_options"].items()}
    opts.update(
        goal=(0.0, 0.0, 2.0),
        goal_range=(1.0, 1.0, 0.5),
        start_range=(1.0, 1.0, 0.5),
        goal_hold_s=5.0,
        episode_s=20.0,
        settle_s=2.0,
    )  # EVAL_ENV
    env = make_env("hover", n_envs=episodes, **{**opts, "seed": EVAL_SEED})
    obs, _ = env.reset(seed=EVAL_SEED)
    errs, alive = [], torch.ones(episodes, dtype=torch.bool)
    steps = env.max_steps
    with torch.no_grad():
        for _ in range(steps - 1):  # the last step would reset every env
            obs, _, term, _, _ = env.step(net.act(obs, deterministic=True))
            alive &= ~term
            errs.append(obs[:, :3].norm(dim=-1))
    e = torch.stack(errs)[:, alive]  # (T, episodes flown to the end)
    q = torch.quantile(e, torch.tensor([0.1, 0.5, 0.9]), dim=1)
    dt = 1.0 / env.config.control_hz
    t = [dt * (k + 1) for k in range(len(errs))]
    return {"t_s": t, "p10": q[0].tolist(), "median": q[1].tolist(), "p90": q[2].tolist(),
            "episodes": int(alive.sum())}  # fmt: skip


def plot(curves: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6))
    for recipe, c in curves.items():
        (line,) = ax.plot(c["t_s"], c["median"], lw=1.2, label=f"{recipe} (median)")
        ax.fill_between(c["t_s"], c["p10"], c["p90"], color=line.get_color(), alpha=0.2, lw=0)
    ax.axhline(PAPER_ERROR_M, color="k", ls="--", lw=0.8, label="paper, real robot (0.09 m)")
    ax.set(
        xlabel="time (s); setpoint changes every 5 s",
        ylabel="|position error| (m)",
        yscale="log",
        title="Motor-thrust policies (seed 0) on setpoint sequences, 10-90 %",
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipes", default=",".join(RECIPES))
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--episodes", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "seeds0-4.json")
    args = ap.parse_args(argv)
    from volary.bench.threads import cpu_model

    recipes = args.recipes.split(",")
    work = args.out.with_suffix("")
    runs = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for recipe in recipes:  # interleaved: both platforms see the same machine spells
            r = run(recipe, seed, work, args.threads, args.episodes)
            runs.append(r)
            print(
                f"{recipe} seed {seed}: settled {r['settled_error_m']:.3f} m, mean "
                f"{r['mean_error_m']:.3f} m, {r['flown_to_the_end']}/{r['episodes']} to the "
                f"end, train {r['train_process_s']:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    summary = {}
    for recipe in recipes:
        rs = [r for r in runs if r["recipe"] == recipe]
        summary[recipe] = {
            "seeds": len(rs),
            "settled_error_m_mean_over_seeds": statistics.fmean(r["settled_error_m"] for r in rs),
            "settled_error_m_per_seed": [r["settled_error_m"] for r in rs],
            "mean_error_m_mean_over_seeds": statistics.fmean(r["mean_error_m"] for r in rs),
            "flown_to_the_end": f"{sum(r['flown_to_the_end'] for r in rs)}/"
                                f"{sum(r['episodes'] for r in rs)}",
            "median_train_process_s": statistics.median(r["train_process_s"] for r in rs),
        }  # fmt: skip
    curves = {}
    for recipe in recipes:
        first = work / recipe / f"seed{runs[0]['seed']}" / "policy.pt"
        curves[recipe] = error_over_time(first, args.episodes)
    plot(curves, args.out.with_suffix(".png"))
    doc = {
        "benchmark": "rl_aerial_gym", "paper_error_m": PAPER_ERROR_M,
        "paper_note": "real robot (ModalAI Voxl 2 Mini quad), average across 5 seeds",
        "eval": {"env": EVAL_ENV, "seed": EVAL_SEED, "episodes": args.episodes,
                 "actions": "deterministic (the policy's mean)"},
        "threads": args.threads, "machine": cpu_model(),
        "unit_of_replication": "training seed", "summary": summary, "runs": runs,
        "error_over_time_seed0": curves,
    }  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2))
    print(
        "| recipe | seed | settled error (m) | mean error (m) | flown to the end | "
        "train command (s) |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for r in runs:
        print(
            f"| {r['recipe']} | {r['seed']} | {r['settled_error_m']:.3f} | "
            f"{r['mean_error_m']:.3f} | {r['flown_to_the_end']}/{r['episodes']} | "
            f"{r['train_process_s']:.0f} |"
        )
    for recipe, s in summary.items():
        print(
            f"{recipe}: settled error {s['settled_error_m_mean_over_seeds']:.3f} m (mean over "
            f"{s['seeds']} seeds; paper 0.09 m on the real robot), mean error "
            f"{s['mean_error_m_mean_over_seeds']:.3f} m, {s['flown_to_the_end']} flown to "
            "the end"
        )
    print(f"-> {args.out}, {args.out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
