"""Running one work unit, the same in every executor (inline, the local process pool, a dask
cluster): :func:`call_unit` catches what the unit raises, :func:`unit_rows` turns the outcome
into the unit's rows (cause-``"error"`` rows from :func:`error_rows` when it raised or returned
the wrong trials). :mod:`.runner` and :mod:`.cluster` both
import from here; the runner picks the executor."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from volary.studies.flyingtrust.schema import TrialResult, WorkUnit

UnitFn = Callable[[WorkUnit], list[TrialResult]]
# (unit index, rows) as units finish
Event = tuple[int, list[TrialResult]]


def call_unit(fn: UnitFn, unit: WorkUnit) -> tuple[str, Any]:
    """Run one unit, catching what it raises: ("ok", rows) or ("error", traceback)."""
    try:
        return "ok", fn(unit)
    except Exception:
        return "error", traceback.format_exc()


def error_rows(unit: WorkUnit, message: str, wall: float = float("nan")) -> list[TrialResult]:
    """One cause-"error" row per trial of a unit that produced no rows of its own."""
    return [
        TrialResult(
            t.algo,
            t.platform,
            t.scenario,
            t.config,
            t.trial,
            t.seed,
            success=False,
            cause="error",
            wall_time=wall,
            error=message,
        )  # fmt: skip
        for t in unit.trials()
    ]


def unit_rows(unit: WorkUnit, outcome: tuple[str, Any], wall: float) -> list[TrialResult]:
    """The unit's rows, or error rows when it raised or returned the wrong trials."""
    status, payload = outcome
    if status != "ok":
        return error_rows(unit, f"the work unit raised:\n{payload}", wall)
    want = {t.key for t in unit.trials()}
    rows = list(payload) if isinstance(payload, list | tuple) else []
    got = [r.key for r in rows if isinstance(r, TrialResult)]
    if len(got) != len(rows) or sorted(got) != sorted(want):
        return error_rows(
            unit,
            f"the work unit returned rows for {sorted(got)}, expected one for each of "
            f"{sorted(want)}",
            wall,
        )
    return rows
