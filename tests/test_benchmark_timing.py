"""benchmarks/_timing.py: the speed scripts' one timing helper (median, IQR, spread warning,
untimed warm-up), driven by a fake clock so no test depends on this machine's speed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _timing import (  # noqa: E402
    SPREAD_LIMIT,
    machine,
    measure,
    spread_warnings,
    summarize,
    table,
    timed_call,
)


class FakeClock:
    """A clock that each call of the timed function advances by the next of ``durations``."""

    def __init__(self, durations: list[float]):
        self.now = 0.0
        self.durations = list(durations)
        self.calls = 0

    def __call__(self) -> float:
        return self.now

    def work(self) -> None:
        self.now += self.durations[self.calls]
        self.calls += 1


def test_median_and_iqr_on_known_samples():
    t = summarize([5.0, 1.0, 4.0, 2.0, 3.0], quiet=True)
    # statistics.quantiles(n=4), exclusive method: 1.5, 3, 4.5
    assert t.median == 3.0 and t.quartiles == (1.5, 3.0, 4.5)
    assert t.iqr == 3.0 and t.min == 1.0 and t.n == 5
    assert t.spread == 1.0
    assert t.rate(6.0) == 2.0


def test_a_single_sample_has_no_spread():
    t = summarize([0.25], quiet=True)
    assert t.median == 0.25 and t.iqr == 0.0 and t.warning is None


def test_no_samples_is_an_error():
    with pytest.raises(ValueError, match="no samples"):
        summarize([])


def test_warmup_calls_are_not_timed():
    # two warm-up calls of 100 s each, then five of 1 s: the samples hold only the 1 s calls
    clock = FakeClock([100.0, 100.0] + [1.0] * 5)
    t = measure(clock.work, warmup=2, repeats=5, clock=clock)
    assert clock.calls == 7
    assert t.samples == (1.0,) * 5
    assert t.warmup_s == 200.0


def test_number_divides_each_sample_into_per_call_seconds():
    clock = FakeClock([0.5, 1.5] * 3)
    t = measure(clock.work, warmup=0, repeats=3, number=2, clock=clock)
    assert t.samples == (1.0, 1.0, 1.0)


def test_min_time_takes_samples_beyond_repeats():
    clock = FakeClock([1.0] * 20)
    t = measure(clock.work, warmup=0, repeats=3, min_time=10.0, clock=clock)
    assert t.n == 10 and clock.calls == 10


def test_min_sample_time_loops_calls_within_a_sample():
    # calls of 1 s; each sample runs until it lasts 2.5 s: 3 calls, 1 s per call
    clock = FakeClock([1.0] * 9)
    t = measure(clock.work, warmup=0, repeats=3, min_sample_time=2.5, clock=clock)
    assert clock.calls == 9 and t.samples == (1.0, 1.0, 1.0)


def test_max_repeats_caps_min_time():
    clock = FakeClock([1.0] * 20)
    t = measure(clock.work, warmup=0, repeats=3, min_time=10.0, max_repeats=6, clock=clock)
    assert t.n == 6


def test_max_time_stops_before_a_sample_that_would_not_fit():
    # 1 s samples, 3.5 s budget: a fourth sample would end at 4 s, so three are taken
    clock = FakeClock([1.0] * 10)
    t = measure(clock.work, warmup=0, repeats=1, max_time=3.5, max_repeats=7, clock=clock)
    assert t.n == 3


def test_cpu_clock_keeps_cpu_seconds_per_call():
    clock = FakeClock([2.0] * 6)
    cpu = FakeClock([])
    cpu.now = 0.0

    def work() -> None:
        clock.work()
        cpu.now += 0.5  # half a CPU second each call, two wall seconds

    t = measure(work, warmup=1, repeats=5, clock=clock, cpu_clock=cpu)
    assert t.samples == (2.0,) * 5 and t.cpu_samples == (0.5,) * 5
    assert t.to_json()["cpu_median_s"] == 0.5


def test_the_spread_warning_fires_on_a_noisy_clock(capsys):
    clock = FakeClock([1.0, 3.0, 1.0, 3.0, 1.0, 3.0])
    t = measure(clock.work, warmup=1, repeats=5, clock=clock, label="noisy case")
    assert t.spread > SPREAD_LIMIT
    assert t.warning is not None and "noisy case" in t.warning
    assert "noisy case: timings vary" in capsys.readouterr().err
    assert t.to_json()["spread_warning"] == t.warning


def test_the_spread_warning_stays_quiet_on_a_steady_clock(capsys):
    clock = FakeClock([1.0, 1.0, 1.01, 0.99, 1.0, 1.02])
    t = measure(clock.work, warmup=1, repeats=5, clock=clock, label="steady case")
    assert t.warning is None and t.to_json()["spread_warning"] is None
    assert capsys.readouterr().err == ""


def test_to_json_scales_into_the_unit_asked_for():
    d = summarize([0.001, 0.002, 0.003], quiet=True).to_json(unit="ms", scale=1e3)
    assert d["median_ms"] == pytest.approx(2.0) and d["min_ms"] == pytest.approx(1.0)
    assert d["n"] == 3 and set(d) >= {"iqr_ms", "spread", "spread_warning"}


def test_machine_names_the_cpu_cores_versions_and_load():
    m = machine()
    assert m["cores"] and m["cpu"] and m["python"] and m["numpy"]
    assert {"torch", "torch_threads", "load_avg_start", "gpu"} <= set(m)


def test_table_prints_a_markdown_table(capsys):
    text = table([{"impl": "a", "rate": 1.23456, "note": None}])
    assert text.splitlines() == ["| impl | rate | note |", "|---|---|---|", "| a | 1.235 | - |"]
    assert capsys.readouterr().out.strip() == text


def test_spread_warnings_are_found_in_child_rows():
    noisy = summarize([1.0, 3.0, 1.0, 3.0, 3.0], label="child", quiet=True).to_json()
    steady = summarize([1.0, 1.0, 1.0], quiet=True).to_json()
    rows = [{"impl": "a", "call_s": noisy}, {"impl": "b", "call_s": steady}, {"error": "x"}]
    assert spread_warnings({"results": rows}) == [noisy["spread_warning"]]


def test_timed_call_returns_the_seconds_and_the_result():
    clock = FakeClock([3.0])

    def work() -> str:
        clock.work()
        return "done"

    assert timed_call(work, clock=clock) == (3.0, "done")
