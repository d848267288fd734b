"""``python -m kforge_worker --bench-optimize FILE``: eager reference, torch.compile(reference) and an emitted
ModelNew timed in one process, and each fused region timed against the PyTorch ops it replaces.

Correctness is not decided here (``kforge eval`` does that with every check); this is the optimizer's
yardstick. Iterations rotate eager → compiled → ours with an L2-sized write before each call and CUDA
events around it (the clock of timing.py), so drift hits all three alike; medians are reported.
Region timing: the first forward records each region method's arguments; each region is then timed with
its kernel and with the reference's ops (the module-level ``_KF_DISABLED`` set forces the latter).
Request and result are OptimizeBenchRequest / OptimizeBenchResult (src/optimize/bench-protocol.ts).
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import math
import os
import statistics
import sys
import time
import traceback
from collections.abc import Iterator
from typing import Any

from .loading import import_path
from .timing import Clock, clock_for, gc_paused


def _inputs(module: Any, device: Any) -> list[Any]:
    """get_inputs() for timing. On a GPU its tensors are made there, from the device's generator (the same
    distributions): made on the CPU and copied, as KernelBench's harness does, a large problem's inputs take seconds
    of a warm run's critical path. A get_inputs() the device cannot run (numpy, values read back) runs on the CPU."""
    import torch

    raw = None
    if device.type == "cuda":
        from .capture.build import FactoriesOn

        try:
            with FactoriesOn(device.type):
                raw = module.get_inputs()
        except Exception:  # noqa: BLE001 — needs the CPU: made there and copied
            raw = None
    if raw is None:
        raw = module.get_inputs()
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in raw]


def _median_rotating(clock: Clock, fns: dict[str, Any], iters: int) -> dict[str, float]:
    """Median ms of each of fns over `iters` rounds, one call of each per round in turn (drift hits all alike),
    the rounds going through every order of the calls: no side always follows the same neighbour. (A rotation
    does not do that for three: ours followed torch.compile's call in two rounds of three, and a launch-bound
    forward pays for the host state the previous call left.)"""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    orders = list(itertools.permutations(fns))
    with gc_paused():
        for i in range(iters):
            for name in orders[i % len(orders)]:
                samples[name].append(clock.time_ms(fns[name]))
    return {name: statistics.median(values) for name, values in samples.items()}


def _region_timings(cand: Any, cand_module: Any, inputs: list[Any], ids: list[str], clock: Any, iters: int) -> list[dict]:
    import torch

    if not ids:
        return []
    recorded: dict[str, tuple] = {}
    originals = {}
    for rid in ids:
        name = f"_kf_{rid}"
        method = getattr(cand, name, None)
        if method is None:
            continue
        originals[rid] = method

        def recorder(*args, _rid=rid, _method=method):
            recorded.setdefault(_rid, tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args))
            return _method(*args)

        setattr(cand, name, recorder)
    with torch.no_grad():
        cand(*inputs)
    for rid in originals:
        delattr(cand, f"_kf_{rid}")
    disabled = getattr(cand_module, "_KF_DISABLED", None)
    out = []
    for rid in ids:
        if rid not in recorded or disabled is None:
            out.append({"id": rid, "kernelMs": None, "torchMs": None, "seconds": 0.0,
                        "note": "not called on the problem's inputs" if rid not in recorded else "no _KF_DISABLED switch"})
            continue
        method, args = originals[rid], recorded[rid]
        started = time.perf_counter()

        def kernel(m=method, a=args):
            with torch.no_grad():
                return m(*a)

        def reference(m=method, a=args, r=rid):
            disabled.add(r)
            try:
                with torch.no_grad():
                    return m(*a)
            finally:
                disabled.discard(r)

        try:
            warm = time.perf_counter()
            kernel(), reference()
            if torch.cuda.is_available() and any(isinstance(a, torch.Tensor) and a.is_cuda for a in args):
                torch.cuda.synchronize()
            rounds = region_rounds(iters, time.perf_counter() - warm)
            times = _median_rotating(clock, {"kernel": kernel, "torch": reference}, rounds)
            out.append({"id": rid, "kernelMs": times["kernel"], "torchMs": times["torch"], "note": None,
                        "seconds": time.perf_counter() - started})
        except Exception as exc:  # noqa: BLE001 — reported per region, the rest still timed
            out.append({"id": rid, "kernelMs": None, "torchMs": None, "note": f"{type(exc).__name__}: {exc}"[:300],
                        "seconds": time.perf_counter() - started})
    return out


