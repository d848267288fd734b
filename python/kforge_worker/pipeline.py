"""The evaluation pipeline: explicit stages run in order, each free to end the run with a verdict.

    load_problem → load_candidate → build_models → check_correctness → verify → time

A stage ends the run by raising StageFailure(verdict, reason). Every call into the problem's or the
candidate's code goes through ``ctx.guard_reference``/``ctx.guard_candidate``, which catch
BaseException (a candidate's sys.exit or KeyboardInterrupt included) and turn it into a verdict with
the traceback's useful lines — compile_error when the exception came out of a load_inline/load call.
New stages slot into STAGES. Verification lives in ``kforge_worker.checks`` (owned by the verification
work); the pipeline calls its hooks through ``call_checks`` at fixed points: before_import/after_import
around the candidate's import, run_checks (the verify stage), before_timing/after_timing around the timed
batch (the process fingerprint, once each side, never per call), on_failure when correctness failed, close
at the end. Without that package (or with ``use_checks=False``) the hooks are skipped.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import hashlib
import importlib
import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any

from . import PROTOCOL_VERSION, compiler_cache, extension_cache, frame_hook
from .channel import Channel
from .compile_capture import CompileCall, CompileRecorder, extension_dir
from .errors import exception_headline, summarize_exception
from .interference import (
    IdleMeter,
    adopt_orphans,
    cgroup_change,
    children_change,
    end_descendants,
    foreign_children,
    hook_change,
    hook_state,
    scheduling,
    scheduling_change,
)
from .loading import LoadError, check_candidate, check_problem, has_code, import_path, read_source
from .request import EvalRequest, parse_extension_cache

# Verdicts after which the checks may still name a cheat (on_failure): the candidate ran but was wrong.
CORRECTNESS_FAILURES = ("incorrect", "shape_mismatch", "runtime_error")


class AsyncDeviceError(RuntimeError):
    """A CUDA error surfaced by the synchronisation after a forward: the forward's kernels caused it."""


class StageFailure(Exception):
    """Ends the pipeline with this verdict and reason."""

    def __init__(self, verdict: str, reason: str) -> None:
        super().__init__(f"{verdict}: {reason}")
        self.verdict = verdict
        self.reason = reason


# Drawn once per worker process and never written anywhere: the request's seed fixes how both models are
# constructed (the candidate sees it), so the trials' input seeds must not be computable from it alone.
# Each trial's seed is recorded in the result, which is what reproducing a trial needs.
_PROCESS_SALT = os.urandom(16).hex()


def trial_seed(base: int, trial: int | str, salt: str | None = None) -> int:
    """A distinct 31-bit seed per trial (and for timing) from the request's seed and the process salt."""
    mix = _PROCESS_SALT if salt is None else salt
    digest = hashlib.sha256(f"kforge:{base}:{trial}:{mix}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def initial_result(request: EvalRequest) -> dict[str, Any]:
    """An EvalResult (protocol.ts) that is valid before anything ran; stages fill it in."""
    return {
        "protocol": PROTOCOL_VERSION,
        "problem": request.problem_name,
        "candidate": request.candidate_label,
        "origin": dict(request.origin),
        "verdict": "runtime_error",
        "reason": "kforge_worker did not finish",
        "environment": {
            "python": "",
            "torch": None,
            "cuda": None,
            "driver": None,
            "gpu": None,
            "device": request.device,
        },
        "precision": request.precision,
        "allowTf32": request.allow_tf32,
        "strict": request.strict,
        "paramSync": {"mode": "seed", "detail": "models were not built"},
        "compile": [],
        "tolerance": {"atol": request.atol or 1e-4, "rtol": request.rtol or 1e-4},
        "trials": [],
        "timing": None,
        "checks": [],
        "seconds": 0.0,
    }


def placed(torch: Any, value: Any, device: Any, dtype: Any) -> Any:
    """A tensor to the request's device (as KernelBench moves CPU inputs to the GPU) and the precision cast
    (floating tensors only); anything else as it is."""
    if isinstance(value, torch.Tensor):
        value = value.to(device)
        if dtype is not None and value.is_floating_point():
            value = value.to(dtype)
    return value


def _layout(torch: Any, value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), value.dtype)
    return ("value", repr(value))


def device_generation(torch: Any, problem: Any, device: Any) -> Any:
    """``device`` when ``get_inputs()`` can run with it as the default device and gives what it gives on the
    host (same values' count, shapes, dtypes; compared with a run on the meta device, which costs nothing),
    else None. A CUDA generator then draws the inputs: a few kernel launches instead of host randoms and a
    copy, which for a few hundred million fp16 values is seconds per call. Both processes decide the same
    way from the problem alone, so one seed still gives both the same inputs."""
    if device is None or device.type == "cpu":
        return None
    try:
        with torch.device("meta"):
            expected = _as_list(problem.get_inputs())
        with torch.device(device):
            probe = _as_list(problem.get_inputs())
    except Exception:  # noqa: BLE001 — a get_inputs that needs the host's default device keeps it
        return None
    finally:
        torch.seed()
    same = len(probe) == len(expected) and all(
        _layout(torch, a) == _layout(torch, b) for a, b in zip(probe, expected))
    return device if same else None


def resolve_input_device(owner: Any) -> Any:
    """``owner.input_device``, decided by device_generation on first use (False until then) and kept: one probe
    per process. The worker's EvalContext and the reference process both go through here, so they decide by
    the same rule and one seed gives both the same inputs."""
    if owner.input_device is False:
        owner.input_device = device_generation(owner.torch, owner.problem, owner.device)
    return owner.input_device


def input_generation(owner: Any) -> str:
    """Where owner's inputs are drawn, as the timing report says it (timing.inputs.generation)."""
    return "host" if resolve_input_device(owner) is None else "device"


def _as_list(raw: Any) -> list[Any]:
    return list(raw) if isinstance(raw, (list, tuple)) else [raw]


def seeded_inputs(torch: Any, problem: Any, seed: int, place: Callable[[Any], Any],
                  default_device: Any = None) -> list[Any]:
    """``get_inputs()`` under ``torch.manual_seed(seed)`` (with ``default_device`` as torch's default device
    when given: see device_generation), each value placed. Shared by the worker and the reference process,
    so one seed gives both the same inputs."""
    torch.manual_seed(seed)
    try:
        if default_device is not None:
            with torch.device(default_device):
                raw = problem.get_inputs()
        else:
            raw = problem.get_inputs()
    finally:
        # Leave the generators on a fresh random seed: torch.initial_seed() and the RNG state the candidate
        # sees must not reveal the seed its inputs came from.
        torch.seed()
    return [place(x) for x in _as_list(raw)]


def seeded_build(torch: Any, cls: Any, args: list[Any], seed: int, example: Callable[[], Any] | None = None,
                 lazy_may_stay: bool = False) -> Any:
    """cls(*args) under torch.manual_seed(seed) (Model and ModelNew get the same initial parameters). Lazy modules
    (nn.LazyLinear, ...) make their parameters at their first call: with `example` (the problem's get_inputs),
    that call is made here, under the same seed, so every process building the model gets the same ones.
    `lazy_may_stay`: a model whose first call fails on the CPU (a candidate's CUDA kernel) keeps its lazy
    parameters, which loading the reference's state_dict then makes."""
    torch.manual_seed(seed)
    try:
        model = cls(*args)
        if example is not None and isinstance(model, torch.nn.Module):
            try:
                materialize_lazy(torch, model, example)
            except Exception:
                if not lazy_may_stay:
                    raise
        return model
    finally:
        torch.seed()


def materialize_lazy(torch: Any, model: Any, example: Callable[[], Any]) -> None:
    """One call of `model` in eval mode on the example inputs (on the CPU, where it was built) when it holds
    uninitialised parameters or buffers; it changes nothing else: eval mode updates no running statistics, each
    module's own train flag is put back."""
    from torch.nn.parameter import is_lazy

    if not any(is_lazy(t) for t in [*model.parameters(), *model.buffers()]):
        return
    modes = {m: m.training for m in model.modules()}
    inputs = example()
    inputs = inputs if isinstance(inputs, (list, tuple)) else [inputs]
    inputs = [x.cpu() if isinstance(x, torch.Tensor) else x for x in inputs]
    model.eval()
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for module, training in modes.items():
            module.training = training


