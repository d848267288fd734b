"""The verification stage the worker pipeline calls into, at four points:

    verifier = Verifier(problem_path, candidate_path, device)
    verifier.before_import()          # static scan; snapshot harness functions, flags, threads; audit hook
    ... import the candidate, build models, correctness trials ...
    verifier.after_import()           # harness unchanged by the import?
    verifier.run_checks(ref, cand, make_inputs, atol, rtol)   # the runtime checks (train/eval, replay, ...)
    ... timing ...
    verifier.after_timing(cand_median_ms, gpu_name, ref, make_inputs)   # roofline, harness after timing
    verifier.results()                # list of protocol Check objects

Every check is named; a failure names the verdict it implies (`cheating` or `incorrect`), and
`verdict()` returns the strongest one. A check that crashes in harness code is reported as `warn`
(never a false flag); an exception raised from the candidate's own code is its `runtime_error`.
"""

from __future__ import annotations

import os
import random
import time
import traceback
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch
from torch import nn

from .. import frame_hook
from . import (constant_checks, context, execution_checks, harness_checks, input_checks, mode_checks, output_checks,
               state_checks)
from .disguised import check_disguised_run, prepare as prepare_disguised_run
from .instrument import ExtensionRecorder
from .integrity import (AuditMonitor, IntegritySnapshot, ThreadCount, lingering_threads, native_threads,
                        open_descriptors)
from .peaks import GroupPeak
from .result import CheckResult, failed, passed, verdict_from_checks, warned
from .roofline import Workload, check_roofline, floor_for, measure_workload, peaks_from_env
from .static_scan import ScanReport, reference_info, scan_source, static_checks
from .torch_compiler import prepare as prepare_torch_compiler

_empty_cache = torch.cuda.empty_cache  # bound before the candidate is imported

# Runtime checks in the order they run. Names are what `--checks` selects.
RUNTIME_CHECKS = (
    "tolerance",  # tolerance_sanity (+ tight_tolerance): the reference's outputs alone, the pass mark below
    # The probes off the benchmark's distribution and sizes come first, right after the trials: before any call an
    # honest caller never makes (the same input twice, a rhythm, a timing-like loop). A candidate that turns its
    # general path on only once it has seen such a call (red team round 8, adv_safe_after_replay: right after the
    # replay check's repeat, NaN on large rows before) then meets them on its everyday path.
    "distribution",  # input_distribution, input_layouts, grad_modes (the caller's autograd mode), caller_threads
    "shapes",  # extra_shapes: odd sizes below and above the problem's
    # Other values of the problem's constants (red team round 13): float constructor arguments (init_constants, one
    # more build of each model) and Python floats among the inputs (scalar_inputs), varied — with the probes off the
    # benchmark's distribution, before any call an honest caller never makes.
    "constants",
    "output_contract",  # output_type, output_aliasing, input_mutation, degenerate_output
    "settled",  # output_settled: outputs unchanged a while after forward returned; no thread left running
    "ops",  # banned_ops (library ops disclosed; failed under strict), custom_kernel_used, silent_fallback
    "replay",  # replay_cache, determinism
    "uninitialized",
    "sensitivity",
    "precision",
    "state",
    # timed_outputs after every check that judges values: a candidate the timing-like loop switches into its
    # "being timed" behaviour is then named by the loop (cheating), not by a later check (incorrect).
    "timed",
    "cuda_profile",  # side_stream (join rule), kernel_launch, library_share
    "timing_cross",
    # Last: the candidate once more in a fresh process of its own that shows nothing of the evaluator's (disguised.py)
    "disguised",
)


def _harness_verdict(exc: BaseException) -> bool:
    """Whether exc is the pipeline's StageFailure (imported here lazily: the pipeline imports this module)."""
    from ..pipeline import StageFailure

    return isinstance(exc, StageFailure)


def _warm_thread_pools(device: torch.device) -> None:
    """Start the thread pools the reference's first forward would start (OpenMP's team; on CUDA the
    context and a cuBLAS handle) before the thread baseline, so threads counted later are not torch's."""
    x = torch.ones(1 << 18)
    float((x + 1).sum())
    torch.mm(torch.ones(64, 64), torch.ones(64, 64))
    if device.type == "cuda":
        y = torch.ones(64, 64, device=device)
        torch.mm(y, y)
        torch.cuda.synchronize(device)


