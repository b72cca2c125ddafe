"""``volary demo``: the one-minute tour (:mod:`volary.cli.showcase`), or with ``--suite`` a
benchmark suite (straight + mapper, or straight + reactive when the mapper is not installed)
in a process pool, then its HTML report.

When the benchmark's episode or report is not importable, the earlier demo runs instead: fly
several catalogue platforms in one mixed batch through a setpoint sequence and write a
self-contained HTML page with a table, plots, the scenario types and sensor previews."""

from __future__ import annotations

import base64
import html
import math
import time
from pathlib import Path

import torch
from rich.console import Console

from volary.cli.showcase import DEMO_DB, demo_algos, run_showcase

WAYPOINTS = ((0.0, 0.0, 1.0), (2.0, 0.0, 1.5), (2.0, 2.0, 1.5), (0.0, 2.0, 1.0), (0.0, 0.0, 1.0))
SEGMENT_S = 4.0
DEMO_PLATFORMS = (
    "crazyflie",
    "fpv_racer_250",
    "research_quad_1kg",
    "sous_vide",
    "hexa",
    "octo",
    "y6",
    "tilted_hexa",
)


def _platforms() -> list[str]:
    from volary.platforms import names

    known = set(names())
    chosen = [n for n in DEMO_PLATFORMS if n in known]
    return chosen + names("flyingtrust-real")[:1] + names("flyingtrust-virtual")[-1:]


