"""SOUS VIDE Table I / II in simulation: train the four SV-Net variants on one expert dataset,
then fly them in the synthesized room under mass variation and the Table II disturbances.

    .venv/bin/python experiments/sousvide/ablation/run.py train --data out/sv/data.h5 \\
        --out out/sv/ablation --variant svnet          # one variant per process (1 thread)
    .venv/bin/python experiments/sousvide/ablation/run.py eval --out out/sv/ablation

``train`` calls ``volary.studies.sousvide.train.train_policy`` with the reduced budget below
(a CPU stand-in for the paper's 12 GPU hours); ``eval`` flies every checkpoint found in OUT with
``volary.studies.sousvide.evaluate`` and writes ``results.json`` and ``table.md`` beside them
(copied to ``experiments/sousvide/ablation/results/`` for the record). ``train --history-actions``
adds the command u^(k-1) to each history entry, ``train --latent N`` sets the RMA latent width
(default 64), ``train --image-norm per_image`` standardizes each image by its own channel
statistics, ``train --augment`` jitters brightness and contrast in stage 2, ``train
--occlusion F`` pastes random rectangles into a share F of the stage-2 images;
``compare --row LABEL=RESULTS.json:VARIANT ...`` puts rows of several ``eval`` runs side by side,
``probe --row LABEL=CKPT ...`` measures what a history net's latent carries
(``experiments/sousvide/ablation/results/latent-width/``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

VARIANTS = ("svnet", "no_rma", "no_pretrain", "no_latent")


def train(data: Path, out: Path, variant: str, args: argparse.Namespace) -> None:
    from volary.studies.sousvide.net import ArchConfig
    from volary.studies.sousvide.train import TrainConfig, train_policy

    cfg = TrainConfig(
        variant=variant,
        lr=args.lr,
        stage2_epochs=args.epochs,
        seed=args.seed,
        threads=1,
        arch=ArchConfig(cnn_width=args.width, image_norm=args.image_norm),
        history_actions=args.history_actions,
        latent=args.latent,
        augment=args.augment,
        occlusion=args.occlusion,
    )
    t0 = time.perf_counter()
    path = train_policy(data, out, variant, cfg)
    print(f"{variant}: {path} in {time.perf_counter() - t0:.0f} s")


def evaluate_all(out: Path, args: argparse.Namespace) -> None:
    from volary.studies.sousvide.evaluate import EvalConfig, evaluate, result_json
    from volary.studies.sousvide.policy import SVPolicy
    from volary.studies.sousvide.scene import make_scene

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
    from volary.studies.sousvide.evaluate import PAPER_TABLE_I, PAPER_TABLE_II, format_table

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


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return n


def compare(specs: list[str], out: Path) -> None:
    """Rows from several eval runs side by side: each spec is ``LABEL=RESULTS.json:VARIANT``
    (a ``results.json`` written by ``eval``); writes ``results.json`` (label -> case -> row)
    and ``table.md`` (one table per mass case, then each row's disturbances) into OUT."""
    from volary.studies.sousvide.evaluate import format_table

    picked: dict[str, dict] = {}
    for spec in specs:
        label, sep, rest = spec.partition("=")
        path, sep2, variant = rest.rpartition(":")
        if not (sep and sep2 and label and path and variant):
            raise SystemExit(f"--row: expected LABEL=RESULTS.json:VARIANT, got {spec!r}")
        runs = json.loads(Path(path).read_text())
        if variant not in runs:
            raise SystemExit(f"--row {spec!r}: {path} has no variant {variant!r} ({list(runs)})")
        picked[label] = dict(runs[variant], source={"results": path, "variant": variant})
    lines: list[str] = []
    for case in ("baseline", "mass-30", "mass+30"):
        rows = [(k, r[case]["summary"]) for k, r in picked.items() if case in r]
        lines += [f"### {case}", "", format_table(rows), ""]
    for label, r in picked.items():
        rows = [(d, r[d]["summary"]) for d in ("lighting", "dynamic", "static", "wind") if d in r]
        if rows:
            lines += [f"### {label}: Table II disturbances", "", format_table(rows), ""]
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(picked, indent=1, default=float) + "\n")
    (out / "table.md").write_text("\n".join(lines) + "\n")


