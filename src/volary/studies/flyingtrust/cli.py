"""``volary bench run|resume|report|list``: the FLYINGTRUST navigation benchmark, the study's
commands; :func:`register` adds them to the ``volary bench`` group of :mod:`volary.cli.main`
(whose ``bench physics`` is core), so every ``volary bench ...`` command is unchanged."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from volary.options import SetOption, configure, console, fail

RUNS_DIR = Path("out/bench")
DB_NAME = "run.sqlite"

Workers = Annotated[
    int | None,
    typer.Option("--workers", help="Pool processes (default: one per CPU; 0: inline)."),
]
Cluster = Annotated[
    str | None,
    typer.Option("--cluster", help="dask scheduler tcp://host:port, or local:N worker processes."),
]
Quiet = Annotated[bool, typer.Option("--quiet", help="No progress bar.")]
UnitTimeout = Annotated[
    float | None,
    typer.Option(
        "--unit-timeout",
        help="Wall-clock seconds per work unit before its process is killed "
        "(default: trial_wall_limit x trials + 2 x time_limit + 60 s).",
    ),
]


def _check_pool(workers: int | None, cluster: str | None, unit_timeout: float | None) -> None:
    """The pool options, checked before the command prints its first line."""
    from volary.errors import VolaryError
    from volary.studies.flyingtrust.cluster import parse_address

    if workers is not None and workers < 0:
        fail(f"--workers: expected an integer >= 0 (0: inline), got {workers}")
    if unit_timeout is not None and not (math.isfinite(unit_timeout) and unit_timeout > 0):
        fail(f"--unit-timeout: expected a finite number of seconds > 0, got {unit_timeout}")
    if cluster is not None:
        try:
            parse_address(cluster)
        except VolaryError as e:
            fail(f"--{e}")


def register(bench_app: typer.Typer) -> None:
    """Add the navigation-benchmark commands to ``volary bench``."""
    bench_app.command("run")(bench_run)
    bench_app.command("resume")(bench_resume)
    bench_app.command("report")(bench_report)
    bench_app.command("list")(bench_list)


def bench_run(
    suite: Annotated[
        str, typer.Option("--suite", help="quick, flyingtrust or a suite TOML file.")
    ] = "quick",
    configs: Annotated[
        int | None,
        typer.Option(
            "--configs",
            metavar="N",
            help="Configurations per scenario type (1-100), drawn by each type's rule: seeds "
            "0..N-1; for forest and urban N seeds stratified on the straight line's clearance "
            "over seeds 0..10N-1. Sets the suite's configs to 'generated:N' (10: 'fixed', the "
            "same ten).",
        ),
    ] = None,
    scenarios: Annotated[
        str | None,
        typer.Option(
            "--scenarios",
            metavar="TYPE,TYPE",
            help="Fly only these scenario types (comma-separated), e.g. forest,urban.",
        ),
    ] = None,
    algo: Annotated[
        str,
        typer.Option(
            "--algo",
            help="Comma-separated planners: names, module:Class, or remote:ADDRESS (a planner "
            "served by `volary host-planner` or volary.client.host_planner).",
        ),
    ] = "straight",
    remote: Annotated[
        list[str] | None,
        typer.Option(
            "--remote",
            metavar="NAME=ADDRESS",
            help="Fly planner NAME (one of --algo) from the planner host at ADDRESS: the rows "
            "and seeds of the in-process NAME, the planner in another process. Repeatable.",
        ),
    ] = None,
    workers: Workers = None,
    cluster: Cluster = None,
    db: Annotated[
        Path | None, typer.Option("--db", help="Run database (default: OUT/run.sqlite).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Base seed of every trial.")] = 0,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Run directory (default: out/bench/<suite>-<time>)."),
    ] = None,
    report: Annotated[bool, typer.Option("--report", help="Write the HTML report after.")] = False,
    unit_timeout: UnitTimeout = None,
    quiet: Quiet = False,
    set_: SetOption = None,
) -> None:
    """Fly a suite for some planners; every finished trial is one row of the run database.
    Running it again with the same settings resumes; Ctrl-C and `volary bench resume` too.

    --configs and --scenarios change the suite before --set, which takes Suite fields, e.g.
    --set trials_per_config=2 --set settings.time_limit=60."""
    from volary.errors import VolaryError
    from volary.studies.flyingtrust.run import check_algo_names, create_run, run_units

    try:
        s = build_suite(suite, configs, scenarios, set_)
        algos = [a.strip() for a in algo.split(",") if a.strip()]
        options = _remote_options(remote or [], algos)
        try:  # before the run's line names a database that is not made
            check_algo_names(algos, set(options))
        except VolaryError as e:
            fail(f"--algo: {e}")
        if seed < 0:
            fail(f"--seed: expected >= 0, got {seed}")
        _check_pool(workers, cluster, unit_timeout)
        _announce_generation(s, quiet)
        run_dir = out or RUNS_DIR / f"{s.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        # the database is made (or an existing one checked) before the run's line is printed
        path = create_run(s, algos, db or run_dir / DB_NAME, options or None, seed)
        console.print(
            f"suite {escape(s.name)}: {s.n_trials(len(algos))} trials "
            f"({escape(', '.join(algos))}) -> {escape(str(path))}"
        )
        summary = _interruptible(
            lambda: run_units(
                path,
                workers,
                cluster,
                progress=not quiet,
                unit_timeout=unit_timeout,
            ),
            path,
        )
    except VolaryError as e:
        fail(str(e))
    _finish(summary, report)


def build_suite(
    suite: str | Path,
    configs: int | None = None,
    scenarios: str | None = None,
    sets: list[str] | None = None,
) -> Any:
    """The :class:`~volary.studies.flyingtrust.protocol.Suite` that ``volary bench run`` flies: the
    named suite, then ``--configs N`` (configs ``"generated:N"``; 10 is ``"fixed"``, the same
    suite), then ``--scenarios a,b``, then every ``--set``. ConfigError (one line naming the
    option)."""
    from volary.errors import ConfigError, VolaryError
    from volary.inputs import within
    from volary.studies.flyingtrust.protocol import FIXED, GENERATED, N_FIXED_CONFIGS, get_suite

    changes: list[tuple[str, str, Any]] = []
    if configs is not None:
        n = within(configs, "generated_configs", "--configs")
        changes.append(
            ("--configs", "configs", FIXED if n == N_FIXED_CONFIGS else f"{GENERATED}:{n}")
        )
    if scenarios is not None:
        changes.append(("--scenarios", "scenarios", _scenario_list(scenarios)))
    try:
        named = get_suite(suite)
    except VolaryError as e:
        raise ConfigError(f"--suite: {e}") from None
    return configure(named, changes, sets)


def _announce_generation(s: Any, quiet: bool) -> None:
    """One line before a "generated:N" suite's forest/urban candidates are generated (about
    0.1 s a scene), so a user does not wait on a silent command."""
    from volary.studies.flyingtrust.protocol import GENERATED
    from volary.worlds.scenarios import CANDIDATES_PER_CONFIG, STRATIFIED_FIXED

    types = [t for t in s.scenarios if t in STRATIFIED_FIXED]
    if quiet or not types or not str(s.configs).startswith(f"{GENERATED}:"):
        return
    n = s.n_configs()
    console.print(
        f"{s.configs}: drawing {n} of {CANDIDATES_PER_CONFIG * n} candidate scenes of "
        f"{', '.join(types)} by line clearance (about 0.1 s a scene)"
    )


def _scenario_list(text: str) -> tuple[str, ...]:
    """--scenarios "a,b" as a tuple of the FLYINGTRUST scenario types, or ConfigError."""
    from volary.errors import ConfigError, did_you_mean
    from volary.studies.flyingtrust.protocol import SCENARIO_TYPES

    names = [t.strip() for t in text.split(",") if t.strip()]
    valid = ", ".join(SCENARIO_TYPES)
    if not names:
        raise ConfigError(
            f"--scenarios: expected comma-separated scenario types ({valid}), got {text!r}"
        )
    for t in names:
        if t not in SCENARIO_TYPES:
            hint = did_you_mean(t, list(SCENARIO_TYPES))
            raise ConfigError(
                f"--scenarios: unknown scenario type {t[:40]!r}{hint}; valid: {valid}"
            )
    if len(set(names)) != len(names):
        raise ConfigError(f"--scenarios: a scenario type is named twice in {text!r}")
    return tuple(names)


def _remote_options(remote: list[str], algos: list[str]) -> dict[str, dict[str, str]]:
    """--remote NAME=ADDRESS -> {NAME: {"remote": ADDRESS}}, each NAME one of the algorithms."""
    out: dict[str, dict[str, str]] = {}
    for item in remote:
        name, sep, address = item.partition("=")
        name, address = name.strip(), address.strip()
        if not sep or not name or "://" not in address:
            fail(f"--remote: expected NAME=ADDRESS like mapper=tcp://127.0.0.1:5600, got {item!r}")
        if name not in algos:
            fail(f"--remote: {name!r} is not one of --algo {','.join(algos)}")
        out[name] = {"remote": address}
    return out


def bench_resume(
    run: Annotated[
        Path | None,
        typer.Argument(help="Run directory or database (default: the latest under out/bench)."),
    ] = None,
    workers: Workers = None,
    cluster: Cluster = None,
    report: Annotated[bool, typer.Option("--report", help="Write the HTML report after.")] = False,
    unit_timeout: UnitTimeout = None,
    quiet: Quiet = False,
) -> None:
    """Fly the trials of an interrupted run that are not stored yet."""
    from volary.errors import VolaryError
    from volary.studies.flyingtrust.db import RunDB
    from volary.studies.flyingtrust.run import resume

    _check_pool(workers, cluster, unit_timeout)
    path = _db_path(run) if run is not None else _latest_run()
    try:
        with RunDB.open(path, readonly=True):  # a bad database: one line, before "resuming"
            pass
    except VolaryError as e:
        fail(str(e))
    console.print(f"resuming {escape(str(path))}")
    try:
        summary = _interruptible(
            lambda: resume(
                path,
                workers=workers,
                cluster=cluster,
                progress=not quiet,
                unit_timeout=unit_timeout,
            ),
            path,
        )
    except VolaryError as e:
        fail(str(e))
    _finish(summary, report)


def bench_report(
    run: Annotated[Path, typer.Argument(help="Run directory or database.")],
    out: Annotated[
        Path | None, typer.Option("--out", help="Report directory (default: RUN/report).")
    ] = None,
) -> None:
    """Write the HTML report (figures, tables, CSV/Parquet exports) of a run."""
    path = _db_path(run)
    index = _write_report(path, out or path.parent / "report")
    console.print(f"[green]wrote {escape(str(index))}[/green]")


def bench_list(
    runs: Annotated[Path, typer.Option("--runs", help="Where to look for runs.")] = RUNS_DIR,
) -> None:
    """Suites, planners, and the runs found under out/bench with their progress."""
    from volary.studies.flyingtrust.protocol import SUITES, get_suite

    if runs.exists() and not runs.is_dir():  # before the tables, not an empty one after them
        fail(f"--runs: expected a directory of runs, got the file {runs}")
    t = Table("suite", "platforms", "scenario types", "configs", "trials per algorithm")
    for name in SUITES:
        s = get_suite(name)
        t.add_row(
            name,
            str(len(s.platforms)),
            str(len(s.scenarios)),
            f"{s.n_configs()} ({s.configs})" if isinstance(s.configs, str) else str(s.n_configs()),
            f"{s.n_trials(1):,}",
        )
    console.print(t)
    console.print(
        "suite files: --suite path/to/suite.toml (see volary.studies.flyingtrust.protocol)"
    )
    console.print(
        f"planners: {', '.join(_planner_names()) or '(none registered)'}; or module:Class"
    )
    console.print(_runs_table(runs))


# -- helpers -----------------------------------------------------------------------------------
def _interruptible(call: Any, path: Path) -> Any:
    try:
        return call()
    except KeyboardInterrupt:
        console.print(
            f"\ninterrupted; every finished unit is stored. Resume: volary bench resume {path}"
        )
        raise typer.Exit(130) from None


def _finish(summary: Any, report: bool) -> None:
    from volary.errors import VolaryError
    from volary.studies.flyingtrust.db import load_results

    try:
        rows = load_results(summary.db_path)
    except VolaryError as e:  # the run's file was damaged since it was written
        fail(str(e))
    console.print(_summary_table(rows))
    state = "complete" if summary.complete else "incomplete"
    console.print(
        f"{state}: {summary.done}/{summary.total} trials, {summary.successes} successes, "
        f"{summary.errors} errors; {summary.units_run} units in {summary.wall_s:.1f} s"
    )
    if report:
        index = _write_report(summary.db_path, summary.db_path.parent / "report")
        console.print(f"[green]wrote {escape(str(index))}[/green]")
    else:
        console.print(f"report: volary bench report {escape(str(summary.db_path.parent))}")


def _summary_table(rows: list[Any]) -> Table:
    """Success per scenario type and algorithm (plain counts; the report has the CIs)."""
    algos = sorted({r.algo for r in rows})
    scens = list(dict.fromkeys(r.scenario for r in rows))
    t = Table("scenario", *algos, title="success (trials)")
    for sc in [*scens, None]:
        cells = []
        for a in algos:
            sel = [r for r in rows if r.algo == a and (sc is None or r.scenario == sc)]
            ok = sum(r.success for r in sel)
            cells.append(f"{100 * ok / len(sel):.0f}% ({len(sel)})" if sel else "-")
        t.add_row(sc or "all", *cells)
    return t


def _write_report(path: Path, out: Path) -> Path:
    from volary.errors import VolaryError
    from volary.studies.flyingtrust.db import RunDB, load_results
    from volary.studies.flyingtrust.run import stored_suite

    try:
        from volary.studies.flyingtrust.report import make_report
    except ImportError:
        fail("the HTML report (volary.studies.flyingtrust.report) is not part of this volary yet")
    try:
        results = load_results(path)
        if not results:
            fail(f"{path} holds no finished trials yet")
        with RunDB.open(path, readonly=True) as db:
            hosts = db.hosts()
        return Path(make_report(results, out, title=f"volary bench: {path.parent.name}",
                                suite=stored_suite(path), run=path.parent,
                                hosts=hosts))  # fmt: skip
    except VolaryError as e:
        fail(str(e))


def _db_path(run: Path) -> Path:
    path = run / DB_NAME if run.is_dir() else run
    if not path.is_file():
        fail(f"RUN: no run database at {path} (expected a run directory or a .sqlite file)")
    return path


def _latest_run() -> Path:
    found = sorted(RUNS_DIR.glob(f"*/{DB_NAME}"), key=lambda p: p.stat().st_mtime)
    if not found:
        fail(f"no runs under {RUNS_DIR}; name one: volary bench resume RUN")
    return found[-1]


def _planner_names() -> list[str]:
    import importlib

    try:
        registry = importlib.import_module("volary.studies.flyingtrust.planners")
    except ImportError:
        return []
    return list(getattr(registry, "PLANNERS", ()))


def _runs_table(runs: Path) -> Table:
    from volary.errors import VolaryError
    from volary.studies.flyingtrust.db import RunDB

    t = Table(
        "run",
        "suite",
        "algorithms",
        "trials",
        "success",
        "errors",
        "updated",
        "flown on",
        title=str(runs),
    )
    for path in sorted(runs.glob(f"*/{DB_NAME}")):
        try:
            with RunDB.open(path, readonly=True) as db:
                meta = db.meta()
                cpus = dict.fromkeys(str(h.get("cpu", "?")) for h in db.hosts())
                done, ok, total = db.counts()
                (err,) = db.conn.execute(
                    "SELECT COUNT(*) FROM trials WHERE cause='error'"
                ).fetchone()
        except VolaryError as e:
            t.add_row(path.parent.name, f"[red]{e}[/red]", "", "", "", "", "", "")
            continue
        t.add_row(
            path.parent.name,
            str(meta.get("suite", {}).get("name", "?")),
            ",".join(meta.get("algos", [])),
            f"{done}/{total}",
            f"{100 * ok / done:.0f}%" if done else "-",
            str(err),
            str(meta.get("updated", "")),
            "; ".join(cpus) or "-",
        )
    return t


__all__ = [
    "DB_NAME",
    "RUNS_DIR",
    "bench_list",
    "bench_report",
    "bench_resume",
    "bench_run",
    "build_suite",
    "register",
]
