"""Parse time of scene files: the hand-written readers of volary.worlds.io before the switch to
plyfile (taken from git) against the readers now, on a ~1 M-triangle mesh and 1 M points.

Run: ``.venv/bin/python benchmarks/scene_io.py`` (writes ``benchmarks/results/scene_io.json``,
or ``--out``, and prints a table). Needs git and the repository's history for the baseline.

Files: a 708 x 708 height-field grid (501,264 vertices, 999,698 triangles) written by volary's
own writers as binary PLY, ascii PLY, OBJ and binary STL, and 1,000,000 uniform points as binary
and ascii PCD, into a temporary folder. Timed: one call of the format's ``read_*`` function on
the file (page cache warm), old and new interleaved in every round, after one untimed round that
also checks that both return the same arrays; median and IQR of ``--repeats`` rounds of the
process CPU time (single-threaded readers; robust to other jobs on a shared machine), with the
wall time beside it. Candidate libraries evaluated and not adopted (trimesh for OBJ/STL, pypcd4
for PCD; see ``src/volary/worlds/DESIGN.md``) are timed beside them when importable, reading
the same file without the conversions volary does (no vertex merge for STL). numpy, OpenBLAS,
OpenMP and torch run on one thread.
"""

# ruff: noqa: E402  (the thread variables are set before numpy and torch are imported)
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy and torch load their thread pools

import argparse
import gc
import importlib.metadata
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from _timing import machine, summarize

from volary.bench.threads import one_thread
from volary.worlds import io as new_io

HERE = Path(__file__).resolve().parent

BASELINE = "d06313fe3afa1af093885fb9cd13a311397b1c2e"  # last commit with the hand PLY reader
GRID = 708  # vertices per side: 2 * 707^2 = 999,698 triangles
POINTS = 1_000_000


