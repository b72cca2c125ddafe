"""Planners in another process (volary.serve.planners): the benchmark's rows do not change when
the planner moves behind the wire, and a host that fails becomes a recorded failure."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from volary.serve import protocol as P
from volary.serve.planners import (
    PlannerHost,
    RemotePlanner,
    obs_from_wire,
    obs_to_wire,
    ref_from_wire,
    ref_to_wire,
    task_from_wire,
    task_to_wire,
)
from volary.studies.flyingtrust.episode import run_unit
from volary.studies.flyingtrust.schema import ProtocolSettings, WorkUnit

PAIR = ("0.60kg-EMAX", "1.00kg-SunnySky")
SHORT = ProtocolSettings(time_limit=6.0, trial_wall_limit=20.0)
TESTS = Path(__file__).resolve().parent


def _rows(unit: WorkUnit) -> list[dict]:
    out = []
    for r in run_unit(unit):
        row = r.to_row()
        row.pop("wall_time")
        out.append(row)
    return out


def _start_host(algo: str, *extra: str) -> tuple[subprocess.Popen, str]:
    """``volary host-planner ALGO`` on a free port; returns the process and its address."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path])}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "volary.cli.main",
            "host-planner",
            algo,
            "--bind",
            "tcp://127.0.0.1:*",
            *extra,
        ],  # fmt: skip
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if " at tcp://" in line:
            return proc, line.split(" at ", 1)[1].split()[0]
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"host-planner did not start: {proc.stdout.read()}")


@pytest.fixture(scope="module")
def mapper_host():
    proc, address = _start_host("mapper")
    yield address
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_mapper_behind_the_remote_adapter_flies_identical_rows(mapper_host):
    """The same unit, mapper in-process and mapper in another process (``--remote
    mapper=ADDRESS`` = the option ``remote``): every field of every row equal (wall time
    aside), so the seeds, the plans and the flights are the same."""
    unit = WorkUnit("mapper", "forest", 0, 0, PAIR, 0, (), SHORT)
    local = _rows(unit)
    remote = _rows(replace(unit, algo_options=(("remote", mapper_host),)))
    assert [r["cause"] for r in remote] == [r["cause"] for r in local]
    assert all(r["error"] == "" for r in remote)
    assert remote == local
    assert local[0]["path_length"] > 1.0  # it flew on plans, not on the hold


def test_remote_algo_name_flies_its_own_rows(mapper_host):
    """``--algo remote:ADDRESS``: a planner of its own name (its own seeds), flown remotely."""
    rows = run_unit(WorkUnit(f"remote:{mapper_host}", "forest", 0, 0, PAIR[:1], 0, (), SHORT))
    assert rows[0].algo == f"remote:{mapper_host}" and rows[0].error == ""
    assert rows[0].path_length > 1.0


class _FakeHost:
    """A ROUTER socket in a thread that answers every request with ``reply(frames)`` (a list of
    frames, or None for silence)."""

    def __init__(self, reply):
        import zmq

        self.sock = zmq.Context.instance().socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.address = f"tcp://127.0.0.1:{port}"
        self.reply, self.stop = reply, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            if self.sock.poll(50):
                ident, *body = self.sock.recv_multipart()
                out = self.reply(body)
                if out is not None:
                    self.sock.send_multipart([ident, *out])

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        self.sock.close(0)


def _seq(body) -> int:
    return P.decode(body).get("seq", 0)


@pytest.mark.parametrize(
    "kind, message",
    [
        ("garbage", "ProtocolError"),
        ("silent", "TimeoutError"),
        ("wrong_op", "ProtocolError"),
        ("no_host", "TimeoutError"),
    ],
)
def test_a_host_that_hangs_or_sends_garbage_is_a_recorded_failure(kind, message):
    replies = {
        "garbage": lambda body: [b"\xc1\xff not msgpack"],
        "silent": lambda body: None,
        "wrong_op": lambda body: P.encode({"op": "reference", "seq": _seq(body)}),
    }
    host = _FakeHost(replies[kind]) if kind in replies else None
    address = host.address if host else "tcp://127.0.0.1:9"  # nothing listens on port 9
    unit = WorkUnit("mapper", "forest", 0, 0, PAIR, 0,
                    (("remote", address), ("remote_timeout", 0.5)), SHORT)  # fmt: skip
    try:
        t0 = time.monotonic()
        rows = run_unit(unit)
    finally:
        if host:
            host.close()
    assert [r.cause for r in rows] == ["error", "error"]
    assert all(message in r.error for r in rows), rows[0].error
    assert time.monotonic() - t0 < 30  # each env waited its timeout once, then the unit ended


