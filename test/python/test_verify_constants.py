"""The problem's constants varied (bench/verify/NOTES.md, "Round 13b"): a float among get_init_inputs() and a Python
float among get_inputs()' values are arguments a ModelNew must honour, not numbers it may bake in (red team round 13,
adv_init_scale_baked and adv_scalar_input_baked, both `correct` before). init_constants rebuilds the pair with other
values, scalar_inputs calls it with other values; only values the reference itself takes are judged.
"""

from __future__ import annotations

import copy
import importlib.util
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from kforge_worker.checks import context
from kforge_worker.checks.constant_checks import check_init_constants, check_scalar_inputs, float_paths, varied
from kforge_worker.checks.instrument import ExtensionRecorder
from kforge_worker.checks.static_scan import ScanReport

ROOT = Path(__file__).resolve().parents[2]


def _rebuilder(model_cls, new_cls):
    """rebuild(seed[, init_inputs]) as the pipeline's build_pair: the reference first (its refusal is
    ReferenceRejected), the same seed for both, the reference's state_dict loaded where the names match."""

    def rebuild(seed: int, init_inputs=None):
        torch.manual_seed(seed)
        try:
            ref = model_cls(*copy.deepcopy(init_inputs))
        except Exception as exc:  # noqa: BLE001
            raise context.ReferenceRejected(f"raised {type(exc).__name__}: {exc}") from None
        torch.manual_seed(seed)
        new = new_cls(*copy.deepcopy(init_inputs))
        if set(ref.state_dict()) == set(new.state_dict()):
            new.load_state_dict(context.handed_state(ref.state_dict()))
        return ref, new

    return rebuild


def _ctx(model_cls, new_cls, init, make) -> context.VerifyContext:
    rebuild = _rebuilder(model_cls, new_cls)
    ref, cand = rebuild(0, init)
    return context.VerifyContext(ref=ref, cand=cand, make_inputs=make, device=torch.device("cpu"), atol=1e-4,
                                 rtol=1e-4, scan=ScanReport("c.py", frozenset()), extensions=ExtensionRecorder(),
                                 rng=random.Random(13), rebuild=rebuild, init_inputs=list(init))


def _rows(seed: int) -> list:
    return [torch.rand(8, 12, generator=torch.Generator().manual_seed(seed))]


# ------------------------------------------------------------------------------ constructor arguments
class _ScaleShift(nn.Module):
    """linear_scale_init: relu(Linear(x)) * scale + shift, scale and shift given at construction."""

    def __init__(self, n: int, m: int, scale: float, shift: float) -> None:
        super().__init__()
        self.gemm = nn.Linear(n, m)
        self.scale, self.shift = scale, shift

    def forward(self, x):
        return torch.relu(self.gemm(x)) * self.scale + self.shift


class _ScaleShiftBaked(nn.Module):
    """adv_init_scale_baked: the benchmark's 0.5 and 0.25 baked in, the constructor's arguments ignored."""

    def __init__(self, n: int, m: int, scale: float, shift: float) -> None:
        super().__init__()
        self.gemm = nn.Linear(n, m)

    def forward(self, x):
        return torch.relu(self.gemm(x)) * 0.5 + 0.25


class _ScaleShiftHonest(nn.Module):
    """honest_init_scale: the attributes read at run time, a fused addmm."""

    def __init__(self, n: int, m: int, scale: float, shift: float) -> None:
        super().__init__()
        self.gemm = nn.Linear(n, m)
        self.scale, self.shift = float(scale), float(shift)

    def forward(self, x):
        return torch.addmm(self.gemm.bias, x, self.gemm.weight.t()).clamp_min_(0).mul_(self.scale).add_(self.shift)


class _ShiftBaked(_ScaleShiftHonest):
    """The scale honoured, the shift baked in: the failure names which argument, varied alone, is wrong."""

    def forward(self, x):
        return torch.relu(self.gemm(x)) * self.scale + 0.25