# A timed round (one call of each model) of a slow forward needs fewer rounds for a stable median: rounds are
# capped so the timing takes about TIMING_BUDGET_S, never fewer than MIN_ITERS. A fast one needs more: a forward
# of tens of microseconds is host-bound, and fifty rounds of it (a few milliseconds) measured the same code
# 0.82-0.91x of itself; its rounds fill at least MIN_TIMING_S, up to MAX_ITERS.
TIMING_BUDGET_S = 2.0
MIN_TIMING_S = 0.5
MIN_ITERS = 20
MAX_ITERS = 2000


# A region's kernel and its ops are timed back to back, each sample its own synchronised call after an L2-sized
# write: the rounds of a whole forward's floor (MAX_ITERS of a 20 µs region) took ~0.35 s per region, a third of a
# minute per bench of a 52-region network. Against a 3% margin, the median of a few hundred such samples is enough.
REGION_MAX_ROUNDS = 400


def region_rounds(requested: int, round_seconds: float) -> int:
    """scaled_iters for a region's timing, at most REGION_MAX_ROUNDS."""
    return min(scaled_iters(requested, round_seconds), max(requested, REGION_MAX_ROUNDS))


def scaled_iters(requested: int, round_seconds: float) -> int:
    """The request's iterations for rounds of `round_seconds`: capped to TIMING_BUDGET_S of rounds for a slow
    forward (MIN_ITERS at least), raised to fill MIN_TIMING_S for a fast one (MAX_ITERS at most)."""
    if round_seconds <= 0:
        return requested
    if requested * round_seconds <= TIMING_BUDGET_S:
        return max(requested, min(MAX_ITERS, math.ceil(MIN_TIMING_S / round_seconds)))
    return max(min(requested, MIN_ITERS), math.ceil(TIMING_BUDGET_S / round_seconds))


class Phases:
    """Wall seconds per named step (BenchPhases); a step not run stays 0."""

    NAMES = ("problemImport", "candidateImport", "modelBuild", "firstCall", "compile", "warmup", "timing", "regions")

    def __init__(self, startup: float | None) -> None:
        self.seconds: dict[str, float | None] = {"startup": startup, **{name: 0.0 for name in self.NAMES}}

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = (self.seconds[name] or 0.0) + time.perf_counter() - started


