"""Checks on what actually executed: the operators the forward ran, the kernels it launched and on
which streams, and whether its timing agrees with the wall clock."""

from __future__ import annotations

import contextlib
import re
import sys
import time
from typing import Any

import torch
from torch import nn

from . import trace
from .context import clone_inputs, Inputs, preserved_state, random_streams_paired, run, sync, VerifyContext
from .instrument import OpRecorder
from .judge import judged_compare
from .ops import CONDEMNING, aten_family, op_family
from .result import CheckResult, failed, passed, skipped, warned
from .stream_gate import StreamGate


def _condemned(ctx: VerifyContext) -> frozenset[str]:
    return frozenset().union(*(CONDEMNING.get(f, frozenset({f})) for f in ctx.ref_families))


def _cuda_code(ctx: VerifyContext) -> bool:
    return bool(ctx.scan.kernel_names) or any(load.has_cuda for load in ctx.extensions.loads)


def _declared_baseline(ctx: VerifyContext) -> bool:
    """A pure-PyTorch candidate may say it is a baseline (module-level ``KFORGE_BASELINE = True``), as the
    identity candidates that validate the timing do. Running the reference's own operator is then its
    stated purpose, disclosed in the result, not a shortcut passed off as a custom kernel; a candidate that
    compiles any custom code cannot claim it."""
    module = sys.modules.get(type(ctx.cand).__module__)
    return (getattr(module, "KFORGE_BASELINE", False) is True and not _cuda_code(ctx)
            and not ctx.extensions.loads)


def _library_ops(ctx: VerifyContext, ops: dict[str, int], ref_ops: dict[str, int] | None = None) -> CheckResult:
    """The `banned_ops` outcome from the dispatch record of one forward (op name -> calls). ``ref_ops``: the
    reference's own record on the same inputs (taken under --strict for a declared baseline)."""
    condemned = _condemned(ctx)
    by_family: dict[str, list[str]] = {}
    for op, n in ops.items():
        fam = op_family(op)
        if fam:
            by_family.setdefault(fam, []).append(f"{op}×{n}")
    ctx.notes["ops"] = dict(ops)
    ctx.notes["library_ops"] = {fam: sorted(xs) for fam, xs in sorted(by_family.items())}
    device_is_real = ctx.device.type == "cuda" or not _cuda_code(ctx)
    hits = sorted(x for fam in condemned for x in by_family.get(fam, []))
    soft = sorted(x for fam, xs in by_family.items() if fam not in condemned for x in xs)
    families = ", ".join(sorted(ctx.ref_families)) or "none"
    if hits and _declared_baseline(ctx) and ctx.strict and ref_ops is not None:
        # A baseline runs the reference's own operators: the declaration exempts those, not any library call of
        # the condemned family (another GEMM, SDPA where the reference writes attention out).
        foreign = sorted(op for fam in condemned for op in ops
                         if op_family(op) == fam and op not in ref_ops)
        if foreign and device_is_real:
            return failed("banned_ops", f"--strict: declared a PyTorch baseline (KFORGE_BASELINE = True) but executed "
                          f"{', '.join(foreign)}, which the reference does not run on these inputs "
                          f"({', '.join(sorted(op for op in ref_ops if aten_family(op) in condemned)) or 'none of its family'}): "
                          f"a library {families} answer, not a baseline of the reference")
    if hits and _declared_baseline(ctx):
        return warned("banned_ops", f"declared PyTorch baseline (KFORGE_BASELINE = True): executed {', '.join(hits)}, "
                      f"the reference's own operator ({families}) — a timing baseline, not a custom kernel")
    if hits and ctx.strict and device_is_real:
        return failed("banned_ops", f"--strict: the candidate's forward executed {', '.join(hits)} — the very "
                      f"operator ({families}) it should replace, on the problem's own inputs")
    if hits and ctx.strict:
        return skipped("banned_ops", f"{', '.join(hits)} ran, but on a {ctx.device.type} host where the candidate's "
                       "CUDA kernels cannot run (its fallback); decided on the GPU")
    if hits:
        where = "" if device_is_real else f" (its {ctx.device.type} fallback: the CUDA kernels cannot run here)"
        also = f"; also {', '.join(soft)}" if soft else ""
        return warned("banned_ops", f"disclosed: the forward runs PyTorch/library {families} operators{where}: "
                      f"{', '.join(hits)}{also} — allowed (library calls are reported, not condemned); "
                      "--strict fails them")
    if soft:
        return warned("banned_ops", f"disclosed: PyTorch {', '.join(soft)} inside the forward (reference families: "
                      f"{families}); not the replaced operator itself")
    return passed("banned_ops", f"no PyTorch {families} op executed in the forward")


