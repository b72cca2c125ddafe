"""SOUS VIDE at the paper's data scale on one GPU: Algorithm 1 data, Table I variants trained in
parallel processes, each flown at baseline / -30 % / +30 % mass (SV-Net also under Table II).

    P=experiments/sousvide/paper-scale
    python $P/run.py all --out OUT            # generate, train, evaluate
    python $P/run.py all --out OUT --seed 1 --runs u8-svnet,no_rma,u-no_latent
    python $P/run.py tables --out $P/results

``all`` generates a 2,500-rollout x 40-step dataset (100,000 rows, 64 x 64, seed 0, the default
randomization of ``GenerateConfig``) into ROOT unless it exists, then trains every run of
``RUNS`` in its own process (``train_policy`` on the device, SqueezeNet 1.1 at full width,
lr 3e-4, batch 64, 15 stage-1 and 6 stage-2 epochs, 10 % of the rollouts held out) and flies
it with ``evaluate`` (8 trials per case, start offsets of evaluation seed 0). Runs still going
at ``--deadline-s`` are killed; each run prints one summary line per case to ROOT/<tag>.log
as it goes and writes ROOT/<tag>/eval.json at its end. ``--collect DIR`` copies the logs,
reports and checkpoints there. ``tables`` reads ``seed*/`` folders of collected runs in OUT and
writes ``results.json`` and ``table.md``.

Run tags: the variant name for the paper's eq. 3 history (states only); ``u-`` for the
state-action history (``history_actions``: each entry also carries u^(k-1)); ``u8-`` for that
with an 8-wide RMA latent (``latent=8``, the history net's last hidden layer; default 64).
Images are normalized with the dataset statistics (``--image-norm dataset``, how the recorded
gpu-100k runs were trained); volary's default became ``per_image`` after them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

RUNS: dict[str, tuple[str, bool, int | None]] = {
    # tag: (variant, history_actions, latent)
    "svnet": ("svnet", False, None),
    "no_rma": ("no_rma", False, None),
    "no_pretrain": ("no_pretrain", False, None),
    "no_latent": ("no_latent", False, None),
    "u-svnet": ("svnet", True, None),
    "u-no_latent": ("no_latent", True, None),
    "u8-svnet": ("svnet", True, 8),
}
MASS_CASES = ("baseline", "mass-30", "mass+30")
TABLE_II = ("lighting", "dynamic", "static", "wind")


def generate(args: argparse.Namespace) -> None:
    from volary.studies.sousvide.generate import GenerateConfig
    from volary.studies.sousvide.generate import generate as gen

    cfg = GenerateConfig(n_des=args.units // 10, n_smp=10, envs=min(1024, args.units),
                         device=args.device)  # fmt: skip
    t0 = time.perf_counter()
    s = gen(args.root / "data.h5", cfg)
    dt = time.perf_counter() - t0
    rate = s.valid_rows / dt
    print(f"generated {s.valid_rows} valid rows of {s.rows} in {dt:.1f} s ({rate:.0f} "
          f"samples/s), expert error {s.tracking_error:.3f} m", flush=True)  # fmt: skip
    doc = {"rows": s.rows, "valid_rows": s.valid_rows, "wall_s": dt, "units": args.units,
           "tracking_error_m": s.tracking_error}  # fmt: skip
    (args.root / "generate.json").write_text(json.dumps(doc, indent=1))


def run(tag: str, args: argparse.Namespace) -> None:
    from volary.studies.sousvide.evaluate import EvalConfig, evaluate, result_json
    from volary.studies.sousvide.net import ArchConfig
    from volary.studies.sousvide.policy import SVPolicy
    from volary.studies.sousvide.scene import make_scene
    from volary.studies.sousvide.train import TrainConfig, train_policy

    variant, hist_u, latent = RUNS[tag]
    out = args.root / tag
    cfg = TrainConfig(variant=variant, lr=3e-4, stage1_epochs=args.stage1_epochs,
                      stage2_epochs=args.epochs, device=args.device, threads=1, seed=args.seed,
                      arch=ArchConfig(cnn_width=1.0, image_norm=args.image_norm),
                      history_actions=hist_u,
                      latent=latent)  # fmt: skip
    t0 = time.perf_counter()
    ckpt = train_policy(args.root / "data.h5", out, variant, cfg)
    train_s = time.perf_counter() - t0
    print(f"{tag}: trained in {train_s:.0f} s", flush=True)
    scene = make_scene()
    cases = list(MASS_CASES) + (list(TABLE_II) if variant == "svnet" else [])
    rows = {}
    for name in cases:
        kw = {"payload": -0.3 if name == "mass-30" else 0.3} if name.startswith("mass") else {}
        dist = "payload" if name.startswith("mass") else name
        ec = EvalConfig(disturbance=dist, trials=args.trials, seed=0, device=args.device, **kw)
        t1 = time.perf_counter()
        row = result_json(evaluate(SVPolicy.load(ckpt, args.device), ec, scene=scene))
        row["wall_s"] = time.perf_counter() - t1
        rows[name] = row
        print(tag, name, json.dumps(row.get("summary", {})), flush=True)
    doc = {"tag": tag, "variant": variant, "history_actions": hist_u, "latent": latent,
           "seed": args.seed, "train_s": train_s, "results": rows}  # fmt: skip
    (out / "eval.json").write_text(json.dumps(doc, indent=1, default=float) + "\n")


def run_all(args: argparse.Namespace) -> None:
    t0 = time.time()
    args.root.mkdir(parents=True, exist_ok=True)
    if not (args.root / "data.h5").exists():
        generate(args)
    tags = args.runs.split(",")
    common = ["--root", str(args.root), "--device", args.device, "--seed", str(args.seed),
              "--image-norm", args.image_norm,
              "--epochs", str(args.epochs), "--stage1-epochs", str(args.stage1_epochs),
              "--trials", str(args.trials)]  # fmt: skip
    procs = {}
    for t in tags:
        log = open(args.root / f"{t}.log", "w")  # noqa: SIM115 (closed with the process)
        cmd = [sys.executable, __file__, "run", "--tag", t, *common]
        procs[t] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log)
    for t, (p, log) in procs.items():
        try:
            p.wait(timeout=max(1.0, t0 + args.deadline_s - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()
        print(f"== {t} rc={p.returncode}\n" + (args.root / f"{t}.log").read_text()[-1500:])
    if args.collect is not None:
        collect(args.root, tags, args.collect / f"seed{args.seed}")


def collect(root: Path, tags: list[str], dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for f in [root / "generate.json", *(root / f"{t}.log" for t in tags)]:
        if f.exists():
            shutil.copy(f, dest / f.name)
    for t in tags:
        for f in (root / t).glob("*"):
            if f.suffix in (".json", ".pt"):
                (dest / t).mkdir(exist_ok=True)
                shutil.copy(f, dest / t / f.name)


def _summaries(seed_dir: Path, tag: str) -> dict[str, dict]:
    """Per-case summaries of one run: eval.json when the run finished, else the log's lines."""
    ev = seed_dir / tag / "eval.json"
    if ev.exists():
        return {k: v["summary"] for k, v in json.loads(ev.read_text())["results"].items()}
    out = {}
    log = seed_dir / f"{tag}.log"
    for line in log.read_text().splitlines() if log.exists() else []:
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0] == tag and parts[2].startswith("{"):
            out[parts[1]] = json.loads(parts[2])
    return out


