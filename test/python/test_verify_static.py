"""The AST static scan: what it must find (with file:line), and what it must leave alone."""

from __future__ import annotations

import textwrap
from pathlib import Path

from kforge_worker.checks.static_scan import reference_info, scan_source, static_checks

REPO = Path(__file__).resolve().parents[2]


def scan(src: str, families=("gemm",)):
    return scan_source(textwrap.dedent(src), "cand.py", families)


def rules(report, severity=None):
    return {(f.rule, f.line) for f in report.findings if severity is None or f.severity == severity}


def outcome(report, name):
    return next(c for c in static_checks(report) if c.name == name)


def test_reference_families_come_from_the_problem_source():
    sdpa = (REPO / "problems" / "sdpa_fp16.py").read_text()
    gemm = (REPO / "problems" / "gemm_bn_scale_softmax.py").read_text()
    assert reference_info(sdpa)[0] == {"attention"}
    assert reference_info(gemm)[0] == {"gemm"}
    assert "Model" in reference_info(gemm)[1]


def test_aliased_shortcut_is_found_but_only_warns():
    report = scan(
        """
        import torch.nn.functional as Fn
        from torch import matmul as mm
        lin = Fn.linear
        class ModelNew:
            def forward(self, x, w):
                a = lin(x, w)
                b = mm(x, w)
                c = x @ w
                return x.mm(w)
        """
    )
    assert {("shortcut", 7), ("shortcut", 8), ("shortcut", 9), ("shortcut", 10)} <= rules(report)
    check = outcome(report, "static_shortcut")
    assert check.outcome == "warn" and "cand.py:7" in check.evidence


def test_shortcut_rules_follow_the_problem_family():
    src = "import torch\ndef f(q, k, v):\n    return torch.nn.functional.scaled_dot_product_attention(q, k, v) @ v\n"
    assert ("shortcut", 3) not in rules(scan(src, ()))
    attention = scan(src, ("attention",))
    assert any(f.rule == "shortcut" and "scaled_dot_product_attention" in f.message for f in attention.findings)
    # GEMMs are not the replaced operator in an attention problem: '@' is not flagged there
    assert not any("@ operator" in f.message for f in attention.findings)


def test_building_a_module_is_not_calling_it():
    report = scan(
        """
        import torch.nn as nn
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.gemm = nn.Linear(4, 4)
            def forward(self, x):
                if not x.is_cuda:
                    return self.gemm(x)
                return x
        """
    )
    lines = {line for rule, line in rules(report) if rule == "shortcut"}
    assert lines == {9}


def test_tampering_and_evasion_fail_on_their_own():
    report = scan(
        """
        import torch, time, sys, os, importlib
        import subprocess
        torch.allclose = lambda *a, **k: True
        setattr(time, "perf_counter", lambda: 0.0)
        sys.modules["torch.testing"] = None
        torch.backends.cuda.matmul.allow_tf32 = True
        f = getattr(torch, "mat" + "mul")
        exec("x = 1")
        frame = sys._getframe(1).f_back
        m = importlib.import_module(name)
        seed = os.environ["KFORGE_SECRET"]
        os.write(3, b"{}")
        """
    )
    failing = rules(report, "fail")
    for expected in [("evasion", 3), ("tamper", 4), ("tamper", 5), ("tamper", 6), ("tamper", 7), ("evasion", 8),
                     ("evasion", 9), ("tamper", 10), ("evasion", 11), ("tamper", 12), ("evasion", 13)]:
        assert expected in failing, expected
    assert outcome(report, "static_tamper").outcome == "fail"
    assert outcome(report, "static_evasion").outcome == "fail"


def test_a_scoped_switch_is_disclosed_and_an_assigned_one_fails():
    # A `with` block puts cuDNN's/SDPA's switches back on exit (the process fingerprint fails one left changed);
    # an assignment changes them for whatever runs next, the reference's checks included.
    report = scan(
        """
        import torch
        from torch.nn.attention import sdpa_kernel
        def conv(x, w):
            cudnn = torch.backends.cudnn
            with cudnn.flags(enabled=cudnn.enabled, benchmark=False, deterministic=False, allow_tf32=False):
                y = torch.conv2d(x, w)
            with sdpa_kernel([]):
                pass
            torch.backends.cudnn.allow_tf32 = False
            return y
        """
    )
    assert ("tamper", 6) in rules(report, "warn") and ("tamper", 8) in rules(report, "warn")
    assert ("tamper", 6) not in rules(report, "fail") and ("tamper", 8) not in rules(report, "fail")
    assert ("tamper", 10) in rules(report, "fail")