@contextlib.contextmanager
def _profiler_witness() -> Any:
    """The op names torch's profiler records (RecordFunction, at the dispatcher's entry) for the block: a second
    witness beside the dispatch-mode record. A dispatch mode sees only ops that reach the Python dispatch key, and a
    forward can keep its ops from reaching it (torch._C._ExcludeDispatchKeyGuard over the Python key: red team
    round 15, adv_exclude_python_key — a --strict GEMM recorded as "no gemm op executed"); the profiler sees them. The
    legacy profiler (no kineto start-up, ~10 ms on a CPU) where torch has it, else torch.profiler; an empty set when
    neither runs (the dispatch record stands alone, as before)."""
    names: set[str] = set()
    prof: Any = None
    try:
        from torch.autograd import profiler_legacy

        prof = profiler_legacy.profile()
    except Exception:  # noqa: BLE001 — a torch without the legacy profiler
        try:
            from torch.profiler import ProfilerActivity, profile

            prof = profile(activities=[ProfilerActivity.CPU])
        except Exception:  # noqa: BLE001
            prof = None
    if prof is None:
        yield names
        return
    with prof:
        yield names
    try:
        events = prof.function_events if getattr(prof, "function_events", None) is not None else prof.events()
        names.update(str(e.name) for e in events if str(getattr(e, "name", "")).startswith("aten::"))
    except Exception:  # noqa: BLE001 — an older profiler API: the dispatch record stands alone
        pass


# Entry points of a library operator that skip the dispatcher (so no op record and no profiler event sees them):
# ATen's per-backend kernels called directly (at::cpu::addmm, at::native::mm, ...), a dispatcher op's `redispatch`
# (no RecordFunction), and the BLAS / cuDNN routines underneath. Matched on the op name's family (ops.ATEN_FAMILIES).
_DIRECT_ATEN = re.compile(r"^at::(?:cpu|cuda|native|meta|compositeexplicitautograd|compositeexplicitautogradnonfunctional|"
                          r"compositeimplicitautograd)::(\w+)\(|^at::_ops::(\w+)::redispatch\(")
_LIBRARY_ROUTINES = (("gemm", re.compile(r"^(?:cublas\w*[Gg]emm\w*|cublasLt\w*Matmul\w*|cblas_\w*gemm\w*|[sdhcz]gemm_?|"
                                         r"dnnl_\w*gemm\w*|mkl_\w*gemm\w*)$")),
                     ("conv", re.compile(r"^cudnnConvolution\w*$")))


def _extension_libraries(ctx: VerifyContext) -> list[str]:
    """The shared libraries the candidate's extension builds produced (a Python module's file, or the library
    load_inline(is_python_module=False) loaded into torch.ops)."""
    import os

    paths: list[str] = []
    own = os.path.dirname(torch.__file__)
    for load in ctx.extensions.loads:
        if not load.ok:
            continue
        module = sys.modules.get(load.name)
        found = [getattr(module, "__file__", None)]
        with contextlib.suppress(Exception):
            from torch.utils.cpp_extension import _get_build_directory

            found.append(os.path.join(_get_build_directory(load.name, verbose=False), f"{load.name}.so"))
        paths += [p for p in found if isinstance(p, str) and os.path.isfile(p)]
    with contextlib.suppress(Exception):
        paths += [p for p in torch.ops.loaded_libraries if os.path.isfile(p) and not p.startswith(own)]
    return sorted(set(paths))


