"""How many threads a parallel step should use: the cores this process may run on, less what
other processes are using right now.

A parallel region (numba's ``prange``, inductor's OpenMP loops, torch's intra-op pool) ends at a
barrier: it is as slow as its slowest thread. On a machine where another process keeps a core
busy, the thread that lands on that core runs in the scheduler's time slices, and a step that
takes half a millisecond quiet waits 10-130 ms for it (issue 62: ``Simulator("crazyflie",
n_envs=1024)`` stepped beside one busy loop on 2 cores, 17 of 720 steps over 10 ms with two
threads, none with one; 16,384 envs ran 4.4x slower than quiet with two threads, 1.9x with one).
A core count fixed at start-up cannot see this, so the count is measured while stepping:

- :func:`usable_cores`: the CPUs in this process's affinity mask, capped by its cgroup's CPU
  quota (``cpu.max``, v2; ``cpu.cfs_quota_us``, v1): what a container or ``taskset`` allows,
  which ``os.cpu_count()`` (and numba's default pool size) do not see.
- :class:`CoreShare`: every ``interval_s`` (0.25 s) it reads the busy time of those CPUs from
  ``/proc/stat`` and this process's own CPU time, so the difference is what other processes (and
  the hypervisor: ``steal``) took (on a saturated machine, what they would take: :func:`demand`);
  the threads a step gets are the usable cores less that load, rounded, at least one and at most
  the caller's ceiling (``torch.get_num_threads()``, the one
  thread knob of :mod:`volary.sim`). Before the first window closes it counts the runnable tasks
  (``procs_running``). Reading ``/proc/stat`` costs about 17 us, once a window. Where there is no
  ``/proc/stat`` (macOS, Windows) the count is the usable cores.

The count changes which threads do the work, never the result: every kernel that asks splits
independent envs (``tests/test_cpu.py`` checks a run whose thread count changes mid-flight
against one on a single thread, bit for bit).

Set ``VOLARY_CPU_SHARE=0`` to switch the measuring off (the ceiling is then used as is).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

PROC_STAT = Path("/proc/stat")
CGROUP_ROOT = Path("/sys/fs/cgroup")
INTERVAL_S = 0.25  # measuring window: ~50 jiffies of 10 ms on 2 cores (a +-0.1 core reading)
ENV_SWITCH = "VOLARY_CPU_SHARE"


def _affinity() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _cgroup_v2_quota(root: Path, self_cgroup: str) -> float | None:
    """The smallest ``cpu.max`` quota (in cores) on the path from this cgroup up to the root."""
    rel = None
    for line in self_cgroup.splitlines():
        if line.startswith("0::"):
            rel = line[3:].strip().lstrip("/")
    if rel is None:
        return None
    best = None
    path = root / rel if rel else root
    while True:
        try:
            quota, period = (path / "cpu.max").read_text().split()[:2]
            if quota != "max":
                cores = int(quota) / int(period)
                best = cores if best is None else min(best, cores)
        except (OSError, ValueError):
            pass
        if path == root or root not in path.parents:
            return best
        path = path.parent


def _cgroup_v1_quota(root: Path) -> float | None:
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def cgroup_quota(root: Path = CGROUP_ROOT, self_cgroup: str | None = None) -> float | None:
    """This process's cgroup CPU quota in cores (e.g. 1.5), or None when it has none."""
    if self_cgroup is None:
        try:
            self_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            return None
    quota = _cgroup_v2_quota(root, self_cgroup)
    return quota if quota is not None else _cgroup_v1_quota(root)


def usable_cores() -> int:
    """The cores this process may use: its affinity mask, capped by its cgroup's quota
    (rounded up: a 1.5-core quota can keep two threads busy 75 % of the time)."""
    cores = _affinity()
    quota = cgroup_quota()
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota - 1e-9)))
    return max(1, cores)


def _cpus() -> set[int] | None:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def parse_stat(text: str, cpus: set[int] | None) -> tuple[int, int, int]:
    """(busy jiffies, all jiffies, runnable tasks) of ``cpus`` (all CPUs when None) from the
    text of ``/proc/stat``. Busy: user, nice, system, irq, softirq, steal; idle and iowait are
    free (guest time is already counted in user)."""
    busy = total = running = 0
    for line in text.splitlines():
        if line.startswith("cpu") and line[3:4].isdigit():
            name, *vals = line.split()
            if cpus is not None and int(name[3:]) not in cpus:
                continue
            v = [int(x) for x in vals[:8]] + [0] * max(0, 8 - len(vals))
            user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
            b = user + nice + system + irq + softirq + steal
            busy += b
            total += b + idle + iowait
        elif line.startswith("procs_running"):
            running = int(line.split()[1])
    return busy, total, running


SLACK = 0.25  # cores: a machine busier than (cores - SLACK) is saturated
SMALL = 0.35  # cores: a share of a core below which others are not counted when saturated


def demand(others: float, saturated: bool) -> float:
    """The cores other processes want, from the cores they used in the last window.

    On a machine with idle time, what they used is what they wanted. On a saturated one it is
    what they got: this process's threads (spinning OpenMP workers among them) took the rest, and
    a busy loop beside two such threads gets half a core, not the one it would use. There each
    process above ``SMALL`` of a core is counted as wanting whole cores (``ceil``); without this
    the count, once at two threads, would stay there (the busy process looks half-idle)."""
    if not saturated:
        return others
    return float(max(0, math.ceil(others - SMALL)))


