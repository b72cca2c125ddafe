"""``volary fc``: a volary vehicle flown by flight-controller firmware (:mod:`volary.fc`).

``volary fc px4`` serves PX4's simulator MAVLink API (TCP, 127.0.0.1:4560 by default) and
``volary fc ardupilot`` ArduPilot's JSON physics backend (UDP, 127.0.0.1:9002); start the
firmware's SITL build against it (docs/firmware.md). Each prints the run's events and one
summary line; it exits 0 when the run reached ``--duration`` (or, without one, the firmware
ended it, or Ctrl-C), 1 when it ended early (no firmware, a stall, the connection gone).
The Betaflight SITL command joins this group as ``volary fc betaflight``.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from volary.cli.checks import VolaryGroup
from volary.errors import ConfigError
from volary.inputs import Limit, within

app = typer.Typer(
    name="fc",
    cls=VolaryGroup,
    no_args_is_help=True,
    help="Flight-controller firmware in the loop: PX4 and ArduPilot SITL fly a volary vehicle.",
)

Platform = Annotated[
    str, typer.Option("--platform", help="Airframe to fly: a catalogue name or FILE.toml[:NAME].")
]
Bind = Annotated[str, typer.Option("--bind", help="IP address to listen on (loopback default).")]
Duration = Annotated[
    float | None,
    typer.Option("--duration", help="Simulated seconds to fly (default: until the firmware ends)."),
]
Imu = Annotated[str, typer.Option("--imu", help="IMU preset whose noise and bias apply.")]
Seed = Annotated[int, typer.Option("--seed", help="Seed of the IMU's noise.")]
Home = Annotated[
    str | None,
    typer.Option("--home", help="LAT,LON,ALT (deg, deg, m AMSL) of the world origin."),
]
MotorMap = Annotated[
    str | None,
    typer.Option(
        "--motor-map",
        help="Rotor index driven by firmware output 1,2,... (default: the quad-X by geometry).",
    ),
]
Timeout = Annotated[
    float, typer.Option("--timeout", help="Wall seconds to wait for the firmware's answer.")
]
Wait = Annotated[
    float, typer.Option("--wait", help="Wall seconds to wait for the firmware to connect.")
]


def numbers(text: str | None, option: str, count: int | None, kind: type = float) -> list[Any]:
    """``"1,2,3"`` as numbers (``count`` of them when given), or ConfigError naming
    ``option``."""
    if text is None:
        return []
    try:
        values = [kind(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or (count is not None and len(values) != count):
        n = "" if count is None else f"{count} "
        raise ConfigError(f"{option}: expected {n}comma-separated numbers, got {text!r}")
    return values


def _common(
    *, bind: str, port: int, imu: str, seed: int, home: str | None, motor_map: str | None,
    timeout: float, wait: float, duration: float | None,
) -> dict[str, Any]:  # fmt: skip
    if duration is not None:
        within(duration, "duration", "--duration")
    cfg: dict[str, Any] = {
        "bind": bind,
        "port": port,
        "imu": imu,
        "seed": seed,
        "timeout_s": timeout,
        "connect_timeout_s": wait,
    }
    if home is not None:
        cfg["home"] = tuple(numbers(home, "--home", 3))
    if motor_map is not None:
        cfg["motor_map"] = tuple(numbers(motor_map, "--motor-map", None, int))
    return cfg


def _finish(report: Any, duration: float | None) -> None:
    for event in report.events:
        typer.echo(event)
    typer.echo(report.line())
    ok = report.stopped in ("duration reached", "interrupted") or (
        duration is None and report.exchanges > 0
    )
    if not ok:
        raise typer.Exit(1)


def _physics(rate_hz: float) -> float:
    """The smallest whole multiple of ``rate_hz`` from 1000 Hz."""
    within(rate_hz, Limit("exchange rate", "Hz", 1.0, 10_000.0), "--rate-hz")
    k = 1
    while rate_hz * k < 1000.0 - 1e-9:
        k += 1
    return rate_hz * k


@app.command("px4")
def px4(
    platform: Platform = "research_quad_1kg",
    port: Annotated[int, typer.Option("--port", help="TCP port PX4 connects to.")] = 4560,
    bind: Bind = "127.0.0.1",
    duration: Duration = None,
    rate_hz: Annotated[
        float, typer.Option("--rate-hz", help="HIL_SENSOR exchanges per simulated second.")
    ] = 250.0,
    imu: Imu = "bmi085",
    seed: Seed = 0,
    home: Home = None,
    motor_map: MotorMap = None,
    motor_range: Annotated[
        str, typer.Option("--motor-range", help="unit (PX4 >= 1.13: 0..1) or symmetric (-1..1).")
    ] = "unit",
    speed: Annotated[
        float,
        typer.Option("--speed", help="Real-time factor while volary paces (0: unpaced)."),
    ] = 1.0,
    timeout: Timeout = 10.0,
    wait: Wait = 300.0,
) -> None:
    """Serve PX4's simulator MAVLink API (TCP) for PX4 SITL, lock-step when PX4 asks."""
    from volary.fc.px4 import Px4Link

    cfg = _common(bind=bind, port=port, imu=imu, seed=seed, home=home, motor_map=motor_map,
                  timeout=timeout, wait=wait, duration=duration)  # fmt: skip
    cfg.update(rate_hz=rate_hz, physics_hz=_physics(rate_hz), motor_range=motor_range, speed=speed)
    with Px4Link(platform, cfg) as link:
        typer.echo(f"volary-fc px4 listening on {bind}:{link.port} ({platform})")
        report = link.run(duration)
    _finish(report, duration)


