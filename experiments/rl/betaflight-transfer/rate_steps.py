"""Rate steps through Betaflight 4.6.0's acro loop and through volary's ideal rate loop
(issue 58, part 4): three quad-X platforms x roll, pitch, yaw x three step sizes, the same
command to both.

Each step starts from 0.5 s of level hover at 2 m (hover thrust, zero body rates) and holds
a body rate of ``size`` deg/s (FLU: +x roll right, +y nose down, +z yaw left) for 0.5 s at
hover thrust. Betaflight: the platform's profile (``volary.fc.profiles``), a freshly started
firmware for every step, booted and gyro-calibrated on the ground (3 s), armed in acro at
zero throttle (0.5 s); then the vehicle is put level at rest at 2 m with its rotors at hover
speed and flown by ``volary.fc.ctbr.StickMap``'s sticks: 0.5 s of hover, then the step;
1 kHz exchanges, 2 kHz physics, volary's bmi085 IMU on the firmware's gyro.
Ideal: ``Simulator(control="ctbr")`` at the same 1 kHz control and 2 kHz physics, same seed,
perfect rate measurement (its own 30 Hz filter).

Measured on the true body rate of the stepped axis: rise time (10-90 % of the step), overshoot
(% of the step), RMS tracking error over the 0.5 s step and over its last 0.25 s, the largest
rate on the other two axes (coupling); and a first-order + delay fit
(y = size (1 - exp(-(t - L) / tau)), t > L) of each response, least squares. Betaflight rows
also record the height change and vertical speed at the end of the 0.5 s hover (the thrust
-> throttle map's check).

    .venv/bin/python experiments/rl/betaflight-transfer/rate_steps.py            # ~5 min on 2 cores

Writes results/rate-steps.json and .png here, prints a table. Unit of replication: platform
x axis x step size; all are reported.
"""

from __future__ import annotations

import argparse
import json
import math
import platform as host
import sys
import time
from pathlib import Path

import numpy as np
import torch

from volary.fc.betaflight import BetaflightLink, LinkConfig, Sticks, build
from volary.fc.ctbr import StickMap
from volary.fc.profiles import RATE_PROFILES
from volary.platforms import get
from volary.sim import SimConfig, Simulator

HERE = Path(__file__).resolve().parent
SCRIPT = "experiments/rl/betaflight-transfer/rate_steps.py"  # as stored in results, from root
OUT = HERE / "results" / "rate-steps.json"
PLATFORMS = ("fpv_racer_250", "research_quad_1kg", "crazyflie")
AXES = ("roll", "pitch", "yaw")
SIZES = (100.0, 200.0, 400.0)  # deg/s
RATE_HZ, PHYSICS_HZ = 1000.0, 2000.0
HOVER_S, STEP_S = 0.5, 0.5
START = (0.0, 0.0, 2.0)


def metrics(t: np.ndarray, y: np.ndarray, size: float, off: np.ndarray) -> dict[str, float]:
    """Step-response figures of ``y`` (deg/s, the stepped axis) after a step to ``size`` at
    t = 0; ``off`` (T, 2) the other axes' rates."""
    frac = y / size

    def first(level: float) -> float:
        hit = np.nonzero(frac >= level)[0]
        return float(t[hit[0]]) if hit.size else math.nan

    t10, t90 = first(0.1), first(0.9)
    err = y - size
    late = t >= STEP_S / 2
    return {
        "t10_s": t10,
        "t90_s": t90,
        "rise_s": t90 - t10,
        "overshoot_pct": float(max(0.0, (y.max() - size) / size * 100.0)),
        "rms_error_dps": float(np.sqrt(np.mean(err**2))),
        "rms_error_late_dps": float(np.sqrt(np.mean(err[late] ** 2))),
        "final_dps": float(y[-1]),
        "coupling_dps": float(np.abs(off).max()),
        **fit_fopdt(t, y, size),
    }