class Verifier:
    def __init__(self, problem_path: str, candidate_path: str, device: str | torch.device,
                 enabled: list[str] | None = None, strict: bool = False, allow_tf32: bool = False) -> None:
        self.problem_path = problem_path
        self.candidate_path = candidate_path
        self.device = torch.device(device)
        self.enabled = set(enabled) if enabled else set(RUNTIME_CHECKS)
        self.strict = strict
        self.allow_tf32 = allow_tf32  # --allow-tf32 declared: the TF32 switches are not the candidate's doing
        self.checks: list[CheckResult] = []
        self.extensions = ExtensionRecorder()
        self.audit: AuditMonitor | None = None
        self.snapshot: IntegritySnapshot | None = None
        self.threads_before: ThreadCount | None = None
        self.native_before: set[int] = set()
        self.children_before: set[int] = set()  # child processes before the import (the reference process)
        self.scan: ScanReport | None = None
        self.ref_families: frozenset[str] = frozenset()
        self.rng = random.Random(int.from_bytes(os.urandom(8), "little"))
        self.context: context.VerifyContext | None = None
        self._fds_before: dict[int, bool] = {}
        self.peaks_override = peaks_from_env(os.environ.get("KFORGE_PEAKS"))
        # rebuild(seed[, init_inputs]) -> (Model, ModelNew) as the pipeline builds them (set by the pipeline's hook;
        # state_instances, init_constants), and the get_init_inputs() values the pair was built from
        self.rebuild: Callable[..., tuple[nn.Module, nn.Module]] | None = None
        self.init_inputs: list[Any] | None = None
        self.disguise: Any = None  # disguised.Disguise, set by the pipeline
        self.workload: Workload | None = None  # counted on the reference after timing (roofline)
        # progress(detail, fraction): a line as each runtime check group starts (the pipeline's "verify" stage),
        # so a long checks phase — float64 passes of a large problem on a CPU take minutes — is never silent.
        self.progress: Callable[[str, float], None] | None = None
        # out_of_memory_blame(exc): why an exception the candidate raised is the problem's (an out-of-memory while
        # the candidate's own forward needs no more than the reference's), or None; set by the pipeline.
        self.out_of_memory_blame: Callable[[BaseException], str | None] | None = None

    # ------------------------------------------------------------------------------------ stage hooks
    def before_import(self, problem: ModuleType | None = None, candidate_source: str | None = None) -> None:
        """problem: the imported problem module, whose globals join the fingerprint (None: not watched);
        candidate_source: the text the worker imports as the candidate (None: the candidate file's)."""
        with open(self.problem_path, encoding="utf-8", errors="replace") as f:
            problem_source = f.read()
        if candidate_source is None:  # the text the worker imports (pipeline.load_candidate), else the file's
            with open(self.candidate_path, encoding="utf-8", errors="replace") as f:
                candidate_source = f.read()
        try:
            self.ref_families, reference_names = reference_info(problem_source)
        except SyntaxError:
            self.ref_families, reference_names = frozenset(), {"Model"}
        self.scan = scan_source(candidate_source, os.path.basename(self.candidate_path), self.ref_families,
                                reference_names | {"Model"})
        self.checks.extend(static_checks(self.scan))
        self._fds_before = open_descriptors()
        self.extensions.install()
        self.audit = AuditMonitor.install()
        self.audit.watch(self.candidate_path)
        self.audit.active = True
        _warm_thread_pools(self.device)
        frame_hook.bind()  # the C setter, bound before the candidate exists (the pipeline binds it earlier too)
        # torch's own wrapping at the first compile (nn.Module.__init__, torch.jit.trace), done before the baseline
        # for every pair: the first compile may come from the candidate, from a compiled helper of the reference's,
        # or from torch itself without any source spelling it (flex_attention compiles its eager path on its first
        # call: the sixth session's sweep had every candidate of such a reference `cheating`).
        prepare_torch_compiler()
        prepare_disguised_run()
        self.snapshot = IntegritySnapshot.take(problem=problem, allow_tf32=self.allow_tf32,
                                               files=(self.problem_path, self.candidate_path))
        self.threads_before = ThreadCount.now()
        self.native_before = native_threads()
        from ..interference import foreign_children

        # the reference process (spawned first), and an in-process caller's own children, ended ones included
        self.children_before = set(foreign_children(set(), zombies=True))

    def after_import(self) -> None:
        self._stage_integrity("import")
        started = lingering_threads(self.native_before)
        if started:
            names = ", ".join(f"{tid} ({name})" for tid, name in list(started.items())[:6])
            self.checks.append(failed("thread_count", f"the import started {len(started)} OS thread(s) that are "
                                      f"still running: {names} — counted from /proc/self/task, native threads "
                                      "included: work can continue after forward returns"))
        from ..interference import foreign_children

        processes = foreign_children(self.children_before)
        if processes:
            self.checks.append(failed("thread_count", f"the import started {len(processes)} process(es) that are "
                                      f"still running (pid {', '.join(map(str, processes[:4]))}) — work can go on "
                                      "outside this process, where no thread count or CPU meter of it sees it"))
        leaked = sorted(fd for fd, inheritable in self._fds_before.items() if fd > 2 and inheritable)
        if leaked:
            self.checks.append(warned("fd_hygiene", f"descriptors {leaked} were inherited by the worker and stay "
                                                    "inheritable (harness setup, not the candidate)"))
        else:
            self.checks.append(passed("fd_hygiene", "only stdin/stdout/stderr are inheritable in the worker"))

    def run_checks(self, ref: nn.Module, cand: nn.Module, make_inputs: Callable[[int], list[Any]],
                   atol: float, rtol: float, trials_passed: bool = True) -> None:
        """trials_passed: whether the pipeline's correctness trials passed (a candidate wrong only in the
        timing-like loop is then behaving differently when timed)."""
        assert self.scan is not None, "before_import() first"
        ctx = context.VerifyContext(
            ref=ref, cand=cand, make_inputs=make_inputs, device=self.device, atol=atol, rtol=rtol, scan=self.scan,
            extensions=self.extensions, audit=self.audit, snapshot=self.snapshot, rng=self.rng,
            ref_families=self.ref_families, threads_before=self.threads_before, strict=self.strict,
            rebuild=self.rebuild, init_inputs=self.init_inputs, disguise=self.disguise,
        )
        ctx.notes["trials_passed"] = trials_passed
        self.context = ctx
        steps: dict[str, Callable[[], Any]] = {
            "output_contract": lambda: output_checks.check_output_contract(ctx),
            "settled": lambda: output_checks.check_settled_outputs(ctx),
            "tolerance": lambda: [output_checks.check_tolerance(ctx), output_checks.check_tight_tolerance(ctx)],
            "ops": lambda: execution_checks.check_ops(ctx),
            "replay": lambda: input_checks.check_replay(ctx),
            "uninitialized": lambda: output_checks.check_uninitialized(ctx),
            "sensitivity": lambda: input_checks.check_input_sensitivity(ctx),
            "distribution": lambda: [input_checks.check_input_distribution(ctx), input_checks.check_input_layouts(ctx),
                                     mode_checks.check_grad_modes(ctx), mode_checks.check_caller_threads(ctx)],
            "shapes": lambda: input_checks.check_extra_shapes(ctx),
            "constants": lambda: [constant_checks.check_init_constants(ctx), constant_checks.check_scalar_inputs(ctx)],
            "timed": lambda: input_checks.check_timed_outputs(ctx),
            "precision": lambda: output_checks.check_precision(ctx),
            "state": lambda: [*state_checks.check_state(ctx), state_checks.check_parameters(ctx),
                              state_checks.check_instances(ctx), mode_checks.check_global_rng(ctx)],
            "cuda_profile": lambda: execution_checks.check_cuda_profile(ctx),
            "timing_cross": lambda: execution_checks.check_timing_cross(ctx),
            "disguised": lambda: check_disguised_run(ctx),
        }
        context.pair_random_streams(context.has_dropout(ref))
        try:
            self._run_groups(ref, cand, steps)
        finally:
            context.pair_random_streams(False)

    def _run_groups(self, ref: nn.Module, cand: nn.Module, steps: dict[str, Callable[[], Any]]) -> None:
        ran = 0
        groups = [name for name in RUNTIME_CHECKS if name in self.enabled]
        for name in groups:
            if self.progress is not None:
                self.progress(f"{name} ({ran + 1}/{len(groups)})", ran / len(groups))
            began = time.perf_counter()
            with GroupPeak(self.device) as peak, context.preserved_state(ref, cand):
                try:
                    produced = steps[name]()
                except BaseException as exc:  # noqa: BLE001 — a candidate's sys.exit too; classified below
                    produced = [self._crashed(name, exc)]
            elapsed = time.perf_counter() - began
            written = context.sealed.take_broken()
            if written:
                produced = (produced if isinstance(produced, list) else [produced]) + [failed(
                    "reference_outputs_sealed", f"in the {name} checks, {written[0]} (the worker's copy of the "
                    "reference, and the check's comparison of the candidate's answer with it, run in the candidate's "
                    "process)", "cheating")]
            for item in produced if isinstance(produced, list) else [produced]:
                if item is not None:
                    item.seconds = elapsed
                    item.peak_host_bytes, item.peak_device_bytes = peak.host, peak.device
                    item.start_host_bytes = peak.host_start
                    self.checks.append(item)
            # The fingerprint after every group: a patch made for one group and undone before the next
            # snapshot has a window of one group, not the whole stage.
            self._stage_integrity(f"the {name} checks", thorough=ran + 1 == len(groups))
            # What the group's copies left cached in this process's allocator goes back to the device: the
            # reference process allocates on the same GPU for the timing, and memory cached here is not free there
            # (a 6.4 GB problem's checks left 55 GiB reserved and nothing allocated, and the timing ran out).
            if self.device.type == "cuda":
                _empty_cache()
            ran += 1
        if not ran:
            self._stage_integrity("runtime checks")

    def after_failed_stage(self, verdict: str) -> None:
        """The fingerprint and the audit record after a stage that failed (an import that raised included)."""
        if self.snapshot is not None:
            self._stage_integrity(f"the stage that failed ({verdict})")

    def before_timing(self) -> None:
        """The fingerprint right before the timed batch (after_timing takes it right after)."""
        self._stage_integrity("verification, before timing", thorough=False)

    def after_timing(self, cand_median_ms: float | None, gpu_name: str | None, ref: nn.Module | None = None,
                     make_inputs: Callable[[int], list[Any]] | None = None) -> None:
        floor = None
        if ref is not None and make_inputs is not None and cand_median_ms is not None:
            try:
                inputs = make_inputs(self.rng.randrange(1, 2**31))
                with context.preserved_state(ref):
                    outputs = context.tensors(context.run(ref, context.clone_inputs(inputs)))
                    self.workload = measure_workload(ref, inputs, outputs)
                floor = floor_for(self.workload, gpu_name, self.peaks_override)
                if gpu_name is None and floor is not None:
                    gpu_name = f"{self.device.type} (KFORGE_PEAKS)"
            except Exception as exc:  # noqa: BLE001
                self.checks.append(warned("roofline", f"could not count the problem's work: {type(exc).__name__}: {exc}"))
                floor = None
                cand_median_ms = None
        if cand_median_ms is not None or ref is None:
            self.checks.append(check_roofline(cand_median_ms, floor, gpu_name))
        self._stage_integrity("timing")

    # ------------------------------------------------------------------------------------------ output
    def results(self) -> list[dict[str, Any]]:
        return [c.to_json() for c in self._merged()]

    def verdict(self) -> tuple[str | None, CheckResult | None]:
        return verdict_from_checks(self._merged())

    def reason(self) -> str | None:
        _, check = self.verdict()
        return f"{check.name}: {check.evidence}" if check else None

    def close(self) -> None:
        self.extensions.uninstall()
        if self.audit is not None:
            self.audit.active = False

    # ---------------------------------------------------------------------------------------- internals
    def _stage_integrity(self, stage: str, thorough: bool = True) -> None:
        ctx = self.context or context.VerifyContext(
            ref=nn.Identity(), cand=nn.Identity(), make_inputs=lambda s: [], device=self.device, atol=0, rtol=0,
            scan=self.scan or ScanReport("", frozenset()), extensions=self.extensions, audit=self.audit,
            snapshot=self.snapshot, threads_before=self.threads_before,
        )
        self.checks.extend(harness_checks.check_integrity(ctx, stage, thorough, probe=self.context is not None))

    def _crashed(self, name: str, exc: BaseException) -> CheckResult:
        frames = traceback.extract_tb(exc.__traceback__)
        cand = os.path.abspath(self.candidate_path)
        in_candidate = any(os.path.abspath(f.filename) == cand for f in frames)
        where = next((f"{os.path.basename(f.filename)}:{f.lineno}" for f in reversed(frames)), "?")
        text = f"{type(exc).__name__}: {str(exc)[:240]} (at {where})"
        if in_candidate and _harness_verdict(exc):
            # The pipeline's own verdict exception, raised from candidate code during a check (as the pipeline's
            # candidate_failure rules for its stages): a verdict is never the candidate's to give.
            return failed("harness_state", f"the candidate raised the harness's own verdict exception during the "
                          f"{name} checks ({text}): a verdict is never the candidate's to give", "cheating")
        if in_candidate:
            why = self.out_of_memory_blame(exc) if self.out_of_memory_blame is not None else None
            if why is not None:
                return failed(name, f"{why}: {text}", "problem_error")
            return failed(name, f"the candidate raised during this check: {text}", "runtime_error")
        return warned(name, f"check could not run: {text}")

    def _merged(self) -> list[CheckResult]:
        """One entry per check name: the worst outcome wins (a fail after any stage is kept)."""
        rank = {"fail": 0, "warn": 1, "pass": 2, "skip": 3}
        merged: dict[str, CheckResult] = {}
        for c in self.checks:
            prior = merged.get(c.name)
            if prior is None or rank[c.outcome] < rank[prior.outcome]:
                merged[c.name] = c
        return list(merged.values())
