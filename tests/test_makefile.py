"""The Makefile's long peer build says so before it starts, and reuses a peer venv it is given
(issue 23: `make bench` compiled l2f for tens of minutes without a word)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def _dry_run(*args: str) -> str:
    out = subprocess.run(["make", "-n", "-C", str(ROOT), *args], capture_output=True, text=True,
                         check=True)  # fmt: skip
    return out.stdout


def test_make_bench_warns_before_building_the_peers(tmp_path):
    plan = _dry_run("bench", f"BENCH_VENV={tmp_path / 'peers'}")
    assert "compiles from source: about 30 minutes" in plan
    assert "BENCH_VENV=/path/to/venv" in plan
    assert plan.index("about 30 minutes") < plan.index("pip install")


def test_make_bench_reuses_a_peer_venv_that_is_installed(tmp_path):
    venv = tmp_path / "peers"
    (venv / "bin").mkdir(parents=True)
    (venv / ".installed").touch()  # newer than pyproject.toml and constraints.txt
    plan = _dry_run("bench", f"BENCH_VENV={venv}")
    assert "pip install" not in plan and "about 30 minutes" not in plan
    assert f"{venv}/bin/python benchmarks/physics.py" in plan