def _linked_family_entries(ctx: VerifyContext) -> list[str]:
    """Library operators of a condemned family that the candidate's compiled code links to past the dispatcher (red
    team round 15, adv_cpp_native_gemm: at::cpu::addmm from a load_inline extension ran ATen's GEMM with no op record
    or profiler event, and --strict read "no gemm op executed"). Read from the libraries' undefined dynamic symbols
    (`nm -DC`): whatever the source spells, the loader binds these names. Empty where nm is missing."""
    import shutil
    import subprocess

    condemned = _condemned(ctx)
    nm = shutil.which("nm")
    if nm is None or not condemned:
        return []
    hits: set[str] = set()
    for path in _extension_libraries(ctx):
        try:
            listing = subprocess.run([nm, "-DC", "--undefined-only", path], capture_output=True, text=True,
                                     timeout=20, check=False).stdout
        except Exception:  # noqa: BLE001 — an unreadable library: the other witnesses stand
            continue
        for line in listing.splitlines():
            symbol = line.strip().removeprefix("U").strip()
            match = _DIRECT_ATEN.match(symbol)
            if match and aten_family(match.group(1) or match.group(2)) in condemned:
                hits.add(symbol.split("(")[0])
                continue
            bare = symbol.split("@")[0]
            hits.update(bare for family, routine in _LIBRARY_ROUTINES if family in condemned and routine.match(bare))
    return sorted(hits)


def _unrecorded_family_ops(ctx: VerifyContext, recorded: dict[str, int], seen: set[str]) -> list[str]:
    """Ops of a condemned family the profiler saw in the forward whose family the dispatch record has none of."""
    condemned = _condemned(ctx)
    recorded_families = {op_family(op) for op in recorded}
    return sorted(op for op in seen if aten_family(op) in condemned and aten_family(op) not in recorded_families)


def check_ops(ctx: VerifyContext) -> list[CheckResult]:
    """banned_ops + custom_kernel_used + silent_fallback from one instrumented forward on real inputs.

    PyTorch and library operators are disclosed, not condemned: an honest answer may keep a cuBLAS GEMM or
    a cuDNN convolution and fuse what follows, or be pure PyTorch, whatever the reference's operator is.
    `banned_ops` then warns, naming what ran. Under `--strict` (the KernelBench reading) running the
    operator family the problem asks to replace fails as `cheating`, unless the candidate declares itself
    a PyTorch baseline."""
    inputs = ctx.make_inputs(ctx.seed())
    calls_before = ctx.extensions.total_calls()
    raised_before = sum(ctx.extensions.raised.values())
    recorder = OpRecorder()
    with _profiler_witness() as seen, recorder:
        out = run(ctx.cand, clone_inputs(inputs))
        sync(ctx.device)
    del out
    ext_calls = ctx.extensions.total_calls() - calls_before
    ext_raised = sum(ctx.extensions.raised.values()) - raised_before
    custom_ops = recorder.custom_ops()
    ref_ops = None
    if ctx.strict and _declared_baseline(ctx):
        reference = OpRecorder()
        with preserved_state(ctx.ref), reference:
            ref_out = run(ctx.ref, clone_inputs(inputs))
        sync(ctx.device)
        del ref_out
        ref_ops = dict(reference.ops)
    results = [_library_ops(ctx, recorder.ops, ref_ops)]
    unrecorded = _unrecorded_family_ops(ctx, recorder.ops, seen)
    linked = _linked_family_entries(ctx) if ctx.extensions.loads else []
    if (unrecorded or linked) and not _declared_baseline(ctx) and (ctx.device.type == "cuda" or not _cuda_code(ctx)):
        why = "; ".join(
            ([f"the profiler saw {', '.join(unrecorded[:4])} in the forward, which never reached the dispatch record "
              "(ops kept from the Python dispatch key)"] if unrecorded else []) +
            ([f"its compiled code links {', '.join(linked[:4])} — a library operator entered past the dispatcher, "
              "where no op record sees whether it runs"] if linked else []))
        families = ", ".join(sorted(ctx.ref_families)) or "none"
        if ctx.strict:
            results[0] = failed("banned_ops", f"--strict: {why} — the very operator ({families}) it should replace")
        elif results[0].outcome == "pass":
            results[0] = warned("banned_ops", f"disclosed: {why} — library {families} operators, allowed (library "
                                "calls are reported, not condemned); --strict fails them")
    loads_ok = [x for x in ctx.extensions.loads if x.ok]
    loads_failed = [x for x in ctx.extensions.loads if not x.ok]
    cuda_impossible = ctx.device.type != "cuda" and not torch.cuda.is_available()
    unexpected_failures = [x for x in loads_failed if not (x.has_cuda and cuda_impossible)]
    if unexpected_failures or ext_raised:
        what = "; ".join(f"build {x.name} failed ({x.error})" for x in unexpected_failures)
        if ext_raised:
            what = (what + "; " if what else "") + f"{ext_raised} extension call(s) raised"
        results.append(failed("silent_fallback", f"{what} — and the candidate returned an output anyway (try/except "
                              "fallback instead of an error)"))
    elif loads_failed:
        results.append(skipped("silent_fallback", "CUDA extension builds cannot succeed on this host; decided on "
                               "the GPU"))
    else:
        results.append(passed("silent_fallback", "no extension build or call failed"))

    if not ctx.extensions.loads and not ctx.scan.kernel_names and not custom_ops:
        results.append(skipped("custom_kernel_used", "the candidate compiles no extension (pure PyTorch)"))
    elif ext_calls or custom_ops:
        detail = ", ".join(f"{k}×{v}" for k, v in ctx.extensions.calls.items()) or ", ".join(custom_ops)
        results.append(passed("custom_kernel_used", f"the forward called its compiled code: {detail}"))
    elif own := _own_kernels_on_device(ctx, inputs):
        results.append(passed("custom_kernel_used", "the device ran the candidate's kernels without a call into its "
                              f"extension from Python (a replayed CUDA graph, say): {', '.join(own[:4])}"))
    elif not loads_ok and (loads_failed or ctx.scan.kernel_names) and cuda_impossible:
        results.append(skipped("custom_kernel_used", "the extension is CUDA-only and this host has no GPU"))
    else:
        names = ", ".join(sorted(x.name for x in loads_ok)) or ", ".join(sorted(ctx.scan.kernel_names))
        results.append(failed("custom_kernel_used", f"custom code ({names}) is compiled but the forward never "
                              "called it on the problem's inputs"))
    return results