@dataclass
class EvalContext:
    """Everything the stages share; also what verification checks receive."""

    request: EvalRequest
    channel: Channel
    recorder: CompileRecorder
    result: dict[str, Any]
    torch: Any = None
    device: Any = None
    dtype: Any = None  # the precision cast, or None to keep the problem's dtypes
    problem: ModuleType | None = None
    candidate: ModuleType | None = None
    candidate_source: str = ""
    init_inputs: list[Any] = field(default_factory=list)
    ref_model: Any = None
    new_model: Any = None
    ref64: Any = None  # checks.float64.LockstepFloat64: the reference's float64 copy over the trials (in-process)
    atol: float = 1e-4
    rtol: float = 1e-4
    input_device: Any = False  # where get_inputs() draws (device_generation); False until first asked
    checks: ModuleType | None = None  # kforge_worker.checks, when present and enabled
    reference: Any = None  # reference_process.ReferenceProcess: the clean reference, when it runs on its own
    reference_start_error: str | None = None  # why the reference process could not be spawned
    memory_before: dict[str, Any] | None = None  # memory_capacity.snapshot() before the candidate exists
    reference_noise: float | None = None  # compare.py's allowance as the trials measured it (guarded)
    # Per output, the relative L2 distance from the reference a timed output of get_inputs() values may have
    # (compare.timed_precision_bound, from the reference's own error vs float64 in the trials); absent: no bound.
    timed_precision: dict[int, float] = field(default_factory=dict)
    judge_socket: tuple[int, int] | None = None  # (st_dev, st_ino) of the judge's channel, closed here before the import
    forward_peaks: Any = None  # checks.budget.ForwardPeaks of the first trial (CUDA): who an out-of-memory is charged to
    adopting: bool = False  # the worker is its descendants' subreaper (interference.adopt_orphans)
    # Child processes that existed before the candidate could run (an in-process caller's own, zombies included):
    # not the candidate's work, never interference.
    children_before: set = field(default_factory=set)
    # The shared extension folder the candidate's builds used; None when extension_cache.guard gave it a fresh one.
    extension_dir: str | None = None
    compiler_dir: str | None = None  # torch.compile's private cache directory (compiler_cache.py)

    def progress(self, stage: str, detail: str, fraction: float | None = None) -> None:
        self.channel.progress(stage, detail, fraction)

    def build_pair(self, seed: int, init_inputs: list[Any] | None = None) -> tuple[Any, Any]:
        """Model and ModelNew built from `seed`, placed and synced exactly as build_models builds the pair the checks
        judge (state_instances: other instances of the candidate, other weights, made the same way), from
        `init_inputs` instead of get_init_inputs()' when given (init_constants: other constructor arguments; the
        reference refusing them raises checks.context.ReferenceRejected). The candidate's constructor raising here is
        a plain exception for the check to report."""
        from .checks.context import ReferenceRejected

        torch, problem, candidate = self.torch, self.problem, self.candidate
        args = self.init_inputs if init_inputs is None else init_inputs
        try:
            ref = seeded_build(torch, problem.Model, copy.deepcopy(args), seed, example=problem.get_inputs)
            ref = _place(self, ref)
        except Exception as exc:  # noqa: BLE001 — other arguments the problem does not take: the check skips them
            if init_inputs is None:
                raise
            raise ReferenceRejected(f"raised {type(exc).__name__}: {str(exc)[:120]}") from None
        new = seeded_build(torch, candidate.ModelNew, copy.deepcopy(args), seed, example=problem.get_inputs,
                           lazy_may_stay=True)
        if frame_hook.take is not None and frame_hook.take(None) is not None:
            frame_hook.left.append("after ModelNew(...) (another instance)")
        new = _place(self, new)
        sync_parameters(ref, new)
        if frame_hook.take is not None and frame_hook.take(None) is not None:
            frame_hook.left.append("after ModelNew.to/load_state_dict (another instance)")
        return ref, new

    # -- calling foreign code ------------------------------------------------------------------
    def guard_candidate(self, what: str, fn: Callable[[], Any], verdict: str = "runtime_error") -> Any:
        try:
            out = fn()
        except BaseException as exc:  # noqa: BLE001 — SystemExit/KeyboardInterrupt from a candidate too
            if frame_hook.take is not None and frame_hook.take(None) is not None:
                frame_hook.left.append(f"after {what}")
            raise self.candidate_failure(what, exc, verdict) from None
        if frame_hook.take is not None and frame_hook.take(None) is not None:  # no frame entered before it
            frame_hook.left.append(f"after {what}")
        return out

    def guard_reference(self, what: str, fn: Callable[[], Any], verdict: str = "problem_error") -> Any:
        try:
            return fn()
        except BaseException as exc:  # noqa: BLE001
            raise self.reference_failure(what, exc, verdict) from None

    def candidate_failure(self, what: str, exc: BaseException, verdict: str = "runtime_error") -> StageFailure:
        """compile_error when exc came out of a load_inline/load call, else ``verdict`` with the traceback. The
        harness's own StageFailure raised from candidate code (its class is one lookup away, among Exception's
        subclasses) would otherwise end the run with a verdict of the candidate's choosing: cheating."""
        if isinstance(exc, StageFailure):
            evidence = (f"{what} raised the harness's own verdict exception (StageFailure({exc.verdict!r}, ...)): a "
                        "verdict is never the candidate's to give")
            self.result["checks"] = [c for c in self.result["checks"] if c.get("name") != "harness_state"] + [
                {"name": "harness_state", "outcome": "fail", "failVerdict": "cheating", "evidence": evidence}]
            return StageFailure("cheating", f"harness_state: {evidence}")
        call = self.recorder.failure_for(exc)
        if call is not None:
            return StageFailure("compile_error", self.recorder.reason_for(call))
        if _out_of_memory(exc):
            constrained = self.memory_constrained(exc)
            if constrained is not None:
                return constrained
            from .checks.budget import out_of_memory_not_the_candidates

            why = out_of_memory_not_the_candidates(self.forward_peaks)
            if why is not None:
                return StageFailure("problem_error", f"{what}: {why}: {summarize_exception(exc)}")
        return StageFailure(verdict, f"{what}: {summarize_exception(exc)}")

    def reference_failure(self, what: str, exc: BaseException, verdict: str = "problem_error") -> StageFailure:
        """The problem's own code failed: charged to the problem (e.g. it builds CUDA tensors and the run is on
        --device cpu) — unless it failed here after the candidate was imported while the clean reference
        process, which never imports the candidate, ran the same code: then the candidate's import broke
        this process (descriptors written over, the CUDA context damaged). Running out of memory stays the
        problem's (a problem that does not fit the machine)."""
        if verdict == "problem_error" and _out_of_memory(exc):
            constrained = self.memory_constrained(exc)
            if constrained is not None:
                return constrained
        if (verdict == "problem_error" and self.candidate is not None and self.reference is not None
                and not _out_of_memory(exc) and self._reference_started()):
            return StageFailure("runtime_error", f"the problem's {what} failed in the candidate's process after "
                                                 "the candidate was imported, while the clean reference process "
                                                 f"ran it: {summarize_exception(exc)}")
        return StageFailure(verdict, f"problem {what}: {summarize_exception(exc)}")

    def memory_constrained(self, exc: BaseException) -> StageFailure | None:
        """Out of memory after the candidate shrank what this process may use (memory_capacity.py): cheating, not
        the problem's size; None otherwise."""
        from .memory_capacity import finding

        check = finding(self, exc)
        if check is None:
            return None
        self.result["checks"] = [c for c in self.result["checks"] if c.get("name") != check["name"]] + [check]
        return StageFailure("cheating", f"memory_capacity: {check['evidence']}")

    def _reference_started(self) -> bool:
        """Whether the reference process loaded the problem and built Model (waiting for it if needed)."""
        try:
            self.reference.info  # noqa: B018
        except BaseException:  # noqa: BLE001 — it failed there too: the problem's own failure
            return False
        return True

    # -- inputs and forward passes -------------------------------------------------------------
    def prepare(self, value: Any) -> Any:
        """To the request's device (as KernelBench moves CPU inputs to the GPU) and the precision."""
        return placed(self.torch, value, self.device, self.dtype)

    def make_inputs(self, seed: int) -> list[Any]:
        """``get_inputs()`` under ``torch.manual_seed(seed)``, moved and cast."""
        where = resolve_input_device(self)
        return self.guard_reference("get_inputs()", lambda: seeded_inputs(self.torch, self.problem, seed, self.prepare,
                                                                         where))

    def clone_inputs(self, inputs: list[Any]) -> list[Any]:
        """What the candidate receives: copies, so it cannot alter the reference's inputs."""
        torch = self.torch
        return [x.clone() if isinstance(x, torch.Tensor) else copy.deepcopy(x) for x in inputs]

    def synchronize(self) -> None:
        if self.device is not None and self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def forward(self, model: Any, inputs: list[Any]) -> Any:
        """One inference call (no autograd, as KernelBench), finished on the device before returning."""
        with self.torch.no_grad():
            out = model(*inputs)
        try:
            self.synchronize()
        except BaseException as exc:  # noqa: BLE001 — say it was the forward's kernels, not the sync
            raise AsyncDeviceError(
                f"the device failed after forward returned (an error in the kernels it launched): {exception_headline(exc)}"
            ) from exc
        return out


# ---------------------------------------------------------------------------------------------------
# Stages


def _loading(fn: Callable[[], Any], verdict: str = "import_error") -> Any:
    """Runs a loading step; its LoadError (a one-line reason) becomes ``verdict`` (import_error for the
    candidate's file, problem_error for the problem's)."""
    try:
        return fn()
    except LoadError as exc:
        raise StageFailure(verdict, str(exc)) from None


def load_problem(ctx: EvalContext) -> None:
    path = ctx.request.problem_path
    ctx.progress("import", f"importing problem {ctx.request.problem_name}")
    _loading(lambda: read_source(path, "problem"), "problem_error")
    ctx.problem = ctx.guard_reference(
        f"{os.path.basename(path)} failed to import", lambda: import_path(path, "problem")
    )
    _loading(lambda: check_problem(ctx.problem, path), "problem_error")


def check_fit(ctx: EvalContext) -> None:
    """A problem whose one copy of inputs, parameters and outputs (measured on the meta device: nothing is
    allocated) is more than the device has free cannot be judged on this machine: the problem's error, with the
    numbers — not an allocation failure or an OOM kill charged to a candidate later."""
    from .checks.budget import does_not_fit

    why = does_not_fit(ctx.problem, ctx.device, ctx.dtype)
    if why is not None:
        raise StageFailure("problem_error", why)