def fit_fopdt(t: np.ndarray, y: np.ndarray, size: float) -> dict[str, float]:
    """First-order + delay fit y = size (1 - exp(-(t - L) / tau)) for t > L (grid search, 1 ms
    in L, 1 ms in tau): (L, tau, RMS residual)."""
    best = (math.inf, 0.0, 0.0)
    for delay in np.arange(0.0, 0.08, 0.001):
        s = np.clip(t - delay, 0.0, None)
        for tau in np.arange(0.002, 0.4, 0.001):
            r = float(np.mean((y - size * (1.0 - np.exp(-s / tau))) ** 2))
            if r < best[0]:
                best = (r, float(delay), float(tau))
    return {"fit_delay_s": best[1], "fit_tau_s": best[2], "fit_rms_dps": math.sqrt(best[0])}


def _rates(axis: int, size: float) -> np.ndarray:
    r = np.zeros(3)
    r[axis] = math.radians(size)
    return r


def arm_and_hover(link: BetaflightLink, hover: Sticks, hover_s: float = HOVER_S) -> np.ndarray:
    """A fresh firmware: boot and gyro calibration on the ground (3 s), armed in acro at zero
    throttle (0.5 s), then the vehicle put level at rest at ``START`` with its rotors at hover
    speed and flown with ``hover`` sticks for ``hover_s``; returns the vehicle's (height
    change m, vertical speed m/s) at the end of the hover: how well the thrust map holds it."""
    link.reset()
    for _ in range(int(3.0 * RATE_HZ)):
        link.step(Sticks(throttle=0.0, angle=False))
    for _ in range(int(0.5 * RATE_HZ)):
        link.step(Sticks(throttle=0.0, arm=True, angle=False))
    link.sim.reset(pos=torch.tensor([START], dtype=torch.float64))
    for _ in range(int(hover_s * RATE_HZ)):
        r = link.step(hover)
    return np.array([r.pos[2] - START[2], r.vel[2]])


def betaflight_steps(name: str, seed: int) -> list[dict]:
    """Every (axis, size) step of one platform through Betaflight; traces and figures."""
    rp = RATE_PROFILES[name]
    a = get(name)
    m = StickMap.for_platform(name, rp)
    weight = a.mass * 9.81
    out = []
    hover = m.sticks(weight, (0.0, 0.0, 0.0))
    cfg = LinkConfig(profile=rp.profile(), rate_hz=RATE_HZ, physics_hz=PHYSICS_HZ, seed=seed)
    link = BetaflightLink(name, cfg)
    try:
        for axis in range(3):
            for size in SIZES:
                drift = arm_and_hover(link, hover)
                sticks = m.sticks(weight, _rates(axis, size))
                trace = [link.step(sticks).omega.copy() for _ in range(int(STEP_S * RATE_HZ))]
                out.append(_record(name, "betaflight", axis, size, np.degrees(trace), sticks))
                out[-1]["hover_dz_m"], out[-1]["hover_vz_mps"] = (float(v) for v in drift)
    finally:
        link.close()
    return out


def ideal_steps(name: str, seed: int) -> list[dict]:
    """The same steps through ``Simulator(control="ctbr")``."""
    a = get(name)
    sim = Simulator(a, SimConfig(physics_hz=PHYSICS_HZ, control_hz=RATE_HZ, control="ctbr",
                                 dtype=torch.float64, seed=seed, compile=False))  # fmt: skip
    weight = a.mass * 9.81
    out = []
    for axis in range(3):
        for size in SIZES:
            sim.reset(pos=torch.tensor([START], dtype=torch.float64))
            hover = torch.tensor([[weight, 0.0, 0.0, 0.0]], dtype=torch.float64)
            for _ in range(int(HOVER_S * RATE_HZ)):
                sim.step(hover)
            cmd = torch.tensor([[weight, *_rates(axis, size)]], dtype=torch.float64)
            trace = [sim.step(cmd).omega[0].numpy().copy() for _ in range(int(STEP_S * RATE_HZ))]
            out.append(_record(name, "ideal", axis, size, np.degrees(trace), None))
    return out


