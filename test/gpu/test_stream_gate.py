"""stream_gate.py on the GPU: a held stream runs nothing until the host releases it; a forward that synchronises
with the host while its stream is held (a copy to pageable memory) is let go by the watchdog, never deadlocked."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"
sys.path.insert(0, str(PYTHON_DIR))

from kforge_worker.checks.stream_gate import StreamGate  # noqa: E402


class _SideReader:
    """Reads a device value on a stream of its own into pinned memory allocated beforehand: neither the read nor an
    allocation (a pinned allocation may wait for the whole device) waits for the held stream."""

    def __init__(self, like: torch.Tensor) -> None:
        self.stream = torch.cuda.Stream()
        self.out = torch.empty(like.shape, dtype=like.dtype, pin_memory=True)

    def __call__(self, x: torch.Tensor) -> float:
        with torch.cuda.stream(self.stream):
            self.out.copy_(x, non_blocking=True)
        self.stream.synchronize()
        return float(self.out[0])


def test_the_held_stream_runs_nothing_until_released() -> None:
    # A stream of its own: while the legacy default stream is held, a copy on any other stream waits for it too, so
    # its hold is observed by the next test (a forward's synchronising copy waits for the watchdog) instead.
    device = torch.device("cuda")
    gate = StreamGate(device, limit_s=30.0)
    stream = torch.cuda.Stream()
    marker = torch.zeros(1, device=device)
    read_elsewhere = _SideReader(marker)
    torch.cuda.synchronize()
    assert gate.hold(stream), "the driver refused the stream wait on pinned host memory"
    with torch.cuda.stream(stream):
        marker.add_(1)
    time.sleep(0.3)
    assert read_elsewhere(marker) == 0.0, "work behind the hold ran before the release"
    released = time.perf_counter()
    gate.release()
    stream.synchronize()
    assert time.perf_counter() - released < 5.0, "the host's release did not let the stream go (the watchdog did)"
    assert read_elsewhere(marker) == 1.0


def test_a_forward_that_synchronises_while_held_is_let_go_by_the_watchdog() -> None:
    script = textwrap.dedent(f"""
        import sys, time, torch
        sys.path.insert(0, {str(PYTHON_DIR)!r})
        from kforge_worker.checks.stream_gate import StreamGate
        device = torch.device("cuda")
        x = torch.randn(64, 64, device=device)
        gate = StreamGate(device, limit_s=2.0)
        assert gate.hold(torch.cuda.current_stream())
        began = time.perf_counter()
        y = (x * 2).cpu()  # pageable: the copy waits inside the driver for the held stream
        waited = time.perf_counter() - began
        gate.release()
        assert torch.equal(y, (x * 2).cpu())
        print(f"waited {{waited:.2f}}")
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    waited = float(run.stdout.split()[-1])
    assert 1.5 < waited < 20.0, f"the synchronising forward waited {waited} s (the watchdog's limit is 2 s)"