def _report(seed_dir: Path, tag: str) -> dict:
    found = list((seed_dir / tag).glob("*.json")) if (seed_dir / tag).exists() else []
    rep = [f for f in found if f.name != "eval.json"]
    if not rep:
        return {}
    r = json.loads(rep[0].read_text())
    s1 = r.get("stage1", {})
    return {
        "train_wall_s": r.get("wall_s"),
        "stage2_val_loss": r.get("stage2", {}).get("final_val_loss"),
        "theta_rmse": s1.get("theta_error", {}).get("rmse"),
        "theta_mean_predictor_rmse": s1.get("theta_error", {}).get("mean_predictor_rmse"),
    }


def tables(out: Path) -> None:
    results: dict[str, dict[str, dict]] = {}
    for seed_dir in sorted(out.glob("seed*")):
        for tag in RUNS:
            rows = _summaries(seed_dir, tag)
            if rows:
                results.setdefault(seed_dir.name, {})[tag] = {
                    "cases": rows,
                    "training": _report(seed_dir, tag),
                }
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    lines = [
        "| seed | run | history | latent | case | success | crash | off-course | err m "
        "| prox % | stage-1 m RMSE (mean pred.) | stage-2 val loss |",
        "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for seed, runs in results.items():
        for tag, r in runs.items():
            variant, hist_u, latent = RUNS[tag]
            tr = r["training"]
            rm, mp = tr.get("theta_rmse") or {}, tr.get("theta_mean_predictor_rmse") or {}
            th = f"{rm['m_kg']:.3f} ({mp['m_kg']:.3f})" if rm and mp else "-"
            vl = f"{tr['stage2_val_loss']:.3f}" if tr.get("stage2_val_loss") else "-"
            for case in (*MASS_CASES, *TABLE_II):
                s = r["cases"].get(case)
                if s is None:
                    continue
                ok = s["success"] + s["recovery"]
                lines.append(
                    f"| {seed[4:]} | {variant} | {'state+cmd' if hist_u else 'eq. 3'} | "
                    f"{latent or (64 if variant in ('svnet', 'no_pretrain') else '-')} | {case} | "
                    f"{ok}/{s['trials']} | {s['crash']} | {s['off_course']} | "
                    f"{s['tracking_error']:.3f} | {s['proximity']:.1f} | {th} | {vl} |"
                )
    (out / "table-runs.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stage", choices=("all", "run", "tables"))
    ap.add_argument("--root", type=Path, default=Path("/tmp/sv"), help="data and run folders")
    ap.add_argument("--out", type=Path, default=None, help="tables: the collected results")
    ap.add_argument("--collect", type=Path, default=None, help="all: copy results here")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--units", type=int, default=2500, help="rollouts of 40 steps to generate")
    ap.add_argument("--stage1-epochs", type=int, default=15)
    ap.add_argument("--epochs", type=int, default=6, help="stage-2 epochs")
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0, help="training seed")
    ap.add_argument("--runs", default=",".join(RUNS))
    ap.add_argument("--tag", choices=tuple(RUNS), help="run: which run")
    ap.add_argument("--deadline-s", type=float, default=520.0)
    ap.add_argument(
        "--image-norm",
        choices=("dataset", "per_image"),
        default="dataset",
        help="SqueezeNet input normalization (the gpu-100k runs: dataset; volary's default "
        "since: per_image)",
    )
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    if args.stage == "run":
        run(args.tag, args)
    elif args.stage == "all":
        bad = set(args.runs.split(",")) - set(RUNS)
        if bad:
            raise SystemExit(f"--runs: unknown {sorted(bad)}; expected some of {list(RUNS)}")
        run_all(args)
    else:
        if args.out is None:
            raise SystemExit("tables: --out DIR (with seed*/ folders) is required")
        tables(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
