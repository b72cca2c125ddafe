"""``volary bp``: BoundaryPredictor sampling, training and deployment (paper 002).

A typer app that :mod:`volary.cli.main` mounts as ``volary bp`` (with the ``volary`` group class,
which runs each command's declared option checks, :data:`OPTIONS`, and prints a bad input as
one ``error:`` line, exit code 2), so the commands read as before the study moved. A
bad input a command finds itself raises :class:`~volary.errors.ConfigError`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from volary.checks import DEVICE, OUT, SEED, SET, Check, counts, in_file, listed, one_of, real
from volary.inputs import LIMITS
from volary.options import SetOption, configure, console, fail

bp_app = typer.Typer(
    no_args_is_help=True,
    help="BoundaryPredictor: sample the dataset, train, fly courses.",
)

#: ``volary bp``'s declared option checks (:mod:`volary.checks`' vocabulary), which
#: :mod:`volary.cli.main` adds to the command table when it mounts the study.
OPTIONS: dict[str, dict[str, Check]] = {
    "bp sample": {
        "--out": OUT,
        "--seed": SEED,
        "--fraction": real(0, 1, "fraction of the grid", "1", above=True),
        "--device": DEVICE,
        "--chunk": counts(10_000_000, "inputs flown at once"),
        "--block": counts(10_000_000, "inputs per block"),
        "--compile": one_of(("auto", "numba", "inductor", "eager")),
        "--tail": real(0, 60, "scored tail", "s"),
        "--set": SET,
    },
    "bp train": {
        "--out": OUT,
        "--seed": SEED,
        "--dataset": in_file("dataset"),
        "--epochs": counts(10**6, "epochs"),
        "--patience": counts(10**6, "epochs without improvement"),
        "--batch-size": counts(10_000_000, "batch size"),
        "--set": SET,
    },
    "bp fly": {
        "--out": OUT,
        "--seed": SEED,
        "--model": in_file("checkpoint"),
        "--courses": listed(("circular", "straight", "snaked")),
        "--gates": counts(LIMITS["gates"].hi, "gates per course"),
        "--set": SET,
    },
}

Out = Annotated[Path, typer.Option("--out", help="Output directory.")]
Seed = Annotated[int, typer.Option("--seed", help="Seed (grid subset, randomization, split).")]


@bp_app.command("sample")
def bp_sample(
    out: Out = Path("out/bp"),
    seed: Seed = 0,
    fraction: Annotated[
        float, typer.Option("--fraction", help="Fraction of the 129,600-input Table II grid.")
    ] = 1.0,
    device: Annotated[str, typer.Option("--device", help="cpu, cuda or cuda:N.")] = "cpu",
    chunk: Annotated[int | None, typer.Option("--chunk", help="Flown at once (16384).")] = None,
    block: Annotated[int, typer.Option("--block", help="Inputs labelled per block.")] = 8192,
    compile_mode: Annotated[
        str | None,
        typer.Option(
            "--compile",
            help="Simulator fast path: auto (default; numba on CPU), numba, inductor, eager.",
        ),
    ] = None,
    tail: Annotated[
        float,
        typer.Option(
            "--tail", help="Seconds scored past gate i (0: the whole deceleration, Algorithm 1)."
        ),
    ] = 0.0,
    no_prune: Annotated[
        bool, typer.Option("--no-prune", help="Fly every eq. 3-feasible candidate.")
    ] = False,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Overwrite an existing dataset instead of resuming.")
    ] = False,
    set_: SetOption = None,
) -> None:
    """Algorithm 1 over (a fraction of) the grid; writes OUT/dataset.h5 (resumable).

    --set takes SamplingConfig fields, e.g. --set grace_s=0.5 --set randomize=false."""
    from volary.errors import VolaryError
    from volary.studies.boundary.dataset import generate_dataset, load_dataset, summarize
    from volary.studies.boundary.sampling import SamplingConfig

    if tail < 0:
        fail(f"--tail: expected seconds >= 0, got {tail}")
    try:
        flags = [
            ("--chunk", "chunk", chunk),
            ("--compile", "compile", compile_mode),
            ("--tail", "tail_s", tail if tail > 0 else None),
            ("--no-prune", "prune", False if no_prune else None),
        ]
        cfg = configure(SamplingConfig(), flags, set_)
        path = generate_dataset(
            out / "dataset.h5",
            fraction=fraction,
            seed=seed,
            config=cfg,
            block=block,
            resume=not fresh,
            device=device,
            progress=lambda d, n, r: console.print(f"{d}/{n} inputs, {r:.0f} candidates/s"),
        )
    except VolaryError as e:
        fail(str(e))
    summary = summarize(load_dataset(path))
    (out / "dataset-summary.json").write_text(json.dumps(summary, indent=2))
    console.print(
        f"dataset: {path} ({summary['inputs']} inputs, {summary['labelled_without_crash']} "
        f"labelled without crash, {summary['flown_per_input']:.2f} flights per input); "
        f"summary: {out / 'dataset-summary.json'}"
    )


def _log_epoch(epoch: int, train_loss: float, test_loss: float) -> None:
    if epoch % 10 == 0:
        console.print(f"epoch {epoch}: train loss {train_loss:.4f}, test loss {test_loss:.4f}")


@bp_app.command("train")
def bp_train(
    out: Out = Path("out/bp"),
    seed: Seed = 0,
    dataset: Annotated[
        Path | None, typer.Option("--dataset", help="Dataset file (default OUT/dataset.h5).")
    ] = None,
    epochs: Annotated[int | None, typer.Option("--epochs", help="Table IV: 1000.")] = None,
    patience: Annotated[int | None, typer.Option("--patience", help="Table IV: 100.")] = None,
    batch_size: Annotated[int | None, typer.Option("--batch-size", help="Table IV: 1280.")] = None,
    set_: SetOption = None,
) -> None:
    """Table IV training; writes OUT/model.pt, OUT/train.json and OUT/errors.png (Fig. 2).

    --set takes (boundary) TrainConfig fields, e.g. --set lr=0.005 --set loss.w_unsafe=3."""
    from volary.errors import VolaryError
    from volary.studies.boundary.train import TrainConfig, run_training

    try:
        flags = [
            ("--seed", "seed", seed),
            ("--epochs", "epochs", epochs),
            ("--patience", "patience", patience),
            ("--batch-size", "batch_size", batch_size),
        ]
        cfg = configure(TrainConfig(), flags, set_)
        summary = run_training(dataset or out / "dataset.h5", out, cfg, log=_log_epoch)
    except VolaryError as e:
        fail(str(e))
    console.print(json.dumps(summary["test_errors"], indent=2))
    console.print(f"model: {out / 'model.pt'}", markup=False)


@bp_app.command("fly")
def bp_fly(
    out: Out = Path("out/bp"),
    seed: Seed = 0,
    model: Annotated[
        Path | None, typer.Option("--model", help="Checkpoint (default OUT/model.pt).")
    ] = None,
    courses: Annotated[
        str, typer.Option("--courses", help="Comma-separated: circular, straight, snaked.")
    ] = "circular,straight,snaked",
    n_gates: Annotated[
        int | None, typer.Option("--gates", help="Gates per course (default: the course's).")
    ] = None,
    randomize: Annotated[
        bool,
        typer.Option(
            "--randomize", help="Table I randomization and thrust noise, drawn from --seed."
        ),
    ] = False,
    set_: SetOption = None,
) -> None:
    """Fly the courses with the network's boundary conditions; writes OUT/fly.json, fly.png.

    --set takes DeployConfig fields, e.g. --set time_limit_s=60 --set stochastic=true."""
    from volary.errors import VolaryError
    from volary.studies.boundary.deploy import DeployConfig, fly_courses
    from volary.studies.boundary.model import load_checkpoint

    try:
        cfg = configure(DeployConfig(), [("--randomize", "randomize", randomize or None)], set_)
        net, _ = load_checkpoint(model or out / "model.pt")
        kinds = [c.strip() for c in courses.split(",") if c.strip()]
        results = fly_courses(net, kinds, out=out, cfg=cfg, seed=seed, n_gates=n_gates)
    except VolaryError as e:
        fail(str(e))
    console.print(f"wrote {out / 'fly.json'} and {out / 'fly.png'}", markup=False)
    for r in results:
        status = "finished" if r.finished else ("collided" if r.collided else "incomplete")
        console.print(f"{r.course}: {r.gates_passed}/{r.gates} gates, {status}, time {r.time_s}")


__all__ = ["OPTIONS", "bp_app", "bp_fly", "bp_sample", "bp_train"]
