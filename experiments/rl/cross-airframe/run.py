"""One policy across airframes (issue 22; RAPTOR's idea): train ``volary rl train --recipe
cross-airframe`` (1,024 random quads, each env its own; the policy is told the airframe's hover
thrust fraction) and evaluate it on the 36 FLYINGTRUST platforms, none of which it trained on.

Beside it, with the same recipe and budget, two ablations:

- ``no-twr``: random airframes, but the policy is not told the hover thrust fraction
  (``--env observation=volary``): what a memoryless policy can do without the descriptor;
- ``specialist``: trained on one airframe only (``research_quad_1kg``, ``--env
  random_airframes=false --env observation=volary``): what the randomization buys.

Evaluation: the hover task as trained (10 s, success = within 0.2 m and 0.5 m/s at the end),
``--episodes`` episodes per platform (one per env, eval seed 7, deterministic actions), all 36
platforms in one batch. Unit of replication: the training seed; variants are interleaved seed
by seed.

    .venv/bin/python experiments/rl/cross-airframe/run.py --seeds 0,1,2

Writes ``--out`` (default ``results/seeds0-2.json`` beside this script), each run's report and
learning curve under the folder of the same name (``results/seeds0-2/<variant>/``), a
per-platform plot (``seeds0-2.png``), and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))  # for _cli
from _cli import threads_env, volary_command  # noqa: E402  (shared with benchmarks/rl_hover.py)

HERE = Path(__file__).resolve().parent
RECIPE = "cross-airframe"
VARIANTS: dict[str, list[str]] = {
    "cross-airframe": [],
    "no-twr": ["--env", "observation=volary"],
    "specialist": [
        "--env",
        "random_airframes=false",
        "--env",
        "observation=volary",
        "--env",
        "platform=research_quad_1kg",
    ],  # fmt: skip
}
EVAL_SEED = 7
TARGET = 0.95


def platforms() -> list[str]:
    from volary.platforms import names

    return names("flyingtrust-real") + names("flyingtrust-virtual")


def train(variant: str, seed: int, work: Path, threads: int) -> tuple[Path, float, str]:
    out = work / variant / f"seed{seed}"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [*volary_command(), "rl", "train", "--recipe", RECIPE, "--seed", str(seed),
           "--out", str(out), "--log-every", "50", *VARIANTS[variant]]  # fmt: skip
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=threads_env(threads), stdout=subprocess.DEVNULL)
    return out / "policy.pt", time.perf_counter() - t0, " ".join(cmd[1:])


def evaluate(policy: Path, per_platform: int) -> dict:
    """Success per FLYINGTRUST platform (``per_platform`` episodes each, one batch)."""
    import torch

    from volary.envs import make_env
    from volary.platforms import get
    from volary.platforms.indicators import thrust_to_weight
    from volary.studies.rl.ppo import evaluate_policy, load_policy

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    net, _, meta = load_policy(policy, "cpu")
    opts = {k: tuple(v) if isinstance(v, list) else v for k, v in meta["env_options"].items()}
    names = platforms()
    opts.update(random_airframes=False, platform=tuple(names), seed=EVAL_SEED)
    n = len(names) * per_platform
    env = make_env("hover", n_envs=n, **opts)
    labels = [names[i % len(names)] for i in range(n)]  # the World tiles the names
    masses = torch.tensor([get(p).mass for p in labels], dtype=env.sim.params.mass.dtype)
    if not torch.equal(env.sim.params.mass.cpu(), masses):
        raise RuntimeError("platform labels do not match the envs' airframes")
    res = evaluate_policy(env, net, episodes=n, seed=EVAL_SEED, groups=labels)
    return {
        "success": res["success_rate"],
        "per_platform": {p: g["success_rate"] for p, g in res["groups"].items()},
        "episodes_per_platform": per_platform,
        "twr": {p: thrust_to_weight(get(p)) for p in names},
    }


def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    twr = doc["runs"][0]["eval"]["twr"]
    order = sorted(twr, key=twr.get)
    fig, ax = plt.subplots(figsize=(11, 4))
    width = 0.8 / len(VARIANTS)
    for k, variant in enumerate(VARIANTS):
        rs = [r for r in doc["runs"] if r["variant"] == variant]
        mean = [statistics.fmean(r["eval"]["per_platform"][p] for r in rs) for p in order]
        ax.bar(np.arange(len(order)) + (k - 1) * width, mean, width, label=variant)
    ax.axhline(TARGET, color="k", ls="--", lw=0.8)
    ax.set_xticks(range(len(order)), [f"{p} ({twr[p]:.1f})" for p in order], rotation=90,
                  fontsize=6)  # fmt: skip
    ax.set(
        ylabel="hover success (mean over seeds)",
        ylim=(0, 1.02),
        title="One hover policy on the 36 FLYINGTRUST platforms (sorted by TWR)",
    )
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--per-platform", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "seeds0-2.json")
    args = ap.parse_args(argv)
    from volary.bench.threads import cpu_model

    work = args.out.with_suffix("")
    variants = args.variants.split(",")
    runs = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for variant in variants:
            policy, wall, cmd = train(variant, seed, work, args.threads)
            ev = evaluate(policy, args.per_platform)
            (policy.parent / "eval.json").write_text(json.dumps(ev, indent=2))
            worst = min(ev["per_platform"], key=ev["per_platform"].get)
            runs.append({"variant": variant, "seed": seed, "train_process_s": wall,
                         "command": cmd, "eval": ev})  # fmt: skip
            print(f"{variant} seed {seed}: success {ev['success']:.1%} over 36 platforms, worst "
                  f"{worst} {ev['per_platform'][worst]:.0%}, train {wall:.0f} s",
                  file=sys.stderr, flush=True)  # fmt: skip
    summary = {}
    for variant in variants:
        rs = [r for r in runs if r["variant"] == variant]
        per = {p: statistics.fmean(r["eval"]["per_platform"][p] for r in rs)
               for p in rs[0]["eval"]["per_platform"]}  # fmt: skip
        summary[variant] = {
            "seeds": len(rs),
            "success_over_platforms_per_seed": [r["eval"]["success"] for r in rs],
            "platforms_at_95pct_per_seed": [
                sum(v >= TARGET for v in r["eval"]["per_platform"].values()) for r in rs],
            "mean_success_per_platform": per,
            "median_train_process_s": statistics.median(r["train_process_s"] for r in rs),
        }  # fmt: skip
    doc = {
        "benchmark": "rl_cross_airframe", "recipe": RECIPE, "variants": VARIANTS,
        "eval": {"task": "hover", "seed": EVAL_SEED, "episodes_per_platform": args.per_platform,
                 "actions": "deterministic (the policy's mean)"},
        "threads": args.threads, "machine": cpu_model(), "target_success": TARGET,
        "unit_of_replication": "training seed", "summary": summary, "runs": runs,
    }  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2))
    if set(variants) == set(VARIANTS):
        plot(doc, args.out.with_suffix(".png"))
    print(
        "| variant | success over the 36 platforms, per seed | platforms at >= 95 %, per seed "
        "| median train command (s) |"
    )
    print("| --- | --- | --- | --- |")
    for variant, s in summary.items():
        succ = ", ".join(f"{v:.1%}" for v in s["success_over_platforms_per_seed"])
        at = ", ".join(str(v) for v in s["platforms_at_95pct_per_seed"])
        print(f"| {variant} | {succ} | {at} | {s['median_train_process_s']:.0f} |")
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