def test_a_constructor_argument_baked_into_the_code_fails_init_constants():
    baked = check_init_constants(_ctx(_ScaleShift, _ScaleShiftBaked, [12, 6, 0.5, 0.25], _rows))
    assert baked.outcome == "fail" and baked.fail_verdict == "incorrect", baked
    assert "argument 2 (scale) 0.5 -> " in baked.evidence and "argument 3 (shift) 0.25 -> " in baked.evidence, baked
    one = check_init_constants(_ctx(_ScaleShift, _ShiftBaked, [12, 6, 0.5, 0.25], _rows))
    assert one.outcome == "fail" and "varied alone, wrong with argument 3 (shift) 0.25 -> " in one.evidence, one
    assert "right with argument 2 (scale)" in one.evidence, one
    honest = check_init_constants(_ctx(_ScaleShift, _ScaleShiftHonest, [12, 6, 0.5, 0.25], _rows))
    assert honest.outcome == "pass", honest
    # the pair as built for the benchmark: the baked candidate is right there (why every other check passed it)
    ctx = _ctx(_ScaleShift, _ScaleShiftBaked, [12, 6, 0.5, 0.25], _rows)
    (x,) = _rows(1)
    assert torch.equal(ctx.ref(x), ctx.cand(x))
    no_rebuild = _ctx(_ScaleShift, _ScaleShiftBaked, [12, 6, 0.5, 0.25], _rows)
    no_rebuild.rebuild = None
    assert check_init_constants(no_rebuild).outcome == "skip"


def test_only_non_integral_floats_are_varied_nested_ones_too_and_never_ints_bools_or_strings():
    values = [96, 0.5, True, "mean", (1, 2.0, 0.1), [0.25, [3, -1.5]], 0.0, 2.0, float("inf")]
    assert float_paths(values) == [(1,), (4, 2), (5, 0), (5, 1, 1)]
    assert float_paths([2.5, 3.0, 0.0], integral_too=True) == [(0,), (1,)]
    out, changes = varied(values, float_paths(values), random.Random(3))
    assert out[0] == 96 and out[2] is True and out[3] == "mean" and out[6] == 0.0 and out[7] == 2.0
    assert isinstance(out[4], tuple) and out[4][:2] == (1, 2.0) and isinstance(out[5][1], list)
    for path, (old, new) in changes.items():
        ratio = new / old
        assert 0.5 <= ratio <= 0.8 or 1.2 <= ratio <= 1.5, (path, old, new)  # same sign, clearly another value
    assert values[1] == 0.5 and values[5][1][1] == -1.5  # the originals untouched


class _Slope(nn.Module):
    def __init__(self, n: int, slope: float) -> None:
        super().__init__()
        self.fc = nn.Linear(n, n)
        self.act = nn.LeakyReLU(slope)

    def forward(self, x):
        return self.act(self.fc(x) - 0.5)


class _SlopeReadAtRunTime(nn.Module):
    """As kforge's optimizer now emits a region over a module's hyper-parameter: the value passed to the kernel at
    each call from the module it was captured from."""

    def __init__(self, n: int, slope: float) -> None:
        super().__init__()
        self.fc = nn.Linear(n, n)
        self.act = nn.LeakyReLU(slope)

    def forward(self, x):
        y = self.fc(x) - 0.5
        return torch.where(y >= 0, y, y * float(self.act.negative_slope))


class _AsksForTheBenchmarksSlope(_Slope):
    """A reference that takes one slope only: other values are not valid for the problem."""

    def __init__(self, n: int, slope: float) -> None:
        assert slope == 0.2, "slope must be 0.2"
        super().__init__(n, slope)


class _SizedByAFloat(nn.Module):
    """A float that sizes a layer (a hidden width ratio): no constant, its instances have other state shapes."""

    def __init__(self, n: int, ratio: float) -> None:
        super().__init__()
        self.up = nn.Linear(n, int(n * ratio))
        self.down = nn.Linear(int(n * ratio), n)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


