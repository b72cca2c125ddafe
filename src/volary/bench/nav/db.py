"""One SQLite file per benchmark run: what was asked (``meta``, ``units``) and what finished
(``trials``, one row per trial).

A work unit's rows are written in one ``BEGIN IMMEDIATE ... COMMIT`` transaction with a
rollback journal and ``synchronous=FULL``, so a process killed at any point leaves either all
or none of a unit's rows, and a committed unit survives a power cut. The trial key
(:attr:`TrialSpec.key`) is the primary key: a trial can never be stored twice.

A database written with another :data:`SCHEMA_VERSION` is refused with a
:class:`~volary.errors.ConfigError` before anything is written to it; a full disk or a
read-only file raises :class:`StorageError` and leaves the rows already there intact.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from volary.bench.nav.schema import (
    ROW_FIELDS,
    SCHEMA_VERSION,
    ProtocolSettings,
    TrialResult,
    WorkUnit,
)
from volary.errors import ConfigError, FileFormatError, MissingDependencyError, VolaryError

_SQL_TYPES = {bool: "INTEGER", int: "INTEGER", float: "REAL", str: "TEXT"}
_PY_TYPES = {"bool": bool, "int": int, "float": float, "str": str}


class StorageError(VolaryError, OSError):
    """The run database cannot be written (disk full, read-only file, locked); the rows already
    committed are intact."""


def _column_types() -> dict[str, type]:
    return {f.name: _PY_TYPES[str(f.type)] for f in fields(TrialResult)}


def _create_sql() -> list[str]:
    cols = ", ".join(f'"{n}" {_SQL_TYPES[t]}' for n, t in _column_types().items())
    return [
        "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE units (id INTEGER PRIMARY KEY, spec TEXT NOT NULL)",
        f"CREATE TABLE trials (key TEXT PRIMARY KEY, unit INTEGER NOT NULL, {cols})",
    ]


def unit_to_json(unit: WorkUnit) -> str:
    """A work unit as JSON (algo options must be JSON values)."""
    return json.dumps(asdict(unit), sort_keys=True, allow_nan=False)


def unit_from_json(text: str) -> WorkUnit:
    d = json.loads(text)
    d["platforms"] = tuple(d["platforms"])
    d["algo_options"] = tuple((str(k), _freeze(v)) for k, v in d["algo_options"])
    d["settings"] = ProtocolSettings(**d["settings"])
    return WorkUnit(**d)


def _freeze(v: Any) -> Any:
    """JSON lists back to tuples, so a reloaded unit equals (and hashes like) the original."""
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return v


def _nan_to_none(v: Any) -> Any:
    return None if isinstance(v, float) and math.isnan(v) else v


def _storage_error(path: Path, e: sqlite3.Error) -> StorageError:
    msg = str(e)
    if "full" in msg:
        hint = "the disk (or the database's page limit) is full; free space and resume"
    elif "readonly" in msg or "read-only" in msg:
        hint = "the database file or its folder is read-only"
    elif "locked" in msg:
        hint = "another process holds a write lock on it"
    else:
        hint = "SQLite failed"
    return StorageError(
        f"cannot write to {path}: {msg} ({hint}); the rows already stored are intact"
    )


class RunDB:
    """An open run database. ``RunDB.create`` makes a new one, ``RunDB.open`` an existing one
    (``readonly=True`` never writes, not even a journal)."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path, self.conn = path, conn

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def create(cls, path: str | Path, meta: dict[str, Any], units: Sequence[WorkUnit]) -> RunDB:
        """Create a new database with the run's meta data and its work units."""
        path = Path(path)
        if path.exists():
            raise ConfigError(f"db_path: {path} exists already (open it to resume)")
        path.parent.mkdir(parents=True, exist_ok=True)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        full = {
            "schema_version": SCHEMA_VERSION,
            "volary_version": _volary_version(),
            "created": now,
            "updated": now,
            **meta,
        }
        tmp = path.with_name(path.name + ".creating")
        tmp.unlink(missing_ok=True)
        conn = _connect(tmp, readonly=False)
        try:
            with conn:
                for sql in _create_sql():
                    conn.execute(sql)
                conn.executemany(
                    "INSERT INTO meta VALUES (?, ?)",
                    [(k, json.dumps(v, sort_keys=True)) for k, v in full.items()],
                )
                conn.executemany(
                    "INSERT INTO units VALUES (?, ?)",
                    [(i, unit_to_json(u)) for i, u in enumerate(units)],
                )
        except sqlite3.Error as e:
            conn.close()
            tmp.unlink(missing_ok=True)
            raise _storage_error(path, e) from None
        conn.close()
        tmp.rename(path)  # the run file appears complete or not at all
        return cls.open(path)

    @classmethod
    def open(cls, path: str | Path, *, readonly: bool = False) -> RunDB:
        """Open an existing database; refuse one written with another schema version."""
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"db_path: no run database at {path}")
        meta = _checked_meta(path)
        version = meta.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ConfigError(
                f"{path} was made by volary {meta.get('volary_version', '?')} with schema "
                f"{version}; this volary ({_volary_version()}) reads schema {SCHEMA_VERSION}. "
                "Open it with the volary version that wrote it, or start a new run; the file "
                "was not modified"
            )
        _check_meta(meta, path)
        return cls(path, _connect(path, readonly=readonly))

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> RunDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading ---------------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        return _read_meta(self.conn, self.path)

    def units(self) -> list[WorkUnit]:
        with _damaged(self.path):
            rows = self.conn.execute("SELECT spec FROM units ORDER BY id").fetchall()
            return [unit_from_json(r[0]) for r in rows]

    def done_keys(self) -> set[str]:
        with _damaged(self.path):
            return {r[0] for r in self.conn.execute("SELECT key FROM trials")}

    def counts(self) -> tuple[int, int, int]:
        """(trials stored, of which successes, trials in the run)."""
        done, ok = self.conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(success), 0) FROM trials"
        ).fetchone()
        total = sum(len(u.platforms) for u in self.units())
        return int(done), int(ok), total

    def results(self, key: str | None = None) -> list[TrialResult]:
        """Every stored trial (by unit, then key), or only the one with ``key``."""
        names = ", ".join(f'"{n}"' for n in ROW_FIELDS)
        types = _column_types()
        out = []
        where, args = ("WHERE key = ?", (key,)) if key is not None else ("", ())
        for row in self.conn.execute(
            f"SELECT {names} FROM trials {where} ORDER BY unit, key", args
        ):
            d = {}
            for n, v in zip(ROW_FIELDS, row, strict=True):
                t = types[n]
                d[n] = math.nan if v is None and t is float else t(v)
            out.append(TrialResult.from_row(d))
        return out

    def hosts(self) -> list[dict[str, Any]]:
        """The machines that flew this run, one entry per sitting (:meth:`add_host`)."""
        hosts = self.meta().get("hosts", [])
        return [h for h in hosts if isinstance(h, dict)] if isinstance(hosts, list) else []

    # -- writing ---------------------------------------------------------------------------
    def add_host(self, host: dict[str, Any]) -> None:
        """Append one sitting's machine (a JSON-able dict: CPU model, cores, workers, start)
        to the run's ``hosts`` meta entry; rows reproduce per machine, not across them."""
        hosts = [*self.hosts(), host]
        try:
            with self.conn:
                self.conn.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('hosts', ?)",
                    (json.dumps(hosts, sort_keys=True),),
                )
        except sqlite3.Error as e:
            raise _storage_error(self.path, e) from None

    def write_unit(self, unit_id: int, rows: Iterable[TrialResult]) -> int:
        """Store one unit's rows in one transaction; rows already stored are left as they are.
        Returns the number of rows inserted."""
        names = ("key", "unit", *ROW_FIELDS)
        sql = (
            f"INSERT OR IGNORE INTO trials ({', '.join(chr(34) + n + chr(34) for n in names)}) "
            f"VALUES ({', '.join('?' * len(names))})"
        )
        values = [
            (r.key, unit_id, *(_nan_to_none(getattr(r, n)) for n in ROW_FIELDS)) for r in rows
        ]
        now = json.dumps(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            before = self.conn.total_changes
            self.conn.executemany(sql, values)
            inserted = self.conn.total_changes - before
            self.conn.execute("UPDATE meta SET value = ? WHERE name = 'updated'", (now,))
            self.conn.execute("COMMIT")
        except sqlite3.Error as e:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise _storage_error(self.path, e) from None
        return inserted


def _volary_version() -> str:
    from volary import __version__

    return __version__


def _connect(path: Path, *, readonly: bool) -> sqlite3.Connection:
    uri = f"{path.resolve().as_uri()}?mode={'ro' if readonly else 'rwc'}"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=30.0, isolation_level=None)
        if not readonly:
            conn.execute("PRAGMA journal_mode=DELETE")
            conn.execute("PRAGMA synchronous=FULL")
    except sqlite3.DatabaseError as e:
        raise FileFormatError(f"{path}: not a volary run database ({e})") from None
    return conn