def setpoint_at(t: float, n: int) -> torch.Tensor:
    """Position setpoint [x, y, z, yaw] of the sequence at time t (s)."""
    k = min(int(t // SEGMENT_S), len(WAYPOINTS) - 1)
    x, y, z = WAYPOINTS[k]
    return torch.tensor([x, y, z, 0.0]).expand(n, 4)


def _metrics(traj, names: list[str]) -> list[dict]:
    rows = []
    steps_per_seg = int(round(SEGMENT_S / float(traj.time[1] - traj.time[0])))
    for i, name in enumerate(names):
        errs, settle = [], []
        for k, wp in enumerate(WAYPOINTS):
            seg = traj.pos[k * steps_per_seg : (k + 1) * steps_per_seg, i]
            e = (seg - torch.tensor(wp)).norm(dim=-1)
            errs.append(float(e[-1]))
            outside = torch.nonzero(e > 0.05)
            last = int(outside[-1]) + 1 if len(outside) else 0
            settle.append(last * SEGMENT_S / steps_per_seg if last < len(e) else math.inf)
        rows.append(
            {
                "platform": name,
                "final_err_cm": 100 * max(errs),
                "settle_s": max(settle),
                "crashed": bool(traj.crashed[-1, i]),
            }
        )
    return rows


def _img(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def _top_view(traj, names: list[str], path: Path) -> Path:
    from volary.sensors.plots import _pyplot

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 5.5))
    wp = torch.tensor(WAYPOINTS)
    ax.plot(wp[:, 0], wp[:, 1], "k:", lw=1, label="setpoints")
    for i, n in enumerate(names):
        ax.plot(traj.pos[:, i, 0], traj.pos[:, i, 1], lw=1.2, label=n)
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_aspect("equal")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run_demo(
    out: Path,
    *,
    seed: int = 0,
    device: str = "cpu",
    suite: str | None = None,
    console: Console | None = None,
) -> Path:
    """Run the demo and return the path of the HTML page (``out/index.html``): the one-minute
    tour (:mod:`volary.cli.showcase`), or with ``suite`` (a built-in suite name or a suite
    TOML file, ``volary.studies.flyingtrust.protocol.get_suite``) that suite and its report."""
    console = console or Console(soft_wrap=True)
    if not _benchmark_available():
        console.print("[yellow]navigation benchmark not available: vehicles demo[/yellow]")
        return run_vehicles_demo(out, seed=seed, device=device, console=console)
    if suite is None:
        return run_showcase(out, seed=seed, console=console)
    return run_quick_suite_demo(out, seed=seed, suite=suite, console=console)


def _benchmark_available() -> bool:
    import importlib.util

    return all(
        importlib.util.find_spec(m) is not None
        for m in ("volary.studies.flyingtrust.episode", "volary.studies.flyingtrust.report")
    )


def run_quick_suite_demo(
    out: Path, *, seed: int = 0, suite: str = "quick", console: Console | None = None
) -> Path:
    """A suite (the quick one by default) flown afresh into ``out/run.sqlite``, then the
    report in ``out``."""
    from volary.cpu import usable_cores
    from volary.studies.flyingtrust.db import load_results
    from volary.studies.flyingtrust.protocol import get_suite
    from volary.studies.flyingtrust.report import make_report
    from volary.studies.flyingtrust.run import run_suite

    console = console or Console(soft_wrap=True)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    db = out / DEMO_DB
    db.unlink(missing_ok=True)  # the demo always flies afresh with the code as it is now
    spec, algos = get_suite(suite), demo_algos()
    workers = usable_cores()  # affinity and cgroup quota, not the host's core count
    console.print(
        f"{spec.name} suite: {spec.n_trials(len(algos))} trials ({', '.join(algos)}), "
        f"{len(spec.platforms)} platforms x {len(spec.scenarios)} scenario types x "
        f"{spec.n_configs()} configurations, {workers} workers -> {db}",
        markup=False,  # the suite's name and the path are the user's text
    )
    t0 = time.perf_counter()
    summary = run_suite(spec, algos, db, workers=workers, seed=seed, progress=True)
    console.print(
        f"{summary.done} trials in {time.perf_counter() - t0:.0f} s, "
        f"{summary.successes} successes, {summary.errors} errors"
    )
    with console.status("writing the report..."):
        index = make_report(
            load_results(db),
            out,
            title=f"volary demo: the {spec.name} navigation suite",
            suite=spec,
        )
    return Path(index)


def run_vehicles_demo(
    out: Path, *, seed: int = 0, device: str = "cpu", console: Console | None = None
) -> Path:
    """The earlier demo: platforms flying a setpoint sequence, worlds and sensors."""
    from volary.platforms import get, indicators
    from volary.sim import Simulator
    from volary.sim.plots import plot_trajectory

    console = console or Console(soft_wrap=True)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    names = _platforms()
    sim = Simulator(names, control="position", seed=seed, device=device)
    duration = SEGMENT_S * len(WAYPOINTS)
    t0 = time.perf_counter()
    with console.status(f"flying {len(names)} platforms for {duration:.0f} s of sim time..."):
        traj = sim.run(lambda t: setpoint_at(t, sim.n_envs), duration)
    wall = time.perf_counter() - t0
    rows = _metrics(traj, names)
    top = _top_view(traj, names, out / "top_view.png")
    plots = [plot_trajectory(traj, out / f"{n}.png", env=i, title=n) for i, n in enumerate(names)]
    for i, n in enumerate(names):
        traj.to_csv(out / f"{n}.csv", env=i)
    info = {n: (get(n), indicators(get(n))) for n in names}
    with console.status("generating the seven scenario types and casting sensor rays..."):
        worlds = _worlds(out / "worlds", seed)
    page = _html(rows, info, top, plots, duration, wall, seed) + worlds + "</body></html>"
    index = out / "index.html"
    index.write_text(page)
    return index


def _html(rows, info, top, plots, duration, wall, seed) -> str:
    trs = []
    for r in rows:
        a, ind = info[r["platform"]]
        ok = "crashed" if r["crashed"] else ("settled" if math.isfinite(r["settle_s"]) else "-")
        trs.append(
            f"<tr><td>{html.escape(r['platform'])}</td><td>{a.n_rotors}</td><td>{a.mass:.3f}</td>"
            f"<td>{ind.twr_max:.2f}</td><td>{ind.alpha_xy_max:.0f}</td>"
            f"<td>{r['final_err_cm']:.2f}</td><td>{r['settle_s']:.2f}</td><td>{ok}</td></tr>"
        )
    figs = "".join(
        f'<figure><img src="{_img(p)}"><figcaption>{html.escape(p.stem)}</figcaption></figure>'
        for p in plots
    )
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>volary demo</title>
<style>body{{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}}
table{{border-collapse:collapse}}td,th{{padding:4px 10px;border-bottom:1px solid #ddd;
text-align:right}}td:first-child,th:first-child{{text-align:left}}
figure{{display:inline-block;margin:6px;width:520px}}img{{width:100%}}</style></head><body>
<h1>volary demo</h1>
<p>{len(rows)} catalogue platforms, one mixed batch, Lee position control at 240 Hz over
rigid-body physics at 960 Hz (RK4, motor lag, drag, stochastic force/moment), flying the
waypoints {list(WAYPOINTS)} with {SEGMENT_S:.0f} s per waypoint. {duration:.0f} s of sim time in
{wall:.1f} s of wall time. Seed {seed}.</p>
<h2>Tracking</h2>
<table><tr><th>platform</th><th>rotors</th><th>mass [kg]</th><th>TWR_max</th>
<th>&alpha;<sub>xy,max</sub> [rad/s&sup2;]</th><th>worst end-of-segment error [cm]</th>
<th>worst 5 cm settling time [s]</th><th>status</th></tr>{"".join(trs)}</table>
<h2>Top view</h2><img src="{_img(top)}" style="width:560px">
<h2>Each platform</h2>{figs}"""


SENSOR_SCENES = ("forest", "urban")


def _worlds(out: Path, seed: int) -> str:
    """HTML section: a top view of every scenario type, and a depth image and LiDAR scan from
    the start pose of a few of them."""
    from volary.sensors.preview import preview_sensors
    from volary.worlds import SCENARIOS, make_scenario
    from volary.worlds.preview import plot_top_view

    out.mkdir(parents=True, exist_ok=True)
    figs, sensor_figs = [], []
    for kind in SCENARIOS:
        spec = make_scenario(kind, seed)
        figs.append((plot_top_view(spec, out / f"{kind}-{seed}.png"), kind))
        if kind in SENSOR_SCENES:
            for p in preview_sensors(spec, out, f"{kind}-{seed}"):
                sensor_figs.append((p, f"{kind}: {p.stem.rsplit('-', 1)[-1]}"))

    def fig(p: Path, cap: str) -> str:
        return f'<figure><img src="{_img(p)}"><figcaption>{html.escape(cap)}</figcaption></figure>'

    return (
        "<h2>Worlds</h2><p>The seven FLYINGTRUST scenario types (seed "
        f"{seed}), each checked solvable for a 0.3 m vehicle.</p>"
        + "".join(fig(p, c) for p, c in figs)
        + "<h2>Sensors</h2><p>Ray-cast depth camera (D455-like, 270 x 480) and LiDAR "
        "(Ouster OS1-64-like) from the start pose, noise-free.</p>"
        + "".join(fig(p, c) for p, c in sensor_figs)
    )
