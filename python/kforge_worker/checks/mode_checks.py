"""Checks of what every other check holds fixed: the autograd mode a forward is called in, the caller's random
stream (red team round 11), and the thread it is called from and the thread count it runs at (round 12).

Every check, trial and timed call runs forward under `torch.no_grad()`. A plain `model(x)` — PyTorch's default, a
training step, any caller who never wrote `no_grad` — runs with grad mode on; serving code runs under
`torch.inference_mode()`; a network in training hands its layers activations that require grad. A forward that
reads the mode (torch.is_grad_enabled(), is_inference_mode_enabled(), x.requires_grad) can answer right where it is
checked and wrong everywhere else (`grad_modes`).

torch's global generator is the caller's: its dropout masks, data augmentation and sampling draw from it. A forward
that sets it — reseeds it, or puts back a state it saved — replays the caller's stream after every call, whatever
the caller drew before (`global_rng`).

Every harness call comes from the worker's main thread at the thread count it started with; servers, DataParallel
replicas and DataLoader workers (torch.set_num_threads(1)) call from elsewhere (`caller_threads`).
"""

from __future__ import annotations

from typing import Any

import torch

from .context import VerifyContext, clone_inputs, detached, has_dropout, run, tensors
from .judge import judged_compare
from .result import CheckResult, failed, passed, skipped, warned

# (label, run mode, inputs that require grad)
MODES = (
    ("grad mode on (a plain call)", "grad", False),
    ("grad mode on, inputs that require grad", "grad", True),
    ("torch.inference_mode()", "inference", False),
)


def _needing_grad(inputs: list[Any]) -> list[Any]:
    return [x.detach().clone().requires_grad_(True) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
            for x in inputs]


def _written(given: list[Any], pristine: list[Any]) -> list[int]:
    out = []
    with torch.no_grad():
        for j, (x, p) in enumerate(zip(given, pristine)):
            if isinstance(x, torch.Tensor) and (x.shape != p.shape or not torch.equal(torch.nan_to_num(x.detach()),
                                                                                      torch.nan_to_num(p))):
                out.append(j)
    return out


def check_grad_modes(ctx: VerifyContext) -> CheckResult:
    """grad_modes: one fresh input set, called in each of MODES by the reference and the candidate; the candidate's
    values (detached) judged as every check judges them, and its inputs must hold what it was given (unless the
    reference writes its own). Wrong values or written inputs → `incorrect`; a raise in a mode the reference runs in
    → `warn` (refused, not answered wrong: an inference-only kernel may refuse autograd). Gradients are not judged."""
    base = ctx.make_inputs(ctx.seed())
    if not any(isinstance(x, torch.Tensor) for x in base):
        return skipped("grad_modes", "no tensor input", "incorrect")
    notes, refused = [], []
    for label, mode, need in MODES:
        if need and not any(isinstance(x, torch.Tensor) and x.is_floating_point() for x in base):
            continue
        ref_in = _needing_grad(base) if need else clone_inputs(base)
        try:
            ref_out = detached(run(ctx.ref, ref_in, mode))
        except Exception as exc:  # noqa: BLE001 — the reference does not run in this mode
            notes.append(f"{label}: reference raised {type(exc).__name__}, skipped")
            continue
        ref_writes = bool(_written(ref_in, base))
        del ref_in
        cand_in = _needing_grad(base) if need else clone_inputs(base)
        try:
            out = detached(run(ctx.cand, cand_in, mode))
        except Exception as exc:  # noqa: BLE001
            refused.append(f"{label}: {type(exc).__name__}: {str(exc)[:120]}")
            continue
        written = [] if ref_writes else _written(cand_in, base)
        if written:
            return failed("grad_modes", f"{label}: the call wrote its input(s) {written} (under no_grad it leaves "
                          "them as given): a forward that behaves otherwise in the mode a caller runs it in",
                          "incorrect")
        c = judged_compare(ctx, lambda: clone_inputs(base), out, ref_out)
        del out, ref_out, cand_in
        if not c.ok:
            return failed("grad_modes", f"right under torch.no_grad() (every other check's mode), wrong with {label}: "
                          f"{c.message} — the answer depends on the caller's autograd mode", "incorrect")
        notes.append(f"{label}: {c.message}")
    if refused:
        return warned("grad_modes", "the candidate raises in autograd modes the reference runs in (refuses, does "
                      "not answer wrong): " + "; ".join(refused), "incorrect")
    return passed("grad_modes", "; ".join(notes) or "no mode to try", "incorrect")


_GENERATOR_NAMES = ("the CPU generator", "the CUDA generator")


def _states(device: torch.device) -> list[torch.Tensor]:
    states = [torch.get_rng_state()]
    if device.type == "cuda":
        states.append(torch.cuda.get_rng_state(device))
    return states


def _set_states(device: torch.device, states: list[torch.Tensor]) -> None:
    torch.set_rng_state(states[0])
    if device.type == "cuda":
        torch.cuda.set_rng_state(states[1], device)


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b))


def _after_call(ctx: VerifyContext, model: Any, base: list[Any], seed: int) -> list[torch.Tensor]:
    torch.default_generator.manual_seed(seed)  # the generators directly (torch.manual_seed wraps dynamo)
    if ctx.device.type == "cuda":
        torch.cuda.manual_seed(seed)
    tensors(run(model, clone_inputs(base)))
    return _states(ctx.device)


