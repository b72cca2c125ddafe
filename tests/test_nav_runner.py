"""The runner: every trial stored exactly once whatever the worker count, kill -9 and resume,
crash / hang / raise isolation, the dask cluster option, and refusing a different run."""

from __future__ import annotations

import math
import os
import random
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from _nav_fakes import crashy_unit, fake_unit, hold_memory, wrong_rows_unit
from volary.bench.threads import cpu_model
from volary.errors import ConfigError
from volary.studies.flyingtrust.db import RunDB, load_results
from volary.studies.flyingtrust.protocol import QUICK_PLATFORMS, SCENARIO_TYPES, Suite
from volary.studies.flyingtrust.run import resume, run_suite
from volary.studies.flyingtrust.runner import _kill_pool, _new_pool
from volary.studies.flyingtrust.schema import ROW_FIELDS, TrialResult

TESTS = Path(__file__).resolve().parent
SUITE = Suite("t", QUICK_PLATFORMS[:3], SCENARIO_TYPES, (0, 1), 1)
ALGOS = ("a", "b")


def _table(rows: list[TrialResult]) -> dict[str, tuple]:
    """Every field but the wall clock, NaN made comparable."""
    out = {}
    for r in rows:
        vals = []
        for n in ROW_FIELDS:
            v = getattr(r, n)
            vals.append("nan" if isinstance(v, float) and math.isnan(v) else v)
        out[r.key] = tuple(v for n, v in zip(ROW_FIELDS, vals, strict=True) if n != "wall_time")
    return out


def _aggregate(rows: list[TrialResult]) -> tuple:
    return (
        len(rows),
        sum(r.success for r in rows),
        sorted((c, sum(r.cause == c for r in rows)) for c in {r.cause for r in rows}),
        round(sum(r.path_length for r in rows), 9),
    )


def _expected_keys(suite: Suite, algos, seed: int) -> set[str]:
    return {t.key for u in suite.units(algos, seed) for t in u.trials()}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, tuple]:
    """An uninterrupted inline run (workers=0)."""
    db = tmp_path_factory.mktemp("ref") / "run.sqlite"
    s = run_suite(SUITE, ALGOS, db, workers=0, seed=3, progress=False, unit_fn=fake_unit)
    assert s.complete and s.total == SUITE.n_trials(2) == 84 and s.errors == 0
    return _table(load_results(db))


def test_pool_equals_inline_and_stores_each_trial_once(tmp_path, reference):
    db = tmp_path / "run.sqlite"
    s = run_suite(SUITE, ALGOS, db, workers=2, seed=3, progress=True, unit_fn=fake_unit)
    assert s.complete and s.units_run == len(SUITE.units(ALGOS, 3))
    rows = load_results(db)
    assert len(rows) == len({r.key for r in rows}) == 84
    assert set(_table(rows)) == _expected_keys(SUITE, ALGOS, 3)
    assert _table(rows) == reference
    again = run_suite(SUITE, ALGOS, db, workers=2, seed=3, progress=False, unit_fn=fake_unit)
    assert again.units_run == 0 and again.done == 84  # same settings: resumes, nothing to do


def test_other_settings_are_refused(tmp_path):
    db = tmp_path / "run.sqlite"
    run_suite(SUITE, ["a"], db, workers=0, seed=3, progress=False, unit_fn=fake_unit)
    for kwargs in ({"seed": 4}, {"algos": ["a", "b"]}, {"algo_options": {"a": {"k": 1}}}):
        args = {"algos": ["a"], "seed": 3, **kwargs}
        with pytest.raises(ConfigError, match="other settings"):
            run_suite(SUITE, db_path=db, workers=0, progress=False, unit_fn=fake_unit, **args)
    with pytest.raises(ConfigError, match="no run database"):
        resume(tmp_path / "nope.sqlite", workers=0, unit_fn=fake_unit)
    with pytest.raises(ConfigError, match="workers"):
        run_suite(SUITE, ["a"], tmp_path / "x.sqlite", workers=-1, unit_fn=fake_unit)


