"""``volary serve``: a World served to other processes (:mod:`volary.serve`).

This module turns command-line options into a :class:`~volary.serve.world.ServeConfig` and
runs the server until Ctrl-C (or ``--ticks``).
"""

from __future__ import annotations

import contextlib
import math
import re
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from volary.errors import ConfigError
from volary.serve.world import SENSOR_KINDS, ActorSpec, SensorSpec, ServeConfig, SlotSpec

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_SENSOR = re.compile(
    r"^(?P<name>[A-Za-z_][\w-]*)=(?P<kind>\w+):(?P<preset>[\w.-]+)(@(?P<hz>[\d.]+))?$"
)


def parse_sensor(text: str) -> tuple[str, SensorSpec]:
    """``NAME=KIND:PRESET[@HZ]`` (e.g. ``depth=depth:aerial_gym_64@15``) -> (name, spec)."""
    m = _SENSOR.match(text.strip())
    if m is None:
        raise ConfigError(
            f"--sensor: expected NAME=KIND:PRESET[@HZ] such as depth=depth:aerial_gym_64@15, "
            f"got {text!r}"
        )
    if m["kind"] not in SENSOR_KINDS:
        raise ConfigError(f"--sensor {text!r}: kind expected one of {SENSOR_KINDS}")
    hz = None if m["hz"] is None else float(m["hz"])
    return m["name"], SensorSpec(m["kind"], m["preset"], hz)


def build_config(
    *,
    scene: str,
    seed: int,
    vehicles: int,
    in_loop: int,
    platform: str,
    control: str,
    control_hz: float,
    imu: str,
    sensors: list[str],
    actors: list[str] | None = None,
    scene_params: list[str] | None = None,
    firmware: str = "ideal",
) -> ServeConfig:
    """The ServeConfig of the command's options (every vehicle carries every sensor)."""
    if vehicles < 0 or in_loop < 0 or vehicles + in_loop == 0:
        raise ConfigError(
            f"--vehicles, --in-loop: expected counts >= 0, at least one slot; got "
            f"{vehicles}, {in_loop}"
        )
    specs = dict(parse_sensor(s) for s in sensors)
    names = tuple(specs)
    slots = tuple(SlotSpec("vehicle", platform, names) for _ in range(vehicles))
    slots += tuple(SlotSpec("in_loop", platform, names) for _ in range(in_loop))
    if not control_hz > 0:
        raise ConfigError(f"--control-hz: expected a rate > 0, got {control_hz}")
    # physics at the smallest whole multiple of the control rate from 960 Hz (60 -> 960, 100 ->
    # 1000): the Simulator steps a whole number of substeps per control period
    physics_hz = control_hz * math.ceil(960.0 / control_hz - 1e-9)
    return ServeConfig(
        slots=slots,
        scene=None if scene == "none" else scene,
        seed=seed,
        control=control,
        control_hz=control_hz,
        physics_hz=physics_hz,
        imu=None if imu == "none" else imu,
        sensors=specs,
        actors=tuple(parse_actor(a) for a in actors or ()),
        scene_params=dict(parse_scene_param(p) for p in scene_params or ()),
        firmware=firmware,
    )


def parse_scene_param(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` -> (key, value): a number, a list ``[x, y, z]`` (JSON), or else the text
    (a path: ``path=my_scene.ply`` with ``--scene custom``)."""
    import json

    key, eq, value = text.partition("=")
    if not eq or not key.strip().isidentifier():
        raise ConfigError(f"--scene-param: expected KEY=VALUE such as length=20, got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value


def parse_actor(text: str) -> ActorSpec:
    """``SHAPE[:X,Y,Z]`` or ``mesh:PATH`` (e.g. ``cylinder:0.5,0.5,1.8``, ``box:1,1,2``)."""
    shape, _, rest = text.strip().partition(":")
    if shape == "mesh":
        return ActorSpec("mesh", mesh=rest)
    if not rest:
        return ActorSpec(shape) if shape != "cylinder" else ActorSpec()
    try:
        size = tuple(float(v) for v in rest.split(","))
    except ValueError:
        size = ()
    if len(size) != 3:
        raise ConfigError(
            f"--actor: expected SHAPE:X,Y,Z such as cylinder:0.5,0.5,1.8, got {text!r}"
        )
    return ActorSpec(shape, (size[0], size[1], size[2]))


def run_server(
    config: ServeConfig,
    *,
    bind: str,
    token: str | None,
    input_timeout: float,
    max_bytes: int,
    ticks: int | None,
    console: Any,
    record: Any = None,
    realtime: bool = False,
    speed: float = 1.0,
) -> list[dict[str, Any]]:
    """Serve ``config`` until Ctrl-C or ``ticks`` control periods; returns the fault log. A
    server that cannot start (its address taken, say) is one line on stderr and exit code 2."""
    import typer

    from volary.serve.server import Server

    try:
        with console.status("building the world..."):
            srv = Server(config, bind=bind, token=token, input_timeout=input_timeout,
                         max_bytes=max_bytes, record=record, realtime=realtime,
                         speed=speed)  # fmt: skip
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        raise typer.Exit(2) from None
    roles = [s.role for s in config.slots]
    console.print(
        f"volary serve: {srv.address}  scene {config.scene or 'open space'}  "
        f"{roles.count('vehicle')} simulated + {roles.count('in_loop')} in-the-loop slot(s), "
        f"{config.control} at {config.control_hz:g} Hz, sensors: "
        f"{', '.join(config.sensors) or 'none'}{', imu' if config.imu else ''}  (Ctrl-C stops)",
        highlight=False,
    )
    with _stop_on_signals() as stop:
        try:
            srv.serve(stop, max_ticks=ticks)
        finally:
            srv.close()
    console.print(f"served {srv.ticks} control periods; {len(srv.faults)} fault(s)")
    if realtime:
        rt = srv.rt
        console.print(
            f"real time x{speed:g}: {rt.ticks} ticks in {rt.wall:.1f} s, {rt.late_ticks} late, "
            f"{rt.slips} slips, "
            f"the World {rt.lag:.3f} s behind the wall clock, time scale {rt.time_scale:.3f}, "
            f"busy {100 * rt.busy / max(rt.wall, 1e-9):.0f} %"
        )
    if record is not None:
        console.print(f"recorded to {record}", markup=False)
    return srv.faults


def run_planner_host(algo: str, *, bind: str, token: str | None, console: Any) -> None:
    """Serve planner ``algo`` (checked first) until Ctrl-C or SIGTERM."""
    from volary.serve.planners import PlannerHost
    from volary.studies.flyingtrust.planners import get_planner, resolve_planner

    resolve_planner(algo)  # an unknown name fails here, listing the valid ones
    host = PlannerHost(lambda **options: get_planner(algo, **options), bind, token=token)
    console.print(f"volary host-planner: {algo} at {host.address}  (Ctrl-C stops)", markup=False)
    with _stop_on_signals() as stop:
        try:
            host.serve(stop.is_set)
        finally:
            host.close()
    console.print(f"answered {host.requests} request(s); {host.faults} fault(s)")


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """An event that Ctrl-C and SIGTERM set, so a serving loop stops between messages; set up
    here even where a parent process left SIGINT ignored (which Python would inherit), and the
    previous handlers restored after."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in _STOP_SIGNALS}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