def check_global_rng(ctx: VerifyContext) -> CheckResult:
    """global_rng: the candidate called from two different states of torch's global generator(s) must not leave
    them in one and the same state — a forward that reseeds the generator, or restores a state it saved, replays the
    caller's random stream after each call (`cheating`: the caller's state, not the answer, is what it changes),
    unless the reference does the same. Drawing from the stream where the reference does not is said (`warn`).
    Not run while the random streams are paired (active dropout: every call is seeded from its inputs)."""
    from .context import _PAIRED_RNG

    if _PAIRED_RNG["on"] or has_dropout(ctx.ref):
        return skipped("global_rng", "the reference draws random numbers (dropout): calls are seeded from their inputs",
                       "cheating")
    saved = _states(ctx.device)
    try:
        base = ctx.make_inputs(ctx.seed())
        seeds = (ctx.rng.randrange(1, 2**31), ctx.rng.randrange(1, 2**31))
        starts = []
        for s in seeds:
            torch.default_generator.manual_seed(s)
            if ctx.device.type == "cuda":
                torch.cuda.manual_seed(s)
            starts.append(_states(ctx.device))
        ref_after = [_after_call(ctx, ctx.ref, base, s) for s in seeds]
        cand_after = [_after_call(ctx, ctx.cand, base, s) for s in seeds]
    finally:
        _set_states(ctx.device, saved)
    # Generator by generator: a forward that resets the CPU generator alone leaves the two calls' CUDA states apart.
    reset = [i for i in range(len(starts[0]))
             if torch.equal(cand_after[0][i], cand_after[1][i]) and not torch.equal(ref_after[0][i], ref_after[1][i])]
    if reset:
        return failed("global_rng", "called from two different states of torch's global random generator, the "
                      f"candidate's forward left {' and '.join(_GENERATOR_NAMES[i] for i in reset)} in the same state "
                      "both times: it sets the generator (a reseed, a "
                      "saved state put back), so the caller's random stream (dropout masks, sampling, augmentation) "
                      "restarts after every call", "cheating")
    moved = [not _same(a, s) for a, s in zip(cand_after, starts)]
    ref_moved = [not _same(a, s) for a, s in zip(ref_after, starts)]
    if any(moved) and not any(ref_moved):
        return warned("global_rng", "the candidate's forward draws from torch's global random generator, which the "
                      "reference's does not: the caller's later random numbers differ from the reference's", "cheating")
    return passed("global_rng", "the caller's random stream is left as the reference leaves it", "cheating")


def _on_another_thread(model: Any, inputs: list[Any]) -> Any:
    """One harness call made from a fresh Python thread (joined before returning); its exception re-raised here."""
    import threading

    box: dict[str, Any] = {}

    def call() -> None:
        try:
            box["out"] = run(model, inputs)
        except BaseException as exc:  # noqa: BLE001 — handed to the caller's thread
            box["exc"] = exc

    worker = threading.Thread(target=call, name="kforge-caller-thread", daemon=True)
    worker.start()
    worker.join()
    if "exc" in box:
        raise box["exc"]
    return box["out"]


def _with_threads(model: Any, inputs: list[Any], count: int) -> Any:
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        return run(model, inputs)
    finally:
        torch.set_num_threads(before)


def check_caller_threads(ctx: VerifyContext) -> CheckResult:
    """caller_threads: the candidate called from another Python thread than the harness's main one (a server's request
    threads, DataParallel's replicas, a prefetching loader), and with another intra-op thread count
    (torch.set_num_threads(1) in a DataLoader worker or a server; 2 where the harness runs on one), each judged against
    the reference's answer on the same inputs. Every other call the harness makes comes from one thread at one thread
    count, so a forward that reads either (threading.current_thread(), torch.get_num_threads(), a cache keyed on the
    thread) was judged in one context only (red team round 12). Wrong → `incorrect`; a raise → `warn` (refused, not
    answered wrong). The thread count is put back before the check returns."""
    base = ctx.make_inputs(ctx.seed())
    if not any(isinstance(x, torch.Tensor) for x in base):
        return skipped("caller_threads", "no tensor input", "incorrect")
    count = 1 if torch.get_num_threads() > 1 else 2
    callers = (("from another Python thread", lambda m, x: _on_another_thread(m, x)),
               (f"with torch.set_num_threads({count})", lambda m, x: _with_threads(m, x, count)))
    try:
        ref_out = detached(run(ctx.ref, clone_inputs(base)))
    except Exception as exc:  # noqa: BLE001
        return skipped("caller_threads", f"the reference raised {type(exc).__name__}", "incorrect")
    notes, refused = [], []
    for label, call in callers:
        try:
            out = detached(call(ctx.cand, clone_inputs(base)))
        except Exception as exc:  # noqa: BLE001
            refused.append(f"{label}: {type(exc).__name__}: {str(exc)[:120]}")
            continue
        c = judged_compare(ctx, lambda: clone_inputs(base), out, ref_out)
        del out
        if not c.ok:
            return failed("caller_threads", f"right when called as every other check calls it, wrong when called "
                          f"{label}: {c.message} — the answer depends on the caller's thread or thread count",
                          "incorrect")
        notes.append(f"{label}: {c.message}")
    if refused:
        return warned("caller_threads", "the candidate raises when called from another thread or at another thread "
                      "count (refuses, does not answer wrong): " + "; ".join(refused), "incorrect")
    return passed("caller_threads", "; ".join(notes) or "nothing to try", "incorrect")
