"""Red team round 17 (2026-12-01, CPU): what the process does beneath Python, measured from outside it.

- Outputs whose values appear only when read (memory mapped inaccessible, a fault handler computes a page when it is
  first read): the CPU clock now reads one byte of every output page before it stops (timing.page_reader).
- The worker's clock slowed from native code (clock_gettime's GOT slot pointed elsewhere, put back after one
  reading): the judge holds each timed call to marks the kernel stamps as they are sent (clock_marks.py).
- Out-of-memory made on purpose (the process's own limits or address space shrunk) to turn incorrect into
  problem_error: memory_capacity.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest


def test_the_cpu_clock_reads_a_byte_of_every_page_of_what_the_call_returned():
    import torch

    from kforge_worker.timing import PAGE, CpuClock, page_reader

    read = page_reader(torch)
    x = torch.randn(64, 512)  # 128 KiB: 32 or 33 pages, as its start is aligned
    assert read(x) >= 32
    assert read((x, [x.t(), {"a": x[::2, 5:]}])) >= 3 * 32  # nested outputs, views, transposes
    assert 2 <= read(torch.max(x, 1)) <= 4  # a structseq: values and indices, one or two pages each
    assert read(torch.empty(0)) == 0 and read(torch.zeros(2, device="meta")) == 0 and read(None) == 0

    class Sub(torch.Tensor):
        pass

    assert read(x.as_subclass(Sub)) == 0  # no method of a subclass runs inside the clock (output_type's failure)
    big = torch.empty(8 << 20, dtype=torch.uint8)
    assert read(big) >= (8 << 20) // PAGE

    seen = []
    clock = CpuClock()
    clock._read_pages = lambda value: seen.append(value) or 0
    clock.time_ms(lambda: x)
    assert seen == [x]  # the clock hands the call's return value to the reader before it stops


def test_kernel_stamped_marks_give_the_window_of_a_call_whatever_the_senders_clock_says():
    from kforge_worker import clock_marks

    worker, child = clock_marks.pair()
    assert worker is not None
    reader = clock_marks.Reader(child.detach())
    mark = clock_marks.sender(worker)
    mark(clock_marks.START)
    time.sleep(0.02)
    mark(clock_marks.END)
    window, why = clock_marks.window_ms(reader.drain())
    assert why is None and window is not None and 19.0 < window < 200.0
    # a mark too many (the candidate sending its own) or one missing is a finding of its own
    mark(clock_marks.START)
    mark(clock_marks.END)
    mark(clock_marks.END)
    assert clock_marks.window_ms(reader.drain())[1] is not None
    mark(clock_marks.START)
    assert clock_marks.window_ms(reader.drain())[1] is not None
    worker.close()
    reader.sock.close()


def test_the_rule_flags_a_clock_that_runs_slow_only_while_the_candidate_runs():
    from kforge_worker.clock_marks import clock_finding

    honest_times = [1.0 + 0.01 * (i % 5) for i in range(40)]
    honest_windows = [t + 0.008 + (0.5 if i % 9 == 0 else 0.0) for i, t in enumerate(honest_times)]  # preempted now and then
    assert clock_finding(honest_windows, honest_times) is None
    tiny = [0.01] * 40
    assert clock_finding([t + 0.02 for t in tiny], tiny) is None  # a 10 us call: the marks' own cost is inside the slack
    slowed = [t * 0.2 for t in honest_times]  # 80% of every call taken off the worker's clock
    finding = clock_finding(honest_windows, slowed)
    assert finding is not None and "runs slow" in finding
    assert clock_finding(honest_windows[:3], slowed[:3]) is None  # too few pairs to say


def _child(code: str) -> str:
    from conftest import PYTHON_DIR

    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60,
                         env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and rlimits")
def test_a_lowered_address_space_limit_is_a_shrunk_capacity():
    out = _child("""
        import resource
        from kforge_worker.memory_capacity import snapshot, shrunk
        before = snapshot()
        print(repr(shrunk(before)))
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, hard))
        print(shrunk(before))
    """)
    first, second = out.splitlines()
    assert first == "None"
    assert "RLIMIT_AS" in second and "lowered" in second


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_address_space_reserved_after_the_snapshot_is_a_shrunk_capacity():
    out = _child("""
        import mmap
        from kforge_worker.memory_capacity import snapshot, shrunk
        before = snapshot()
        held = [mmap.mmap(-1, 1 << 45, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=0)]
        print(shrunk(before))
    """)
    assert "reserved" in out and "TiB" in out


def test_an_out_of_memory_without_a_shrunk_capacity_stays_the_problems():
    from kforge_worker.memory_capacity import finding, snapshot

    class Ctx:
        candidate = object()
        memory_before = snapshot()

    assert finding(Ctx(), MemoryError()) is None
    Ctx.candidate = None
    assert finding(Ctx(), MemoryError()) is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prlimit")
def test_another_processs_memory_limit_lowered_from_outside_is_read_from_proc():
    import resource

    from kforge_worker.memory_capacity import limits_lowered, limits_of

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        before = limits_of(child.pid)
        assert before is not None and "RLIMIT_AS" in before
        assert limits_lowered(before, limits_of(child.pid), "the child") is None
        resource.prlimit(child.pid, resource.RLIMIT_AS, (1 << 34, resource.getrlimit(resource.RLIMIT_AS)[1]))
        lowered = limits_lowered(before, limits_of(child.pid), "the child")
        assert lowered is not None and "RLIMIT_AS of the child" in lowered
    finally:
        child.kill()
        child.wait()
