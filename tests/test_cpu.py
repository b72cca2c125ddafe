"""volary.cpu: a parallel step takes the cores other processes leave free (issue 62), and the
count changes who does the work, never the result."""

from __future__ import annotations

import pytest
import torch

from volary import cpu
from volary.sim import Simulator


class FakeMachine:
    """/proc/stat of a 2-CPU machine advanced by hand: ``run(wall, others, own)`` adds ``wall``
    seconds in which other processes kept ``others`` cores and this process ``own`` busy."""

    HZ = 100

    def __init__(self, running: int = 1) -> None:
        self.wall = 0.0
        self.own = 0.0
        self.busy = [0, 0]  # jiffies per CPU
        self.idle = [0, 0]
        self.running = running

    def run(self, wall: float, others: float, own: float) -> None:
        self.wall += wall
        self.own += own * wall
        busy = min(2.0, others + own) * wall * self.HZ
        for i in range(2):
            self.busy[i] += round(busy / 2)
            self.idle[i] += round((2 * wall * self.HZ - busy) / 2)

    def stat(self) -> str:
        cpu = "".join(f"cpu{i} {self.busy[i]} 0 0 {self.idle[i]} 0 0 0 0 0 0\n" for i in range(2))
        return f"cpu  0 0 0 0 0 0 0 0 0 0\n{cpu}procs_running {self.running}\n"

    def share(self) -> cpu.CoreShare:
        return cpu.CoreShare(
            stat=self.stat, clock=lambda: self.wall, own_cpu=lambda: self.own, cores=2, hz=self.HZ
        )


def test_a_quiet_machine_gets_every_thread_asked_for():
    m = FakeMachine()
    share = m.share()
    assert share.threads(2) == 2
    for _ in range(5):
        m.run(0.3, others=0.05, own=2.0)
        assert share.threads(2) == 2


def test_one_busy_process_leaves_one_thread_and_its_end_gives_both_back():
    m = FakeMachine(running=2)  # this thread and a busy loop
    share = m.share()
    assert share.threads(2) == 1  # before any window: the runnable tasks now
    m.run(0.3, others=1.0, own=1.0)
    assert share.threads(2) == 1
    m.run(0.3, others=0.0, own=1.0)  # the busy process ended
    assert share.threads(2) == 2


def test_a_starved_busy_process_still_counts_as_wanting_its_core():
    """With two spinning threads of ours the busy loop gets half a core; read as a half-idle
    neighbour it would keep this process at two threads for good."""
    m = FakeMachine()
    share = m.share()
    assert share.threads(2) == 2
    m.run(0.3, others=0.5, own=1.5)  # saturated: 2.0 cores busy
    assert share.threads(2) == 1


def test_the_ceiling_and_the_usable_cores_cap_the_count():
    m = FakeMachine()
    share = m.share()
    assert share.threads(1) == 1
    assert share.threads(8) == 2  # two usable cores


def test_switched_off_it_returns_the_ceiling(monkeypatch):
    monkeypatch.setenv(cpu.ENV_SWITCH, "0")
    m = FakeMachine(running=3)
    assert m.share().threads(2) == 2


def test_parse_stat_counts_only_the_cpus_this_process_may_use():
    text = "cpu  9 9 9 9 9 9 9 9\ncpu0 10 0 5 100 3 1 1 2 0 0\ncpu1 50 0 0 50 0 0 0 0\n"
    assert cpu.parse_stat(text, {0}) == (19, 122, 0)
    assert cpu.parse_stat(text, None) == (69, 222, 0)


def test_cgroup_v2_quota_is_the_smallest_on_the_path(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "cpu.max").write_text("max 100000\n")
    (tmp_path / "a" / "cpu.max").write_text("150000 100000\n")
    (tmp_path / "a" / "b" / "cpu.max").write_text("max 100000\n")
    assert cpu.cgroup_quota(tmp_path, "0::/a/b\n") == pytest.approx(1.5)
    assert cpu.cgroup_quota(tmp_path, "0::/\n") is None


