"""One SQLite file per benchmark run: what was asked (``meta``, ``units``) and what finished
(``trials``, one row per trial).

A work unit's rows are written in one ``BEGIN IMMEDIATE ... COMMIT`` transaction with a
rollback journal and ``synchronous=FULL``, so a process killed at any point leaves either all
or none of a unit's rows, and a committed unit survives a power cut. The trial key
(:attr:`TrialSpec.key`) is the primary key: a trial can never be stored twice.

The schema is declared once (:data:`TABLES`: tables, columns, SQL types, keys, which values
may be NULL and what every value must be). Opening a database checks, before any row is read
and without writing: that it is a SQLite file, its :data:`SCHEMA_VERSION`, its tables and
columns (``PRAGMA table_xinfo``) against the declaration, and every stored value (one SQL pass
per table). Any problem is one :class:`~volary.errors.FileFormatError` line naming the file
(and the table, row key and column). A full disk or a read-only file raises
:class:`StorageError` and leaves the rows already there intact.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from volary.errors import ConfigError, FileFormatError, MissingDependencyError, VolaryError
from volary.inputs import Strict, Text, regular_file, validated
from volary.studies.flyingtrust.schema import (
    CAUSES,
    ROW_FIELDS,
    SCHEMA_VERSION,
    ProtocolSettings,
    SettingsModel,
    TrialResult,
    WorkUnit,
)

_Name = Annotated[str, Field(strict=True, min_length=1)]
_Count = Annotated[int, Field(strict=True, ge=0)]

_SQL_TYPES = {bool: "INTEGER", int: "INTEGER", float: "REAL", str: "TEXT"}
_PY_TYPES = {"bool": bool, "int": int, "float": float, "str": str}


class StorageError(VolaryError, OSError):
    """The run database cannot be written (disk full, read-only file, locked); the rows already
    committed are intact."""


def _column_types() -> dict[str, type]:
    return {f.name: _PY_TYPES[str(f.type)] for f in fields(TrialResult)}


# ---- the declared schema ---------------------------------------------------------------------
_MAX = 1.7976931348623157e308  # the largest finite double: BETWEEN -_MAX AND _MAX is "finite"


@dataclass(frozen=True)
class Column:
    """One declared column: its SQL type, whether the table's key, whether it may hold NULL
    (a float metric that does not apply: NaN), and the SQL condition every value must meet
    (with ``{c}`` for the quoted column), with the same condition in words."""

    name: str
    sql: str
    check: str
    expected: str
    null: bool = False
    key: bool = False
    not_null: bool = False  # declared NOT NULL in the CREATE statement (the meta/units specs)

    def ddl(self) -> str:
        tail = " PRIMARY KEY" if self.key else (" NOT NULL" if self.not_null else "")
        return f'"{self.name}" {self.sql}{tail}'

    def condition(self) -> str:
        """SQL that is 1 for a valid value and 0 (never NULL) otherwise."""
        c = f'"{self.name}"'
        ok = self.check.format(c=c)
        return f"COALESCE({c} IS NULL OR ({ok}), 0)" if self.null else f"COALESCE(({ok}), 0)"


def _text(name: str, *, empty: bool = True, choices: Sequence[str] = (), **kw: Any) -> Column:
    check = "typeof({c}) = 'text'" + ("" if empty else " AND length({c}) > 0")
    words = "a text" if empty else "a non-empty text"
    if choices:
        check += " AND {c} IN (" + ", ".join(f"'{x}'" for x in choices) + ")"
        words = "one of " + ", ".join(choices)
    return Column(name, "TEXT", check, words, **kw)


def _integer(name: str, lo: int, hi: int = 2**63 - 1, **kw: Any) -> Column:
    check = f"typeof({{c}}) = 'integer' AND {{c}} BETWEEN {lo} AND {hi}"
    words = "0 or 1" if (lo, hi) == (0, 1) else f"an integer >= {lo}"
    return Column(name, "INTEGER", check, words, **kw)


def _real(name: str, lo: float = -_MAX, hi: float = _MAX) -> Column:
    check = f"typeof({{c}}) IN ('real', 'integer') AND {{c}} BETWEEN {lo!r} AND {hi!r}"
    if lo == -_MAX:
        words = "a finite number or NULL (NaN)"
    elif hi == _MAX:
        words = f"a finite number >= {lo:g} or NULL (NaN)"
    else:
        words = f"a number in [{lo:g}, {hi:g}] or NULL (NaN)"
    return Column(name, "REAL", check, words, null=True)


# The result columns' ranges: counts and lengths are >= 0, shares in [0, 100] %, every float
# finite or NULL (NaN: the metric does not apply); times may be negative (a collision during
# the take-off, before t = 0, ends the trial at a negative flight time).
_NON_NEGATIVE = {"path_length", "mean_speed", "max_speed", "collisions_per_m", "tracking_error",
                 "final_distance", "sim_time", "wall_time"}  # fmt: skip


def _result_column(name: str, kind: type) -> Column:
    if name == "cause":
        return _text(name, choices=CAUSES)
    if name in ("algo", "platform", "scenario"):
        return _text(name, empty=False)
    if kind is bool:
        return _integer(name, 0, 1)
    if kind is int:
        return _integer(name, 0)
    if kind is str:
        return _text(name)
    if name == "proximity":
        return _real(name, 0.0, 100.0)
    return _real(name, 0.0) if name in _NON_NEGATIVE else _real(name)


TABLES: dict[str, tuple[Column, ...]] = {
    "meta": (
        _text("name", empty=False, key=True),
        _text("value", not_null=True),
    ),
    "units": (
        _integer("id", 0, key=True),
        _text("spec", not_null=True),
    ),
    "trials": (
        _text("key", empty=False, key=True),
        Column(
            "unit",
            "INTEGER",
            "{c} IN (SELECT id FROM units)",
            "the id of a stored unit",
            not_null=True,
        ),  # fmt: skip
        *(_result_column(n, t) for n, t in _column_types().items()),
    ),
}
"""The run database, declared once: its tables, their columns (name, SQL type, key, NOT NULL)
and what every stored value must be. :meth:`RunDB.create` writes it; :meth:`RunDB.open` checks
a file against it (``PRAGMA table_info``) and every row against the value conditions before
anything is read."""

# Conditions across columns of a trial row: the key is the row's own trial key, and success
# is 1 exactly when the cause is "success" (a count of successes never disagrees with causes).
_TRIAL_ROW_CHECKS: dict[str, tuple[str, str]] = {
    "key": (
        '"key" = "algo" || \'|\' || "platform" || \'|\' || "scenario" || \'|\' || "config"'
        " || '|' || \"trial\"",
        "algo|platform|scenario|config|trial of the row",
    ),
    "success": ("""("success" = 1) = ("cause" = 'success')""", "1 exactly when cause is 'success'"),
}


def _create_sql() -> list[str]:
    return [
        f"CREATE TABLE {table} ({', '.join(c.ddl() for c in cols)})"
        for table, cols in TABLES.items()
    ]


def unit_to_json(unit: WorkUnit) -> str:
    """A work unit as JSON (algo options must be JSON values)."""
    return json.dumps(asdict(unit), sort_keys=True, allow_nan=False)


class _UnitSpec(Strict):
    """A stored work unit (the ``units.spec`` JSON), as :func:`unit_to_json` writes it."""

    algo: _Name
    scenario: _Name
    config: _Count
    trial: _Count
    platforms: Annotated[tuple[_Name, ...], Field(min_length=1)]
    seed: _Count
    algo_options: tuple[tuple[Text, Any], ...]
    settings: SettingsModel


def unit_from_json(text: str, source: str = "units.spec") -> WorkUnit:
    """A work unit back from :func:`unit_to_json`'s JSON; FileFormatError names ``source``
    and the field when the JSON is not one."""
    try:
        d = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        raise FileFormatError(f"{source}: expected a work unit as JSON, got {text!r:.60}") from None
    spec = validated(_UnitSpec, d, source)
    return WorkUnit(
        spec.algo,
        spec.scenario,
        spec.config,
        spec.trial,
        spec.platforms,
        spec.seed,
        tuple((k, _freeze(v)) for k, v in spec.algo_options),
        ProtocolSettings(**spec.settings.model_dump()),
    )


def _freeze(v: Any) -> Any:
    """JSON lists back to tuples, so a reloaded unit equals (and hashes like) the original."""
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return v


# A stored value as its row field. The checks at opening vouch for every row then stored; a
# row written since by another process is checked here, cheaply (ValueError: _damaged).
def _as_float(v: Any) -> float:
    if v is None:
        return math.nan
    if type(v) in (float, int) and math.isfinite(v):
        return float(v)
    raise ValueError(f"expected a finite number or NULL, got {v!r:.60}")


def _as_bool(v: Any) -> bool:
    if type(v) is int and v in (0, 1):
        return bool(v)
    raise ValueError(f"expected 0 or 1, got {v!r:.60}")


def _as_int(v: Any) -> int:
    if type(v) is int:
        return v
    raise ValueError(f"expected an integer, got {v!r:.60}")


def _as_str(v: Any) -> str:
    if type(v) is str:
        return v
    raise ValueError(f"expected a text, got {v!r:.60}")


_DECODERS = {float: _as_float, bool: _as_bool, int: _as_int, str: _as_str}


def _nan_to_none(v: Any) -> Any:
    return None if isinstance(v, float) and math.isnan(v) else v


def _storage_error(path: Path, e: sqlite3.Error) -> StorageError:
    msg = _said(e)
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
        """Open an existing database, checked before any row is read: a SQLite file, the schema
        version this volary reads, the tables and columns of :data:`TABLES`, and every stored
        value. Any problem is one FileFormatError line naming the file; nothing is written."""
        path = Path(path)
        if not path.exists():
            raise ConfigError(f"db_path: no run database at {path}")
        _check_header(path)
        meta = _checked_meta(path)
        version = meta.get("schema_version")
        if version != SCHEMA_VERSION:
            raise FileFormatError(
                f"{path} was made by volary {meta.get('volary_version', '?')} with schema "
                f"{version}; this volary ({_volary_version()}) reads schema {SCHEMA_VERSION}. "
                "Open it with the volary version that wrote it, or start a new run; the file "
                "was not modified"
            )
        _check_meta(meta, path)
        conn = _connect(path, readonly=readonly)
        try:
            with _damaged(path):
                _check_tables(conn, path)
                _check_rows(conn, path)
                _check_units(conn, path)
        except BaseException:
            conn.close()
            raise
        return cls(path, conn)

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
            rows = self.conn.execute("SELECT id, spec FROM units ORDER BY id").fetchall()
        return [unit_from_json(spec, f"{self.path}: units row {i}") for i, spec in rows]

    def done_keys(self) -> set[str]:
        with _damaged(self.path):
            return {r[0] for r in self.conn.execute("SELECT key FROM trials")}

    def counts(self) -> tuple[int, int, int]:
        """(trials stored, of which successes, trials in the run)."""
        with _damaged(self.path):
            done, ok = self.conn.execute(
                'SELECT COUNT(*), COALESCE(SUM("success" = 1), 0) FROM trials'
            ).fetchone()
        total = sum(len(u.platforms) for u in self.units())
        return int(done), int(ok), total

    def results(self, key: str | None = None) -> list[TrialResult]:
        """Every stored trial (by unit, then key), or only the one with ``key``."""
        names = ", ".join(f'"{n}"' for n in ROW_FIELDS)
        types = _column_types()
        out = []
        where, args = ("WHERE key = ?", (key,)) if key is not None else ("", ())
        decode = [_DECODERS[types[n]] for n in ROW_FIELDS]  # ROW_FIELDS: TrialResult's order
        with _damaged(self.path):
            for row in self.conn.execute(
                f"SELECT {names} FROM trials {where} ORDER BY unit, key", args
            ):
                out.append(TrialResult(*[f(v) for f, v in zip(decode, row, strict=True)]))
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
        raise FileFormatError(f"{path}: not a volary run database ({_said(e)})") from None
    return conn


_SQLITE_HEADER = b"SQLite format 3\x00"


def _check_header(path: Path) -> None:
    """A regular file that starts as every SQLite database does (checked before SQLite sees it:
    a FIFO would block, any other file is not a run database)."""
    regular_file(path, "run database")
    try:
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError as e:
        raise FileFormatError(f"{path}: cannot read the run database ({e.strerror or e})") from e
    if len(head) < 100 or not head.startswith(_SQLITE_HEADER):
        raise FileFormatError(f"{path}: not a volary run database (not a SQLite 3 file)")
    _check_length(path, head)


def _check_length(path: Path, head: bytes) -> None:
    """The file holds the pages its header declares, whole (SQLite file format, "The Database
    Header": page size at offset 16, the in-header page count at 28, valid when the
    version-valid-for number at 92 equals the change counter at 24). A database cut short
    reads whatever pages remain as if they were all: refused."""
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    size = path.stat().st_size
    if page < 512 or page & (page - 1):
        raise FileFormatError(f"{path}: not a volary run database (SQLite page size {page})")
    if size % page:
        raise FileFormatError(
            f"{path}: damaged run database: {size} bytes is not whole pages of {page} bytes"
        )
    pages = int.from_bytes(head[28:32], "big")
    if head[92:96] == head[24:28] and pages and size < pages * page:
        raise FileFormatError(
            f"{path}: truncated run database: the header declares {pages} pages of {page} "
            f"bytes, the file holds {size // page}"
        )


def _check_columns(conn: sqlite3.Connection, path: Path, table: str) -> None:
    """``PRAGMA table_xinfo`` of ``table`` against :data:`TABLES`: every declared column with
    its SQL type, key and NOT NULL, and no other column."""
    info = {r[1]: r for r in conn.execute(f'PRAGMA table_xinfo("{table}")')}
    if not info:
        raise FileFormatError(f"{path}: not a volary run database (no table {table!r})")
    for col in TABLES[table]:
        if col.name not in info:
            raise FileFormatError(f"{path}: {table}: missing column {col.name!r}")
        _cid, _name, sql, not_null, _default, pk, hidden = info[col.name]
        where = f"{path}: {table}.{col.name}"
        if str(sql).upper() != col.sql or hidden:
            got = "a generated column" if hidden else repr(sql)
            raise FileFormatError(f"{where}: expected SQL type {col.sql}, got {got}")
        if bool(pk) != col.key:
            want = "the" if col.key else "not the"
            raise FileFormatError(f"{where}: expected {want} primary key of {table}")
        if bool(not_null) != col.not_null:
            want = "NOT NULL" if col.not_null else "no NOT NULL constraint"
            raise FileFormatError(f"{where}: expected {want}")
    declared = {c.name for c in TABLES[table]}
    extra = sorted(set(info) - declared)
    if extra:
        raise FileFormatError(
            f"{path}: {table}: unexpected column {extra[0]!r}; expected only "
            f"{', '.join(c.name for c in TABLES[table])}"
        )


def _check_tables(conn: sqlite3.Connection, path: Path) -> None:
    """The tables of :data:`TABLES` and nothing else that runs or reads (no other table, no
    view or trigger; SQLite's own tables and indexes are fine)."""
    objects = conn.execute("SELECT type, name FROM sqlite_master").fetchall()
    for kind, name in objects:
        if kind in ("table", "view", "trigger") and not (
            name in TABLES and kind == "table" or str(name).startswith("sqlite_")
        ):
            raise FileFormatError(
                f"{path}: unexpected {kind} {name!r}; a run database holds only the tables "
                f"{', '.join(TABLES)}"
            )
    for table in TABLES:
        _check_columns(conn, path, table)


def _check_rows(conn: sqlite3.Connection, path: Path, tables: Sequence[str] = ()) -> None:
    """Every stored value meets its column's declared condition (one SQL pass per table); the
    first that does not is refused naming the table, the row's key and the column."""
    for table in tables or TABLES:
        cols = TABLES[table]
        checks = [(c.name, c.condition(), c.expected) for c in cols]
        if table == "trials":
            checks += [(n, f"COALESCE(({sql}), 0)", words)
                       for n, (sql, words) in _TRIAL_ROW_CHECKS.items()]  # fmt: skip
        conds = [sql for _, sql, _ in checks]
        names = [f'"{c.name}"' for c in cols]
        bad = conn.execute(
            f'SELECT {", ".join(names + conds)} FROM "{table}" '
            f"WHERE NOT ({' AND '.join(conds)}) LIMIT 1"
        ).fetchone()
        if bad is None:
            continue
        values = dict(zip((c.name for c in cols), bad, strict=False))
        name, _, words = checks[list(bad[len(cols) :]).index(0)]
        raise FileFormatError(
            f"{path}: {table} row {_short(values[cols[0].name])}: {name}: expected {words}, "
            f"got {_short(values[name])}"
        )


def _said(e: BaseException, n: int = 200) -> str:
    """What SQLite (or a decoder) said, on one line: a damaged schema's text can hold any
    character, newlines included."""
    text = " ".join(str(e).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _short(value: Any, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


def _check_units(conn: sqlite3.Connection, path: Path) -> None:
    """Unit ids are 0..n-1 (the runner's unit index) and every spec is a work unit."""
    rows = conn.execute("SELECT id, spec FROM units ORDER BY id").fetchall()
    for position, (uid, spec) in enumerate(rows):
        if uid != position:
            raise FileFormatError(
                f"{path}: units row {uid}: id: expected {position} (ids 0..{len(rows) - 1})"
            )
        unit_from_json(spec, f"{path}: units row {uid}: spec")


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
    """The meta table's entries, decoded from JSON, after its columns and values are checked."""
    try:
        _check_columns(conn, path, "meta")
        _check_rows(conn, path, ("meta",))
        rows = conn.execute("SELECT name, value FROM meta").fetchall()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
        raise FileFormatError(f"{path}: not a volary run database ({_said(e)})") from None
    out = {}
    for k, v in rows:
        try:
            out[k] = json.loads(v)
        except (TypeError, ValueError, RecursionError):
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
    except VolaryError:
        raise
    except sqlite3.DatabaseError as e:
        raise FileFormatError(f"{path}: not a readable run database ({_said(e)})") from None
    except (TypeError, ValueError, KeyError) as e:
        raise FileFormatError(f"{path}: a stored row does not read back ({_said(e)})") from None


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
