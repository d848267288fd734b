"""The most memory the worker held while one check group ran, recorded on each check it produced, and while each
pipeline stage ran (`stageMemory`: the trials and the timing hold copies too) — issue 17: what sets a run's peak,
measured rather than guessed. Host: the resident set's high-water mark (VmHWM), reset at
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


# The peaks open now, outermost first: an inner one resets the high-water marks its outer ones also read, so each
# reading taken at an inner one's edges is carried up to every outer one before the reset.
_OPEN: list[GroupPeak] = []


def _device_reserved_peak() -> int | None:
    try:
        torch.cuda.synchronize()
        return int(torch.cuda.max_memory_reserved())
    except RuntimeError:  # a context the code under measure broke: no reading
        return None


class GroupPeak:
    """``with GroupPeak(device) as peak: ...`` then ``peak.host`` / ``peak.device`` (bytes, None when unknown).
    Nests: a stage's peak spans the check groups measured inside it."""

    def __init__(self, device: torch.device) -> None:
        # Never the first CUDA call of the process: a stage before the models exist (a worker started ahead, waiting
        # for its go) must not make a context on the GPU for a reading of nothing.
        self.cuda = device.type == "cuda" and torch.cuda.is_available() and torch.cuda.is_initialized()
        self.host: int | None = None
        self.device: int | None = None
        self.host_start: int | None = None  # the resident set at the start: host - host_start is the group's own
        self._host_reset = False

    def _carry_up(self) -> None:
        """The high-water marks so far, into every outer peak, before this one resets or after it ends."""
        if not _OPEN:
            return
        host = _status_bytes("VmHWM:")
        device = _device_reserved_peak() if any(p.cuda for p in _OPEN) else None
        for outer in _OPEN:
            if host is not None and outer._host_reset:
                outer.host = max(outer.host or 0, host)
            if device is not None and outer.cuda:
                outer.device = max(outer.device or 0, device)

    def __enter__(self) -> GroupPeak:
        self._carry_up()
        self._host_reset = _reset_host()
        self.host_start = _status_bytes("VmRSS:") if self._host_reset else None
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        _OPEN.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        if _OPEN and _OPEN[-1] is self:
            _OPEN.pop()
        if self._host_reset:
            hwm = _status_bytes("VmHWM:")
            self.host = max(self.host or 0, hwm) if hwm is not None else self.host
        if self.cuda:
            reserved = _device_reserved_peak()
            self.device = max(self.device or 0, reserved) if reserved is not None else self.device
        self._carry_up()
