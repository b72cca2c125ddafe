"""Where the RGB planner's depth comes out wrong: the shipped RGB depth encoder's error along the
paths ``learned_rgb`` actually flew in the benchmark's forest and urban configurations (issue
21, "RGB observations").

For every trial of a ``learned_rgb`` run, poses are taken from its recorded track (5 Hz
positions; the camera heading along the motion, level, as the policy flies): every
``--stride``-th point of the flight, and the last second before the trial ended. At each, the
forward RGB and depth cameras render exactly as for the encoder's training data
(:func:`volary.studies.rl.rgb_depth.camera_pair`, the configuration's splat seed) and the shipped
encoder (the planner's own NumpyMLP) predicts the policy's depth grid. Per configuration the
error is set beside the flown success of ``learned_rgb`` and of its depth twin ``learned`` (the
twin's rows from the same databases when they hold them, else the committed protocol run), to
see whether the configurations RGB loses are those where its depth is worst, and how wrong it
was just before collisions. None of these scenes was a training scene (generator seeds 1000
and up).

    .venv/bin/python experiments/flyingtrust/rgb-planner/scenes.py \\
        --db out/bench/ft-learned-rgb/run.sqlite

Writes ``results/scenes.json`` and prints a table. Unit of replication: the
configuration (frames within one are correlated). When the run also flew ``learned`` (a run of
both planners on a few configurations), ``--figure`` draws every flown track of both, top
down, per configuration (depth left, RGB right; colour = outcome).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sqlite3
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results"
DEPTH_ROWS = HERE.parent / "table-ii" / "results" / "slate" / "learned" / "trials.csv"
TYPES = ("forest", "urban")


def depth_success(path: Path) -> dict[tuple[str, int], float]:
    ok: dict[tuple[str, int], list[bool]] = defaultdict(list)
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            if r["algo"] == "learned" and r["scenario"] in TYPES:
                ok[(r["scenario"], int(r["config"]))].append(r["success"] in ("True", "1"))
    return {k: float(np.mean(v)) for k, v in ok.items()}


def track_poses(track: list[list[float]], stride: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(positions (K, 3), yaws (K,), in the final second (K,)) from a [[t, x, y, z], ...] track:
    every ``stride``-th point and the points of the final second; yaw along the motion."""
    a = np.asarray(track, dtype=np.float64)
    if len(a) < 2:
        return np.zeros((0, 3)), np.zeros(0), np.zeros(0, dtype=bool)
    v = np.gradient(a[:, 1:3], axis=0)
    yaw = np.arctan2(v[:, 1], v[:, 0])
    last = a[:, 0] >= a[-1, 0] - 1.0
    pick = (np.arange(len(a)) % stride == 0) | last
    return a[pick, 1:4], yaw[pick], last[pick]


