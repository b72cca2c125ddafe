"""``volary``: platforms, fly, bench, demo. Thin commands over the library."""

from __future__ import annotations

import gc
import inspect
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from volary.cli.checks import VolaryGroup, add_options, export_names_file, set_root
from volary.cli.ros2 import SceneParams
from volary.options import SetOption, console, fail
from volary.studies.alphapilot.cli import OPTIONS as RACE_OPTIONS
from volary.studies.alphapilot.cli import race_app

app = typer.Typer(
    cls=VolaryGroup,
    no_args_is_help=True,
    add_completion=False,
    help="volary: batched multirotor simulation, control and benchmarking.",
)
platforms_app = typer.Typer(cls=VolaryGroup, no_args_is_help=True, help="The airframe catalogue.")
bench_app = typer.Typer(
    cls=VolaryGroup,
    no_args_is_help=True,
    help="The FLYINGTRUST navigation benchmark (run, resume, report, list) and physics throughput.",
)
scene_app = typer.Typer(
    cls=VolaryGroup, no_args_is_help=True, help="Scenario generators and scene files."
)
app.add_typer(platforms_app, name="platforms")
app.add_typer(bench_app, name="bench")
app.add_typer(scene_app, name="scene")

Out = Annotated[Path, typer.Option("--out", help="Directory for the files this command writes.")]
Seed = Annotated[int, typer.Option("--seed", help="Seed of every random draw.")]
Device = Annotated[str, typer.Option("--device", help="cpu or cuda.")]


@platforms_app.command("list")
def platforms_list(
    category: Annotated[str | None, typer.Option(help="Only this category.")] = None,
) -> None:
    """List catalogue airframes with their kinodynamic indicators."""
    from volary.platforms import get, indicators, names

    items = names(category)
    t = Table("name", "rotors", "mass [kg]", "TWR_max", "alpha_xy_max", "alpha_z_max")
    for n in items:
        a = get(n)
        ind = indicators(a)
        t.add_row(
            n,
            str(a.n_rotors),
            f"{a.mass:.3f}",
            f"{ind.twr_max:.2f}",
            f"{ind.alpha_xy_max:.1f}",
            f"{ind.alpha_z_max:.1f}",
        )
    console.print(t)


@platforms_app.command("show")
def platforms_show(name: str) -> None:
    """Show one airframe's parameters, sources and indicators (NAME: a catalogue name, or a
    platform file FILE.toml or FILE.toml:TABLE)."""
    import dataclasses

    from volary.platforms import get, indicators

    a = get(name)
    t = Table("field", "value", title=name)
    for f in dataclasses.fields(a):
        if f.name not in ("sources", "name"):
            t.add_row(f.name, str(getattr(a, f.name)))
    ind = indicators(a)
    for k, v in dataclasses.asdict(ind).items():
        t.add_row(f"[bold]{k}[/bold]", f"{v:.4g}")
    t.add_row("hover rotor speed", f"{a.hover_rotor_speed:.1f} rad/s")
    t.add_row("fully actuated", str(a.fully_actuated))
    console.print(t)
    if a.sources:
        console.print("[dim]sources:[/dim]")
        for k, v in a.sources.items():
            console.print(f"  [dim]{k}: {v}[/dim]")


@scene_app.command("list")
def scene_list() -> None:
    """List the scenario types with their default sizes."""
    from volary.worlds import SCENARIOS, make_scenario

    t = Table("type", "group", "size [m]", "ceiling [m]", "obstacles (seed 0)")
    for name, kind in SCENARIOS.items():
        spec = make_scenario(name, 0)
        size = " x ".join(
            f"{hi - lo:g}" for lo, hi in zip(spec.bounds_min[:2], spec.bounds_max[:2], strict=True)
        )
        t.add_row(
            name,
            "classic" if kind.classic else "theoretical",
            size,
            f"{spec.flight_ceiling:g}",
            str(len(spec.obstacles)),
        )
    console.print(t)