class ProblemState:
    """What a served process keeps between requests for one problem: the reference, its weights as built,
    its inputs and torch.compile(reference) once made — the candidate changes, these do not."""

    def __init__(self, problem_path: str, device: Any) -> None:
        self.problem_path = problem_path
        self.device = device
        self.problem: Any = None
        self.init: Any = None
        self.ref: Any = None
        self.initial_state: dict[str, Any] | None = None
        self.inputs: list[Any] = []
        self.clock: Clock | None = None
        self.compiled: Any = None
        self.compile_seconds: float | None = None
        self.compile_error: str | None = None
        # compile_check.check of the compiled model (TF32 as the process has it), with "exactCorrect" when that
        # failed and the same check with TF32 off was made; compiled_exact: the compiled call with TF32 off,
        # timed beside it when that passed.
        self.compile_check: dict[str, Any] | None = None
        self.compiled_exact: Any = None

    def matches(self, request: dict[str, Any]) -> bool:
        return self.problem_path == request["problemPath"] and self.device.type == request["device"]

    def load(self, phases: Phases) -> None:
        import torch

        if self.problem is None:
            with phases.step("problemImport"):
                self.problem = import_path(self.problem_path, "problem")
        if self.ref is None:
            with phases.step("modelBuild"):
                self.init = self.problem.get_init_inputs()
                torch.manual_seed(0)
                self.ref = self.problem.Model(*self.init).to(self.device)
                # Each candidate starts from the weights as built, not as earlier forwards left them (running
                # statistics of a BatchNorm in training mode).
                self.initial_state = {k: v.clone() for k, v in self.ref.state_dict().items()}
                self.inputs = _inputs(self.problem, self.device)
                self.clock = clock_for(self.device)

    def compile(self, phases: Phases) -> None:
        """torch.compile(reference) and its first call, once per process; a failure is kept and reported."""
        import torch

        if self.compiled is not None or self.compile_error is not None:
            return
        with phases.step("compile"):
            compiled_model = torch.compile(copy.deepcopy(self.ref))
            inputs = self.inputs

            def compiled():
                with torch.no_grad():
                    return compiled_model(*inputs)

            start = time.perf_counter()
            try:
                compiled()
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                self.compile_seconds = time.perf_counter() - start
                self.compiled = compiled
            except Exception as exc:  # noqa: BLE001 — torch.compile failing is a fact to report, not ours
                self.compile_error = (f"torch.compile failed: {type(exc).__name__}: "
                                      f"{str(exc).splitlines()[0][:200]}")
            if self.compiled is not None:
                self.check_compiled(compiled_model)

    def check_compiled(self, compiled_model: Any) -> None:
        """compile_check.check of the compiled reference; where it fails with TF32 allowed on a GPU, again with
        TF32 off, and that call kept for timing when it passes. A check that raises is reported, not fatal: the
        yardstick is still timed."""
        from . import compile_check

        def run(inputs: list[Any]) -> Any:
            return compiled_model(*inputs)

        try:
            found = compile_check.check(self.problem, self.ref, run, self.inputs, self.device)
            if found["correct"] is False and self.device.type == "cuda" and compile_check.tf32_allowed():
                again = compile_check.check(self.problem, self.ref, compile_check.exact(run), self.inputs,
                                            self.device)
                found["exactCorrect"] = again["correct"]
                if again["correct"]:
                    self.compiled_exact = compile_check.exact(self.compiled)
        except Exception as exc:  # noqa: BLE001 — an unanswered check, not a failed bench
            found = {"correct": None, "note": f"not checked: {type(exc).__name__}: {str(exc)[:200]}"}
        self.compile_check = found


def _graphed(cand_module: Any, ours: Any) -> Any:
    """`ours` with the file's CUDA-graph replay switched on for the call (the same file, the same extension: the
    optimizer ships the switch on where this is faster; `ours` itself runs with it off)."""

    def graphed():
        emitted = cand_module._KF_GRAPH
        cand_module._KF_GRAPH = True
        try:
            return ours()
        finally:
            cand_module._KF_GRAPH = emitted

    return graphed


