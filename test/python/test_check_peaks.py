"""Each check group's memory high-water mark (checks/peaks.py): reset at the group's start, so a later group that
allocates less reports less — which check sets a run's peak is read off the result."""

import sys

import pytest
import torch

from kforge_worker.checks.peaks import GroupPeak

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM and clear_refs are Linux's")


def test_a_group_that_allocates_reports_it_and_the_next_group_starts_from_zero():
    with GroupPeak(torch.device("cpu")) as big:
        x = torch.ones(64 << 20, dtype=torch.uint8)  # 64 MiB, written: resident
        del x
    with GroupPeak(torch.device("cpu")) as small:
        y = torch.ones(1 << 20, dtype=torch.uint8)
        del y
    assert big.host is not None and small.host is not None
    assert big.host - small.host >= 48 << 20, (big.host, small.host)
    assert big.device is None and small.device is None  # no GPU run
