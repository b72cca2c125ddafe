"""``volary sousvide``: SOUS VIDE expert data, SV-Net training and evaluation (paper 000).

A typer app that :mod:`volary.cli.main` mounts as ``volary sousvide`` (with the ``volary`` group
class, which runs each command's declared option checks, :data:`OPTIONS`, and prints a bad input
as one ``error:`` line, exit code 2), so the commands read as before the study moved. A
bad input a command finds itself raises :class:`~volary.errors.ConfigError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from volary.checks import (
    DEVICE,
    OUT,
    SEED,
    SET,
    Check,
    counts,
    in_file,
    listed,
    looked_up,
    one_of,
    out_file,
    parsed,
    real,
)
from volary.inputs import regular_file
from volary.options import SetOption, configure, console, fail

sousvide_app = typer.Typer(
    no_args_is_help=True,
    help="SOUS VIDE: expert data, SV-Net training, evaluation.",
)


def _variant(name: str) -> Any:
    from volary.studies.sousvide.net import VARIANTS

    return VARIANTS.get(name)


def _policy(v: str) -> None:
    if v != "expert":
        regular_file(v, "policy checkpoint")


#: ``volary sousvide``'s declared option checks (:mod:`volary.checks`' vocabulary), which
#: :mod:`volary.cli.main` adds to the command table when it mounts the study.
OPTIONS: dict[str, dict[str, Check]] = {
    "sousvide generate": {
        "--out": out_file(),
        "--n-des": counts(10**6, "desired points"),
        "--n-smp": counts(10**6, "rollouts per point"),
        "--t-smp": real(0, 3600, "seconds per rollout", "s", above=True),
        "--seed": SEED,
        "--envs": counts(1_000_000, "rollouts at once"),
        "--size": counts(1024, "image size", 8),
        "--device": DEVICE,
        "--max-units": counts(10**12, "rollouts"),
        "--set": SET,
    },
    "sousvide train": {
        "--data": in_file("dataset"),
        "--out": OUT,
        "--variant": looked_up(_variant),
        "--steps": counts(10**9, "optimizer steps"),
        "--pretrain-steps": counts(10**9, "optimizer steps", 0),
        "--epochs": counts(10**6, "epochs"),
        "--batch": counts(1_000_000, "batch size"),
        "--seed": SEED,
        "--device": DEVICE,
        "--lr": real(0, 1, "learning rate", "1", above=True),
        "--width": real(0, 16, "channel multiplier", "1", above=True),
        "--latent": counts(4096, "latent width"),
        "--image-norm": one_of(("dataset", "per_image")),
        "--occlusion": real(0, 1, "share of occluded images", "1"),
        "--set": SET,
    },
    "sousvide eval": {
        "--policy": parsed(_policy),
        "--out": OUT,
        "--disturbance": listed(("baseline", "lighting", "dynamic", "static", "payload", "wind")),
        "--trials": counts(10**6, "flights per disturbance"),
        "--seed": SEED,
        "--size": counts(1024, "image size", 8),
        "--steps": counts(10**9, "control steps"),
        "--device": DEVICE,
        "--set": SET,
    },
}


@sousvide_app.command("generate")
def sousvide_generate(
    out: Annotated[Path, typer.Option("--out", help="Dataset file (.h5); resumed if it exists.")],
    n_des: Annotated[
        int | None, typer.Option("--n-des", help="Desired points along the trajectory (60).")
    ] = None,
    n_smp: Annotated[int | None, typer.Option("--n-smp", help="Rollouts per point (10).")] = None,
    t_smp: Annotated[
        float | None, typer.Option("--t-smp", help="Seconds flown per rollout (2).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the theta / start draws.")] = 0,
    envs: Annotated[int | None, typer.Option("--envs", help="Rollouts flown at once (64).")] = None,
    size: Annotated[int | None, typer.Option("--size", help="Square image size, px (64).")] = None,
    device: Annotated[str, typer.Option("--device", help="cpu, cuda or cuda:N.")] = "cpu",
    max_units: Annotated[
        int | None, typer.Option("--max-units", help="Stop after this many rollouts.")
    ] = None,
    set_: SetOption = None,
) -> None:
    """SOUS VIDE Algorithm 1: MPC expert rollouts with onboard images into OUT (resumable).

    --set takes GenerateConfig fields, e.g. --set window=10 --set mass_range=0.7,1.3."""
    from volary.errors import VolaryError
    from volary.studies.sousvide.generate import GenerateConfig, generate

    if out.exists() and out.is_dir():
        fail(f"--out: {out} is a directory; give a dataset file path (e.g. {out}/data.h5)")
    try:
        cfg = configure(
            GenerateConfig(),
            [("--n-des", "n_des", n_des), ("--n-smp", "n_smp", n_smp), ("--t-smp", "t_smp", t_smp),
             ("--seed", "seed", seed), ("--envs", "envs", envs), ("--size", "width", size),
             ("--size", "height", size), ("--device", "device", device)],
            set_,
        )  # fmt: skip
        console.print(
            f"generating {cfg.units} rollouts x {cfg.steps} steps into {out}", markup=False
        )

        def progress(done: int, total: int) -> None:
            console.print(f"  {done}/{total} rollouts")

        summary = generate(out, cfg, progress=progress, max_units=max_units)
    except VolaryError as e:
        fail(str(e))
    for line in summary.lines():
        console.print(line, highlight=False)


@sousvide_app.command("train")
def sousvide_train(
    data: Annotated[Path, typer.Option("--data", help="Dataset from `sousvide generate`.")],
    out: Annotated[Path, typer.Option("--out", help="Output directory (checkpoint, report).")],
    variant: Annotated[
        str, typer.Option("--variant", help="svnet, no_rma, no_pretrain or no_latent.")
    ] = "svnet",
    steps: Annotated[
        int | None, typer.Option("--steps", help="Cap on imitation (stage 2) optimizer steps.")
    ] = None,
    pretrain_steps: Annotated[
        int | None, typer.Option("--pretrain-steps", help="Cap on stage 1 optimizer steps.")
    ] = None,
    epochs: Annotated[int | None, typer.Option("--epochs", help="Stage 2 epochs (5).")] = None,
    batch: Annotated[int | None, typer.Option("--batch", help="Batch size (64).")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed (init, split, batches).")] = 0,
    device: Annotated[str, typer.Option("--device", help="cpu, cuda or cuda:N.")] = "cpu",
    lr: Annotated[
        float | None, typer.Option("--lr", help="Adam learning rate (paper: 1e-4).")
    ] = None,
    width: Annotated[
        float | None,
        typer.Option("--width", help="SqueezeNet channel multiplier (1.0: SqueezeNet 1.1)."),
    ] = None,
    history_actions: Annotated[
        bool | None,
        typer.Option(
            "--history-actions/--eq3-history",
            help="History entries also carry the command u^(k-1) (default); --eq3-history: the "
            "paper's eq. 3 states only.",
        ),
    ] = None,
    latent: Annotated[
        int | None,
        typer.Option(
            "--latent", help="RMA latent width, the history net's last hidden layer (8; 64: wide)."
        ),
    ] = None,
    image_norm: Annotated[
        str | None,
        typer.Option(
            "--image-norm",
            help="Image normalization: per_image (default; each image's own channel mean/std, "
            "invariant to a global brightness scale) or dataset (training-set channel mean/std).",
        ),
    ] = None,
    occlusion: Annotated[
        float | None,
        typer.Option(
            "--occlusion",
            help="Share of stage-2 images given 1-3 random flat-coloured rectangles (random "
            "erasing, for occluders such as people walking through the view); 0 (default): off.",
        ),
    ] = None,
    set_: SetOption = None,
) -> None:
    """Train SV-Net (or an ablation of Table I) on an expert dataset.

    --set takes TrainConfig fields, e.g. --set stage1_epochs=20 --set arch.features=32."""
    from volary.errors import VolaryError
    from volary.studies.sousvide.train import TrainConfig, train_policy

    try:
        cfg = configure(
            TrainConfig(),
            [("--variant", "variant", variant), ("--steps", "stage2_max_steps", steps),
             ("--pretrain-steps", "stage1_max_steps", pretrain_steps),
             ("--epochs", "stage2_epochs", epochs), ("--batch", "batch_size", batch),
             ("--seed", "seed", seed), ("--device", "device", device), ("--lr", "lr", lr),
             ("--width", "arch.cnn_width", width), ("--image-norm", "arch.image_norm", image_norm),
             ("--history-actions", "history_actions", history_actions),
             ("--latent", "latent", latent), ("--occlusion", "occlusion", occlusion)],
            set_,
        )  # fmt: skip
        if not data.is_file():
            fail(f"--data: no such dataset file {str(data)!r}")
        ckpt = train_policy(data, out, config=cfg)
    except VolaryError as e:
        fail(str(e))
    console.print(f"wrote {ckpt}", highlight=False, markup=False)


@sousvide_app.command("eval")
def sousvide_eval(
    policy: Annotated[
        str, typer.Option("--policy", help="Checkpoint from `sousvide train`, or 'expert'.")
    ],
    out: Annotated[Path, typer.Option("--out", help="Output directory (eval.json, table.md).")],
    disturbance: Annotated[
        str,
        typer.Option(
            "--disturbance",
            help="Comma list of baseline, lighting, dynamic, static, payload, wind.",
        ),
    ] = "baseline",
    trials: Annotated[
        int | None, typer.Option("--trials", help="Flights per disturbance (5).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the start offsets and gusts.")] = 0,
    size: Annotated[int, typer.Option("--size", help="Image size (expert only).")] = 64,
    steps: Annotated[
        int | None, typer.Option("--steps", help="Control steps (default: whole trajectory).")
    ] = None,
    device: Annotated[str, typer.Option("--device", help="cpu, cuda or cuda:N.")] = "cpu",
    set_: SetOption = None,
) -> None:
    """Fly a policy under Table II disturbances; print the Sec. VI metrics beside the paper.

    --set takes EvalConfig fields, e.g. --set wind=3.0 --set payload=0.2."""
    import json
    from dataclasses import replace

    from volary.errors import VolaryError
    from volary.studies.sousvide.evaluate import (
        DISTURBANCES,
        PAPER_TABLE_II,
        EvalConfig,
        ExpertPolicy,
        evaluate,
        format_table,
        result_json,
        summarize,
    )
    from volary.studies.sousvide.scene import make_scene

    names = [d.strip() for d in disturbance.split(",") if d.strip()]
    bad = [d for d in names if d not in DISTURBANCES]
    if not names or bad:
        fail(f"--disturbance: unknown {bad or disturbance!r}; valid: {', '.join(DISTURBANCES)}")
    try:
        base = configure(
            EvalConfig(),
            [("--trials", "trials", trials), ("--seed", "seed", seed), ("--steps", "steps", steps),
             ("--device", "device", device)],
            set_,
        )  # fmt: skip
        if policy == "expert":
            scene = make_scene(width=size, height=size)
            pol: Any = ExpertPolicy(scene, device=device)
        else:
            if not Path(policy).is_file():
                fail(f"--policy: expected a checkpoint file or 'expert', got {policy!r}")
            from volary.studies.sousvide.policy import SVPolicy

            pol = SVPolicy.load(policy, device=device)
            c = pol.net.config
            scene = make_scene(width=c.image_width, height=c.image_height)
        rows, records = [], []
        for name in names:
            cfg = replace(base, disturbance=name)
            r = evaluate(pol, cfg, scene=scene)
            rows.append((name, summarize(r)))
            records.append(result_json(r))
            console.print(f"{name}: {r.outcome}", highlight=False, markup=False)
    except VolaryError as e:
        fail(str(e))
    table = format_table(rows, PAPER_TABLE_II)
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval.json").write_text(json.dumps({"policy": policy, "runs": records}, indent=2))
    (out / "table.md").write_text(table + "\n")
    console.print(table, highlight=False)
    console.print(
        f"wrote {out / 'eval.json'} and {out / 'table.md'}", highlight=False, markup=False
    )


__all__ = ["OPTIONS", "sousvide_app", "sousvide_eval", "sousvide_generate", "sousvide_train"]
