"""The ``volary`` command line refuses bad input cleanly (issue 55): every option that takes a
value, given a bad one, ends the command with exit code 2 and one ``error: ...`` line on stderr
naming the option, before anything is printed or started; failures while running exit 1.

The property tests walk the real command tree (``typer.main.get_command(app)``) and draw bad
values by the option's type (float, int, text, path) and by what its declared check says it
takes (``volary.cli.checks.OPTIONS``: a name, an input file, an output path, free text).
Documented exceptions (nothing is skipped silently):

- ``bench run|resume|report|list`` (``volary.studies.flyingtrust.cli``) are checked by their own
  module, owned by another change of issue 55: :data:`ELSEWHERE`.
- Free text (``--token``, ``--trial``, ``--host``, ``--name``, ``--namespace``: kind ``text``)
  legitimately takes any word of its syntax: only the empty string and NUL are drawn for them.
- Output paths (kind ``out_dir`` / ``out_file``) may name anything that does not exist yet: the
  bad values drawn are an existing file where a directory is wanted (and the reverse), a FIFO,
  a path under a regular file, the empty string and NUL; typer reads an empty path as ``.``,
  the current directory, a valid output directory, so ``out_dir`` is not given ``""``.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from volary.cli.checks import OPTIONS
from volary.cli.main import app

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

runner = CliRunner()
CLI = typer.main.get_command(app)  # built once: typer takes ~0.2 s to build the tree


@pytest.fixture(scope="module", autouse=True)
def _one_tree():
    """runner.invoke(app) rebuilds the command tree on every call; reuse one."""
    import typer.testing

    build = typer.testing._get_command
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(typer.testing, "_get_command", lambda a: CLI if a is app else build(a))
        yield


ELSEWHERE = {"bench run", "bench resume", "bench report", "bench list"}
FAST_S = 5.0  # a refused option: no simulation, no file written (imports are warm by then)


def _leaves(cmd, path=()):
    if hasattr(cmd, "commands"):
        for name, sub in cmd.commands.items():
            yield from _leaves(sub, (*path, name))
    else:
        yield " ".join(path), cmd


TREE = dict(_leaves(CLI))


def _label(p) -> str:
    if p.param_type_name == "argument":
        return str(p.name).upper()
    return next((o for o in p.opts if o.startswith("--")), p.opts[0])


def _valued(cmd):
    return [p for p in cmd.params if not getattr(p, "is_flag", False) and p.expose_value]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A regular file, a directory, a FIFO and a missing path, for the path options."""
    root = tmp_path_factory.mktemp("cli-inputs")
    (root / "file.bin").write_bytes(b"not what anything expects\n")
    (root / "dir").mkdir()
    (root / "bag").mkdir()
    (root / "bag" / "metadata.yaml").write_text("rosbag2_bagfile_information: {}\n")
    os.mkfifo(root / "fifo")
    return root


def _baseline(command: str, files: Path) -> list[str]:
    """Valid positional arguments and required options of ``command``."""
    return {
        "fly": ["--platform", "crazyflie"],
        "platforms show": ["crazyflie"],
        "replay": [str(files / "bag")],
        "sousvide generate": ["--out", str(files / "dir" / "data.h5")],
        "sousvide train": ["--data", str(files / "file.bin"), "--out", str(files / "dir")],
        "sousvide eval": ["--policy", "expert", "--out", str(files / "dir")],
        "rl eval": ["--policy", str(files / "file.bin"), "--task", "hover"],
        "host-planner": ["straight"],
        "scene preview": ["forest"],
        "scene export": ["forest"],
        "splat synth": ["forest"],
        "splat convert": [str(files / "file.bin"), str(files / "dir" / "out.ply")],
        "splat render": ["forest"],
        "rl export": [str(files / "file.bin")],
        "ros1 build": [str(files / "dir")],
        "sysid": [str(files / "dir")],
    }.get(command, [])


