"""Every ``volary`` option's declared check, run before the command starts (layer 7).

:data:`OPTIONS` maps each command (``"fly"``, ``"bench physics"``, ...) to a check per option or
argument that takes a value. :class:`~volary.cli.main.VolaryGroup` runs them on the parsed
values before it calls the command, so a bad value ends the command with one line naming the
option (``--to: expected a finite number in [-100000, 100000] m (world coordinate), got nan``)
and exit code 2, before anything is printed, allocated or started. A check's ``kind`` says what
the option takes (a number, a name, an input file, an output path, free text): the property
tests (``tests/test_inputs_cli.py``) draw their bad values from it. The checks are written in
:mod:`volary.checks`' vocabulary; the core's commands are declared here, each study's in its
own ``cli.OPTIONS`` (``race``, ``bp *``, ``sousvide *``, ``rl *``), which
:mod:`volary.cli.main` adds with :func:`add_options` when it mounts the study. Checks that need
a registry import it on use. A command missing here is not checked
(``bench run|resume|report|list`` check their own options in
:mod:`volary.studies.flyingtrust.cli`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from concurrent.futures import BrokenExecutor
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from volary.checks import (
    DEVICE,
    OUT,
    SEED,
    SET,
    Check,
    as_path,
    count,
    counts,
    in_dir,
    in_file,
    in_path,
    looked_up,
    number,
    one_of,
    out_file,
    out_new_dir,
    parsed,
    real,
    text,
)
from volary.errors import ConfigError, VolaryError
from volary.inputs import LIMITS, regular_file
from volary.studies.alphapilot.cli import RACER  # `volary view --race` names a study racer

try:  # typer >= 0.20 vendors click
    from typer._click import exceptions as _cx
except ImportError:  # pragma: no cover - older typer on click
    import click.exceptions as _cx  # type: ignore[no-redef]


# ----------------------------------------------------------------------------- registries
def _platform(name: str) -> Any:
    from volary.platforms import get

    return get(name)


def _scenario(name: str) -> Any:
    """A generated scenario type or ``custom`` (a scene from a file, ``--set path=...``); a
    scene file given as the type is told how to load it."""
    from volary.worlds.io import FORMATS
    from volary.worlds.scenarios import CUSTOM, SCENARIOS

    if name == CUSTOM.name:
        return CUSTOM
    if name not in SCENARIOS and name.rpartition(".")[2].lower() in FORMATS:
        raise ConfigError(
            f"{name!r} is a scene file, not a scenario type; a file is the 'custom' type: "
            f"custom --set path={name}"
        )
    return SCENARIOS.get(name)


def _scene(name: str) -> None:
    if name not in ("none", "alphapilot_2019"):
        _scenario(name)


def _imu(name: str) -> None:
    from volary.sensors.imu import IMU_PRESETS

    if name != "none":
        IMU_PRESETS.get(name)


def _course_generator(name: str) -> None:
    from volary.worlds.tracks import COURSE_GENERATORS

    COURSE_GENERATORS.get(name)


def _arenas() -> Collection[str]:
    from volary.worlds.tracks import ARENAS

    return ARENAS


def _control_modes() -> Collection[str]:
    from volary.control import CONTROL_MODES

    return CONTROL_MODES


def _serve_controls() -> Collection[str]:
    """A served vehicle's control levels: the controllers', and a firmware's raw ``sticks``."""
    return (*_control_modes(), "sticks")


def _planner(name: str) -> None:
    from volary.studies.flyingtrust.planners import available_planners

    if ":" not in name and name not in available_planners():
        raise ConfigError(f"expected one of {', '.join(available_planners())} or "
                          f"'package.module:Class', got {name!r}")  # fmt: skip


def _bag(v: Any, opt: str) -> None:
    p = as_path(v, opt)
    if not (p / "metadata.yaml").is_file():
        raise ConfigError(f"{opt}: expected a recording directory of volary serve --record "
                          f"(with a metadata.yaml), got {str(p)!r}")  # fmt: skip


def _floats(n: int) -> Callable[[str], None]:
    def parse(v: str) -> None:
        try:
            vals = [float(s) for s in v.replace(" ", "").split(",")]
        except ValueError:
            vals = []
        if len(vals) != n or not all(math.isfinite(x) and abs(x) <= 1e5 for x in vals):
            raise ConfigError(f"expected {n} comma-separated finite numbers, got {v!r}")

    return parse


def _splat_scene(v: str) -> None:
    if v.lower().endswith(".ply"):
        regular_file(v, "splat PLY")
    else:
        _scenario(v)


