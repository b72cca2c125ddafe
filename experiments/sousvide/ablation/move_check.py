"""Do the SOUS VIDE sub-studies' code paths give the same bits at two commits? (issue 60)

The sub-studies (``results/history-actions/``, ``latent-width/``, ``image-norm/`` and
``../normalization/``) each train SV-Nets with their own options, then evaluate, compare and
probe them. Re-flying them at full budget takes hours per commit; this runs every option they
use on a small budget instead, so two checkouts can be compared bit for bit:

- ``run OUT``: with the checkout's ``src`` on ``PYTHONPATH`` and its root as the working
  directory, generate a 480-row dataset (``volary sousvide generate --n-des 3 --n-smp 4``),
  train each sub-study's configuration (commands in the RMA history, latent 4 / 8 / 16, seeds
  1 and 2, per-image or dataset normalization, brightness jitter, random erasing) for 30
  stage-1 and 8 stage-2 steps, evaluate each (one trial per case), then ``compare``,
  ``probe`` and the normalization study's ``screen`` and ``oracle``, each through the
  checkout's own scripts (found at their path before or after the move).
- ``compare A B``: every file of two ``run`` folders: checkpoints tensor by tensor, HDF5
  datasets array by array, JSON and tables equal once the machine's timings (``wall_s``,
  ``samples_per_s``) and the folders' own paths are set aside. Exits 1 when anything differs.

    cd CHECKOUT && PYTHONPATH=src python experiments/sousvide/ablation/move_check.py run OUT
    python experiments/sousvide/ablation/move_check.py compare OUT_BEFORE OUT_AFTER

The trained nets are far too small to fly (they crash); the check is that every step computes
the same numbers, not what they are.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# each sub-study's training options (their table.md commands), keyed by a folder name
RUNS: dict[str, dict[str, Any]] = {
    "history-actions-svnet": {"variant": "svnet", "latent": None, "norm": "dataset"},
    "history-actions-no_latent": {"variant": "no_latent", "latent": None, "norm": "dataset"},
    "latent4": {"variant": "svnet", "latent": 4, "norm": "dataset"},
    "latent8-seed1": {"variant": "svnet", "latent": 8, "norm": "dataset", "seed": 1},
    "latent16": {"variant": "svnet", "latent": 16, "norm": "dataset"},
    "per_image": {"variant": "svnet", "latent": 8, "norm": "per_image"},
    "per_image-augment": {"variant": "svnet", "latent": 8, "norm": "per_image", "augment": True},
    "dataset-augment-seed2": {
        "variant": "svnet", "latent": 8, "norm": "dataset", "augment": True, "seed": 2,
    },
    "per_image-occlusion": {"variant": "svnet", "latent": 8, "norm": "per_image", "occlusion": 0.5},
}  # fmt: skip
# the scripts at their path after the move, then before it
SCRIPTS = {
    "ablation": ("experiments/sousvide/ablation/run.py", "benchmarks/sousvide_ablation.py"),
    "norm": (
        "experiments/sousvide/normalization/run.py",
        "benchmarks/sousvide_norm_diagnostics.py",
    ),
}


def _script(name: str) -> str:
    for path in SCRIPTS[name]:
        if Path(path).is_file():
            return path
    raise SystemExit(
        f"run: no {name} script here ({' or '.join(SCRIPTS[name])}); run from a checkout"
    )


def _call(args: list[str]) -> None:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True)
    print(f"  {' '.join(args)[:120]}: {time.perf_counter() - t0:.0f} s", flush=True)


def _sousvide(module: str) -> Any:
    """``volary.studies.sousvide.MODULE``, or where it was before the move (this tool runs in
    checkouts from both sides of it; at and after the move the first path is the one taken)."""
    import importlib

    for package in ("volary.studies.sousvide", "volary.learning.sousvide"):
        try:
            return importlib.import_module(f"{package}.{module}")
        except ModuleNotFoundError:
            continue
    raise SystemExit("run: no volary SOUS VIDE package on the path (PYTHONPATH=CHECKOUT/src)")


def _train(data: Path, out: Path) -> None:
    ArchConfig = _sousvide("net").ArchConfig
    train = _sousvide("train")
    for name, r in RUNS.items():
        if (out / name / f"{r['variant']}.pt").exists():
            continue
        cfg = train.TrainConfig(
            variant=r["variant"], lr=3e-4, stage1_epochs=2, stage1_max_steps=30,
            stage2_epochs=1, stage2_max_steps=8, seed=r.get("seed", 0), threads=1,
            arch=ArchConfig(cnn_width=0.5, image_norm=r["norm"]), history_actions=True,
            latent=r["latent"], augment=r.get("augment", False),
            occlusion=r.get("occlusion", 0.0),
        )  # fmt: skip
        train.train_policy(data, out / name, r["variant"], cfg)
        print(f"trained {name}", flush=True)


def run(out: Path) -> None:
    """Generate, train, evaluate, compare, probe, screen and oracle into ``out``."""
    import torch

    torch.set_num_threads(1)
    ablation, norm = _script("ablation"), _script("norm")
    out.mkdir(parents=True, exist_ok=True)
    data = out / "data.h5"
    if not data.exists():
        cli = "import sys; from volary.cli.main import main; sys.argv[0] = 'volary'; main()"
        _call(["-c", cli, "sousvide", "generate", "--out", str(data), "--n-des", "3",
               "--n-smp", "4", "--envs", "8"])  # fmt: skip
    _train(data, out)
    for name, r in RUNS.items():
        if not (out / name / "results.json").exists():
            _call([ablation, "eval", "--out", str(out / name), "--variants", r["variant"],
                   "--trials", "1"])  # fmt: skip
    _call([ablation, "compare", "--out", str(out / "compare"),
           "--row", f"a={out}/latent4/results.json:svnet",
           "--row", f"b={out}/per_image/results.json:svnet"])  # fmt: skip
    _call([ablation, "probe", "--out", str(out / "probe"), "--data", str(data),
           "--row", f"l4={out}/latent4/svnet.pt",
           "--row", f"l16={out}/latent16/svnet.pt"])  # fmt: skip
    _call([norm, "screen", "--out", str(out / "norm")])
    _call([norm, "oracle", "--trials", "1", "--out", str(out / "norm"),
           "--ckpt", f"p={out}/per_image/svnet.pt"])  # fmt: skip


def _tensors(obj: Any, at: str = "") -> dict[str, Any]:
    import torch

    if isinstance(obj, torch.Tensor):
        return {at: obj}
    items = (
        obj.items()
        if isinstance(obj, dict)
        else enumerate(obj)
        if isinstance(obj, list | tuple)
        else ()
    )
    return {k: v for key, val in items for k, v in _tensors(val, f"{at}/{key}").items()}


def _text(path: Path, root: Path) -> str:
    """A JSON or text file with the machine's timings (wall_s, samples_per_s) zeroed and the
    run folder's own path removed."""
    text = path.read_text().replace(str(root.resolve()), "RUN").replace(str(root), "RUN")
    return re.sub(r'"(wall_s|samples_per_s)": [-0-9.eE+]+', r'"\1": 0', text)