def test_resume_reads_the_run_from_the_database(tmp_path, reference):
    db = tmp_path / "run.sqlite"
    n = len(SUITE.units(ALGOS, 3))
    from volary.studies.flyingtrust.run import run_units

    run_suite(SUITE, ALGOS, db, workers=0, seed=3, progress=False, unit_fn=fake_unit)
    with RunDB.open(db) as d:  # forget half the units, as if killed half-way
        d.conn.execute("DELETE FROM trials WHERE unit % 2 = 1")
    s = resume(db, workers=0, progress=False, unit_fn=fake_unit)
    assert s.units_run == n // 2 and s.complete
    assert _table(load_results(db)) == reference
    assert run_units(db, 0, progress=False, unit_fn=fake_unit).units_run == 0
    # each sitting that flew something names its machine (rows reproduce per machine)
    with RunDB.open(db, readonly=True) as d:
        hosts = d.hosts()
    assert [h["workers"] for h in hosts] == ["inline", "inline"]
    assert {h["cpu"] for h in hosts} == {cpu_model()} and hosts[0]["cores"] == os.cpu_count()


KILL_SUITE = Suite("k", QUICK_PLATFORMS[:3], SCENARIO_TYPES, (0, 1, 2, 3), 1)
KILL_OPTS = {"a": {"sleep": 0.1}, "b": {"sleep": 0.1}}
_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from _nav_fakes import fake_unit
from volary.studies.flyingtrust.protocol import QUICK_PLATFORMS, SCENARIO_TYPES, Suite
from volary.studies.flyingtrust.run import run_suite
suite = Suite("k", QUICK_PLATFORMS[:3], SCENARIO_TYPES, (0, 1, 2, 3), 1)
run_suite(suite, ["a", "b"], {db!r}, workers=2, seed=3, progress=False, unit_fn=fake_unit,
          algo_options={opts!r})
