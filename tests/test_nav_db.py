"""The run database: rows round-trip, one transaction per unit, refusals that never modify a
file (other schema version, not a database), and a full disk / read-only file that leaves the
stored rows intact."""

from __future__ import annotations

import csv
import hashlib
import math
import sqlite3

import pytest

from _nav_fakes import fake_unit
from volary.errors import ConfigError, FileFormatError
from volary.studies.flyingtrust.db import (
    RunDB,
    StorageError,
    export_csv,
    export_parquet,
    load_results,
    unit_from_json,
    unit_to_json,
)
from volary.studies.flyingtrust.schema import ROW_FIELDS, SCHEMA_VERSION, TrialResult, WorkUnit

PLATFORMS = ("p0", "p1", "p2")


def _units(n: int = 4) -> list[WorkUnit]:
    return [
        WorkUnit("fake", "forest", c, c, PLATFORMS, 7, (("speed", 2.0), ("w", (1, 2))))
        for c in range(n)
    ]


def _make(tmp_path, n: int = 4) -> tuple[RunDB, list[WorkUnit]]:
    units = _units(n)
    return RunDB.create(tmp_path / "run.sqlite", {"seed": 7, "algos": ["fake"]}, units), units


def _same(a: TrialResult, b: TrialResult) -> bool:
    for n in ROW_FIELDS:
        x, y = getattr(a, n), getattr(b, n)
        if not (x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))):
            return False
    return True


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_unit_json_round_trip():
    for u in _units():
        assert unit_from_json(unit_to_json(u)) == u


def test_rows_round_trip_with_nan_and_meta(tmp_path):
    db, units = _make(tmp_path)
    rows = fake_unit(units[0])
    rows[0].error = "Traceback ...\nRuntimeError: x"
    assert db.write_unit(0, rows) == len(PLATFORMS)
    meta = db.meta()
    assert meta["schema_version"] == SCHEMA_VERSION and meta["seed"] == 7
    assert db.units() == units
    db.close()
    back = load_results(tmp_path / "run.sqlite")
    assert len(back) == len(rows)
    by_key = {r.key: r for r in back}
    assert all(_same(r, by_key[r.key]) for r in rows)
    assert any(math.isnan(r.time_to_goal) for r in back if not r.success) or all(
        r.success for r in back
    )


def test_a_trial_is_never_stored_twice(tmp_path):
    db, units = _make(tmp_path)
    assert db.write_unit(0, fake_unit(units[0])) == 3
    assert db.write_unit(0, fake_unit(units[0])) == 0
    assert db.counts() == (3, sum(r.success for r in fake_unit(units[0])), 12)


def test_create_refuses_an_existing_file(tmp_path):
    db, _ = _make(tmp_path)
    db.close()
    with pytest.raises(ConfigError, match="exists already"):
        RunDB.create(tmp_path / "run.sqlite", {}, _units())


def test_other_schema_version_is_refused_and_not_modified(tmp_path):
    db, units = _make(tmp_path)
    db.write_unit(0, fake_unit(units[0]))
    db.close()
    path = tmp_path / "run.sqlite"
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value = '99' WHERE name = 'schema_version'")
    con.execute("UPDATE meta SET value = '\"9.9.9\"' WHERE name = 'volary_version'")
    con.commit()
    con.close()
    before = _digest(path)
    with pytest.raises(FileFormatError, match=r"volary 9\.9\.9 with schema 99.*reads schema 1"):
        RunDB.open(path)
    with pytest.raises(FileFormatError, match="schema 99"):
        load_results(path)
    assert _digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sqlite"]


def test_not_a_database(tmp_path):
    bad = tmp_path / "junk.sqlite"
    bad.write_bytes(b"definitely not sqlite" * 100)
    with pytest.raises(FileFormatError, match="not a volary run database"):
        RunDB.open(bad)
    empty = tmp_path / "other.sqlite"
    sqlite3.connect(empty).execute("CREATE TABLE x (a)").connection.close()
    with pytest.raises(FileFormatError):
        load_results(empty)
    with pytest.raises(ConfigError, match="no run database"):
        load_results(tmp_path / "missing.sqlite")