def _endpoint(v: str) -> None:
    if not re.fullmatch(r"(tcp://[\w.*\[\]:-]+:(\d{1,5}|\*)|ipc://[^\s]+|inproc://[\w.-]+)", v):
        raise ConfigError(f"expected a ZeroMQ endpoint such as tcp://127.0.0.1:5555, got {v!r}")


def _serve_parsers() -> dict[str, Callable[[str], Any]]:
    from volary.cli import serve

    return {"sensor": serve.parse_sensor, "actor": serve.parse_actor,
            "scene": serve.parse_scene_param}  # fmt: skip


def _serve_parse(which: str) -> Callable[[str], Any]:
    return lambda v: _serve_parsers()[which](v)


def _fc_common(port: str) -> dict[str, Check]:
    """The options ``volary fc px4`` and ``volary fc ardupilot`` share."""
    return {
        "--platform": PLATFORM,
        "--port": count(0, 65535, port),
        "--bind": text(r"[0-9A-Fa-f.:]{2,45}", "an IP address"),
        "--duration": real(0, LIMITS["duration"].hi, "simulated duration", "s"),
        "--rate-hz": real(1, 10_000, "exchange rate", "Hz"),
        "--imu": looked_up(_imu),
        "--seed": SEED,
        "--home": text(r"[-+0-9.eE]+(,[-+0-9.eE]+){2}", "LAT,LON,ALT"),
        "--motor-map": text(r"\d{1,2}(,\d{1,2})*", "rotor indices such as 3,1,0,2"),
        "--timeout": real(0, 3600, "firmware answer timeout", "s", above=True),
        "--wait": real(0, 86400, "connection wait", "s", above=True),
    }


# ----------------------------------------------------------------------------- declarations
PLATFORM = looked_up(_platform)
HOST_NAME = r"[A-Za-z0-9.:\[\]-]{1,253}"
TOKEN = text(r"[\x21-\x7e]{1,256}", "1 to 256 printable ASCII characters")


def _serve_common() -> dict[str, Check]:
    return {
        "--scene": looked_up(_scene),
        "--seed": SEED,
        "--scene-param": parsed(_serve_parse("scene")),
        "--vehicles": counts(1024, "simulated vehicles", 0),
        "--platform": PLATFORM,
        "--control": one_of(_serve_controls),
        "--control-hz": real(1, 10_000, "control rate", "Hz"),
        "--imu": looked_up(_imu),
        "--sensor": parsed(_serve_parse("sensor")),
        "--timeout": real(0, 3600, "input timeout", "s", above=True),
        "--speed": real(0, 1000, "real-time factor", "1", above=True),
        "--ticks": counts(10**12, "control periods", 0),
        "--record": out_new_dir(),
        "--firmware": one_of(("ideal", "betaflight")),
    }


def _export_formats() -> tuple[str, ...]:
    from volary.worlds.io import FORMATS

    return FORMATS


def export_names_file(out: Path) -> bool:
    """Whether ``scene export --out`` names the file itself (a format's suffix, not an existing
    directory) rather than a directory for ``KIND-SEED.FORMAT``: the one rule its check and
    the command share."""
    return out.suffix.lower().lstrip(".") in _export_formats() and not out.is_dir()


def _export_out(v: Any, opt: str) -> None:
    """``scene export --out``: a directory, or the file itself (:func:`export_names_file`)."""
    (out_file() if export_names_file(as_path(v, opt)) else OUT).fn(v, opt)


