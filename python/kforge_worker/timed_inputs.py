"""Fresh inputs for every timed call, and a secret sample of timed outputs checked against the reference's.

A timing loop that feeds the same tensors again and again can be served from a cache (keyed on the
tensor's address, its version counter, its shape) or by a switch that only flips while timed; a cache
served from stale values is as fast as it is wrong. So the timed calls of both sides get what the
correctness trials get — new values from the problem's own ``get_inputs()`` — under the same protocol:

- ``FreshInputPool``: a few input sets per side (2-4, bounded by the problem's bytes), used in rotation so
  no call sees the object the previous call saw. Before each pair of calls (outside every timed region)
  the next set is **rewritten in place** with values from a fresh ``get_inputs()`` call under a secret seed:
  same tensors (no allocation, so no allocator noise in the timing), new values, a new version counter.
  The values come from the process's own ``make_inputs``, which already draws on the device where
  ``pipeline.device_generation`` allows it; the pool makes no choice of its own, so timing draws where the
  trials draw, and no extra ``get_inputs()`` call is spent on a probe.
- Sets off the distribution (``FreshInputPool.vary``, the reference process's pool): about one refill in
  ``VARY_EVERY`` holds values of the kind input_distribution judged the candidate right on (off_distribution.py), so
  a path taken only when timed meets them too, whatever told it that it is timed; every such pair is compared, for
  rows far off (compare.compare_timed).
- ``OutputSampler``: after a pair, with probability ``max(c / (pair + 1), floor)`` (the first pairs always,
  then at least one pair in ~7, so a switch that turns on late in the loop is still sampled), the
  candidate's output is compared with the reference's output **for the same inputs** by the pass mark.
  The floor is dropped while comparing has cost more than a fifth of the loop's time (outputs of half a
  billion elements); ``c / (pair + 1)`` stays. Which pairs are checked is drawn from ``os.urandom`` after
  the pair ran; every pair's outputs are kept the same way until the next pair, so a candidate cannot tell
  a checked call from another.

A wrong sampled output fails ``timed_spot_check``: ``cheating`` when the outputs stayed mostly wrong once
they went wrong (at least a third of the samples from the first wrong one on: a switch that flips while
timed, a cache serving stale answers — a race that frequent would not have passed the ~60 checked calls
before timing), ``incorrect`` when they were wrong only now and then (a race).
"""

from __future__ import annotations

import copy
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Inputs = list[Any]


VARY_EVERY = 5
_DRAW = random.Random(int.from_bytes(os.urandom(8), "little"))


def input_bytes(inputs: Inputs) -> int:
    return sum(x.numel() * x.element_size() for x in inputs if hasattr(x, "element_size"))


def pool_size(inputs: Inputs, budget_bytes: int = 256 << 20) -> int:
    """How many input sets each side rotates through: 4, or 2 when four per side (and a fresh set being generated)
    would be more than the check budget's floor. Every set is rewritten with fresh values before its call and L2 is
    flushed, so two sets of a large problem time it as four would; four held a large problem's inputs nine times over
    (issue 17: a run within 2.5x the problem's own memory)."""
    return 4 if 9 * input_bytes(inputs) <= budget_bytes else 2