def _bad_values(command: str, p, files: Path) -> list[str]:
    """Bad values for option ``p`` of ``command`` as command-line text."""
    ann = p.type_descriptor.annotation
    base = getattr(ann, "__args__", (ann,))[0] if hasattr(ann, "__args__") else ann
    if base is float:
        return ["nan", "inf", "-inf", "1e308", "-1e308", "abc", ""]
    if base is int:
        return [str(10**30), str(-(10**30)), "-1", str(2**64), "1.5", "abc", ""]
    kind = OPTIONS[command][_label(p)].kind
    common = ["", "x\x00y"]
    if kind == "text":
        return common
    if kind == "name":
        return [*common, "zz-no-such-name", "☃☃", "0" * 5000]
    if kind == "in_file":
        return [*common, str(files / "missing"), str(files / "dir"), str(files / "fifo")]
    if kind == "in_dir":
        return [*common, str(files / "missing"), str(files / "file.bin"), str(files / "fifo")]
    if kind == "in_path":
        return [*common, str(files / "missing"), str(files / "fifo")]
    if kind == "out_dir":  # typer reads an empty path as ".", the current directory: valid
        return ["x\x00y", str(files / "file.bin"), str(files / "file.bin" / "sub")]
    if kind == "out_file":
        return [*common, str(files / "dir"), str(files / "fifo"), str(files / "file.bin" / "x")]
    raise AssertionError(f"{command} {_label(p)}: no bad values for kind {kind!r}")


def _argv(command: str, p, value: str, files: Path) -> list[str]:
    args = [*command.split(), *_baseline(command, files)]
    if p.param_type_name == "argument":
        positions = [q for q in TREE[command].params if q.param_type_name == "argument"]
        i = len(command.split()) + positions.index(p)
        if i < len(args):
            args[i] = value
        else:
            args.append(value)
        return args
    values = [value] + ["0"] * (p.nargs - 1) if p.nargs > 1 else [value]
    return [*args, _label(p), *values]


def _assert_refused(argv: list[str], option: str) -> None:
    t0 = time.perf_counter()
    r = runner.invoke(app, argv)
    wall = time.perf_counter() - t0
    assert r.exit_code == 2, (argv, r.exit_code, r.output, r.exception)
    assert r.stdout == "", (argv, r.stdout)  # nothing printed before the error
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), (argv, r.stderr)
    assert option.lower() in lines[0].lower(), (argv, r.stderr)
    assert "Traceback" not in r.output
    assert wall < FAST_S, (argv, wall)


COMMANDS = sorted(c for c in TREE if c not in ELSEWHERE)
PAIRS = [(c, p) for c in COMMANDS for p in _valued(TREE[c])]


@pytest.fixture(scope="module", autouse=True)
def _warm():
    """Import what the checks look names up in, so the timing measures the checks."""
    runner.invoke(app, ["fly", "--platform", "crazyflie", "--yaw", "nan"])
    runner.invoke(app, ["race", "--racer", "x"])
    runner.invoke(app, ["scene", "export", "zz"])


def test_every_option_has_a_declared_check():
    """A new option without a check in volary.cli.checks.OPTIONS fails here."""
    missing = [f"{c} {_label(p)}" for c, p in PAIRS if _label(p) not in OPTIONS.get(c, {})]
    assert not missing, missing
    stale = [f"{c} {o}" for c, opts in OPTIONS.items() for o in opts
             if c not in TREE or o not in {_label(p) for p in _valued(TREE[c])}]  # fmt: skip
    assert not stale, stale


@pytest.mark.parametrize("command", COMMANDS)
def test_a_bad_value_of_any_option_is_refused_before_work(command, files):
    """Hypothesis picks an option of ``command`` and one of its bad values (a few examples per
    command in the default run; the slow sweep below tries every pair)."""
    params = _valued(TREE[command])
    if not params:
        pytest.skip(f"{command} takes no values")

    @settings(max_examples=4)
    @given(st.data())
    def check(data):
        p = data.draw(st.sampled_from(params), label="option")
        value = data.draw(st.sampled_from(_bad_values(command, p, files)), label="value")
        _assert_refused(_argv(command, p, value, files), _label(p))

    check()


@pytest.mark.slow
@pytest.mark.parametrize(("command", "param"), PAIRS, ids=[f"{c} {_label(p)}" for c, p in PAIRS])
def test_every_bad_value_of_every_option_is_refused(command, param, files):
    for value in _bad_values(command, param, files):
        _assert_refused(_argv(command, param, value, files), _label(param))


@pytest.mark.slow
@settings(max_examples=300)
@given(
    pair=st.sampled_from([(c, p) for c, p in PAIRS if p.type_descriptor.annotation is float]),
    value=st.one_of(
        st.floats(allow_nan=True, allow_infinity=True).filter(lambda v: not math.isfinite(v)),
        st.floats(min_value=1e12, allow_infinity=False),
        st.floats(max_value=-1e12, allow_infinity=False),
    ),
)
def test_unbounded_floats_are_refused(pair, value, files):
    command, p = pair
    _assert_refused(_argv(command, p, repr(value), files), _label(p))