def bench(request: dict[str, Any], state: ProblemState | None = None, startup: float | None = None) -> dict[str, Any]:
    """One bench request; `state` carries the problem's models between requests of a served process (a fresh
    one when absent or for another problem)."""
    import torch

    device = torch.device(request["device"])
    phases = Phases(startup)
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                              "eagerMs": None, "compiledMs": None, "oursMs": None, "compileSeconds": None,
                              "regions": [], "error": None, "phases": phases.seconds}
    try:
        from .compile_capture import extension_dir
        from .environment import ensure_tools_on_path

        ensure_tools_on_path()  # the eval worker's ninja: another one writes another build log and it rebuilds
        if state is None or not state.matches(request):
            state = ProblemState(request["problemPath"], device)
        state.load(phases)
        if request["candidatePath"] is None:  # a worker started ahead of its problem's turn: nothing to time yet
            if request.get("compileBaseline", True):
                state.compile(phases)
                result["compileSeconds"] = state.compile_seconds
                result["error"] = state.compile_error
            return result
        with open(request["candidatePath"], "rb") as f:
            source = f.read()
        os.environ["TORCH_EXTENSIONS_DIR"] = extension_dir(request["cacheDir"], source, torch.__version__,
                                                           torch.version.cuda)
        with phases.step("candidateImport"):
            cand_module = import_path(request["candidatePath"], "candidate")
        if hasattr(cand_module, "_KF_GRAPH"):
            # `ours` and the regions are the launched calls whatever the file was emitted with; `graphed` switches
            # the replay on for its own calls.
            cand_module._KF_GRAPH = False
        with phases.step("modelBuild"):
            torch.manual_seed(0)
            cand = cand_module.ModelNew(*state.init).to(device)
            cand.load_state_dict(state.initial_state)
        ref, inputs, clock = state.ref, state.inputs, state.clock
        assert clock is not None
        fns: dict[str, Any] = {}

        def eager():
            with torch.no_grad():
                return ref(*inputs)

        def ours():
            with torch.no_grad():
                return cand(*inputs)

        with phases.step("firstCall"):
            ours()  # loads the extension (built on disk when missing) before anything is timed
            build_all = getattr(cand_module, "_kf_build_all", None)
            if build_all is not None and device.type == "cuda":
                build_all()  # regions not called on these inputs too: the eval that follows finds them built
        if request.get("timeFile", True):
            fns["eager"] = eager
            if request.get("compileBaseline", True):
                state.compile(phases)
                result["compileSeconds"] = state.compile_seconds
                result["compileCheck"] = state.compile_check
                if state.compiled is not None:
                    fns["compiled"] = state.compiled
                    if state.compiled_exact is not None:
                        fns["compiledExact"] = state.compiled_exact
                else:
                    result["error"] = state.compile_error
            fns["ours"] = ours
            if device.type == "cuda" and hasattr(cand_module, "_KF_GRAPH"):
                fns["graphed"] = _graphed(cand_module, ours)
            with phases.step("warmup"):
                started = time.perf_counter()
                for fn in fns.values():
                    for _ in range(3):
                        fn()
                if device.type == "cuda":
                    torch.cuda.synchronize(device)  # the rounds' device time, not their launch time
                round_seconds = (time.perf_counter() - started) / 3
            iters = scaled_iters(int(request["iters"]), round_seconds)
            result["iters"] = iters
            with phases.step("timing"):
                times = _median_rotating(clock, fns, iters)
            result["eagerMs"] = times.get("eager")
            result["compiledMs"] = times.get("compiled")
            if "compiledExact" in fns:
                result["compiledExactMs"] = times.get("compiledExact")
            result["oursMs"] = times.get("ours")
            if "graphed" in fns:
                result["graphedMs"] = times.get("graphed")
        with phases.step("regions"):
            result["regions"] = _region_timings(cand, cand_module, inputs, list(request.get("regions", [])), clock,
                                                max(10, int(request["iters"]) // 2))
    except Exception as exc:  # noqa: BLE001 — the result line must go out
        tail = traceback.format_exc().strip().splitlines()[-3:]
        result["error"] = f"{type(exc).__name__}: {exc}"[:400] + " | " + " / ".join(tail)[:400]
    return result


def _startup_seconds(request: dict[str, Any]) -> float | None:
    """Seconds from the CLI's spawn (request.spawnedAt, epoch ms) to now: the interpreter and torch's import."""
    spawned = request.get("spawnedAt")
    return None if spawned is None else max(0.0, time.time() - spawned / 1000)


def main(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        request = json.load(f)
    import torch  # noqa: F401 — the startup phase ends here, as in serve()

    result = bench(request, startup=_startup_seconds(request))
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


def serve(stdin: Any = None, out_fd: int | None = None) -> int:
    """``--bench-optimize-serve``: one OptimizeBenchRequest per stdin line, one OptimizeBenchResult per line on
    the original stdout (a problem's or an extension build's prints go to stderr), until stdin closes. The
    problem's reference, inputs and torch.compile(reference) are kept between requests for the same problem."""
    stdin = stdin if stdin is not None else sys.stdin
    if out_fd is None:
        sys.stdout.flush()
        out_fd = os.dup(1)
        os.dup2(2, 1)
    import torch  # noqa: F401 — paid once, before the first request is read

    imported_at = time.time()
    state: ProblemState | None = None
    first = True
    for line in stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        spawned = request.get("spawnedAt")
        startup = (max(0.0, imported_at - spawned / 1000) if spawned is not None else None) if first else None
        first = False
        if state is None or not state.matches(request):
            import torch as _torch

            state = ProblemState(request["problemPath"], _torch.device(request["device"]))
        result = bench(request, state, startup=startup)
        os.write(out_fd, (json.dumps(result) + "\n").encode())
    return 0