# What each --precision casts to, by name: the reference process's spec is written before torch is imported.
_PRECISION_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def spawn_reference(ctx: EvalContext) -> None:
    """Starts the clean reference process first of all — before this process imports torch, so the two
    imports and CUDA initialisations overlap — and in any case before the candidate is imported (nothing the
    candidate does can shape its environment or command line). Its readiness is awaited when the reference
    is first needed; start_reference reports a start that failed."""
    judge_fd = ctx.request.judge_fd
    if judge_fd is not None:
        import stat

        try:
            st = os.fstat(judge_fd)
        except OSError:
            st = None
        if st is None or not stat.S_ISSOCK(st.st_mode):
            judge_fd = None  # not the CLI's socket: left alone; the CLI's record of the judge stays empty and says so
        else:
            ctx.judge_socket = (st.st_dev, st.st_ino)
    try:
        if not ctx.request.reference_in_own_process:
            return
        from .reference_process import ReferenceProcess, ReferenceProcessError

        # Written now, before the candidate exists: the judge takes its tolerance override from here, never from
        # anything the worker says later.
        spec = {"problemPath": os.path.abspath(ctx.request.problem_path), "device": ctx.request.device,
                "dtype": _PRECISION_NAMES.get(ctx.request.precision or ""), "seed": ctx.request.seed,
                "allowTf32": ctx.request.allow_tf32, "fp64": True, "atol": ctx.request.atol, "rtol": ctx.request.rtol}
        if judge_fd is not None:
            spec["judgeFd"] = judge_fd
        try:
            ctx.reference = ReferenceProcess(spec)
        except (OSError, ReferenceProcessError) as exc:
            ctx.reference_start_error = f"{exc}"
    finally:
        # The judge's channel belongs to the reference process alone: the worker's copy is closed at once.
        if judge_fd is not None:
            with contextlib.suppress(OSError):
                os.close(judge_fd)


def judge_channel_closed(ctx: EvalContext) -> None:
    """Right before the candidate is imported: no descriptor of this process may still lead to the judge's channel
    (the candidate could write the judge's records). /proc/self/fd is read for any descriptor onto the same socket
    (a dup the harness made by mistake); one found is closed, and said."""
    if ctx.judge_socket is None:
        return
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return
    leaked = []
    for name in names:
        try:
            fd = int(name)
            st = os.fstat(fd)
        except (ValueError, OSError):
            continue
        if (st.st_dev, st.st_ino) == ctx.judge_socket:
            leaked.append(fd)
            with contextlib.suppress(OSError):
                os.close(fd)
    if leaked:
        print(f"kforge_worker: closed descriptor(s) {leaked} onto the judge's channel before the import", flush=True)


def start_reference(ctx: EvalContext) -> None:
    """The reference process spawned at the start (spawn_reference): a start that failed leaves the reference
    in this process, said by a warning."""
    if ctx.reference_start_error is not None:
        _isolation_check(ctx, "warn", f"the reference process could not start ({ctx.reference_start_error}); the "
                                      "reference ran in the worker beside the candidate")


def _isolation_check(ctx: EvalContext, outcome: str, evidence: str) -> None:
    check = {"name": "reference_isolation", "outcome": outcome, "failVerdict": "cheating", "evidence": evidence}
    ctx.result["checks"] = [c for c in ctx.result["checks"] if c.get("name") != check["name"]] + [check]


def await_go(ctx: EvalContext) -> None:
    """A worker started ahead of its candidate (``kforge optimize`` starts it while the file is still being
    planned and timed) has now done all that does not need the candidate: it says so and waits for the CLI's
    ``go`` line on stdin. The candidate file is read, keyed and imported only after it."""
    if not ctx.request.wait_for_go:
        return
    if ctx.reference is not None:
        try:
            ctx.reference.info  # noqa: B018 — its start done too: neither process works while the CLI times
        except BaseException:  # noqa: BLE001, S110 — reported where the reference is first needed (build_models)
            pass
    ctx.progress("ready", "waiting for the candidate file")
    if sys.stdin.readline().strip() != "go":
        raise StageFailure("runtime_error", "the evaluation was called off before its candidate was ready")
    # What the suite knows of the candidate's extension builds once its prebuild is done (extension_cache.py): one JSON
    # line after the go, or nothing (the CLI has closed stdin).
    extensions = sys.stdin.readline().strip()
    if extensions:
        ctx.request = replace(ctx.request, extension_cache=parse_extension_cache(json.loads(extensions)))
    if ctx.reference is not None:
        # A suite stops a worker started ahead while its GPU times another candidate: those stops came before
        # this candidate existed, and are not counted against it (reference_process.arm_outside).
        with contextlib.suppress(Exception):  # a reference that failed to start says so where it is needed
            ctx.reference.request("arm")


def private_compiler_cache(ctx: EvalContext) -> None:
    """torch.compile's caches (inductor's, Triton's) in a directory of this evaluation's own, made now — after the go,
    when the suite's earlier candidates are done — and removed at its end (compiler_cache.py: a shared one is read by
    path and trusted, and any candidate can write it)."""
    ctx.compiler_dir = compiler_cache.make_private()
    compiler_cache.forget_loaded()
    if ctx.checks is not None:
        from .checks.torch_compiler import trust_cache_root

        trust_cache_root(ctx.compiler_dir)


def load_candidate(ctx: EvalContext) -> None:
    path = ctx.request.candidate_path
    torch = ctx.torch
    # The code the CLI read when the suite was set up, when it sent it: what the file holds now may be another
    # candidate's doing (an earlier one of the suite rewrote it); judged in the file's place, under its path.
    given = ctx.request.candidate_source
    # Extensions are cached by the candidate's bytes, read here: a worker started ahead (await_go) had no file.
    shared_dir = extension_dir(
        ctx.request.cache_dir, _read_bytes(path) if given is None else given.encode("utf-8"), torch.__version__,
        torch.version.cuda
    )
    # What another candidate (or run) left in that shared folder is not loaded: a fresh folder instead, said here.
    build_dir, found = extension_cache.guard(shared_dir, ctx.request.extension_cache)
    os.environ["TORCH_EXTENSIONS_DIR"] = build_dir
    if found:
        ctx.result["checks"].append({"name": "extension_cache", "outcome": "warn", "failVerdict": None,
                                     "evidence": extension_cache.evidence(shared_dir, build_dir, found)})
    else:
        ctx.extension_dir = shared_dir
    ctx.progress("import", f"importing candidate {ctx.request.candidate_label}")
    ctx.candidate_source = given if given is not None else _loading(lambda: read_source(path, "candidate"))
    if given is not None and not os.path.isfile(path):
        raise StageFailure("import_error", f"candidate file not found: {path}")
    if not has_code(ctx.candidate_source):
        raise StageFailure("no_code", f"candidate {os.path.basename(path)} has no code (empty, or only comments)")
    call_checks(ctx, "before_import")
    judge_channel_closed(ctx)
    ctx.candidate = ctx.guard_candidate(
        f"candidate {os.path.basename(path)} failed to import", lambda: import_path(path, "candidate", given),
        "import_error"
    )
    call_checks(ctx, "after_import")
    _loading(lambda: check_candidate(ctx.candidate, path))


def build_models(ctx: EvalContext) -> None:
    """Model and ModelNew from the same seed; the reference's state_dict loaded when keys match."""
    torch, seed = ctx.torch, ctx.request.seed
    problem, candidate = ctx.problem, ctx.candidate
    init = ctx.guard_reference("get_init_inputs()", lambda: list(problem.get_init_inputs()))
    ctx.init_inputs = [x.to(ctx.device) if isinstance(x, torch.Tensor) else x for x in init]

    def construct(cls: Any, args: list[Any]) -> Any:
        return seeded_build(torch, cls, args, seed, example=problem.get_inputs, lazy_may_stay=cls is not problem.Model)

    ctx.ref_model = ctx.guard_reference(
        "Model(*get_init_inputs())", lambda: construct(problem.Model, copy.deepcopy(ctx.init_inputs))
    )
    ctx.progress("import", "constructing ModelNew")
    ctx.new_model = ctx.guard_candidate(
        "ModelNew(*get_init_inputs())", lambda: construct(candidate.ModelNew, copy.deepcopy(ctx.init_inputs))
    )
    if not isinstance(ctx.new_model, torch.nn.Module):
        raise StageFailure("runtime_error", f"ModelNew(...) is a {type(ctx.new_model).__name__}, not a torch.nn.Module")
    ctx.ref_model = ctx.guard_reference("Model.to(device)", lambda: _place(ctx, ctx.ref_model))
    ctx.new_model = ctx.guard_candidate("ModelNew.to(device)", lambda: _place(ctx, ctx.new_model))
    ctx.result["paramSync"] = ctx.guard_candidate("load_state_dict", lambda: sync_parameters(ctx.ref_model, ctx.new_model))
    if ctx.reference is not None:
        _reference_ready(ctx)
    if getattr(problem, "KFORGE_SKIP_FP64", False):
        print("kforge_worker: problem sets KFORGE_SKIP_FP64; no float64 reference", flush=True)
        return
    if ctx.reference is not None:
        return  # the float64 evaluation runs in the reference process
    _float64_here(ctx)


def _float64_here(ctx: EvalContext) -> None:
    """The float64 evaluation in this process: a copy made in the first trial within the check budget."""
    from .checks.float64 import LockstepFloat64

    ctx.ref64 = LockstepFloat64(ctx.ref_model, ctx.device, ctx.forward)


class _PeakMeter:
    """The reference's and the candidate's forward peak allocations in the first trial (CUDA allocator
    statistics; nothing measured elsewhere): what an out-of-memory later is charged by."""

    def __init__(self, device: Any) -> None:
        self.active = device.type == "cuda"
        self.peaks: dict[str, int] = {}

    def measure(self, side: str, fn: Callable[[], Any]) -> Any:
        if not self.active:
            return fn()
        import torch

        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        out = fn()
        torch.cuda.synchronize()
        self.peaks[side] = max(0, torch.cuda.max_memory_allocated() - base)
        return out

    def result(self) -> Any:
        from .checks.budget import ForwardPeaks

        if "reference" not in self.peaks or "candidate" not in self.peaks:
            return None
        return ForwardPeaks(reference=self.peaks["reference"], candidate=self.peaks["candidate"])


