"""Start a benchmark run with the stored rows of an earlier run for scenes that did not change.

When the scenes of some scenario types change (new generator, other fixed configurations) and
the episode, planners and vehicles do not, the rows of the unchanged types stay valid: this
script creates the new run's database (every work unit, as ``volary bench run`` would) and
stores the earlier run's rows (its ``trials.csv`` export) for the types named with
``--types``, checking that each of those types flies the same generator seeds as the rows did
and that every carried unit is complete. ``volary bench resume RUN`` then flies the rest.
The ``trials.csv`` export has no ``track`` column, so carried rows have no flown track (their
failure plots say "no track recorded").

``--complete`` instead carries every work unit, of any type, whose rows are all in the export
and none of them an "error" (an error can be a wall-clock limit, which depends on the
machine): a partial run continued in another session, unit by unit. The rows are matched by
trial key, which holds the platform, scenario, configuration seed and trial.

    .venv/bin/python experiments/flyingtrust/tools/carry_rows.py \\
        --suite flyingtrust --algo straight,mapper \\
        --rows experiments/flyingtrust/table-ii/results/straight-mapper/trials.csv \\
        --types random_cylinders,narrow_gap,sudden_drop,maze,perlin \\
        --db out/bench/flyingtrust-carry/run.sqlite
    .venv/bin/volary bench resume out/bench/flyingtrust-carry --workers 2

    .venv/bin/python experiments/flyingtrust/tools/carry_rows.py --algo ego --complete \
        --rows out/bench/ft-ego-first/report/trials.csv \
        --db out/bench/ft-ego/run.sqlite
"""

from __future__ import annotations

import argparse
import csv
import math
from dataclasses import fields
from pathlib import Path

from volary.studies.flyingtrust.db import RunDB
from volary.studies.flyingtrust.protocol import get_suite
from volary.studies.flyingtrust.run import create_run
from volary.studies.flyingtrust.schema import TrialResult

_TYPES = {f.name: f.type for f in fields(TrialResult)}


def _value(name: str, text: str) -> object:
    kind = _TYPES[name]
    if kind == "bool":
        if text not in ("True", "False"):
            raise ValueError(f"{name}: expected True/False, got {text!r}")
        return text == "True"
    if kind == "int":
        return int(text)
    if kind == "float":
        return math.nan if text in ("", "nan") else float(text)
    return text


def read_rows(path: Path) -> dict[str, TrialResult]:
    """The rows of a ``trials.csv`` export, by trial key."""
    with path.open(newline="") as f:
        rows = [
            TrialResult(**{k: _value(k, v) for k, v in r.items() if k in _TYPES})
            for r in csv.DictReader(f)
        ]
    return {r.key: r for r in rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="flyingtrust")
    ap.add_argument("--algo", default="straight,mapper")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rows", type=Path, required=True, help="trials.csv of the earlier run")
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--types", help="comma-separated scenario types to carry")
    which.add_argument(
        "--complete",
        action="store_true",
        help="carry every unit whose rows are all stored and none an error",
    )
    ap.add_argument("--db", type=Path, required=True, help="the new run's database")
    a = ap.parse_args()
    suite, algos = get_suite(a.suite), a.algo.split(",")
    types = a.types.split(",") if a.types else []
    old = read_rows(a.rows)
    for t in types:
        flown = sorted({r.config for r in old.values() if r.scenario == t})
        if flown != sorted(suite.scene_seeds(t)):
            raise SystemExit(f"{t}: the rows flew seeds {flown}, the suite flies "
                             f"{sorted(suite.scene_seeds(t))}; not carried")  # fmt: skip
    a.db.parent.mkdir(parents=True, exist_ok=True)
    create_run(suite, algos, a.db, seed=a.seed)
    carried = 0
    with RunDB.open(a.db) as db:
        done = db.done_keys()
        for uid, unit in enumerate(db.units()):
            if not a.complete and unit.scenario not in types:
                continue
            keys = [s.key for s in unit.trials()]
            if all(k in done for k in keys):
                continue
            missing = [k for k in keys if k not in old]
            if a.complete and (missing or any(old[k].cause == "error" for k in keys)):
                continue  # flown again
            if missing:
                raise SystemExit(f"unit {uid}: no stored row for {missing[:3]}...")
            carried += db.write_unit(uid, [old[k] for k in keys])
        total, stored = len(db.units()), len(db.done_keys())
    what = "complete units" if a.complete else ", ".join(types)
    print(f"{a.db}: carried {carried} rows of {what}; {stored} stored, "
          f"{total} work units; fly the rest with: volary bench resume {a.db.parent}")  # fmt: skip


if __name__ == "__main__":
    main()
