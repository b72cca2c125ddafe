"""Why do per-image-normalized SV-Nets lose the walking-people case? Two diagnostics.

``oracle``: fly the ``dynamic`` disturbance twice per checkpoint, as usual and with the net
standardizing each frame by the channel statistics of the *same frame rendered without the
people* (an oracle no real policy has). If the oracle run succeeds where the usual one fails,
the people hurt through the image statistics they shift, not through what they cover.

``screen``: along the reference trajectory (20 Hz, 15 s) render each frame clean, with the
people, and at 40 % lighting, and measure for several normalizations how far the people move
the *background* pixels and how far the lighting moves all pixels, in units of the normalized
clean image's own spread (mean absolute deviation from its channel means).

    .venv/bin/python experiments/sousvide/normalization/run.py oracle \\
        --ckpt s0=out/sv/ablation-imgnorm/per_image/svnet.pt \\
        --ckpt s1=out/sv/ablation-imgnorm/per_image-seed1/svnet.pt
    .venv/bin/python experiments/sousvide/normalization/run.py screen

Both write JSON under ``--out`` (default ``experiments/sousvide/normalization/results/``). The
oracle patches the evaluator's renderer and the net's ``preprocess_image`` inside this process
only (diagnostic, not a library feature).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

OUT = Path(__file__).resolve().parent / "results"


def _u8(rgb: Tensor) -> Tensor:
    return (rgb.clamp(0, 1) * 255).round().to(torch.uint8)


def _std_norm(x: Tensor, stats_from: Tensor) -> Tensor:
    """(x - mean) / std with the channel statistics of ``stats_from`` (as net.py's per_image)."""
    from volary.studies.sousvide.net import IMAGE_NORM_EPS

    mean = stats_from.mean(dim=(-2, -1), keepdim=True)
    std = stats_from.std(dim=(-2, -1), keepdim=True, unbiased=False).clamp_min(IMAGE_NORM_EPS)
    return (x - mean) / std


def oracle(ckpts: list[str], trials: int, out: Path) -> dict:
    from volary.studies.sousvide import evaluate as ev
    from volary.studies.sousvide.policy import SVPolicy
    from volary.studies.sousvide.scene import SousVideScene, make_scene

    stash: dict[str, object] = {}
    scene_at, render = ev.MovingPeople.scene_at, SousVideScene.render

    def scene_at_and_keep(self, splats, t):  # type: ignore[no-untyped-def]
        stash["clean_splats"] = splats
        return scene_at(self, splats, t)

    def render_both(self, pos, quat, splats=None, backend="auto"):  # type: ignore[no-untyped-def]
        clean = stash.get("clean_splats")
        if clean is not None and splats is not None and splats is not clean:
            stash["clean_img"] = _u8(render(self, pos, quat, clean, backend))
        return render(self, pos, quat, splats, backend)

    ev.MovingPeople.scene_at = scene_at_and_keep  # type: ignore[method-assign]
    SousVideScene.render = render_both  # type: ignore[method-assign]

    def oracle_pre(net) -> Callable[[Tensor], Tensor]:  # type: ignore[no-untyped-def]
        def pre(image: Tensor) -> Tensor:
            x = image.permute(0, 3, 1, 2).to(net.obs_mean.dtype) / 255.0
            c = stash["clean_img"].permute(0, 3, 1, 2).to(x.dtype) / 255.0  # type: ignore[union-attr]
            return _std_norm(x, c)

        return pre

    scene = make_scene()
    res: dict[str, dict] = {}
    for spec in ckpts:
        label, path = spec.split("=", 1)
        for mode in ("usual", "oracle"):
            stash.clear()
            pol = SVPolicy.load(path)
            if pol.net.config.arch.image_norm != "per_image":
                raise SystemExit(f"{path}: not a per_image net")
            if mode == "oracle":
                pol.net.preprocess_image = oracle_pre(pol.net)  # type: ignore[method-assign]
            t0 = time.perf_counter()
            cfg = ev.EvalConfig(disturbance="dynamic", trials=trials, seed=0)
            r = ev.result_json(ev.evaluate(pol, cfg, scene=scene))["summary"]
            res[f"{label}/{mode}"] = {"checkpoint": path, **r}
            print(f"{label:10s} {mode:6s} {r['success']}/{r['trials']} successes, "
                  f"{r['off_course']} off course, error {r['tracking_error']:.3f} m "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
    _write(out / "oracle.json", res)
    return res


def _frames() -> tuple[Tensor, Tensor, Tensor]:
    """(F, 3, H, W) float frames along the reference: clean, with people, at 40 % lighting."""
    from volary.math.quaternion import quat_from_euler
    from volary.sensors.effects import brightness
    from volary.studies.sousvide.evaluate import MovingPeople
    from volary.studies.sousvide.scene import make_scene

    sc, people = make_scene(), MovingPeople()
    ts = torch.arange(0, sc.duration, 0.05, dtype=torch.float64)
    ref = sc.trajectory.evaluate(ts)
    pos, z = ref.pos.float(), torch.zeros_like(ref.yaw)
    quat = quat_from_euler(z, z, ref.yaw).float()
    clean = sc.render(pos, quat)
    light = brightness(clean, 0.4)
    ppl = torch.cat([
        sc.render(pos[k : k + 1], quat[k : k + 1], people.scene_at(sc.splats, t))
        for k, t in enumerate(ts.tolist())
    ])  # fmt: skip
    return tuple(_u8(x).permute(0, 3, 1, 2).float() / 255 for x in (clean, ppl, light))  # type: ignore[return-value]


def _q(x: Tensor, p: float) -> Tensor:
    return x.flatten(2).quantile(p, dim=-1)[..., None, None]


def _iqr_sigma(x: Tensor) -> Tensor:
    return (_q(x, 0.75) - _q(x, 0.25)) / 1.349  # the std of a normal with that IQR


NORMS: dict[str, Callable[[Tensor], Tensor]] = {
    "none (dataset norm: a fixed affine map)": lambda x: x,
    "mean/std (per_image)": lambda x: _std_norm(x, x),
    "median/IQR": lambda x: (x - _q(x, 0.5)) / _iqr_sigma(x).clamp_min(1e-3),
    "x / channel mean": lambda x: x / x.mean(dim=(-2, -1), keepdim=True).clamp_min(1e-3),
    "x / channel median": lambda x: x / _q(x, 0.5).clamp_min(1e-3),
    "x / luminance median": lambda x: x / _q(x.mean(1, keepdim=True), 0.5).clamp_min(1e-3),
}


def screen(out: Path) -> dict:
    clean, ppl, light = _frames()
    mask = (ppl - clean).abs().amax(1, keepdim=True) > 1.5 / 255  # pixels a person changes
    cover = mask.float().mean((1, 2, 3))
    seen = torch.nonzero(cover > 0.005).flatten()
    res: dict[str, object] = {
        "frames": len(clean),
        "frames_with_people": len(seen),
        "people_cover_median": float(cover[seen].median()),
        "people_cover_max": float(cover.max()),
        "norms": {},
    }
    print(f"{len(clean)} frames, people in {len(seen)}, covering a median "
          f"{100 * res['people_cover_median']:.1f} % (max {100 * res['people_cover_max']:.0f} %)")  # type: ignore[operator]  # fmt: skip
    for name, f in NORMS.items():
        c, p, li = f(clean), f(ppl), f(light)
        spread = (c - c.mean((2, 3), keepdim=True)).abs().mean()
        bg = ~mask.expand_as(c)
        per = torch.stack([(p[i] - c[i]).abs()[bg[i]].mean() for i in seen]) / spread
        row = {
            "background_shift_mean": float(per.mean()),
            "background_shift_p95": float(per.quantile(0.95)),
            "lighting_shift_mean": float((li - c).abs().mean() / spread),
        }
        res["norms"][name] = row  # type: ignore[index]
        print(f"{name:40s} people move the background {row['background_shift_mean']:.3f} "
              f"(p95 {row['background_shift_p95']:.3f}); 40 % lighting moves it "
              f"{row['lighting_shift_mean']:.3f}")  # fmt: skip
    _write(out / "norm_screen.json", res)
    return res


def _write(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("oracle", "screen"))
    ap.add_argument("--ckpt", action="append", default=[], help="oracle: LABEL=CHECKPOINT.pt")
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    if args.what == "oracle":
        if not args.ckpt:
            ap.error("oracle: give at least one --ckpt LABEL=CHECKPOINT.pt")
        oracle(args.ckpt, args.trials, args.out)
    else:
        screen(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
