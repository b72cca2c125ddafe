"""docs/serve.md: the server command as written starts a server, and every Python block runs
against it (ADDRESS is the address the server prints)."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("zmq")

DOC = Path(__file__).resolve().parents[1] / "docs" / "serve.md"
TEXT = DOC.read_text()
SH = re.findall(r"```sh\n(.*?)```", TEXT, flags=re.S)
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)


def test_the_documented_server_serves_the_documented_clients():
    argv = shlex.split(SH[0].strip())
    assert argv[:2] == ["volary", "serve"]
    args = [*argv[2:], "--in-loop", "1", "--bind", "tcp://127.0.0.1:*"]  # + the in-loop block
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "volary.cli.main", "serve", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    try:
        line = ""
        while "volary serve:" not in line:
            line = proc.stdout.readline()
            assert line, "the server exited before serving"
        address = re.search(r"tcp://[\d.]+:\d+", line).group(0)
        assert len(BLOCKS) == 2 and len(BLOCKS[0].splitlines()) <= 25
        for code in BLOCKS:
            exec(compile(code, DOC.name, "exec"), {"ADDRESS": address})
        proc.send_signal(signal.SIGINT)  # Ctrl-C: a clean stop with a summary
        out, _ = proc.communicate(timeout=60)
        assert "served 61 control periods; 0 fault(s)" in out
    finally:
        proc.kill()
