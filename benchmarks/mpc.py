"""MPC solve time per vehicle (single and batched) and figure-eight tracking of volary.control.mpc.

Run: ``.venv/bin/python benchmarks/mpc.py`` (``--device cuda`` for the batched iLQR on a GPU;
``--quick`` for a short smoke run). Writes ``benchmarks/results/mpc-<device>.json`` (or
``--out``) and prints a table.

Problem (both controllers): SOUS VIDE eq. 2 on the thrust + body-rate model (eq. 1 with body
drag), horizon N = 20 stages of 50 ms, default weights and limits (``MpcConfig()``), reference
= the 3 m figure-eight at 2 m/s mean speed (``volary.control.references.figure_eight``).
Closed loop in volary's Simulator (thrust-rate model, RK4 physics at 240 Hz, control at 20 Hz
= the MPC stage rate, deterministic), every vehicle starting on the reference.

Timed per control step (after a warm-up step): the controller call (reference window by
differential flatness, warm start, solve, fallbacks) and the solve alone (``last_solve_time``);
median, IQR and 90th percentile over ``--steps`` steps; per vehicle = per step / vehicles.
- ``nmpc``: CasADi Gauss-Newton SQP (qrqp), one solve per vehicle in a Python loop, up to 5
  SQP iterations per step (stops at a step inf-norm < 1e-6).
- ``ilqr``: batched iLQR in torch (float64), ``max_iter=2`` iterations per step from the
  shifted previous plan (2 measured enough for the 5 cm target); analytic Jacobians from
  640 linearized stages (32 vehicles x 20), forward differences below.
Tracking: RMS and max position error over one full lap (4.57 s, 91 steps) for the NMPC on
crazyflie and the iLQR on four catalogue platforms at once.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch
from _timing import machine as host
from _timing import print_spread_warnings, summarize

HERE = Path(__file__).resolve().parent
PLATFORMS = ["crazyflie", "hexa", "fpv_racer_250", "sous_vide"]
CONTROL_HZ, PHYSICS_HZ = 20.0, 240.0
CASES = [("nmpc", 1), ("nmpc", 16), ("ilqr", 1), ("ilqr", 16), ("ilqr", 256), ("ilqr", 1024)]


def make(kind: str, n: int, device: str):
    from volary.control.mpc import BatchedMpcController, MpcConfig, NmpcController
    from volary.control.references import figure_eight
    from volary.planning import flat_to_state
    from volary.sim import Simulator

    ref = figure_eight(3.0, 2.0)
    sim = Simulator(
        PLATFORMS,
        n_envs=n,
        model="thrust_rate",
        control="ctbr",
        control_hz=CONTROL_HZ,
        physics_hz=PHYSICS_HZ,
        stochastic=False,
        device=device,
    )
    if kind == "nmpc":
        ctrl = NmpcController(sim.params, ref)
    else:
        ctrl = BatchedMpcController(sim.params, ref, MpcConfig(max_iter=2))
    sim.controller = ctrl  # the Simulator builds its controller by name; swap in the MPC
    t0 = torch.zeros(n, 1, dtype=torch.float64, device=device)
    fs = flat_to_state(ref.evaluate(t0), sim.params.to(dtype=torch.float64))
    sim.reset(pos=fs.pos[:, 0].float(), vel=fs.vel[:, 0].float(), quat=fs.quat[:, 0].float())
    return sim, ctrl, ref


class Timed:
    """The controller, with the wall time of each call (synchronized on CUDA) and its solve."""

    def __init__(self, ctrl) -> None:
        self.ctrl, self.mode, self.setpoint_size = ctrl, ctrl.mode, ctrl.setpoint_size
        self.calls: list[float] = []
        self.solves: list[float] = []

    def __call__(self, state, setpoint, dt):
        t0 = time.perf_counter()
        out = self.ctrl(state, setpoint, dt)
        if out.is_cuda:
            torch.cuda.synchronize()
        self.calls.append(time.perf_counter() - t0)
        self.solves.append(self.ctrl.last_solve_time)
        return out

    def reset(self, mask=None) -> None:
        self.ctrl.reset(mask)


def fly(kind: str, n: int, steps: int, device: str) -> dict:
    """``steps`` closed-loop control steps; per-step call/solve times and position errors."""
    sim, ctrl, ref = make(kind, n, device)
    timer = Timed(ctrl)
    sim.controller = timer
    errors, status = [], []
    for k in range(steps + 1):
        sim.step(torch.full((n, 1), k / CONTROL_HZ, device=device))
        p_ref = ref.evaluate(torch.tensor((k + 1) / CONTROL_HZ, dtype=torch.float64)).pos
        errors.append((sim.state.pos.double().cpu() - p_ref).norm(dim=-1))
        status.append(ctrl.last_status.clone())
    err = torch.stack(errors)
    return {
        "calls": timer.calls[1:],  # the first step (cold start) is a warm-up
        "solves": timer.solves[1:],
        "rms_m": err.pow(2).mean(0).sqrt().tolist(),
        "max_m": err.max(0).values.tolist(),
        "status_counts": torch.bincount(torch.stack(status).flatten(), minlength=5).tolist(),
        "iterations_last": ctrl.last_iterations.tolist()[:4],
    }


def stats(times: list[float], n: int, label: str) -> dict:
    """Median, IQR, min, spread (``_timing``), p90 and median per vehicle, in ms."""
    timing = summarize(times, label=label, quiet=True)  # warnings printed with the table
    q = statistics.quantiles(times, n=10)
    return {
        **timing.to_json(unit="ms", scale=1e3),
        "p90_ms": 1e3 * q[8],
        "per_vehicle_ms": 1e3 * timing.median / n,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--steps", type=int, default=40, help="timed control steps per case")
    ap.add_argument("--quick", action="store_true", help="small cases, few steps")
    args = ap.parse_args()
    torch.set_num_threads(1)
    machine_info = machine(args.device)
    out = args.out or HERE / "results" / f"mpc-{args.device}.json"
    cases = [c for c in CASES if not args.quick or c[1] <= 16]
    steps = 5 if args.quick else args.steps
    if args.device != "cpu":
        cases = [c for c in cases if c[0] == "ilqr"]
    rows = []
    for kind, n in cases:
        r = fly(kind, n, steps, args.device)
        rows.append(
            {
                "solver": kind,
                "vehicles": n,
                "steps": steps,
                "call": stats(r["calls"], n, f"{kind} N={n} call"),
                "solve": stats(r["solves"], n, f"{kind} N={n} solve"),
                "status_counts": r["status_counts"],
                "rms_m_max_over_vehicles": max(r["rms_m"]),
            }
        )
        print(f"done {kind} N={n}", flush=True)
    from volary.control.references import figure_eight

    lap = int(round(figure_eight(3.0, 2.0).period * CONTROL_HZ))
    tracking = []
    if not args.quick:
        for kind, n in (("nmpc", 1), ("ilqr", 4)):
            if args.device != "cpu" and kind == "nmpc":
                continue
            r = fly(kind, n, lap - 1, args.device)
            tracking.append(
                {
                    "solver": kind,
                    "platforms": PLATFORMS[:n],
                    "steps": lap,
                    "rms_m": r["rms_m"],
                    "max_m": r["max_m"],
                    "status_counts": r["status_counts"],
                    "solve_median_ms": 1e3 * statistics.median(r["solves"]),
                }
            )
    result = {
        "benchmark": "MPC (SOUS VIDE eq. 2) solve time per vehicle and figure-eight tracking",
        "setup": {
            "horizon": 20,
            "stage_dt_s": 0.05,
            "control_hz": CONTROL_HZ,
            "physics_hz": PHYSICS_HZ,
            "reference": "figure-eight 3 m x 1.5 m, 2 m/s mean (2.91 m/s peak), 4.57 s lap",
            "nmpc": "CasADi Gauss-Newton SQP + qrqp, max_iter 5, tol 1e-6, loop over vehicles",
            "ilqr": "batched torch iLQR float64, max_iter 2, 4 line-search steps side by side, "
            "analytic Jacobians from 640 stages",
        },
        "machine": machine_info,
        "rows": rows,
        "tracking_one_lap": tracking,
        "status_codes": "0 SOLVED, 1 ITER_LIMIT, 2 FALLBACK_PLAN, 3 FALLBACK_CONTROLLER, "
        "4 FALLBACK_REFERENCE",
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print_table(result)


def machine(device: str) -> dict:
    import casadi

    return {
        **host(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "casadi": casadi.__version__,
        "device": device,
    }


def print_table(result: dict) -> None:
    print(
        "| solver | vehicles | call median (ms) | IQR | p90 | per vehicle (ms) "
        "| solve per vehicle (ms) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in result["rows"]:
        c, s = r["call"], r["solve"]
        print(
            f"| {r['solver']} | {r['vehicles']} | {c['median_ms']:.2f} | {c['iqr_ms']:.2f} | "
            f"{c['p90_ms']:.2f} | {c['per_vehicle_ms']:.3f} | {s['per_vehicle_ms']:.3f} |"
        )
    for t in result["tracking_one_lap"]:
        rms = ", ".join(f"{1e3 * x:.3f}" for x in t["rms_m"])
        print(f"{t['solver']} one lap ({', '.join(t['platforms'])}): RMS [{rms}] mm")
    print_spread_warnings([r["call"] for r in result["rows"]])


if __name__ == "__main__":
    main()