def _checked_meta(path: Path) -> dict[str, Any]:
    """The meta table, read without writing; a hot journal left by a writer that was killed
    mid-transaction is first rolled back (SQLite does it on the first read of a read-write
    connection), which restores the last committed state."""
    for attempt in range(2):
        conn = _connect(path, readonly=True)
        try:
            return _read_meta(conn, path)
        except FileFormatError as e:
            hot = path.with_name(path.name + "-journal").exists()
            if attempt or not hot or "readonly" not in str(e):
                raise
        finally:
            conn.close()
        rw = sqlite3.connect(path, timeout=30.0)
        try:
            rw.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        finally:
            rw.close()
    raise AssertionError("unreachable")


def _read_meta(conn: sqlite3.Connection, path: Path) -> dict[str, Any]:
    try:
        rows = conn.execute("SELECT name, value FROM meta").fetchall()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
        raise FileFormatError(f"{path}: not a volary run database ({e})") from None
    out = {}
    for k, v in rows:
        try:
            out[k] = json.loads(v)
        except (TypeError, ValueError):
            raise FileFormatError(f"{path}: meta.{k}: not JSON ({str(v)[:40]!r})") from None
    return out


# the meta fields every command relies on, and their JSON types
_META_TYPES: dict[str, type | tuple[type, ...]] = {
    "suite": dict,
    "algos": list,
    "algo_options": dict,
    "seed": int,
}


