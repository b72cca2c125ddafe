"""Golden-output harness for the World + rollout refactor (issue 16): every closed loop of volary
flown at fixed seeds on CPU, its outputs saved bit-exactly, and two such files compared.

It calls only public entry points that the refactor keeps
(``volary.studies.flyingtrust.episode.run_unit``, ``volary.studies.alphapilot.race.run_race``,
``volary.bench.tracking.track_figure_eight``, ``volary.envs.make_env``,
``volary.studies.sousvide.generate.generate`` / ``evaluate.evaluate``,
``volary.studies.boundary.dataset.label_inputs`` / ``deploy.fly_course``), so the same script
runs unchanged against the old and the new tree::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \\
      PYTHONPATH=/work/base/src .venv/bin/python benchmarks/world_parity.py --out before.json
    ... PYTHONPATH=src .venv/bin/python benchmarks/world_parity.py --out after.json
    .venv/bin/python benchmarks/world_parity.py --compare before.json after.json

Sections (``--sections nav,race``; default all): ``nav``, ``race``, ``tracking``, ``envs``,
``sousvide``, ``bp``. Each section is a dict of items (one trial, course, platform, env...), each
item a dict of fields. Floats are stored as ``repr`` strings (round-trip exact, NaN and -0.0
kept), tensors too large to list as sha256 digests of their bytes (with dtype and shape), so
"identical" means bit-identical. Wall time per section is recorded under ``wall_s`` and never
compared. ``--compare`` prints a table per section and exits 1 if any item differs or is missing.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform as _platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

SECTIONS = ("nav", "race", "tracking", "envs", "sousvide", "bp")

# ---- canonical, bit-exact encoding ----------------------------------------------------------


def fl(x: Any) -> str:
    """A float as its round-trip-exact repr ('nan', '-0.0' kept)."""
    return repr(float(x))


def digest(x: Any) -> str:
    """sha256 of an array's dtype, shape and bytes (C order)."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().contiguous().numpy()
    a = np.ascontiguousarray(np.asarray(x))
    h = hashlib.sha256(f"{a.dtype.str}|{a.shape}|".encode())
    h.update(a.tobytes())
    return h.hexdigest()[:32]


