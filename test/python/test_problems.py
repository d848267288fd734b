"""The built-in problems in problems/: well-formed KernelBench files whose forward runs on the meta device.

Each problem is imported, its Model built under ``torch.device("meta")`` and its ``get_inputs()`` run with
every tensor factory redirected to meta, so a 1 GB input costs nothing and the suite stays fast on a CPU.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from torch.overrides import TorchFunctionMode

REPO = Path(__file__).resolve().parents[2]
PROBLEMS_DIR = REPO / "problems"
PROBLEM_FILES = sorted(p for p in PROBLEMS_DIR.glob("*.py") if not p.name.startswith("_"))

MIN_PROBLEMS = 40
MIN_HALF_PRECISION_PROBLEMS = 3
# Per problem. KernelBench harnesses build inputs on the CPU and copy them to the GPU, the reference and
# a candidate both keep theirs: past a few GB a problem stops being practical on an 80 GB card.
MAX_INPUT_BYTES = 4 * 2**30
MAX_OUTPUT_BYTES = 4 * 2**30
MAX_SUMMARY_CHARS = 120
NAME = re.compile(r"^[a-z][a-z0-9_]*$")

# Written before this suite, these build their inputs on the GPU; every newer problem must not, so that
# it loads on any machine (the harness moves inputs itself).
GPU_INPUT_LEGACY = {"sdpa_fp16"}
# Problems whose purpose is to defeat torch.fx symbolic tracing; every other one must trace.
UNTRACEABLE = {"causal_masked_softmax"}

_FACTORIES = {
    torch.rand,
    torch.randn,
    torch.randint,
    torch.randperm,
    torch.normal,
    torch.ones,
    torch.zeros,
    torch.empty,
    torch.full,
    torch.arange,
    torch.linspace,
    torch.eye,
    torch.tensor,
    torch.empty_strided,
}


class _MetaInputs(TorchFunctionMode):
    """Sends every tensor factory to meta and turns device moves into no-ops, remembering what was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.devices_requested: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = dict(kwargs or {})
        if func in _FACTORIES:
            if kwargs.get("device") is not None:
                self.devices_requested.append(str(kwargs["device"]))
            kwargs["device"] = "meta"
        elif func is torch.Tensor.cuda:
            self.devices_requested.append("cuda")
            return args[0]
        elif func is torch.Tensor.to:
            devices = [a for a in args[1:] if isinstance(a, (str, torch.device))]
            if "device" in kwargs:
                devices.append(kwargs.pop("device"))
            self.devices_requested.extend(str(d) for d in devices)
            rest = [a for a in args[1:] if not isinstance(a, (str, torch.device))]
            if not rest and not kwargs:
                return args[0]
            args = (args[0], *rest)
        return func(*args, **kwargs)


@dataclass
class ProblemRun:
    name: str
    module: ModuleType
    model: torch.nn.Module
    inputs: list[Any]
    outputs: list[torch.Tensor]
    input_bytes: int
    devices_requested: list[str]


def _import(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"kforge_problem_{path.stem}", path)
    assert spec is not None and spec.loader is not None, f"{path.name}: cannot be imported"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("Model", "get_inputs", "get_init_inputs"):
        assert hasattr(module, name), f"{path.name}: defines no {name}"
    return module


def _build_model(module: ModuleType) -> torch.nn.Module:
    init = list(module.get_init_inputs())
    try:
        with torch.device("meta"):
            return module.Model(*init)
    except (NotImplementedError, RuntimeError):
        # An __init__ that needs real values (.item(), data-dependent shapes): build on CPU, then move.
        return module.Model(*init).to("meta")


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    return []


@functools.lru_cache(maxsize=None)
def run_problem(path: Path) -> ProblemRun:
    module = _import(path)
    model = _build_model(module)
    mode = _MetaInputs()
    with mode:
        inputs = list(module.get_inputs())
    input_bytes = sum(t.numel() * t.element_size() for t in _tensors(inputs))
    with torch.no_grad():
        result = model(*inputs)
    outputs = _tensors(result)
    assert outputs, f"{path.stem}: forward returned no tensor ({type(result).__name__})"
    if not isinstance(result, torch.Tensor):
        assert isinstance(result, (tuple, list)) and len(outputs) == len(result), (
            f"{path.stem}: forward must return a tensor or a flat tuple of tensors"
        )
    return ProblemRun(path.stem, module, model, inputs, outputs, input_bytes, mode.devices_requested)


def _ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