def _record(name: str, loop: str, axis: int, size: float, trace: np.ndarray, sticks) -> dict:
    t = np.arange(1, len(trace) + 1) / RATE_HZ  # the rate after each exchange
    y = trace[:, axis]
    off = np.delete(trace, axis, axis=1)
    rec = {"platform": name, "loop": loop, "axis": AXES[axis], "size_dps": size,
           **metrics(t, y, size, off), "trace_dps": [round(float(v), 3) for v in y]}  # fmt: skip
    if sticks is not None:
        rec["sticks"] = {"roll": sticks.roll, "pitch": sticks.pitch, "yaw": sticks.yaw,
                         "throttle": sticks.throttle}  # fmt: skip
    return rec


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(PLATFORMS), 3, figsize=(13, 9), sharex=True)
    colors = {100.0: "tab:blue", 200.0: "tab:orange", 400.0: "tab:green"}
    for i, name in enumerate(PLATFORMS):
        for j, axis in enumerate(AXES):
            ax = axes[i, j]
            for r in rows:
                if r["platform"] != name or r["axis"] != axis:
                    continue
                y = np.asarray(r["trace_dps"]) / r["size_dps"]
                t = np.arange(1, len(y) + 1) / RATE_HZ * 1000
                style = "-" if r["loop"] == "betaflight" else "--"
                ax.plot(t, y, style, color=colors[r["size_dps"]], lw=1.2)
            ax.axhline(1.0, color="k", lw=0.5)
            ax.set_title(f"{name}: {axis}", fontsize=9)
            ax.set_ylim(-0.1, 2.0)
            ax.grid(alpha=0.3)
            if i == len(PLATFORMS) - 1:
                ax.set_xlabel("time after the step (ms)")
            if j == 0:
                ax.set_ylabel("rate / commanded")
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], color="k", ls="-", label="Betaflight 4.6.0 (acro)"),
        Line2D([], [], color="k", ls="--", label="volary ideal loop (ctbr)"),
    ]
    handles += [Line2D([], [], color=c, label=f"{s:.0f} deg/s") for s, c in colors.items()]
    fig.legend(handles=handles, loc="upper center", ncol=5, fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def table(rows: list[dict]) -> str:
    head = (
        "| platform | axis | step (deg/s) | loop | rise 10-90 % (ms) | overshoot (%) | "
        "RMS error (deg/s) | RMS last 0.25 s | coupling (deg/s) | fit L, tau (ms) |"
    )
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        lines.append(
            f"| {r['platform']} | {r['axis']} | {r['size_dps']:.0f} | {r['loop']} | "
            f"{r['rise_s'] * 1000:.0f} | {r['overshoot_pct']:.1f} | {r['rms_error_dps']:.1f} | "
            f"{r['rms_error_late_dps']:.1f} | {r['coupling_dps']:.1f} | "
            f"{r['fit_delay_s'] * 1000:.0f}, {r['fit_tau_s'] * 1000:.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--platforms", default=",".join(PLATFORMS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    build()  # cached: returns at once when the SITL and lock-step library are there
    t0 = time.perf_counter()
    rows: list[dict] = []
    for name in args.platforms.split(","):
        bf, ideal = betaflight_steps(name, args.seed), ideal_steps(name, args.seed)
        for b, i in zip(bf, ideal, strict=True):
            rows += [b, i]
    profiles = {n: {"why": RATE_PROFILES[n].why, "cli": RATE_PROFILES[n].commands()}
                for n in args.platforms.split(",")}  # fmt: skip
    result = {
        "what": "rate steps through Betaflight 4.6.0 SITL (acro) and volary's ideal ctbr loop",
        "command": " ".join([SCRIPT, *(argv or sys.argv[1:])]),
        "setup": {"rate_hz": RATE_HZ, "physics_hz": PHYSICS_HZ, "hover_s": HOVER_S,
                  "step_s": STEP_S, "start": START, "sizes_dps": SIZES, "seed": args.seed,
                  "imu_betaflight": "bmi085", "measured": "true body rate (FLU), deg/s"},
        "unit_of_replication": "platform x axis x step size",
        "profiles": profiles,
        "machine": {"python": sys.version.split()[0], "host": host.platform()},
        "wall_s": None,
        "rows": rows,
    }  # fmt: skip
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    plot(rows, args.out.with_suffix(".png"))
    print(table(rows))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')} ({result['wall_s']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
