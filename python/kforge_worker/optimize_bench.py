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

import copy
import json
import statistics
import sys
import time
import traceback
from typing import Any

from .loading import import_path
from .timing import Clock, clock_for, gc_paused


def _inputs(module: Any, device: Any) -> list[Any]:
    import torch

    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]


def _median_rotating(clock: Clock, fns: dict[str, Any], iters: int) -> dict[str, float]:
    """Median ms of each of fns over `iters` rounds, one call of each per round in turn (drift hits all alike),
    the order rotated every round so that no side always follows the same neighbour."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    with gc_paused():
        for i in range(iters):
            shift = i % len(names)
            for name in names[shift:] + names[:shift]:
                samples[name].append(clock.time_ms(fns[name]))
    return {name: statistics.median(values) for name, values in samples.items()}


def _region_timings(cand: Any, cand_module: Any, inputs: list[Any], ids: list[str], clock: Any, iters: int) -> list[dict]:
    import torch

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
            out.append({"id": rid, "kernelMs": None, "torchMs": None,
                        "note": "not called on the problem's inputs" if rid not in recorded else "no _KF_DISABLED switch"})
            continue
        method, args = originals[rid], recorded[rid]

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
            kernel(), reference()
            times = _median_rotating(clock, {"kernel": kernel, "torch": reference}, iters)
            out.append({"id": rid, "kernelMs": times["kernel"], "torchMs": times["torch"], "note": None})
        except Exception as exc:  # noqa: BLE001 — reported per region, the rest still timed
            out.append({"id": rid, "kernelMs": None, "torchMs": None, "note": f"{type(exc).__name__}: {exc}"[:300]})
    return out


def bench(request: dict[str, Any]) -> dict[str, Any]:
    import torch

    device = torch.device(request["device"])
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                              "eagerMs": None, "compiledMs": None, "oursMs": None, "compileSeconds": None,
                              "regions": [], "error": None}
    try:
        import os

        from .compile_capture import extension_dir

        with open(request["candidatePath"], "rb") as f:
            source = f.read()
        os.environ["TORCH_EXTENSIONS_DIR"] = extension_dir(request["cacheDir"], source, torch.__version__,
                                                           torch.version.cuda)
        problem = import_path(request["problemPath"], "problem")
        cand_module = import_path(request["candidatePath"], "candidate")
        init = problem.get_init_inputs()
        torch.manual_seed(0)
        ref = problem.Model(*init).to(device)
        torch.manual_seed(0)
        cand = cand_module.ModelNew(*init).to(device)
        cand.load_state_dict(ref.state_dict())
        inputs = _inputs(problem, device)
        clock = clock_for(device)
        iters = int(request["iters"])
        fns: dict[str, Any] = {}

        def eager():
            with torch.no_grad():
                return ref(*inputs)

        def ours():
            with torch.no_grad():
                return cand(*inputs)

        fns["eager"] = eager
        ours()  # builds the extension (cached on disk) before anything is timed
        if request.get("compileBaseline", True):
            compiled_model = torch.compile(copy.deepcopy(ref))

            def compiled():
                with torch.no_grad():
                    return compiled_model(*inputs)

            start = time.perf_counter()
            try:
                compiled()
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                result["compileSeconds"] = time.perf_counter() - start
                fns["compiled"] = compiled
            except Exception as exc:  # noqa: BLE001 — torch.compile failing is a fact to report, not ours
                result["error"] = f"torch.compile failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        fns["ours"] = ours
        for fn in fns.values():  # warm-up
            for _ in range(3):
                fn()
        times = _median_rotating(clock, fns, iters)
        result["eagerMs"] = times.get("eager")
        result["compiledMs"] = times.get("compiled")
        result["oursMs"] = times.get("ours")
        result["regions"] = _region_timings(cand, cand_module, inputs, list(request.get("regions", [])), clock,
                                            max(10, iters // 2))
    except Exception as exc:  # noqa: BLE001 — the result line must go out
        tail = traceback.format_exc().strip().splitlines()[-3:]
        result["error"] = f"{type(exc).__name__}: {exc}"[:400] + " | " + " / ".join(tail)[:400]
    return result


def warm_compile(request: dict[str, Any]) -> dict[str, Any]:
    """torch.compile(reference) run once, as bench() will run it, so that inductor's on-disk caches (FX graph,
    AOTAutograd, Triton kernels and their autotuning) hold it: a suite does this on the CPU cores ahead of the
    GPU loop, and the bench's own compile then loads instead of compiling. Nothing is timed here."""
    import torch

    device = torch.device(request["device"])
    started = time.perf_counter()
    try:
        problem = import_path(request["problemPath"], "problem")
        init = problem.get_init_inputs()
        torch.manual_seed(0)
        ref = problem.Model(*init).to(device)
        inputs = _inputs(problem, device)
        compiled_model = torch.compile(copy.deepcopy(ref))
        with torch.no_grad():
            compiled_model(*inputs)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except Exception as exc:  # noqa: BLE001 — the bench compiles for itself and reports what fails
        return {"seconds": time.perf_counter() - started, "error": f"{type(exc).__name__}: {exc}"[:400]}
    return {"seconds": time.perf_counter() - started, "error": None}


def main(path: str, mode: str = "bench") -> int:
    with open(path, encoding="utf-8") as f:
        request = json.load(f)
    result = warm_compile(request) if mode == "warm-compile" else bench(request)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0