class _Probability(nn.Module):
    """A float near its bound: p = 0.9 scaled up is no probability (the reference raises); scaled down it is."""

    def __init__(self, n: int, p: float) -> None:
        super().__init__()
        if not 0 <= p <= 1:
            raise ValueError(f"p={p} is not a probability")
        self.fc = nn.Linear(n, n)
        self.p = p

    def forward(self, x):
        return self.fc(x) * (1 - self.p)


def test_a_module_hyper_parameter_read_at_run_time_passes_and_values_the_reference_refuses_are_skipped():
    assert check_init_constants(_ctx(_Slope, _SlopeReadAtRunTime, [12, 0.2], _rows)).outcome == "pass"
    refused = check_init_constants(_ctx(_AsksForTheBenchmarksSlope, _SlopeReadAtRunTime, [12, 0.2], _rows))
    assert refused.outcome == "skip" and "slope must be 0.2" in refused.evidence, refused
    sized = check_init_constants(_ctx(_SizedByAFloat, _SizedByAFloat, [12, 1.5], _rows))
    assert sized.outcome == "skip" and "names or shapes" in sized.evidence, sized
    ctx = _ctx(_Probability, _Probability, [12, 0.9], _rows)

    class _Above(random.Random):  # the first set of factors all above 1: p > 1, refused; the second set shrinks
        def choice(self, seq):
            return seq[-1]

    ctx.rng = _Above(5)
    shrunk = check_init_constants(ctx)
    assert shrunk.outcome == "pass" and "argument 1 (p) 0.9 -> 0." in shrunk.evidence, shrunk
    assert check_init_constants(_ctx(_Slope, _Slope, [12, 2], _rows)).outcome == "skip"  # an int: never varied


class _RaisesOnOthers(_Slope):
    """Specialised with a guard: refuses any other slope rather than answering wrongly."""

    def __init__(self, n: int, slope: float) -> None:
        if slope != 0.2:
            raise NotImplementedError("kernel compiled for slope 0.2 only")
        super().__init__(n, slope)


def test_a_candidate_that_refuses_other_values_is_said_not_failed():
    said = check_init_constants(_ctx(_Slope, _RaisesOnOthers, [12, 0.2], _rows))
    assert said.outcome == "warn" and "kernel compiled for slope 0.2 only" in said.evidence, said


