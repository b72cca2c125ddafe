"""``volary view``: open a benchmark trial, a race or a saved recording in the browser viewer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from volary.errors import ConfigError


def load_source(source: Path | None, trial: str | None, race: str | None, seed: int) -> Any:
    """The recording ``volary view`` shows: a run's trial, a flown race, or a ``.npz`` file."""
    from volary.studies.flyingtrust.recording import trial_recording
    from volary.view import load_recording, race_recording

    picked = [x for x in (trial, race) if x is not None]
    if len(picked) > 1:
        raise ConfigError("--trial and --race: give one of them")
    if race is not None:
        if source is not None:
            raise ConfigError("--race: flies the AlphaPilot course; give no SOURCE with it")
        from volary.studies.alphapilot.race import run_race
        from volary.studies.alphapilot.racers import make_racer

        return race_recording(run_race(racer=make_racer(race), seed=seed))
    if source is None:
        raise ConfigError("SOURCE: expected a run directory (with --trial) or a .npz recording")
    if trial is not None:
        return trial_recording(source, trial)
    if source.suffix == ".npz":
        return load_recording(source)
    raise ConfigError(
        f"SOURCE: {str(source)!r} is not a .npz recording; for a benchmark run give --trial KEY"
    )


def view_cli(
    source: Path | None,
    *,
    trial: str | None,
    race: str | None,
    seed: int,
    host: str,
    port: int,
    save: Path | None,
    serve: bool,
    console: Console,
) -> None:
    """Load, optionally save, then serve until Ctrl-C (``serve=False``: return after saving)."""
    from volary.view import Viewer

    with console.status("loading..."):
        rec = load_source(source, trial, race, seed)
    if save is not None:
        console.print(f"wrote {rec.save(save)}", markup=False)
    if not serve:
        return
    viewer = Viewer(host=host, port=port)
    viewer.show(rec)
    console.print(f"{rec.title}\nopen {viewer.url} (Ctrl-C to stop)", markup=False)
    try:
        viewer.wait()
    except KeyboardInterrupt:
        pass
    finally:
        viewer.close()
