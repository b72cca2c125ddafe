"""Processes a test starts (a rosmaster, a bridge, nodes), ended last first by their own id."""

from __future__ import annotations

import subprocess
from typing import Any

from volary.ros1.env import stop_processes


class Procs:
    """``start`` them during the test, ``stop`` them in its ``finally``."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, cmd: list[str], **kw: Any) -> subprocess.Popen:
        proc = subprocess.Popen(cmd, **kw)
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        stop_processes(self.procs)