class DiesMidTrial:
    """Straight flight until t = 1 s, then the host process SIGKILLs itself mid-call."""

    name = "dies"
    needs = frozenset()

    def __init__(self, **options):
        from volary.studies.flyingtrust.planners.straight import StraightPlanner

        self.inner = StraightPlanner()

    def reset(self, task):
        self.inner.reset(task)

    def plan(self, obs):
        if obs.t > 1.0:
            os.kill(os.getpid(), signal.SIGKILL)
        return self.inner.plan(obs)


def test_a_host_killed_mid_trial_fails_its_trials_and_the_unit_finishes():
    """The host dies (SIGKILL) while answering: the calls time out, each env becomes an error
    row at the time it happened, the unit returns every row."""
    proc, address = _start_host("test_remote_planner:DiesMidTrial")
    unit = WorkUnit("dies", "forest", 0, 0, PAIR, 0,
                    (("remote", address), ("remote_timeout", 1.0)), SHORT)  # fmt: skip
    try:
        rows = run_unit(unit)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert [r.cause for r in rows] == ["error", "error"]
    assert all("TimeoutError" in r.error for r in rows)
    assert all(1.0 < r.flight_time < 1.5 for r in rows)  # it flew on plans until the host died


def test_a_planner_that_raises_on_the_host_is_an_error_row_with_its_traceback():
    proc, address = _start_host("test_nav_episode:Faulty")
    try:
        unit = WorkUnit("faulty", "sudden_drop", 0, 0, ("0.895kg-DJI", "0.90kg-DJI"), 0,
                        (("remote", address),), ProtocolSettings(time_limit=3.0))  # fmt: skip
        rows = {r.platform: r for r in run_unit(unit)}
    finally:
        proc.kill()
        proc.wait()
    assert rows["0.895kg-DJI"].cause == "error"
    assert "RuntimeError: planner bug" in rows["0.895kg-DJI"].error
    assert "planner_error" in rows["0.895kg-DJI"].error
    assert rows["0.90kg-DJI"].cause == "error" and "non-finite" in rows["0.90kg-DJI"].error


def test_wire_round_trips_are_exact():
    from volary.planning.navigation import NavLimits, NavObservation, NavReference, NavTask
    from volary.studies.flyingtrust.episode import _depth_info, _lidar_info, _rgb_info

    rng = np.random.default_rng(0)
    limits = NavLimits(4.0, 5.1, 3.2, 2.5, 100.0, 20.0, 0.2)
    task = NavTask(rng.normal(size=3), rng.normal(size=3), 2.0, -rng.random(3), rng.random(3),
                   limits, 90.0, 10.0, _depth_info(10.0), _lidar_info(10.0), 7, "p",
                   _rgb_info(10.0))  # fmt: skip
    back = task_from_wire(P.decode(_frames(P.encode({"op": "x", "task": task_to_wire(task)}))))
    assert back.limits == task.limits and back.seed == 7 and back.platform == "p"
    assert back.rgb.width == task.rgb.width and back.rgb.fx == task.rgb.fx
    plain = task_to_wire(dataclasses.replace(task, rgb=None))  # what hosts before "rgb" read
    assert "rgb" not in plain and task_from_wire({"task": plain}).rgb is None
    for a, b in ((task.start, back.start), (task.depth.q_body_cam, back.depth.q_body_cam),
                 (task.lidar.directions, back.lidar.directions),
                 (task.rgb.t_body_cam, back.rgb.t_body_cam)):  # fmt: skip
        assert np.array_equal(a, b) and b.flags.writeable
    obs = NavObservation(1.5, rng.normal(size=3), rng.normal(size=3), np.array([1.0, 0, 0, 0]),
                         rng.normal(size=3), rng.random((48, 64)).astype(np.float32),
                         rgb=rng.integers(0, 256, (48, 64, 3), dtype=np.uint8))  # fmt: skip
    ob = obs_from_wire(P.decode(_frames(P.encode({"op": "x", "obs": obs_to_wire(obs)}))))
    assert ob.t == 1.5 and np.array_equal(ob.depth, obs.depth) and ob.depth.dtype == np.float32
    assert np.array_equal(ob.rgb, obs.rgb) and ob.rgb.dtype == np.uint8
    k = np.linspace(0, 1, 5)
    ref = NavReference(0.0, k, rng.normal(size=(5, 3)), rng.normal(size=(5, 3)),
                       rng.normal(size=(5, 3)), k)  # fmt: skip
    rb = ref_from_wire(P.decode(_frames(P.encode({"op": "x", "reference": ref_to_wire(ref)}))))
    assert all(np.array_equal(getattr(ref, f), getattr(rb, f)) for f in ("times", "positions"))
    assert ref_from_wire({"reference": None}) is None


def _frames(frames) -> list[bytes]:
    return [bytes(f) for f in frames]