def test_full_disk_raises_clearly_and_keeps_rows(tmp_path):
    db, units = _make(tmp_path, 40)
    db.write_unit(0, fake_unit(units[0]))
    (pages,) = db.conn.execute("PRAGMA page_count").fetchone()
    db.conn.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full from now on
    big = fake_unit(units[1])
    for r in big:
        r.error = "x" * 20000
    with pytest.raises(StorageError, match="full.*rows already stored are intact"):
        db.write_unit(1, big)
    assert not db.conn.in_transaction
    db.close()
    con = sqlite3.connect(tmp_path / "run.sqlite")
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    back = load_results(tmp_path / "run.sqlite")
    assert sorted(r.key for r in back) == sorted(r.key for r in fake_unit(units[0]))


def test_read_only_database_raises_clearly(tmp_path):
    db, units = _make(tmp_path)
    db.write_unit(0, fake_unit(units[0]))
    db.close()
    ro = RunDB.open(tmp_path / "run.sqlite", readonly=True)
    with pytest.raises(StorageError, match="read-only"):
        ro.write_unit(1, fake_unit(units[1]))
    ro.close()
    assert len(load_results(tmp_path / "run.sqlite")) == 3


def test_exports(tmp_path):
    db, units = _make(tmp_path)
    for i, u in enumerate(units):
        db.write_unit(i, fake_unit(u))
    db.close()
    rows = load_results(tmp_path / "run.sqlite")
    with export_csv(rows, tmp_path / "t.csv").open() as f:
        table = list(csv.DictReader(f))
    assert len(table) == 12 and tuple(table[0]) == ROW_FIELDS
    pq = pytest.importorskip("pyarrow.parquet")
    t = pq.read_table(export_parquet(rows, tmp_path / "t.parquet"))
    assert t.num_rows == 12 and tuple(t.column_names) == ROW_FIELDS
    assert t.column("success").to_pylist() == [r.success for r in rows]


def test_a_writer_killed_mid_transaction_leaves_the_committed_rows(tmp_path):
    db, units = _make(tmp_path)
    db.write_unit(0, fake_unit(units[0]))
    db.close()
    path = tmp_path / "run.sqlite"
    code = (
        "import os, sqlite3\n"
        f"c = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
        "c.execute('PRAGMA journal_mode=DELETE'); c.execute('BEGIN IMMEDIATE')\n"
        'c.execute("DELETE FROM trials")\n'
        "c.execute(\"UPDATE meta SET value='0' WHERE name='seed'\")\n"
        "c.execute('PRAGMA cache_size=0')\n"
        "[c.execute(\"INSERT INTO meta VALUES (?, '1')\", (str(i) * 50,)) for i in range(3000)]\n"
        "os._exit(9)\n"
    )
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", code], check=False)
    assert (tmp_path / "run.sqlite-journal").exists()  # a hot journal: the kill hit mid-write
    back = load_results(path)  # read-only callers see the last committed state
    assert sorted(r.key for r in back) == sorted(r.key for r in fake_unit(units[0]))
    with RunDB.open(path) as again:
        assert again.meta()["seed"] == 7


# ---- issue 18's cases: a damaged meta table is a clear error, never a traceback ----------------
@pytest.mark.parametrize(
    "name, value, message",
    [
        ("algos", "{not json", "meta.algos: not JSON"),
        ("algos", "7", "meta.algos: expected a JSON list"),
        ("seed", '"7"', "meta.seed: expected a JSON int"),
        ("schema_version", "999", "with schema 999"),
        ("schema_version", '"1"', "with schema 1;"),
    ],
)
def test_a_damaged_meta_table_is_refused_naming_the_field(tmp_path, name, value, message):
    db, _ = _make(tmp_path)
    db.close()
    path = tmp_path / "run.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = ? WHERE name = ?", (value, name))
    conn.commit()
    conn.close()
    before = _digest(path)
    with pytest.raises((FileFormatError, ConfigError), match=message):
        RunDB.open(path)
    with pytest.raises((FileFormatError, ConfigError), match=message):
        load_results(path)
    assert _digest(path) == before  # nothing written


def test_a_database_without_a_schema_version_is_refused(tmp_path):
    db, _ = _make(tmp_path)
    db.close()
    path = tmp_path / "run.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM meta WHERE name = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(FileFormatError, match="with schema None"):
        load_results(path)