def _stage_memory(peak: Any) -> dict[str, int]:
    """A stage's peaks, the keys a check's peaks have (absent where unknown: not Linux, not a GPU run)."""
    named = {"peakHostBytes": peak.host, "startHostBytes": peak.host_start, "peakDeviceBytes": peak.device}
    return {key: int(value) for key, value in named.items() if value is not None}


def _out_of_memory(exc: BaseException) -> bool:
    from .checks.budget import is_out_of_memory

    return is_out_of_memory(exc)


def _place(ctx: EvalContext, model: Any) -> Any:
    model = model.to(ctx.device)
    return model.to(ctx.dtype) if ctx.dtype is not None else model


def sync_parameters(ref: Any, new: Any, show: int = 4) -> dict[str, str]:
    """Loads ref's state_dict into new (strict) when the keys and shapes match; else reports why not."""
    ref_sd, new_sd = ref.state_dict(), new.state_dict()
    only_ref = [k for k in ref_sd if k not in new_sd]
    only_new = [k for k in new_sd if k not in ref_sd]

    def few(keys: list[str]) -> str:
        return ", ".join(keys[:show]) + (f" (+{len(keys) - show} more)" if len(keys) > show else "")

    if only_ref or only_new:
        parts = []
        if only_ref:
            parts.append(f"only in Model: {few(only_ref)}")
        if only_new:
            parts.append(f"only in ModelNew: {few(only_new)}")
        return {"mode": "seed", "detail": "state_dict keys differ — " + "; ".join(parts) + "; parameters synced by seed only"}
    from torch.nn.parameter import is_lazy

    # A lazy tensor of ModelNew's takes its shape from what is loaded into it (LazyModuleMixin's load hook).
    shapes = [f"{k} {list(new_sd[k].shape)} vs {list(v.shape)}" for k, v in ref_sd.items()
              if hasattr(v, "shape") and not is_lazy(new_sd[k]) and new_sd[k].shape != v.shape]
    if shapes:
        return {"mode": "seed", "detail": f"state_dict shapes differ — {few(shapes)}; parameters synced by seed only"}
    from .checks.context import handed_state

    new.load_state_dict(handed_state(ref_sd), strict=True)  # copies: never the reference's own tensors
    if not ref_sd:
        return {"mode": "state_dict", "detail": "neither model has parameters or buffers"}
    return {"mode": "state_dict", "detail": f"{len(ref_sd)} tensors loaded from Model (strict)"}


def tolerance_for(ctx: EvalContext, dtypes: list[Any]) -> tuple[float, float]:
    """Request override, else the problem's KFORGE_ATOL/KFORGE_RTOL, else KernelBench's per-dtype mark."""
    from .compare import default_tolerance

    default = default_tolerance(dtypes)
    problem = ctx.problem
    atol = ctx.request.atol or getattr(problem, "KFORGE_ATOL", None) or default
    rtol = ctx.request.rtol or getattr(problem, "KFORGE_RTOL", None) or default
    return float(atol), float(rtol)


def check_correctness(ctx: EvalContext) -> None:
    from .checks.context import has_dropout, seed_for_inputs
    from .compare import OutputStructureError, compare_output, flatten_outputs, reference_worst_error, rows_of

    torch, trials = ctx.torch, ctx.request.trials
    first_failure: str | None = None
    mismatch: str | None = None
    noise = 0.0  # the reference's own worst error vs float64 over the trials (compare.reference_noise)
    reference_error: dict[int, float] = {}  # per output, its worst relative L2 error vs float64 over the trials
    output_dtypes: list[Any] = []
    _keep_reference_noise(ctx, 0.0)  # whatever the module held before (an import may have written it)
    ctx.reference_noise = None  # guarded once the trials have measured it
    failed = 0
    # Active dropout: reference and candidate draw from the same random stream (each forward seeded from its
    # inputs), the clean process cannot hand its stream over, and a float64 copy draws other masks.
    paired = has_dropout(ctx.ref_model)
    if paired:
        ctx.ref64 = None
    scope: list[tuple[int, Any]] = []  # (trial, float64 evaluation) where it was sampled or given up
    peaks = _PeakMeter(ctx.device)
    for t in range(trials):
        ctx.progress("check", f"trial {t + 1}/{trials}", t / trials)
        seed = trial_seed(ctx.request.seed, t)
        remote = _remote_trial(ctx, seed) if ctx.reference is not None and not paired else None
        from_clean = remote is not None
        if remote is not None:
            # Inputs, reference outputs and the float64 evaluation from the clean process; the worker's own
            # reference runs in lockstep (the checks use it) and must agree with the clean one.
            inputs, ref_list, view = remote
            cand_inputs = ctx.clone_inputs(inputs)  # pristine, as the clean reference got them
            local_out = ctx.guard_reference("Model.forward", lambda: peaks.measure("reference", lambda: ctx.forward(
                ctx.ref_model, inputs)))
        else:
            inputs = ctx.make_inputs(seed)
            cand_inputs = ctx.clone_inputs(inputs)  # pristine, as the clean reference process gives them
            if ctx.ref64 is not None:
                ctx.ref64.before_reference(inputs)
            if paired:
                seed_for_inputs(inputs)
            ref_out = ctx.guard_reference("Model.forward", lambda: peaks.measure("reference", lambda: ctx.forward(
                ctx.ref_model, inputs)))
            ref_list = ctx.guard_reference("output", lambda: flatten_outputs(ref_out, "reference output"))
            del ref_out
            # After the reference's own call, on the pristine copy: whether the whole batch fits the check budget
            # depends on the outputs' size (checks/float64.py).
            view = ctx.ref64.evaluate(cand_inputs, ref_list) if ctx.ref64 is not None else None
            if view is None and ctx.ref64 is not None and ctx.ref64.note:
                from .checks.float64 import Float64Eval

                view = Float64Eval(None, note=ctx.ref64.note)
        if view is not None and (view.sampled or view.outputs is None):
            scope.append((t, view))
        if t == 0:
            output_dtypes = [o.dtype for o in ref_list]
            dtypes = [x.dtype for x in inputs if isinstance(x, torch.Tensor)] + [o.dtype for o in ref_list]
            ctx.atol, ctx.rtol = tolerance_for(ctx, dtypes)
            ctx.result["tolerance"] = {"atol": ctx.atol, "rtol": ctx.rtol}
        if remote is not None:
            mismatch = mismatch or _reference_disagrees(ctx, f"trial {t}", local_out, ref_list)
            del local_out, remote
        if paired:
            seed_for_inputs(cand_inputs)
        # The clean process's outputs and float64 evaluation are read below, after the candidate's call, from
        # files its process can find and write: sealed now, checked right after the call (reference_process.seal).
        seal = ctx.reference.importer.seal(("out", "o64_")) if from_clean else {}
        cand_out = ctx.guard_candidate("ModelNew.forward", lambda: peaks.measure("candidate", lambda: ctx.forward(
            ctx.new_model, cand_inputs)))
        if seal:
            written = ctx.reference.importer.broken(seal)
            if written:
                _isolation_check(ctx, "fail", f"trial {t}: the clean reference process's shared outputs "
                                 f"({', '.join(written)}) no longer hold what it wrote after the candidate's call "
                                 "(written in place, or replaced under the same name): the reference's answer and "
                                 "float64 evaluation for this trial are no longer its own")
                raise StageFailure("cheating", f"trial {t}: the reference's shared outputs were written or replaced "
                                   f"by the candidate's process ({', '.join(written)})")
        if t == 0:
            ctx.forward_peaks = peaks.result()
        peaks.active = False
        trial: dict[str, Any] = {"seed": seed, "passed": False, "outputs": [], "message": None}
        ctx.result["trials"].append(trial)
        try:
            cand_list = flatten_outputs(cand_out, "ModelNew output")
        except OutputStructureError as exc:
            trial["message"] = str(exc)
            _settle_isolation(ctx, mismatch)
            raise StageFailure("shape_mismatch", f"trial {t}: {exc}") from None
        if from_clean:
            _judge(ctx, lambda: ctx.reference.judge_trial(cand_list))
        if len(cand_list) != len(ref_list):
            trial["message"] = f"ModelNew returned {len(cand_list)} output tensor(s), Model {len(ref_list)}"
            _settle_isolation(ctx, mismatch)
            raise StageFailure("shape_mismatch", f"trial {t}: {trial['message']}")
        ref64_list = view.outputs if view is not None else None
        rows = view.rows if view is not None else None
        if ref64_list is not None and len(ref64_list) != len(ref_list):
            ref64_list = None
        verdicts = [
            compare_output(k, c, r, ref64_list[k] if ref64_list else None, ctx.atol, ctx.rtol, rows)
            for k, (c, r) in enumerate(zip(cand_list, ref_list))
        ]
        if ref64_list is not None:
            for r, r64 in zip(ref_list, ref64_list):
                r = rows_of(r, rows)
                if isinstance(r, torch.Tensor) and r.is_floating_point() and r.shape == r64.shape:
                    worst = reference_worst_error(r, r64)
                    noise = max(noise, worst) if math.isfinite(worst) else noise
        for k, v in enumerate(verdicts):
            rel = v.json["refVsFp64"]["relL2"] if ref64_list is not None else None
            if rel is not None:
                reference_error[k] = max(reference_error.get(k, 0.0), rel)
        trial["outputs"] = [v.json for v in verdicts]
        trial["passed"] = all(v.passed for v in verdicts)
        messages = [v.message for v in verdicts if v.message]
        trial["message"] = "; ".join(messages) if messages else None
        structural = next((v for v in verdicts if v.structural), None)
        if structural is not None:
            _settle_isolation(ctx, mismatch)
            raise StageFailure("shape_mismatch", f"trial {t} {structural.message}")
        if not trial["passed"]:
            failed += 1
            first_failure = first_failure or f"trial {t} {messages[0]}"
        del inputs, cand_inputs, cand_out, view, ref_list, cand_list, ref64_list
        if ctx.device.type == "cuda":
            torch.cuda.empty_cache()
    ctx.progress("check", f"{trials - failed}/{trials} trials passed", 1.0)
    _float64_scope(ctx, scope, trials)
    _keep_reference_noise(ctx, noise)
    _keep_timed_precision(ctx, reference_error, output_dtypes)
    _settle_isolation(ctx, mismatch)
    if ctx.reference is not None:
        ctx.reference.release()  # the trials' leftovers in the clean process, before the checks allocate here
    if first_failure is not None:
        raise StageFailure("incorrect", f"{first_failure} [{failed} of {trials} trials failed]")