def test_cgroup_v1_quota(tmp_path):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("50000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cpu.cgroup_quota(tmp_path, "4:cpu,cpuacct:/x\n") == pytest.approx(0.5)
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cpu.cgroup_quota(tmp_path, "4:cpu,cpuacct:/x\n") is None


def test_usable_cores_is_within_the_affinity_mask():
    assert 1 <= cpu.usable_cores() <= len(__import__("os").sched_getaffinity(0))


class Alternating:
    """A CoreShare stand-in that gives 2, 1, 2, 1, ... threads: a count changing mid-flight."""

    def __init__(self) -> None:
        self.k = 0

    def threads(self, ceiling: int) -> int:
        self.k += 1
        return min(ceiling, 1 + self.k % 2)


def _flight(n: int) -> torch.Tensor:
    sim = Simulator("crazyflie", n_envs=n, seed=3)
    sp = torch.tensor([0.5, 0.2, 1.5, 0.3])
    pos = [sim.step(sp).pos.clone() for _ in range(12)]
    return torch.stack(pos)


def _spy_threads(monkeypatch) -> list[int]:
    from volary.sim import fused

    seen: list[int] = []
    real = fused.FusedLoop._run

    def spy(self, *a, **k):
        seen.append(torch.get_num_threads())
        return real(self, *a, **k)

    monkeypatch.setattr(fused.FusedLoop, "_run", spy)
    return seen


def _against_one_thread(monkeypatch, n: int) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """``n`` envs flown on one thread, then with the count switching between 2 and 1 each step;
    both flights and the counts the numba loop saw."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        ref = _flight(n)
        torch.set_num_threads(2)
        monkeypatch.setattr(cpu, "_SHARED", Alternating())
        seen = _spy_threads(monkeypatch)
        got = _flight(n)
    finally:
        torch.set_num_threads(before)
    return ref, got, seen


def test_a_thread_count_changing_every_step_flies_bit_for_bit_as_one_thread(monkeypatch):
    """The numba parallel kernel (256-1023 envs) with the count switching between 2 and 1 each
    step, against the whole flight on one thread."""
    ref, got, seen = _against_one_thread(monkeypatch, 300)
    assert set(seen) == {1, 2}
    assert torch.equal(ref, got)


def test_a_busy_neighbour_takes_a_thread_from_the_step_and_the_callers_setting_survives(
    monkeypatch,
):
    """Inside a governed step torch runs on the measured count; after it, on the caller's."""
    seen = _spy_threads(monkeypatch)

    class Busy:
        def threads(self, ceiling: int) -> int:
            return 1

    monkeypatch.setattr(cpu, "_SHARED", Busy())
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        sim = Simulator("crazyflie", n_envs=300)
        sim.step(torch.tensor([0.0, 0.0, 1.0, 0.0]))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert seen == [1]


@pytest.mark.slow
def test_the_inductor_loop_with_a_changing_thread_count_flies_as_one_thread(monkeypatch):
    """The compiled loop (1,024 envs: inductor's OpenMP kernels, compiled with dynamic threads)
    with the count switching between 2 and 1 each step, against one thread throughout."""
    ref, got, _ = _against_one_thread(monkeypatch, 1024)
    assert torch.equal(ref, got)


def test_a_busy_machine_at_start_gets_passive_openmp_waits_and_a_quiet_one_keeps_spinning(
    monkeypatch,
):
    monkeypatch.delenv(cpu.WAIT_POLICY, raising=False)
    busy = FakeMachine(running=2)
    monkeypatch.setattr(cpu.time, "sleep", lambda s: busy.run(s, others=1.0, own=0.0))
    assert cpu.choose_wait_policy(share=busy.share()) == "PASSIVE"
    assert cpu.os.environ[cpu.WAIT_POLICY] == "PASSIVE"
    monkeypatch.delenv(cpu.WAIT_POLICY)
    quiet = FakeMachine(running=2)  # something runnable at the call, idle over the window
    monkeypatch.setattr(cpu.time, "sleep", lambda s: quiet.run(s, others=0.0, own=0.0))
    assert cpu.choose_wait_policy(share=quiet.share()) is None
    assert cpu.WAIT_POLICY not in cpu.os.environ


def test_a_wait_policy_the_user_set_is_kept(monkeypatch):
    monkeypatch.setenv(cpu.WAIT_POLICY, "ACTIVE")
    m = FakeMachine(running=3)
    assert cpu.choose_wait_policy(share=m.share()) is None
    assert cpu.os.environ[cpu.WAIT_POLICY] == "ACTIVE"