def enc(x: Any) -> Any:
    """JSON-ready canonical form: floats -> repr strings, arrays -> nested lists of those."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        if x.dtype == np.bool_:
            return x.tolist()
        if np.issubdtype(x.dtype, np.integer):
            return x.tolist()
        return enc(x.astype(np.float64).tolist())
    if isinstance(x, bool | np.bool_):
        return bool(x)
    if isinstance(x, int | np.integer):
        return int(x)
    if isinstance(x, float | np.floating):
        return fl(x)
    if x is None or isinstance(x, str):
        return x
    if isinstance(x, dict):
        return {str(k): enc(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [enc(v) for v in x]
    return repr(x)


# ---- sections ---------------------------------------------------------------------------------

# nav: six Table I platforms from 0.60 to 5.45 kg (one batch per unit), every scenario type.
NAV_PLATFORMS = (
    "0.60kg-EMAX",
    "0.98kg-EGO-Planner-DIY",
    "1.50kg-DJI",
    "2.50kg-HLY",
    "3.80kg-T-MOTOR",
    "5.45kg-JFRC",
)
NAV_CONFIGS = {"straight": 4, "mapper": 2}  # first N fixed configurations per scenario type
NAV_SEED = 0


def nav_units() -> list:
    from volary.studies.flyingtrust.protocol import SCENARIO_TYPES, Suite

    units = []
    for algo, n in NAV_CONFIGS.items():
        suite = Suite("parity", NAV_PLATFORMS, SCENARIO_TYPES, f"fixed:{n}", 1)
        units += suite.units([algo], seed=NAV_SEED)
    return units


def _slice(part: str, n: int) -> tuple[int, int]:
    a, _, b = part.partition(":")
    return (int(a or 0), int(b) if b else (int(a) + 1 if not _ else n))


def _nav_unit(unit) -> list[tuple[str, dict]]:
    torch.set_num_threads(1)
    from volary.studies.flyingtrust.episode import run_unit

    out = []
    for r in run_unit(unit):
        row = dict(r.to_row())
        row.pop("wall_time", None)
        out.append((r.key, enc(row)))
    return out


def section_nav(workers: int = 1, limit: int | None = None, pick: str | None = None) -> dict:
    units = nav_units()
    if limit is not None:
        units = units[:limit]
    if pick:  # "a:b,c:d": unit index slices (a cheap subset, or one share of a split run)
        idx = sorted({i for part in pick.split(",") for i in range(*_slice(part, len(units)))})
        units = [units[i] for i in idx]
    items: dict[str, dict] = {}
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers) as pool:
            for rows in pool.map(_nav_unit, units):
                items.update(rows)
    else:
        for k, u in enumerate(units):
            t = time.perf_counter()
            items.update(_nav_unit(u))
            print(
                f"  nav unit {k + 1}/{len(units)} {u.algo} {u.scenario} {u.config}: "
                f"{time.perf_counter() - t:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    return items


RACE_COURSES = int(os.environ.get("PARITY_RACE_COURSES", "5"))  # perturbed courses per racer


def section_race() -> dict:
    from volary.studies.alphapilot.race import leaderboard, make_racer, run_race
    from volary.worlds import alphapilot_2019, alphapilot_2019_courses

    items: dict[str, dict] = {}
    specs = [alphapilot_2019(), *alphapilot_2019_courses(RACE_COURSES, 0)]
    for racer in ("mintime", "minsnap"):
        t = time.perf_counter()
        res = run_race(specs, racer=make_racer(racer), seed=0)
        for i, name in enumerate(res.courses):
            items[f"{racer}|{i}|{name}"] = {
                "gates_passed": int(res.gates_passed[i]),
                "gate_times": enc(res.gate_times[i]),
                "finished": bool(res.finished[i]),
                "collided": bool(res.collided[i]),
                "timed_out": bool(res.timed_out[i]),
                "time": fl(res.time[i]),
                "score": fl(res.score[i]),
                "plan_time": fl(res.plan_time[i]),
                "path": digest(res.path[:, i]),
            }
        items[f"{racer}|summary"] = {
            "nominal_score": fl(res.score[0]),
            # as race_cli computes it (mean of the best five perturbed scores)
            "leaderboard": fl(leaderboard(res.score[1:])),
            "path_time": digest(res.path_time),
        }
        print(f"  race {racer}: {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
    return items


TRACK_PLATFORMS = (
    "crazyflie",
    "0.60kg-EMAX",
    "0.98kg-EGO-Planner-DIY",
    "1.50kg-DJI",
    "2.50kg-HLY",
    "3.80kg-T-MOTOR",
    "5.45kg-JFRC",
    "sous_vide",
)


def section_tracking() -> dict:
    from volary.bench.tracking import track_figure_eight
    from volary.platforms import names

    quads = [p for p in TRACK_PLATFORMS if p in set(names())]
    items: dict[str, dict] = {}
    for ff in (True, False):
        res = track_figure_eight(quads, drag_feedforward=ff)
        for i, p in enumerate(res.platforms):
            items[f"drag_ff={ff}|{p}"] = {
                "rms": fl(res.rms[i]),
                "peak": fl(res.peak[i]),
                "crashed": bool(res.crashed[i]),
            }
        items[f"drag_ff={ff}|lap"] = {"lap_time": fl(res.lap_time), "settle": fl(res.settle_time)}
    return items


ENV_CASES: dict[str, tuple[str, dict]] = {
    "hover": ("hover", {}),
    "reach-ctbr": ("reach", {"control": "ctbr"}),
    "reach-velocity": ("reach", {"control": "velocity"}),
    "reach-rotor_thrusts": ("reach", {"control": "rotor_thrusts"}),
    # mixed platforms, acceleration commands, 0.5 s episodes: autoresets within the 50 steps
    "hover-acceleration-autoreset": (
        "hover",
        {"control": "acceleration", "episode_s": 0.5, "platform": ("crazyflie", "0.60kg-EMAX")},
    ),
    "navigate": ("navigate", {"physics_hz": 240.0, "control_hz": 60.0}),
}
ENV_N, ENV_STEPS = 4, 50


def section_envs() -> dict:
    from volary.envs import make_env

    items: dict[str, dict] = {}
    for case, (name, opts) in ENV_CASES.items():
        env = make_env(name, n_envs=ENV_N, seed=0, **opts)
        obs, _ = env.reset(seed=0)
        g = torch.Generator().manual_seed(1234)
        a_dim = env.single_action_space.shape[0]
        item: dict[str, Any] = {"reset_obs": digest(obs)}
        for k in range(ENV_STEPS):
            act = torch.rand(ENV_N, a_dim, generator=g) * 2 - 1
            obs, rew, term, trunc, _ = env.step(act)
            item[f"step{k:02d}"] = "|".join(digest(x) for x in (obs, rew, term, trunc))
        item["final_obs"] = enc(obs)
        item["final_reward"] = enc(rew)
        close = getattr(env, "close", None)
        if close is not None:
            close()
        items[case] = item
    return items


SV_TINY = dict(n_des=3, n_smp=2, t_smp=0.5, width=32, height=32, window=4, envs=2)
# wind: the gust starts at t = 4 s (step 80 at 20 Hz)
SV_EVAL = (("baseline", 80), ("payload", 40), ("wind", 100))


def section_sousvide() -> dict:
    import h5py

    from volary.studies.sousvide.evaluate import EvalConfig, ExpertPolicy, evaluate
    from volary.studies.sousvide.generate import GenerateConfig, generate
    from volary.studies.sousvide.scene import make_scene

    scene = make_scene(width=32, height=32)
    items: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        s = generate(Path(tmp) / "d.h5", GenerateConfig(**SV_TINY), scene=scene)
        gen: dict[str, Any] = {
            "units_flown": s.units_flown,
            "rows": s.rows,
            "valid_rows": s.valid_rows,
            "crashed_units": s.crashed_units,
            "tracking_error": fl(s.tracking_error),
        }
        with h5py.File(Path(tmp) / "d.h5", "r") as f:
            names: list[str] = []
            f.visit(lambda n: names.append(n) if isinstance(f[n], h5py.Dataset) else None)
            for n in sorted(names):
                gen[f"h5:{n}"] = digest(f[n][...])
        items["generate"] = gen
    for dist, steps in SV_EVAL:
        r = evaluate(
            ExpertPolicy(scene), EvalConfig(disturbance=dist, trials=2, steps=steps), scene=scene
        )
        items[f"evaluate|{dist}|{steps}"] = {
            "outcome": list(r.outcome),
            "tracking_error": enc(r.tracking_error),
            "proximity": enc(r.proximity),
            "hits": enc(r.hits),
            "distance": enc(r.distance),
            "goal_error": enc(r.goal_error),
            "heading_error": enc(r.heading_error),
            "final_pos": enc(r.positions[:, -1]),
            "positions": digest(r.positions),
            "image_mean": digest(r.image_mean),
            "mass": enc(r.mass),
        }
    return items


def _bp_net():
    """A BoundaryPredictor whose weights come from a seeded generator (no training, no global
    RNG): any fixed network exercises plan_course + the flight loop."""
    from volary.studies.boundary.model import BoundaryPredictor

    net = BoundaryPredictor(dropout=0.0)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_((torch.rand(p.shape, generator=g, dtype=torch.float64) * 2 - 1).to(p.dtype))
            p.mul_(1.0 / math.sqrt(max(p.shape[-1], 1)))
    return net.eval()


def section_bp() -> dict:
    from volary.studies.boundary import dataset as ds
    from volary.studies.boundary import deploy, grid, sampling
    from volary.studies.boundary.flight import CandidateFlyer

    items: dict[str, dict] = {}
    cfg = sampling.SamplingConfig(tail_s=0.5)
    idx = grid.GRID_SIZE * 9 // 10 + np.sort(np.random.default_rng(11).choice(12_960, 4))
    e, gi = grid.grid_inputs(idx), torch.as_tensor(idx)
    lab = ds.label_inputs(e, gi, CandidateFlyer(cfg, seed=3), cfg)
    items["label_inputs"] = {
        "grid_index": enc(idx),
        "speed": enc(lab.speed),
        "t0": enc(lab.t0),
        "cost_min": enc(lab.cost_min),
        "cost": digest(lab.cost),
        "crashed": digest(lab.crashed),
        "skipped": digest(lab.skipped),
        "tracking": digest(lab.tracking),
        "tracking_sum": fl(torch.nan_to_num(lab.tracking.double()).sum()),
        "flown": int(lab.flown),
    }
    net = _bp_net()
    cases = [
        ("straight", 2, deploy.DeployConfig()),
        ("circular", None, deploy.DeployConfig()),
        ("snaked", 3, deploy.DeployConfig(randomize=True)),
    ]
    for kind, n, dcfg in cases:
        res = deploy.fly_course(net, deploy.named_course(kind, n), dcfg, seed=1)
        d = enc(res.to_dict())
        d["path"] = digest(res.path)
        d["path_last"] = enc(res.path[-1])
        d["path_len"] = int(len(res.path))
        items[f"fly_course|{kind}|{n}|randomize={dcfg.randomize}"] = d
    return items


def run_section(name: str, args: argparse.Namespace) -> dict:
    fn: Callable[[], dict] = {
        "nav": lambda: section_nav(args.workers, args.nav_limit, args.nav_units),
        "race": section_race,
        "tracking": section_tracking,
        "envs": section_envs,
        "sousvide": section_sousvide,
        "bp": section_bp,
    }[name]
    t = time.perf_counter()
    items = fn()
    return {"wall_s": round(time.perf_counter() - t, 1), "n_items": len(items), "items": items}


def _meta() -> dict:
    import volary

    src = Path(volary.__file__).resolve().parent.parent
    try:
        rev = subprocess.run(
            ["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        rev = ""
    return {
        "volary_src": str(src),
        "git_head": rev,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "numpy": np.__version__,
        "machine": _platform.machine(),
        "threads": torch.get_num_threads(),
    }


# ---- comparison -------------------------------------------------------------------------------


def _short(v: Any, n: int = 90) -> str:
    s = json.dumps(v)
    return s if len(s) <= n else s[: n - 3] + "..."


def _first_diff(a: Any, b: Any, path: str = "") -> tuple[str, Any, Any] | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return (f"{path}.{k}".lstrip("."), a.get(k, "<missing>"), b.get(k, "<missing>"))
            d = _first_diff(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return (f"{path}(len)", len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            d = _first_diff(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else (path.lstrip("."), a, b)


def compare(old_path: str, new_path: str, allow_missing: bool = False) -> int:
    old, new = (json.loads(Path(p).read_text()) for p in (old_path, new_path))
    bad = 0
    print(f"old: {old_path} ({old['meta'].get('git_head', '')[:10]})")
    print(f"new: {new_path} ({new['meta'].get('git_head', '')[:10]})")
    for name in [s for s in SECTIONS if s in old["sections"] or s in new["sections"]]:
        so, sn = old["sections"].get(name), new["sections"].get(name)
        print(f"\n## {name}")
        if so is None or sn is None:
            print(f"  section missing in {'old' if so is None else 'new'}: not compared")
            continue
        io, inn = so["items"], sn["items"]
        keys = list(io) + [k for k in inn if k not in io]
        same, diff, missing = 0, [], []
        for k in keys:
            if k not in io or k not in inn:
                missing.append((k, "old" if k not in io else "new"))
                continue
            d = _first_diff(io[k], inn[k])
            if d is None:
                same += 1
            else:
                diff.append((k, d))
        print(
            f"  | items | identical | different | missing | wall old s | wall new s |\n"
            f"  | {len(keys)} | {same} | {len(diff)} | {len(missing)} | "
            f"{so.get('wall_s')} | {sn.get('wall_s')} |"
        )
        for k, (field, a, b) in diff:
            print(f"  DIFF {k}: {field}: old {_short(a)} new {_short(b)}")
        for k, where in missing:
            print(f"  MISSING in {where}: {k}")
        bad += len(diff) + (0 if allow_missing else len(missing))
    print(f"\n{'ALL IDENTICAL' if bad == 0 else f'{bad} item(s) differ or are missing'}")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write the outputs to this JSON file")
    ap.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"), help="compare two files")
    ap.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated subset")
    ap.add_argument("--workers", type=int, default=1, help="nav: processes (units are pure)")
    ap.add_argument("--nav-limit", type=int, default=None, help="nav: only the first N units")
    ap.add_argument("--nav-units", default=None, help="nav: unit slices, e.g. 0:3,28:30")
    ap.add_argument(
        "--allow-missing",
        action="store_true",
        help="compare: items or sections in only one file are listed but do not fail (subsets)",
    )
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare, allow_missing=args.allow_missing)
    if not args.out:
        ap.error("--out FILE or --compare OLD NEW")
    chosen = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        ap.error(f"unknown sections {unknown}; valid: {', '.join(SECTIONS)}")
    out = Path(args.out)
    doc: dict[str, Any] = {"meta": _meta(), "sections": {}}
    if out.exists():  # add to / replace sections of an existing file
        prev = json.loads(out.read_text())
        doc["sections"] = prev.get("sections", {})
    doc["meta"]["nav_limit"], doc["meta"]["nav_units"] = args.nav_limit, args.nav_units
    for name in chosen:
        print(f"[{name}] ...", file=sys.stderr, flush=True)
        doc["sections"][name] = run_section(name, args)
        s = doc["sections"][name]
        print(f"[{name}] {s['n_items']} items, {s['wall_s']} s", file=sys.stderr, flush=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")  # after each section
    return 0


if __name__ == "__main__":
    sys.exit(main())
