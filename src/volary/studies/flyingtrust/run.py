"""FLYINGTRUST runs: the process-pool runner (:mod:`volary.studies.flyingtrust.runner`) with this
study's episode.

``run_suite``, ``resume`` and ``run_units`` are the runner's, flying every work unit with
:func:`volary.studies.flyingtrust.episode.run_unit` unless ``unit_fn`` replaces it;
``run_suite`` first checks the algorithm names against the planner slate (and a ``ros1:NAME``'s
launch description). ``stored_suite`` rebuilds a run's protocol :class:`Suite` from its
database. The runner takes the unit function as an argument and names no episode; the
database and the statistics are core (the viewer and ``volary demo`` read them); what a trial is
(take-off, the 4 m/s cap, 90 s, 2 m goal radius) is this study's.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from volary.errors import UnknownNameError
from volary.studies.flyingtrust import runner as _runner
from volary.studies.flyingtrust.db import RunDB, load_results
from volary.studies.flyingtrust.runner import RunSummary, UnitFn, create_run


def run_suite(
    suite: Any,
    algos: str | Sequence[str],
    *args: Any,
    unit_fn: UnitFn | None = None,
    **options: Any,
) -> RunSummary:
    """Fly every trial of ``suite`` for ``algos`` and store them in a run database:
    :func:`.runner.run_suite` (its arguments: ``db_path``, ``workers``,
    ``cluster``, ``algo_options``, ``seed``, ``progress``, ``unit_timeout``) with this study's
    episode. ``unit_fn`` replaces ``episode.run_unit`` (then the names are not checked against
    the slate)."""
    if unit_fn is None:
        algo_options = options.get("algo_options") or {}
        check_algo_names(algos, {n for n, o in algo_options.items() if "remote" in o})
    return _runner.run_suite(suite, algos, *args, unit_fn=unit_fn or _episode_unit_fn(), **options)


def resume(*args: Any, unit_fn: UnitFn | None = None, **options: Any) -> RunSummary:
    """:func:`.runner.resume` (same arguments) with this study's
    episode unless ``unit_fn``: fly the trials of an existing run not stored yet."""
    return _runner.resume(*args, unit_fn=unit_fn or _episode_unit_fn(), **options)


def run_units(*args: Any, unit_fn: UnitFn | None = None, **options: Any) -> RunSummary:
    """:func:`.runner.run_units` (same arguments, ``only``: unit
    indices) with this study's episode unless ``unit_fn``."""
    return _runner.run_units(*args, unit_fn=unit_fn or _episode_unit_fn(), **options)


def _episode_unit_fn() -> UnitFn:
    """``episode.run_unit`` (which pins every thread pool itself), imported on use."""
    from volary.studies.flyingtrust.episode import run_unit

    return run_unit


def check_algo_names(algos: str | Sequence[str], remote: Collection[str] = ()) -> None:
    """Built-in planner names, installed entry-point names or ``module:Class`` specs, checked
    before a run starts: an unknown name lists the valid ones, and an entry point or a spec is
    resolved here (its module imported), so a mistyped module fails now rather than as a run of
    error rows; a ``ros1:NAME`` needs its launch description, read and checked here. Names in
    ``remote`` are flown by a planner host (``--remote``), which resolves them there."""
    from volary.studies.flyingtrust.planners import PLANNERS, available_planners, resolve_planner

    names = [a.strip() for a in algos.split(",")] if isinstance(algos, str) else list(algos)
    for a in names:
        if isinstance(a, str) and a.startswith("ros1:"):
            from volary.studies.flyingtrust.ros1 import check_algo

            check_algo(a)
    for a in names:
        if not isinstance(a, str) or not a or a.startswith("ros1:") or a in PLANNERS or a in remote:
            continue
        try:
            resolve_planner(a)
        except UnknownNameError:
            raise UnknownNameError("algorithm", a, available_planners()) from None


def stored_suite(db_path: str | Path) -> Any | None:
    """The run's :class:`~volary.studies.flyingtrust.protocol.Suite` rebuilt from the database's
    meta data, or None when it cannot be (a suite object that was not a protocol Suite)."""
    from volary.errors import VolaryError
    from volary.studies.flyingtrust.protocol import suite_from_dict

    with RunDB.open(db_path, readonly=True) as db:
        d = db.meta().get("suite")
    try:
        return suite_from_dict(d) if isinstance(d, dict) else None
    except (VolaryError, TypeError):
        return None


__all__ = [
    "RunSummary",
    "check_algo_names",
    "create_run",
    "load_results",
    "resume",
    "run_suite",
    "run_units",
    "stored_suite",
]