def _judge(ctx: EvalContext, fn: Callable[[], None]) -> None:
    """Hands the candidate's outputs to the judge in the reference process (judge.py); its failure as a harness is
    a run that cannot be judged."""
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001
        _raise_if_remote(exc, ctx)
        raise


def _float64_scope(ctx: EvalContext, bounded: list[tuple[int, Any]], trials: int) -> None:
    """Says, as a check, when the trials' float64 evaluation did not cover every trial's whole batch: the check
    budget (checks/budget.py) made it sample a window of rows, or ended it (the reason), so a null "vs fp64"
    column is explained and a sampled one is known as such. Never a verdict; absent when it was whole."""
    if not bounded:
        return
    sampled = [v for _, v in bounded if v.outputs is not None]
    given_up = next(((t, v) for t, v in bounded if v.outputs is None), None)
    if given_up is not None:
        check = {"name": "float64_scope", "outcome": "skip", "failVerdict": None,
                 "evidence": f"no float64 evaluation from trial {given_up[0]} on: {given_up[1].note}"}
    else:
        check = {"name": "float64_scope", "outcome": "pass", "failVerdict": None,
                 "evidence": f"{len(sampled)} of {trials} trials: {sampled[-1].note}"}
    ctx.result["checks"] = [c for c in ctx.result["checks"] if c.get("name") != check["name"]] + [check]


def _keep_reference_noise(ctx: EvalContext, noise: float) -> None:
    """The comparisons without float64 (checks, sampled timed outputs, reference_isolation) allow
    compare.NOISE_MULTIPLE times the reference's own error seen in the trials — a value in compare.py's module
    state. It is set from what the trials measured here, whatever the module held, and guarded from then on
    (_guard_reference_noise)."""
    from .compare import set_reference_noise

    ctx.reference_noise = noise
    set_reference_noise(noise)


def _keep_timed_precision(ctx: EvalContext, reference_error: dict[int, float], dtypes: list[Any]) -> None:
    """The precision a timed output of get_inputs() values is held to (compare.timed_precision_bound), from the
    reference's own error vs float64 in the trials. The judge in the reference process holds the same bound from
    its own trials; this one names the path in the worker's timed_spot_check."""
    from .compare import timed_precision_bound
    from .reference_process import tf32_in_use

    tf32 = tf32_in_use(ctx.request.problem_path) if reference_error else False
    ctx.timed_precision = {}
    for k, rel in reference_error.items():
        bound = timed_precision_bound(rel, dtypes[k], tf32) if k < len(dtypes) else None
        if bound is not None:
            ctx.timed_precision[k] = bound


def _audit_reconciled(ctx: EvalContext) -> None:
    """The audit record (checks/integrity.py) lives in the candidate's process, one class lookup away (object's
    subclasses lead to AuditMonitor without an import or a walk). A copy of every event left the process as it
    was recorded (the reference process keeps it): an event there and not here was erased — cheating, whatever
    the event was."""
    from .checks.integrity import AuditMonitor

    monitor = AuditMonitor._instance
    if ctx.reference is None or monitor is None:
        return
    try:
        reply = ctx.reference.request("audits")
    except BaseException:  # noqa: BLE001 — a reference that ended was reported where it failed
        return
    local = [e.render() if hasattr(e, "render") else str(e) for e in list(monitor.events)]
    missing = [n for n in reply.get("notes", []) if n not in local]
    if int(reply.get("count", 0)) <= len(local) and not missing:
        return
    evidence = (f"the audit record in the candidate's process lost events the reference process also received "
                f"({int(reply.get('count', 0))} sent out, {len(local)} left here): "
                + "; ".join(missing[:5]))
    ctx.result["checks"] = [c for c in ctx.result["checks"] if c.get("name") != "runtime_audit"] + [
        {"name": "runtime_audit", "outcome": "fail", "failVerdict": "cheating", "evidence": evidence}]
    raise StageFailure("cheating", f"runtime_audit: {evidence}")


def _guard_reference_noise(ctx: EvalContext, when: str) -> None:
    """compare.py's allowance unchanged since the trials, else put back and cheating (harness_state)."""
    from .compare import reference_noise, set_reference_noise

    if ctx.reference_noise is None:
        return
    now = reference_noise()
    if now == ctx.reference_noise:
        return
    set_reference_noise(ctx.reference_noise)
    if any(c.get("name") == "harness_state" and c.get("outcome") == "fail" for c in ctx.result["checks"]):
        return
    check = {"name": "harness_state", "outcome": "fail", "failVerdict": "cheating",
             "evidence": f"{when}: the comparison allowance (kforge_worker.compare's reference noise) changed from "
                         f"{ctx.reference_noise:.3g}, measured in the trials, to {now:.3g} — with it every comparison "
                         "without float64 would pass; put back"}
    ctx.result["checks"] = [c for c in ctx.result["checks"] if c.get("name") != "harness_state"] + [check]


def _remote_trial(ctx: EvalContext, seed: int, probe: bool = False) -> tuple[list[Any], list[Any], list[Any] | None] | None:
    """The trial from the reference process; None when it cannot hand these inputs over (the reference
    process said so): the rest of the run keeps the reference in the worker, with a warning."""
    from .reference_process import Untransportable

    try:
        return ctx.reference.trial(seed, probe)
    except Untransportable as exc:
        ctx.reference.close()
        ctx.reference = None
        _isolation_check(ctx, "warn", f"{exc}: the reference ran in the worker beside the candidate")
        if not getattr(ctx.problem, "KFORGE_SKIP_FP64", False):
            _float64_here(ctx)
        return None
    except BaseException as exc:  # noqa: BLE001
        _raise_if_remote(exc, ctx)
        raise


def _reference_disagrees(ctx: EvalContext, label: str, local_out: Any, remote: list[Any]) -> str | None:
    """Why the worker's own reference disagrees with the clean process's (label: which call), or None."""
    from .checks.context import has_dropout
    from .compare import OutputStructureError, compare_output, flatten_outputs

    if has_dropout(ctx.ref_model):
        return None  # random by design: the two processes draw different masks
    try:
        local = flatten_outputs(local_out, "reference output")
    except OutputStructureError as exc:
        return f"{label}: {exc}"
    if len(local) != len(remote):
        return f"{label}: {len(local)} outputs here, {len(remote)} in the reference process"
    for k, (a, b) in enumerate(zip(local, remote)):
        verdict = compare_output(k, a, b, None, ctx.atol, ctx.rtol)
        if not verdict.passed:
            return f"{label} {verdict.message}"
    return None


def _settle_isolation(ctx: EvalContext, mismatch: str | None) -> None:
    """reference_isolation after the trials: the worker's reference agreed with the clean one, or it failed
    (cheating; the verdict is given with the other checks' failures, cheating first)."""
    if mismatch is not None:
        _isolation_check(ctx, "fail", f"the reference in the candidate's process answers differently from the clean "
                                      f"reference process ({mismatch}): something in this process changed the "
                                      "reference (its forward, a hook, a switch)")
        return
    if ctx.reference is None:
        return  # never started, or fell back (its warning stands)
    _isolation_check(ctx, "pass", f"inputs, reference outputs and the float64 evaluation of every trial came from "
                                  f"a clean process (pid {ctx.reference.proc.pid}) that never imported the candidate; "
                                  "the worker's own reference agreed on every trial")


def load_checks() -> ModuleType | None:
    """The verification package, or None when this checkout has none."""
    try:
        return importlib.import_module(f"{__package__}.checks")
    except ModuleNotFoundError as exc:
        if exc.name == f"{__package__}.checks":
            return None
        raise


def call_checks(ctx: EvalContext, hook: str, *args: Any) -> Any:
    """Calls ``checks.<hook>(ctx, *args)`` if the package defines it; a crash there becomes a "warn" check.

    Returned Check dicts are added to the result (a later check of the same name replaces an earlier
    one); the raw return value is handed back for hooks that return more than checks.
    """
    fn = getattr(ctx.checks, hook, None) if ctx.checks is not None else None
    if fn is None:
        return None
    try:
        value = fn(ctx, *args)
    except StageFailure:
        raise
    except BaseException as exc:  # noqa: BLE001 — a bug in a check is never the candidate's verdict
        value = [{"name": f"checks.{hook}", "outcome": "warn", "failVerdict": None, "evidence": f"crashed: {summarize_exception(exc)}"}]
    found = value[0] if hook == "on_failure" and isinstance(value, tuple) else value
    if isinstance(found, list):
        names = {c.get("name") for c in found}
        ctx.result["checks"] = [c for c in ctx.result["checks"] if c.get("name") not in names] + found
    return value


