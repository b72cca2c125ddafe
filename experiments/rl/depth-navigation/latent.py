"""Depth navigation from a learned collision-encoder latent beside the min-pooled depth image
(issue 22; Aerial Gym paper 003 Sec. V-D, DCE).

1. ``volary rl dce`` collects depth images in the 64 training forests (navigate scene seeds
   0-63) and trains the deep collision encoder (64-d latent of the whole 24 x 32 image);
2. ``volary rl train --task navigate`` twice with the same recipe and budget (256 envs x 400
   iterations of volary's PPO, the 64 training forests, training seed S): observing the
   encoder's latent (``--env depth_encoder=...``, 22 + 64 values) and the min-pooled 12 x 16
   image (22 + 192 values, the task's default). The two train at the same time, one thread each;
3. both fly ``--forests`` unseen forests (scene seeds 1000 ...) with ``--per-forest`` episodes
   each (the same starts for both: eval seed 7, deterministic actions), beside a goal-vector
   follower that sees no depth.

Unit of replication: the forest (every episode in a forest shares its trees). Success is
reported per policy with a cluster-bootstrap 95 % CI over forests (``volary.bench.stats``); the
latent-vs-min-pooled claim uses the paired per-forest differences (Wilcoxon signed-rank,
two-sided). One training seed per policy unless ``--seeds`` names more.

    .venv/bin/python experiments/rl/depth-navigation/latent.py --seeds 0

Writes ``--out`` (default ``results/latent-s0.{json,png}`` beside this script), the encoder's and
the policies' reports under ``--work`` (default ``results/latent/``), and prints a table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))  # for _cli
from _cli import threads_env, volary_command  # noqa: E402  (shared with benchmarks/rl_hover.py)

HERE = Path(__file__).resolve().parent
TRAIN = ["--task", "navigate", "--envs", "256", "--env", "compile=numba", "--env", "scenes=64",
         "--log-every", "50"]  # fmt: skip
EVAL_SEED = 7


def train_encoder(work: Path, seed: int, frames: int) -> tuple[Path, float]:
    out = work / f"dce-s{seed}"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [*volary_command(), "rl", "dce", "--frames", str(frames), "--scenes", "64",
           "--seed", str(seed), "--env", "compile=numba", "--out", str(out)]  # fmt: skip
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=threads_env(2), stdout=subprocess.DEVNULL)
    return out / "encoder.pt", time.perf_counter() - t0


def run_at_once(jobs: dict[str, list[str]], what: str) -> dict[str, float]:
    """Run every job's argv at the same time, one thread each; each one's wall at its own end
    (``SystemExit`` naming the job and its command if one fails)."""
    procs = {name: (subprocess.Popen(cmd, env=threads_env(1), stdout=subprocess.DEVNULL),
                    time.perf_counter()) for name, cmd in jobs.items()}  # fmt: skip
    walls: dict[str, float] = {}
    while len(walls) < len(procs):
        for name, (p, t0) in procs.items():
            if name in walls or p.poll() is None:
                continue
            if p.returncode != 0:
                raise SystemExit(f"{name} {what}: failed ({' '.join(jobs[name][1:])})")
            walls[name] = time.perf_counter() - t0
        time.sleep(1.0)
    return walls


def train_pair(work: Path, seed: int, encoder: Path, iterations: int) -> dict[str, dict]:
    """Both policies of one seed at once, one thread each; their paths and walls."""
    runs = {"latent": ["--env", f"depth_encoder={encoder}"], "min-pooled": []}
    jobs, outs = {}, {}
    for name, extra in runs.items():
        outs[name] = out = work / f"{name}-s{seed}"
        shutil.rmtree(out, ignore_errors=True)
        jobs[name] = [*volary_command(), "rl", "train", *TRAIN, "--iterations",
                      str(iterations), "--seed", str(seed), "--set", "threads=1", "--out",
                      str(out), *extra]  # fmt: skip
    walls = run_at_once(jobs, f"seed {seed}: training")
    return {name: {"policy": outs[name] / "policy.pt", "wall_s": walls[name],
                   "command": " ".join(jobs[name][1:])} for name in jobs}  # fmt: skip


def evaluate(policies: dict[str, Path], forests: int, per_forest: int) -> dict[str, list]:
    """Per-forest success of each policy (and the goal follower) on unseen forests."""
    import torch
    from scenes import GoalFollower

    from volary.envs import make_env
    from volary.studies.rl.dce import resolve_env_options
    from volary.studies.rl.ppo import evaluate_policy, load_policy

    torch.set_num_threads(2)
    n = forests * per_forest
    labels = [str(1000 + i % forests) for i in range(n)]  # env i flies forest 1000 + i % forests
    out: dict[str, list] = {}
    for name, path in policies.items():
        net, _, meta = load_policy(path)
        opts = {k: tuple(v) if isinstance(v, list) else v
                for k, v in (meta.get("env_options") or {}).items()}  # fmt: skip
        env = make_env("navigate", n_envs=n, seed=EVAL_SEED, **resolve_env_options(
            {**opts, "scene_seed": 1000, "scenes": forests}))  # fmt: skip
        r = evaluate_policy(env, net, n, deterministic=True, seed=EVAL_SEED, groups=labels)
        out[name] = [r["groups"][str(1000 + f)]["success_rate"] for f in range(forests)]
        if "goal follower" not in out and opts.get("depth_encoder") is None:
            r = evaluate_policy(env, GoalFollower(net.obs_dim), n, seed=EVAL_SEED, groups=labels)
            out["goal follower"] = [r["groups"][str(1000 + f)]["success_rate"]
                                    for f in range(forests)]  # fmt: skip
        print(f"{name}: mean success {sum(out[name]) / forests:.1%} over {forests} forests",
              flush=True)  # fmt: skip
    return out


def success_rows(per_forest: dict[str, list], episodes: int) -> dict[str, dict]:
    """Each policy's mean success over forests with its 95 % cluster-bootstrap CI (forests
    resampled; each forest weighs the same)."""
    import numpy as np

    from volary.bench.stats import cluster_bootstrap_ci

    rows = {}
    for name, rates in per_forest.items():
        groups = [np.full(episodes, r) for r in rates]  # per-forest rate, equal weights
        mean, lo, hi = cluster_bootstrap_ci(groups, B=2000, seed=0)
        rows[name] = {"success": mean, "ci95": [lo, hi], "per_forest": rates}
    return rows


def paired_by_forest(a: list, b: list, a_name: str, b_name: str) -> dict:
    """Wilcoxon signed-rank (two-sided) on the per-forest success differences a - b."""
    import numpy as np
    from scipy.stats import wilcoxon

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    diff = x - y
    key = lambda n: n.replace("-", "_")  # noqa: E731
    test = {"test": "Wilcoxon signed-rank, two-sided, paired by forest (zero_method=wilcox)",
            "forests": len(diff), f"{key(a_name)}_better": int((diff > 0).sum()),
            f"{key(b_name)}_better": int((diff < 0).sum()), "ties": int((diff == 0).sum()),
            "mean_difference": float(diff.mean())}  # fmt: skip
    test["p_value"] = float(wilcoxon(x, y).pvalue) if (diff != 0).any() else 1.0
    return test


def summarize(per_forest: dict[str, list], episodes: int) -> dict:
    test = paired_by_forest(per_forest["latent"], per_forest["min-pooled"], "latent", "min-pooled")
    return {"policies": success_rows(per_forest, episodes), "latent_vs_min_pooled": test}


def plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pol = summary["policies"]
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(10, 4))
    names = list(pol)
    m = [pol[n]["success"] for n in names]
    err = [[pol[n]["success"] - pol[n]["ci95"][0] for n in names],
           [pol[n]["ci95"][1] - pol[n]["success"] for n in names]]  # fmt: skip
    ax0.bar(names, m, yerr=err, capsize=4, color=["tab:blue", "tab:orange", "0.6"][: len(names)])
    ax0.set_ylabel("success over unseen forests")
    ax0.set_ylim(0, 1)
    ax0.set_title("mean over forests, 95 % cluster-bootstrap CI")
    ax1.scatter(pol["min-pooled"]["per_forest"], pol["latent"]["per_forest"], s=14, alpha=0.7)
    ax1.plot([0, 1], [0, 1], "k--", lw=0.8)
    ax1.set_xlabel("min-pooled depth: success per forest")
    ax1.set_ylabel("DCE latent: success per forest")
    t = summary["latent_vs_min_pooled"]
    ax1.set_title(f"paired by forest: Wilcoxon p = {t['p_value']:.3g}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def add_eval_args(ap: argparse.ArgumentParser) -> None:
    """--seeds, --forests and --per-forest, as the navigate benchmarks share them."""
    ap.add_argument("--seeds", default="0", help="training seeds, comma-separated")
    ap.add_argument("--forests", type=int, default=64, help="unseen forests to evaluate on")
    ap.add_argument("--per-forest", type=int, default=8, help="episodes per forest")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_eval_args(ap)
    ap.add_argument("--frames", type=int, default=32768, help="depth images for the encoder")
    ap.add_argument("--iterations", type=int, default=400, help="PPO iterations per policy")
    ap.add_argument("--work", type=Path, default=HERE / "results" / "latent")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "latent-s0.json")
    args = ap.parse_args(argv)
    runs = []
    for seed in (int(s) for s in args.seeds.split(",")):
        encoder, enc_wall = train_encoder(args.work, seed, args.frames)
        print(f"seed {seed}: encoder trained in {enc_wall:.0f} s", flush=True)
        trained = train_pair(args.work, seed, encoder, args.iterations)
        for name, t in trained.items():
            print(f"seed {seed}: {name} trained in {t['wall_s']:.0f} s", flush=True)
        per_forest = evaluate({k: v["policy"] for k, v in trained.items()}, args.forests,
                              args.per_forest)  # fmt: skip
        summary = summarize(per_forest, args.per_forest)
        runs.append({"seed": seed, "encoder": str(encoder), "encoder_wall_s": enc_wall,
                     "training": {k: {"wall_s": v["wall_s"], "command": v["command"]}
                                  for k, v in trained.items()}, **summary})  # fmt: skip
        plot(summary, args.out.with_suffix(".png") if seed == runs[0]["seed"] else
             args.out.with_name(f"{args.out.stem}-s{seed}.png"))  # fmt: skip
    doc = {"benchmark": "rl_navigate_latent", "eval_seed": EVAL_SEED, "forests": args.forests,
           "per_forest": args.per_forest, "unit_of_replication": "forest (scene seed)",
           "runs": runs}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    from rich.console import Console
    from rich.table import Table

    for run in runs:
        t = Table(title=f"navigate on {args.forests} unseen forests, training seed {run['seed']}")
        for col in ("observation", "success", "95 % CI (forests)"):
            t.add_column(col)
        for name, r in run["policies"].items():
            t.add_row(name, f"{r['success']:.1%}", f"{r['ci95'][0]:.1%} - {r['ci95'][1]:.1%}")
        Console().print(t)
        test = run["latent_vs_min_pooled"]
        print(f"latent - min-pooled: {test['mean_difference']:+.1%} per forest; latent better in "
              f"{test['latent_better']}, worse in {test['min_pooled_better']}, tied in "
              f"{test['ties']}; {test['test']}: p = {test['p_value']:.3g}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
