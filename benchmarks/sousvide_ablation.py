"""SOUS VIDE Table I / II in simulation: train the four SV-Net variants on one expert dataset,
then fly them in the synthesized room under mass variation and the Table II disturbances.

    .venv/bin/python benchmarks/sousvide_ablation.py train --data out/sv/data.h5 \\
        --out out/sv/ablation --variant svnet          # one variant per process (1 thread)
    .venv/bin/python benchmarks/sousvide_ablation.py eval --out out/sv/ablation

``train`` calls ``volary.learning.sousvide.train.train_policy`` with the reduced budget below
(a CPU stand-in for the paper's 12 GPU hours); ``eval`` flies every checkpoint found in OUT with
``volary.learning.sousvide.evaluate`` and writes ``results.json`` and ``table.md`` beside them
(copied to ``benchmarks/results/sousvide/`` for the record).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

VARIANTS = ("svnet", "no_rma", "no_pretrain", "no_latent")


def train(data: Path, out: Path, variant: str, args: argparse.Namespace) -> None:
    from volary.learning.sousvide.net import ArchConfig
    from volary.learning.sousvide.train import TrainConfig, train_policy

    cfg = TrainConfig(
        variant=variant,
        lr=args.lr,
        stage2_epochs=args.epochs,
        seed=args.seed,
        threads=1,
        arch=ArchConfig(cnn_width=args.width),
        history_actions=args.history_actions,
    )
    t0 = time.perf_counter()
    path = train_policy(data, out, variant, cfg)
    print(f"{variant}: {path} in {time.perf_counter() - t0:.0f} s")


def evaluate_all(out: Path, args: argparse.Namespace) -> None:
    from volary.learning.sousvide.evaluate import EvalConfig, evaluate, result_json
    from volary.learning.sousvide.policy import SVPolicy
    from volary.learning.sousvide.scene import make_scene

    scene = make_scene()
    results: dict[str, dict[str, object]] = {}
    cases = [("baseline", {}), ("mass-30", {"payload": -0.3}), ("mass+30", {"payload": 0.3})]
    for variant in args.variants.split(","):
        ckpt = out / f"{variant}.pt"
        if not ckpt.is_file():
            continue
        todo = list(cases)
        if variant == "svnet":
            todo += [(d, {}) for d in ("lighting", "dynamic", "static", "wind")]
        for name, kw in todo:
            dist = "payload" if name.startswith("mass") else name
            cfg = EvalConfig(disturbance=dist, trials=args.trials, seed=args.seed, **kw)
            t0 = time.perf_counter()
            res = evaluate(SVPolicy.load(ckpt), cfg, scene=scene)
            row = result_json(res)
            row["wall_s"] = time.perf_counter() - t0
            results.setdefault(variant, {})[name] = row
            print(variant, name, json.dumps(row.get("summary", row))[:300])
    for variant, rows in results.items():
        text = json.dumps(rows, indent=1, default=float) + "\n"
        (out / f"results-{variant}.json").write_text(text)
    merged = merge(out)
    (out / "results.json").write_text(json.dumps(merged, indent=1, default=float) + "\n")
    (out / "table.md").write_text(tables(merged))


def merge(out: Path) -> dict[str, dict]:
    """Every ``results-<variant>.json`` in OUT, in Table I order."""
    found = {p.stem.removeprefix("results-"): p for p in out.glob("results-*.json")}
    return {v: json.loads(found[v].read_text()) for v in VARIANTS if v in found}


def tables(results: dict[str, dict[str, dict]]) -> str:
    """Markdown: Table I per mass case (each variant beside the paper's row), Table II."""
    from volary.learning.sousvide.evaluate import PAPER_TABLE_I, PAPER_TABLE_II, format_table

    paper_names = {
        "svnet": "SV-Net",
        "no_rma": "SV no RMA",
        "no_pretrain": "SV no pre-train",
        "no_latent": "SV no latent",
    }
    out = []
    for case in ("baseline", "mass-30", "mass+30"):
        rows = [(v, r[case]["summary"]) for v, r in results.items() if case in r]
        paper = (
            {v: PAPER_TABLE_I[paper_names[v]] for v, _ in rows if paper_names[v] in PAPER_TABLE_I}
            if case == "baseline"
            else None
        )
        out += [f"### Table I analogue: {case}", "", format_table(rows, paper), ""]
    sv = results.get("svnet", {})
    rows = [
        (d, sv[d]["summary"])
        for d in ("baseline", "lighting", "dynamic", "static", "mass+30", "wind")
        if d in sv
    ]
    paper2 = dict(PAPER_TABLE_II, **{"mass+30": PAPER_TABLE_II["payload"]})
    out += ["### Table II analogue: SV-Net under disturbances", "", format_table(rows, paper2), ""]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stage", choices=("train", "eval", "tables"))
    ap.add_argument("--data", type=Path, default=Path("out/sv/data.h5"))
    ap.add_argument("--out", type=Path, default=Path("out/sv/ablation"))
    ap.add_argument("--variant", choices=VARIANTS, default="svnet")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--width", type=float, default=0.5)
    ap.add_argument(
        "--history-actions",
        action="store_true",
        help="train: history entries also carry the command u^(k-1) (RMA-style, not eq. 3)",
    )
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="eval: comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    if args.stage == "train":
        train(args.data, args.out, args.variant, args)
    elif args.stage == "eval":
        evaluate_all(args.out, args)
    else:
        results = merge(args.out)
        (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
        (args.out / "table.md").write_text(tables(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