OPTIONS: dict[str, dict[str, Check]] = {
    "fly": {
        "--platform": PLATFORM,
        "--to": number("coordinate"),
        "--mode": one_of(("position", "velocity", "acceleration", "pose")),
        "--yaw": number("yaw"),
        "--duration": real(0, LIMITS["duration"].hi, "simulated duration", "s", above=True),
        "--out": OUT,
        "--seed": SEED,
        "--device": DEVICE,
    },
    "serve": {
        **_serve_common(),
        "--in-loop": counts(1024, "vehicle-in-the-loop slots", 0),
        "--actor": parsed(_serve_parse("actor")),
        "--bind": parsed(_endpoint),
        "--token": TOKEN,
        "--max-bytes": count(1024, 2**31 - 1, "message size", "B"),
    },
    "replay": {"BAG": Check("in_dir", _bag), "--record": out_new_dir()},
    "host-planner": {"ALGO": looked_up(_planner), "--bind": parsed(_endpoint), "--token": TOKEN},
    "view": {
        "SOURCE": in_path("run directory or .npz recording"),
        "--trial": text(r"[^|\s]+(\|[^|\s]+){4}", "algo|platform|scenario|config|trial"),
        "--race": RACER,
        "--seed": SEED,
        "--host": text(HOST_NAME, "a host name or IP address"),
        "--port": count(0, 65535, "TCP port"),
        "--save": out_file(),
    },
    "demo": {
        "--out": OUT,
        "--seed": SEED,
        "--device": DEVICE,
        "--suite": parsed(lambda v: _suite(v)),
    },
    "platforms list": {"--category": parsed(lambda v: _platform_category(v))},
    "platforms show": {"NAME": PLATFORM},
    "bench physics": {
        "--n": counts(1_000_000, "batch size"),
        "--backend": one_of(("eager", "inductor", "numba")),
        "--substeps": counts(1024, "physics steps per call"),
        "--threads": counts(1024, "torch CPU threads"),
        "--out": OUT,
        "--device": DEVICE,
    },
    "scene preview": {
        "KIND": looked_up(_scenario),
        "--seed": SEED,
        "--out": OUT,
        "--backend": parsed(lambda v: _raycast_backend(v)),
        "--set": SET,
    },
    "scene export": {
        "KIND": looked_up(_scenario),
        "--seed": SEED,
        "--format": one_of(_export_formats),
        "--out": Check("out_file", _export_out),  # a directory, or the file (its suffix)
        "--set": SET,
    },
    "splat synth": {
        "SCENARIO": looked_up(_scenario),
        "--out": out_file(),
        "--seed": SEED,
        "--max-gaussians": counts(10**8, "Gaussians"),
        "--sh-degree": counts(3, "SH degree", 0),
        "--set": SET,
    },
    "splat convert": {
        "SRC": in_file("splat PLY"),
        "DST": out_file(),
        "--align": parsed(_floats(16)),
        "--sh-degree": counts(3, "SH degree", 0),
    },
    "splat render": {
        "SCENE": parsed(_splat_scene),
        "--out": out_file(),
        "--depth": out_file(),
        "--look-at": parsed(_floats(6)),
        "--width": counts(8192, "image width", 1),
        "--height": counts(8192, "image height", 1),
        "--hfov": real(1, 179.9, "horizontal field of view", "deg"),
        "--backend": one_of(("auto", "fast", "reference", "gsplat")),
        "--device": DEVICE,
        "--brightness": real(0, 100, "lighting factor", "1"),
        "--align": parsed(_floats(16)),
        "--seed": SEED,
        "--max-gaussians": counts(10**8, "Gaussians"),
    },
    "ros2 serve": {
        **_serve_common(),
        "--namespace": text(r"[A-Za-z][\w/]{0,127}", "a ROS 2 namespace such as vehicle0"),
        "--start-with": counts(1024, "vehicles before the first tick", 0),
    },
    "sysid": {
        "LOG": in_path("flight log or folder"),
        "--test": in_path("flight log or folder"),
        "--platform": PLATFORM,
        "--out": OUT,
        "--horizon": count(1, 1000, "prediction horizon", "samples"),
        "--stride": count(1, 100_000, "window stride", "samples"),
        "--refine-evaluations": count(0, 100_000, "output-error refinement budget", "predictions"),
    },
    "fc px4": {
        **_fc_common("TCP port"),
        "--motor-range": one_of(("unit", "symmetric")),
        "--speed": real(0, 1000, "real-time factor", "1"),
    },
    "fc ardupilot": {
        **_fc_common("UDP port"),
        "--pwm-min": count(0, 65535, "PWM", "us"),
        "--pwm-max": count(0, 65535, "PWM", "us"),
    },
    "fc betaflight": {
        "--platform": PLATFORM,
        "--vehicles": count(1, int(LIMITS["fc_vehicles"].hi), "firmware processes"),
        "--duration": real(0, LIMITS["duration"].hi, "simulated duration", "s", above=True),
        "--sticks": in_file("sticks CSV"),
        "--out": OUT,
        "--seed": SEED,
        "--spacing": number("coordinate"),
        "--hover-z": number("coordinate"),
        "--every": count(1, 10**9, "exchanges between logged rows"),
        "--timeout": real(0, 3600, "firmware answer timeout", "s", above=True),
    },
    "ros1 serve": {
        "--course": one_of(("alphapilot_2019",)),
        "--master-port": count(0, 65535, "TCP port"),
        "--speed": real(0, 1000, "real-time factor", "1", above=True),
        "--control-hz": real(1, 10_000, "control rate", "Hz"),
        "--ticks": counts(10**12, "ticks", 0),
        "--input-timeout": real(0, 3600, "input timeout", "s"),
        "--results": out_file(),
        "--imu": looked_up(_imu),
        "--seed": SEED,
        "--msg-cache": OUT,
        "--log-dir": OUT,
        "--firmware": one_of(("ideal", "betaflight")),
        "--platform": PLATFORM,
        "--course-seed": SEED,
        "--noise-key": count(0, 2**31 - 1, "noise key"),
        "--course-index": count(0, 999, "perturbed course index"),
        "--courses-from": looked_up(_course_generator),
        "--arena": one_of(_arenas),
    },
    "ros1 msgs": {"--msg-cache": OUT},
    "ros1 build": {
        "SOURCE_DIR": in_dir("EGO-Planner or Fast-Planner source checkout"),
        "--workspace": OUT,
        "--jobs": count(1, 64, "parallel compile jobs"),
    },
}