@app.command("ardupilot")
def ardupilot(
    platform: Platform = "research_quad_1kg",
    port: Annotated[int, typer.Option("--port", help="UDP port ArduPilot sends to.")] = 9002,
    bind: Bind = "127.0.0.1",
    duration: Duration = None,
    rate_hz: Annotated[
        float | None,
        typer.Option("--rate-hz", help="Exchanges per simulated second (default: ArduPilot's)."),
    ] = None,
    imu: Imu = "bmi085",
    seed: Seed = 0,
    home: Home = None,
    motor_map: MotorMap = None,
    pwm_min: Annotated[int, typer.Option("--pwm-min", help="PWM (us) of motor output 0.")] = 1000,
    pwm_max: Annotated[int, typer.Option("--pwm-max", help="PWM (us) of motor output 1.")] = 2000,
    timeout: Timeout = 10.0,
    wait: Wait = 300.0,
) -> None:
    """Serve ArduPilot's JSON physics backend (UDP) for ArduPilot SITL (``-f JSON``)."""
    from volary.fc.ardupilot import ArduPilotLink

    cfg = _common(bind=bind, port=port, imu=imu, seed=seed, home=home, motor_map=motor_map,
                  timeout=timeout, wait=wait, duration=duration)  # fmt: skip
    cfg.update(pwm_min=pwm_min, pwm_max=pwm_max)
    if rate_hz is not None:
        cfg.update(rate_hz=rate_hz, physics_hz=_physics(rate_hz))
    with ArduPilotLink(platform, cfg) as link:
        typer.echo(f"volary-fc ardupilot listening on {bind}:{link.port} ({platform})")
        report = link.run(duration)
    _finish(report, duration)


@app.command("betaflight")
def betaflight(
    platform: Platform = "fpv_racer_250",
    vehicles: Annotated[
        int, typer.Option("--vehicles", help="Vehicles, each flown by its own firmware.")
    ] = 1,
    duration: Annotated[float, typer.Option("--duration", help="Simulated seconds to fly.")] = 10.0,
    sticks: Annotated[
        str | None,
        typer.Option(
            "--sticks",
            help="CSV of time,roll,pitch,yaw,throttle,arm,angle[,vehicle] rows (default: arm "
            "at 0.5 s, hover at --hover-z in angle mode).",
        ),
    ] = None,
    out: Annotated[
        str, typer.Option("--out", help="Directory for flight.csv, path.png, events.json.")
    ] = "betaflight-flight",
    seed: Seed = 0,
    spacing: Annotated[
        float, typer.Option("--spacing", help="Metres between the vehicles (along x).")
    ] = 1.0,
    hover_z: Annotated[
        float, typer.Option("--hover-z", help="Height (m) the built-in hover script holds.")
    ] = 1.0,
    every: Annotated[
        int, typer.Option("--every", help="Log every N-th exchange to flight.csv.")
    ] = 10,
    timeout: Timeout = 10.0,
) -> None:
    """Fly vehicles whose motors Betaflight 4.6.0 SITL commands, in lock-step (build it once:
    ``python -m volary.fc.betaflight build``); prints each lost firmware and a summary line;
    exits 1 when a firmware was lost."""
    from volary.fc.betaflight import fly

    flight = fly(platform, vehicles, duration, sticks, out, seed=seed, spacing=spacing,
                 hover_z=hover_z, every=every, timeout_s=timeout)  # fmt: skip
    for event in flight.events:
        typer.echo(f"vehicle {event.vehicle} at {event.time:.3f} s: firmware {event.cause}")
    z = ", ".join(f"{p[2]:.2f}" for p in flight.final_pos)
    typer.echo(
        f"betaflight: {vehicles} vehicle(s), {flight.sim_s:g} s simulated in {flight.wall_s:.1f} s "
        f"wall; final heights {z} m; wrote {flight.csv}, {flight.plot}"
    )
    if flight.events:
        raise typer.Exit(1)
