"""Do two benchmark runs hold the same rows? (issue 60: a study's results before and after a move)

Reads the ``trials`` table of each run's database (``volary bench run --out DIR`` writes
``DIR/run.sqlite``) or a ``trials.csv`` export, matches the rows by trial key and compares every
column both have but the wall-clock one (``wall_time``). Prints the number of rows, of rows
that differ in anything, and per column the rows that differ and the largest relative
difference (numbers); exits 1 when any row differs or a key is missing on one side. A CSV
export rounds nothing away, but compare a database with a database where both exist.

    .venv/bin/python experiments/flyingtrust/tools/same_rows.py out/bench/ft-learned-pre \\
        out/bench/ft-learned-post
"""

from __future__ import annotations

import argparse
import csv
import math
import sqlite3
import sys
from pathlib import Path
from typing import Any

WALL = ("wall_time",)  # columns that measure the machine, not the flight
KEY = ("algo", "platform", "scenario", "config", "trial")  # a trial's key, as the database's


def rows(path: Path) -> dict[str, dict[str, Any]]:
    """A run's trials by key: ``path`` is a run folder, its database or a CSV (values as the
    CSV writes them: a database's are formatted the same way for the comparison)."""
    if path.is_dir():
        path = path / "run.sqlite"
    if path.suffix == ".csv":
        with open(path, newline="") as f:
            out = {}
            for r in csv.DictReader(f):
                row = {k: _value(v) for k, v in r.items()}
                out[r.get("key") or "|".join(r[c] for c in KEY)] = row
            return out
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        cur = db.execute("SELECT * FROM trials")
        names = [d[0] for d in cur.description]
        return {r[0]: dict(zip(names, r, strict=True)) for r in cur}


def _value(v: str) -> Any:
    """A CSV cell as the database holds it: a number when it reads as one, a flag as 0/1, an
    empty cell as no value (the database's NULL)."""
    if v == "":
        return None
    if v in ("True", "False"):
        return int(v == "True")
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _missing(v: Any) -> bool:
    """No value: NULL, an empty cell or string, or NaN (a failed trial's time to goal)."""
    return v is None or v == "" or (_number(v) and math.isnan(v))


def compare(a: dict, b: dict) -> dict:
    """Per column: rows that differ and the largest relative difference (numbers)."""
    keys = sorted(set(a) & set(b))
    cols = [c for c in next(iter(a.values()), {}) if c in next(iter(b.values()), {})
            and c not in WALL]  # fmt: skip
    out: dict = {"rows": len(keys), "only_first": len(set(a) - set(b)),
                 "only_second": len(set(b) - set(a)), "columns": {}}  # fmt: skip
    differing = set()
    for c in cols:
        n, worst = 0, 0.0
        for k in keys:
            x, y = a[k][c], b[k][c]
            if x == y or (_missing(x) and _missing(y)):
                continue
            n += 1
            differing.add(k)
            if _number(x) and _number(y):
                scale = max(abs(x), abs(y))
                worst = max(worst, abs(x - y) / scale if scale > 0 else 0.0)
        if n:
            out["columns"][c] = {"rows": n, "max_relative": worst}
    out["rows_differing"] = len(differing)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("first", type=Path, help="run folder, run.sqlite or trials.csv")
    ap.add_argument("second", type=Path, help="run folder, run.sqlite or trials.csv")
    args = ap.parse_args()
    res = compare(rows(args.first), rows(args.second))
    print(f"{res['rows']} rows in both ({res['only_first']} only in the first, "
          f"{res['only_second']} only in the second); {res['rows_differing']} differ in a column "
          f"other than {', '.join(WALL)}")  # fmt: skip
    for c, d in res["columns"].items():
        print(f"  {c}: {d['rows']} rows, largest relative difference {d['max_relative']:.2e}")
    same = res["rows_differing"] == 0 and res["only_first"] == res["only_second"] == 0
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
