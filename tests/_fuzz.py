"""A fuzz harness for volary's readers: mutations of files volary itself writes.

Seeds (a mesh, a point cloud, Gaussian splats, a suite TOML, ``--set`` override lines, a run
database, a checkpoint) are
written by volary's own writers; each input is a seeded mutation of one (byte flips,
truncation, appended garbage, a number replaced by an extreme one, a header count changed, a
line deleted or doubled, rich markup in names). Each input is read by the matching reader in a
worker process with a 2 GiB address-space limit and a 10 s deadline; the outcome is one of:

- ``clean``: the reader raised a ``VolaryError`` (``FileFormatError``, ``ConfigError``, ...);
- ``valid``: it returned something that passes the reader's invariants (finite vertices,
  triangle indices in range, finite splats, ...);
- ``wrong``: it returned something that breaks them (a silent wrong acceptance);
- ``traceback``: any other exception; ``hang``: no answer within the deadline.

    python tests/_fuzz.py --n 10000 --out benchmarks/results/fuzz_readers.json

``tests/test_fuzz_readers.py`` runs a short sweep in the default tests and 10,000 inputs as a
slow test.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

DEADLINE_S = 10.0
MEMORY_LIMIT = 2 * 2**30
EXTREMES = [b"nan", b"inf", b"-inf", b"1e39", b"-1", b"9223372036854775808", b"1e-300",
            b"1_000", b"0x10", b"", b"1e308", b"-0", b"4294967296"]  # fmt: skip
SUITE = """name = "fuzz"
platforms = ["0.60kg-EMAX", "1.00kg-SunnySky"]
scenarios = ["forest", "urban"]
configs = [0, 1]
trials_per_config = 2
max_envs = 36