def test_host_answers_bad_requests_with_errors_and_keeps_serving():
    host = PlannerHost(lambda **o: None, "tcp://127.0.0.1:*")
    try:
        replies = []
        host.sock.send_multipart = lambda frames: replies.append(P.decode(frames[1:]))
        host.handle([b"id", b"junk"])
        host.handle([b"id", *_frames(P.encode({"op": "plan", "trial": "t", "seq": 3}))])
        host.handle([b"id", *_frames(P.encode({"op": "launch", "trial": "t"}))])
        assert [r["code"] for r in replies] == ["bad_message", "bad_field", "bad_message"]
        assert replies[1]["seq"] == 3 and "no planner_reset" in replies[1]["message"]
        assert host.faults == 3
    finally:
        host.close()


def test_host_token_and_bind_checks():
    from volary.errors import ConfigError

    with pytest.raises(ConfigError, match="token"):
        PlannerHost(lambda **o: None, "tcp://0.0.0.0:*")
    host = PlannerHost(lambda **o: None, "tcp://127.0.0.1:*", token="s3cret-token")
    try:
        replies = []
        host.sock.send_multipart = lambda frames: replies.append(P.decode(frames[1:]))
        host.handle([b"id", *_frames(P.encode({"op": "plan", "trial": "t", "token": "nope"}))])
        assert replies[0]["code"] == "unauthorized"
    finally:
        host.close()
    with pytest.raises(ValueError, match="address"):
        RemotePlanner("localhost:5600")


@pytest.mark.slow
def test_a_36_platform_mapper_unit_is_identical_behind_the_remote_adapter(mapper_host):
    """The issue's check: a whole 36-platform unit (forest, configuration 0, the full protocol
    settings), mapper in-process and behind the adapter in another process: identical rows."""
    from volary.platforms import table1

    platforms = tuple(table1())  # the 36 FLYINGTRUST platforms
    assert len(platforms) == 36
    unit = WorkUnit("mapper", "forest", 0, 0, platforms, 0)
    local = _rows(unit)
    remote = _rows(replace(unit, algo_options=(("remote", mapper_host),)))
    assert remote == local


def _installed_like_pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """volary's ``[project.entry-points."volary.planners"]`` table as an installed
    distribution's metadata on sys.path (the ``entry_points.txt`` pip writes), so the lookup
    runs through importlib.metadata without reinstalling volary; returns the table."""
    import tomllib

    table = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())["project"]
    planners = table.get("entry-points", {}).get("volary.planners", {})
    dist = tmp_path / "volary_entry_points_check-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: volary-entry-points-check\n")
    lines = ["[volary.planners]", *(f"{k} = {v}" for k, v in planners.items())]
    (dist / "entry_points.txt").write_text("\n".join(lines) + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return planners


def test_the_slate_s_names_resolve_in_the_core_as_installed_entry_points(tmp_path, monkeypatch):
    """Every planner name of the FLYINGTRUST slate is declared in pyproject.toml, and the
    core's lookup (which may not import the study) finds the study's own class for it."""
    from volary.serve.planners import planner_factory
    from volary.studies.flyingtrust.planners import PLANNERS, resolve_planner

    declared = _installed_like_pip(tmp_path, monkeypatch)
    assert sorted(declared) == sorted(PLANNERS)
    from volary.registry import Registry

    core = Registry("planner", group="volary.planners")
    assert {n: core.get(n) for n in PLANNERS} == {n: resolve_planner(n) for n in PLANNERS}
    assert type(planner_factory("ego")()) is resolve_planner("ego")
    from volary.errors import ConfigError, UnknownNameError

    with pytest.raises(ConfigError, match="planner 'straight': bad options"):
        planner_factory("straight")(no_such_option=1)
    with pytest.raises(UnknownNameError, match="ego"):  # the message lists the valid names
        planner_factory("no_such_planner")


def test_client_host_planner_serves_a_slate_planner_by_name(tmp_path, monkeypatch):
    """``volary.client.host_planner("straight")`` (any slate name, as before the study moved)
    serves the planner: a unit flown through it gives the in-process rows."""
    import zmq

    from volary.client import host_planner

    _installed_like_pip(tmp_path, monkeypatch)
    probe = zmq.Context.instance().socket(zmq.ROUTER)
    port = probe.bind_to_random_port("tcp://127.0.0.1")
    probe.close(0)
    address, stop, errors = f"tcp://127.0.0.1:{port}", threading.Event(), []

    def serve() -> None:
        try:
            host_planner("straight", address, stop=stop.is_set)
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        unit = WorkUnit("straight", "forest", 0, 0, PAIR, 0, (), SHORT)
        remote = _rows(replace(unit, algo_options=(("remote", address),)))
    finally:
        stop.set()
        thread.join(5)
    assert errors == []
    assert [r["cause"] for r in remote] == ["collision", "collision"]  # its straight line's
    assert remote == _rows(unit)
