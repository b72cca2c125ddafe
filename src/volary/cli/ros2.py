"""``volary ros2 serve``: a World on ROS 2 (:mod:`volary.ros2`, docs/ros.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from volary.cli.checks import VolaryGroup
from volary.options import console, fail

SceneParams = Annotated[
    list[str] | None,
    typer.Option(
        help="KEY=VALUE of the scenario type, repeatable (length=20; with --scene custom: "
        "path=scene.ply, start=[x,y,z], goal=[x,y,z])."
    ),
]
ros2_app = typer.Typer(
    name="ros2",
    cls=VolaryGroup,
    help="ROS 2: a World on ROS 2 topics (docs/ros.md).",
    no_args_is_help=True,
)


@ros2_app.command("serve")
def serve(
    scene: Annotated[
        str, typer.Option(help="A scenario type, alphapilot_2019 (gates), or none.")
    ] = "forest",
    seed: Annotated[int, typer.Option(help="Seed of the scene.")] = 0,
    scene_param: SceneParams = None,
    vehicles: Annotated[int, typer.Option(help="Vehicles, each in its namespace.")] = 1,
    namespace: Annotated[
        list[str] | None, typer.Option(help="The vehicles' namespaces (default vehicle0, ...).")
    ] = None,
    platform: Annotated[
        str, typer.Option(help="Airframe of every vehicle: a catalogue name or FILE.toml[:NAME].")
    ] = "crazyflie",
    control: Annotated[
        str, typer.Option(help="Control level (its command topic: docs/ros.md).")
    ] = ("ctbr"),
    control_hz: Annotated[float, typer.Option(help="Control rate (Hz).")] = 60.0,
    imu: Annotated[str, typer.Option(help="IMU preset, or none.")] = "bmi085",
    sensor: Annotated[
        list[str] | None,
        typer.Option(help="NAME=KIND:PRESET[@HZ], repeatable (depth, lidar, tof, rangefinder)."),
    ] = None,
    start_with: Annotated[int, typer.Option(help="Vehicles taken before the first tick.")] = 1,
    timeout: Annotated[
        float, typer.Option(help="Seconds a vehicle's node may keep the others waiting.")
    ] = 5.0,
    realtime: Annotated[
        bool, typer.Option(help="Pace by the wall clock; /volary/time_scale says how fast.")
    ] = False,
    speed: Annotated[float, typer.Option(help="Real-time factor with --realtime.")] = 1.0,
    ticks: Annotated[int | None, typer.Option(help="Stop after this many periods.")] = None,
    record: Annotated[Path | None, typer.Option(help="Record the run (a ROS 2 bag, MCAP).")] = None,
    firmware: Annotated[
        str,
        typer.Option(help="Rate loop of the vehicles: ideal, or betaflight (SITL, ctbr)."),
    ] = "ideal",
) -> None:
    """Serve a World on ROS 2: /clock, /tf, odometry, IMU, sensors and events out, each
    vehicle's commands in (lock-step on sim time unless --realtime); DDS stays on this machine
    unless ROS_AUTOMATIC_DISCOVERY_RANGE / FASTDDS_BUILTIN_TRANSPORTS say otherwise."""
    from volary.cli.serve import _stop_on_signals, build_config
    from volary.errors import VolaryError

    try:
        cfg = build_config(scene=scene, seed=seed, vehicles=vehicles, in_loop=0, platform=platform,
                           control=control, control_hz=control_hz, imu=imu,
                           sensors=sensor or [], scene_params=scene_param,
                           firmware=firmware)  # fmt: skip
        from volary.ros2.bridge import Ros2Bridge

        with console.status("building the world..."):
            bridge = Ros2Bridge(cfg, namespaces=namespace or None, realtime=realtime, speed=speed,
                                input_timeout=timeout, start_with=start_with,
                                record=record)  # fmt: skip
    except VolaryError as e:
        fail(str(e))
        return
    names = ", ".join(f"/{v.ns}" for v in bridge.vehicles)
    console.print(
        f"volary ros2: {names}  scene {cfg.scene or 'open space'}  {cfg.control} at "
        f"{cfg.control_hz:g} Hz ({'real time' if realtime else 'lock-step'})  (Ctrl-C stops)",
        highlight=False,
    )
    with _stop_on_signals() as stop:
        try:
            bridge.spin(stop, max_ticks=ticks)
        finally:
            bridge.close()
    console.print(f"served {bridge.ticks} control periods; {len(bridge.faults)} fault(s)")