def _scenario(kind: str, seed: int, sets: list[str] | None = None):
    """Generate ``kind``; ``sets`` are ``--set`` overrides of its params dataclass."""
    from volary.config import parse_overrides
    from volary.errors import VolaryError
    from volary.worlds import make_scenario
    from volary.worlds.scenarios import scenario_params

    params = scenario_params(kind)
    try:
        overrides = parse_overrides(params, sets or [])
    except VolaryError as e:
        fail(f"--set: {e}")
    return make_scenario(kind, seed, **overrides)


@scene_app.command("preview")
def scene_preview(
    kind: Annotated[str, typer.Argument(help="Scenario type (volary scene list).")],
    seed: Seed = 0,
    out: Out = Path("out/scene"),
    sensors: Annotated[
        bool, typer.Option(help="Also a depth image and a LiDAR scan from the start pose.")
    ] = True,
    backend: Annotated[str, typer.Option(help="Ray casting: auto, embree, warp, torch.")] = "auto",
    set_: SetOption = None,
) -> None:
    """Top-down PNG of a scenario (start, goal, reference line), plus a depth image and a LiDAR
    scan from the start pose.

    --set takes the type's params fields, e.g. forest --set density=0.2 (custom: --set
    path=scene.ply)."""
    from volary.worlds.preview import plot_top_view

    spec = _scenario(kind, seed, set_)
    pngs = [plot_top_view(spec, out / f"{kind}-{seed}.png")]
    if sensors:
        from volary.sensors.preview import preview_sensors

        pngs += preview_sensors(spec, out, f"{kind}-{seed}", backend=backend)
    for png in pngs:
        console.print(f"wrote {png}", markup=False)


@scene_app.command("export")
def scene_export(
    kind: Annotated[str, typer.Argument(help="Scenario type (volary scene list).")],
    seed: Seed = 0,
    format: Annotated[
        str | None,
        typer.Option("--format", help="ply, obj, stl or pcd (default: --out's suffix, else ply)."),
    ] = None,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="Directory for KIND-SEED.FORMAT, or the file itself when it ends in .ply, .obj, "
            ".stl or .pcd.",
        ),
    ] = Path("out/scene"),
    set_: SetOption = None,
) -> None:
    """Export a generated scenario as a mesh (PLY/OBJ/STL) or point cloud (PCD).

    --set takes the type's params fields, e.g. maze --set cell=2.0."""
    from volary.worlds import export_scene

    path, fmt = _export_target(out, format, f"{kind}-{seed}")
    spec = _scenario(kind, seed, set_)
    path = export_scene(spec, path, fmt)
    console.print(f"wrote {path}", markup=False)


def _export_target(out: Path, format: str | None, stem: str) -> tuple[Path, str]:
    """(file, format) of ``scene export``: ``--out`` naming the file (its suffix the format; a
    different ``--format`` is refused), else a directory for ``stem.FORMAT``."""
    if not export_names_file(out):
        fmt = format or "ply"
        return out / f"{stem}.{fmt}", fmt
    ext = out.suffix.lower().lstrip(".")
    if format is not None and format != ext:
        from volary.errors import ConfigError

        raise ConfigError(f"--format: {format!r} disagrees with --out {out.name} (a .{ext} file)")
    return out, ext


@app.command()
def fly(
    platform: Annotated[
        str,
        typer.Option(
            help="Catalogue name (volary platforms list) or a platform file, FILE.toml or "
            "FILE.toml:NAME (volary sysid writes one)."
        ),
    ],
    to: Annotated[
        tuple[float, float, float],
        typer.Option(help="Target x y z (position mode: m; velocity: m/s; acceleration: m/s^2)."),
    ] = (0.0, 0.0, 1.5),
    mode: Annotated[
        str, typer.Option(help="position, velocity, acceleration or pose.")
    ] = "position",
    yaw: Annotated[float, typer.Option(help="Yaw setpoint [rad].")] = 0.0,
    duration: Annotated[float, typer.Option(help="Seconds to fly.")] = 5.0,
    out: Out = Path("out/fly"),
    seed: Seed = 0,
    device: Device = "cpu",
) -> None:
    """Fly one platform to a setpoint; write a CSV log (volary sysid reads it) and a PNG plot."""
    drawer = _start_drawer()  # before torch is imported: matplotlib loads in parallel
    try:
        _fly(platform, to, mode, yaw, duration, out, seed, device, drawer)
    finally:
        if drawer is not None and drawer.poll() is None:
            drawer.kill()


