"""Shared by the benchmarks that time whole ``volary`` commands: the command's argv prefix and
an environment with every thread pool pinned."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def volary_command() -> list[str]:
    """argv prefix running this interpreter's ``volary`` (its console script where present)."""
    exe = Path(sys.executable).with_name("volary")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "volary.cli.main"]


def threads_env(threads: int) -> dict[str, str]:
    """``os.environ`` with OpenMP, OpenBLAS, MKL and numba at ``threads`` threads."""
    t = str(threads)
    return {**os.environ, "OMP_NUM_THREADS": t, "OPENBLAS_NUM_THREADS": t, "MKL_NUM_THREADS": t,
            "NUMBA_NUM_THREADS": t}  # fmt: skip
