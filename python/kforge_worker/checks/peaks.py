"""The most memory the worker held while one check group ran, recorded on each check it produced (issue 17: which
check sets a run's peak, measured rather than guessed). Host: the resident set's high-water mark (VmHWM), reset at
the group's start by writing 5 to /proc/self/clear_refs (Linux); device: the CUDA caching allocator's reserved peak,
what the GPU sees. Evidence for the budget, never a verdict."""

from __future__ import annotations

from typing import Any

import torch


def _reset_host() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _status_bytes(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


class GroupPeak:
    """``with GroupPeak(device) as peak: ...`` then ``peak.host`` / ``peak.device`` (bytes, None when unknown)."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda" and torch.cuda.is_available()
        self.host: int | None = None
        self.device: int | None = None
        self.host_start: int | None = None  # the resident set at the start: host - host_start is the group's own
        self._host_reset = False

    def __enter__(self) -> GroupPeak:
        self._host_reset = _reset_host()
        self.host_start = _status_bytes("VmRSS:") if self._host_reset else None
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._host_reset:
            self.host = _status_bytes("VmHWM:")
        if self.cuda:
            try:
                torch.cuda.synchronize()
                self.device = int(torch.cuda.max_memory_reserved())
            except RuntimeError:  # a context the group broke: no reading, the check says why
                self.device = None
