"""Physics-step throughput (env-steps/s) of volary and its peers, side by side.

Run: ``make bench`` (builds ``.venv-bench`` with crazyflow, l2f, rotorpy) or
``.venv-bench/bin/python benchmarks/physics.py --out out/bench``.

Each (implementation, N) runs in its own subprocess (so peak RSS is per case and one library's
thread pools do not disturb another's). The harness warms up (compiles), calibrates the number of
calls per repeat to about ``--repeat-seconds``, and reports the median and IQR of >= 5 repeats.
torch runs with ``torch.set_num_threads(2)``; JAX (XLA) and l2f (OpenMP) keep their defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _timing import measure as timed
from _timing import print_spread_warnings

HERE = Path(__file__).resolve().parent
NS = (1, 64, 1024, 16384, 65536)
VOLARY = (
    "volary-default",
    "volary-bound",
    "volary-eager",
    "volary-compiled",
    "volary-compiled-x8",
    "volary-numba",
    "volary-numba-x8",
    "volary-numba-x32",
)
PEERS = ("crazyflow", "l2f", "rotorpy")
MAX_N = {"rotorpy": 16384}  # rotorpy takes ~5 s per step at N = 65536
TORCH_THREADS = 2

VOLARY_INFO = {
    "step": "physics_step: FlightGoggles rigid-body model, 4 rotors (quad_x), k_f w|w| thrust and "
    "reaction moments through the allocation matrix, first-order motor lag (up/down), "
    "body drag (linear + quadratic), rotational aero moment, full inertia matrix, "
    "counter-based stochastic force/moment and Gauss-Markov gust, RK4 at 960 Hz, "
    "quaternion renormalization, command sanitizing/clamping, ground contact and "
    "NaN/divergence guard; float32, torch threads = 2",
    "volary-default": "make_stepper(cfg, 4, compile=resolve_backend('auto', 'cpu', "
    "'rigid_body', N)): the physics a default Simulator runs (960 Hz physics under 240 Hz "
    "control: 4 substeps per call; numba below 1,024 envs, inductor from there), counted "
    "as 4 env-steps per env",
    "volary-bound": "bind_stepper(cfg, params, state, dist=, keys=, substeps=4) (compile='auto': "
    "the same backend as volary-default): the same physics stepped in place on buffers the "
    "stepper owns, step(command) returns nothing (l2f's and MuJoCo's calling convention); "
    "counted as 4 env-steps per env",
    "volary-eager": "make_stepper(cfg, 1, compile=False) (= rollout, the reference)",
    "volary-compiled": "make_stepper(cfg, 1, compile=True): one physics step per call",
    "volary-compiled-x8": "make_stepper(cfg, 8, compile=True): 8 physics steps per call "
    "(command held), counted as 8 env-steps per env",
    "volary-numba": "make_stepper(cfg, 1, compile='numba'): the same step as one numba kernel "
    "(single-threaded loop over envs), one physics step per call",
    "volary-numba-x8": "make_stepper(cfg, 8, compile='numba'): 8 physics steps per call "
    "(command held), counted as 8 env-steps per env",
    "volary-numba-x32": "make_stepper(cfg, 32, compile='numba'): 32 physics steps per call "
    "(command held; 30 Hz control over 960 Hz physics), counted as 32 env-steps per env",
    "volary-warp": "make_stepper(cfg, 1, compile='warp'): the same step as one Warp kernel (a "
    "thread per env, state in registers; CUDA, or Warp's single-threaded CPU device), one "
    "physics step per call; not in the default list (run it with --impls on a GPU)",
    "volary-warp-x8": "make_stepper(cfg, 8, compile='warp'): 8 physics steps per launch "
    "(command held), counted as 8 env-steps per env",
    "volary-warp-x32": "make_stepper(cfg, 32, compile='warp'): 32 physics steps per launch "
    "(command held; 30 Hz control over 960 Hz physics), counted as 32 env-steps per env",
    "+aero": "any volary row with '+aero' appended (e.g. volary-default+aero): the same step with "
    "every rotor-aerodynamics effect of dynamics/aero.py on (rotor drag in-plane and axial, "
    "blade flapping, axial inflow, translational lift, ground effect over z = 0; coefficients "
    "AERO below, illustrative: the cost does not depend on their values); the table after the "
    "main one gives its throughput over the row without it, both measured in the same run; "
    "'+aero-<field>' (e.g. +aero-flapping) turns one effect on",
}
# rotor aerodynamics of the '+aero' rows (Airframe fields), of a plausible size for the 1 kg frame
AERO = {
    "rotor_drag_inplane": 5e-5,
    "rotor_drag_axial": 5e-5,
    "flapping": 1e-6,
    "inflow_axial": 1e-5,
    "translational_lift": 1e-6,
    "ground_effect_radius": 0.06,
}


# ---------------------------------------------------------------- implementations -------------


def _volary_setup(impl: str, n: int, seed: int, device: str = "cpu"):
    import torch

    from volary.dynamics import (
        Airframe,
        Disturbance,
        DynamicsConfig,
        MultirotorState,
        VehicleParams,
        hover_speeds,
    )
    from volary.dynamics.compiled import make_stepper
    from volary.math.random import env_keys
    from volary.platforms import layout

    torch.set_num_threads(TORCH_THREADS)
    pos, axes, dirs = layout("quad_x", 0.08)
    af = Airframe(
        name="fg",
        mass=1.0,
        inertia=(0.0049, 0.0049, 0.0069),
        rotor_positions=pos,
        rotor_axes=axes,
        rotor_directions=dirs,
        k_f=1.91e-6,
        k_m=2.6e-7,
        max_rotor_speed=2200.0,
        motor_tau_up=0.033,
        motor_tau_down=0.033,
        drag_linear=(0.01, 0.01, 0.01),
        drag_quadratic=(0.1, 0.1, 0.1),
        drag_moment=(1e-4, 1e-4, 1e-4),
        force_noise=0.01,
        moment_noise=1e-3,
    )
    impl, aero_on, only = impl.partition("+aero")
    if aero_on:  # '+aero': every effect; '+aero-flapping': that one only
        af = af.replace(**({only[1:]: AERO[only[1:]]} if only else AERO))
    params = VehicleParams.from_airframes(af, n, device=device)
    w = hover_speeds(params)
    state = MultirotorState.create(n, 4, pos=[0.0, 0.0, 1.0], device=device)
    state = state.replace(rotor_speed=w.clone())
    dist = Disturbance.create(n, device=device)
    keys = env_keys(seed, torch.arange(n, device=device))
    kind, _, fused = impl.removeprefix("volary-").partition("-x")
    substeps = int(fused) if fused else 1
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    if kind == "bound":
        from volary.dynamics.bound import bind_stepper

        bound = bind_stepper(DynamicsConfig(), params, state, dist=dist, keys=keys, substeps=4)
        substeps = 4

        def step_fn() -> None:
            bound.step(w)
            sync()

    else:
        if kind == "default":
            from volary.sim.simulator import resolve_backend

            kind, substeps = resolve_backend("auto", device, "rigid_body", n), 4
        backend = {"eager": "eager", "compiled": "inductor", "numba": "numba"}.get(kind, kind)
        step = make_stepper(DynamicsConfig(), substeps, compile=backend)
        holder = [state]

        def step_fn() -> None:
            holder[0] = step(params, holder[0], w, dist, keys)
            sync()  # a call is timed until the GPU has finished it

    tensors = [getattr(x, f) for x in (state, params) for f in x.__dataclass_fields__]
    step_fn.bytes_per_env = sum(t.numel() * t.element_size() for t in tensors) / n
    step_fn.steps_per_call = substeps
    return step_fn


def _setup(impl: str, n: int, seed: int, device: str = "cpu"):
    if impl.startswith("volary"):
        return _volary_setup(impl, n, seed, device)
    if device != "cpu":
        raise ValueError(f"--device {device}: the peers are measured on the CPU only")
    sys.path.insert(0, str(HERE))
    import importlib

    return importlib.import_module(f"peers.{impl}").setup(n, seed)


# ---------------------------------------------------------------- measuring -------------------


def measure(
    impl: str, n: int, repeats: int, repeat_s: float, seed: int = 0, device: str = "cpu"
) -> dict:
    """Warm-up, calibrate, then ``repeats`` timed runs of many calls; returns one result row."""
    t0 = time.perf_counter()
    step_fn = _setup(impl, n, seed, device)
    step_fn()  # first call: compile / jit
    warm_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    step_fn()
    step_fn()
    per_call = max((time.perf_counter() - t1) / 2, 1e-7)
    calls = max(1, int(repeat_s / per_call))
    spc = getattr(step_fn, "steps_per_call", 1)
    timing = timed(step_fn, warmup=0, repeats=repeats, number=calls, label=f"{impl} N={n}")
    rates = [n * spc / s for s in timing.samples]
    q = statistics.quantiles(rates, n=4)
    return {
        "impl": impl,
        "n": n,
        "device": device,
        "steps_per_s": statistics.median(rates),
        "iqr": q[2] - q[0],
        "repeats": repeats,
        "calls_per_repeat": calls,
        "steps_per_call": spc,
        "setup_and_compile_s": warm_s,
        "call_s": timing.to_json(),
        "bytes_per_env": getattr(step_fn, "bytes_per_env", None),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        **_gpu_memory(device, n),
    }


def _gpu_memory(device: str, n: int) -> dict:
    """Peak GPU memory of the case (torch's allocator; Warp allocates nothing here: its kernel
    reads and writes torch's tensors), in all and per env."""
    if not device.startswith("cuda"):
        return {}
    import torch

    peak = torch.cuda.max_memory_allocated()
    return {"gpu_peak_bytes": peak, "gpu_bytes_per_env": peak / n}


def _child(args) -> None:
    row = measure(args.impl, args.n, args.repeats, args.repeat_seconds, device=args.device)
    print("RESULT " + json.dumps(row), flush=True)


def _run_case(impl: str, n: int, args) -> dict:
    repeats = 5
    cmd = [
        sys.executable,
        __file__,
        "--child",
        "--impl",
        impl,
        "--n",
        str(n),
        "--repeats",
        str(repeats),
        "--repeat-seconds",
        str(args.repeat_seconds),
        "--device",
        args.device,
    ]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.case_timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"impl": impl, "n": n, "error": f"timeout after {args.case_timeout} s"}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
    return {"impl": impl, "n": n, "error": " | ".join(tail)}


