"""``volary ros1``: FlightGoggles' ROS 1 interface over a World (:mod:`volary.ros1`).

Mounted by ``volary.cli.main`` as ``app.add_typer(ros1_app, name="ros1")``; also run as
``python -m volary.ros1 ...`` (no ``volary`` entry point needed).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

ros1_app = typer.Typer(
    name="ros1",
    help="ROS 1 as FlightGoggles (AlphaPilot 2019): a World behind its topics and parameters.",
    no_args_is_help=True,
)


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(2)


#: each option's help (the signature below stays one line per option)
_HELP = {
    "course": "The course (FlightGoggles' final).",
    "master_port": (
        "Start Debian's rosmaster on 127.0.0.1:PORT (0: a free port); default: use ROS_MASTER_URI."
    ),
    "realtime": (
        "Tick on the wall clock and hold the newest command, as FlightGoggles; "
        "default: lock-step on each command."
    ),
    "speed": "Real-time factor with --realtime.",
    "control_hz": "Ticks per sim second (60, 120, 240, 480, 960).",
    "ticks": "Stop after this many ticks.",
    "input_timeout": (
        "Lock-step: wall s to wait for a command before holding the last one (0: wait forever)."
    ),
    "results": "The results YAML (/uav/results_location).",
    "exit_on_result": "Stop when the lap ends.",
    "ignore_collisions": "Report collisions but do not reset the vehicle.",
    "imu": "IMU preset.",
    "seed": "Seed of the World's noise.",
    "noise_key": (
        "Draw the vehicle's noise from this key instead of --seed: volary race's key of a "
        "course x noise-seed pair (volary.studies.alphapilot.race.noise_key) makes the flight "
        "draw that pair's noise."
    ),
    "course_seed": (
        "Serve a perturbed course of this seed (gates moved within their published bounds; as "
        "volary race --seed); default: the nominal course."
    ),
    "course_index": "Which perturbed course of --course-seed (0: the first).",
    "courses_from": (
        "The course-generator setting of --course-seed's courses (volary, moved, resized, "
        "replaced; as volary race --courses-from)."
    ),
    "arena": (
        "empty (gates, floor, bounds) or factory (walls, roof, pillars and machines around the "
        "course; the arena volary race flies the challenge in)."
    ),
    "kinetic_frames": "Frame ids with FlightGoggles 2019's leading slash.",
    "msg_cache": "Where generated messages go (default ~/.cache/volary).",
    "log_dir": "ROS_LOG_DIR of node and master.",
    "firmware": (
        "Rate loop flying the RateThrust commands: ideal (FlightGoggles') or betaflight "
        "(Betaflight 4.6.0 SITL in lock-step; see docs/firmware.md)."
    ),
    "platform": (
        "The vehicle; default flightgoggles, research_quad_1kg with --firmware betaflight "
        "(which needs a platform it has a rate profile for)."
    ),
}


@ros1_app.command("serve")
def serve(
    course: Annotated[str, typer.Option(help=_HELP["course"])] = "alphapilot_2019",
    master_port: Annotated[int | None, typer.Option(help=_HELP["master_port"])] = None,
    realtime: Annotated[bool, typer.Option(help=_HELP["realtime"])] = False,
    speed: Annotated[float, typer.Option(help=_HELP["speed"])] = 1.0,
    control_hz: Annotated[float, typer.Option(help=_HELP["control_hz"])] = 120.0,
    ticks: Annotated[int | None, typer.Option(help=_HELP["ticks"])] = None,
    input_timeout: Annotated[float, typer.Option(help=_HELP["input_timeout"])] = 2.0,
    results: Annotated[Path, typer.Option(help=_HELP["results"])] = Path("results.yaml"),
    exit_on_result: Annotated[bool, typer.Option(help=_HELP["exit_on_result"])] = False,
    ignore_collisions: Annotated[bool, typer.Option(help=_HELP["ignore_collisions"])] = False,
    imu: Annotated[str, typer.Option(help=_HELP["imu"])] = "flightgoggles",
    seed: Annotated[int, typer.Option(help=_HELP["seed"])] = 0,
    noise_key: Annotated[int | None, typer.Option(help=_HELP["noise_key"])] = None,
    course_seed: Annotated[int | None, typer.Option(help=_HELP["course_seed"])] = None,
    course_index: Annotated[int, typer.Option(help=_HELP["course_index"])] = 0,
    courses_from: Annotated[str, typer.Option(help=_HELP["courses_from"])] = "volary",
    arena: Annotated[str, typer.Option(help=_HELP["arena"])] = "empty",
    kinetic_frames: Annotated[bool, typer.Option(help=_HELP["kinetic_frames"])] = False,
    msg_cache: Annotated[Path | None, typer.Option(help=_HELP["msg_cache"])] = None,
    log_dir: Annotated[Path | None, typer.Option(help=_HELP["log_dir"])] = None,
    firmware: Annotated[str, typer.Option(help=_HELP["firmware"])] = "ideal",
    platform: Annotated[str | None, typer.Option(help=_HELP["platform"])] = None,
) -> None:
    """Serve the course with FlightGoggles' topics, parameters and arming rule; prints
    'volary-ros1 ready master=... pythonpath=...' once serving and the lap's score at its end."""
    from volary.errors import VolaryError
    from volary.ros1.bridge import Ros1Options
    from volary.ros1.service import ready_line, start

    try:
        options = Ros1Options(course=course, control_hz=control_hz, realtime=realtime,
                              speed=speed, input_timeout=input_timeout or None, ticks=ticks,
                              results=str(results), exit_on_result=exit_on_result,
                              ignore_collisions=ignore_collisions, imu=imu, seed=seed,
                              kinetic_frames=kinetic_frames, firmware=firmware,
                              platform=platform, course_seed=course_seed,
                              course_index=course_index, generator=courses_from,
                              arena=arena, noise_key=noise_key)  # fmt: skip
        svc = start(options, master_port=master_port, msg_cache=msg_cache, log_dir=log_dir)
    except VolaryError as e:
        _fail(str(e))
        return
    _stop_on_signals(svc.bridge)
    typer.echo(ready_line(svc))
    sys.stdout.flush()
    try:
        svc.bridge.serve()
    finally:
        svc.stop()