def test_speed_and_robustness_switches_are_disclosed_and_precision_switches_still_fail():
    """Issue 15: `cudnn.benchmark = True` and `torch._dynamo.config.suppress_errors = True` are common honest lines
    that move only the candidate's own process (the reference is timed in its own): a warning that names them. The
    precision switches beside them (set to a value other than the one they have), and anything else done to those
    two, stay failed."""
    report = scan(
        """
        import torch
        import torch._dynamo as dynamo
        from torch._dynamo import config as dynamo_config
        torch.backends.cudnn.benchmark = True
        cudnn = torch.backends.cudnn
        cudnn.benchmark = not cudnn.deterministic
        torch._dynamo.config.suppress_errors = True
        dynamo.config.suppress_errors = True
        dynamo_config.suppress_errors = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = not True
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark_limit = 0
        del torch.backends.cudnn.benchmark
        torch._dynamo.config.cache_size_limit = 1
        """
    )
    warned_lines = {line for rule, line in rules(report, "warn") if rule == "tamper"}
    failed_lines = {line for rule, line in rules(report, "fail") if rule == "tamper"}
    assert {5, 7, 8, 9, 10} <= warned_lines and not {5, 7, 8, 9, 10} & failed_lines, (warned_lines, failed_lines)
    assert {11, 12, 13, 14, 15, 16} <= failed_lines, failed_lines
    evidence = " ".join(f.message for f in report.findings if f.line in (5, 8))
    assert "torch.backends.cudnn.benchmark = True" in evidence and "suppress_errors = True" in evidence
    alone = scan(
        """
        import torch
        torch.backends.cudnn.benchmark = True
        torch._dynamo.config.suppress_errors = True
        """
    )
    assert outcome(alone, "static_tamper").outcome == "warn"


def test_try_except_fallback_around_a_custom_kernel():
    report = scan(
        """
        import torch.nn.functional as F
        from torch.utils.cpp_extension import load_inline
        ext = load_inline(name="x", cpp_sources="", functions=["f"])
        def forward(x, w):
            try:
                return ext.f(x, w)
            except RuntimeError:
                return F.linear(x, w)
        """
    )
    assert any(f.rule == "fallback" and f.line == 6 for f in report.findings)
    assert outcome(report, "static_fallback").outcome == "warn"


def test_strings_and_comments_never_trigger_rules():
    report = scan(
        '''
        """We do not call torch.matmul or subprocess or exec here."""
        # torch.allclose = anything
        NOTE = "sys._getframe and gc.get_objects are banned"
        '''
    )
    assert report.findings == []


def test_cuda_sources_give_kernel_names_and_stream_findings():
    report = scan(
        '''
        SRC = """
        template <int D> __global__ void __launch_bounds__(128) attn_fwd(const half* q) {}
        __global__ void softmax_rows(float* x) { cudaStream_t s; cudaStreamCreate(&s); }
        torch::Tensor run(torch::Tensor x) { return x; }
        """
        ''', ()
    )
    assert report.kernel_names == {"attn_fwd", "softmax_rows"}
    assert any(f.rule == "side_stream" for f in report.findings)


def test_kernel_names_past_launch_bounds_with_nested_parentheses():
    # The optimizer's templates bound registers by a constexpr function of their inputs: read with `[^)]*` as the
    # attribute's arguments, the name came out as "__launch_bounds__" and the real kernel seemed never launched.
    report = scan(
        '''
        SRC = """
        template <class P, typename... TIn>
        __global__ void __launch_bounds__(kLanes * kWarps, min_blocks<sizeof...(TIn)>())
            columns_kernel(const float* x) {}
        __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(f(g(1)), 1) split_kernel(float* y) {}
        """
        ''', ()
    )
    assert report.kernel_names == {"columns_kernel", "split_kernel"}


def test_honest_corpus_and_generated_files_have_no_failing_static_finding():
    paths = sorted((REPO / "test" / "verify" / "candidates").glob("honest_*.py"))
    paths += sorted((REPO / "generated").glob("*/model_new.py")) if (REPO / "generated").exists() else []
    paths += sorted((REPO / "kernels").glob("*/model_new.py"))
    assert paths
    for path in paths:
        report = scan_source(path.read_text(), path.name, ("gemm", "attention"))
        assert [f for f in report.findings if f.severity == "fail"] == [], path


def test_probing_the_harness_instruments_fails():
    report = scan(
        """
        import torch
        from torch.utils._python_dispatch import _get_current_dispatch_mode
        def forward(x, w):
            if torch._C._len_torch_dispatch_stack() or torch.autograd.profiler._is_profiler_enabled:
                return (x[:, None] * w[None]).sum(-1)
            return torch.nn.functional.linear(x, w)
        """
    )
    failing = rules(report, "fail")
    assert ("evasion", 3) in failing and ("evasion", 5) in failing
