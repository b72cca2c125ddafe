"""The one timing helper of the speed scripts in ``benchmarks/``.

``measure(fn, warmup=..., repeats=...)`` calls ``fn`` untimed ``warmup`` times, then times
``repeats`` samples (each ``number`` calls; more while the timed total is under ``min_time``)
and returns a ``Timing``: the per-call seconds of every sample, their median, quartiles, IQR,
minimum and count, and a spread warning when IQR / median is over ``spread_limit`` (printed
when it is made and kept in ``Timing.to_json()``). ``summarize(samples)`` makes the same
``Timing`` from samples a script took itself (interleaved cases, latencies, whole commands;
``timed_call(fn)`` times one call of such a run).
``machine()`` is what a result was measured on: CPU model, logical cores, torch threads, the
torch / numpy / python versions, the load average at the start and the GPU if any.
``table(rows)`` prints rows of dicts as a Markdown table. ``print_spread_warnings(rows)`` prints
the warnings a parent's child processes stored in their rows.

Quartiles are ``statistics.quantiles(samples, n=4)`` (the "exclusive" method the scripts used
before this module), so medians and IQRs in the committed results keep their meaning.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "SPREAD_LIMIT",
    "Timing",
    "cpu_model",
    "machine",
    "measure",
    "print_spread_warnings",
    "spread_warnings",
    "summarize",
    "table",
    "timed_call",
]

T = TypeVar("T")

#: IQR / median above which a timing is flagged as noisy (the spread warning).
SPREAD_LIMIT = 0.25


@dataclass(frozen=True)
class Timing:
    """Samples of one timed case, in seconds per call unless the caller says otherwise."""

    samples: tuple[float, ...]
    label: str = ""
    spread_limit: float = SPREAD_LIMIT
    warmup_s: float = 0.0  # wall of the untimed warm-up calls (0 when none ran)
    cpu_samples: tuple[float, ...] = ()  # process CPU seconds per call, when asked for

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def quartiles(self) -> tuple[float, float, float]:
        """First quartile, median, third quartile (all equal for a single sample)."""
        if self.n < 2:
            return (self.samples[0],) * 3
        q1, q2, q3 = statistics.quantiles(self.samples, n=4)
        return q1, q2, q3

    @property
    def iqr(self) -> float:
        q1, _, q3 = self.quartiles
        return q3 - q1

    @property
    def spread(self) -> float:
        """IQR / median (0 for a zero median)."""
        med = self.median
        return abs(self.iqr / med) if med else 0.0

    @property
    def warning(self) -> str | None:
        """One line when the spread is over the limit, else None."""
        if self.spread <= self.spread_limit:
            return None
        name = f"{self.label}: " if self.label else ""
        return (f"{name}timings vary: IQR is {self.spread:.0%} of the median over {self.n} "
                f"samples (limit {self.spread_limit:.0%})")  # fmt: skip

    def rate(self, work: float) -> float:
        """``work`` units per second at the median (e.g. env-steps per call / median s)."""
        return work / self.median

    def to_json(self, unit: str = "s", scale: float = 1.0) -> dict[str, Any]:
        """Median, IQR, min and n in ``unit`` (samples times ``scale``), spread and warning."""
        out = {
            f"median_{unit}": self.median * scale,
            f"iqr_{unit}": self.iqr * scale,
            f"min_{unit}": self.min * scale,
            "n": self.n,
            "spread": self.spread,
            "spread_warning": self.warning,
        }
        if self.cpu_samples:
            out[f"cpu_median_{unit}"] = statistics.median(self.cpu_samples) * scale
        return out


def summarize(
    samples: Iterable[float],
    *,
    label: str = "",
    spread_limit: float = SPREAD_LIMIT,
    warmup_s: float = 0.0,
    cpu_samples: Iterable[float] = (),
    quiet: bool = False,
) -> Timing:
    """A ``Timing`` of samples taken elsewhere; prints its spread warning unless ``quiet``."""
    t = Timing(tuple(float(s) for s in samples), label, spread_limit, warmup_s,
               tuple(float(s) for s in cpu_samples))  # fmt: skip
    if not t.samples:
        raise ValueError(f"summarize: no samples for {label or 'this timing'}")
    if t.warning and not quiet:
        print(f"warning: {t.warning}", file=sys.stderr, flush=True)
    return t


def measure(
    fn: Callable[[], Any],
    *,
    warmup: int = 1,
    repeats: int = 5,
    number: int = 1,
    min_time: float = 0.0,
    min_sample_time: float = 0.0,
    max_time: float | None = None,
    max_repeats: int | None = None,
    label: str = "",
    spread_limit: float = SPREAD_LIMIT,
    clock: Callable[[], float] = time.perf_counter,
    cpu_clock: Callable[[], float] | None = None,
    quiet: bool = False,
) -> Timing:
    """Time ``fn()``: ``warmup`` untimed calls, then ``repeats`` samples of ``number`` calls each
    (more samples while their total is under ``min_time`` seconds, at most ``max_repeats``; a
    sample goes on ``number`` calls at a time until it lasts ``min_sample_time``); with
    ``max_time`` instead, samples beyond ``repeats`` go on while one more of the mean length
    fits in ``max_time``. A sample is the seconds per call. ``clock`` is injectable for tests;
    with ``cpu_clock`` (e.g. ``time.process_time``) each sample's CPU seconds per call are kept
    too."""
    if repeats < 1 or number < 1 or warmup < 0 or (max_repeats or repeats) < repeats:
        raise ValueError(f"measure: need repeats, number >= 1, warmup >= 0 and max_repeats >= "
                         f"repeats, got repeats={repeats}, number={number}, warmup={warmup}, "
                         f"max_repeats={max_repeats}")  # fmt: skip
    t0 = clock()
    for _ in range(warmup):
        fn()
    warmup_s = clock() - t0 if warmup else 0.0
    samples: list[float] = []
    cpu: list[float] = []
    total = 0.0
    cap = max_repeats or float("inf")

    def more() -> bool:
        k = len(samples)
        if k < repeats or k >= cap:
            return k < repeats
        return total * (1 + 1 / k) <= max_time if max_time is not None else total < min_time

    while more():
        c = cpu_clock() if cpu_clock else 0.0
        t, calls = clock(), 0
        while True:
            for _ in range(number):
                fn()
            calls += number
            dt = clock() - t
            if dt >= min_sample_time:
                break
        if cpu_clock:
            cpu.append((cpu_clock() - c) / calls)
        total += dt
        samples.append(dt / calls)
    return summarize(samples, label=label, spread_limit=spread_limit, warmup_s=warmup_s,
                     cpu_samples=cpu, quiet=quiet)  # fmt: skip


def spread_warnings(result: Any) -> list[str]:
    """Every spread warning stored in a result (dicts and lists, as the JSON holds them): what a
    parent process prints for the cases its child processes timed."""
    if isinstance(result, dict):
        own = [result["spread_warning"]] if result.get("spread_warning") else []
        return own + [w for v in result.values() for w in spread_warnings(v)]
    if isinstance(result, list):
        return [w for v in result for w in spread_warnings(v)]
    return []


def print_spread_warnings(result: Any) -> None:
    """Print ``spread_warnings(result)`` to stderr, one a line."""
    for w in spread_warnings(result):
        print(f"warning: {w}", file=sys.stderr, flush=True)


def cpu_model() -> str:
    """The CPU's model name (``volary.bench.threads.cpu_model``; imported here, on use, so that
    timing a child process of another checkout's code does not need it)."""
    try:
        from volary.bench.threads import cpu_model as model
    except ImportError:  # an old checkout's volary (benchmarks/world_speed.py runs those)
        return platform.processor() or "unknown"
    return model()


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except ImportError:
        return None


def timed_call(
    fn: Callable[[], T], clock: Callable[[], float] = time.perf_counter
) -> tuple[float, T]:
    """Seconds of one call of ``fn`` and what it returned: a sample of an interleaved run (cases
    in turn, each call a sample of its case's ``summarize``)."""
    t = clock()
    out = fn()
    return clock() - t, out


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def machine() -> dict[str, Any]:
    """What the run is measured on: CPU model, logical cores, torch threads, torch / numpy /
    python versions, the 1-minute load average now, and the GPU (None where torch sees none)."""
    torch = _torch()
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads() if torch is not None else None,
        "python": platform.python_version(),
        "torch": _version("torch") if torch is not None else None,
        "numpy": _version("numpy"),
        "load_avg_start": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "gpu": torch.cuda.get_device_name(0) if torch and torch.cuda.is_available() else None,
    }


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
    """Rows of dicts as a Markdown table (columns: the first row's keys unless given); floats
    get 4 significant digits. Printed, and returned for the caller to save."""
    cols = list(columns) if columns is not None else list(rows[0]) if rows else []

    def cell(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float) else "-" if v is None else str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in cols) + " |" for r in rows]
    text = "\n".join(lines)
    print(text)
    return text