def _suite(v: str) -> None:
    from volary.studies.flyingtrust.protocol import get_suite

    try:
        get_suite(v)
    except OSError as e:  # a file name the system refuses (too long, ...)
        raise ConfigError(f"cannot read the suite {v[:60]!r} ({e.strerror or e})") from None


def _platform_category(v: str) -> None:
    from volary.platforms import names

    names(v)


def _raycast_backend(v: str) -> None:
    from volary.sensors.raycast.registry import BACKENDS

    if v != "auto":
        BACKENDS.get(v)


def add_options(table: Mapping[str, Mapping[str, Check]]) -> None:
    """Add a study's declared checks (its ``cli.OPTIONS``, command path -> option -> check) to
    :data:`OPTIONS`; :mod:`volary.cli.main` calls it where it mounts the study. Adding the same
    declarations again changes nothing; a command that already has other checks is a bug
    (ValueError)."""
    clash = sorted(c for c, opts in table.items() if OPTIONS.get(c, opts) != opts)
    if clash:
        raise ValueError(f"option checks declared twice: {', '.join(clash)}")
    OPTIONS.update({c: dict(opts) for c, opts in table.items()})


def check_options(command: str, values: Iterable[tuple[str, Any]]) -> None:
    """Run ``command``'s declared checks on ``(option, value)`` pairs: numbers, names and text
    first, then paths (in declaration order within each); the first bad value raises its
    one-line VolaryError."""
    checks = OPTIONS.get(command, {})
    given = [(o, v, checks[o]) for o, v in values if o in checks]
    # the values themselves first, then the files and directories they name
    for option, value, check in sorted(given, key=lambda g: g[2].kind in _FILESYSTEM):
        check(value, option)


_FILESYSTEM = ("in_file", "in_dir", "in_path", "out_dir", "out_file")


# ----------------------------------------------------------------------------- the command group
#: Failures while running (exit code 1): the input was fine, the machine or a worker was not.
RUN_FAILURES: tuple[type[BaseException], ...] = (OSError, MemoryError, BrokenExecutor)


def error_line(message: str) -> None:
    """``error: MESSAGE`` on stderr as one line (a message's own line breaks become ``; ``)."""
    lines = [ln.strip() for ln in str(message).splitlines() if ln.strip()]
    typer.secho("error:", fg="red", err=True, nl=False)
    typer.echo(" " + "; ".join(lines), err=True)


def _usage_message(e: Any) -> str:
    text = e.format_message() if hasattr(e, "format_message") else str(e)
    return (text + _refused_tokens(e)).replace("\n", " ")


def _refused_tokens(e: Any) -> str:
    """What a value a typed option refused was, and how many values the option takes (typer's
    own message names neither: ``--to 1 0 --duration 5`` reads '--duration' as a number)."""
    from pydantic import ValidationError

    cause = getattr(e, "__cause__", None)
    if not isinstance(cause, ValidationError):
        return ""
    bad = [repr(err["input"]) for err in cause.errors() if isinstance(err.get("input"), str)]
    param = getattr(e, "param", None)
    nargs = getattr(param, "nargs", 1)
    takes = f"; {_label(param)} takes {nargs} values" if param is not None and nargs > 1 else ""
    return (f" (got {', '.join(bad)})" if bad else "") + takes


