"""What the CUDA profiler's chrome trace says about one forward: which kernels ran, on which streams, for
how long, and whether work on other streams was joined back into the caller's stream.

Pure functions over the trace dict (`torch.profiler.profile(...).export_chrome_trace`), so they are tested
on the CPU with hand-made traces. The profiled region is bracketed by two marker kernels on the caller's
current stream: a start marker, synchronised before the forward is called, and an end marker enqueued right
after the forward returns (`execution_checks.check_cuda_profile`).

The join rule is structural, not a ban on streams: a side stream is honest when the caller's stream was
made to wait for it (`wait_stream`, an event, a device sync) — then no side-stream work can still be
running when the end marker starts, because the marker is queued behind the wait. Work that is still
running (or has not started) then escaped the caller's stream: its events time only the launches, and the
outputs may not be finished when the caller reads them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# GPU activity categories of the chrome trace that occupy a stream.
_STREAM_WORK = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
# Timestamps are microseconds on the GPU's own clock. A waited-on kernel ends several microseconds before
# the waiting one starts; the slack only absorbs the trace's rounding.
JOIN_SLACK_US = 0.5
# Kernels of PyTorch and the vendor libraries whatever a candidate names its own: an ATen functor kernel
# such as `at::native::vectorized_elementwise_kernel` is never the candidate's, even if it also defines a
# kernel called `vectorized_elementwise_kernel`.
_LIBRARY_MARKS = re.compile(r"at::native::|at::cuda::|\bcublas|\bcudnn|\bcutlass|\bnvjet|\bxmma|_xmma|"
                            r"^(?:void )?(?:ampere|hopper|turing|volta|sm\d+)_\w*(?:gemm|conv)", re.I)


@dataclass(frozen=True)
class StreamWork:
    name: str
    kind: str  # kernel, memcpy, memset
    stream: Any
    start: float  # µs
    end: float

    @property
    def duration(self) -> float:
        return max(0.0, self.end - self.start)


@dataclass
class ProfiledForward:
    """The forward's GPU work between the two markers; `caller_stream` is the markers' stream."""

    caller_stream: Any
    work: list[StreamWork]
    end_marker: StreamWork | None

    @property
    def kernels(self) -> list[StreamWork]:
        return [w for w in self.work if w.kind == "kernel"]

    def side_work(self) -> list[StreamWork]:
        return [w for w in self.work if w.stream != self.caller_stream]


def stream_work(trace: dict[str, Any]) -> list[StreamWork]:
    """Kernels, copies and memsets of the trace in start order."""
    found = []
    for ev in trace.get("traceEvents", []):
        kind = _STREAM_WORK.get(str(ev.get("cat", "")).lower())
        if kind is None or "ts" not in ev:
            continue
        start = float(ev["ts"])
        found.append(StreamWork(str(ev.get("name", "?")), kind, (ev.get("args") or {}).get("stream"), start,
                                start + float(ev.get("dur", 0.0))))
    return sorted(found, key=lambda w: w.start)


def split_markers(work: list[StreamWork], hold: bool = False, staged: bool = False) -> ProfiledForward | None:
    """The first kernel is the start marker (it finished before the forward was called); the last run of the same
    kernel on its stream is the end marker (queued after the forward returned, and a stream runs in order; what
    follows it there is the harness's). None when the trace has no kernel at all. ``hold``: the first kernel after
    the start marker on its stream is the harness's hold (queued before the forward was called), not the forward's
    work (a hold by a stream wait is no kernel: hold=False). ``staged``: after the hold the harness wrote the inputs
    on that stream and queued a ready marker (the marker's kernel again); that stream's work up to it is the
    harness's too. Work on other streams is the forward's whenever it ran."""
    kernels = [w for w in work if w.kind == "kernel"]
    if not kernels:
        return None
    start = kernels[0]
    on_caller = [k for k in kernels if k.stream == start.stream and k is not start]
    held = on_caller[0] if hold and on_caller else None
    # The markers are the start marker's kernel again; the end marker is the last of them (the harness's own work
    # may follow it on the stream: run()'s checksums of held outputs come after the call), the ready marker the
    # first after the hold.
    named = [k for k in on_caller if k.name == start.name and k is not held]
    end = named[-1] if len(named) >= (2 if staged else 1) else None
    harness_until = named[0].start if staged and end is not None else None
    forward = [w for w in work if w is not start and w is not end and w is not held and w.start >= start.start
               and not (w.stream == start.stream and harness_until is not None and w.start <= harness_until)
               and not (w.stream == start.stream and end is not None and w.start > end.start)]
    return ProfiledForward(start.stream, forward, end)


@dataclass
class JoinVerdict:
    """`joined` is None when the trace cannot decide (no end marker)."""

    joined: bool | None
    streams: dict[Any, list[StreamWork]] = field(default_factory=dict)
    late: list[StreamWork] = field(default_factory=list)  # side work still running when the end marker started
    overrun_us: float = 0.0

    def describe_streams(self) -> str:
        return "; ".join(f"stream {s}: {len(ws)} op(s) ({', '.join(sorted({short_name(w.name) for w in ws})[:3])})"
                         for s, ws in self.streams.items())


def side_stream_join(forward: ProfiledForward, slack_us: float = JOIN_SLACK_US) -> JoinVerdict:
    """Every piece of work on a stream other than the caller's must have ended before the end marker
    started: the caller's stream waited for it."""
    streams: dict[Any, list[StreamWork]] = {}
    for w in forward.side_work():
        streams.setdefault(w.stream, []).append(w)
    if not streams:
        return JoinVerdict(True)
    if forward.end_marker is None:
        return JoinVerdict(None, streams)
    mark = forward.end_marker.start
    late = [w for ws in streams.values() for w in ws if w.end > mark + slack_us]
    overrun = max((w.end - mark for w in late), default=0.0)
    return JoinVerdict(not late, streams, late, overrun)


def is_own_kernel(name: str, own_names: Iterable[str]) -> bool:
    """A kernel the candidate's extensions define: one of its `__global__` names as a whole identifier in the
    (demangled) kernel name, and not a PyTorch or vendor-library kernel."""
    if _LIBRARY_MARKS.search(name):
        return False
    for n in own_names:
        if n and (re.search(rf"(?<!\w){re.escape(n)}(?!\w)", name)
                  or (name.startswith("_Z") and f"{len(n)}{n}" in name)):  # a trace that kept mangled names
            return True
    return False


@dataclass
class TimeShares:
    total_us: float
    own_us: float
    own_kernels: list[str]  # distinct names
    library: list[tuple[str, float]]  # (kernel name, µs), largest first

    @property
    def own_fraction(self) -> float:
        return self.own_us / self.total_us if self.total_us > 0 else 0.0

    @property
    def library_fraction(self) -> float:
        return 1.0 - self.own_fraction if self.total_us > 0 else 0.0

    def as_note(self) -> dict[str, Any]:
        return {
            "totalUs": round(self.total_us, 3),
            "ownFraction": round(self.own_fraction, 4),
            "libraryFraction": round(self.library_fraction, 4),
            "ownKernels": self.own_kernels,
            "library": [{"name": n, "us": round(us, 3), "fraction": round(us / self.total_us, 4) if self.total_us
                         else 0.0} for n, us in self.library],
        }

    def describe(self, shown: int = 3) -> str:
        if self.total_us <= 0:
            return "no kernel time recorded"
        own = (f"own kernels {_pct(self.own_fraction)} of GPU time ({len(self.own_kernels)} kernel"
               f"{'' if len(self.own_kernels) == 1 else 's'})")
        if not self.library:
            return own + "; no library kernels"
        parts = ", ".join(f"{short_name(n)} {_pct(us / self.total_us)}" for n, us in self.library[:shown])
        more = len(self.library) - shown
        return f"{own}; library {_pct(self.library_fraction)}: {parts}" + (f" (+{more} more)" if more > 0 else "")


def time_shares(kernels: Iterable[StreamWork], own_names: Iterable[str]) -> TimeShares:
    """GPU time of the candidate's own kernels vs everything else (cuBLAS, cuDNN, ATen)."""
    names = [n for n in own_names if n]
    own_us, own, library = 0.0, set(), {}
    for k in kernels:
        if k.kind != "kernel":
            continue
        if is_own_kernel(k.name, names):
            own_us += k.duration
            own.add(short_name(k.name))
        else:
            library[k.name] = library.get(k.name, 0.0) + k.duration
    total = own_us + sum(library.values())
    return TimeShares(total, own_us, sorted(own), sorted(library.items(), key=lambda kv: -kv[1]))


def _pct(fraction: float) -> str:
    return f"{100 * fraction:.0f}%"


def short_name(name: str, width: int = 48) -> str:
    """A kernel name without its return type and argument list, cut to `width`."""
    text = re.sub(r"^void\s+", "", name)
    depth, cut = 0, len(text)
    for i, ch in enumerate(text):  # the argument list is the last top-level parenthesis group
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    text = text[:cut]
    return text if len(text) <= width else text[: width - 1] + "…"