# ------------------------------------------------------------------------------ Python floats among the inputs
class _Alpha(nn.Module):
    """scaled_input: forward(x, alpha), get_inputs() hands alpha = 2.5."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(12, 6)

    def forward(self, x, alpha):
        return torch.relu(self.fc(x)) * alpha


class _AlphaBaked(_Alpha):
    """adv_scalar_input_baked: alpha ignored, 2.5 baked in."""

    def forward(self, x, alpha):
        return torch.relu(self.fc(x)) * 2.5


class _AlphaHonest(_Alpha):
    def forward(self, x, alpha):
        return torch.addmm(self.fc.bias, x, self.fc.weight.t()).clamp_min_(0).mul_(alpha)


class _AlphaBeta(_Alpha):
    def forward(self, x, alpha, beta):
        return torch.relu(self.fc(x)) * alpha + beta


class _BetaBaked(_Alpha):
    """alpha honoured, beta (a float nested in a tuple of inputs' values would be the same) baked in."""

    def forward(self, x, alpha, beta):
        return torch.relu(self.fc(x)) * alpha + 0.75


def _with_alpha(seed: int) -> list:
    return [*_rows(seed), 2.5]


def test_a_python_float_input_baked_into_the_code_fails_scalar_inputs():
    baked = check_scalar_inputs(_ctx(_Alpha, _AlphaBaked, [], _with_alpha))
    assert baked.outcome == "fail" and baked.fail_verdict == "incorrect", baked
    assert "input 1 (alpha) 2.5 -> " in baked.evidence, baked
    assert check_scalar_inputs(_ctx(_Alpha, _AlphaHonest, [], _with_alpha)).outcome == "pass"
    one = check_scalar_inputs(_ctx(_AlphaBeta, _BetaBaked, [], lambda s: [*_rows(s), 2.5, 0.75]))
    assert one.outcome == "fail" and "varied alone, wrong with input 2 (beta) 0.75 -> " in one.evidence, one
    assert "right with input 1 (alpha)" in one.evidence, one
    assert check_scalar_inputs(_ctx(_Alpha, _AlphaHonest, [], lambda s: [*_rows(s), 2])).outcome == "skip"  # an int
    assert check_init_constants(_ctx(_Alpha, _AlphaHonest, [], _with_alpha)).outcome == "skip"  # no float to vary


class _Root(nn.Module):
    """x ** e for e = 0.5: a larger exponent is fine, but the reference's output of negative values is NaN — and
    its refusal is read from its own outputs (NaN where the benchmark's value gives numbers), never the candidate's."""

    def forward(self, x, e):
        return (x - 0.5).abs() ** e + torch.log(torch.as_tensor(1.0 - e))


def test_a_scalar_the_reference_answers_with_nan_for_is_skipped():
    ctx = _ctx(_Root, _Root, [], lambda s: [*_rows(s), 0.5])

    class _Above(random.Random):
        def choice(self, seq):
            return seq[-1]

        def uniform(self, lo, hi):
            return 2.2 if lo > 1 else 2.1  # every set above 1: e >= 1, log(1 - e) is NaN or -inf

    ctx.rng = _Above(1)
    refused = check_scalar_inputs(ctx)
    assert refused.outcome == "skip" and "not finite" in refused.evidence, refused


# ------------------------------------------------------------------------------ kforge's own optimizer output
_PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, negative_slope, scale):
        super().__init__()
        self.act = nn.LeakyReLU(negative_slope=negative_slope)
        self.scale = scale

    def forward(self, x):
        return self.act(x) * self.scale


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return [0.2, 1.5]
'''


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(shutil.which("node") is None or shutil.which("g++") is None, reason="needs node and g++")
def test_kforge_optimize_output_for_a_float_hyper_parameter_passes_init_constants(tmp_path: Path):
    """`kforge optimize` over a problem whose constructor takes LeakyReLU's slope and a scale: the generated region's
    fast path, run on the CPU by the kernel emulator (the functors compiled for the host), must take the values of the
    instance it runs in — it is judged by init_constants like any candidate. Before 1c06bc0 (the capture reading a
    module's float hyper-parameters at run time) the kernel baked the slope (`kf_leaky_relu(x, 0.2f)`) and this failed
    on it: the optimizer's own output was why round 13 left the check unbuilt."""
    from kernel_emulator import EmulatedExtension, enable_cpu_fast_paths

    problem_path = tmp_path / "leaky_scale.py"
    problem_path.write_text(_PROBLEM)
    out = tmp_path / "out"
    run = subprocess.run([shutil.which("node"), "--import", "tsx", str(ROOT / "src" / "cli" / "main.ts"), "optimize",
                          str(problem_path), "--no-verify", "--out-dir", str(out), "--python", sys.executable],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:])
    problem = _load(problem_path, "kf_constants_problem")
    cand = _load(out / "leaky_scale_new.py", "kf_constants_new")
    assert getattr(cand, "_KF_CUDA_SOURCE", None), "no generated kernel: nothing to judge"
    ext = EmulatedExtension(cand)
    enable_cpu_fast_paths(cand, ext)
    ctx = _ctx(problem.Model, cand.ModelNew, problem.get_init_inputs(), lambda s: [torch.randn(
        16, 64, generator=torch.Generator().manual_seed(s))])
    result = check_init_constants(ctx)
    assert any(ext.calls.values()), f"the generated fast path never ran: {ext.calls}"
    assert result.outcome == "pass", result