def errors(planner, world, cfg, pos: np.ndarray, yaw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(K, cells) predicted minus true depth (m) of the policy's grid at the poses, and the
    true depth (m; the range where nothing is in it)."""
    import torch

    from volary.math.quaternion import quat_from_euler
    from volary.sensors.splat import to_uint8
    from volary.studies.rl.rgb_depth import pooled_target

    out, true = [], []
    n = world.b  # vehicles (one per env)
    for s in range(0, len(pos), n):
        p = torch.as_tensor(pos[s : s + n], dtype=torch.float32)
        y = torch.as_tensor(yaw[s : s + n], dtype=torch.float32)
        m = len(p)
        pad = n - m
        if pad:
            p, y = torch.cat([p, p[:1].repeat(pad, 1)]), torch.cat([y, y[:1].repeat(pad)])
        world.reset(pos=p, quat=quat_from_euler(torch.zeros(n), torch.zeros(n), y))
        d = world.read("depth")
        truth = pooled_target(d.depth[:m], d.valid[:m], cfg).numpy()
        x = to_uint8(world.read("rgb").rgb[:m]).numpy().transpose(0, 3, 1, 2)
        pred = planner.encoder(x.astype(np.float32) / np.float32(255)).reshape(m, -1)
        out.append((pred - truth) * cfg.depth_range)
        true.append(truth * cfg.depth_range)
    if not out:
        return np.zeros((0, 0)), np.zeros((0, 0))
    return np.concatenate(out), np.concatenate(true)


def summary(err: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Frames; MAE (m), the share of cells predicted > 1 m too near (phantom obstacles) and
    > 1 m too far; within 3 m of truth: MAE and the share predicted > 1 m too far."""
    if err.size == 0:
        return {"frames": 0}
    near = err[truth < 3.0]
    return {"frames": int(len(err)), "mae_m": float(np.abs(err).mean()),
            "too_near_1m": float((err < -1.0).mean()), "too_far_1m": float((err > 1.0).mean()),
            "too_far_1m_near": float((near > 1.0).mean()) if near.size else math.nan,
            "mae_near_m": float(np.abs(near).mean()) if near.size else math.nan}  # fmt: skip


def _joined(pairs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    if not pairs:
        return np.zeros((0, 0)), np.zeros((0, 0))
    return np.concatenate([a for a, _ in pairs]), np.concatenate([b for _, b in pairs])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--db",
        type=Path,
        required=True,
        action="append",
        help="a learned_rgb run's run.sqlite (repeatable)",
    )
    ap.add_argument("--stride", type=int, default=10, help="every K-th track point (5 Hz)")
    ap.add_argument("--out", type=Path, default=OUT / "scenes.json")
    ap.add_argument("--figure", type=Path, help="top-down tracks of both planners (PNG)")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from scipy.stats import spearmanr

    from volary.studies.flyingtrust.planners import get_planner
    from volary.studies.rl.rgb_depth import RgbDepthConfig, camera_pair
    from volary.worlds import make_scenario

    flown = load_trials(args.db)
    trials = [t[1:] for t in flown if t[0] == "learned_rgb"]
    planner, cfg = get_planner("learned_rgb"), RgbDepthConfig()
    twin = depth_success(DEPTH_ROWS)
    flown_twin: dict[tuple[str, int], list[bool]] = defaultdict(list)
    for t in flown:
        if t[0] == "learned":
            flown_twin[(t[1], int(t[2]))].append(bool(t[3]))
    twin |= {k: float(np.mean(v)) for k, v in flown_twin.items()}  # the same run's, if flown
    by: dict[tuple[str, int], list] = defaultdict(list)
    for t in trials:
        by[(t[0], int(t[1]))].append(t)
    rows = []
    for (scenario, config), ts in sorted(by.items()):
        world = camera_pair(make_scenario(scenario, config), cfg, 128)
        path, before = [], []  # (error, truth) of path frames / of crashes' last second
        for _, _, _, cause, track in ts:
            pos, yaw, last = track_poses(json.loads(track), args.stride)
            e, truth = errors(planner, world, cfg, pos, yaw)
            if len(e):
                path.append((e, truth))
                if cause == "collision":
                    before.append((e[last], truth[last]))
        rows.append({
            "scenario": scenario, "config": config,
            "success_rgb": float(np.mean([t[2] for t in ts])),
            "success_depth": twin[(scenario, config)], "collisions_rgb": len(before),
            "path": summary(*_joined(path)), "before_collision": summary(*_joined(before)),
        })  # fmt: skip
        print(f"{scenario} {config}: done", file=sys.stderr, flush=True)
    gap = [r["success_rgb"] - r["success_depth"] for r in rows]
    rho, p = (
        spearmanr([r["path"]["mae_m"] for r in rows], gap) if len(rows) > 2 else (math.nan,) * 2
    )
    doc = {"stride": args.stride, "unit_of_replication": "configuration",
           "spearman_path_mae_vs_success_gap": {"rho": float(rho), "p": float(p), "n": len(rows)},
           "configs": rows}  # fmt: skip
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print("| type | config | success, depth | success, RGB | path frames | path MAE (m) | "
          "path: > 1 m too near | path: > 1 m too far within 3 m | before collisions: frames | "
          "MAE (m) | > 1 m too far within 3 m |")  # fmt: skip
    print("| --- " * 11 + "|")
    for r in rows:
        a, b = r["path"], r["before_collision"]
        pre = (f"{b['frames']} | {b['mae_m']:.2f} | {b['too_far_1m_near']:.1%}"
               if b["frames"] else "0 | - | -")  # fmt: skip
        print(f"| {r['scenario']} | {r['config']} | {r['success_depth']:.1%} | "
              f"{r['success_rgb']:.1%} | {a['frames']} | {a['mae_m']:.2f} | "
              f"{a['too_near_1m']:.1%} | {a['too_far_1m_near']:.1%} | {pre} |")  # fmt: skip
    print(f"Spearman, path MAE vs (RGB - depth success) over configurations: rho {rho:.2f}, "
          f"p {p:.3g}, n {len(rows)}")  # fmt: skip
    if args.figure:
        print(f"wrote {tracks_figure(flown, sorted(by), args.figure)}")
    return 0


OUTCOME_COLOURS = {"success": "#2ca02c", "collision": "#d62728", "timeout": "#ff7f0e"}


def load_trials(dbs: list[Path]) -> list[tuple]:
    """(algo, scenario, config, success, cause, track) of every trial in the run databases."""
    out = []
    for db in dbs:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        query = ("select algo, scenario, config, success, cause, track from trials "
                 "order by algo, scenario, config, platform")  # fmt: skip
        out += con.execute(query).fetchall()
        con.close()
    return out


def tracks_figure(flown: list[tuple], configs: list[tuple[str, int]], path: Path) -> Path:
    """Per configuration, two top-down panels (``learned``, ``learned_rgb``) with every flown
    track coloured by its outcome."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from volary.studies.flyingtrust.figures import draw_scene, parse_track, scene_for

    fig, axes = plt.subplots(len(configs), 2, figsize=(11, 4.6 * len(configs)), squeeze=False)
    for row, (scenario, config) in zip(axes, configs, strict=True):
        spec = scene_for(scenario, config)
        for ax, algo in zip(row, ("learned", "learned_rgb"), strict=True):
            rows = [(t[4], t[5]) for t in flown if t[:3] == (algo, scenario, config)]
            draw_scene(ax, spec)
            for cause, track in rows:
                a = parse_track(track)
                if a is not None:
                    c = OUTCOME_COLOURS.get(cause, "0.3")
                    ax.plot(a[:, 1], a[:, 2], color=c, lw=0.7, alpha=0.6)
                    ax.plot(a[-1, 1], a[-1, 2], "o", color=c, ms=2.5)
            s, g = np.asarray(spec.start), np.asarray(spec.goal)
            ax.plot(*s[:2], "k^", ms=7)
            ax.plot(*g[:2], "k*", ms=10)
            ok = sum(c == "success" for c, _ in rows)
            ax.set_title(f"{algo}: {scenario} configuration {config}, {ok} of {len(rows)} "
                         "reach the goal", fontsize=10)  # fmt: skip
            ax.set_aspect("equal")
            lo, hi = spec.bounds_min, spec.bounds_max
            ax.set_xlim(lo[0] - 1, hi[0] + 1)
            ax.set_ylim(lo[1] - 1, hi[1] + 1)
    handles = [plt.Line2D([], [], color=c, label=k) for k, c in OUTCOME_COLOURS.items()]
    fig.legend(handles=handles, loc="lower center", ncol=3, frameon=False)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


if __name__ == "__main__":
    raise SystemExit(main())