def fail_on_checks(ctx: EvalContext) -> None:
    """Ends the run with the first failed check's failVerdict, cheating first."""
    for check in sorted(ctx.result["checks"], key=lambda c: c.get("failVerdict") != "cheating"):
        if check.get("outcome") == "fail" and check.get("failVerdict") not in (None, "correct"):
            raise StageFailure(check["failVerdict"], f"{check['name']}: {check['evidence']}")


def verify(ctx: EvalContext) -> None:
    """The verification checks on a candidate that passed every trial; a failed check gives its verdict."""
    if ctx.checks is not None and hasattr(ctx.checks, "run_checks"):
        ctx.progress("verify", "running verification checks")
        call_checks(ctx, "run_checks")
    _probe_isolation(ctx, "after the verification checks")
    _guard_reference_noise(ctx, "after the verification checks")
    fail_on_checks(ctx)


def _probe_isolation(ctx: EvalContext, when: str) -> None:
    """The worker's reference (which the runtime checks used) against the clean one once more, on fresh
    inputs, both references' state restored afterwards: a reference changed after the trials is caught."""
    if ctx.reference is None or any(c.get("name") == "reference_isolation" and c.get("outcome") == "fail"
                                    for c in ctx.result["checks"]):
        return
    from .checks.context import preserved_state

    seed = trial_seed(ctx.request.seed, f"probe:{when}")
    inputs, ref_list, _ = _remote_trial(ctx, seed, probe=True) or (None, None, None)
    if inputs is None:
        return
    with preserved_state(ctx.ref_model):
        local_out = ctx.guard_reference("Model.forward", lambda: ctx.forward(ctx.ref_model, inputs))
        mismatch = _reference_disagrees(ctx, when, local_out, ref_list)
    del local_out, ref_list, inputs
    ctx.reference.release()  # the probe's inputs and outputs, before the timing's pool is built there
    if mismatch is not None:
        _settle_isolation(ctx, mismatch)


def time_models(ctx: EvalContext) -> None:
    """Reference and candidate timed call by call, alternating, by the same protocol: before every pair both
    sides get the next of their rotating input sets, rewritten with fresh get_inputs() values (outside the
    timed region), and a secret sample of pairs has the candidate's output checked against the reference's
    for the same inputs (timed_inputs.py) — caches and switches that serve only timed calls fail there."""
    from .checks.context import has_dropout
    from .environment import sm_clock_mhz
    from .timed_inputs import FreshInputPool, OutputSampler
    from .timing import clock_for, measure_interleaved

    options = ctx.request.timing
    if not options.enabled:
        return
    torch = ctx.torch
    on_cuda = ctx.device.type == "cuda"
    counter = {"n": 0}

    def secret_seed() -> int:
        counter["n"] += 1
        return trial_seed(ctx.request.seed, f"timing:{counter['n']}")

    measured = clock_for(ctx.device)
    cand_ms: dict[str, float] = {}
    mark = getattr(ctx.reference, "mark", None) if ctx.reference is not None else None

    class HandedClock:
        """The candidate's clock; each timed call's time is kept for the judge's hand-over after the pair, with no
        candidate code in between (its list in the timing loop, and the statistics computed here, are one walk or
        one patched module away from candidate code; the judge recomputes the speedup from what it was handed)."""

        method = measured.method
        flush_bytes = measured.flush_bytes

        def time_ms(self, fn: Callable[[], Any]) -> float:
            if mark is not None:  # kernel-stamped marks around the call, for the judge (clock_marks.py)
                mark(b"s")
                ms = measured.time_ms(fn)
                mark(b"e")
            else:
                ms = measured.time_ms(fn)
            cand_ms["last"] = ms
            if idle.deferred is None:  # code set to run later must still be installed when the call returns
                left = hook_change(hooks_before)
                idle.deferred = left and (f"the candidate's timed call {left} (outside the timed region, or while "
                                          "the reference is timed)")
            return ms

    clock = HandedClock() if ctx.reference is not None else measured
    side = {"now": "Model"}
    outputs: dict[str, Any] = {}
    # Active dropout: both sides of a pair start from the same generator state (taken between pairs, set back
    # on the host before each call: no device work in the timed region), so a sampled pair draws one mask; the
    # clean process cannot share its stream.
    paired = has_dropout(ctx.ref_model)
    rng: dict[str, Any] = {}

    def same_stream() -> None:
        if paired and rng:
            torch.set_rng_state(rng["cpu"])
            if on_cuda:
                torch.cuda.set_rng_state_all(rng["cuda"])

    def next_stream() -> None:
        if paired:
            rng["cpu"] = torch.get_rng_state()
            if on_cuda:
                rng["cuda"] = torch.cuda.get_rng_state_all()

    remote = _remote_timing(ctx) if ctx.reference is not None and not paired else None
    pool: Any = remote if remote is not None else FreshInputPool(
        ctx.make_inputs, secret_seed, generation=input_generation(ctx),
        accepts=lambda given, rolled: _accepts_rolled(ctx, given, rolled))
    # after_pair runs before the next advance: the pool's `varied` is still the pair's own
    sampler = OutputSampler(lambda cand, ref: _sampled_compare(ctx, cand, ref, getattr(pool, "varied", False),
                                                               getattr(pool, "cand_inputs", None)))
    idle = IdleMeter()  # the candidate's process must be quiet while the reference process is timed
    hooks_before = hook_state()
    ref_aliases, sampler.reference_overlaps = _reference_aliases_inputs(ctx)
    inputs_kept = None if _reference_writes_inputs(ctx) else getattr(pool, "inputs_written", None)

    def ref_fn() -> Any:
        side["now"] = "Model"
        same_stream()
        if remote is not None:
            remote.call(timed=False)
            outputs["Model"] = remote.last_outputs  # fetched from the reference process only when sampled
            return None
        outputs["Model"] = ctx.ref_model(*pool.ref_inputs())
        return outputs["Model"]  # the CPU clock reads a byte of each of its pages before it stops (timing.page_reader)

    class RemoteClock:
        """The reference's calls, timed by the reference process's own clock (the same kind as ours)."""

        method = remote.method if remote is not None else ""
        flush_bytes = remote.flush_bytes if remote is not None else 0

        def time_ms(self, fn: Callable[[], Any]) -> float:
            side["now"] = "Model"
            ms = idle.measure(lambda: remote.call(timed=True))  # type: ignore[union-attr]
            outputs["Model"] = remote.last_outputs  # type: ignore[union-attr]
            return ms

    def before(which: str) -> None:
        # The staged fresh values into the candidate's set right before its call (outside its timed region),
        # as the reference process wrote its own set right before the pair.
        if which == "cand" and remote is not None:
            side["now"] = "inputs"
            remote.take_inputs()

    def cand_fn() -> Any:
        side["now"] = "ModelNew"
        same_stream()
        outputs["ModelNew"] = ctx.new_model(*pool.cand_inputs())
        if frame_hook.take is not None and frame_hook.take(None) is not None:
            frame_hook.left.append("ModelNew.forward (timed)")
        return outputs["ModelNew"]  # the CPU clock reads a byte of each of its pages before it stops

    def between(pair: int, more: bool) -> None:
        # Outside every timed region: the previous pair's outputs (maybe) checked, then fresh inputs.
        if outputs:
            side["now"] = "compare"
            ctx.synchronize()
            if remote is not None:  # the judge gets this pair's outputs before anything decides whether it looks
                _judge(ctx, lambda: ctx.reference.commit(_flat_or_none(outputs.get("ModelNew")),
                                                         cand_ms.pop("last", None)))
            _guard_reference_noise(ctx, f"timing, before pair {pair}")
            sampler.after_pair(pair - 1, outputs.pop("Model", None), outputs.pop("ModelNew", None),
                               None if ref_aliases else pool.cand_inputs(), getattr(pool, "varied", False),
                               inputs_kept)
            outputs.clear()
            if remote is not None and idle.tampered is None:
                idle.tampered = (remote.outside or
                                 scheduling_change(ctx.reference.scheduling, scheduling(ctx.reference.proc.pid)) or
                                 cgroup_change(getattr(ctx.reference, "cgroup", None), ctx.reference.proc.pid) or
                                 children_change({ctx.reference.proc.pid} | ctx.children_before, ctx.adopting))
        if more:
            side["now"] = "inputs"
            pool.advance()
            next_stream()

    index = ctx.device.index if ctx.device.index is not None else (torch.cuda.current_device() if on_cuda else 0)
    start_clock = sm_clock_mhz(index) if on_cuda else None
    ctx.progress("time", f"timing ({clock.method})", 0.0)

    # The process fingerprint right before the timed batch; after_timing takes it right after (never per call).
    call_checks(ctx, "before_timing")
    fail_on_checks(ctx)

    try:
        with torch.no_grad():
            timing = measure_interleaved(ref_fn, cand_fn, options, clock, lambda d, f: ctx.progress("time", d, f),
                                         between=between, ref_clock=RemoteClock() if remote is not None else None,
                                         before=before)
    except StageFailure as failure:
        if side["now"] == "ModelNew":  # raised from the candidate's own code: a verdict is never the candidate's to give
            raise ctx.candidate_failure("ModelNew.forward during timing", failure) from None
        raise
    except BaseException as exc:  # noqa: BLE001 — attributed to whichever side was running
        _raise_if_remote(exc, ctx)
        if side["now"] == "Model":
            raise ctx.reference_failure("Model.forward during timing", exc) from None
        if side["now"] == "inputs":
            raise ctx.reference_failure("get_inputs() during timing", exc) from None
        raise ctx.candidate_failure("ModelNew.forward during timing", exc) from None
    finally:
        outputs.clear()
    timing["smClockMhz"] = {"start": start_clock, "end": sm_clock_mhz(index) if on_cuda else None}
    timing["method"] += f"; {pool.describe()}; {len(sampler.checks)} pairs' outputs compared (drawn at random)"
    timing["inputs"] = {"sets": pool.sets, "refreshed": pool.refreshed, "generation": pool.generation,
                        "reference": "process" if remote is not None else "in_process", **sampler.summary()}
    if remote is not None:
        timing["method"] += f"; {remote.method}"
    ctx.result["timing"] = timing
    if remote is not None and idle.tampered is None:
        idle.tampered = remote.outside  # a stop seen in the last call's reply
    spot = sampler.check(options.warmup_iters)
    added = [spot] + ([idle.check(os.environ.get("OMP_WAIT_POLICY"))] if remote is not None else [])
    added.append(_timed_state(ctx, remote is not None))
    names = {c["name"] for c in added}
    ctx.result["checks"] = [c for c in ctx.result["checks"] if c.get("name") not in names] + added
    ctx.progress("time", f"speedup {timing['speedup']:.3f}x", 1.0)
    call_checks(ctx, "after_timing")
    _guard_reference_noise(ctx, "after timing")
    fail_on_checks(ctx)


