"""A FLYINGTRUST trial as a viewer recording (``volary view out/bench/RUN --trial KEY``): the
stored ~5 Hz track of one trial of a run's database, in the scene regenerated from its scenario
type and configuration (:func:`volary.view.recording.scene_from_ref`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from volary.errors import ConfigError
from volary.platforms import get
from volary.studies.flyingtrust.db import RunDB
from volary.view.recording import Recording, Track, recording_from_spec, scene_from_ref


def trial_recording(run: str | Path, trial: str) -> Recording:
    """The benchmark trial ``trial`` (its key, ``algo|platform|scenario|config|trial``, as the
    report prints it) of the run directory or database ``run``."""
    db_path = Path(run)
    if db_path.is_dir():
        db_path = db_path / "run.sqlite"
    if not db_path.is_file():
        raise ConfigError(f"run: no benchmark database at {str(db_path)!r}")
    with RunDB.open(db_path, readonly=True) as db:
        found = db.results(trial)
        keys = db.done_keys() if not found else set()
    if not found:
        near = sorted(k for k in keys if k.split("|")[:3] == trial.split("|")[:3])[:5]
        near = near or sorted(keys)[:5]
        raise ConfigError(f"trial: no trial {trial!r} in {db_path}; keys look like: {near}")
    (r,) = found
    spec = scene_from_ref(f"{r.scenario}:{r.config}")
    track = json.loads(r.track) if r.track else []
    if not track:
        raise ConfigError(f"trial: {trial!r} has no recorded track (rows carried from CSV)")
    arr = np.asarray(track, float)
    radius = float(get(r.platform).radius)
    outcome = "success" if r.success else r.cause
    reference = np.array([spec.start, spec.goal], float)
    tr = Track(r.platform, arr[:, 0], arr[:, 1:4], None, radius, reference, outcome)
    title = f"{r.algo} on {r.platform}, {r.scenario} config {r.config}: {outcome}"
    return recording_from_spec(spec, [tr], title, f"{r.scenario}:{r.config}")