def _check_meta(meta: dict[str, Any], path: Path) -> None:
    for key, kind in _META_TYPES.items():
        if key not in meta:
            continue  # (the commands that need a field say so)
        v = meta[key]
        if isinstance(v, bool) or not isinstance(v, kind):
            raise FileFormatError(
                f"{path}: meta.{key}: expected a JSON {getattr(kind, '__name__', kind)}, "
                f"got {str(v)[:40]!r}; the file was not modified"
            )
    if not all(isinstance(a, str) and a for a in meta.get("algos", [])):
        raise FileFormatError(f"{path}: meta.algos: expected a list of algorithm names")


def load_results(db_path: str | Path) -> list[TrialResult]:
    """Every stored trial of a run, read-only (safe while the run is still writing)."""
    with RunDB.open(db_path, readonly=True) as db, _damaged(Path(db_path)):
        return db.results()


@contextlib.contextmanager
def _damaged(path: Path) -> Iterator[None]:
    """SQLite's errors on a damaged file (a malformed page, a missing table or column, a value
    of the wrong type) as ``FileFormatError`` naming the file."""
    try:
        yield
    except sqlite3.DatabaseError as e:
        raise FileFormatError(f"{path}: not a readable run database ({e})") from None
    except (TypeError, ValueError, KeyError) as e:
        raise FileFormatError(f"{path}: a stored row does not read back ({e})") from None


def export_csv(results: Sequence[TrialResult], path: str | Path) -> Path:
    """One CSV row per trial, columns = ``ROW_FIELDS`` (NaN written as empty)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(ROW_FIELDS)
        for r in results:
            w.writerow(
                ["" if (v := _nan_to_none(getattr(r, n))) is None else v for n in ROW_FIELDS]
            )
    return path


def export_parquet(results: Sequence[TrialResult], path: str | Path) -> Path:
    """One Parquet row per trial (needs pyarrow: ``pip install volary[parquet]``)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingDependencyError("pyarrow", "parquet") from None
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pa_types = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}
    types = _column_types()
    schema = pa.schema([(n, pa_types[types[n]]) for n in ROW_FIELDS])
    cols = {n: [getattr(r, n) for r in results] for n in ROW_FIELDS}
    pq.write_table(pa.table(cols, schema=schema), path)
    return path
