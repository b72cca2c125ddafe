"""Issue 55: the benchmark's inputs take bad input cleanly. A run database is checked against
its declared schema before a row is read; the suite TOML is a declared model read through
``volary.inputs``; ``--set`` lines give a config or one ConfigError line. Each refusal is one
line naming the input, never a traceback, never a wrong success count."""

from __future__ import annotations

import math
import shutil
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from _nav_fakes import fake_unit
from volary.config import apply_overrides
from volary.errors import ConfigError, FileFormatError, VolaryError
from volary.studies.flyingtrust.db import TABLES, RunDB, load_results
from volary.studies.flyingtrust.protocol import get_suite
from volary.studies.flyingtrust.schema import (
    COLLIDERS,
    SETTING_RANGES,
    SUITE_RANGES,
    ProtocolSettings,
    SettingsModel,
    SuiteFileError,
    WorkUnit,
    read_suite_file,
    suite_document,
)

# ---- run databases ----------------------------------------------------------------------------
UNITS = [WorkUnit("fake", "forest", c, 0, ("a", "b", "c"), 7) for c in range(4)]


@pytest.fixture(scope="module")
def good_db(tmp_path_factory) -> Path:
    """A valid run database: 4 units of 3 trials, some successes, some failures."""
    path = tmp_path_factory.mktemp("good") / "run.sqlite"
    db = RunDB.create(path, {"seed": 7, "algos": ["fake"], "suite": {}, "algo_options": {}}, UNITS)
    for i, u in enumerate(UNITS):
        db.write_unit(i, fake_unit(u))
    db.close()
    return path


def _copy(good: Path, folder: Path, name: str = "run.sqlite") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(good, folder / name))


def _sql(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path)
    for s in statements:
        conn.execute(s)
    conn.commit()
    conn.close()


def _refused(path: Path, *needles: str) -> str:
    """The one-line FileFormatError that opening and reading ``path`` gives."""
    with pytest.raises(FileFormatError) as info:
        load_results(path)
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg, msg
    for n in needles:
        assert n in msg, msg
    with pytest.raises(FileFormatError):
        RunDB.open(path, readonly=True)
    return msg


def test_a_database_without_a_success_column_is_refused_not_read_as_all_successes(
    good_db, tmp_path
):
    """Issue 55: ``SELECT "success"`` is the string 'success' to SQLite when the column is
    missing; HEAD read every trial, collisions included, as a success."""
    path = _copy(good_db, tmp_path)
    _sql(path, "ALTER TABLE trials DROP COLUMN success")
    _refused(path, "trials: missing column 'success'")


RETYPE = (  # the trials table rebuilt with success as TEXT (what CREATE TABLE AS would do)
    "CREATE TABLE t2 AS SELECT * FROM trials",
    "DROP TABLE trials",
    "ALTER TABLE t2 RENAME TO trials",
)


@pytest.mark.parametrize(
    "statements, needles",
    [
        (["ALTER TABLE trials RENAME COLUMN success TO ok"], ["missing column 'success'"]),
        (["ALTER TABLE trials ADD COLUMN junk TEXT"], ["trials: unexpected column 'junk'"]),
        (["CREATE TABLE junk (a)"], ["unexpected table 'junk'"]),
        (["CREATE TRIGGER t AFTER INSERT ON trials BEGIN DELETE FROM trials; END"],
         ["unexpected trigger 't'"]),
        (["DROP TABLE units"], ["no table 'units'"]),
        (RETYPE, ["trials.key: expected the primary key"]),
        (["UPDATE trials SET success = 2 WHERE rowid = 1"], ["trials row 'fake|a|", "success"]),
        (["UPDATE trials SET success = 'yes' WHERE rowid = 1"], ["success: expected 0 or 1"]),
        (["UPDATE trials SET success = 1, cause = 'collision' WHERE rowid = 1"],
         ["success: expected 1 exactly when cause is 'success'"]),
        (["UPDATE trials SET cause = 'teleported' WHERE rowid = 1"], ["cause: expected one of"]),
        (["UPDATE trials SET flight_time = 'NaN' WHERE rowid = 1"], ["flight_time: expected a"]),
        (["UPDATE trials SET flight_time = 9e999 WHERE rowid = 1"], ["got inf"]),
        (["UPDATE trials SET collisions = -1 WHERE rowid = 1"], ["collisions: expected an int"]),
        (["UPDATE trials SET proximity = 140 WHERE rowid = 1"], ["proximity: expected a number"]),
        (["UPDATE trials SET algo = NULL WHERE rowid = 1"], ["algo: expected a non-empty text"]),
        (["UPDATE trials SET config = 1.5 WHERE rowid = 1"], ["config: expected an integer"]),
        (["UPDATE trials SET key = 'x' WHERE rowid = 1"], ["trials row 'x': key: expected"]),
        (["UPDATE trials SET unit = 99 WHERE rowid = 1"], ["unit: expected the id of a stored"]),
        (["UPDATE units SET spec = '{}' WHERE id = 1"], ["units row 1: spec: algo: field"]),
        (["UPDATE units SET spec = '[' WHERE id = 1"], ["units row 1: spec: expected a work"]),
        (["UPDATE meta SET value = x'00' WHERE name = 'seed'"], ["meta row 'seed': value"]),
        (["UPDATE meta SET value = '2' WHERE name = 'schema_version'"], ["with schema 2"]),
    ],
)  # fmt: skip
def test_malformed_databases_are_refused_naming_file_table_row_and_column(
    good_db, tmp_path, statements, needles
):
    path = _copy(good_db, tmp_path)
    _sql(path, *statements)
    _refused(path, *needles)


