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