def baseline_module(commit: str) -> types.ModuleType:
    """volary.worlds.io as it was at ``commit``, imported from ``git show`` under another name."""
    src = subprocess.run(
        ["git", "-C", str(HERE.parent), "show", f"{commit}:src/volary/worlds/io.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    src = src.replace("from volary.worlds._stack import", "from volary.worlds.primitives import")
    mod = types.ModuleType("_volary_io_baseline")
    sys.modules[mod.__name__] = mod  # dataclasses look their module up
    exec(compile(src, f"{commit}:src/volary/worlds/io.py", "exec"), mod.__dict__)
    return mod


def grid_mesh(n: int = GRID) -> new_io.MeshScene:
    """A rolling height field: n x n vertices over 50 m x 50 m, two triangles per cell."""
    x, y = np.meshgrid(np.linspace(0, 50, n), np.linspace(0, 50, n), indexing="ij")
    v = np.stack([x, y, np.sin(x) * np.cos(y)], -1).reshape(-1, 3)
    i = (np.arange(n - 1)[:, None] * n + np.arange(n - 1)[None, :]).ravel()
    t = np.vstack([np.stack([i, i + n, i + n + 1], 1), np.stack([i, i + n + 1, i + 1], 1)])
    return new_io.MeshScene(v, t, "grid")


def write_files(folder: Path) -> dict[str, Path]:
    mesh = grid_mesh()
    pts = np.random.default_rng(0).uniform(-50, 50, (POINTS, 3))
    files = {
        "PLY binary": folder / "mesh_bin.ply",
        "PLY ascii": folder / "mesh_ascii.ply",
        "OBJ": folder / "mesh.obj",
        "STL binary": folder / "mesh.stl",
        "PCD binary": folder / "points_bin.pcd",
        "PCD ascii": folder / "points_ascii.pcd",
    }
    new_io.write_ply(files["PLY binary"], mesh, binary=True)
    new_io.write_ply(files["PLY ascii"], mesh, binary=False)
    new_io.write_obj(files["OBJ"], mesh)
    new_io.write_stl(files["STL binary"], mesh)
    new_io.write_pcd(files["PCD binary"], pts, binary=True)
    new_io.write_pcd(files["PCD ascii"], pts, binary=False)
    return files


def reader(mod: types.ModuleType, fmt: str) -> Callable:
    return getattr(mod, "read_" + fmt.split()[0].lower())


def candidates() -> dict[str, tuple[str, Callable]]:
    """Libraries evaluated for OBJ/STL/PCD and not adopted, when importable."""
    out: dict[str, tuple[str, Callable]] = {}
    try:
        import trimesh

        def tri(p: Path):
            kw = dict(skip_materials=True, group_material=False, maintain_order=True)
            return trimesh.load(str(p), process=False, force="mesh", **kw)

        out["OBJ"] = out["STL binary"] = (f"trimesh {trimesh.__version__}", tri)
    except ImportError:
        pass
    try:
        from pypcd4 import PointCloud

        name = f"pypcd4 {importlib.metadata.version('pypcd4')}"
        for fmt in ("PCD binary", "PCD ascii"):
            out[fmt] = (name, lambda p: PointCloud.from_path(p).numpy(("x", "y", "z")))
    except ImportError:
        pass
    return out


def same_arrays(fmt: str, old, new) -> bool:
    """Exact equality; ascii PLY floats compare after rounding the old float64 text value to the
    declared float32 (the new reader returns the declared type, as both did for binary)."""
    old_v, old_t = (old, None) if isinstance(old, np.ndarray) else old
    new_v, new_t = (new, None) if isinstance(new, np.ndarray) else new
    if fmt == "PLY ascii":
        old_v = old_v.astype(np.float32).astype(float)
    same_t = (old_t is None and new_t is None) or np.array_equal(old_t, new_t)
    return bool(np.array_equal(old_v, new_v) and same_t)


def timed(fn: Callable, path: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one call."""
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    fn(path)
    return time.perf_counter() - t0, time.process_time() - c0


def summary(times: list[tuple[float, float]], label: str) -> dict:
    """CPU seconds (the figure compared; its spread warned on) and wall seconds per round."""
    wall, cpu = [t[0] for t in times], [t[1] for t in times]
    t = summarize(cpu, label=f"{label} (CPU s)")
    return {
        "cpu_median_s": t.median,
        "cpu_iqr_s": t.iqr,
        "wall_median_s": statistics.median(wall),
        "cpu_s": cpu,
        "wall_s": wall,
        "cpu_spread": t.spread,
        "spread_warning": t.warning,
    }


def run(repeats: int, baseline: str) -> dict:
    load_start = os.getloadavg()
    host = machine()
    old_io = baseline_module(baseline)
    peers = candidates()
    with tempfile.TemporaryDirectory() as tmp:
        files = write_files(Path(tmp))
        impls = {fmt: {"old": reader(old_io, fmt), "new": reader(new_io, fmt)} for fmt in files}
        for fmt, (_, fn) in peers.items():
            impls[fmt]["candidate"] = fn
        identical = {
            fmt: same_arrays(fmt, reader(old_io, fmt)(p), reader(new_io, fmt)(p))
            for fmt, p in files.items()
        }  # also the warm-up round for old and new
        for fmt, (_, fn) in peers.items():
            fn(files[fmt])
        times: dict[str, dict[str, list]] = {f: {k: [] for k in impls[f]} for f in files}
        for r in range(repeats):
            for fmt, path in files.items():
                order = list(impls[fmt]) if r % 2 == 0 else list(reversed(impls[fmt]))
                for key in order:
                    times[fmt][key].append(timed(impls[fmt][key], path))
            print(f"round {r + 1}/{repeats} done", file=sys.stderr)
        rows = []
        for fmt, path in files.items():
            old = summary(times[fmt]["old"], f"{fmt} old")
            new = summary(times[fmt]["new"], f"{fmt} new")
            row = {
                "format": fmt,
                "file_mb": path.stat().st_size / 1e6,
                "old": old,
                "new": new,
                "new_over_old_cpu": new["cpu_median_s"] / old["cpu_median_s"],
                "new_over_old_wall": new["wall_median_s"] / old["wall_median_s"],
                "identical_arrays": identical[fmt],
                "new_reader": "plyfile" if fmt.startswith("PLY") else "unchanged hand parser",
            }
            if "candidate" in times[fmt]:
                cand = summary(times[fmt]["candidate"], f"{fmt} {peers[fmt][0]}")
                row["candidate"] = {"library": peers[fmt][0]} | cand
            rows.append(row)
    mesh = grid_mesh()
    return {
        "benchmark": "scene file parse time, hand parsers (baseline) vs plyfile / current readers",
        "baseline_commit": baseline,
        "mesh": {"vertices": len(mesh.vertices), "triangles": len(mesh.triangles)},
        "points": POINTS,
        "repeats": repeats,
        "machine": {
            **host,
            "platform": platform.platform(),
            "plyfile": importlib.metadata.version("plyfile"),
            "torch_threads": torch.get_num_threads(),
            "load_average_1_5_15_min_at_start": load_start,
            "load_average_1_5_15_min_at_end": os.getloadavg(),
        },
        "rows": rows,
    }


def print_table(result: dict) -> None:
    """Median CPU seconds (wall in brackets) per read."""
    print("| format | file | before (hand) | after | after / before | same arrays | candidate |")
    print("|---|---:|---:|---:|---:|:---:|---|")
    for r in result["rows"]:
        old, new, cand = r["old"], r["new"], r.get("candidate")
        note = f"{cand['library']}: {cand['cpu_median_s']:.2f} s" if cand else ""
        print(
            f"| {r['format']} ({r['new_reader']}) | {r['file_mb']:.0f} MB "
            f"| {old['cpu_median_s']:.2f} s ({old['wall_median_s']:.2f}) "
            f"| {new['cpu_median_s']:.2f} s ({new['wall_median_s']:.2f}) "
            f"| {r['new_over_old_cpu']:.2f}x | {'yes' if r['identical_arrays'] else 'NO'} "
            f"| {note} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE / "results" / "scene_io.json")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--baseline", default=BASELINE, help="commit of the old readers")
    args = ap.parse_args()
    with one_thread():
        result = run(args.repeats, args.baseline)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print_table(result)


if __name__ == "__main__":
    main()