def _timed_state(ctx: EvalContext, remote: bool) -> dict[str, Any]:
    """The candidate's buffers after the timed calls against the reference's that ran beside them (timed_state.py)."""
    from .timed_state import timed_state_check

    if not any(True for _ in ctx.ref_model.buffers()):
        return {"name": "timed_state", "outcome": "skip", "failVerdict": "cheating", "evidence": "no buffers"}
    try:
        reference = ctx.reference.buffers() if remote else dict(ctx.ref_model.named_buffers())
    except BaseException as exc:  # noqa: BLE001 — the reference's side failed: undecided, said
        return {"name": "timed_state", "outcome": "warn", "failVerdict": "cheating",
                "evidence": f"the reference's buffers could not be read: {summarize_exception(exc, 1)}"}
    by_name = timed_state_check(reference, ctx.new_model, ctx.atol, ctx.rtol)
    if by_name["outcome"] == "fail":
        return by_name
    return _timed_state_behaviour(ctx, reference, by_name)


def _timed_state_behaviour(ctx: EvalContext, reference: dict[str, Any], by_name: dict[str, Any]) -> dict[str, Any]:
    """The state after the timing judged by what it does, whatever it is called: a candidate whose statistics
    live under names of its own (or in plain attributes) has nothing the by-name comparison can read. For a
    reference with mode-dependent layers (BatchNorm, Dropout), both models are put in eval mode as the timing
    left them — the worker's reference given the buffers the timed reference ended with — and compared on fresh
    inputs by the trials' pass mark. Both models' state and modes are restored afterwards."""
    from .checks.context import mode_dependent, preserved_state

    torch = ctx.torch
    if not mode_dependent(ctx.ref_model):
        return by_name
    try:
        with preserved_state(ctx.ref_model, ctx.new_model), torch.no_grad():
            own = dict(ctx.ref_model.named_buffers())
            for name, value in reference.items():
                if name in own and isinstance(value, torch.Tensor) and own[name].shape == value.shape:
                    own[name].copy_(value.to(own[name].device))
            ctx.ref_model.eval()
            ctx.new_model.eval()
            inputs = ctx.make_inputs(int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF)
            ref_out = ctx.ref_model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
            try:
                cand_out = ctx.new_model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
            except BaseException as exc:  # noqa: BLE001 — the candidate's own failure decides, it is not undecided
                raised = summarize_exception(exc, 1)
            else:
                raised = None
                ok, why = _sampled_compare(ctx, cand_out, ref_out)
    except BaseException as exc:  # noqa: BLE001 — undecided: the by-name result stands, the reason said
        by_name = dict(by_name)
        by_name["evidence"] += f"; eval mode after the timing not compared: {summarize_exception(exc, 1)}"
        return by_name
    if raised is not None:
        # It answered in eval mode before the timing (state_train_eval); a raise now is the one call that would
        # show what the timed calls left in its state — read as that state being wrong, not as "not compared".
        return {"name": "timed_state", "outcome": "fail", "failVerdict": "cheating",
                "evidence": "after the timed calls the candidate raised in eval mode, where the reference answered "
                            f"({raised}): the one call that judges the state the timing left (whatever it is called) "
                            "was refused"}
    if not ok:
        return {"name": "timed_state", "outcome": "fail", "failVerdict": "cheating",
                "evidence": "after the timed calls the candidate's state is not the reference's: in eval mode, with "
                            "the state both were left in, its output differs from the reference's ("
                            f"{why}) — a side effect skipped while timed (compared by behaviour, whatever the "
                            "state is called)"}
    done = dict(by_name)
    done["outcome"] = "pass"
    done["evidence"] = (by_name["evidence"] if by_name["outcome"] == "pass" else "no buffers shared by name") + \
        "; eval mode with the state the timing left: outputs match the reference's"
    return done


def _reference_aliases_inputs(ctx: EvalContext) -> tuple[bool, Any]:
    """Whether the reference's own outputs share storage with its inputs (an in-place problem): then the
    candidate's timed outputs may too; and how its outputs share memory (``timed_inputs.OutputSharing``: an
    expanded view, two outputs in one storage — then the candidate's may too; None when undecided). One call of the worker's
    reference on fresh inputs, state restored."""
    from .checks.context import _overlaps, _storage_span, preserved_state
    from .compare import flatten_outputs
    from .timed_inputs import internal_overlaps

    torch = ctx.torch
    try:
        inputs = ctx.make_inputs(trial_seed(ctx.request.seed, "timing:aliasing"))
        with preserved_state(ctx.ref_model), torch.no_grad():
            raw = ctx.ref_model(*inputs)
            outs = flatten_outputs(raw)
    except Exception:  # noqa: BLE001 — undecided: the candidate's aliasing is then not held against it
        return True, None
    spans = [_storage_span(x) for x in inputs if isinstance(x, torch.Tensor)]
    return any(_overlaps(_storage_span(o), s) for o in outs for s in spans), internal_overlaps(raw)


def _reference_writes_inputs(ctx: EvalContext) -> bool:
    """Whether the reference's forward writes its inputs (an in-place problem: then the candidate's may too). One call
    of the worker's reference on fresh inputs, state restored; undecided counts as writing (nothing held against the
    candidate)."""
    from .checks.context import bitwise_equal, clone_inputs, preserved_state

    torch = ctx.torch
    try:
        inputs = ctx.make_inputs(trial_seed(ctx.request.seed, "timing:writes"))
        given = clone_inputs(inputs)
        with preserved_state(ctx.ref_model), torch.no_grad():
            ctx.ref_model(*inputs)
    except Exception:  # noqa: BLE001
        return True
    return not bitwise_equal(list(inputs), list(given))


def _reference_ready(ctx: EvalContext) -> None:
    """Waits for the reference process's start (the problem loaded and Model built there)."""
    try:
        ctx.reference.info  # noqa: B018
    except BaseException as exc:  # noqa: BLE001
        _raise_if_remote(exc, ctx)
        raise


def _remote_timing(ctx: EvalContext) -> Any:
    from .reference_process import RemoteTiming

    try:
        return RemoteTiming(ctx.reference, vary=call_checks(ctx, "timed_variant"))
    except BaseException as exc:  # noqa: BLE001
        _raise_if_remote(exc, ctx)
        raise


def _raise_if_remote(exc: BaseException, ctx: EvalContext | None = None) -> None:
    """A failure reported by the reference process: the problem's (problem_error) or the harness's — unless the
    candidate lowered that process's memory limits from outside (memory_capacity.reference_finding): cheating."""
    from .reference_process import ProblemFailure, ReferenceProcessError

    if isinstance(exc, ProblemFailure) and ctx is not None:
        from .memory_capacity import reference_finding

        check = reference_finding(ctx)
        if check is not None:
            ctx.result["checks"] = [c for c in ctx.result["checks"] if c.get("name") != check["name"]] + [check]
            raise StageFailure("cheating", f"memory_capacity: {check['evidence']}") from None
    if isinstance(exc, ProblemFailure):
        raise StageFailure("problem_error", f"problem {exc.what}: {exc.reason} (in the reference process)") from None
    if isinstance(exc, ReferenceProcessError):
        raise StageFailure("runtime_error", f"{exc}: the run cannot be judged") from None


def _flat_or_none(out: Any) -> list[Any]:
    """The candidate's outputs flattened as the trials do; what does not flatten goes to the judge as nothing (a
    wrong answer there)."""
    from .compare import OutputStructureError, flatten_outputs

    try:
        return flatten_outputs(out, "ModelNew output")
    except OutputStructureError:
        return []


def _accepts_rolled(ctx: EvalContext, given: Any, rolled: Any) -> bool:
    """reference_process.accepts_rolled for the worker's own reference (the timing in this process)."""
    from .reference_process import accepts_rolled

    torch = ctx.torch
    devices = [torch.cuda.current_device()] if ctx.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):  # active dropout's paired streams stay where they were
        return accepts_rolled(torch, ctx.ref_model, ctx.forward, given, rolled)


