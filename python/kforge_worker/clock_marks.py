"""The candidate's timed calls held to a clock outside its process: marks stamped by the kernel.

The worker times the candidate with ``time.perf_counter`` bound before the candidate is imported (timing.py), and the
judge recomputes the speedup from the times the worker hands over. But the bound Python function is only the top of
the clock: underneath it, libpython calls ``clock_gettime`` through its PLT, and native code of the candidate's (a
load_inline extension) can point that GOT slot — or rewrite libc's code, or the vDSO's — at a function that reads
the real clock and takes a share of each forward's duration off. ``adv_clock_got_dilate`` (every monotonic reading
after a forward, 80% of its duration off) was `correct` at 4.6x with a plain F.linear; ``adv_clock_oneshot`` takes
the share off the first reading after the forward only and puts the slots back in that same reading, so between
calls nothing in the process is changed and no snapshot, however often taken, could see it.

So the worker sends one datagram right before each timed candidate call and one right after it, on a socket pair
made before the candidate exists; the clean reference process (the judge) receives them with SO_TIMESTAMPNS — the
kernel stamps a unix datagram when it is sent, whatever the sender's process believes the time is. For every timed
pair the judge then has the wall window the call ran in, measured by the kernel, beside the time the worker hands
over. An honest call's window exceeds its time by the few microseconds between the mark and the clock's reads (a
preempted one by more, now and then: the rule is on medians); a clock that runs slow while the candidate runs shows
as windows much longer than the times, whatever mechanism slows it. A mark missing or one too many (a candidate that
closed the worker's end, or sends marks of its own) is a failure of its own.

Where it stops: marks, not the call itself — a candidate's work before its own mark (none: the mark is the worker's,
sent after the inputs are staged) or code that runs between the clock's stop and the closing mark (a few bytecodes
of the worker's) would be outside both. CPU only: on a GPU the call's time is CUDA events, not its host window.
"""

from __future__ import annotations

import contextlib
import socket
import statistics
import struct
from typing import Any

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux's value; Python's socket module lacks the name
START, END = b"s", b"e"
# A window may exceed the handed-over time by this much (the marks' send calls, the clock's reads, a preemption)
SLACK_MS = 0.05
# ... and by this share of the time, in the median over the pairs
SHARE = 0.10
MIN_PAIRS = 5


def pair() -> tuple[socket.socket, socket.socket] | tuple[None, None]:
    """(the worker's end, the reference process's end): a unix datagram socket pair, or (None, None)."""
    try:
        worker, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    except OSError:
        return None, None
    worker.setblocking(False)
    return worker, child


def sender(sock: socket.socket | None) -> Any:
    """The worker's mark function (bound now: the socket's C method): send(b"s") / send(b"e"); a failed send is
    simply missing on the other side (the judge says so)."""
    if sock is None:
        return None
    send = sock.send

    def mark(what: bytes) -> None:
        with contextlib.suppress(OSError):
            send(what)

    return mark


class Reader:
    """The judge's end: reads the marks queued since the last read, each with the kernel's send time (seconds)."""

    def __init__(self, fd: int) -> None:
        self.sock = socket.socket(fileno=fd)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock.setblocking(False)
        with contextlib.suppress(OSError):
            self.sock.set_inheritable(False)

    def drain(self) -> list[tuple[bytes, float | None]]:
        out: list[tuple[bytes, float | None]] = []
        while len(out) < 1000:
            try:
                data, ancillary, _flags, _addr = self.sock.recvmsg(16, 64)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
            stamp = None
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= 16:
                    sec, nsec = struct.unpack("qq", payload[:16])
                    stamp = sec + nsec * 1e-9
            out.append((data, stamp))
        return out


def window_ms(marks: list[tuple[bytes, float | None]]) -> tuple[float | None, str | None]:
    """(the call's window in ms, None) from one pair's marks, or (None, why they do not make one window)."""
    kinds = [m for m, _ in marks]
    if kinds != [START, END]:
        shown = b"".join(kinds)[:20].decode("latin-1")
        return None, f"the marks around the candidate's timed call were {shown!r}, not one start and one end"
    (_, start), (_, end) = marks
    if start is None or end is None:
        return None, None  # no stamps (not Linux): undecided
    return (end - start) * 1e3, None


def clock_finding(windows: list[float], times: list[float]) -> str | None:
    """The rule: over the timed pairs, the median of (kernel window - handed-over time) stays within SLACK_MS +
    SHARE x the median time. None when it does (or too few pairs to say)."""
    if len(windows) < MIN_PAIRS or len(windows) != len(times):
        return None
    excess = statistics.median(w - t for w, t in zip(windows, times))
    typical = statistics.median(times)
    if excess <= SLACK_MS + SHARE * typical:
        return None
    return (f"the candidate's timed calls took {statistics.median(windows):.3f} ms (median) by the kernel's stamps on "
            f"marks sent right before and after each, but the worker's clock said {typical:.3f} ms: its clock runs "
            f"slow while the candidate runs (median excess {excess:.3f} ms over {len(windows)} pairs)")