class CoreShare:
    """Measures how many of the usable cores other processes leave free (see the module
    docstring). ``threads(ceiling)`` is what a parallel step should use; it re-reads the load
    at most once per ``interval_s``."""

    def __init__(
        self,
        interval_s: float = INTERVAL_S,
        *,
        stat: Callable[[], str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        own_cpu: Callable[[], float] = time.process_time,
        cores: int | None = None,
        hz: int | None = None,
    ) -> None:
        self.interval_s = interval_s
        self._read = stat if stat is not None else _read_proc_stat
        self._clock, self._own = clock, own_cpu
        self.cores = usable_cores() if cores is None else cores
        self._cpus = _cpus() if stat is None else None
        self._hz = hz if hz is not None else _clock_ticks()
        self._last: tuple[float, float, int] | None = None  # (wall, own cpu s, busy jiffies)
        self.free: float | None = None  # cores others left free in the last window
        self.enabled = os.environ.get(ENV_SWITCH, "1") != "0"
        self.calls = self.fewer = 0  # threads() calls, and those that gave less than the top

    def _sample(self) -> tuple[float, float, int, int] | None:
        try:
            busy, _, running = parse_stat(self._read(), self._cpus)
        except (OSError, ValueError):
            return None
        return self._clock(), self._own(), busy, running

    def threads(self, ceiling: int) -> int:
        """Threads for the next parallel step: at least 1, at most ``ceiling`` and the usable
        cores, and no more than the cores other processes left free (rounded)."""
        top = max(1, min(int(ceiling), self.cores))
        if top == 1 or not self.enabled:
            return top
        now = self._clock()
        if self._last is None or now - self._last[0] >= self.interval_s:
            self._update()
        self.calls += 1
        if self.free is None:
            return top
        k = max(1, min(top, math.floor(self.free + 0.5)))
        if k < top:
            self.fewer += 1
        return k

    def _load(self, a: tuple, b: tuple) -> tuple[float, float] | None:
        """(cores busy, cores other processes used) between two ``(wall, own cpu s, busy
        jiffies)`` samples; None when no time passed."""
        dt = b[0] - a[0]
        if dt <= 0:
            return None
        used = (b[2] - a[2]) / self._hz / dt  # this process included
        return used, max(0.0, used - (b[1] - a[1]) / dt)

    def _update(self) -> None:
        s = self._sample()
        if s is None:
            self.enabled = False  # no /proc/stat: the ceiling it is
            return
        wall, own, busy, running = s
        if self._last is None:  # first call: the runnable tasks now, less this thread
            self.free = float(self.cores - max(0, running - 1))
        else:
            load = self._load(self._last, (wall, own, busy))
            if load is not None:
                used, others = load
                self.free = self.cores - demand(others, saturated=used >= self.cores - SLACK)
        self._last = (wall, own, busy)


def _read_proc_stat() -> str:
    with open(PROC_STAT) as f:  # noqa: PTH123 - the cheapest read, once a window
        return f.read()


def _clock_ticks() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):
        return 100


_SHARED: CoreShare | None = None


def shared() -> CoreShare:
    """The process's one :class:`CoreShare` (made on first use)."""
    global _SHARED
    if _SHARED is None:
        _SHARED = CoreShare()
    return _SHARED


def step_threads(ceiling: int) -> int:
    """``shared().threads(ceiling)``: the threads the next parallel step should use."""
    return shared().threads(ceiling)


@contextmanager
def governed_torch_threads() -> Iterator[int]:
    """Run the block on :func:`step_threads` torch threads (the caller's
    ``torch.get_num_threads()`` as the ceiling) and give the caller's setting back after.

    For a whole step, not one kernel of it: the step's other torch ops on large batches run on
    the same intra-op threads, and one of them left at two threads beside a busy process costs
    what the kernel saved (16,384 envs: 3.9 s per simulated second with only the compiled call
    on one thread, 2.7 s with the whole step; 1.4 s quiet)."""
    import torch

    ceiling = torch.get_num_threads()
    threads = step_threads(ceiling)
    if threads == ceiling:
        yield threads
        return
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(ceiling)


WAIT_POLICY = "OMP_WAIT_POLICY"
BUSY_AT_START = 0.6  # cores others must be using for the command to start with passive waits


def choose_wait_policy(window_s: float = 0.05, share: CoreShare | None = None) -> str | None:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` when other processes are busy on this process's cores
    now (measured over ``window_s``, taken only when another task is runnable at the call),
    unless the variable is set already; returns what it set.

    OpenMP's idle threads spin between parallel regions by default (libgomp: ~300,000 spins).
    Quiet, that is the fast choice: passive waits made a 1,024-env step 50 % slower and a
    16,384-env one 15 % (futex wake-ups per region). Beside a busy process the spinning thread
    takes a core the busy process shares, and a trainer that pins its torch threads (its sums
    depend on the count, so it cannot drop one as a simulator step does) pays for it:
    ``volary rl train --recipe hover-fast`` trained in 21.1 s beside one busy loop with spinning
    waits and in 8.3 s with passive ones (5.9-7.2 s quiet), the same policy bit for bit. OpenMP
    reads the variable once, when torch loads it, so this runs before torch is imported: the
    ``volary`` command calls it first thing; a script can set the variable itself."""
    if WAIT_POLICY in os.environ or os.environ.get(ENV_SWITCH, "1") == "0":
        return None
    share = share if share is not None else CoreShare(interval_s=window_s)
    if share.cores < 2:
        return None
    first = share._sample()
    if first is None or first[3] <= 1:  # nothing runnable but this thread: quiet, no window
        return None
    time.sleep(window_s)
    second = share._sample()
    if second is None:
        return None
    load = share._load(first[:3], second[:3])
    if load is not None and load[1] >= BUSY_AT_START:
        os.environ[WAIT_POLICY] = "PASSIVE"
        return "PASSIVE"
    return None