# ---------------------------------------------------------------- report ----------------------


def _machine() -> dict:
    import torch
    from _timing import machine

    versions = {"torch": torch.__version__}
    for mod in ("jax", "crazyflow", "l2f", "rotorpy"):
        try:
            from importlib.metadata import version

            versions[mod] = version(mod)
        except Exception:  # noqa: BLE001 - not installed
            versions[mod] = None
    return {
        **machine(),
        "platform": platform.platform(),
        "torch_threads": TORCH_THREADS,
        "cuda": torch.cuda.is_available(),
        "versions": versions,
    }


def _table(rows: list[dict], ns: list[int], impls: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    by = {(r["impl"], r["n"]): r for r in rows}
    best = {
        n: max(
            (by[(i, n)]["steps_per_s"] for i in PEERS if "steps_per_s" in by.get((i, n), {})),
            default=None,
        )
        for n in ns
    }
    t = Table(title="env-steps/s (median of 5; x = ratio to the best peer at that N)")
    t.add_column("impl")
    for n in ns:
        t.add_column(f"N={n}", justify="right")
    for i in impls:
        cells = []
        for n in ns:
            r = by.get((i, n), {})
            if "steps_per_s" not in r:
                cells.append("-" if not r else "err")
                continue
            ratio = f" ({r['steps_per_s'] / best[n]:.2f}x)" if best[n] else ""
            cells.append(f"{r['steps_per_s'] / 1e6:.3f}M{ratio}")
        t.add_row(i, *cells)
    Console(width=160).print(t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("out/bench"))
    ap.add_argument("--impls", default=",".join(VOLARY + PEERS))
    ap.add_argument("--ns", default=",".join(map(str, NS)))
    ap.add_argument("--repeat-seconds", type=float, default=0.3)
    ap.add_argument("--case-timeout", type=float, default=240.0)
    ap.add_argument("--device", default="cpu", help="cpu or cuda (volary rows only)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--impl", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--repeats", type=int, default=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return _child(args)
    impls, ns = args.impls.split(","), [int(x) for x in args.ns.split(",")]
    devices = [args.device]
    machine_info = _machine()  # before the cases: the load average at the start
    rows = []
    for n in ns:  # the implementations interleaved at each N
        for impl in impls:
            if n > MAX_N.get(impl, n):
                continue
            row = _run_case(impl, n, args)
            print(json.dumps(row), flush=True)
            print_spread_warnings(row)
            rows.append(row)
    info = {
        "machine": machine_info,
        "devices": devices,
        "volary": VOLARY_INFO,
        "peers": {p: _peer_info(p) for p in PEERS if p in impls},
        "skipped": {k: f"N > {v}" for k, v in MAX_N.items()},
        "results": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    name = "physics.json" if args.device == "cpu" else f"physics-{args.device}.json"
    (args.out / name).write_text(json.dumps(info, indent=2))
    _table(rows, ns, impls)
    _aero_table(rows, ns, impls)
    print(f"wrote {args.out / name}")


def _aero_table(rows: list[dict], ns: list[int], impls: list[str]) -> None:
    """Throughput with the rotor aerodynamics over without, per row pair of this run."""
    pairs = [(i, j) for i in impls for j in impls if j.startswith(i + "+aero")]
    if not pairs:
        return
    from rich.console import Console
    from rich.table import Table

    by = {(r["impl"], r["n"]): r.get("steps_per_s") for r in rows}
    t = Table(title="rotor aerodynamics on / off (env-steps/s ratio, same run)")
    t.add_column("impl")
    for n in ns:
        t.add_column(f"N={n}", justify="right")
    for i, j in pairs:
        cells = []
        for n in ns:
            on, off = by.get((j, n)), by.get((i, n))
            cells.append(f"{on / off:.2f}x" if on and off else "-")
        t.add_row(f"{j} / {i}", *cells)
    Console(width=160).print(t)


def _peer_info(name: str) -> dict:
    sys.path.insert(0, str(HERE))
    import importlib

    try:
        return importlib.import_module(f"peers.{name}").INFO
    except Exception as e:  # noqa: BLE001 - a missing peer is reported, not fatal
        return {"error": repr(e)}


if __name__ == "__main__":
    main()