def _sampled_compare(ctx: EvalContext, cand_out: Any, ref_out: Any, varied: bool = False,
                     inputs: Callable[[], Any] | None = None) -> tuple[bool, str | None]:
    """The trials' pass mark on one pair of timed outputs (ref_out: the output, or how to fetch it); for a pair whose
    inputs were off the distribution, no row far off (compare.compare_timed) — far-off rows judged against the
    float64 evaluation of the pair's ``inputs()`` (the candidate's, unchanged: inputs_written) before they are
    charged."""
    from .compare import OutputStructureError, compare_timed, flatten_outputs, rounding_against

    refs = flatten_outputs(ref_out() if callable(ref_out) else ref_out, "reference output")
    try:
        cands = flatten_outputs(cand_out, "ModelNew output")
    except OutputStructureError as exc:
        return False, str(exc)
    if len(cands) != len(refs):
        return False, f"ModelNew returned {len(cands)} output tensor(s), Model {len(refs)}"
    rounding = rounding_against(lambda: _pair_float64(ctx, inputs(), refs)) if varied and inputs else None
    for k, (c, r) in enumerate(zip(cands, refs)):
        passed, why = compare_timed(k, c, r, ctx.atol, ctx.rtol, varied, ctx.timed_precision.get(k), rounding)
        if not passed:
            return False, why
    return True, None


def _pair_float64(ctx: EvalContext, inputs: Any, refs: list[Any]) -> Any:
    """The float64 evaluation of a timed pair's inputs by the worker's reference, in the memory the device has free
    (checks/float64.for_check, as the judge of a check's miss makes it); None without the checks' context."""
    from .checks.float64 import for_check

    verify_ctx = getattr(ctx.checks, "context", None)
    if verify_ctx is None or inputs is None:
        return None
    try:
        return for_check(verify_ctx, list(inputs), refs, free_memory=True)
    except Exception:  # noqa: BLE001 — no float64 view: the plain comparison stands
        return None


STAGES: list[Callable[[EvalContext], None]] = [
    load_problem,
    check_fit,
    start_reference,
    await_go,
    private_compiler_cache,
    load_candidate,
    build_models,
    check_correctness,
    verify,
    time_models,
]


def evaluate(request: EvalRequest, channel: Channel, use_checks: bool = True,
             keep: list[Any] | None = None) -> dict[str, Any]:
    """Runs every stage and returns the EvalResult; never raises for anything a candidate does.

    use_checks=False skips the verification hooks (the worker's own tests of its stages).
    keep: a process that writes the result and exits (the worker's main) passes a list: once the verdict is
    decided, the garbage collector stops and the run's objects are kept in it, so no finaliser of the
    candidate's (``__del__``, ``weakref.finalize``) runs between the verdict and the result line to rewrite it.
    """
    started = time.perf_counter()
    result = initial_result(request)
    recorder = CompileRecorder(
        on_start=lambda name: channel.progress("compile", f"building extension {name}"),
        on_end=lambda call: channel.progress("compile", _compile_summary(call), 1.0),
    )
    ctx = EvalContext(request=request, channel=channel, recorder=recorder, result=result)
    saved_ext_dir = os.environ.get("TORCH_EXTENSIONS_DIR")
    saved_compiler_env = {name: os.environ.get(name) for name in compiler_cache.VARIABLES}
    installed = False
    if request.reference_in_own_process and "torch" not in sys.modules:
        # Both processes of a split run wait passively between parallel regions: an OpenMP team left spinning
        # by one process steals the cores the other is being timed on (measured on 2 cores: a 0.04 ms GEMM
        # took 7 ms in the reference process while the worker's team spun). The child inherits it.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if "torch" not in sys.modules:
        # torch.compile in a candidate compiles in the candidate's own thread, not in inductor's pools of threads
        # and worker processes (which would stay alive and read as the candidate's: checks/torch_compiler.py).
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    # Before anything of the candidate's runs: processes it detaches are re-parented here, not to init, so the
    # import's and the timing's checks can see them (interference.children_change) and the end of the run can end
    # them (nothing the candidate starts serves a later run from outside its process).
    ctx.adopting = adopt_orphans()
    from .memory_capacity import snapshot as memory_snapshot

    ctx.memory_before = memory_snapshot()  # what this process may use before the candidate exists
    children_before: set[int] | None = set(foreign_children(set(), zombies=True))
    ctx.children_before = set(children_before)
    try:
        spawn_reference(ctx)
        try:
            import torch
        except BaseException as exc:  # noqa: BLE001
            raise StageFailure("runtime_error", f"cannot import torch: {summarize_exception(exc, 1)}") from None
        from .environment import describe, ensure_tools_on_path

        ctx.torch = torch
        from .timing import bind_primitives

        bind_primitives()  # the clocks' primitives, bound before any candidate code exists in this process
        frame_hook.bind()
        if use_checks:
            # The verifier prepares torch's compiler before its baseline (checks/torch_compiler.py); done here
            # first, a worker started ahead imports dynamo (seconds) while it waits for its go, not after.
            from .checks.torch_compiler import prepare as prepare_torch_compiler

            prepare_torch_compiler()
        result["environment"] = describe(request.device)
        if request.device == "cuda" and not torch.cuda.is_available():
            raise StageFailure(
                "runtime_error",
                f"device cuda requested but torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU",
            )
        ctx.device = torch.device(request.device)
        # PyTorch's own precision switch, set before either model exists, as a user's script would.
        torch.backends.cuda.matmul.allow_tf32 = request.allow_tf32
        torch.backends.cudnn.allow_tf32 = request.allow_tf32 or torch.backends.cudnn.allow_tf32
        if request.precision is not None:
            from .compare import PRECISION_DTYPES

            ctx.dtype = PRECISION_DTYPES[request.precision]
        ensure_tools_on_path()
        recorder.install()
        installed = True
        ctx.checks = load_checks() if use_checks else None
        if ctx.checks is not None and ctx.reference is not None:
            from .checks import integrity

            integrity._AUDIT_SINK = ctx.reference.audit_note  # before the snapshot: the fingerprint watches it
        from .checks.peaks import GroupPeak

        for stage in STAGES:
            began = time.perf_counter()
            try:
                with GroupPeak(ctx.device) as peak:
                    stage(ctx)
            finally:
                result.setdefault("stageSeconds", {})[stage.__name__] = time.perf_counter() - began
                result.setdefault("stageMemory", {})[stage.__name__] = _stage_memory(peak)
        _audit_reconciled(ctx)
        result["verdict"], result["reason"] = "correct", None
    except StageFailure as failure:
        result["verdict"], result["reason"] = failure.verdict, failure.reason
        if failure.verdict != "cheating" and (
                (failure.verdict in CORRECTNESS_FAILURES and ctx.new_model is not None) or ctx.candidate is not None
                or failure.verdict == "import_error"):  # an import that raised: a refused walk, say
            _checks_after_failure(ctx, failure)
    except BaseException as exc:  # noqa: BLE001 — a worker bug still yields a result line
        constrained = ctx.memory_constrained(exc) if _out_of_memory(exc) else None
        if constrained is not None:  # the candidate shrank what this process may use: not the problem's size
            result["verdict"], result["reason"] = constrained.verdict, constrained.reason
        elif _out_of_memory(exc):
            # kforge's own work on the problem's tensors (copies of its inputs, comparisons) ran out of memory:
            # the problem does not fit this machine; neither the candidate's failure nor a kforge bug.
            result["verdict"] = "problem_error"
            result["reason"] = f"the problem does not fit this machine's memory: {summarize_exception(exc, 2)}"
        else:
            result["verdict"] = "runtime_error"
            result["reason"] = f"kforge_worker internal error: {summarize_exception(exc)}"
    finally:
        if frame_hook.take is not None and frame_hook.take(None) is not None:
            frame_hook.left.append("the end of the evaluation")
        if keep is not None:
            gc.disable()
            keep.append(ctx)
            call_checks(ctx, "seal")
        call_checks(ctx, "close")
        if ctx.reference is not None:
            ctx.reference.close()
        if children_before is not None:  # what the candidate started does not outlive its evaluation
            end_descendants(children_before)
        if installed:
            recorder.uninstall()
        if ctx.extension_dir is not None and ctx.request.extension_cache is not None:
            # What this code's builds left in the shared folder, for the suite's later candidates of the same code.
            result["extensionLibraries"] = extension_cache.manifest(ctx.extension_dir)
        if ctx.compiler_dir is not None:
            compiler_cache.remove(ctx.compiler_dir)
            for name, value in saved_compiler_env.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        if saved_ext_dir is None:
            os.environ.pop("TORCH_EXTENSIONS_DIR", None)
        else:
            os.environ["TORCH_EXTENSIONS_DIR"] = saved_ext_dir
        result["compile"] = [c.to_json() for c in recorder.calls]
        result["seconds"] = time.perf_counter() - started
    return result


def _checks_after_failure(ctx: EvalContext, failure: StageFailure) -> None:
    """Lets the checks name a cheat that also failed correctness (cheating outranks incorrect)."""
    try:
        value = call_checks(ctx, "on_failure", failure.verdict)
    except StageFailure:
        value = None
    _guard_reference_noise(ctx, "after the checks of a failed run")
    override = value[1] if isinstance(value, tuple) and len(value) == 2 else None
    if override is not None:
        ctx.result["verdict"], ctx.result["reason"] = override
    if ctx.result["verdict"] != "cheating":  # a check of the pipeline's own (reference_isolation) may name it
        cheat = next((c for c in ctx.result["checks"] if c.get("outcome") == "fail"
                      and c.get("failVerdict") == "cheating"), None)
        if cheat is not None:
            ctx.result["verdict"], ctx.result["reason"] = "cheating", f"{cheat['name']}: {cheat['evidence']}"


def _compile_summary(call: CompileCall) -> str:
    return f"{call.name} {'built' if call.ok else 'FAILED'} in {call.seconds:.1f}s"


def _read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""
