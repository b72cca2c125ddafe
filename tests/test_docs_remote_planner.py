"""docs/remote-planner.md: the documented planner, served as written from its own process,
flies benchmark trials (no fault rows), and the documented command names real options."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from volary.studies.flyingtrust.episode import run_unit
from volary.studies.flyingtrust.schema import ProtocolSettings, WorkUnit

pytest.importorskip("zmq")

DOC = Path(__file__).resolve().parents[1] / "docs" / "remote-planner.md"
TEXT = DOC.read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)
SH = re.findall(r"```sh\n(.*?)```", TEXT, flags=re.S)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_documented_planner_serves_benchmark_trials(tmp_path):
    assert len(BLOCKS) == 1 and len(BLOCKS[0].splitlines()) <= 30
    address = f"tcp://127.0.0.1:{_free_port()}"
    script = tmp_path / "host.py"
    script.write_text(BLOCKS[0].replace("tcp://127.0.0.1:5600", address))
    proc = subprocess.Popen([sys.executable, str(script)], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    try:
        time.sleep(0.5)
        assert proc.poll() is None, proc.stderr.read()
        unit = WorkUnit("climb", "forest", 0, 0, ("0.60kg-EMAX",), 0,
                        (("remote", address), ("remote_timeout", 30.0)),
                        ProtocolSettings(time_limit=4.0))  # fmt: skip
        row = run_unit(unit)[0]
    finally:
        proc.kill()
        proc.wait()
    assert row.cause != "error", row.error  # a fault of the host or the wire would be "error"
    assert row.path_length > 2.0  # it climbed on the served plans


def test_the_documented_command_parses():
    argv = shlex.split(SH[0].strip())
    assert argv[:3] == ["volary", "bench", "run"]
    from typer.testing import CliRunner

    from volary.cli.main import app

    res = CliRunner().invoke(app, [*argv[1:], "--remote", "nope", "--quiet"])
    assert res.exit_code == 2 and "NAME=ADDRESS" in res.output