"""


def _stored(db: Path) -> int:
    if not db.exists():
        return 0
    with RunDB.open(db, readonly=True) as d:
        return d.counts()[0]


@pytest.mark.slow  # 10-30 s on 2 cores; make test-slow
def test_kill_9_at_random_points_then_resume(tmp_path):
    """Acceptance: SIGKILL the run (its whole process group) 6 times at seeded random moments
    while it is writing, resume each time; the final database has every trial exactly once and
    the same numbers as an uninterrupted run with the same seed and settings."""
    db = tmp_path / "run.sqlite"
    total = KILL_SUITE.n_trials(2)
    script = _SCRIPT.format(tests=str(TESTS), db=str(db), opts=KILL_OPTS)
    rng = random.Random(12345)
    seen = []
    for _ in range(6):
        before = _stored(db)
        p = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
        deadline = time.monotonic() + 60
        while _stored(db) <= before and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)  # wait until this attempt has committed something
        time.sleep(rng.uniform(0.0, 0.25))  # then a random moment
        assert p.poll() is None, "the run finished before it could be killed"
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        seen.append(_stored(db))
    assert 0 < seen[0] and seen[-1] < total and seen == sorted(seen), seen
    p = subprocess.run([sys.executable, "-c", script], timeout=120)
    assert p.returncode == 0
    rows = load_results(db)
    assert len(rows) == len({r.key for r in rows}) == total
    ref_db = tmp_path / "ref.sqlite"
    run_suite(KILL_SUITE, ALGOS, ref_db, 2, None, KILL_OPTS, 3, False, unit_fn=fake_unit)
    ref = load_results(ref_db)
    assert _table(rows) == _table(ref)
    assert _aggregate(rows) == _aggregate(ref)


def test_crash_hang_and_raise_are_recorded_and_the_run_completes(tmp_path, reference):
    db = tmp_path / "run.sqlite"
    s = run_suite(
        SUITE, ALGOS, db, workers=2, seed=3, progress=False, unit_fn=crashy_unit, unit_timeout=4
    )
    assert s.complete and s.done == 84
    rows = {r.key: r for r in load_results(db)}
    bad = {"maze": "died", "perlin": "wall-clock limit of 4 s", "narrow_gap": "planner exploded"}
    for key, r in rows.items():
        if r.config == 1 and r.scenario in bad:
            assert r.cause == "error" and not r.success, key
            assert bad[r.scenario] in r.error, r.error
            if r.scenario == "maze":  # the death surfaces as loky's error, exit codes and all
                assert "TerminatedWorkerError" in r.error, r.error
        else:
            assert _table([r])[key] == reference[key]  # bystanders of a crash are not blamed
    assert s.errors == 3 * 2 * len(bad)


def test_killed_workers_are_gone_after_the_run(tmp_path):
    """A hung unit's worker is killed at its budget, not abandoned: when the run returns, no pool
    worker is left (only the resource trackers of loky and multiprocessing, which stay)."""
    psutil = pytest.importorskip("psutil")
    suite = Suite("h", QUICK_PLATFORMS[:1], ("maze", "perlin", "forest"), (1,), 1)
    t0 = time.perf_counter()
    s = run_suite(suite, ["a"], tmp_path / "run.sqlite", workers=2, progress=False,
                  unit_fn=crashy_unit, unit_timeout=4)  # fmt: skip
    assert s.complete and s.errors == 2 and time.perf_counter() - t0 < 60
    children = psutil.Process().children(recursive=True)
    left = [c.cmdline() for c in children if "resource_tracker" not in " ".join(c.cmdline())]
    assert not left, left


@pytest.mark.parametrize("guard", [None, "3e8"])
def test_a_worker_holding_400_mb_more_than_after_its_first_unit_keeps_running(guard, monkeypatch):
    """loky replaces a worker whose memory after a unit exceeds that after its first unit by
    LOKY_MAX_MEMORY_LEAK_SIZE. Units of 36 planners left up to +369 MB behind without leaking,
    so the runner's pools allow 1 GB; a value in the environment wins (loky's 300 MB default:
    the worker is replaced)."""
    pytest.importorskip("psutil")
    if guard is None:
        monkeypatch.delenv("LOKY_MAX_MEMORY_LEAK_SIZE", raising=False)
    else:
        monkeypatch.setenv("LOKY_MAX_MEMORY_LEAK_SIZE", guard)
    pool = _new_pool(1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            first = pool.submit(os.getpid).result()
            held = pool.submit(hold_memory, 400_000_000).result()
            after = pool.submit(os.getpid).result()
        finally:
            _kill_pool(pool)
    assert first == held
    assert (after == held) == (guard is None), (first, held, after)
    warned = [w for w in caught if "memory leak" in str(w.message)]  # what users were shown
    assert bool(warned) == (guard is not None), [str(w.message) for w in caught]


def test_wrong_rows_are_an_error(tmp_path):
    db = tmp_path / "run.sqlite"
    s = run_suite(SUITE, ["a"], db, workers=0, seed=3, progress=False, unit_fn=wrong_rows_unit)
    assert s.complete and s.errors == 42
    assert "expected one for each of" in load_results(db)[0].error


def test_dask_local_cluster(tmp_path, reference):
    pytest.importorskip("dask.distributed")
    db = tmp_path / "run.sqlite"
    s = run_suite(SUITE, ALGOS, db, seed=3, cluster="local:2", progress=False, unit_fn=fake_unit)
    assert s.complete
    assert _table(load_results(db)) == reference


def test_bad_cluster_address(tmp_path):
    for bad in ("local:0", "localhost", "local:x"):
        with pytest.raises(ConfigError, match="cluster"):
            run_suite(SUITE, ["a"], tmp_path / f"{bad}.sqlite", cluster=bad, unit_fn=fake_unit)


@pytest.mark.slow
def test_real_episode_faulty_planners_are_failures_and_the_run_completes(tmp_path):
    """Acceptance with the real ``episode.run_unit``: planners that raise, hang, return NaN or
    kill their process are recorded as cause "error"; `straight` beside them is unaffected and
    the same as in an inline run."""
    from volary.studies.flyingtrust.schema import ProtocolSettings

    settings = ProtocolSettings(time_limit=20.0, trial_wall_limit=5.0)
    suite = Suite("faults", QUICK_PLATFORMS[4:6], ("random_cylinders",), (0,), 1, settings)
    bad = {
        "_nav_fakes:RaisingPlanner": "planner exploded",
        "_nav_fakes:HangingPlanner": "",
        "_nav_fakes:NaNPlanner": "",
        "_nav_fakes:ExitPlanner": "died",
    }
    algos = ["straight", *bad]
    db = tmp_path / "run.sqlite"
    s = run_suite(suite, algos, db, workers=2, seed=0, progress=False)
    assert s.complete and s.total == 2 * len(algos)
    rows = load_results(db)
    for r in rows:
        if r.algo in bad:
            assert r.cause == "error" and not r.success and bad[r.algo] in r.error, r
        else:
            assert r.cause != "error", r.error
    ref = tmp_path / "ref.sqlite"
    run_suite(suite, ["straight"], ref, workers=0, seed=0, progress=False)
    mine = {k: v for k, v in _table(rows).items() if k.startswith("straight|")}
    assert mine == _table(load_results(ref))


def test_the_runner_flies_only_the_unit_function_it_is_given(tmp_path):
    """The runner names no episode: without ``unit_fn`` it refuses in one line (FLYINGTRUST's
    episode is passed by volary.studies.flyingtrust.run)."""
    from volary.errors import ConfigError
    from volary.studies.flyingtrust import runner as core

    with pytest.raises(ConfigError, match="unit_fn: expected the module-level function"):
        core.run_units(tmp_path / "run.sqlite")
