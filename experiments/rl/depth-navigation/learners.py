"""volary's PPO beside rsl_rl's on depth navigation, same recipe and budget (issue 22).

Issue 22 keeps volary's own PPO only if a side-by-side benchmark shows it ahead.

The task is the learned planner's recipe (``volary rl train --recipe learned-planner``: 256
envs x 300 iterations of 32 steps, 64 training forests, four airframes, observation
normalization). For each training seed both learners train at the same time, one thread each
(``--learner volary`` and ``--learner rsl_rl``, nothing else changed); then every policy flies
``--forests`` unseen forests (scene seeds 1000 ...) with ``--per-forest`` episodes each, the
same starts for all (eval seed 7, deterministic actions).

Units of replication: the training seed (a learner's policy) and, within it, the forest (every
episode in a forest shares its trees). Reported: each policy's success with a 95 %
cluster-bootstrap CI over forests; per seed, the paired per-forest difference (Wilcoxon
signed-rank, two-sided); across seeds, the per-forest difference of the learners' mean over
seeds (same test) and how many seeds each learner won. Three seeds cannot make a seed-level
sign test significant (its smallest two-sided p is 0.25), so the seed count is reported, not
tested.

    .venv/bin/python experiments/rl/depth-navigation/learners.py --seeds 0,1,2

``--reuse`` keeps a run whose ``policy.pt`` and ``report.json`` are already in the work folder
(``--work``, default ``results/learners/`` beside this script). Writes ``--out`` (default
``results/learners-s0-2.{json,png}``) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))  # for _cli
from _cli import volary_command  # noqa: E402  (shared with benchmarks/rl_hover.py)
from latent import (  # noqa: E402
    add_eval_args,
    evaluate,
    paired_by_forest,
    run_at_once,
    success_rows,
)

HERE = Path(__file__).resolve().parent
LEARNERS = ("volary", "rsl_rl")


def _wall(out: Path) -> float:
    return float(json.loads((out / "report.json").read_text())["timing"]["total_wall_s"])


def train_pair(work: Path, seed: int, recipe: str, reuse: bool) -> dict[str, dict]:
    """Both learners' policies of one seed, trained at once (one thread each); their paths,
    training walls (the run's ``timing.total_wall_s``: its iterations, as both learners
    report it) and commands."""
    jobs, done = {}, {}
    for learner in LEARNERS:
        out = work / f"{learner}-s{seed}"
        cmd = [*volary_command(), "rl", "train", "--recipe", recipe, "--learner", learner,
               "--seed", str(seed), "--out", str(out), "--log-every", "50"]  # fmt: skip
        done[learner] = {"policy": out / "policy.pt", "command": " ".join(["volary", *cmd[1:]]),
                         "reused": True}  # fmt: skip
        if reuse and (out / "policy.pt").exists() and (out / "report.json").exists():
            continue
        shutil.rmtree(out, ignore_errors=True)
        jobs[learner] = cmd
    walls = run_at_once(jobs, f"seed {seed}: training") if jobs else {}
    for learner, row in done.items():
        row["wall_s"] = _wall(row["policy"].parent)
        if learner in walls:
            row.update(process_wall_s=walls[learner], reused=False)
    return done


def across_seeds(runs: list[dict]) -> dict:
    """The learners' per-forest success averaged over seeds, paired by forest; seed wins."""
    import numpy as np

    mean = {learner: np.mean([r["policies"][learner]["per_forest"] for r in runs], axis=0)
            for learner in LEARNERS}  # fmt: skip
    wins = {learner: 0 for learner in (*LEARNERS, "tie")}
    for r in runs:
        a, b = (r["policies"][learner]["success"] for learner in LEARNERS)
        wins[LEARNERS[0] if a > b else LEARNERS[1] if b > a else "tie"] += 1
    test = paired_by_forest(list(mean["rsl_rl"]), list(mean["volary"]), "rsl_rl", "volary")
    return {
        "seeds": [r["seed"] for r in runs],
        "mean_success": {k: float(v.mean()) for k, v in mean.items()},
        "seeds_won": wins,
        "rsl_rl_vs_volary_by_forest": test,
    }


