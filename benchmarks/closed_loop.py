"""Closed-loop speed: a vehicle with its controller, as a user flies it, volary beside its peers.

Two flights of one simulated second each, controller in the loop on every side, every
simulator with its own default settings:

- ``setpoint``: from rest at (0, 0, 1) m to a position setpoint (1, 0.5, 1.5) m, yaw 0, held
  (one setpoint tensor, or command array, passed at every control step);
- ``track``: a 1 m circle at 1 rad/s from (0, 0, 1) m, with the flat reference's position,
  velocity, acceleration and jerk given to the controller at every control step (volary:
  ``mellinger`` mode; crazyflow: its state controller; RotorPy: SE3Control's flat outputs).

Rows (each case in its own subprocess, median of ``--repeats`` timed flights after a warm-up
flight):

- ``volary-step``: ``Simulator("crazyflie", n_envs=N)`` with default settings (960 Hz physics,
  240 Hz control, RK4, noise, motor lag, drag, ground; ``compile="auto"``), a Python loop of
  ``sim.step(setpoint)`` reading ``state.pos`` after every step;
- ``volary-run``: the same Simulator, the whole second as ``sim.run(setpoint_or_schedule, 1.0)``;
- ``crazyflow``: ``Sim(n_worlds=N, control="state")``, its defaults (500 Hz first-principles
  dynamics, Euler, 100 Hz state controller), a loop of ``state_control(cmd); step(5)`` and
  ``block_until_ready`` on the state (what a user reading the state pays); ``crazyflow-rk4``: the
  same with ``integrator="rk4"`` (volary integrates RK4, so this row does equal integration work);
- ``rotorpy``: RotorPy ``Multirotor`` + ``SE3Control`` (numpy, one vehicle) at 500 Hz, its
  defaults, N = 1 only (it is not batched).

Reported: physics env-steps/s (N x physics rate x simulated seconds / wall seconds) and, at
N = 1, the real-time factor. Threads: torch (and numba, which follows it) 2, JAX/XLA defaults.
The first-call cost of each row (compile, or loading numba's disk cache) is reported too.

Baseline: ``--baseline-src DIR --impls volary-step,volary-step@base`` flies the ``@base`` rows
with the volary of another checkout (``DIR/src``), interleaved with this one's: what a change
did to a figure, measured in one run.

Contention (issue 62): ``--contention 0,1`` flies every case quiet and again beside one busy
process (a single-threaded Python loop, started before the case's subprocess and killed after),
interleaved case by case, volary and its peers in the same run; the table gives each row's
slowdown (busy wall / quiet wall) and, per contention level, the ratios to the peers. With one
busy process on a 2-core machine one core is left, so a slowdown up to 2x is what losing a core
costs. volary's rows report the thread count their steps ran on (``volary.cpu``).

Run: ``.venv-bench/bin/python benchmarks/closed_loop.py`` (``make bench-closed-loop``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from _timing import measure as timed
from _timing import print_spread_warnings

HERE = Path(__file__).resolve().parent
NS = (1, 64, 1024, 16384)
IMPLS = ("volary-step", "volary-run", "crazyflow", "crazyflow-rk4", "rotorpy")
TASKS = ("setpoint", "track")
MAX_N = {"rotorpy": 1}
THREADS = 2
GOAL = (1.0, 0.5, 1.5)


def circle(t):
    """Flat outputs of the 1 m, 1 rad/s circle through (0, 0, 1): p, v, a, j (3 each)."""
    c, s = math.cos(t), math.sin(t)
    return (c - 1.0, s, 1.0), (-s, c, 0.0), (-c, -s, 0.0), (s, -c, 0.0)


# ---------------------------------------------------------------- implementations -------------


def _volary(impl: str, task: str, n: int):
    import torch

    from volary.sim import Simulator

    torch.set_num_threads(THREADS)
    mode = "position" if task == "setpoint" else "mellinger"
    sim = Simulator("crazyflie", n_envs=n, control=mode)
    steps = int(sim.config.control_hz)
    if task == "setpoint":
        sched = torch.tensor([[[*GOAL, 0.0]]]).expand(steps, 1, 4)
    else:
        rows = []
        for k in range(steps):
            p, v, a, j = circle(k / sim.config.control_hz)
            rows.append([*p, *v, *a, *j, 0.0, 0.0])
        sched = torch.tensor(rows)[:, None, :]
    # a held setpoint is one tensor passed every step (what a user holding it writes); the
    # circle's reference is a new tensor each step
    per_step = [sched[0, 0]] * steps if task == "setpoint" else [sched[k, 0] for k in range(steps)]

    def fly_step() -> None:
        for sp in per_step:
            sim.step(sp).pos  # noqa: B018 - a user's loop reads the state

    def fly_run() -> None:
        sim.run(sched if task == "track" else sched[0, 0], 1.0)

    fly = fly_run if impl == "volary-run" else fly_step
    fly.physics_hz = sim.config.physics_hz
    fly.backend = sim.backend
    fly.threads = _volary_threads
    return fly


def _share():
    """volary's CoreShare when this process made one (its count of steps given fewer threads)."""
    mod = sys.modules.get("volary.cpu")
    return None if mod is None else mod._SHARED


