"""Betaflight in the loop: simulated seconds per wall second, 1 and 4 vehicles hovering.

Each Betaflight vehicle is an ``fpv_racer_250`` in one batched ``Simulator`` (physics 2 kHz,
float64, the BMI085 IMU model) flown by its own Betaflight 4.6.0 SITL process in lock-step at
1 kHz exchanges (``BetaflightFleet``): armed at 0.5 s, angle mode, a throttle pilot holding 1 m.
Untimed: the boot, the arming and a 2 s climb to the hover; timed: ``--seconds`` of hover.
Reference: the same vehicles under volary's ideal rate loop (``control="ctbr"``, the same
rates, IMU and dtype), stepped from Python one control period at a time with the state read
back each step, as a client would; hover thrust from the same altitude pilot. Medians over
``--rounds`` interleaved rounds (the order of the four configurations rotates each round);
torch threads set by ``--threads``. Prints a table and writes JSON.

    .venv/bin/python benchmarks/fc.py --rounds 5 --seconds 3   # -> results/fc.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from _timing import summarize

HERE = Path(__file__).resolve().parent
PLATFORM = "fpv_racer_250"


def _machine() -> dict:
    from _timing import machine

    return {**machine(), "platform": platform.platform(), "load_1min_at_start": os.getloadavg()[0]}


def _throttle(z: np.ndarray, vz: np.ndarray) -> np.ndarray:
    return np.clip(0.38 + 0.25 * (1.0 - z) - 0.15 * vz, 0.0, 1.0)


def betaflight(n: int, seconds: float) -> dict:
    """Sim-s per wall-s of ``n`` Betaflight vehicles hovering in angle mode."""
    from volary.fc.betaflight import BetaflightFleet, Sticks

    with BetaflightFleet(PLATFORM, n) as fleet:
        z, vz = np.zeros(n), np.zeros(n)

        def step(t: float) -> None:
            nonlocal z, vz
            thr = _throttle(z, vz) if t >= 0.7 else np.zeros(n)
            r = fleet.step([Sticks(throttle=float(v), arm=t >= 0.5) for v in thr])
            z, vz = r.pos[:, 2], r.vel[:, 2]

        steps = int(round(seconds / fleet.dt))
        for k in range(int(round(2.7 / fleet.dt))):  # boot, arm, climb to the hover
            step(k * fleet.dt)
        t0, errs = time.perf_counter(), []
        for k in range(steps):
            step(2.7 + k * fleet.dt)
            errs.append(np.abs(z - 1.0).max())
        wall = time.perf_counter() - t0
        assert bool(fleet.alive.all()) and not fleet.events
    return {"rate": steps * fleet.dt / wall, "max_abs_z_error_m": float(max(errs))}


def ideal(n: int, seconds: float) -> dict:
    """Sim-s per wall-s of the same vehicles under volary's ideal rate loop (CTBR)."""
    from volary.sim import Simulator

    sim = Simulator(PLATFORM, n_envs=n, physics_hz=2000.0, control_hz=1000.0, control="ctbr",
                    dtype=torch.float64, imu="bmi085")  # fmt: skip
    sim.reset(pos=torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64).expand(n, 3))
    mass = sim.params.mass.numpy()
    s, errs = sim.state, []
    steps = int(round(seconds * 1000.0))
    t0 = 0.0
    for k in range(-200, steps):  # 200 untimed warm-up steps
        if k == 0:
            t0, errs = time.perf_counter(), []
        z, vz = s.pos[:, 2].numpy(), s.vel[:, 2].numpy()
        thrust = mass * (9.81 + 2.0 * (1.0 - z) - 1.5 * vz)
        sp = np.zeros((n, 4))
        sp[:, 0] = thrust
        s = sim.step(torch.from_numpy(sp))
        _ = s.pos.numpy().copy(), s.vel.numpy().copy(), s.quat.numpy().copy()
        errs.append(float(np.abs(s.pos[:, 2].numpy() - 1.0).max()))
    wall = time.perf_counter() - t0
    return {"rate": steps / 1000.0 / wall, "max_abs_z_error_m": max(errs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0, help="timed hover, simulated s")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "fc.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    machine_info = _machine()
    configs = [("betaflight", 1), ("betaflight", 4), ("ideal", 1), ("ideal", 4)]
    runs: dict[str, list[dict]] = {f"{k}-{n}": [] for k, n in configs}
    for r in range(args.rounds):
        for j in range(len(configs)):
            kind, n = configs[(j + r) % len(configs)]
            got = (betaflight if kind == "betaflight" else ideal)(n, args.seconds)
            runs[f"{kind}-{n}"].append(got)
            print(f"round {r} {kind} x{n}: {got['rate']:.3f} sim-s/wall-s", flush=True)
    rows = []
    for kind, n in configs:
        rates = [g["rate"] for g in runs[f"{kind}-{n}"]]
        q = statistics.quantiles(rates, n=4) if len(rates) > 1 else [rates[0]] * 3
        rows.append({
            "loop": kind, "vehicles": n, "median_sim_s_per_wall_s": statistics.median(rates),
            "iqr": [q[0], q[2]], "rates": rates,
            "max_abs_z_error_m": max(g["max_abs_z_error_m"] for g in runs[f"{kind}-{n}"]),
            "wall_s_per_sim_s": summarize([1 / v for v in rates], label=f"{kind} x{n}").to_json(),
        })  # fmt: skip
    by = {(r["loop"], r["vehicles"]): r["median_sim_s_per_wall_s"] for r in rows}
    ratios = {f"ideal/betaflight x{n}": by[("ideal", n)] / by[("betaflight", n)] for n in (1, 4)}
    result = {
        "what": __doc__.splitlines()[0],
        "machine": machine_info,
        "torch_threads": args.threads,
        "rounds": args.rounds,
        "timed_sim_s": args.seconds,
        "rows": rows,
        "ratios": ratios,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"\n{'loop':<12} {'vehicles':>8} {'sim-s/wall-s':>13} {'IQR':>17} {'max |z-1| m':>12}")
    for r in rows:
        iqr = f"{r['iqr'][0]:.2f}-{r['iqr'][1]:.2f}"
        print(f"{r['loop']:<12} {r['vehicles']:>8} {r['median_sim_s_per_wall_s']:>13.3f} "
              f"{iqr:>17} {r['max_abs_z_error_m']:>12.3f}")  # fmt: skip
    for k, v in ratios.items():
        print(f"{k}: {v:.1f}x")
    vs = 4 * by[("betaflight", 4)]
    print(f"vehicle-seconds per wall second, 4 Betaflight vehicles: {vs:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