def same_file(a: Path, b: Path, root_a: Path, root_b: Path) -> bool:
    """Whether two files of a run hold the same numbers (module docstring)."""
    if a.suffix == ".pt":
        import torch

        ta = _tensors(torch.load(a, map_location="cpu", weights_only=False))
        tb = _tensors(torch.load(b, map_location="cpu", weights_only=False))
        return ta.keys() == tb.keys() and all(torch.equal(ta[k], tb[k]) for k in ta)
    if a.suffix == ".h5":
        import h5py
        import numpy as np

        with h5py.File(a) as x, h5py.File(b) as y:
            sets = _datasets(x)
            if sorted(sets) != sorted(_datasets(y)):
                return False
            return all(np.array_equal(x[n][()], y[n][()], equal_nan=x[n].dtype.kind == "f")
                       for n in sets)  # fmt: skip
    if a.suffix in (".json", ".md", ".csv", ".txt"):
        return _text(a, root_a) == _text(b, root_b)
    return a.read_bytes() == b.read_bytes()


def _datasets(f: Any) -> list[str]:
    """The paths of an open HDF5 file's datasets."""
    import h5py

    names: list[str] = []
    f.visit(names.append)
    return [n for n in names if isinstance(f[n], h5py.Dataset)]


def compare(a: Path, b: Path) -> int:
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    others = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    differ = [str(p) for p in sorted(set(files) ^ set(others))]
    for rel in files:
        if (b / rel).is_file() and not same_file(a / rel, b / rel, a, b):
            differ.append(str(rel))
    print(f"{len(files)} files, {len(differ)} differ" + "".join(f"\n  {d}" for d in differ))
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("run", "compare"))
    ap.add_argument("paths", nargs="+", type=Path, help="run: OUT; compare: A B")
    args = ap.parse_args(argv)
    if args.what == "run":
        if len(args.paths) != 1:
            ap.error("run: give one OUT folder")
        run(args.paths[0])
        return 0
    if len(args.paths) != 2:
        ap.error("compare: give two run folders")
    return compare(*args.paths)


if __name__ == "__main__":
    raise SystemExit(main())
