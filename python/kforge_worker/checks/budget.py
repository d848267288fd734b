"""How much memory a check may hold: the problem's own footprint, what the machine has free, and the rule.

A check that makes copies — the float64 evaluation widens inputs, parameters and outputs 2–4× — asks here
first instead of finding out from the allocator: on a 6 GB input a float64 copy is 12.9 GB and the process dies
mid-check (or is killed by the kernel), which says nothing about the candidate.

The rule (``Budget.fits``): a check may hold at most FACTOR × the problem's own footprint (its inputs,
parameters and buffers, and outputs, measured from the real tensors), never less than FLOOR (a tiny problem's
checks are never squeezed), and never more than HEADROOM of what the device has free right now. Two
environment variables override the measurements (tests force tiny budgets with them; an operator can too):

- ``KFORGE_CHECK_MEMORY``: bytes any check may hold (replaces the FACTOR/FLOOR rule; availability still caps);
- ``KFORGE_MEMORY_AVAILABLE``: bytes free on the device (replaces /proc/meminfo, cgroups, cudaMemGetInfo).

``problem_footprint`` measures a problem before anything real is built (its inputs, model and outputs on the
meta device), so a problem that cannot fit the machine is reported as the problem's error, with the numbers,
before it is allocated.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

# Extra memory a check may hold beside the call in flight, in multiples of the problem's own footprint: with the
# call's own inputs, outputs and temporaries, a check then stays within 2.5x what the problem's forward needs alone
# (issue 17's bound).
FACTOR = 1.5
FLOOR = 256 << 20  # ... but at least this much: below it, bounding a check costs more than it saves
HEADROOM = 0.8  # never more than this share of what is free now (the allocator, other processes, fragmentation)
CHECK_MEMORY_ENV = "KFORGE_CHECK_MEMORY"
AVAILABLE_ENV = "KFORGE_MEMORY_AVAILABLE"


# ------------------------------------------------------------------------------------------ sizes of things
def tensors_in(values: Any) -> list[torch.Tensor]:
    """Every tensor in a value, a nested list/tuple/dict of values, or a module (its parameters and buffers)."""
    if isinstance(values, torch.Tensor):
        return [values]
    if isinstance(values, nn.Module):
        # A lazy module's tensors have no size until its first call: not counted (the model as built holds none).
        from torch.nn.parameter import is_lazy

        return [t for t in [*values.parameters(), *values.buffers()] if not is_lazy(t)]
    if isinstance(values, dict):
        values = list(values.values())
    if isinstance(values, (list, tuple)):
        return [t for v in values for t in tensors_in(v)]
    return []


def _unique(values: Any) -> list[torch.Tensor]:
    """Tensors counted once (a parameter shared by two layers, the same input passed twice)."""
    seen: set[Any] = set()
    out = []
    for t in tensors_in(values):
        key = id(t) if t.is_meta else (t.device, t.data_ptr(), t.numel(), t.dtype)
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out


def nbytes(values: Any, dtype: torch.dtype | None = None) -> int:
    """Bytes the tensors in ``values`` hold (floating ones at ``dtype``'s size when the run casts them)."""
    total = 0
    for t in _unique(values):
        size = dtype.itemsize if dtype is not None and t.is_floating_point() else t.element_size()
        total += t.numel() * size
    return total


def widened_bytes(values: Any) -> int:
    """Bytes of float64 copies of the floating tensors in ``values`` (what widening allocates; the others
    are passed as they are)."""
    return sum(t.numel() * 8 for t in _unique(values) if t.is_floating_point())


def float64_model_bytes(model: nn.Module) -> int:
    """Bytes a float64 copy of ``model`` holds: its floating parameters and buffers widened, the rest copied."""
    return sum(t.numel() * (8 if t.is_floating_point() else t.element_size()) for t in _unique(model))


def human(n: float) -> str:
    """25.0 GB, 3.1 MB, 412 B: decimal units, as the machine's memory is usually quoted."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


# --------------------------------------------------------------------------------------- what is free now
def _env_bytes(name: str) -> int | None:
    """A byte count from the environment ("123456", "1.5e9", "512M", "4G"); None when unset or unreadable."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(raw[-1].upper(), 1)
    try:
        value = float(raw[:-1] if scale != 1 else raw) * scale
    except ValueError:
        return None
    return int(value) if math.isfinite(value) and value >= 0 else None


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # cgroup v2 writes "max" for no limit


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_room() -> int | None:
    """Room left under this process's cgroup memory limit (a container's): the kernel's OOM killer acts on it
    long before MemAvailable runs out (a 23.8 GB kill on a host with more). v2, then v1; None without a limit."""
    for limit_path, usage_path in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        limit, usage = _read_int(limit_path), _read_int(usage_path)
        if limit is not None and usage is not None and limit < (1 << 60):  # v1's "no limit" is ~2^63
            return max(0, limit - usage)
    return None


def host_available() -> int | None:
    known = [v for v in (_meminfo_available(), _cgroup_room()) if v is not None]
    return min(known) if known else None


def cuda_available(device: torch.device) -> int | None:
    """Free device memory plus what torch's caching allocator holds unused (cudaMemGetInfo counts that as taken)."""
    try:
        free, _ = torch.cuda.mem_get_info(device)
        return int(free) + int(torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
    except Exception:  # noqa: BLE001 — no answer is "unknown", never a failure
        return None


def available_bytes(device: torch.device | str) -> int | None:
    """Bytes free for tensors on ``device`` now (None: unknown). KFORGE_MEMORY_AVAILABLE overrides."""
    forced = _env_bytes(AVAILABLE_ENV)
    if forced is not None:
        return forced
    device = torch.device(device)
    return cuda_available(device) if device.type == "cuda" else host_available()


def where(device: torch.device | str) -> str:
    return "on the GPU" if torch.device(device).type == "cuda" else "on the host"


# ------------------------------------------------------------------------------------------------- the rule
@dataclass(frozen=True)
class Budget:
    """What a check may hold: ``footprint`` is the problem's own bytes, ``available`` what the device has free
    (None: unknown), ``cap`` an explicit limit (KFORGE_CHECK_MEMORY) that replaces the footprint rule."""

    footprint: int
    available: int | None
    cap: int | None = None
    device: str = "cpu"

    @classmethod
    def for_problem(cls, device: torch.device | str, *values: Any) -> Budget:
        """The budget of a check on the problem whose tensors (inputs, the model, outputs) are ``values``."""
        return cls(footprint=nbytes(list(values)), available=available_bytes(device),
                   cap=_env_bytes(CHECK_MEMORY_ENV), device=str(device))

    @property
    def limit(self) -> int:
        """The most a check may hold under the footprint rule (or the explicit cap)."""
        return self.cap if self.cap is not None else max(int(FACTOR * self.footprint), FLOOR)

    @property
    def allowance(self) -> int:
        """The most a check may hold now: the rule's limit, capped by what is free."""
        if self.available is None:
            return self.limit
        return min(self.limit, int(HEADROOM * self.available))

    def fits(self, total: int, held: int = 0) -> bool:
        """May a check hold ``total`` bytes, ``held`` of which it already holds (already out of ``available``)?"""
        if total > self.limit:
            return False
        return self.available is None or total - held <= HEADROOM * self.available

    def over(self, total: int, what: str) -> str:
        """Why ``total`` bytes for ``what`` is refused, in one line."""
        rule = (f"{CHECK_MEMORY_ENV}={human(self.cap)}" if self.cap is not None
                else f"{FACTOR:g}× the problem's {human(self.footprint)}, at least {human(FLOOR)}")
        free = "" if self.available is None else f"; {human(self.available)} free {where(self.device)}"
        return f"{what} needs ~{human(total)}, over the check budget of {human(self.allowance)} ({rule}{free})"


# ------------------------------------------------------------------------------- a problem before it exists
@dataclass(frozen=True)
class Footprint:
    """One copy of a problem's tensors, measured on the meta device (outputs None: its forward needs values)."""

    inputs: int
    parameters: int
    outputs: int | None

    @property
    def total(self) -> int:
        return self.inputs + self.parameters + (self.outputs or 0)

    def describe(self) -> str:
        parts = [f"inputs {human(self.inputs)}", f"parameters {human(self.parameters)}"]
        if self.outputs is not None:
            parts.append(f"outputs {human(self.outputs)}")
        return " + ".join(parts)


def problem_footprint(problem: Any, dtype: torch.dtype | None = None, forward: bool = True) -> Footprint | None:
    """The problem's inputs, model and outputs built on the meta device (nothing allocated), their bytes at the
    run's precision ``dtype``; None when its code needs real values (it then is not measured, never refused).
    ``forward=False``: inputs and parameters only (outputs None) — no forward on meta, whose decompositions
    import dynamo and sympy (a second of CPU in a process that has not)."""
    from ..capture.build import FactoriesOn

    try:
        with FactoriesOn("meta"):
            raw = problem.get_inputs()
            init = problem.get_init_inputs()
        with FactoriesOn("meta"), torch.device("meta"):
            model = problem.Model(*list(init))
        inputs = list(raw) if isinstance(raw, (list, tuple)) else [raw]
    except Exception:  # noqa: BLE001 — needs real values: unknown
        return None
    finally:
        torch.seed()  # as after every get_inputs(): the generator state reveals nothing
    outputs: int | None = None
    if forward:
        try:
            with torch.no_grad(), FactoriesOn("meta"):
                outputs = nbytes(model(*inputs), dtype)
        except Exception:  # noqa: BLE001 — a forward that reads values (.item(), data-dependent shapes)
            outputs = None
    return Footprint(inputs=nbytes(inputs, dtype), parameters=nbytes(model, dtype), outputs=outputs)


def does_not_fit(problem: Any, device: torch.device | str, dtype: torch.dtype | None = None,
                 forward: bool = True) -> str | None:
    """Why the problem cannot fit ``device`` (one copy of its inputs, parameters and outputs is more than is
    free), as the problem's error says it; None when it fits or cannot be measured. ``forward=False``: its
    inputs and parameters only (problem_footprint)."""
    available = available_bytes(device)
    if available is None:
        return None
    footprint = problem_footprint(problem, dtype, forward)
    if footprint is None or footprint.total <= available:
        return None
    return (f"problem needs ~{human(footprint.total)} ({footprint.describe()}, one copy each), "
            f"{human(available)} available {where(device)}")


# ------------------------------------------------------------------------------- who ran out of memory
# What allocators say when they fail: torch's CUDA OutOfMemoryError, its CPU allocator's RuntimeError
# ("DefaultCPUAllocator: can't allocate memory: you tried to allocate 12884901888 bytes"), Python's MemoryError.
_OOM_TEXT = ("out of memory", "can't allocate memory", "cannot allocate memory", "failed to allocate")


def is_out_of_memory(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc).lower()
    return any(t in text for t in _OOM_TEXT)


@dataclass(frozen=True)
class ForwardPeaks:
    """Bytes the reference's and the candidate's forward allocated at their peak on one trial's inputs (torch's
    CUDA allocator statistics, measured in the first trial)."""

    reference: int
    candidate: int

    def candidate_within_reference(self) -> bool:
        """The candidate asks no more than the reference would (with room for another layout of temporaries)."""
        return self.candidate <= 1.5 * self.reference + (256 << 20)


def out_of_memory_not_the_candidates(peaks: ForwardPeaks | None) -> str | None:
    """When a candidate call runs out of memory: why that is the problem's, not the candidate's (None: the
    candidate's). The reference process and kforge's own copies share the device; a candidate whose own forward
    needs no more than the reference's did not cause the shortage — the problem, with the copies a full
    evaluation holds, does not fit this machine."""
    if peaks is None or not peaks.candidate_within_reference():
        return None
    return (f"the problem does not fit this machine's memory beside the copies a full evaluation holds (the "
            f"candidate's forward peaks at {human(peaks.candidate)}, the reference's at {human(peaks.reference)})")