def test_files_that_are_not_databases_are_refused_before_sqlite_reads_them(good_db, tmp_path):
    import os

    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"SQLite format 3\x00" + b"\xff" * 5000)
    _refused(junk, "not a volary run database")
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")  # SQLite would take it for a new, empty database
    _refused(empty, "not a SQLite 3 file")
    text = tmp_path / "notes.sqlite"
    text.write_text("a run database? no\n" * 20)
    _refused(text, "not a SQLite 3 file")
    fifo = tmp_path / "fifo.sqlite"
    os.mkfifo(fifo)  # opening it for reading would block forever
    _refused(fifo, "not a regular file")


def test_a_valid_database_reads_back_its_rows_and_counts(good_db):
    rows = load_results(good_db)
    assert len(rows) == 12 and all(r.success == (r.cause == "success") for r in rows)
    with RunDB.open(good_db, readonly=True) as db:
        assert db.counts() == (12, sum(r.success for r in rows), 12)


# the generated databases: column operations, value writes, byte damage
_COLUMNS = [(t, c.name) for t, cols in TABLES.items() for c in cols]
_VALUES = st.one_of(
    st.none(),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, 1, 2, -1, 0.5, 1e308, math.inf, -math.inf, "", "success", "NaN", "1"]),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.binary(max_size=8),
)
_OPS = st.one_of(
    st.tuples(st.just("drop"), st.sampled_from(_COLUMNS)),
    st.tuples(st.just("rename"), st.sampled_from(_COLUMNS)),
    st.tuples(st.just("retype"), st.sampled_from(_COLUMNS), st.sampled_from(["TEXT", "BLOB", ""])),
    st.tuples(st.just("set"), st.sampled_from(_COLUMNS), st.integers(1, 12), _VALUES),
    st.tuples(st.just("bytes"), st.integers(0, 40_000), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("truncate"), st.integers(0, 40_000)),
)