def _volary_threads() -> int | None:
    """The threads volary's steps would take now (volary.cpu), for the record."""
    import torch

    try:
        from volary import cpu
    except ImportError:  # a --baseline-src checkout from before volary.cpu
        return None
    return cpu.step_threads(torch.get_num_threads())


def _crazyflow(impl: str, task: str, n: int):
    import jax
    import jax.numpy as jnp
    import numpy as np
    from crazyflow.sim import Sim

    kw = {"integrator": "rk4"} if impl == "crazyflow-rk4" else {}
    sim = Sim(n_worlds=n, n_drones=1, control="state", device="cpu", **kw)
    sim.reset()
    sub = sim.freq // sim.control_freq
    steps = sim.control_freq
    cmds = np.zeros((steps, n, 1, 16), np.float32)
    cmds[..., 12] = 1.0  # qw: crazyflow's state command is [p, v, a, q (xyzw), w]
    for k in range(steps):
        if task == "setpoint":
            cmds[k, :, 0, 0:3] = GOAL
        else:
            p, v, a, _ = circle(k / steps)
            cmds[k, :, 0, 0:3], cmds[k, :, 0, 3:6], cmds[k, :, 0, 6:9] = p, v, a
    cmds = [jnp.asarray(c) for c in cmds]
    if task == "setpoint":  # held: one command array every step, as volary's row holds its own
        cmds = [cmds[0]] * steps

    def fly() -> None:
        for c in cmds:
            sim.state_control(c)
            sim.step(sub)
            jax.block_until_ready(sim.data.states.pos)

    fly.physics_hz = sim.freq
    fly.backend = f"jax {kw.get('integrator', 'euler')}"
    return fly


def _rotorpy(impl: str, task: str, n: int):
    import numpy as np
    from rotorpy.controllers.quadrotor_control import SE3Control
    from rotorpy.vehicles.crazyflie_params import quad_params
    from rotorpy.vehicles.multirotor import Multirotor

    hz = 500
    state0 = {
        "x": np.array([0.0, 0.0, 1.0]),
        "v": np.zeros(3),
        "q": np.array([0.0, 0.0, 0.0, 1.0]),
        "w": np.zeros(3),
        "wind": np.zeros(3),
        "rotor_speeds": np.full(4, 1788.53),
    }
    quad = Multirotor(quad_params, initial_state=state0)
    ctrl = SE3Control(quad_params)
    flats = []
    for k in range(hz):
        if task == "setpoint":
            p, v, a, j = GOAL, (0.0,) * 3, (0.0,) * 3, (0.0,) * 3
        else:
            p, v, a, j = circle(k / hz)
        flats.append(
            {
                "x": np.array(p),
                "x_dot": np.array(v),
                "x_ddot": np.array(a),
                "x_dddot": np.array(j),
                "x_ddddot": np.zeros(3),
                "yaw": 0.0,
                "yaw_dot": 0.0,
            }
        )
    holder = [dict(state0)]

    def fly() -> None:
        s = holder[0]
        for k, flat in enumerate(flats):
            s = quad.step(s, ctrl.update(k / hz, s, flat), 1.0 / hz)
        holder[0] = s

    fly.physics_hz = hz
    fly.backend = "numpy (scipy solve_ivp)"
    return fly


