"""Runs one candidate through a minimal eval loop plus every verification check; one JSON result.

    python -m kforge_worker.checks.standalone --problem P.py --candidate C.py --device cpu --out result.json

A debugging harness for the checks, independent of the worker pipeline (the corpus runs through the real
worker by default; `test/verify/corpus.py --via standalone` uses this): import the problem, start the
Verifier, import the candidate, build both models from the same seed, copy the reference's state_dict when
keys match, five correctness trials on secret-seeded inputs, then the runtime checks (and, with --time, a
short interleaved timing with a device-wide sync for the roofline).
The result carries the protocol's `verdict`, `reason` and `checks` fields.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import secrets
import sys
import time
import traceback
from typing import Any

import torch

from .result import CheckResult, verdict_from_checks
from .context import ReferenceRejected, clone_inputs, compare, handed_state, run, sync, tensors
from .verifier import Verifier
from ..loading import SourceOnlyLoader


def _import(path: str, role: str) -> Any:
    name = f"kforge_{role}_{secrets.token_hex(4)}"
    loader = SourceOnlyLoader(name, os.path.abspath(path))  # never a bytecode cache beside the file
    spec = importlib.util.spec_from_loader(name, loader, origin=path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    module.__file__ = os.path.abspath(path)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


def _to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    return value


def _seed(seed: int) -> None:
    # The generators directly: torch.manual_seed's dynamo wrapper costs seconds of imports per process.
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def make_input_factory(problem: Any, device: torch.device):
    def make(seed: int) -> list[Any]:
        _seed(seed)
        inputs = [_to_device(x, device) for x in problem.get_inputs()]
        _seed(secrets.randbits(62))  # torch.initial_seed() must not reveal the inputs' seed
        return inputs

    return make


def default_tolerance(problem: Any, inputs: list[Any]) -> tuple[float, float]:
    half = any(isinstance(x, torch.Tensor) and x.dtype in (torch.float16, torch.bfloat16) for x in inputs)
    default = 1e-2 if half else 1e-4
    return float(getattr(problem, "KFORGE_ATOL", default)), float(getattr(problem, "KFORGE_RTOL", default))


def evaluate(problem_path: str, candidate_path: str, device_name: str, timing: bool = False,
             checks: list[str] | None = None, strict: bool = False) -> dict[str, Any]:
    started = time.perf_counter()
    device = torch.device(device_name)
    result: dict[str, Any] = {"problem": problem_path, "candidate": candidate_path, "device": device_name, "strict": strict,
                              "verdict": None, "reason": None, "checks": [], "trials": [], "timing": None}
    problem = _import(problem_path, "problem")
    verifier = Verifier(problem_path, candidate_path, device, checks, strict=strict)
    verifier.before_import(problem)
    try:
        try:
            module = _import(candidate_path, "candidate")
        except Exception as exc:  # noqa: BLE001
            return _finish(result, verifier, "import_error", f"{type(exc).__name__}: {exc}", started)
        verifier.after_import()
        init = problem.get_init_inputs()
        _seed(1234)
        ref = problem.Model(*init).to(device)
        _seed(1234)
        try:
            cand = module.ModelNew(*init).to(device)
        except Exception as exc:  # noqa: BLE001
            return _finish(result, verifier, "runtime_error", f"ModelNew(...): {type(exc).__name__}: {exc}", started)
        if set(ref.state_dict()) == set(cand.state_dict()):
            cand.load_state_dict(handed_state(ref.state_dict()))
        verifier.rebuild = _rebuilder(problem, module, init, device)
        verifier.init_inputs = list(init)
        make_inputs = make_input_factory(problem, device)
        probe = make_inputs(secrets.randbits(31))
        atol, rtol = default_tolerance(problem, probe)
        first_failure = None
        for trial in range(5):
            inputs = make_inputs(secrets.randbits(31))
            ref_out = run(ref, clone_inputs(inputs))
            try:
                out = run(cand, clone_inputs(inputs))
                sync(device)
            except Exception as exc:  # noqa: BLE001
                return _finish(result, verifier, "runtime_error", f"{type(exc).__name__}: {exc}", started)
            c = compare(out, ref_out, atol, rtol)
            result["trials"].append({"passed": c.ok, "message": c.message})
            if not c.ok and first_failure is None:
                first_failure = f"trial {trial}: {c.message}"
        verifier.run_checks(ref, cand, make_inputs, atol, rtol, trials_passed=first_failure is None)
        median = None
        if timing and first_failure is None:
            median = _time(ref, cand, make_inputs, device, result)
        gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
        verifier.after_timing(median, gpu, ref if median is not None else None, make_inputs)
        if verifier.workload is not None:
            result["workload"] = verifier.workload.as_json()
        verdict, check = verifier.verdict()
        if verdict == "cheating" or (verdict and first_failure is None):
            return _finish(result, verifier, verdict, f"{check.name}: {check.evidence}" if check else None, started)
        if first_failure is not None:
            return _finish(result, verifier, "incorrect", first_failure, started)
        return _finish(result, verifier, verdict or "correct", f"{check.name}: {check.evidence}" if check else None,
                       started)
    except Exception as exc:  # noqa: BLE001
        return _finish(result, verifier, "runtime_error", f"harness: {type(exc).__name__}: {exc}\n"
                       + traceback.format_exc()[-1500:], started)
    finally:
        verifier.close()


def _rebuilder(problem: Any, module: Any, init: Any, device: torch.device):
    """rebuild(seed[, init_inputs]) -> (Model, ModelNew) built as above (state_instances, init_constants)."""

    def rebuild(seed: int, init_inputs: list[Any] | None = None) -> tuple[Any, Any]:
        args = list(init) if init_inputs is None else init_inputs
        _seed(seed)
        try:
            ref = problem.Model(*copy.deepcopy(args)).to(device)
        except Exception as exc:  # noqa: BLE001
            if init_inputs is None:
                raise
            raise ReferenceRejected(f"raised {type(exc).__name__}: {str(exc)[:120]}") from None
        _seed(seed)
        cand = module.ModelNew(*copy.deepcopy(args)).to(device)
        if set(ref.state_dict()) == set(cand.state_dict()):
            cand.load_state_dict(handed_state(ref.state_dict()))
        return ref, cand

    return rebuild


def _time(ref: Any, cand: Any, make_inputs: Any, device: torch.device, result: dict[str, Any]) -> float | None:
    """Interleaved ref/cand over a rotating pool; device-wide sync inside the timed region."""
    pool = [make_inputs(secrets.randbits(31)) for _ in range(4)]
    ref_pool = [clone_inputs(p) for p in pool]
    cand_pool = [clone_inputs(p) for p in pool]
    for i in range(3):
        run(ref, ref_pool[i % 4])
        run(cand, cand_pool[i % 4])
    sync(device)
    ref_ms, cand_ms = [], []
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=device) if device.type == "cuda" else None
    for i in range(30):
        for model, pool_, acc in ((ref, ref_pool, ref_ms), (cand, cand_pool, cand_ms)):
            if flush is not None:
                flush.zero_()
                sync(device)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                run(model, pool_[i % 4])
                torch.cuda.synchronize(device)
                end.record()
                end.synchronize()
                acc.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                run(model, pool_[i % 4])
                acc.append((time.perf_counter() - t0) * 1e3)
    ref_med = sorted(ref_ms)[len(ref_ms) // 2]
    cand_med = sorted(cand_ms)[len(cand_ms) // 2]
    result["timing"] = {"refMs": ref_med, "candMs": cand_med, "speedup": ref_med / cand_med if cand_med else None}
    return cand_med


def _finish(result: dict[str, Any], verifier: Verifier, verdict: str, reason: str | None, started: float) -> dict:
    result["verdict"] = verdict
    result["reason"] = reason
    result["checks"] = verifier.results()
    result["seconds"] = round(time.perf_counter() - started, 3)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kforge_worker.checks.standalone")
    parser.add_argument("--problem", required=True)
    parser.add_argument("--candidate", required=True)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", required=True, help="where to write the JSON result")
    parser.add_argument("--time", action="store_true")
    parser.add_argument("--checks", default="", help="comma-separated runtime check groups (default: all)")
    parser.add_argument("--strict", action="store_true", help="running the replaced operator family is cheating")
    args = parser.parse_args(argv)
    # The result goes to a file the candidate is never told about; its prints go to stderr.
    sys.stdout.flush()
    os.dup2(2, 1)
    result = evaluate(args.problem, args.candidate, args.device, args.time,
                      [c for c in args.checks.split(",") if c] or None, args.strict)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1, default=str)
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