# ----------------------------------------------------------------------------- regressions
@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--to", "nan", "0", "1"], "--to"),
        (["--yaw", "nan"], "--yaw"),
        (["--duration", "1e9"], "--duration"),
        (["--duration", "inf"], "--duration"),
    ],
)
def test_fly_refuses_nan_targets_and_endless_flights(args, option, tmp_path):
    """Issue 55: `--to nan` and `--yaw nan` flew a frozen vehicle and exited 0; `--duration 1e9`
    died allocating 3.5 TiB."""
    _assert_refused(["fly", "--platform", "crazyflie", "--out", str(tmp_path), *args], option)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--to", "1", "0", "--duration", "5"], ["(got '--duration')", "--to takes 3 values"]),
        (["--duration", "x"], ["--duration", "(got 'x')"]),
        (["--seed", "abc"], ["--seed", "(got 'abc')"]),
    ],
)
def test_a_value_that_is_not_a_number_is_named_with_what_the_option_takes(args, said, tmp_path):
    """typer's message named neither the refused token nor the count: `--to 1 0 --duration 5`
    said only 'Input should be a valid number'."""
    _assert_refused(["fly", "--platform", "crazyflie", "--out", str(tmp_path), *args], said[0])
    r = runner.invoke(app, ["fly", "--platform", "crazyflie", "--out", str(tmp_path), *args])
    assert all(s in r.stderr for s in said), r.stderr


def test_fly_holds_a_bounded_number_of_steps_whatever_the_duration(tmp_path, monkeypatch):
    """The flight is simulated and written in blocks; the figure gets every k-th step: memory
    is bounded by FLY_BLOCK_STEPS + FLY_PLOT_STEPS, not by the duration."""
    import csv

    import volary.cli.main as cli
    from volary.sim import Simulator

    monkeypatch.setattr(cli, "FLY_BLOCK_STEPS", 100)
    monkeypatch.setattr(cli, "FLY_PLOT_STEPS", 50)
    monkeypatch.setattr(cli, "_start_drawer", lambda: None)
    runs, drawn = [], []
    real_run = Simulator.run

    def run(self, setpoint, duration):
        traj = real_run(self, setpoint, duration)
        runs.append(traj.time.shape[0])
        return traj

    monkeypatch.setattr(Simulator, "run", run)
    monkeypatch.setattr(cli, "_draw", lambda d, traj, path, *a: drawn.append(traj) or path)
    r = runner.invoke(app, ["fly", "--platform", "crazyflie", "--to", "0.5", "0", "1.2",
                            "--duration", "3", "--out", str(tmp_path)])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert max(runs) <= 100 and sum(runs) == 720
    rows = list(csv.DictReader((tmp_path / "fly.csv").open()))
    t = [float(row["t"]) for row in rows]
    assert len(rows) == 720 and all(b > a for a, b in zip(t, t[1:], strict=False))
    assert abs(float(rows[-1]["x"]) - 0.5) < 0.02  # the same flight as in one piece
    (traj,) = drawn
    assert traj.time.shape[0] <= 51 and float(traj.time[-1]) == pytest.approx(3.0, abs=1e-3)


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--n", "0"], "--n"),
        (["--n", "-5"], "--n"),
        (["--threads", "0"], "--threads"),
        (["--substeps", "-1"], "--substeps"),
        (["--backend", "warp9"], "--backend"),
        (["--device", "tpu"], "--device"),
    ],
)
def test_bench_physics_refuses_bad_options_without_a_traceback(args, option, tmp_path):
    _assert_refused(["bench", "physics", "--out", str(tmp_path), *args], option)


def test_race_refuses_an_option_its_mode_does_not_use(tmp_path):
    """`--racer` is an oracle-mode option: the default challenge mode ignored it silently."""
    _assert_refused(["race", "--racer", "minsnap", "--courses", "0", "--out", str(tmp_path)],
                    "--racer")  # fmt: skip
    _assert_refused(["race", "--mode", "oracle", "--faults", "bias3x", "--out", str(tmp_path)],
                    "--faults")  # fmt: skip


def test_each_study_declares_its_commands_checks_and_the_table_holds_them():
    """A study's commands are checked from its own ``cli.OPTIONS`` (issue 60), added once to the
    one table when ``volary.cli.main`` mounts the study; declaring a command again with other
    checks is refused instead of replacing them silently."""
    from volary.checks import SEED, text
    from volary.cli.checks import add_options
    from volary.studies.alphapilot import cli as race
    from volary.studies.boundary import cli as bp
    from volary.studies.rl import cli as rl
    from volary.studies.sousvide import cli as sousvide

    studies = (race, bp, sousvide, rl)
    for study in studies:
        assert study.OPTIONS and all(OPTIONS[c] == opts for c, opts in study.OPTIONS.items())
    assert {c.split()[0] for s in studies for c in s.OPTIONS} == {"race", "bp", "sousvide", "rl"}
    add_options(bp.OPTIONS)  # the same declarations again (a second import): nothing changes
    with pytest.raises(ValueError, match="declared twice: race"):
        add_options({"race": {"--seed": text()}})
    assert OPTIONS["race"]["--seed"] is SEED