def plot(runs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    width = 0.38
    for k, learner in enumerate(LEARNERS):
        xs = [i + (k - 0.5) * width for i in range(len(runs))]
        rows = [r["policies"][learner] for r in runs]
        m = [row["success"] for row in rows]
        err = [[row["success"] - row["ci95"][0] for row in rows],
               [row["ci95"][1] - row["success"] for row in rows]]  # fmt: skip
        ax.bar(xs, m, width, yerr=err, capsize=3, label=learner)
    ax.set_xticks(range(len(runs)), [f"seed {r['seed']}" for r in runs])
    ax.set_ylabel("success over unseen forests")
    ax.set_ylim(0, 1)
    ax.set_title("learned-planner recipe, same budget: 95 % CI over forests")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_eval_args(ap)
    ap.add_argument("--recipe", default="learned-planner", help="a navigate recipe")
    ap.add_argument("--reuse", action="store_true", help="keep runs already in --work")
    ap.add_argument("--work", type=Path, default=HERE / "results" / "learners")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "learners-s0-2.json")
    args = ap.parse_args(argv)
    runs = []
    for seed in (int(s) for s in args.seeds.split(",")):
        trained = train_pair(args.work, seed, args.recipe, args.reuse)
        for learner, t in trained.items():
            how = "reused" if t["reused"] else "trained"
            print(f"seed {seed}: {learner} {how}, {t['wall_s']:.0f} s of training", flush=True)
        per_forest = evaluate({k: v["policy"] for k, v in trained.items()}, args.forests,
                              args.per_forest)  # fmt: skip
        test = paired_by_forest(per_forest["rsl_rl"], per_forest["volary"], "rsl_rl", "volary")
        training = {k: {f: x for f, x in v.items() if f != "policy"} for k, v in trained.items()}
        runs.append({"seed": seed, "policies": success_rows(per_forest, args.per_forest),
                     "rsl_rl_vs_volary": test, "training": training})  # fmt: skip
    doc = {"benchmark": "rl_navigate_learners", "recipe": args.recipe, "eval_seed": 7,
           "forests": args.forests, "per_forest": args.per_forest,
           "unit_of_replication": "training seed (policy); forest (scene seed) within it",
           "runs": runs, "across_seeds": across_seeds(runs)}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    plot(runs, args.out.with_suffix(".png"))
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{args.recipe}: success on {args.forests} unseen forests "
                    f"({args.per_forest} episodes each)")  # fmt: skip
    for col in ("seed", *LEARNERS, "goal follower", "rsl_rl - volary by forest (Wilcoxon p)"):
        t.add_column(col)
    for r in runs:
        pol, test = r["policies"], r["rsl_rl_vs_volary"]
        cells = [f"{pol[k]['success']:.1%} [{pol[k]['ci95'][0]:.1%}, {pol[k]['ci95'][1]:.1%}]"
                 for k in LEARNERS]  # fmt: skip
        follower = pol.get("goal follower", {}).get("success")
        t.add_row(str(r["seed"]), *cells, "-" if follower is None else f"{follower:.1%}",
                  f"{test['mean_difference']:+.1%} (p = {test['p_value']:.3g})")  # fmt: skip
    Console().print(t)
    acr = doc["across_seeds"]
    test = acr["rsl_rl_vs_volary_by_forest"]
    print(f"over seeds {acr['seeds']}: mean success volary {acr['mean_success']['volary']:.1%}, "
          f"rsl_rl {acr['mean_success']['rsl_rl']:.1%}; seeds won {acr['seeds_won']}; "
          f"per forest rsl_rl - volary {test['mean_difference']:+.1%}, {test['test']}: "
          f"p = {test['p_value']:.3g}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