def _setup(impl: str, task: str, n: int):
    if impl.startswith("volary"):
        return _volary(impl, task, n)
    if impl.startswith("crazyflow"):
        return _crazyflow(impl, task, n)
    return _rotorpy(impl, task, n)


# ---------------------------------------------------------------- measuring -------------------


def measure(impl: str, task: str, n: int, repeats: int) -> dict:
    t0 = time.perf_counter()
    fly = _setup(impl, task, n)
    setup_s = time.perf_counter() - t0
    # one warm-up flight: compiles (or loads numba's cache) on the first step
    timing = timed(fly, warmup=1, repeats=repeats, label=f"{impl} {task} N={n}")
    first_s, walls, wall = timing.warmup_s, list(timing.samples), timing.median
    threads = getattr(fly, "threads", None)
    share = _share()
    return {
        "step_threads": threads() if threads is not None else None,
        "steps_on_fewer_threads": None if share is None else f"{share.fewer}/{share.calls}",
        "impl": impl,
        "task": task,
        "n": n,
        "backend": fly.backend,
        "physics_hz": fly.physics_hz,
        "wall_s_per_sim_s": wall,
        "wall_s_all": walls,
        "env_steps_per_s": n * fly.physics_hz / wall,
        "real_time_factor": 1.0 / wall,
        "setup_s": setup_s,
        "first_flight_s": first_s,
        "flight_s": timing.to_json(),
    }


BUSY = "while True: pass"  # one core's worth of someone else's work


def _busy(k: int) -> list[subprocess.Popen]:
    """``k`` busy processes (single-threaded Python loops); give them a moment to start."""
    procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(k)]
    if procs:
        time.sleep(0.5)
    return procs


def _run_case(impl: str, task: str, n: int, args, contention: int = 0) -> dict:
    base = impl.endswith("@base")  # volary from --baseline-src: another checkout's code
    cmd = [sys.executable, __file__, "--child", impl.removesuffix("@base"), task, str(n),
           "--repeats", str(args.repeats)]  # fmt: skip
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if base:
        env["PYTHONPATH"] = str(Path(args.baseline_src).resolve() / "src")
    head = {"impl": impl, "task": task, "n": n, "contention": contention}
    busy = _busy(contention)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.case_timeout, env=env)
    except subprocess.TimeoutExpired:
        return {**head, "error": f"timeout ({args.case_timeout} s)"}
    finally:
        for b in busy:
            b.kill()
            b.wait()
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return {**json.loads(line[7:]), "impl": impl, "contention": contention}
    tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
    return {**head, "error": " | ".join(tail)}


# ---------------------------------------------------------------- report ----------------------


def _machine() -> dict:
    import platform
    from importlib.metadata import PackageNotFoundError, version

    sys.path.insert(0, str(HERE))
    from _timing import machine

    versions = {}
    for mod in ("torch", "numba", "jax", "crazyflow", "rotorpy"):
        try:
            versions[mod] = version(mod)
        except PackageNotFoundError:
            versions[mod] = None
    return {
        **machine(),
        "platform": platform.platform(),
        "threads": THREADS,
        "torch_threads": THREADS,  # the case processes' (this parent's own is torch's default)
        "versions": versions,
    }


def _ratio(by: dict, a: str, b: str, task: str, n: int) -> float | None:
    x, y = by.get((a, task, n), {}), by.get((b, task, n), {})
    if "env_steps_per_s" in x and "env_steps_per_s" in y:
        return x["env_steps_per_s"] / y["env_steps_per_s"]
    return None


def _table(rows: list[dict], ns: list[int], impls: list[str], tasks: list[str]) -> dict:
    by = {(r["impl"], r["task"], r["n"]): r for r in rows}
    ratios = {}
    for task in tasks:
        print(f"\n{task}: physics env-steps/s (median), x real time at N = 1")
        print(f"{'impl':<15}" + "".join(f"{'N=' + str(n):>16}" for n in ns) + f"{'RT x (N=1)':>12}")
        for impl in impls:
            cells = []
            for n in ns:
                r = by.get((impl, task, n))
                cells.append(
                    "-"
                    if r is None
                    else ("err" if "error" in r else f"{r['env_steps_per_s'] / 1e6:.4f}M")
                )
            one = by.get((impl, task, 1), {})
            rt = f"{one['real_time_factor']:.0f}" if "real_time_factor" in one else "-"
            print(f"{impl:<15}" + "".join(f"{c:>16}" for c in cells) + f"{rt:>12}")
        for ours in ("volary-step", "volary-run"):
            for peer in ("volary-step@base", "volary-run@base", "crazyflow", "crazyflow-rk4",
                         "rotorpy"):  # fmt: skip
                line = {n: _ratio(by, ours, peer, task, n) for n in ns}
                if any(v is not None for v in line.values()):
                    ratios[f"{task}: {ours} / {peer}"] = line
                    cells = "".join(
                        f"{('-' if v is None else f'{v:.2f}x'):>16}" for v in line.values()
                    )
                    print(f"{'  ratio':<15}" + cells + f"   {ours} / {peer}")
    return ratios