def test_a_failure_while_running_exits_1_with_one_line(tmp_path, monkeypatch):
    """Disk full while writing the log: not the user's input, so exit code 1, one line."""
    import errno

    import volary.cli.main as cli
    from volary.sim.recording import Trajectory

    def full(self, path, env=0, append=False):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(cli, "_start_drawer", lambda: None)
    monkeypatch.setattr(Trajectory, "to_csv", full)
    r = runner.invoke(app, ["fly", "--platform", "crazyflie", "--duration", "0.1",
                            "--out", str(tmp_path)])  # fmt: skip
    assert r.exit_code == 1, r.output
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "No space left on device" in lines[0] and "fly.csv" in lines[0]
    assert lines[0].startswith("error: failed while running")


def test_usage_errors_are_one_line_on_stderr():
    r = runner.invoke(app, ["fly", "--platform", "crazyflie", "--no-such-option"])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("error: ") and len(r.stderr.splitlines()) == 1, r.stderr


def test_a_checkpoint_that_does_not_fit_is_one_line_naming_the_file(tmp_path):
    """torch's load_state_dict error runs to many lines; the user gets one."""
    import torch

    from volary.errors import FileFormatError
    from volary.learning.checkpoint import write_checkpoint
    from volary.studies.boundary.model import CHECKPOINT_KIND, load_checkpoint

    path = tmp_path / "model.pt"
    state = {"w.weight": torch.zeros(3, 3), "other.bias": torch.zeros(2)}
    write_checkpoint(path, CHECKPOINT_KIND, {"dropout": 0.1, "state_dict": state})
    with pytest.raises(FileFormatError) as e:
        load_checkpoint(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(path)), msg
    assert "state_dict" in msg and "BoundaryPredictor" in msg, msg


def test_the_command_line_exit_codes_in_a_real_process(tmp_path):
    """The installed entry point (main()): bad input 2, one stderr line, empty stdout."""
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "volary.cli.main", "fly", "--platform", "crazyflie", "--yaw",
         "nan", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
    assert r.stderr.splitlines() == [
        "error: --yaw: expected a finite number in [-1000, 1000] rad (yaw angle), got nan"
    ]


_JUNK = bytes(range(256)) * 2  # not UTF-8, not SQLite, not a directory


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["bench", "run", "--suite", "{junk}", "--out", "{out}"], "not UTF-8"),
        (["bench", "run", "--set", "nosuch=3", "--out", "{out}"], "unknown field 'nosuch'"),
        (["bench", "run", "--db", "{junk}", "--workers", "0"], "not a volary run database"),
        (["bench", "run", "--cluster", "bogus", "--out", "{out}"], "--cluster: expected"),
        (["bench", "run", "--workers", "-2", "--out", "{out}"], "--workers: expected"),
        (["bench", "run", "--unit-timeout", "nan", "--out", "{out}"], "--unit-timeout: expected"),
        (["bench", "resume", "{junk}", "--workers", "0"], "not a volary run database"),
        (["bench", "resume", "{out}"], "no run database"),
        (["bench", "report", "{junk}"], "not a volary run database"),
        (["bench", "list", "--runs", "{junk}"], "--runs: expected a directory"),
    ],
)
def test_bench_bad_inputs_fail_before_any_output(args, needle, tmp_path):
    """`volary bench` on a bad suite, database or pool option: nothing on stdout (no 'suite
    quick: 84 trials -> ...' or 'resuming ...' line above the error, no run database made), the
    error as one line on stderr, exit code 2 (the bench commands printed errors on stdout, and
    `bench list --runs FILE` listed an empty table and exited 0)."""
    junk = tmp_path / "junk.bin"
    junk.write_bytes(_JUNK)
    out = tmp_path / "run"
    argv = [a.format(junk=junk, out=out) for a in args]
    r = runner.invoke(app, argv)
    assert r.exit_code == 2, (argv, r.output)
    assert r.stdout == "", (argv, r.stdout)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], r.stderr
    assert not out.exists(), argv  # no run database created for a refused run
