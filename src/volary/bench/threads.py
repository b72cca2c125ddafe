"""One thread for torch and every native pool while a benchmark flies, for reproducible rows.

With more threads the order of floating-point reductions (OpenBLAS, OpenMP, torch's intra-op
pool) depends on the thread count, and closed loops and descents amplify the last bits: a
36-platform mapper unit flew 28 of 36 rows differently with two threads than with one, and the
AlphaPilot leaderboard read 92.33 or 92.28 depending on how the process was started.
"""

from __future__ import annotations

import platform
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import torch
from threadpoolctl import threadpool_limits


@contextmanager
def one_thread() -> Iterator[None]:
    """torch and every native thread pool (OpenBLAS, OpenMP) on one thread, restored after.

    threadpoolctl limits the libraries loaded when the limit is set; scipy's own OpenBLAS, which
    numba's ``np.linalg`` calls through ``scipy.linalg.cython_lapack``, loads on first use, so it
    is loaded here first."""
    with suppress(ImportError):
        import scipy.linalg.cython_lapack  # noqa: F401
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        torch.set_num_threads(threads)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else ``platform.processor()``: rows
    reproduce on one machine, not across CPU models (FLYINGTRUST's
    ``RUNNER.md``, "Reproducibility"), so runs and benchmarks record it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