def _start_drawer() -> Any:
    """``volary/sim/_draw.py`` as a script in a second process (numpy and matplotlib only), or
    None when it cannot start (the figure is then drawn in this process)."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parent.parent / "sim" / "_draw.py"
    try:
        return subprocess.Popen(
            [sys.executable, str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    except OSError:
        return None


def _draw(drawer: Any, traj: Any, path: Path, title: str, target: Any) -> Path:
    """The trajectory figure, drawn by ``drawer`` when it runs, else (or if it failed) here."""
    import subprocess

    from volary.sim.plots import plot_trajectory, trajectory_arrays

    if drawer is not None:
        job = {k: v.tolist() for k, v in trajectory_arrays(traj).items()}
        job.update(path=str(path), title=title, target=list(target) if target else None)
        try:
            drawer.communicate(json.dumps(job), timeout=120)
            if drawer.returncode == 0 and path.exists():
                return path
        except (OSError, ValueError, subprocess.TimeoutExpired):
            drawer.kill()
    return plot_trajectory(traj, path, title=title, target=target)


#: ``volary fly`` holds at most this many control steps at once: it simulates and writes the CSV
#: in blocks of FLY_BLOCK_STEPS and keeps every k-th step (at most FLY_PLOT_STEPS, the last one
#: included) for the figure, so a day-long flight (``LIMITS["duration"]``) needs the memory of a
#: few seconds of one.
FLY_BLOCK_STEPS = 4096
FLY_PLOT_STEPS = 20_000


def _fly(platform, to, mode, yaw, duration, out, seed, device, drawer) -> None:
    from volary.sim import Simulator

    setpoint = [*to, 0.0, 0.0, yaw] if mode == "pose" else [*to, yaw]
    sim = Simulator(platform, n_envs=1, control=mode, seed=seed, device=device)
    traj, csv_path = _fly_blocks(sim, setpoint, duration, out / "fly.csv")
    target = to if mode == "position" else None
    png = _draw(drawer, traj, out / "fly.png", f"{platform}: {mode} -> {list(to)}", target)
    final = traj.pos[-1, 0].tolist()
    console.print(f"final position \\[m]: {[round(v, 4) for v in final]}")
    console.print(f"wrote {csv_path} and {png}", markup=False)


def _fly_blocks(sim: Any, setpoint: list[float], duration: float, csv_path: Path) -> Any:
    """Fly ``duration`` s in blocks of :data:`FLY_BLOCK_STEPS` control steps, each appended to
    ``csv_path`` as it is flown; returns (the steps kept for the figure, the CSV path)."""
    import dataclasses
    import math

    from volary.sim.recording import Trajectory

    hz = sim.config.control_hz
    steps = max(1, int(round(duration * hz)))
    stride = math.ceil(steps / FLY_PLOT_STEPS)
    kept: list[Trajectory] = []
    done = 0
    while done < steps:
        n = min(FLY_BLOCK_STEPS, steps - done)
        block = sim.run(setpoint, n / hz)
        block.to_csv(csv_path, append=done > 0)
        idx = [i for i in range(n) if (done + i) % stride == 0 or done + i == steps - 1]
        kept.append(Trajectory(**{f.name: getattr(block, f.name)[idx]
                                  for f in dataclasses.fields(Trajectory)}))  # fmt: skip
        done += n
    names = [f.name for f in dataclasses.fields(Trajectory)]
    return Trajectory(**{f: _cat([getattr(k, f) for k in kept]) for f in names}), csv_path


def _cat(parts: list[Any]) -> Any:
    import torch

    return torch.cat(parts)


@bench_app.command("physics")
def bench_physics(
    n: Annotated[list[int] | None, typer.Option("--n", help="Batch sizes.")] = None,
    backend: Annotated[
        list[str] | None,
        typer.Option(help="Step backends to measure: eager, inductor, numba (CPU only)."),
    ] = None,
    substeps: Annotated[int, typer.Option(help="Physics steps fused per fast call.")] = 8,
    threads: Annotated[int, typer.Option(help="torch CPU threads.")] = 2,
    out: Out = Path("out/bench"),
    device: Device = "cpu",
) -> None:
    """Env-steps/s of volary's physics step (peers: `make bench`, benchmarks/physics.py).

    The default sizes and backends take about 5 minutes on 2 cores (torch compiles each size)."""
    import torch

    from volary.platforms import get
    from volary.sim.throughput import measure_volary

    if device != "cpu" and "numba" in (backend or []):
        fail(f"--backend numba: runs on the CPU only, not with --device {device}")
    torch.set_num_threads(threads)
    sizes = n or [1, 64, 1024, 16384, 65536]
    af = get("flightgoggles")
    backends = backend or ["eager", "inductor"] + (["numba"] if device == "cpu" else [])
    jobs = [(size, b) for size in sizes for b in backends]
    rows = []
    with console.status("") as status:
        for i, (size, b) in enumerate(jobs, 1):
            status.update(f"measuring {b} at {size:,} envs ({i} of {len(jobs)})...")
            k = 1 if b == "eager" else substeps
            rows.append(measure_volary(af, size, device=device, compile=b, substeps=k))
    t = Table("impl", "N", "env-steps/s", "IQR", "bytes/env", title=f"physics step on {device}")
    for r in rows:
        t.add_row(
            r.impl,
            str(r.n_envs),
            f"{r.env_steps_per_s:,.0f}",
            f"{r.iqr:,.0f}",
            f"{r.bytes_per_env:.0f}",
        )
    console.print(t)
    out.mkdir(parents=True, exist_ok=True)
    (out / "physics-volary.json").write_text(json.dumps([r.__dict__ for r in rows], indent=2))
    console.print(f"wrote {out / 'physics-volary.json'}", markup=False)


app.registered_commands.extend(race_app.registered_commands)  # `volary race`, the study's
add_options(RACE_OPTIONS)


@app.command()
def serve(
    scene: Annotated[
        str, typer.Option(help="A scenario type, alphapilot_2019 (gates, beacons), or none.")
    ] = "forest",
    seed: Seed = 0,
    scene_param: SceneParams = None,
    vehicles: Annotated[int, typer.Option(help="Simulated vehicle slots.")] = 1,
    in_loop: Annotated[
        int, typer.Option("--in-loop", help="Vehicle-in-the-loop slots (clients send poses).")
    ] = 0,
    platform: Annotated[
        str, typer.Option(help="Airframe of every slot: a catalogue name or FILE.toml[:NAME].")
    ] = "crazyflie",
    control: Annotated[str, typer.Option(help="Control level of simulated vehicles.")] = "ctbr",
    control_hz: Annotated[float, typer.Option(help="Control rate (Hz).")] = 60.0,
    imu: Annotated[str, typer.Option(help="IMU preset, or none.")] = "bmi085",
    sensor: Annotated[
        list[str] | None,
        typer.Option(
            help="NAME=KIND:PRESET[@HZ], repeatable, carried by every vehicle; KIND is depth, "
            "lidar, tof, rangefinder or beacons. E.g. depth=depth:aerial_gym_64@15."
        ),
    ] = None,
    actor: Annotated[
        list[str] | None,
        typer.Option(
            help="A dynamic actor a client poses (role actor), repeatable: SHAPE[:X,Y,Z] with "
            "SHAPE box, cylinder (a person by default) or sphere, or mesh:FILE."
        ),
    ] = None,
    bind: Annotated[str, typer.Option(help="ZeroMQ endpoint to bind.")] = "tcp://127.0.0.1:5555",
    token: Annotated[
        str | None,
        typer.Option(envvar="VOLARY_SERVE_TOKEN", help="Shared token; needed off localhost."),
    ] = None,
    timeout: Annotated[
        float, typer.Option(help="Seconds a client may keep the others waiting.")
    ] = 5.0,
    max_bytes: Annotated[int, typer.Option(help="Largest message accepted.")] = 16 * 2**20,
    ticks: Annotated[int | None, typer.Option(help="Stop after this many periods.")] = None,
    record: Annotated[
        Path | None,
        typer.Option(help="Record the run to this new directory (a ROS 2 bag, MCAP storage)."),
    ] = None,
    realtime: Annotated[
        bool,
        typer.Option(
            help="Pace the World by the wall clock (clients' inputs held between "
            "steps); it slows, and says so, when it cannot keep up."
        ),
    ] = False,
    speed: Annotated[float, typer.Option(help="Real-time factor with --realtime.")] = 1.0,
    firmware: Annotated[
        str,
        typer.Option(help="Rate loop of simulated vehicles: ideal, or betaflight (SITL, ctbr)."),
    ] = "ideal",
) -> None:
    """Serve a World to other processes (lock-step): clients claim a vehicle, send commands
    or poses, and get states, sensors and events back (docs/serve.md, docs/protocol.md)."""
    from volary.cli.serve import build_config, run_server

    cfg = build_config(scene=scene, seed=seed, vehicles=vehicles, in_loop=in_loop,
                       platform=platform, control=control, control_hz=control_hz, imu=imu,
                       sensors=sensor or [], actors=actor or [],
                       scene_params=scene_param, firmware=firmware)  # fmt: skip
    run_server(cfg, bind=bind, token=token, input_timeout=timeout, max_bytes=max_bytes,
               ticks=ticks, console=console, record=record, realtime=realtime,
               speed=speed)  # fmt: skip


@app.command()
def replay(
    bag: Annotated[Path, typer.Argument(help="A recording of volary serve --record.")],
    record: Annotated[
        Path | None, typer.Option(help="Record the replay to this new directory.")
    ] = None,
) -> None:
    """Fly a recorded served run again (the same joins, commands and poses, no clients) and
    report where its vehicles ended; with --record, write the replay as a bag of its own."""
    from volary.serve.replay import replay as fly

    srv = fly(bag, record=record)
    pos = srv.world.state.pos
    console.print(f"replayed {srv.ticks} control periods of {bag}", markup=False)
    for i in range(srv.world.b):
        console.print(f"  vehicle {i}: {[round(float(v), 4) for v in pos[i]]} m")


@app.command("host-planner")
def host_planner(
    algo: Annotated[str, typer.Argument(help="A planner name or module:Class.")],
    bind: Annotated[str, typer.Option(help="ZeroMQ endpoint to bind.")] = "tcp://127.0.0.1:5600",
    token: Annotated[
        str | None,
        typer.Option(envvar="VOLARY_PLANNER_TOKEN", help="Shared token; needed off localhost."),
    ] = None,
) -> None:
    """Serve a navigation planner to `volary bench run --algo remote:ADDRESS` (or --remote
    NAME=ADDRESS) from this process, one planner per trial, until Ctrl-C."""
    from volary.cli.serve import run_planner_host

    run_planner_host(algo, bind=bind, token=token, console=console)


@app.command()
def view(
    source: Annotated[
        Path | None,
        typer.Argument(help="A benchmark run directory (with --trial) or a .npz recording."),
    ] = None,
    trial: Annotated[
        str | None,
        typer.Option(
            help="Trial key of the run, algo|platform|scenario|config|trial (the "
            "report prints it under each sample failure)."
        ),
    ] = None,
    race: Annotated[
        str | None, typer.Option(help="Fly the AlphaPilot course with this racer and show it.")
    ] = None,
    seed: Seed = 0,
    host: Annotated[str, typer.Option(help="Interface to serve on (localhost by default).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="Port of the web page.")] = 8080,
    save: Annotated[
        Path | None, typer.Option(help="Also write the recording to this .npz file.")
    ] = None,
    serve: Annotated[bool, typer.Option(help="Serve the page (--no-serve: only --save).")] = True,
) -> None:
    """Browser viewer: a trial, a race or a recording in 3-D with a time slider (viser)."""
    from volary.cli.view import view_cli

    view_cli(source, trial=trial, race=race, seed=seed, host=host, port=port, save=save,
             serve=serve, console=console)  # fmt: skip


@app.command()
def demo(
    out: Out = Path("out/demo"),
    seed: Seed = 0,
    device: Device = "cpu",
    suite: Annotated[
        str | None,
        typer.Option(
            "--suite",
            help="Fly only this benchmark suite (quick, flyingtrust or a suite TOML file) and "
            "write its report, instead of the one-minute tour.",
        ),
    ] = None,
) -> None:
    """The main job, about a minute on 2 cores: a small navigation benchmark with its report,
    an AlphaPilot lap, a depth and a splat RGB frame of one scene, on one HTML page."""
    from volary.cli.demo import run_demo

    index = run_demo(out, seed=seed, device=device, suite=suite, console=console)
    console.print(f"[green]wrote {escape(str(index))}[/green]")


def _register_subcommands() -> None:
    from volary.cli.fc import app as fc_app
    from volary.cli.ros2 import ros2_app
    from volary.cli.splat import splat_app
    from volary.cli.sysid import sysid
    from volary.ros1.cli import ros1_app
    from volary.studies.boundary import cli as bp
    from volary.studies.flyingtrust.cli import register
    from volary.studies.rl import cli as rl
    from volary.studies.sousvide import cli as sousvide

    register(bench_app)
    for study in (bp, sousvide, rl):  # the studies' commands and their declared option checks
        add_options(study.OPTIONS)
    app.add_typer(bp.bp_app, name="bp", cls=VolaryGroup)
    app.add_typer(splat_app, name="splat")
    app.add_typer(sousvide.sousvide_app, name="sousvide", cls=VolaryGroup)
    app.add_typer(rl.rl_app, name="rl", cls=VolaryGroup)
    app.add_typer(ros2_app, name="ros2")
    app.add_typer(ros1_app, name="ros1")
    app.add_typer(fc_app, name="fc")
    app.command("sysid")(sysid)


_register_subcommands()
set_root(app)  # the command paths of the option checks (also when run as python -m)


def _one_line_summaries(group: typer.Typer) -> None:
    """Each command's entry in its group's command list: the first paragraph of its docstring
    on one line. Typer's rich help keeps the docstring's line breaks there, so the list wrapped
    raggedly (`volary --help`); the command's own --help is unchanged."""
    for info in group.registered_commands:
        if info.short_help is None and info.help is None and info.callback is not None:
            doc = inspect.getdoc(info.callback) or ""
            info.short_help = " ".join(doc.split("\n\n")[0].split())
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            _one_line_summaries(sub.typer_instance)


_one_line_summaries(app)


def main() -> None:
    """The ``volary`` command: exit code 0 on success, 2 for a bad input (an option, an
    argument or a file the user gave; one ``error: ...`` line on stderr), 1 for a failure while
    running (disk full, a worker died; also one line), 130 on Ctrl-C (docs/errors.md, "Exit
    codes"; :class:`~volary.cli.checks.VolaryGroup`). After the command, the garbage
    collector's objects are frozen: the interpreter then exits without a last sweep over every
    torch object (about 0.4 s of a short command's wall time); atexit handlers and file flushes
    run as usual."""
    try:
        app()
    finally:
        gc.freeze()


if __name__ == "__main__":  # after the subcommands are registered
    main()