def test_the_suite_is_large_and_named_well() -> None:
    names = [p.stem for p in PROBLEM_FILES]
    assert len(names) >= MIN_PROBLEMS, f"only {len(names)} built-in problems, want >= {MIN_PROBLEMS}"
    bad = [n for n in names if not NAME.match(n)]
    assert not bad, f"problem names must be snake_case: {bad}"
    lowered = [n.lower() for n in names]
    assert len(set(lowered)) == len(lowered), "problem names collide (case-insensitively)"


def test_summaries_are_unique() -> None:
    summaries = [ast.get_docstring(ast.parse(p.read_text())) for p in PROBLEM_FILES]
    firsts = [(s or "").splitlines()[0] if s else "" for s in summaries]
    duplicates = {s for s in firsts if firsts.count(s) > 1}
    assert not duplicates, f"problems share a summary: {sorted(duplicates)}"


@pytest.mark.parametrize("path", PROBLEM_FILES, ids=_ids(PROBLEM_FILES))
def test_docstring_opens_with_a_one_line_summary(path: Path) -> None:
    source = path.read_text()
    doc = ast.get_docstring(ast.parse(source), clean=False)
    assert doc, f"{path.name}: no module docstring"
    # `kforge problems` reads the text on the opening line itself (src/problem/), so it must be there.
    assert source.startswith('"""') and doc.splitlines()[0].strip(), f"{path.name}: the first docstring line is empty"
    summary = doc.splitlines()[0].strip()
    assert len(summary) <= MAX_SUMMARY_CHARS, f"{path.name}: summary of {len(summary)} chars is not one line"


@pytest.mark.parametrize("path", PROBLEM_FILES, ids=_ids(PROBLEM_FILES))
def test_forward_runs_on_meta_with_sane_outputs(path: Path) -> None:
    run = run_problem(path)
    assert run.inputs, f"{run.name}: get_inputs() returned nothing"
    assert 0 < run.input_bytes <= MAX_INPUT_BYTES, f"{run.name}: inputs take {run.input_bytes / 2**30:.2f} GiB"
    floating_inputs = {t.dtype for t in _tensors(run.inputs) if t.is_floating_point()}
    for out in run.outputs:
        assert out.device.type == "meta", f"{run.name}: an output left the meta device ({out.device})"
        assert out.numel() > 0 and all(d > 0 for d in out.shape), f"{run.name}: empty output {tuple(out.shape)}"
        assert out.numel() * out.element_size() <= MAX_OUTPUT_BYTES, f"{run.name}: output {tuple(out.shape)} too big"
        assert out.is_floating_point() or out.dtype in (torch.int64, torch.int32, torch.bool), (
            f"{run.name}: unexpected output dtype {out.dtype}"
        )
        if out.is_floating_point() and len(floating_inputs) == 1:
            # A half-precision problem must stay half: an fp32 parameter silently promoting the result would
            # make it an fp32 problem in disguise.
            (expected,) = floating_inputs
            assert out.dtype == expected, f"{run.name}: {expected} inputs gave a {out.dtype} output"


@pytest.mark.parametrize("path", PROBLEM_FILES, ids=_ids(PROBLEM_FILES))
def test_inputs_are_built_on_the_cpu(path: Path) -> None:
    run = run_problem(path)
    if run.name in GPU_INPUT_LEGACY:
        pytest.skip("written before this rule: builds its inputs on the GPU")
    assert not run.devices_requested, f"{run.name}: get_inputs() asks for device(s) {run.devices_requested}"


@pytest.mark.parametrize("path", PROBLEM_FILES, ids=_ids(PROBLEM_FILES))
def test_fx_traceability_is_as_intended(path: Path) -> None:
    run = run_problem(path)
    if run.name in UNTRACEABLE:
        with pytest.raises(torch.fx.proxy.TraceError):
            torch.fx.symbolic_trace(run.model)
    else:
        torch.fx.symbolic_trace(run.model)


def test_some_problems_are_half_precision() -> None:
    half = [
        p.stem
        for p in PROBLEM_FILES
        if any(t.dtype in (torch.float16, torch.bfloat16) for t in _tensors(run_problem(p).inputs))
    ]
    assert len(half) >= MIN_HALF_PRECISION_PROBLEMS, f"only {len(half)} fp16/bf16 problems: {half}"


def test_the_meta_redirect_sees_device_requests() -> None:
    # Guards the harness above: a factory with an explicit device is recorded and still lands on meta.
    mode = _MetaInputs()
    with mode:
        a = torch.rand(3, device="cpu")
        b = torch.randn(2, 2).to("cuda")
        c = torch.randint(0, 5, (4,)).cuda()
    assert {a.device.type, b.device.type, c.device.type} == {"meta"}
    assert mode.devices_requested == ["cpu", "cuda", "cuda"]