[settings]
time_limit = 90.0
speed_cap = 4.0
goal_radius = 2.0
planner_rate_hz = 10.0
"""


OVERRIDES = """settings.time_limit=60
settings.speed_cap=3.5
trials_per_config=2
max_envs=12
settings.planner_rate_hz=20
"""


# ---- seeds -----------------------------------------------------------------------------------
def write_seeds(folder: Path) -> dict[str, Path]:
    """The seed files, each named by the reader that takes it."""
    import torch

    from volary.learning.checkpoint import write_checkpoint
    from volary.sensors.splat import GaussianSplats, save_ply
    from volary.studies.flyingtrust.db import RunDB
    from volary.studies.flyingtrust.schema import TrialResult, WorkUnit
    from volary.studies.rl.ppo import CHECKPOINT_KIND
    from volary.worlds.io import (
        MeshScene,
        PointCloud,
        box_mesh,
        write_obj,
        write_pcd,
        write_ply,
        write_stl,
    )
    from volary.worlds.primitives import Box

    folder.mkdir(parents=True, exist_ok=True)
    v, t = box_mesh(Box((0.0, 0.0, 1.0), (1.0, 2.0, 0.5), 0.3))
    mesh = MeshScene(v, t)
    rng = np.random.default_rng(0)
    pts = PointCloud(rng.normal(size=(24, 3)))
    seeds = {
        "mesh_ply_ascii.ply": lambda p: write_ply(p, mesh),
        "mesh_ply_binary.ply": lambda p: write_ply(p, mesh, binary=True),
        "mesh.obj": lambda p: write_obj(p, mesh),
        "mesh.stl": lambda p: write_stl(p, mesh),
        "points_ascii.pcd": lambda p: write_pcd(p, pts.points),
        "points_binary.pcd": lambda p: write_pcd(p, pts.points, binary=True),
        "points_ply.ply": lambda p: write_ply(p, pts),
    }
    out = {}
    for name, write in seeds.items():
        p = folder / name
        write(p)
        out[name] = p
    stl = folder / "mesh_ascii.stl"  # volary writes binary STL; its reader takes ascii too
    tri = v[t]
    stl.write_text("solid fuzz\n" + "".join(
        "facet normal 0 0 1\nouter loop\n" + "".join(f"vertex {a:g} {b:g} {c:g}\n" for a, b, c in f)
        + "endloop\nendfacet\n" for f in tri) + "endsolid fuzz\n")  # fmt: skip
    out["mesh_ascii.stl"] = stl
    g = 16
    splats = GaussianSplats(
        torch.randn(g, 3, generator=torch.Generator().manual_seed(0)),
        torch.tensor([[1.0, 0.0, 0.0, 0.0]]).repeat(g, 1),
        torch.full((g, 3), -2.0),
        torch.zeros(g),
        torch.rand(g, 1, 3, generator=torch.Generator().manual_seed(1)),
    )
    save_ply(folder / "splats.ply", splats)
    out["splats.ply"] = folder / "splats.ply"
    (folder / "suite.toml").write_text(SUITE)
    out["suite.toml"] = folder / "suite.toml"
    (folder / "overrides.txt").write_text(OVERRIDES)
    out["overrides.txt"] = folder / "overrides.txt"
    unit = WorkUnit("straight", "forest", 0, 0, ("0.60kg-EMAX",), 0)
    db = RunDB.create(folder / "run.sqlite", {"seed": 0, "algos": ["straight"], "suite": {},
                                             "algo_options": {}}, [unit])  # fmt: skip
    db.write_unit(0, [TrialResult("straight", "0.60kg-EMAX", "forest", 0, 0, 0, True,
                                  "success", 12.0, 14.0, 40.0, 2.9)])  # fmt: skip
    db.close()
    out["run.sqlite"] = folder / "run.sqlite"
    net = torch.nn.Linear(3, 2)
    write_checkpoint(folder / "policy.pt", CHECKPOINT_KIND,
                     {f: {k: t.clone() for k, t in net.state_dict().items()} if f == "state_dict"
                      else {} for f in CHECKPOINT_KIND.fields})  # fmt: skip
    out["policy.pt"] = folder / "policy.pt"
    return out


# ---- mutations -------------------------------------------------------------------------------
_NUMBER = re.compile(rb"-?\d+(\.\d+)?(e-?\d+)?")
_COUNT = re.compile(rb"(element \w+ |POINTS |WIDTH |trials_per_config = |max_envs = )(\d+)")


def mutate(data: bytes, rng: np.random.Generator) -> tuple[bytes, str]:
    """One seeded mutation of ``data`` and its name."""
    kind = int(rng.integers(9))
    b = bytearray(data)
    if kind == 0 and b:  # byte flips
        for _ in range(int(rng.integers(1, 9))):
            i = int(rng.integers(len(b)))
            b[i] = int(rng.integers(256))
        return bytes(b), "flip"
    if kind == 1:  # truncation
        return bytes(b[: int(rng.integers(len(b) + 1))]), "truncate"
    if kind == 2:  # garbage appended
        tail = rng.bytes(int(rng.integers(1, 64))) if rng.random() < 0.5 else b"\n1 2 3\nx y\n"
        return bytes(b) + tail, "append"
    if kind in (3, 4):  # a number replaced by an extreme one
        nums = list(_NUMBER.finditer(data))
        if nums:
            m = nums[int(rng.integers(len(nums)))]
            new = EXTREMES[int(rng.integers(len(EXTREMES)))]
            return data[: m.start()] + new + data[m.end():], "number"  # fmt: skip
    if kind == 5:  # a declared count changed
        counts = list(_COUNT.finditer(data))
        if counts:
            m = counts[int(rng.integers(len(counts)))]
            new = [b"0", b"-3", b"1000000000000", b"9223372036854775808", b"1e39", b"2147483648"]
            val = new[int(rng.integers(len(new)))]
            return data[: m.start(2)] + val + data[m.end(2):], "count"  # fmt: skip
    lines = data.split(b"\n")
    if kind == 6 and len(lines) > 1:  # a line deleted
        del lines[int(rng.integers(len(lines)))]
        return b"\n".join(lines), "delete-line"
    if kind == 7 and len(lines) > 1:  # a line doubled
        i = int(rng.integers(len(lines)))
        lines.insert(i, lines[i])
        return b"\n".join(lines), "double-line"
    if kind == 8:  # rich markup where a name goes
        return data.replace(b'"fuzz"', b'"[/red][bold]x"'), "markup"
    return bytes(b), "none"


# ---- reading, in a worker --------------------------------------------------------------------
def _read(path: Path, seed_name: str) -> str:
    """Read ``path`` with the reader of ``seed_name``; 'valid' / 'wrong: why' (or raises)."""
    if seed_name.startswith("mesh"):
        from volary.worlds.io import load_mesh

        m = load_mesh(path)
        v, t = np.asarray(m.vertices), np.asarray(m.triangles)
        if v.ndim != 2 or v.shape[1] != 3 or not np.isfinite(v).all():
            return "wrong: non-finite or misshapen vertices"
        if t.size and (t.ndim != 2 or t.shape[1] != 3 or t.min() < 0 or t.max() >= len(v)):
            return "wrong: triangle indices out of range"
        return "valid"
    if seed_name.startswith("points"):
        from volary.worlds.io import load_points

        p = np.asarray(load_points(path).points)
        if p.ndim != 2 or p.shape[1] != 3 or np.isinf(p).any():
            return "wrong: infinite or misshapen points"
        return "valid"
    if seed_name == "splats.ply":
        import torch

        from volary.sensors.splat import load_ply

        s = load_ply(path)
        core = (s.means, s.quats, s.log_scales, s.opacity_logits, s.sh)
        if not all(bool(torch.isfinite(x).all()) for x in core):
            return "wrong: non-finite splats"
        return "valid"
    if seed_name == "overrides.txt":  # `--set FIELD=VALUE` lines on a suite (volary.config)
        from volary.config import apply_overrides
        from volary.studies.flyingtrust.protocol import get_suite

        lines = path.read_bytes().decode("utf-8", errors="replace").splitlines()
        apply_overrides(get_suite("quick"), [ln for ln in lines if ln.strip()])
        return "valid"
    if seed_name == "suite.toml":
        from volary.studies.flyingtrust.protocol import get_suite

        get_suite(str(path))  # the constructor checks every field and range
        return "valid"
    if seed_name == "run.sqlite":
        from volary.studies.flyingtrust.db import load_results

        load_results(path)
        return "valid"
    if seed_name == "policy.pt":
        from volary.learning.checkpoint import read_checkpoint
        from volary.studies.rl.ppo import CHECKPOINT_KIND

        read_checkpoint(path, CHECKPOINT_KIND)
        return "valid"
    raise ValueError(seed_name)


def _worker(conn: Any) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    from volary.errors import VolaryError

    while True:
        job = conn.recv()
        if job is None:
            return
        path, seed_name = job
        try:
            out = _read(Path(path), seed_name)
            conn.send(("valid", "") if out == "valid" else ("wrong", out))
        except VolaryError as e:
            conn.send(("clean", str(e)[:200]))
        except BaseException as e:  # noqa: BLE001 - the point: anything else is a finding
            conn.send(("traceback", f"{type(e).__name__}: {str(e)[:200]}"))


class _Reader:
    """A worker process; restarted after a hang or a crash."""

    def __init__(self) -> None:
        self.proc: Any = None

    def start(self) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()

    def read(self, path: Path, seed_name: str) -> tuple[str, str]:
        if self.proc is None or not self.proc.is_alive():
            self.start()
        self.conn.send((str(path), seed_name))
        if not self.conn.poll(DEADLINE_S):
            self.proc.kill()
            self.proc.join()
            self.proc = None
            return "hang", f"no answer in {DEADLINE_S:g} s"
        try:
            return self.conn.recv()
        except EOFError:  # the worker died (a crash, the memory limit)
            self.proc = None
            return "traceback", "the reader's process died"

    def close(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.conn.send(None)
            self.proc.join(5)


def run(n: int, folder: Path, seed: int = 0) -> dict[str, Any]:
    """``n`` mutated inputs over every seed; outcome counts overall and per reader, and the
    findings (every input that was not clean or valid)."""
    seeds = write_seeds(folder / "seeds")
    names = sorted(seeds)
    data = {k: seeds[k].read_bytes() for k in names}
    rng = np.random.default_rng(seed)
    reader = _Reader()
    counts: Counter = Counter()
    per: dict[str, Counter] = {k: Counter() for k in names}
    findings = []
    work = folder / "inputs"
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        for i in range(n):
            name = names[i % len(names)]
            blob, how = mutate(data[name], rng)
            path = work / f"{i % 64}-{name}"
            path.unlink(missing_ok=True)
            path.write_bytes(blob)
            outcome, detail = reader.read(path, name)
            counts[outcome] += 1
            per[name][outcome] += 1
            if outcome not in ("clean", "valid"):
                keep = folder / "findings" / f"{i}-{name}"
                keep.parent.mkdir(exist_ok=True)
                keep.write_bytes(blob)
                findings.append({"input": i, "seed": name, "mutation": how, "outcome": outcome,
                                 "detail": detail, "file": str(keep)})  # fmt: skip
    finally:
        reader.close()
    return {
        "inputs": n,
        "seconds": time.perf_counter() - t0,
        "outcomes": dict(counts),
        "per_reader": {k: dict(v) for k, v in per.items()},
        "findings": findings,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=Path("out/fuzz"))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    doc = run(args.n, args.work, args.seed)
    doc["command"] = "python tests/_fuzz.py " + " ".join(sys.argv[1:])
    print(json.dumps({k: doc[k] for k in ("inputs", "seconds", "outcomes")}, indent=1))
    for f in doc["findings"][:20]:
        print(f)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if not doc["findings"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
