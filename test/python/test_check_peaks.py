"""Each check group's memory high-water mark (checks/peaks.py): reset at the group's start, so a later group that
allocates less reports less — which check sets a run's peak is read off the result."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM and clear_refs are Linux's")

PYTHON_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "python")

# A fresh process: a test process's allocator may hold freed memory resident, which no later allocation raises.
_PROGRAM = """
import json, mmap
import torch
from kforge_worker.checks.peaks import GroupPeak

with GroupPeak(torch.device("cpu")) as big:
    block = mmap.mmap(-1, 64 << 20)
    block.write(b"x" * (64 << 20))  # resident
    block.close()
with GroupPeak(torch.device("cpu")) as small:
    block = mmap.mmap(-1, 1 << 20)
    block.write(b"x" * (1 << 20))
    block.close()
print(json.dumps([big.host, small.host, big.device, small.device]))
"""


def test_a_group_that_allocates_reports_it_and_the_next_group_starts_from_its_own_level():
    out = subprocess.run([sys.executable, "-c", _PROGRAM], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": PYTHON_DIR}, check=True).stdout
    big, small, big_device, small_device = json.loads(out.strip().splitlines()[-1])
    assert big - small >= 48 << 20, (big, small)
    assert big_device is None and small_device is None  # no GPU run


_NESTED = """
import json, mmap
import torch
from kforge_worker.checks.peaks import GroupPeak

def touch(mib):
    block = mmap.mmap(-1, mib << 20)
    block.write(b"x" * (mib << 20))
    block.close()

with GroupPeak(torch.device("cpu")) as stage:
    touch(64)  # before any group: the stage alone sees it, and an inner reset must not lose it
    with GroupPeak(torch.device("cpu")) as first:
        touch(2)
    with GroupPeak(torch.device("cpu")) as second:
        touch(32)
    touch(1)
print(json.dumps([stage.host, first.host, second.host]))
"""


def test_a_stage_spans_the_groups_inside_it_and_what_came_before_their_resets():
    """The verify stage's peak (stageMemory) is measured around the check groups, each of which resets the same mark."""
    out = subprocess.run([sys.executable, "-c", _NESTED], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": PYTHON_DIR}, check=True).stdout
    stage, first, second = json.loads(out.strip().splitlines()[-1])
    assert stage - first >= 48 << 20, (stage, first)  # the 64 MiB before the first group's reset
    assert second - first >= 24 << 20, (second, first)
    assert stage >= second