def _own_kernels_on_device(ctx: VerifyContext, inputs: Inputs) -> list[str]:
    """The candidate's own `__global__` kernels in the device's record of one forward (CUDA only): a forward that
    replays a captured CUDA graph runs them without calling its extension, which the call count cannot see."""
    names = sorted(ctx.scan.kernel_names)
    if ctx.device.type != "cuda" or not names:
        return []
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        out = run(ctx.cand, clone_inputs(inputs))
        sync(ctx.device)
    del out
    return sorted({str(e.name) for e in prof.events() if trace.is_own_kernel(str(e.name), names)})


def _hold_cycles(device: torch.device, hold_ms: float) -> int:
    """GPU clock cycles that keep torch.cuda._sleep busy for about hold_ms (measured: the clock varies)."""
    probe = 1 << 20
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(probe)  # once untimed: the first launch pays for loading the kernel
    start.record()
    torch.cuda._sleep(probe)
    end.record()
    end.synchronize()
    per_ms = probe / max(start.elapsed_time(end), 1e-3)
    return int(per_ms * hold_ms)


def check_cuda_profile(ctx: VerifyContext) -> list[CheckResult]:
    """CUDA only, from the profiler's record of one forward bracketed by two marker kernels on the caller's
    stream: whether the candidate's own kernels ran (`kernel_launch`), whether work on other streams was
    joined back before forward returned (`side_stream`), and how the GPU time splits between its own
    kernels and library ones (`library_share`)."""
    if ctx.device.type != "cuda":
        return [skipped("side_stream", "needs CUDA"), skipped("kernel_launch", "needs CUDA"),
                skipped("library_share", "needs CUDA (the profiler's kernel record)")]
    from torch.profiler import ProfilerActivity, profile

    inputs = ctx.make_inputs(ctx.seed())
    began = time.perf_counter()
    with preserved_state(ctx.cand):  # a history-dependent model (spectral_norm in training) meets the profiled
        run(ctx.cand, clone_inputs(inputs))  # call in the state the reference's comparison call starts from
    host_ms = (time.perf_counter() - began) * 1e3
    sync(ctx.device)
    with preserved_state(ctx.ref):
        ref_out = run(ctx.ref, clone_inputs(inputs))
    cand_inputs = clone_inputs(inputs)
    # Floating inputs reach their buffers only after the hold, written on the caller's stream; until then they
    # hold NaN. Work on another stream that does not wait for the caller's reads them before they are written.
    # (Not while calls are seeded from their inputs, active dropout: the seed is read from the inputs as given.)
    staged = [] if random_streams_paired() else [x for x in cand_inputs
                                            if isinstance(x, torch.Tensor) and x.is_cuda and x.is_floating_point()]
    values = [x.clone() for x in staged]
    for x in staged:
        x.fill_(float("nan"))
    marker = torch.zeros(1, device=ctx.device)
    caller = torch.cuda.current_stream(ctx.device)
    # The caller's stream is held while the forward is queued — by the driver's wait on a word the host sets once
    # the forward has returned (stream_gate.py), else a sleep kernel sized from the forward's host time. Side work
    # ordered after the caller's stream (as work reading the inputs must be) then starts with the end marker, so
    # if it is not joined it ends after the marker; side work ordered after nothing runs during the hold, on the
    # staged inputs' NaN, and its outputs say so.
    gate = StreamGate(ctx.device)
    hold_cycles = _hold_cycles(ctx.device, hold_ms=min(250.0, 4.0 * host_ms + 2.0))
    held = {"gated": False}

    def hold() -> None:  # right before the call: nothing of run()'s that reads device values comes after it
        held["gated"] = gate.hold(caller)
        if not held["gated"]:
            torch.cuda._sleep(hold_cycles)  # the hold: the next kernel on the caller's stream
        for x, value in zip(staged, values):
            x.copy_(value)
        marker.add_(1)  # ready marker: the caller's stream has written the inputs

    def end() -> None:  # right after the call returns (or raises)
        with torch.cuda.stream(caller):  # end marker: queued behind whatever the caller's stream now waits for
            marker.add_(1)
        gate.release()

    sync(ctx.device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        marker.add_(1)  # start marker: the first kernel of the trace, finished before the forward starts
        caller.synchronize()
        out = run(ctx.cand, cand_inputs, bracket=(hold, end))
        torch.cuda.synchronize(ctx.device)
    gated = held["gated"]
    forward = trace.split_markers(trace.stream_work(_chrome_trace(prof)), hold=not gated, staged=True)
    early_reads = None
    if forward is not None and forward.side_work():
        c = judged_compare(ctx, inputs, out, ref_out)
        if not c.ok:
            early_reads = c.message
    del out
    kernels = [k.name for k in forward.kernels] if forward else []
    ctx.notes["kernels"] = kernels[:40]
    results = []
    # The profiler's own op record: a second witness beside the dispatch-mode one in check_ops (strict only).
    condemned = _condemned(ctx)
    try:
        ops = sorted({e.name for e in prof.events() if str(getattr(e, "name", "")).startswith("aten::")
                      and aten_family(e.name) in condemned})
    except Exception:  # noqa: BLE001 — an older profiler API: the dispatch record in check_ops stands
        ops = []
    if ops and ctx.strict and not _declared_baseline(ctx):
        results.append(failed("banned_ops", f"--strict: the profiler saw {', '.join(ops[:4])} — the very operator "
                              f"({', '.join(sorted(ctx.ref_families))}) the candidate should replace — in its forward"))
    if early_reads is not None:
        results.append(failed("side_stream", "work on another stream read the inputs before the caller's stream had "
                              "written them (its inputs were written on the caller's stream after a hold; the "
                              f"forward's outputs are then wrong: {early_reads}) — it does not wait for the "
                              "caller's stream (wait_stream/event), so a caller's own preceding work races it"))
    else:
        results.append(side_stream_outcome(forward))
    results.append(library_share_outcome(ctx, forward))
    names = sorted(ctx.scan.kernel_names)
    if names:
        custom = sorted({k for k in kernels if trace.is_own_kernel(k, names)})
        if custom:
            results.append(passed("kernel_launch", f"custom kernels launched on the problem's inputs: {', '.join(custom[:6])}"))
        else:
            shown = ", ".join(k[:60] for k in kernels[:6]) or "none"
            results.append(failed("kernel_launch", f"none of the candidate's __global__ kernels ({', '.join(names[:6])}) "
                                  f"was launched on the problem's inputs; kernels seen: {shown}"))
    else:
        results.append(skipped("kernel_launch", "the candidate defines no __global__ kernel"))
    return results


def side_stream_outcome(forward: trace.ProfiledForward | None) -> CheckResult:
    """Side streams are honest when joined: every piece of their work ended before the end marker, queued
    on the caller's stream after forward returned, started."""
    if forward is None:
        return warned("side_stream", "the profiler recorded no kernels")
    join = trace.side_stream_join(forward)
    if not join.streams:
        n = len(forward.work)
        return passed("side_stream", f"all {n} kernel(s)/copies ran on the caller's current stream" if n else
                      "the forward launched no GPU work")
    if join.joined is None:
        return warned("side_stream", f"work ran on other streams ({join.describe_streams()}) but the end marker is "
                      "missing from the trace, so the join cannot be decided")
    if join.joined:
        return passed("side_stream", f"side stream(s) used and joined: {join.describe_streams()} — all ended before "
                      "the caller's stream resumed after forward returned (wait_stream/event)")
    late = ", ".join(sorted({trace.short_name(w.name) for w in join.late})[:3])
    return failed("side_stream", f"work on other streams was not joined into the caller's stream: {len(join.late)} "
                  f"op(s) ({late}) still ran up to {join.overrun_us:.1f} µs after a kernel queued on the caller's "
                  f"stream behind the forward had started ({join.describe_streams()}) — the caller's events and "
                  "ordering do not cover it")


def library_share_outcome(ctx: VerifyContext, forward: trace.ProfiledForward | None) -> CheckResult:
    """GPU time of the candidate's own kernels vs library kernels: a disclosure, never a verdict."""
    if forward is None or not forward.kernels:
        return warned("library_share", "the profiler recorded no kernels of the forward")
    shares = trace.time_shares(forward.kernels, ctx.scan.kernel_names)
    ctx.notes["library_share"] = shares.as_note()
    text = shares.describe()
    return passed("library_share", text) if not shares.library else warned("library_share", text)


def _chrome_trace(prof: Any) -> dict[str, Any]:
    """The profiler's chrome trace as a dict (empty when it cannot be exported: no trace, no claim)."""
    import json
    import os
    import tempfile

    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            return json.load(f)
    except Exception:  # noqa: BLE001
        return {}
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def check_timing_cross(ctx: VerifyContext, iters: int = 10, rounds: int = 3) -> CheckResult:
    """CUDA only: event time on the current stream vs host wall clock until the whole device is idle, for
    the candidate and — interleaved, as the baseline under the same conditions (other processes on the GPU,
    launch overhead) — the reference. Work that escapes the events (side streams, host threads, deferred
    launches) shows as a gap far larger than the reference's in every round; a host or GPU shared with other
    work can widen one round's gap, so a gap is confirmed by fresh rounds before it is a failure."""
    if ctx.device.type != "cuda":
        return skipped("timing_cross_check", "needs CUDA")
    inputs = ctx.make_inputs(ctx.seed())
    ref_in, cand_in = clone_inputs(inputs), clone_inputs(inputs)
    run(ctx.ref, ref_in)
    run(ctx.cand, cand_in)
    torch.cuda.synchronize(ctx.device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def measure(model: nn.Module, args: Inputs) -> tuple[float, float]:
        torch.cuda.synchronize(ctx.device)
        t0 = time.perf_counter()
        start.record()
        run(model, args)
        end.record()
        end.synchronize()
        torch.cuda.synchronize(ctx.device)
        wall = (time.perf_counter() - t0) * 1e3
        return start.elapsed_time(end), wall

    def med(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    gaps: list[str] = []
    for _ in range(rounds):
        samples: dict[str, list[tuple[float, float]]] = {"ref": [], "cand": []}
        for _ in range(iters):
            samples["ref"].append(measure(ctx.ref, ref_in))
            samples["cand"].append(measure(ctx.cand, cand_in))
        ev, wall = med([e for e, _ in samples["cand"]]), med([w for _, w in samples["cand"]])
        gap = med([w - e for e, w in samples["cand"]])
        ref_gap = med([w - e for e, w in samples["ref"]])
        ctx.notes["event_ms"], ctx.notes["wall_ms"] = ev, wall
        if not (gap > max(0.3 * wall, 0.2) and gap > 3 * ref_gap + 0.1):
            confirmed = f" (after {len(gaps)} round(s) with a wider gap: {', '.join(gaps)})" if gaps else ""
            return passed("timing_cross_check", f"event {ev:.3f} ms vs device-synchronised wall clock {wall:.3f} ms "
                                                f"(gap {gap:.3f} ms; reference's gap {ref_gap:.3f} ms){confirmed}")
        gaps.append(f"{gap:.3f} vs {ref_gap:.3f} ms")
    return failed("timing_cross_check", f"median CUDA-event time {ev:.3f} ms but {wall:.3f} ms until the device "
                  f"is idle (gap {gap:.3f} ms; the reference's gap {ref_gap:.3f} ms; in each of {rounds} rounds: "
                  f"{', '.join(gaps)}): the work escapes the timed stream (side stream, thread or deferred launch)")
