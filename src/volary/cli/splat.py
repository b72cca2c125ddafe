"""``volary splat``: Gaussian-splat scenes (``volary sousvide`` is the SOUS VIDE study's,
:mod:`volary.studies.sousvide.cli`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from volary.cli.checks import VolaryGroup
from volary.options import SetOption, configure, console, fail

splat_app = typer.Typer(
    name="splat",
    cls=VolaryGroup,
    no_args_is_help=True,
    help="Gaussian-splat scenes: render, convert, synth.",
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