def _stop_on_signals(bridge: Any) -> None:
    def handler(signum: int, frame: Any) -> None:
        bridge.stop()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


@ros1_app.command("msgs")
def msgs(
    msg_cache: Annotated[
        Path | None, typer.Option(help="Where generated messages go (default ~/.cache/volary).")
    ] = None,
) -> None:
    """Generate the message packages Debian lacks (mav_msgs, flightgoggles, sensor_msgs for
    Python) and print where: PYTHONPATH for rospy nodes, .msg files and C++ headers."""
    from volary.errors import VolaryError
    from volary.ros1.msgs import ensure_messages

    try:
        d = ensure_messages(msg_cache)
    except VolaryError as e:
        _fail(str(e))
        return
    typer.echo(f"pythonpath={d.python}\nmsg={d.msg}\ninclude={d.include}")


@ros1_app.command("build")
def build_planner(
    source_dir: Annotated[
        Path,
        typer.Argument(
            help="A source checkout of EGO-Planner (ZJU-FAST-Lab/ego-planner) or Fast-Planner "
            "(HKUST-Aerial-Robotics/Fast-Planner)."
        ),
    ],
    workspace: Annotated[
        Path | None,
        typer.Option(
            help="The catkin workspace to build in (default "
            "~/.cache/volary/ros1-planners/<planner>-<commit>)."
        ),
    ] = None,
    jobs: Annotated[int, typer.Option(help="Parallel compile jobs (catkin_make -jN).")] = 2,
) -> None:
    """Build the planner in SOURCE_DIR against Debian 12's ROS 1 with volary's documented
    patch (docs/planners-ros1.md); prints the commit and the build's wall time, writes
    volary-build.json into the workspace; a second run with nothing changed does nothing."""
    from volary.errors import ConfigError, VolaryError
    from volary.ros1.build import build

    try:
        result = build(source_dir, workspace, jobs=jobs, echo=typer.echo)
    except ConfigError as e:
        _fail(str(e))
        return
    except VolaryError as e:  # the build itself failed, or Debian lacks a package
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"setup={result.setup()}")