def _apply(path: Path, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind in ("bytes", "truncate"):
        data = bytearray(path.read_bytes())
        at = op[1] % (len(data) + 1)
        data = data[:at] if kind == "truncate" else data[:at] + op[2] + data[at + len(op[2]) :]
        path.write_bytes(bytes(data))
        return
    table, col = op[1]
    conn = sqlite3.connect(path)
    try:
        if kind == "drop":
            conn.execute(f'ALTER TABLE "{table}" DROP COLUMN "{col}"')
        elif kind == "rename":
            conn.execute(f'ALTER TABLE "{table}" RENAME COLUMN "{col}" TO "{col}_old"')
        elif kind == "retype":
            cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
            decl = ", ".join(f'"{c}" {op[2] if c == col else ""}' for c in cols)
            conn.execute(f'CREATE TABLE "new_{table}" ({decl})')
            conn.execute(f'INSERT INTO "new_{table}" SELECT * FROM "{table}"')
            conn.execute(f'DROP TABLE "{table}"')
            conn.execute(f'ALTER TABLE "new_{table}" RENAME TO "{table}"')
        else:
            conn.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE rowid = ?', (op[3], op[2]))
        conn.commit()
    except (sqlite3.Error, UnicodeDecodeError):
        pass  # (SQLite refused the change itself: the primary key, a damaged schema text)
    finally:
        conn.close()


def _raw_trials(path: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute('SELECT "key", "success", "cause" FROM trials').fetchall()
    finally:
        conn.close()


def _check_generated(good: Path, folder: Path, ops: list[tuple[Any, ...]]) -> None:
    path = _copy(good, folder)
    for op in ops:
        _apply(path, op)
    try:
        rows = load_results(path)
        with RunDB.open(path, readonly=True) as db:
            done, ok, total = db.counts()
    except FileFormatError as e:
        assert "\n" not in str(e) and str(path) in str(e), str(e)
        return
    raw = {k: (s, c) for k, s, c in _raw_trials(path)}  # accepted: it is what SQLite holds
    assert len(rows) == done == len(raw) and total == 12
    assert ok == sum(r.success for r in rows) == sum(c == "success" for _, c in raw.values())
    for r in rows:
        assert raw[r.key] == (int(r.success), r.cause)
        assert isinstance(r.success, bool) and isinstance(r.collisions, int)
        assert all(math.isfinite(v) or math.isnan(v) for v in asdict(r).values()
                   if isinstance(v, float))  # fmt: skip


@settings(max_examples=40)
@given(ops=st.lists(_OPS, min_size=1, max_size=3))
def test_generated_databases_read_correctly_or_are_refused_in_one_line(
    good_db, tmp_path_factory, ops
):
    _check_generated(good_db, tmp_path_factory.mktemp("gen"), ops)


@pytest.mark.slow
@settings(max_examples=1000)
@given(ops=st.lists(_OPS, min_size=1, max_size=5))
def test_many_generated_databases(good_db, tmp_path_factory, ops):
    _check_generated(good_db, tmp_path_factory.mktemp("gen"), ops)


# ---- `volary bench` on a bad database -----------------------------------------------------------
def _bench_app() -> typer.Typer:
    """The ``volary`` command itself (its group prints a ConfigError as one line, exit 2)."""
    from volary.cli.main import app

    return app


@pytest.mark.parametrize("command", ["resume", "report", "list"])
def test_bench_commands_on_a_bad_database_print_one_error_line(good_db, tmp_path, command):
    """Issue 55: `volary bench resume` printed a traceback on a damaged database."""
    path = _copy(good_db, tmp_path / "runs" / "bad")
    _sql(path, "ALTER TABLE trials DROP COLUMN success")
    args = {
        "resume": ["resume", str(path), "--workers", "0", "--quiet"],
        "report": ["report", str(path.parent)],
        "list": ["list", "--runs", str(tmp_path / "runs")],
    }[command]
    r = CliRunner().invoke(_bench_app(), ["bench", *args])
    assert "Traceback" not in r.output, r.output
    if command == "list":  # the run's row says what is wrong; the other runs are still listed
        assert r.exit_code == 0 and "missing" in r.output, r.output
        return
    assert r.exit_code == 2, r.output
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert errors == [f"error: {path}: trials: missing column 'success'"], r.output


# ---- the suite TOML ------------------------------------------------------------------------------
HEAD = 'platforms = ["0.60kg-EMAX"]\nscenarios = ["forest"]\nconfigs = [0]\n'


def _suite_file(tmp_path: Path, text: str | bytes) -> Path:
    p = tmp_path / "suite.toml"
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


@pytest.mark.parametrize(
    "text, needles",
    [
        (b"a = " + b"[" * 5000 + b"]" * 5000, ["nested"]),
        (HEAD.encode() + b"name = 'x'\x00\n", ["a NUL byte"]),
        (b"\xff\xfe" + HEAD.encode(), ["not UTF-8"]),
        (HEAD + "[settings]\ntime_limit = nan\n", ["settings.time_limit: expected a number in"]),
        (HEAD + "[settings]\nspeed_cap = 1e308\n", ["settings.speed_cap: expected a number in"]),
        (HEAD + "trials_per_config = true\n", ["trials_per_config: expected an int in [1, 1000]"]),
        (HEAD + "max_envs = 2.0\n", ["max_envs: expected an int in [1, 4096]"]),
        (HEAD + "settings = 3\n", ["settings: expected a table"]),
        (HEAD + 'name = ""\n', ["name: expected a non-empty text"]),
        (HEAD.replace("[0]", "[0, true]"), ["configs: expected"]),
        (HEAD + "[settings]\ncollider = 3\n", ["settings.collider: expected one of sphere, box"]),
        (HEAD + "[settings]\nspeed = 3\n", ["unknown keys ['speed']", "speed_cap"]),
    ],
)
def test_malformed_suite_files_are_one_line_errors(tmp_path, text, needles):
    p = _suite_file(tmp_path, text)
    with pytest.raises(SuiteFileError) as info:
        read_suite_file(p)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(str(p)), msg
    for n in needles:
        assert n in msg, msg
    assert isinstance(info.value, FileFormatError) and isinstance(info.value, ConfigError)


def test_suite_files_that_are_not_regular_files_or_too_big_are_not_read(tmp_path):
    import os

    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(SuiteFileError, match="not a regular file"):
            read_suite_file(path)
    big = tmp_path / "big.toml"
    with big.open("wb") as f:
        f.write(HEAD.encode())
        f.truncate(65 * 2**20)  # sparse: the size is refused before a byte is read
    with pytest.raises(SuiteFileError, match="expected at most"):
        read_suite_file(big)


def test_the_settings_model_and_protocol_settings_agree():
    assert SettingsModel().model_dump() == asdict(ProtocolSettings())
    assert set(SETTING_RANGES) | {"collider"} == set(SettingsModel.model_fields)
    with pytest.raises(ConfigError, match=r"settings.time_limit: expected a number in \[0.1"):
        ProtocolSettings(time_limit=1e-300)


def _number(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


_SETTINGS = st.fixed_dictionaries(
    {},
    optional={
        **{k: _number(lo, hi) for k, (lo, hi, _) in SETTING_RANGES.items()},
        "collider": st.sampled_from(COLLIDERS),
    },
)
_VALID_SUITES = st.fixed_dictionaries(
    {
        "platforms": st.one_of(
            st.sampled_from(["flyingtrust", "all"]),
            st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=3),
        ),
        "scenarios": st.one_of(st.just("all"), st.lists(st.text(min_size=1), min_size=1)),
        "configs": st.one_of(
            st.sampled_from(["fixed", "fixed:3"]),
            st.lists(st.integers(0, 2**31), min_size=1, max_size=4),
        ),
    },
    optional={
        "name": st.text(min_size=1, max_size=10),
        "trials_per_config": st.integers(*SUITE_RANGES["trials_per_config"]),
        "max_envs": st.integers(*SUITE_RANGES["max_envs"]),
        "settings": _SETTINGS,
    },
)


@given(doc=_VALID_SUITES)
def test_suite_documents_built_from_the_declared_ranges_load(doc):
    s = suite_document(doc, "gen.toml")
    assert s.settings.model_dump() == {**asdict(ProtocolSettings()), **doc.get("settings", {})}
    assert s.trials_per_config == doc.get("trials_per_config", 1)


_BAD_VALUES = {  # per key: values outside its declared shape or range
    "platforms": st.sampled_from([[], "some", [""], [1], 3, None, {}]),
    "scenarios": st.sampled_from([[], "forest", [""], [True], 2.5]),
    "configs": st.one_of(
        st.sampled_from([[], [-1], [True], [1.5], ["0"], 7]),
        st.lists(st.integers(max_value=-1), min_size=1),
    ),  # fmt: skip
    "trials_per_config": st.one_of(
        st.integers(max_value=0),
        st.integers(min_value=1001),
        st.sampled_from([True, 1.0, "1", math.nan]),
    ),  # fmt: skip
    "max_envs": st.one_of(st.integers(max_value=0), st.integers(min_value=4097)),
    "name": st.sampled_from(["", 3, ["x"]]),
    "settings": st.sampled_from([3, "fast", [1]]),
}
_BAD_SETTING = st.sampled_from(sorted(SETTING_RANGES)).flatmap(
    lambda k: st.tuples(
        st.just(k),
        st.one_of(
            st.floats(max_value=SETTING_RANGES[k][0], exclude_max=True),
            st.floats(min_value=SETTING_RANGES[k][1], exclude_min=True),
            st.sampled_from([math.nan, math.inf, True, "1", None]),
        ),
    )
)


@given(doc=_VALID_SUITES, bad=st.one_of(
    st.sampled_from(sorted(_BAD_VALUES)).flatmap(lambda k: st.tuples(st.just(k), _BAD_VALUES[k])),
    _BAD_SETTING.map(lambda kv: ("settings", {kv[0]: kv[1]})),
    st.tuples(st.text(min_size=1).filter(lambda k: k not in _BAD_VALUES), st.integers()),
))  # fmt: skip
def test_suite_documents_with_one_bad_value_are_refused_naming_the_key(doc, bad):
    key, value = bad
    with pytest.raises(SuiteFileError) as info:
        suite_document({**doc, key: value}, "gen.toml")
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("gen.toml: "), msg
    assert key in msg or "unknown keys" in msg, msg


# ---- `--set` lines -----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Net:
    width: float = 1.0
    layers: tuple[int, ...] = (64, 64)

    def __post_init__(self) -> None:
        if not (isinstance(self.width, float) and 0 < self.width <= 8):
            raise ConfigError(f"width: expected a number in (0, 8], got {self.width!r}")


@dataclass(frozen=True)
class _Train:
    lr: float = 1e-3
    steps: int = 10
    cap: int | None = None
    device: str = "cpu"
    verbose: bool = False
    goal: tuple[float, float, float] = (0.0, 0.0, 1.5)
    net: _Net = field(default_factory=_Net)
    options: dict[str, float] = field(default_factory=dict)


def _configs() -> list[Any]:
    from volary.studies.boundary.sampling import SamplingConfig
    from volary.studies.rl.ppo import PPOConfig

    return [_Train(), get_suite("quick"), PPOConfig(), SamplingConfig()]


def _paths(cfg: Any, prefix: str = "") -> list[str]:
    import dataclasses

    out = []
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        out.append(prefix + f.name)
        if dataclasses.is_dataclass(v):
            out += _paths(v, f"{prefix}{f.name}.")
    return out


_TEXTS = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["nan", "inf", "-1", "0", "1", "1e308", "()", "[]", "{}", "None", "true",
                     "1,2", "(1,", "'x'", "9" * 5000, "1" * 400, "(" * 300, "{1: 2}", "b'x'",
                     "1j", "...", "{1, 2}", "[[1]]", "10**400", "(1, 2, 3)"]),
)  # fmt: skip


