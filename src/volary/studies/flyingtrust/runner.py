"""Run a suite's work units in a process pool (loky's, or inline, or on a dask cluster) and
store every finished unit's trials in the run database.

Only the main process writes the database, one transaction per unit (:mod:`.db`), so a run
killed at any point resumes with no trial lost or repeated. Crash isolation: a worker that dies
(segfault, ``os._exit``, out of memory) or a unit that runs past its wall-clock budget is
killed with its pool; the unit's trials become rows with cause ``"error"`` and a message, the
other units that were in flight run again, and the run goes on with a fresh pool. After a
crash the units that were in flight are re-run one at a time, so only the unit that crashes on
its own is blamed. Results do not depend on the number of workers or the order of completion:
each unit is a pure function of its :class:`WorkUnit` (its seeds come from the trial keys).
Workers are fresh interpreters (loky's fork+exec start, like spawn: nothing forked from the
driver) with one native thread each; the pool is stopped only through loky's public
``shutdown(kill_workers=True)``.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from volary.errors import ConfigError
from volary.studies.flyingtrust.db import RunDB, load_results, unit_to_json
from volary.studies.flyingtrust.schema import WorkUnit
from volary.studies.flyingtrust.units import Event, UnitFn, call_unit, error_rows, unit_rows

if TYPE_CHECKING:
    from loky import ProcessPoolExecutor as LokyPool

# A unit's wall-clock budget (a backstop for hangs the episode cannot interrupt: simulator,
# native code): each planner may use up to settings.trial_wall_limit (the episode stops it
# there), the simulation of settings.time_limit must run at least at SIM_MIN_REALTIME x real
# time, and a fresh worker gets UNIT_STARTUP_S to import torch and compile its kernels.
SIM_MIN_REALTIME = 0.5
UNIT_STARTUP_S = 60.0

__all__ = [
    "RunSummary",
    "create_run",
    "load_results",
    "resume",
    "run_suite",
    "run_units",
]


@dataclass(frozen=True)
class RunSummary:
    """What a call to :func:`run_suite` / :func:`resume` did."""

    db_path: Path
    total: int  # trials in the run
    done: int  # trials stored now
    successes: int  # of the stored trials
    errors: int  # stored trials with cause "error"
    units_run: int  # units flown by this call
    wall_s: float  # wall clock of this call

    @property
    def complete(self) -> bool:
        return self.done == self.total


# -- public entry points ---------------------------------------------------------------------
def run_suite(
    suite: Any,
    algos: str | Sequence[str],
    db_path: str | Path,
    workers: int | None = None,
    cluster: str | None = None,
    algo_options: Mapping[str, Mapping[str, Any]] | None = None,
    seed: int = 0,
    progress: bool = True,
    *,
    unit_fn: UnitFn | None = None,
    unit_timeout: float | None = None,
) -> RunSummary:
    """Fly every trial of ``suite`` for ``algos`` and store them in ``db_path``.

    A new ``db_path`` is created; an existing one made with the same suite, algorithms,
    options and seed is resumed; one made with other settings is refused (ConfigError).
    ``workers``: pool processes (``None``: one per CPU; ``0``: inline, no isolation).
    ``cluster``: a dask scheduler address ``tcp://host:port`` or ``local:N`` instead of the pool.
    ``unit_fn``: the function that flies one work unit (required; a module-level function, so
    workers can import it; FLYINGTRUST's is passed by :mod:`volary.studies.flyingtrust.run`).
    ``unit_timeout``: wall-clock seconds per unit before its pool process is killed (default:
    see :func:`_budget`).
    """
    path = create_run(suite, algos, db_path, algo_options, seed)
    return run_units(path, workers, cluster, progress, unit_fn=unit_fn, unit_timeout=unit_timeout)


def create_run(
    suite: Any,
    algos: str | Sequence[str],
    db_path: str | Path,
    algo_options: Mapping[str, Mapping[str, Any]] | None = None,
    seed: int = 0,
) -> Path:
    """Create the run database of ``suite`` x ``algos`` (every work unit, no trial flown), or
    check that an existing one was made with the same settings (ConfigError if not)."""
    units = suite.units(algos, seed, algo_options)
    meta = {
        "suite": _suite_dict(suite),
        "algos": list(units and dict.fromkeys(u.algo for u in units)),
        "algo_options": json.loads(json.dumps(algo_options or {}, sort_keys=True)),
        "seed": seed,
    }
    path = Path(db_path)
    if path.exists():
        with RunDB.open(path) as db:
            _check_same_run(db, meta, units)
    else:
        RunDB.create(path, meta, units).close()
    return path


def resume(
    db_path: str | Path,
    workers: int | None = None,
    cluster: str | None = None,
    progress: bool = True,
    *,
    unit_fn: UnitFn | None = None,
    unit_timeout: float | None = None,
) -> RunSummary:
    """Fly the trials of an existing run that are not stored yet (suite, algorithms, options
    and seed come from the database)."""
    if not Path(db_path).is_file():
        raise ConfigError(f"db_path: no run database at {db_path}")
    return run_units(
        db_path, workers, cluster, progress, unit_fn=unit_fn, unit_timeout=unit_timeout
    )


def run_units(
    db_path: str | Path,
    workers: int | None = None,
    cluster: str | None = None,
    progress: bool = True,
    *,
    unit_fn: UnitFn | None = None,
    unit_timeout: float | None = None,
    only: Sequence[int] | None = None,
) -> RunSummary:
    """Fly the unfinished units of an existing run database (``only``: unit indices) with
    ``unit_fn`` (required: a study's episode, e.g. FLYINGTRUST's through
    :mod:`volary.studies.flyingtrust.run`)."""
    if unit_fn is None:
        raise ConfigError(
            "unit_fn: expected the module-level function that flies a work unit, got None "
            "(FLYINGTRUST's runs: volary.studies.flyingtrust.run passes its episode.run_unit)"
        )
    workers = _check_workers(workers)
    if unit_timeout is not None and not (
        isinstance(unit_timeout, int | float) and unit_timeout > 0
    ):
        raise ConfigError(f"unit_timeout: expected seconds > 0, got {unit_timeout!r}")
    t0 = time.perf_counter()
    with RunDB.open(db_path) as db:
        units = db.units()
        done = db.done_keys()
        todo = [
            (i, u)
            for i, u in enumerate(units)
            if (only is None or i in set(only)) and not {t.key for t in u.trials()} <= done
        ]
        if todo:
            db.add_host(_host(workers, cluster))
        fn = unit_fn
        events = _events(todo, fn, workers, cluster, unit_timeout)
        n_run = _consume(db, events, progress)
        stored, ok, total = db.counts()
        (errors,) = db.conn.execute("SELECT COUNT(*) FROM trials WHERE cause='error'").fetchone()
    return RunSummary(
        Path(db_path), total, stored, ok, int(errors), n_run, time.perf_counter() - t0
    )


def _host(workers: int, cluster: str | None) -> dict[str, Any]:
    """This sitting's machine for the run's ``hosts`` record (a dask cluster's workers may be
    other machines: then the driver's CPU is named with the cluster's address)."""
    from volary.bench.threads import cpu_model

    pool = f"dask {cluster}" if cluster else ("inline" if workers == 0 else f"{workers} processes")
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "workers": pool,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


# -- checks ----------------------------------------------------------------------------------
def _check_workers(workers: int | None) -> int:
    if workers is None:  # the cores this process may use (affinity, cgroup quota)
        from volary.cpu import usable_cores

        return usable_cores()
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise ConfigError(f"workers: expected an int >= 0 (0: inline), got {workers!r}")
    return workers


def _suite_dict(suite: Any) -> dict[str, Any]:
    d = asdict(suite) if hasattr(suite, "__dataclass_fields__") else {"name": str(suite.name)}
    return json.loads(json.dumps(d, sort_keys=True))


def _check_same_run(db: RunDB, meta: dict[str, Any], units: Sequence[WorkUnit]) -> None:
    old = db.meta()
    diff = [k for k in meta if old.get(k) != meta[k]]
    if not diff and [unit_to_json(u) for u in db.units()] != [unit_to_json(u) for u in units]:
        diff = ["work units"]
    if diff:
        raise ConfigError(
            f"db_path: {db.path} holds a run with other settings ({', '.join(diff)} differ); "
            "resume it with `volary bench resume`, or choose another --db / --out"
        )


# -- events: (unit index, rows) as units finish ------------------------------------------------


def _events(
    todo: list[tuple[int, WorkUnit]],
    fn: UnitFn,
    workers: int,
    cluster: str | None,
    unit_timeout: float | None,
) -> Iterator[Event]:
    if not todo:
        return iter(())
    if cluster is not None:
        from volary.studies.flyingtrust.cluster import dask_events

        return dask_events(todo, fn, cluster)
    if workers == 0:
        return _inline_events(todo, fn)
    return _pool_events(todo, fn, workers, unit_timeout)


def _inline_events(todo: list[tuple[int, WorkUnit]], fn: UnitFn) -> Iterator[Event]:
    for i, unit in todo:
        t0 = time.perf_counter()
        yield i, unit_rows(unit, call_unit(fn, unit), time.perf_counter() - t0)


# -- the process pool with crash and hang isolation --------------------------------------------
# Set in each worker before its interpreter starts (so before OpenBLAS or OpenMP can load):
# one native thread per worker; ``episode.run_unit`` pins the pools again with threadpoolctl.
_WORKER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
# loky replaces a worker whose resident memory after a unit exceeds that after its first unit by
# more than this (its leak guard; 300 MB by default). A 36-platform unit's planners hold dense
# occupancy grids (36 x 9 MB for an urban scene at 0.2 m) and glibc keeps freed heap pages
# mapped, so a worker that does not leak measured up to +369 MB after one unit and +75 to +95
# MB after the next (flyingtrust units of mapper and topo, 2026-11-26); at 300 MB loky restarted
# sound workers and warned. 1 GB keeps the guard for real leaks; the environment may set it.
MEMORY_LEAK_BYTES = 1_000_000_000


def _new_pool(workers: int) -> LokyPool:
    """A loky pool of ``workers`` fresh interpreters (fork+exec: spawn-like, nothing forked
    from this process) that never retire idle workers; loky reports a worker's death as
    ``TerminatedWorkerError``, a ``BrokenProcessPool``."""
    from loky import ProcessPoolExecutor
    from loky.backend import get_context

    guard = os.environ.get("LOKY_MAX_MEMORY_LEAK_SIZE", str(MEMORY_LEAK_BYTES))
    env = {**_WORKER_ENV, "LOKY_MAX_MEMORY_LEAK_SIZE": guard}
    return ProcessPoolExecutor(workers, context=get_context("loky"), env=env)


def _kill_pool(pool: LokyPool) -> None:
    """SIGKILL every worker of the pool and its children, hung or not, and wait until they are
    gone (a running unit cannot be cancelled any other way); unfinished futures fail."""
    pool.shutdown(wait=True, kill_workers=True)


@dataclass
class _Flight:
    index: int
    unit: WorkUnit
    start: float
    solo: bool  # run alone after a crash: if the pool breaks now, this unit did it


def _pool_events(
    todo: list[tuple[int, WorkUnit]], fn: UnitFn, workers: int, unit_timeout: float | None
) -> Iterator[Event]:
    queue = deque(todo)
    suspects: deque[tuple[int, WorkUnit]] = deque()  # in flight when a worker died
    running: dict[Future, _Flight] = {}
    pool = _new_pool(workers)
    try:
        while queue or suspects or running:
            if not _fill(pool, running, queue, suspects, fn, workers) and not running:
                _kill_pool(pool)
                pool = _new_pool(workers)
                continue
            budget = [_budget(f.unit, unit_timeout) - (time.perf_counter() - f.start)
                      for f in running.values()]  # fmt: skip
            finished, _ = wait(running, timeout=max(0.0, min(budget)), return_when=FIRST_COMPLETED)
            broken = False
            for fut in finished:
                f = running.pop(fut)
                wall = time.perf_counter() - f.start
                try:
                    outcome = fut.result()
                except BrokenProcessPool as exc:  # loky's TerminatedWorkerError among them
                    broken = True
                    if f.solo:
                        yield f.index, error_rows(f.unit, _died_message(exc), wall)
                    else:
                        suspects.append((f.index, f.unit))
                    continue
                yield f.index, unit_rows(f.unit, outcome, wall)
            now = time.perf_counter()
            late = [
                fut for fut, f in running.items() if now - f.start >= _budget(f.unit, unit_timeout)
            ]
            for fut in late:
                f = running.pop(fut)
                msg = (
                    "the work unit ran past its wall-clock limit of "
                    f"{_budget(f.unit, unit_timeout):.0f} s and was killed"
                )
                yield f.index, error_rows(f.unit, msg, now - f.start)
            if late or broken:
                for f in running.values():  # innocent bystanders (or suspects): run them again
                    (suspects if broken else queue).appendleft((f.index, f.unit))
                running.clear()
                _kill_pool(pool)
                pool = _new_pool(workers)
    finally:
        _kill_pool(pool)


def _fill(
    pool: LokyPool,
    running: dict[Future, _Flight],
    queue: deque[tuple[int, WorkUnit]],
    suspects: deque[tuple[int, WorkUnit]],
    fn: UnitFn,
    workers: int,
) -> bool:
    """Submit units up to one per worker (so a submitted unit is a running unit); after a
    crash, the suspects run one at a time. False when the pool turned out to be broken."""
    solo = bool(suspects)
    source = suspects if solo else queue
    while source and len(running) < (1 if solo else workers):
        i, u = source.popleft()
        try:
            fut = pool.submit(call_unit, fn, u)
        except BrokenProcessPool:
            source.appendleft((i, u))
            return False
        running[fut] = _Flight(i, u, time.perf_counter(), solo)
    return True


def _budget(unit: WorkUnit, unit_timeout: float | None) -> float:
    """Seconds a unit may run: ``unit_timeout``, or trial_wall_limit x trials +
    time_limit / SIM_MIN_REALTIME + UNIT_STARTUP_S."""
    if unit_timeout is not None:
        return float(unit_timeout)
    st = unit.settings
    n = len(unit.platforms)
    return st.trial_wall_limit * n + st.time_limit / SIM_MIN_REALTIME + UNIT_STARTUP_S


def _died_message(exc: BaseException) -> str:
    """Why the unit is blamed, then what the pool said (loky names the workers' exit codes)."""
    return (
        "the worker process running this work unit died (segfault, os._exit or out of "
        f"memory); it died again when the unit was re-run alone\n{type(exc).__name__}: {exc}"
    )


# -- writing and progress ----------------------------------------------------------------------
def _consume(db: RunDB, events: Iterator[Event], progress: bool) -> int:
    """Write each finished unit in one transaction; show trials done, success, ETA."""
    done, ok, total = db.counts()
    if not progress:
        n = 0
        for i, rows in events:
            db.write_unit(i, rows)
            n += 1
        return n
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    cols = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(
            "trials  success {task.fields[ok]}/{task.completed:.0f}  errors {task.fields[err]}"
        ),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    n = err = 0
    with Progress(*cols) as bar:
        task = bar.add_task(db.path.parent.name or "run", total=total, completed=done, ok=ok, err=0)
        for i, rows in events:
            db.write_unit(i, rows)
            n += 1
            ok += sum(bool(r.success) for r in rows)
            err += sum(r.cause == "error" for r in rows)
            bar.update(task, advance=len(rows), ok=ok, err=err)
    return n