def _paths(app: typer.Typer, prefix: str = "") -> dict[str, str]:
    """``module:qualname`` of each command's function -> its command path (``bench physics``)."""
    out: dict[str, str] = {}
    for info in app.registered_commands:
        fn = info.callback
        if fn is not None:
            name = info.name or fn.__name__.replace("_", "-")
            out[f"{fn.__module__}:{fn.__qualname__}"] = f"{prefix}{name}"
    for group in app.registered_groups:
        if group.typer_instance is not None:
            out.update(_paths(group.typer_instance, f"{prefix}{group.name} "))
    return out


def _label(param: Any) -> str:
    if param.param_type_name == "argument":
        return str(param.name).upper()
    longs = [o for o in param.opts if o.startswith("--")]
    return (longs or param.opts)[0]


def _checked(cmd: Any, path: str) -> None:
    """Wrap ``cmd``'s callback: its declared option checks run first."""
    cb = cmd.callback
    labels = {p.name: _label(p) for p in cmd.params}

    def checked(*args: Any, **kwargs: Any) -> Any:
        check_options(path, ((labels.get(k, k), v) for k, v in kwargs.items()))
        return cb(*args, **kwargs)

    checked.__wrapped__ = getattr(cb, "__wrapped__", cb)  # type: ignore[attr-defined]
    checked.volary_command = path  # type: ignore[attr-defined]
    cmd.callback = checked


_ROOT: list[typer.Typer] = []


def set_root(app: typer.Typer) -> None:
    """The ``volary`` app whose command paths key :data:`OPTIONS` (``volary.cli.main`` sets it,
    also when it runs as ``python -m volary.cli.main``)."""
    _ROOT[:] = [app]


def _group_paths(group: Any, prefix: str) -> dict[str, str]:
    """``module:qualname`` of each command under a click group -> its command path."""
    out: dict[str, str] = {}
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):
            out.update(_group_paths(cmd, f"{prefix}{name} "))
        elif cmd.callback is not None:
            fn = getattr(cmd.callback, "__wrapped__", cmd.callback)
            out[f"{fn.__module__}:{fn.__qualname__}"] = f"{prefix}{name}"
    return out


def _wrap_tree(group: Any) -> None:
    """Wrap the commands under ``group`` with their option checks. Paths come from the root
    app (:func:`set_root`); a sub-app that runs on its own (``splat_app`` under typer's
    CliRunner, before ``volary.cli.main`` set a root) has them from its own tree, starting
    with the name it is mounted under (``typer.Typer(name="splat")``)."""
    if _ROOT:
        paths = _paths(_ROOT[0])
    else:
        paths = _group_paths(group, f"{group.name} " if group.name else "")
    stack = list(group.commands.values())
    while stack:
        cmd = stack.pop()
        if hasattr(cmd, "commands"):
            stack.extend(cmd.commands.values())
            continue
        cb = cmd.callback
        if cb is None or hasattr(cb, "volary_command"):
            continue
        fn = getattr(cb, "__wrapped__", cb)
        path = paths.get(f"{fn.__module__}:{fn.__qualname__}")
        if path is not None:
            _checked(cmd, path)


class VolaryGroup(TyperGroup):
    """A typer group whose commands check their options (:data:`OPTIONS`) before they run, and
    whose errors all end the same way: one ``error: ...`` line on stderr, exit code 2 for bad
    input (a click usage error, any VolaryError), 1 for a failure while running
    (:data:`RUN_FAILURES`), 130 for Ctrl-C; a traceback only for a bug."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _wrap_tree(self)

    def main(self, args: Any = None, prog_name: Any = None, complete_var: Any = None,
             standalone_mode: bool = True, **extra: Any) -> Any:  # fmt: skip
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except _cx.NoArgsIsHelpError as e:  # `volary` alone: the help, as typer shows it
            from typer import rich_utils

            rich_utils.rich_format_error(e)
            code = e.exit_code
        except _cx.UsageError as e:
            error_line(_usage_message(e))
            code = 2
        except VolaryError as e:
            error_line(str(e))
            code = 2
        except RUN_FAILURES as e:
            error_line(f"failed while running: {_failure(e)}")
            code = 1
        except (KeyboardInterrupt, typer.Abort):
            error_line("interrupted")
            code = 130
        except _cx.ClickException as e:
            error_line(_usage_message(e))
            code = e.exit_code
        raise SystemExit(code if isinstance(code, int) else 0)


def _failure(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        where = f"{e.filename}: " if e.filename else ""
        return f"{where}{e.strerror}"
    if isinstance(e, MemoryError):
        return f"out of memory{f' ({e})' if str(e) else ''}"
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