def _check_set(cfg: Any, items: list[tuple[str, str]]) -> None:
    lines = [f"{k}={v}" for k, v in items]
    try:
        out = apply_overrides(cfg, lines)
    except ConfigError as e:
        assert "\n" not in str(e) and len(str(e)) < 2000, str(e)[:300]
        return
    except VolaryError as e:  # a name looked up (a platform, a scenario type) lists valid ones
        assert "\n" not in str(e), str(e)[:300]
        return
    assert type(out) is type(cfg)


_CONFIGS = _configs()


@given(cfg=st.sampled_from(_CONFIGS), data=st.data())
def test_generated_set_lines_give_a_config_or_one_line_config_error(cfg, data):
    names = _paths(cfg) + ["nope", "net.nope"]
    items = data.draw(st.lists(st.tuples(st.sampled_from(names), _TEXTS), min_size=1, max_size=3))
    _check_set(cfg, items)


def test_a_set_value_beyond_the_largest_float_is_a_config_error():
    """Issue 55: ``--set lr=<a 400-digit int>`` raised OverflowError (a traceback)."""
    with pytest.raises(ConfigError, match=r"_Train.lr: expected a float, got '1111"):
        apply_overrides(_Train(), ["lr=" + "1" * 400])
    with pytest.raises(ConfigError, match="settings.time_limit: expected a float"):
        apply_overrides(get_suite("quick"), ["settings.time_limit=" + "1" * 400])


def test_set_errors_stay_short_whatever_the_value():
    with pytest.raises(ConfigError) as info:
        apply_overrides(_Train(), ["steps=" + "9" * 5000, "x" * 3000 + "=1"])
    assert len(str(info.value)) < 300 and "..." in str(info.value)


def test_a_database_cut_short_is_refused_not_read_as_fewer_trials(good_db, tmp_path):
    """A file that lost its last pages (a copy cut short) read as whatever rows remained."""
    db = _copy(good_db, tmp_path)
    data = db.read_bytes()
    page = int.from_bytes(data[16:18], "big")
    db.write_bytes(data[: len(data) - page])
    _refused(db, "truncated run database", "pages")
    db.write_bytes(data[: len(data) - page // 2])
    _refused(db, "damaged run database", "whole pages")
