"""``volary splat`` and ``volary sousvide``: Gaussian-splat scenes and the SOUS VIDE pipeline."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from volary.cli._common import console, fail
from volary.cli.checks import VolaryGroup
from volary.cli.overrides import SetOption, configure

splat_app = typer.Typer(
    name="splat",
    cls=VolaryGroup,
    no_args_is_help=True,
    help="Gaussian-splat scenes: render, convert, synth.",
)
sousvide_app = typer.Typer(
    name="sousvide",
    cls=VolaryGroup,
    no_args_is_help=True,
    help="SOUS VIDE: expert data, SV-Net training, evaluation.",
)


def _floats(text: str, count: int, option: str) -> list[float]:
    try:
        vals = [float(v) for v in text.replace(" ", "").split(",")]
    except ValueError:
        fail(f"{option}: expected {count} comma-separated numbers, got {text!r}")
    if len(vals) != count or not all(math.isfinite(v) for v in vals):
        fail(f"{option}: expected {count} finite comma-separated numbers, got {text!r}")
    return vals


def _load_scene(
    scene: str, seed: int, max_gaussians: int | None, align: str | None
) -> tuple[Any, Any]:
    """(splats, SceneSpec or None) from a .ply path or a scenario name."""
    from volary.sensors.splat import load_ply
    from volary.sensors.splat.synth import SynthConfig, synthesize_scenario
    from volary.worlds import SCENARIOS

    matrix = None if align is None else _matrix(align)
    if scene.lower().endswith(".ply"):
        if not Path(scene).is_file():
            fail(f"SCENE: no such file {scene!r}")
        return load_ply(scene, matrix), None
    if scene not in SCENARIOS:
        fail(f"SCENE: expected a .ply file or a scenario ({', '.join(sorted(SCENARIOS))}), "
              f"got {scene!r}")  # fmt: skip
    cfg = configure(SynthConfig(), [("--max-gaussians", "max_gaussians", max_gaussians)])
    spec, splats = synthesize_scenario(scene, seed, cfg)
    return splats, spec


def _matrix(text: str) -> Any:
    import numpy as np

    return np.asarray(_floats(text, 16, "--align"), dtype=float).reshape(4, 4)


Align = Annotated[
    str | None,
    typer.Option(
        "--align",
        help="World-from-file similarity, 16 comma-separated numbers (row-major 4x4).",
    ),
]
Seed = Annotated[int, typer.Option("--seed", help="Scenario and synthesis seed.")]
MaxG = Annotated[
    int | None,
    typer.Option("--max-gaussians", help="Gaussian budget (default: SynthConfig's, 300,000)."),
]


@splat_app.command("synth")
def splat_synth(
    scenario: Annotated[str, typer.Argument(help="Scenario type (volary.worlds.SCENARIOS).")],
    out: Annotated[Path, typer.Option("--out", help="PLY file to write.")] = Path("scene.ply"),
    seed: Seed = 0,
    max_gaussians: MaxG = None,
    sh_degree: Annotated[
        int | None, typer.Option("--sh-degree", help="0..3 (zeros above 0; default 0).")
    ] = None,
    set_: SetOption = None,
) -> None:
    """Dress a scenario in Gaussians (obstacles, gates, floor) and write a 3DGS PLY.

    --set takes SynthConfig fields, e.g. --set spacing=0.05 --set floor_spacing=0.2."""
    from volary.errors import VolaryError
    from volary.sensors.splat import save_ply
    from volary.sensors.splat.synth import SynthConfig, synthesize_scenario

    try:
        flags = [
            ("--max-gaussians", "max_gaussians", max_gaussians),
            ("--sh-degree", "sh_degree", sh_degree),
        ]
        cfg = configure(SynthConfig(), flags, set_)
        spec, splats = synthesize_scenario(scenario, seed, cfg)
        out.parent.mkdir(parents=True, exist_ok=True)
        save_ply(out, splats)
    except VolaryError as e:
        fail(str(e))
    console.print(
        f"{scenario} seed {seed}: {splats.count} Gaussians, {len(spec.obstacles)} obstacles, "
        f"bounds {spec.bounds_min} - {spec.bounds_max} m -> {out}",
        highlight=False,
    )


@splat_app.command("convert")
def splat_convert(
    src: Annotated[Path, typer.Argument(help="3DGS PLY (INRIA or Nerfstudio layout).")],
    dst: Annotated[Path, typer.Argument(help="PLY to write.")],
    align: Align = None,
    sh_degree: Annotated[
        int | None, typer.Option("--sh-degree", help="Keep SH coefficients up to this degree.")
    ] = None,
    ascii_: Annotated[bool, typer.Option("--ascii", help="Write an ASCII PLY.")] = False,
    default_layout: Annotated[
        bool,
        typer.Option("--default-layout", help="Write the INRIA layout (float32, f_dc/f_rest)."),
    ] = False,
) -> None:
    """Read a 3DGS PLY, optionally align it and cut its SH degree, and write it.

    The layout it was read with is kept unless --default-layout or --ascii is given, so a plain
    convert is a byte-exact copy."""
    from dataclasses import replace

    from volary.errors import VolaryError
    from volary.sensors.splat import load_ply, save_ply
    from volary.sensors.splat.io import default_layout as inria_layout

    if not src.is_file():
        fail(f"SRC: no such file {str(src)!r}")
    try:
        s = load_ply(src, None if align is None else _matrix(align))
        if sh_degree is not None:
            if not 0 <= sh_degree <= s.sh_degree:
                fail(f"--sh-degree: expected 0..{s.sh_degree} (the file's), got {sh_degree}")
            s = replace(s, sh=s.sh[:, : (sh_degree + 1) ** 2], layout=None)
        if default_layout or ascii_:
            layout = inria_layout(s.sh_degree, extra=s.extra)
            s = replace(s, layout=replace(layout, text=ascii_))
        dst.parent.mkdir(parents=True, exist_ok=True)
        save_ply(dst, s)
    except VolaryError as e:
        fail(str(e))
    console.print(f"{src} -> {dst}: {s.count} Gaussians, SH degree {s.sh_degree}", markup=False)


@splat_app.command("render")
def splat_render(
    scene: Annotated[str, typer.Argument(help="A .ply file or a scenario name (synthesized).")],
    out: Annotated[Path, typer.Option("--out", help="PNG to write (RGB).")] = Path("frame.png"),
    depth_out: Annotated[
        Path | None, typer.Option("--depth", help="Also write the expected depth (m) as .npy.")
    ] = None,
    look_at: Annotated[
        str | None,
        typer.Option(
            "--look-at",
            help="ex,ey,ez,tx,ty,tz (m, world); default: scenario start "
            "pose, or the PLY's bounding box seen from -x.",
        ),  # fmt: skip
    ] = None,
    width: Annotated[int, typer.Option("--width", help="px")] = 224,
    height: Annotated[int, typer.Option("--height", help="px")] = 224,
    hfov: Annotated[float, typer.Option("--hfov", help="Horizontal field of view, deg.")] = 90.0,
    backend: Annotated[
        str, typer.Option("--backend", help="auto, fast, reference, gsplat.")
    ] = "auto",
    device: Annotated[str, typer.Option("--device", help="cpu, cuda or cuda:N.")] = "cpu",
    brightness: Annotated[float, typer.Option("--brightness", help="Lighting factor.")] = 1.0,
    align: Align = None,
    seed: Seed = 0,
    max_gaussians: MaxG = None,
) -> None:
    """Render one RGB frame (and optionally its depth) of a splat scene."""
    import numpy as np
    import torch

    from volary.errors import VolaryError
    from volary.sensors.effects import brightness as scale
    from volary.sensors.splat import camera_poses, render
    from volary.sensors.splat.render import look_at as look

    if device != "cpu" and not device.startswith("cuda"):
        fail(f"--device: expected cpu, cuda or cuda:N, got {device!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        fail(f"--device {device}: no CUDA device is available")
    if not 1.0 <= hfov < 180.0:
        fail(f"--hfov: expected a value in [1, 180) deg, got {hfov}")
    if width < 1 or height < 1:
        fail(f"--width, --height: expected >= 1 px, got {width} x {height}")
    try:
        splats, spec = _load_scene(scene, seed, max_gaussians, align)
        if look_at is not None:
            v = _floats(look_at, 6, "--look-at")
            t_wc = look(v[:3], v[3:])[None]
        elif spec is not None:
            yaw = torch.tensor([spec.start_yaw])
            q = torch.stack((torch.cos(yaw / 2), 0 * yaw, 0 * yaw, torch.sin(yaw / 2)), -1)
            t_wc = camera_poses(torch.tensor([spec.start], dtype=torch.float64), q.double())
        else:
            lo, hi = splats.means.min(0).values.double(), splats.means.max(0).values.double()
            mid, ext = (lo + hi) / 2, (hi - lo)
            eye = mid - torch.tensor([0.75 * float(ext.max()), 0.0, 0.0], dtype=torch.float64)
            t_wc = look(eye.tolist(), mid.tolist())[None]
        f = (width / 2) / math.tan(math.radians(hfov) / 2)
        splats = splats.to(device)
        img = render(splats, (f, f, width / 2, height / 2), t_wc, width, height, backend=backend)
        rgb = scale(img.rgb, brightness)
    except VolaryError as e:
        fail(str(e))
    import cv2

    out.parent.mkdir(parents=True, exist_ok=True)
    arr = (rgb[0].clamp(0, 1) * 255.0 + 0.5).to(torch.uint8).cpu().numpy()
    if not cv2.imwrite(str(out), np.ascontiguousarray(arr[..., ::-1])):
        fail(f"--out: could not write {str(out)!r} (use a .png path)")
    if depth_out is not None:
        np.save(depth_out, img.depth[0].cpu().numpy())
    cover = float(img.alpha.mean())
    console.print(
        f"{splats.count} Gaussians, {width}x{height} px, {cover:.0%} covered -> {out}",
        highlight=False,
    )


# ---- volary sousvide ----------------------------------------------------------------------------
def _sv_device(device: str) -> None:
    import torch

    if device != "cpu" and device != "cuda" and not device.startswith("cuda:"):
        fail(f"--device: expected cpu, cuda or cuda:N, got {device!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        fail(f"--device {device}: no CUDA device is available")


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
    from volary.learning.sousvide.generate import GenerateConfig, generate

    _sv_device(device)
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
    from volary.learning.sousvide.train import TrainConfig, train_policy

    _sv_device(device)
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
    from volary.learning.sousvide.evaluate import (
        DISTURBANCES,
        PAPER_TABLE_II,
        EvalConfig,
        ExpertPolicy,
        evaluate,
        format_table,
        result_json,
        summarize,
    )
    from volary.learning.sousvide.scene import make_scene

    _sv_device(device)
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
            from volary.learning.sousvide.policy import SVPolicy

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