def probe(specs: list[str], data: Path, out: Path) -> None:
    """How much of the previous command u^(k-1) (the newest history entry's), the current expert
    command and the mass each frozen history net's latent carries: a ridge probe (lambda 1e-3 x
    rows, standardized latent) fit on the training rows, R^2 on the held-out rollouts (each
    net's own training split: 10 % of units, its training seed). Each spec is
    ``LABEL=CHECKPOINT.pt`` of a net with the command history; writes ``probe.json`` into OUT."""
    import numpy as np

    from volary.studies.sousvide import dataset as sv_dataset
    from volary.studies.sousvide.net import load_checkpoint
    from volary.studies.sousvide.train import split_units, with_commands

    a = sv_dataset.read(data, images=False)
    hist = torch.as_tensor(with_commands(a))
    prev = hist[:, -1, 11:].double().numpy()  # zero at a rollout's first step
    names = ("f_th", "W_x", "W_y", "W_z")
    targets = {f"u_prev {n}": prev[:, i] for i, n in enumerate(names)}
    targets |= {f"u_now {n}": a.action[:, i].astype(np.float64) for i, n in enumerate(names)}
    targets["m"] = a.theta[:, 1].astype(np.float64)

    def r2(z: np.ndarray, y: np.ndarray, tr: np.ndarray, va: np.ndarray) -> float:
        x = np.c_[(z - z[tr].mean(0)) / (z[tr].std(0) + 1e-8), np.ones(len(z))]
        reg = 1e-3 * len(tr) * np.eye(x.shape[1])
        reg[-1, -1] = 0.0
        w = np.linalg.solve(x[tr].T @ x[tr] + reg, x[tr].T @ y[tr])
        return float(1 - (y[va] - x[va] @ w).var() / y[va].var())

    found: dict[str, dict[str, float | int]] = {}
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not (sep and label and path):
            raise SystemExit(f"--row: expected LABEL=CHECKPOINT.pt, got {spec!r}")
        net, meta = load_checkpoint(path)
        seed = int(meta["train_config"]["seed"])
        tr, va = (x.numpy() for x in split_units(np.asarray(a.unit), 0.1, seed))
        if not net.config.history_actions:
            raise SystemExit(f"--row {spec!r}: the net has no command history")
        with torch.no_grad():
            z = torch.cat([net.latent(h) for h in hist.split(4096)]).double().numpy()
        r = {k: round(r2(z, y, tr, va), 3) for k, y in targets.items()}
        found[label] = {"latent": z.shape[1], "split_seed": seed} | r
        print(label, json.dumps(found[label]), flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "probe.json").write_text(json.dumps(found, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stage", choices=("train", "eval", "tables", "compare", "probe"))
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
    ap.add_argument(
        "--latent",
        type=_positive_int,
        default=None,
        help="train: RMA latent width, the history net's last hidden layer (default: 64)",
    )
    ap.add_argument(
        "--image-norm",
        choices=("dataset", "per_image"),
        default="dataset",
        help="train: image normalization, training-set channel statistics (dataset, the default "
        "here, as in the earlier studies) or each image's own channel mean and std (per_image, "
        "the library default)",
    )
    ap.add_argument(
        "--augment",
        action="store_true",
        help="train: per-image brightness/contrast jitter in stage 2 (TrainConfig.augment)",
    )
    ap.add_argument(
        "--occlusion",
        type=float,
        default=0.0,
        help="train: share of stage-2 images given random flat-coloured rectangles "
        "(TrainConfig.occlusion, random erasing; default 0)",
    )
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="eval: comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--row",
        action="append",
        default=[],
        help="compare: LABEL=RESULTS.json:VARIANT; probe: LABEL=CHECKPOINT.pt (repeat)",
    )
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    if args.stage == "train":
        train(args.data, args.out, args.variant, args)
    elif args.stage == "eval":
        evaluate_all(args.out, args)
    elif args.stage == "compare":
        compare(args.row, args.out)
    elif args.stage == "probe":
        probe(args.row, args.data, args.out)
    else:
        results = merge(args.out)
        (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
        (args.out / "table.md").write_text(tables(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