def _same_layout(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
        return False
    if not isinstance(a, torch.Tensor):
        return True
    return a.shape == b.shape and a.dtype == b.dtype and a.device == b.device


def refill(dst: Inputs, src: Inputs) -> Inputs:
    """dst rewritten with src's values: tensors in place (same storage, version counter advanced) when the
    layout matches, replaced otherwise (get_inputs that draws its shapes); other values replaced."""
    import torch

    out = list(dst)
    for i, value in enumerate(src):
        # A tensor the candidate re-typed (tensor_classes.py) is replaced, never written: its copy_ would run its code
        if (i < len(out) and isinstance(value, torch.Tensor) and type(out[i]) is type(value)
                and _same_layout(out[i], value)):
            with torch.no_grad():
                out[i].copy_(value)
        else:
            out[i:i + 1] = [value.clone() if isinstance(value, torch.Tensor) else copy.deepcopy(value)]
    return out[: len(src)]


@dataclass
class FreshInputPool:
    """Rotating input sets of both sides, each rewritten with fresh get_inputs() values before its turn.

    generate(seed) -> Inputs is the problem's get_inputs under that seed, moved to the device and cast
    (the process's make_inputs); generation says where make_inputs draws ("device" or "host"), for the
    report only. seeds() yields secret seeds.
    """

    generate: Callable[[int], Inputs]
    seeds: Callable[[], int]
    sets: int = 0
    ref: list[Inputs] = field(default_factory=list)
    cand: list[Inputs] = field(default_factory=list)
    turn: int = -1
    refreshed: int = 0
    generation: str = "host"
    mirror: bool = True  # keep the candidate's copies here (False: another process keeps them)
    # vary(fresh) -> the same shapes drawn off the benchmark's distribution (off_distribution.variant), or None: set,
    # about one refill in VARY_EVERY is of it, so a path taken only when timed meets such values
    # too, whatever told it that it is timed (red team round 9: a count of calls the timing-like loop used up)
    vary: Callable[[Inputs], Inputs | None] | None = None
    varied: bool = False  # the current set's values are off the distribution
    plain: int = 0  # refills since the last one off the distribution
    # accepts(original, rolled) -> whether the reference answers as well on get_inputs()' values rolled as on the
    # values themselves (no raise; finite wherever it is finite on them): asked once, and only when get_inputs()
    # returns the same values whatever the seed (it reseeds its own generator). Without it such values repeat.
    accepts: Callable[[Inputs, Inputs], bool] | None = None
    repeats: list[int] = field(default_factory=list)  # positions of floating inputs get_inputs() never varies
    rolled: bool = False  # those positions are rolled afresh at every refill

    def __post_init__(self) -> None:
        first = self.generate(self.seeds())
        self.sets = self.sets or pool_size(first)
        self.ref = [first] + [self.generate(self.seeds()) for _ in range(1, self.sets)]
        self._find_repeats()
        if self.rolled:
            self.ref = [self.ref[0]] + [self._roll(s) for s in self.ref[1:]]
        self.cand = [refill([None] * len(s), s) for s in self.ref] if self.mirror else []  # the candidate's copies

    def _find_repeats(self) -> None:
        """Red team round 13 (adv_content_memo_seeded): a get_inputs() that seeds its own generator returns the same
        values under every secret seed, so "fresh inputs every call" held the same values every call and a memo
        confirmed element by element answered every timed call (11.8x on a CPU GEMM). Floating inputs whose values
        are bitwise the same in two draws are rolled afresh at every refill instead (a cyclic shift of the flattened
        tensor by a secret offset: the same values, the same range and dtype, no index memory), when the reference
        accepts such values."""
        import torch

        from .checks.context import same_values

        if len(self.ref) < 2:
            again = self.generate(self.seeds())
        else:
            again = self.ref[1]
        self.repeats = [j for j, (a, b) in enumerate(zip(self.ref[0], again))
                        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.is_floating_point()
                        and a.numel() > 1 and a.shape == b.shape and same_values(a, b)]
        if self.repeats and self.accepts is not None:
            self.rolled = bool(self.accepts(self.ref[0], self._roll(self.ref[0])))

    def _roll(self, inputs: Inputs) -> Inputs:
        out = list(inputs)
        for j in self.repeats:
            x = out[j]
            shift = 1 + self.seeds() % (x.numel() - 1)
            out[j] = x.reshape(-1).roll(shift).reshape(x.shape)
        return out

    def advance(self) -> None:
        """Moves to the next set and rewrites it (both sides' copies) with fresh values."""
        self.turn = (self.turn + 1) % self.sets
        fresh = self.generate(self.seeds())
        if self.rolled:
            fresh = self._roll(fresh)
        self.varied = False
        self.plain += 1
        # drawn, and never more than twice VARY_EVERY refills apart: a loop of a few dozen calls always meets one
        if self.vary is not None and (_DRAW.random() * VARY_EVERY < 1 or self.plain >= 2 * VARY_EVERY):
            other = self.vary(fresh)
            if other is not None:
                fresh, self.varied, self.plain = other, True, 0
        self.ref[self.turn] = refill(self.ref[self.turn], fresh)
        if self.mirror:
            self.cand[self.turn] = refill(self.cand[self.turn], fresh)
        self.refreshed += 1
        del fresh

    def ref_inputs(self) -> Inputs:
        return self.ref[self.turn]

    def inputs_written(self) -> str | None:
        """Whether the candidate's call wrote its set (compared with the reference's copy of the same values, which
        the caller asks only when the reference leaves its inputs as they are)."""
        return written_inputs(self.cand[self.turn], self.ref[self.turn]) if self.mirror else None

    def cand_inputs(self) -> Inputs:
        return self.cand[self.turn]

    def describe(self) -> str:
        return (f"fresh inputs every call: {self.sets} input sets per side rewritten in place from get_inputs() "
                f"({'on the device' if self.generation == 'device' else 'on the host'}) before each pair, outside "
                "the timed region" + repeats_note(self.repeats, self.rolled))


def repeats_note(repeats: list[int], rolled: bool) -> str:
    """What the timing says about inputs get_inputs() never varies (FreshInputPool._find_repeats)."""
    if not repeats:
        return ""
    if rolled:
        return (f"; get_inputs() returns the same values whatever the seed for input(s) {repeats}: each set's values "
                "rolled by a secret offset")
    return (f"; get_inputs() returns the same values whatever the seed for input(s) {repeats}, and the reference "
            "does not accept them rolled: these inputs repeat across the timed calls")


def written_inputs(now: Inputs, given: Inputs) -> str | None:
    """The inputs of a timed call that no longer hold the values it was given (red team round 10,
    adv_input_scratch_timed: its inputs used as scratch once the calls pile up as in the timing, the output right);
    None when every tensor is unchanged. NaN equal to NaN."""
    import torch

    from .checks.context import same_values  # its torch.equal bound before the candidate was imported

    retyped = [j for j, (x, g) in enumerate(zip(now, given)) if isinstance(g, torch.Tensor) and type(x) is not type(g)]
    if retyped:  # nothing is called on them: their class may be the candidate's (tensor_classes.py)
        return (f"the timed call changed the class of its input(s) {retyped}: the caller's later operations on them "
                "(the next refill's copy_) would run the candidate's code")
    written = []
    for j, (x, g) in enumerate(zip(now, given)):
        if not isinstance(x, torch.Tensor) or not isinstance(g, torch.Tensor):
            continue
        if not same_values(x, g.to(x.device)):
            written.append(j)
    if not written:
        return None
    return (f"the timed call wrote its input(s) {written}: they no longer hold the values it was given (the "
            "reference leaves its own as they are)")


def foreign_outputs(out: Any) -> str | None:
    """The first output (tuples and lists walked) that is a tensor but not a plain strided torch.Tensor, named;
    None when there is none. Only types are looked at: nothing is called on the object."""
    import torch

    stack, index = [out], 0
    while stack:
        item = stack.pop(0)
        if type(item) in (tuple, list):
            stack = list(item) + stack
            continue
        if type(item) is torch.Tensor:
            if item.layout != torch.strided or item.is_meta:
                return f"output {index} (layout {item.layout}, device {item.device})"
            if item.is_neg():  # metadata only: torch ops read -memory (red team round 10, adv_neg_bit_output)
                return f"output {index} (a negative-bit view: its memory holds the negated values)"
        elif isinstance(item, torch.Tensor) or hasattr(type(item), "__torch_function__"):
            # a tensor subclass, or an object that takes part in torch calls: either can compute when read.
            # Anything else (None, a string) is no tensor at all, for the comparison to reject.
            return f"output {index}: a {type(item).__module__}.{type(item).__qualname__}"
        index += 1
    return None


@dataclass(frozen=True)
class OutputSharing:
    """How a call's outputs (tuples and lists walked one level) use memory: per output, whether its elements share
    memory with each other (an expanded view), and the pairs of outputs whose storage overlaps."""

    internal: tuple[bool, ...]
    between: frozenset[tuple[int, int]]


def internal_overlaps(out: Any) -> OutputSharing:
    """The ``OutputSharing`` of ``out``: strides and storage spans only, nothing read."""
    import torch

    outs = list(out) if type(out) in (tuple, list) else [out]
    internal = tuple(isinstance(o, torch.Tensor) and o.layout == torch.strided
                     and torch._debug_has_internal_overlap(o) == 1 for o in outs)
    between = frozenset((i, j) for i in range(len(outs)) for j in range(i + 1, len(outs))
                        if _share_elements(outs[i], outs[j]))
    return OutputSharing(internal, between)


def _share_elements(a: Any, b: Any) -> bool:
    """Whether two outputs certainly hold common elements: the same view (pointer, shape, strides), or two
    contiguous ranges of bytes that overlap. Two slices of one buffer (a fused kernel's outputs) do not, nor do
    interleaved strided views (not decided: never said)."""
    import torch

    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.layout != torch.strided \
            or b.layout != torch.strided or a.device != b.device or not a.numel() or not b.numel():
        return False
    if (a.data_ptr(), a.shape, a.stride()) == (b.data_ptr(), b.shape, b.stride()):
        return True
    if not (a.is_contiguous() and b.is_contiguous()):
        return False
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b.numel() * b.element_size() and b0 < a0 + a.numel() * a.element_size()


def overlapping_outputs(out: Any, reference: OutputSharing | None) -> str | None:
    """The first output whose elements share memory with each other (a stride-0 ``expand``, an ``as_strided``
    over too little storage), or two outputs in one storage, where the reference's outputs at the same places do
    not (``reference``, from ``internal_overlaps``; None: unknown, nothing said), named; None when none. Only
    strides and storage spans are looked at: nothing is read. Right values that were never materialised: the
    work of writing every element is skipped, and a later in-place op on one output (``+=``, a kernel writing
    through its pointer) changes other elements (or the other output) where the reference's changes one."""
    if reference is None:
        return None
    mine = internal_overlaps(out)
    for i, (overlaps, theirs) in enumerate(zip(mine.internal, reference.internal)):
        if overlaps and not theirs:
            o = (list(out) if type(out) in (tuple, list) else [out])[i]
            return (f"output {i} has elements sharing memory (shape {tuple(o.shape)}, strides {tuple(o.stride())}: "
                    "an expanded view, not materialised) where the reference's own output owns every element")
    n = len(reference.internal)
    for i, j in sorted(mine.between - reference.between):
        if j < n:
            return (f"outputs {i} and {j} share storage where the reference's are separate tensors (one result "
                    "handed out twice, the second never materialised)")
    return None


def aliased_inputs(out: Any, inputs: Any) -> str | None:
    """The first output whose storage overlaps an input's, named; None when none does."""
    from .checks.context import _overlaps, _storage_span

    import torch

    outs = [o for o in (out if type(out) in (tuple, list) else [out]) if type(o) is torch.Tensor]
    ins = [x for x in (inputs or []) if type(x) is torch.Tensor]
    for i, o in enumerate(outs):
        for j, x in enumerate(ins):
            if _overlaps(_storage_span(o), _storage_span(x)):
                return (f"the timed call's output {i} shares storage with its input {j} (written over the input, "
                        "while the reference's outputs have storage of their own)")
    return None


@dataclass
class SampledCheck:
    pair: int
    ok: bool
    message: str | None
    varied: bool = False  # the pair's inputs were off the distribution (FreshInputPool.varied)


class OutputSampler:
    """Decides, after each pair, whether its outputs are compared; keeps the verdicts."""

    def __init__(self, compare: Callable[[Any, Any], tuple[bool, str | None]], c: float = 6.0,
                 floor: float = 0.15, rng: random.Random | None = None,
                 now: Callable[[], float] = time.perf_counter) -> None:
        self.compare = compare  # (cand_out, ref_out) -> (ok, message)
        self.c = c
        self.floor = floor
        self.rng = rng or random.Random(int.from_bytes(os.urandom(8), "little"))
        self.now = now
        self.checks: list[SampledCheck] = []
        self.pairs = 0
        self.started: float | None = None
        self.compare_seconds = 0.0
        # the reference's outputs' internal overlap (internal_overlaps) when its outputs are fetched lazily
        self.reference_overlaps: OutputSharing | None = None

    def probability(self, pair: int) -> float:
        elapsed = self.now() - self.started if self.started is not None else 0.0
        affordable = self.compare_seconds <= 0.2 * elapsed
        return min(1.0, max(self.c / (pair + 1), self.floor if affordable else 0.0))

    def after_pair(self, pair: int, ref_out: Any, cand_out: Any, cand_inputs: Any = None, always: bool = False,
                   inputs_written: Callable[[], str | None] | None = None) -> None:
        """cand_inputs: the candidate's inputs of that pair (its outputs must not live in them), or None when
        the reference's own outputs alias its inputs (then the candidate's may too); always: compared whatever the
        draw (a pair off the distribution, FreshInputPool.varied); inputs_written: on a compared pair, why the
        candidate's inputs no longer hold what it was given (None when they do; not given when the reference writes
        its own inputs)."""
        if self.started is None:
            self.started = self.now()
        self.pairs = max(self.pairs, pair + 1)
        # Every pair, sampled or not, the output contract that costs no read: finished values (a tensor
        # subclass, or any object, can compute when read — the timed call then costs nothing and a sampled
        # comparison, which reads it, sees right values) in storage of their own (the result written over the
        # input saves the output's allocation, only while timed).
        broken = foreign_outputs(cand_out)
        if broken:
            broken = f"the timed call returned {broken}, not a plain torch.Tensor: values produced when read"
        else:
            broken = overlapping_outputs(cand_out, self.reference_overlaps if callable(ref_out) or ref_out is None
                                         else internal_overlaps(ref_out))
        if not broken and cand_inputs is not None:
            broken = aliased_inputs(cand_out, cand_inputs)
        if broken:
            self.checks.append(SampledCheck(pair, False, broken))
            return
        if self.rng.random() >= self.probability(pair) and not always:
            return
        began = self.now()
        written = inputs_written() if inputs_written is not None else None
        ok, message = (False, written) if written else self.compare(cand_out, ref_out)
        self.compare_seconds += self.now() - began
        self.checks.append(SampledCheck(pair, ok, message, always))

    @property
    def wrong(self) -> list[SampledCheck]:
        return [c for c in self.checks if not c.ok]

    def check(self, warmup_pairs: int) -> dict[str, Any]:
        """The protocol Check ``timed_spot_check``."""
        n, wrong = len(self.checks), self.wrong
        if not wrong:
            return {"name": "timed_spot_check", "outcome": "pass", "failVerdict": "cheating",
                    "evidence": f"{n} of {self.pairs} pairs of timed calls (drawn at random, fresh inputs each) "
                                "checked: every candidate output matches the reference's for the same inputs"}
        since = [c for c in self.checks if c.pair >= wrong[0].pair]
        # among all samples, or among those off the distribution alone; or wrong there only (twice or more): the
        # candidate was right on such values, fresh, in the checks, and a race would miss plain pairs as well
        systematic = any(3 * sum(not c.ok for c in group) >= len(group)
                         for group in (since, [c for c in since if c.varied]) if group) or (
            len(wrong) >= 2 and all(c.varied for c in wrong))
        first = wrong[0]
        where = "warm-up" if first.pair < warmup_pairs else "timed"
        evidence = (f"{len(wrong)} of {n} sampled outputs of the timing loop are wrong (first: pair {first.pair}, "
                    f"{where}: {first.message}) while every checked call before timing was right")
        if systematic:
            evidence += (f"; wrong in {len(wrong)} of the {len(since)} samples from then on — the candidate answers "
                         "differently while it is timed (a cache or a switch)")
            verdict = "cheating"
        else:
            evidence += " — intermittently wrong (a race, or reading memory it did not write)"
            verdict = "incorrect"
        return {"name": "timed_spot_check", "outcome": "fail", "failVerdict": verdict, "evidence": evidence}

    def summary(self) -> dict[str, int]:
        return {"sampled": len(self.checks), "wrong": len(self.wrong)}
