"""``volary sysid LOG``: fit a platform to flight logs, then score it open loop (docs/sysid.md).

LOG is one flight-log CSV or a folder of them (``volary``, ``nanobench`` or ``volary fly``'s
columns, detected from the header; a ``volary fly`` log's rotor-speed commands are read as
fractions of ``--platform``'s maximum rotor speed). The fit sees these training logs only;
``--test`` names the held-out logs the report scores (multi-step open-loop prediction,
horizons 1..``--horizon`` samples, against the constant-velocity/constant-rates baseline).
Writes ``platform.toml`` (loadable by :func:`volary.platforms.load_file`), ``sysid.json`` (the
fitted values, the command map and the scores) and ``horizons.png``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from volary.options import console

Log = Annotated[Path, typer.Argument(help="Training flight log (CSV) or a folder of them.")]


def _logs(path: Path, out_of_range: str, rotor_full: float) -> list:
    from volary.errors import FileFormatError
    from volary.sysid.logs import read_log

    files = sorted(path.glob("*.csv")) if path.is_dir() else [path]
    logs, skipped = [], []
    for f in files:
        try:
            logs.append(read_log(f, out_of_range=out_of_range, rotor_full=rotor_full))
        except FileFormatError as err:
            skipped.append(str(err))
    for line in skipped:
        console.print(f"skipped {line}", markup=False)
    if not logs:
        raise FileFormatError(f"{path}: no usable flight log (CSV) there")
    return logs


def sysid(
    log: Log,
    test: Annotated[
        Path | None, typer.Option(help="Held-out log (CSV) or folder to score.")
    ] = None,
    platform: Annotated[
        str,
        typer.Option(help="Airframe the fit starts from: a catalogue name or FILE.toml[:NAME]."),
    ] = "crazyflie",
    out: Annotated[Path, typer.Option(help="Folder for platform.toml, sysid.json, plot.")] = Path(
        "out/sysid"
    ),
    horizon: Annotated[int, typer.Option(help="Prediction horizon in log samples.")] = 50,
    stride: Annotated[int, typer.Option(help="Score every stride-th window start.")] = 1,
    no_voltage: Annotated[
        bool, typer.Option("--no-voltage", help="Ignore the battery voltage column.")
    ] = False,
    refine_evaluations: Annotated[
        int,
        typer.Option(
            help="Run the output-error refinement with this many open-loop predictions (0: off). "
            "A better predictor of closed-loop logs, not always a vehicle to fly (docs/sysid.md)."
        ),
    ] = 0,
    cut_out_of_range: Annotated[
        bool,
        typer.Option(help="End a flight at its first motor command outside 0..full power."),
    ] = False,
) -> None:
    """Fit a platform to flight logs (motor commands and pose) and score its open-loop
    prediction against the constant-velocity/constant-rates baseline."""
    from volary.platforms import get
    from volary.sysid.fit import DEFAULT_STEPS, STEPS, fit
    from volary.sysid.report import write_report

    mode = "cut" if cut_out_of_range else "error"
    start = get(platform)
    full = max(start.max_rotor_speed)
    train = _logs(log, mode, full)
    held = _logs(test, mode, full) if test is not None else []
    console.print(f"fitting {platform} to {len(train)} training logs ({sum(map(len, train))} rows)")
    model, fitted = fit(
        train,
        start,
        steps=STEPS if refine_evaluations else DEFAULT_STEPS,
        refine={"max_evaluations": refine_evaluations} if refine_evaluations else None,
        use_voltage=not no_voltage,
        progress=lambda line: console.print(line, markup=False),
    )
    paths = write_report(out, model, fitted, train, held, horizon, stride, base=platform)
    if held:
        rows = json.loads(paths["sysid.json"].read_text())["test"]
        for name in ("constant", "model"):
            at = rows[name]["summary"].get("0.5s", {})
            console.print(
                f"{name:>8}: at 0.5 s  pos {at.get('pos', float('nan')):.3f} m  vel "
                f"{at.get('vel', float('nan')):.3f} m/s  rates {at.get('omega', float('nan')):.3f} "
                "rad/s",
                markup=False,
            )
    for p in paths.values():
        console.print(f"wrote {p}", markup=False)
