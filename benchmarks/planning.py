"""Min-snap solve time of volary.planning for 11 and 50 waypoints, beside RotorPy's MinSnap.

Run: ``.venv-bench/bin/python benchmarks/planning.py`` (RotorPy installed there by
``make .venv-bench/.installed``); with an interpreter that lacks rotorpy the peer is skipped
with a note. Writes ``benchmarks/results/planning-cpu.json`` (or ``--out``) and prints a table.

The problem is the same for both: x, y, z and yaw through W random waypoints (consecutive ones
0.3-1.5 m apart), segment times proportional to distance at 1 m/s, rest to rest (velocity,
acceleration and jerk zero at both ends), continuity through snap, 7th-order polynomials.
RotorPy solves four QPs with cvxopt (its midpoint speed limit set to 1e3 m/s, inactive);
volary solves the closed-form unconstrained QP (Cholesky) for the four axes at once, float64.
Timed: building the trajectory object from the waypoints (time allocation included), median of
``--repeats`` runs after one warm-up run. Also reported: each solution's snap cost and the
largest position difference between the two trajectories (they solve the same QP).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import numpy as np
import torch
from _timing import Timing, machine, measure, print_spread_warnings

HERE = Path(__file__).resolve().parent
SIZES = (11, 50)
BATCH = 1024  # independent 11-waypoint problems solved in one batched call


def waypoints(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    steps = rng.normal(size=(n - 1, 3))
    steps *= (rng.uniform(0.3, 1.5, size=(n - 1, 1))) / np.linalg.norm(steps, axis=1, keepdims=True)
    pts = np.concatenate((np.zeros((1, 3)), np.cumsum(steps, axis=0))) + [0.0, 0.0, 1.0]
    return pts, rng.uniform(-1.0, 1.0, size=n)


def timed(fn, repeats: int, label: str) -> tuple[Timing, object]:
    """One warm-up run, then ``repeats`` timed runs; the timing and the last run's output."""
    box = {}

    def run() -> None:
        box["out"] = fn()

    # quiet: the table prints every warning at its end
    return measure(run, warmup=1, repeats=repeats, label=label, quiet=True), box["out"]


def volary_solve(pts: np.ndarray, yaw: np.ndarray):
    from volary.planning import min_snap, proportional_times

    wp = torch.as_tensor(pts, dtype=torch.float64)
    return min_snap(wp, proportional_times(wp, 1.0), yaw=torch.as_tensor(yaw), unwrap_yaw=False)


def rotorpy_solve(pts: np.ndarray, yaw: np.ndarray):
    from rotorpy.trajectories.minsnap import MinSnap

    return MinSnap(pts, yaw_angles=yaw, v_max=1e3, v_avg=1.0, yaw_rate_max=1e3, verbose=False)


def rotorpy_compare(traj, peer) -> dict:
    """Snap cost (x, y, z) of RotorPy's polynomials and the largest position gap to volary's."""
    from volary.planning.trajectory import snap_cost_matrix

    coeffs = torch.as_tensor(np.flip(peer.x_poly, axis=-1).copy())  # (M, 3, 8) ascending
    dur = torch.as_tensor(peer.delta_t)
    q = snap_cost_matrix(dur, 8)
    cost = torch.einsum("mak,mkl,mal->a", coeffs, q, coeffs).sum()
    ts = np.linspace(0.0, float(traj.duration), 400)
    ours = traj.evaluate(torch.as_tensor(ts)).pos.numpy()
    theirs = np.stack([peer.update(t)["x"] for t in ts])
    return {"snap_cost_xyz": float(cost), "max_pos_gap_m": float(np.abs(ours - theirs).max())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE / "results" / "planning-cpu.json")
    ap.add_argument("--repeats", type=int, default=21)
    args = ap.parse_args()
    torch.set_num_threads(1)
    machine_info = machine()
    try:
        import rotorpy  # noqa: F401

        peer_note = None
    except ImportError:
        peer_note = f"rotorpy not importable from {sys.executable}; peer skipped"
    rows = []
    for n in SIZES:
        pts, yaw = waypoints(n, seed=n)
        t, traj = timed(lambda p=pts, y=yaw: volary_solve(p, y), args.repeats, f"volary W={n}")
        row = {
            "waypoints": n,
            "volary_ms": 1e3 * t.median,
            "volary_iqr_ms": 1e3 * t.iqr,
            "volary_snap_cost_xyz": float(traj.snap_cost()[:3].sum()),
            "volary_timing": t.to_json(unit="ms", scale=1e3),
        }
        if peer_note is None:
            pt, peer = timed(
                lambda p=pts, y=yaw: rotorpy_solve(p, y), args.repeats, f"rotorpy W={n}"
            )
            cmp = rotorpy_compare(traj, peer)
            row |= {
                "rotorpy_ms": 1e3 * pt.median,
                "rotorpy_iqr_ms": 1e3 * pt.iqr,
                "rotorpy_snap_cost_xyz": cmp["snap_cost_xyz"],
                "max_pos_gap_m": cmp["max_pos_gap_m"],
                "speedup": pt.median / t.median,
                "rotorpy_timing": pt.to_json(unit="ms", scale=1e3),
            }
        rows.append(row)
    batch = [waypoints(11, seed=1000 + i) for i in range(BATCH)]
    bw = np.stack([b[0] for b in batch])
    by = np.stack([b[1] for b in batch])
    bt, _ = timed(lambda: volary_solve(bw, by), max(3, args.repeats // 4), "volary batched")
    bmed, biqr = bt.median, bt.iqr
    result = {
        "benchmark": "min-snap solve time (x, y, z, yaw; proportional times; rest to rest)",
        "machine": {
            **machine_info,
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
        },
        "repeats": args.repeats,
        "rows": rows,
        "batched_11_waypoints": {
            "problems": BATCH,
            "total_ms": 1e3 * bmed,
            "iqr_ms": 1e3 * biqr,
            "per_problem_us": 1e6 * bmed / BATCH,
            "timing": bt.to_json(unit="ms", scale=1e3),
        },
        "peer_note": peer_note,
    }
    if peer_note is None:
        import rotorpy

        result["machine"]["rotorpy"] = getattr(rotorpy, "__version__", "3.0.0 (dist-info)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print_table(result)


def print_table(result: dict) -> None:
    print("| waypoints | volary (ms) | rotorpy (ms) | speed-up | snap cost volary / rotorpy |")
    print("|---:|---:|---:|---:|---:|")
    for r in result["rows"]:
        peer = f"{r['rotorpy_ms']:.2f}" if "rotorpy_ms" in r else "n/a"
        speed = f"{r['speedup']:.1f}x" if "speedup" in r else "n/a"
        cost = (
            f"{r['volary_snap_cost_xyz'] / r['rotorpy_snap_cost_xyz']:.6f}"
            if "rotorpy_snap_cost_xyz" in r
            else "n/a"
        )
        print(f"| {r['waypoints']} | {r['volary_ms']:.2f} | {peer} | {speed} | {cost} |")
    b = result["batched_11_waypoints"]
    print(
        f"batched: {b['problems']} problems of 11 waypoints in {b['total_ms']:.1f} ms "
        f"({b['per_problem_us']:.1f} us per problem)"
    )
    if result["peer_note"]:
        print("note:", result["peer_note"])
    print_spread_warnings(result)


if __name__ == "__main__":
    main()