def _slowdown(rows: list[dict], levels: list[int], ns, impls, tasks) -> dict:
    """Wall beside k busy processes over the quiet wall, per row (printed and returned)."""
    by = {(r["impl"], r["task"], r["n"], r.get("contention", 0)): r for r in rows}
    out: dict = {}
    for k in [k for k in levels if k > 0]:
        if 0 not in levels:
            break
        print(f"\nslowdown beside {k} busy process(es): wall / quiet wall (threads busy, quiet)")
        for task in tasks:
            print(f"{task:<15}" + "".join(f"{'N=' + str(n):>16}" for n in ns))
            for impl in impls:
                cells, line = [], {}
                for n in ns:
                    q, b = by.get((impl, task, n, 0), {}), by.get((impl, task, n, k), {})
                    if "wall_s_per_sim_s" in q and "wall_s_per_sim_s" in b:
                        line[n] = b["wall_s_per_sim_s"] / q["wall_s_per_sim_s"]
                        th = f" ({b['step_threads']},{q['step_threads']})" if b.get(
                            "step_threads") else ""  # fmt: skip
                        cells.append(f"{line[n]:.2f}x{th}")
                    else:
                        cells.append("-")
                out[f"{task}: {impl} x{k}"] = line
                print(f"{impl:<15}" + "".join(f"{c:>16}" for c in cells))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE / "results" / "closed_loop.json")
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--ns", default=",".join(map(str, NS)))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--case-timeout", type=float, default=600.0)
    ap.add_argument(
        "--contention",
        default="0",
        help="busy processes beside each case, a comma list flown interleaved (e.g. 0,1)",
    )
    ap.add_argument(
        "--baseline-src",
        help="a checkout of another volary commit: rows IMPL@base fly its code (list them in "
        "--impls, e.g. volary-step@base), interleaved with this checkout's",
    )
    ap.add_argument("--child", nargs=3, metavar=("IMPL", "TASK", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        impl, task, n = args.child
        print("RESULT " + json.dumps(measure(impl, task, int(n), args.repeats)), flush=True)
        return
    impls, tasks = args.impls.split(","), args.tasks.split(",")
    if any(i.endswith("@base") for i in impls) and not args.baseline_src:
        ap.error("--impls: an IMPL@base row needs --baseline-src")
    ns = [int(x) for x in args.ns.split(",")]
    levels = [int(x) for x in args.contention.split(",")]
    if any(k < 0 for k in levels):
        ap.error(f"--contention: expected busy-process counts >= 0, got {args.contention}")
    machine_info = _machine()  # before the cases: the load average at the start
    rows = []
    for n in ns:  # peers side by side at each N, interleaved (and each quiet beside busy)
        for task in tasks:
            for impl in impls:
                if n > MAX_N.get(impl, n):
                    continue
                for k in levels:
                    row = _run_case(impl, task, n, args, k)
                    print(json.dumps(row), flush=True)
                    print_spread_warnings(row)
                    rows.append(row)
    ratios = {}
    for k in levels:
        if len(levels) > 1:
            print(f"\n===== beside {k} busy process(es) =====")
        mine = [r for r in rows if r.get("contention", 0) == k]
        ratios[str(k)] = _table(mine, ns, impls, tasks)
    slowdown = _slowdown(rows, levels, ns, impls, tasks)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    info = {"machine": machine_info, "doc": __doc__, "contention": levels, "results": rows,
            "ratios": ratios if len(levels) > 1 else ratios[str(levels[0])],
            "slowdown": slowdown}  # fmt: skip
    args.out.write_text(json.dumps(info, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
