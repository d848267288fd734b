"""`kforge optimize --no-verify` end to end on CPU: capture -> plan -> emit, then the emitted file imported under
CPU torch. Its kernels cannot run here, so every region takes the reference's ops: the output, the running
statistics and the state_dict must equal the reference's exactly. The emitted CUDA is compiled with nvcc for
sm_90a (without spills) when nvcc is present."""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import find_nvcc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "test", "fixtures", "optimize")
CASES = ["conv_bn_chain", "norms_reduce_pool", "untraceable", "mode_names_casts", "export_factory_device",
         "register_targets", "register_targets_reduce64", "diag_matmul_rewrite", "written_idioms",
         "integer_operands_trig", "bn_reduce_prologue", "narrow_integer_operands",
         "inherited_model", "sequential_model", "register_targets_reduce32", "lazy_shape_reads",
         "register_targets_apply5", "bn_eval_affine", "scans", "triplet_losses", "cross_entropy_losses",
         "written_layernorm", "pool_prologues", "submodule_flags", "register_targets_apply10",
         "register_targets_stats8", "pool_cl_any_window", "inplace_casts_unpack", "reduce_broadcasts",
         "module_floats"]


def _node() -> str | None:
    return shutil.which("node")


@pytest.fixture(scope="module")
def emitted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    if _node() is None:
        pytest.skip("node is not installed")
    out = tmp_path_factory.mktemp("optimize")
    paths = [os.path.join(FIXTURES, f"{c}.py") for c in CASES]
    run = subprocess.run(
        [_node(), "--import", "tsx", os.path.join(ROOT, "src", "cli", "main.ts"), "optimize", *paths, "--no-verify",
         "--out-dir", str(out), "--python", sys.executable],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return {c: str(out / f"{c}_new.py") for c in CASES}


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pair(case: str, new_path: str):
    problem = _load(os.path.join(FIXTURES, f"{case}.py"), f"p_{case}")
    cand = _load(new_path, f"c_{case}")
    init = problem.get_init_inputs()
    torch.manual_seed(0)
    ref = problem.Model(*init)
    torch.manual_seed(0)
    new = cand.ModelNew(*init)
    return problem, cand, ref, new


@pytest.mark.parametrize("case", CASES)
def test_emitted_file_matches_the_reference_on_cpu(emitted: dict[str, str], case: str) -> None:
    problem, _cand, ref, new = _pair(case, emitted[case])
    assert ref.state_dict().keys() == new.state_dict().keys()
    for key, value in ref.state_dict().items():
        if not isinstance(value, torch.nn.parameter.UninitializedTensorMixin):  # a lazy module's, before its call
            assert torch.equal(value, new.state_dict()[key]), key
    for call in range(2):  # twice: running statistics advance identically
        inputs = problem.get_inputs()
        with torch.no_grad():
            torch.manual_seed(call)  # one random stream for both (dropout)
            want = ref(*[x.clone() for x in inputs])
            torch.manual_seed(call)
            got = new(*[x.clone() for x in inputs])
        want = want if isinstance(want, (tuple, list)) else (want,)
        got = got if isinstance(got, (tuple, list)) else (got,)
        assert len(want) == len(got)
        for w, g in zip(want, got):
            assert w.shape == g.shape and w.dtype == g.dtype
            assert torch.equal(w, g)
    for key, value in ref.state_dict().items():
        assert torch.equal(value, new.state_dict()[key]), f"{key} diverged after forward"


def test_emitted_files_say_what_they_fused(emitted: dict[str, str]) -> None:
    conv = open(emitted["conv_bn_chain"]).read()
    assert "batch_norm" in conv and "_kf_r0" in conv and "def _kf_reference_forward" in conv
    assert "self.bn.training is True" in conv  # mode guard: eval mode takes the reference's ops
    assert "float(self.scale)" in conv  # model attribute read at run time, not baked in
    pools = _load(emitted["norms_reduce_pool"], "pools_launchers")._KF_CUDA_SOURCE
    # adaptive max pooling takes the maximum (the op's name starts with "adaptive", not "max")
    assert "kf_launch_pool<KF_POOL_MAX, KfPoolNoPrologue, KfEpi_" in pools and "adaptive_max_pool2d" in open(emitted["norms_reduce_pool"]).read()
    untraceable = open(emitted["untraceable"]).read()
    assert "could not be captured" in untraceable and "_KF_CUDA_SOURCE" not in untraceable
    # captured by torch.export, which baked the capture's meta device into the arange: made on the inputs' device
    exported = open(emitted["export_factory_device"]).read()
    assert "torch.ops.aten.arange" in exported and "_kf_r0" in exported, exported[-1500:]
    assert 'torch.device("meta")' not in exported and "_kf_device = x.device" in exported


def test_lazy_modules_shape_reads_and_t5_norms_are_planned_through(emitted: dict[str, str]) -> None:
    text = open(emitted["lazy_shape_reads"]).read()
    # until the first call has made the lazy modules' parameters, the reference's forward
    assert "isinstance(self.conv.weight, torch.nn.parameter.UninitializedTensorMixin)" in text
    assert "isinstance(self.fc.weight, torch.nn.parameter.UninitializedTensorMixin)" in text
    # the pool's window is the captured shape's, checked where it runs
    assert "avg_pool2d" in text and "tuple(v_getitem) == (12, 12)" in text
    # the T5 norm is one normalisation region, not a mean and a pass reading h again
    assert "to → to → rms_norm → mul (normalize)" in text and "pow → mean" not in text


def test_a_diagonal_matmul_is_a_broadcast_product(emitted: dict[str, str]) -> None:
    # The rewrite runs on any device, so the exact check above is its math; here: it is the path taken.
    text = open(emitted["diag_matmul_rewrite"]).read()
    assert text.count("(diag_matmul recipe)") >= 2 and "a.unsqueeze(-1) * B" in text, text[-2500:]


def test_written_idioms_fold_into_the_rules_ops(emitted: dict[str, str]) -> None:
    # The exact check above is their fallback; here: the folded ops are the regions, nothing left to PyTorch.
    text = open(emitted["written_idioms"]).read()
    doc = text[: text.index('"""', 3)]
    assert "expansion = 2" in text.split("class ModelNew", 1)[1]  # the class attribute __init__ reads
    assert "conv2d → mul → add → clamp (pointwise)" in doc, doc  # y.mul_(); y.add_(); y.clamp_() as a chain
    assert "rms_norm → mul (normalize)" in doc, doc  # x * rsqrt(mean(x^2) + eps) * w: one normalisation
    assert "sigmoid → mul → add (pointwise)" in doc and "(glu)" not in doc, doc  # glu spelled out
    assert "Left to PyTorch" not in doc or "no rule covers" not in doc, doc


def test_integer_operands_are_read_as_float_where_the_op_computes_in_float32(emitted: dict[str, str]) -> None:
    text = open(emitted["integer_operands_trig"]).read()
    doc = text[: text.index('"""', 3)]
    # the frequencies from an int64 arange (read as fp32), then the int64 positions times them recomputed in the
    # sin's region and in the cos's (a broadcast product is not written out full-size for two readers)
    assert "to → mul → div → exp (pointwise)" in doc and "(torch.int64,), -1)" in text, doc
    assert "mul → sin (pointwise)" in doc and "mul → cos (pointwise)" in doc, doc
    assert text.count("(torch.int64, torch.float32), -1)") == 2, doc
    assert "(torch.float32, torch.int64, torch.float32)" in text, doc  # x * mask + emb, the mask guarded as int64
    assert "to → mul → add (pointwise)" in doc and "(torch.int32,)" in text, doc  # ids.float() * 0.5 + 1.0
    assert "int64 output" in doc and "int64 operand" in doc, doc  # integer arithmetic, a half product: PyTorch
    assert "kf_sin(" in _load(emitted["integer_operands_trig"], "trig_source")._KF_CUDA_SOURCE


def test_narrow_integer_operands_are_read_as_float_where_the_op_computes_in_float32(emitted: dict[str, str]) -> None:
    text = open(emitted["narrow_integer_operands"]).read()
    doc = text[: text.index('"""', 3)]
    # uint8 images normalised, int8 dequantised, int16 scaled into a sum: each one region reading the integer
    assert "to → div → sub → div (pointwise)" in doc and "(torch.uint8, torch.float32, torch.float32)" in text, doc
    assert "to → mul → sub → relu (pointwise)" in doc and "(torch.int8,)" in text, doc
    assert "mul → pow → sum (reduce)" in doc and "(torch.int16,)" in text, doc


def test_model_new_derives_from_what_model_derives_from(emitted: dict[str, str]) -> None:
    cand = _load(emitted["inherited_model"], "inherited_model")
    assert cand.ModelNew.__bases__ == (cand.Base,)
    assert "layer_norm → gelu → mul → add (normalize)" in cand.__doc__  # Base.act's ops, traced through


def test_a_forward_model_inherits_is_called_through_super(emitted: dict[str, str]) -> None:
    cand = _load(emitted["sequential_model"], "sequential_model")
    assert list(inspect.signature(cand.ModelNew.forward).parameters) == ["self", "input"]
    assert "gelu → layer_norm → tanh (normalize)" in cand.__doc__
    assert "return super().forward(input)" in Path(emitted["sequential_model"]).read_text()


def test_running_statistics_in_a_reduction_prologue_are_updated_only_where_there_are_buffers(
        emitted: dict[str, str]) -> None:
    source = Path(emitted["bn_reduce_prologue"]).read_text()
    updates = re.findall(r"^\s*_kf_running_stats\(_kf_ext\(\)\.(\w+)_running, ([^,]+), ([^,]+), ([^,]+),", source, re.M)
    # The module's buffers and counter and F.batch_norm's buffers are updated (the device path asked even without
    # a counter); the untracked batch norm has nothing to update, so neither the call nor its host function is
    # emitted. (The tracked module joins the sum only since its statistics stopped counting as kernel operands.)
    assert [(mean, var, counter) for _, mean, var, counter in updates] == [
        ("self.tracked.running_mean", "self.tracked.running_var", "self.tracked.num_batches_tracked"),
        ("self.mean", "self.var", "None")]
    assert len(re.findall(r"^bool kf_r\d+_running\(", source, re.M)) == 2
    assert "self.untracked" not in "".join(line for line in source.splitlines() if "_kf_running_stats(" in line)


@pytest.mark.parametrize("case", ["conv_bn_chain", "mode_names_casts"])
def test_emitted_file_runs_the_reference_in_eval_mode(emitted: dict[str, str], case: str) -> None:
    # mode_names_casts: fx froze `training=self.training` as True; eval mode must not drop out
    problem, _cand, ref, new = _pair(case, emitted[case])
    ref.eval()
    new.eval()
    inputs = problem.get_inputs()
    with torch.no_grad():
        assert torch.equal(ref(*inputs), new(*inputs))


def test_a_file_specialised_to_its_mode_guards_it_and_renames_clashing_inputs(emitted: dict[str, str]) -> None:
    text = open(emitted["mode_names_casts"]).read()
    assert "if self.training is not True:\n            return self._kf_reference_forward(x, shape)" in text
    # `shape` is the forward's argument, passed to the region's method under another name (its own `shape`)
    assert re.search(r"def _kf_r\d\(self, [^)]*a_shape", text), text
    # .values read as the reduction's value, broadcast back into the mask of y's rows: one normalisation
    assert "reduce_broadcast_max → gt → to → mul" in text
    assert "kf_round_f16(" in _load(emitted["mode_names_casts"], "casts_source")._KF_CUDA_SOURCE


def test_eval_mode_batch_norms_read_their_running_statistics_when_they_run(emitted: dict[str, str]) -> None:
    """Eval-mode batch norms are pointwise regions (kernel_emulator runs their fast paths on the CPU): they read the
    running statistics at call time, so a load_state_dict or an in-place write is seen, and a module put back in
    training mode takes the reference's ops (batch statistics, running statistics updated)."""
    from kernel_emulator import EmulatedExtension, enable_cpu_fast_paths

    problem, cand, ref, new = _pair("bn_eval_affine", emitted["bn_eval_affine"])
    text = Path(emitted["bn_eval_affine"]).read_text()
    assert "self.bn.running_mean.view(-1, 1, 1)" in text and "self.bn1d.running_var.view(-1, 1)" in text
    ext = EmulatedExtension(cand)
    enable_cpu_fast_paths(cand, ext)
    new.load_state_dict(ref.state_dict())
    inputs = problem.get_inputs()

    def check() -> None:
        with torch.no_grad():
            for want, got in zip(ref(*inputs), new(*inputs)):
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)

    check()
    regions = [f for f in cand._KF_FUNCTIONS if re.fullmatch(r"kf_r\d+", f)]
    assert len(regions) == 3 and all(ext.calls.get(f) for f in regions), (regions, ext.calls)
    state = {k: v.clone() for k, v in ref.state_dict().items()}
    state["bn.running_mean"] += 1.0
    state["var"] *= 4.0
    ref.load_state_dict(state)
    new.load_state_dict(state)
    check()
    with torch.no_grad():
        for model in (ref, new):
            model.bn1d.running_mean.add_(0.5)  # in place, after the file was made
    check()
    ref.bn.train()
    new.bn.train()
    calls = dict(ext.calls)
    check()
    assert torch.equal(ref.bn.running_mean, new.bn.running_mean), "training mode updates the running mean"
    assert ext.calls != calls, "the other regions still take their fast paths"


def test_written_layer_norms_are_normalisations_whose_fallback_is_the_written_ops(emitted: dict[str, str]) -> None:
    """A LayerNorm written out (mean, biased variance, divide by the sqrt or times the rsqrt, over the last dims) is one
    layer_norm region: no spelling equals F.layer_norm bit for bit on the CPU, so the region's fallback runs the
    written ops (the exact check above) and only its kernel computes the layer norm, within tolerance of them: its
    fast path (kernel_emulator, on the CPU) matches the reference. The unbiased variance stays as written."""
    from kernel_emulator import EmulatedExtension, enable_cpu_fast_paths

    problem, cand, ref, new = _pair("written_layernorm", emitted["written_layernorm"])
    text = Path(emitted["written_layernorm"]).read_text()
    doc = cand.__doc__
    assert doc.count("layer_norm") == 4, doc  # a, b, d, e; `un` divides by the unbiased std
    assert "mul → add → layer_norm (normalize)" in doc and "layer_norm → add (normalize)" in doc, doc
    # its mean, broadcast back into the subtract, is a normalisation of its own (reduce-broadcast.ts)
    assert "var (reduce)" in doc and "reduce_broadcast_sum → sub → add → sqrt → div (normalize)" in doc, doc
    forward = text.split("    def forward(", 1)[1].split("    def _kf_reference_forward(", 1)[0]
    methods = text.split("    def _kf_reference_forward(", 1)[1]
    assert "layer_norm(" not in forward + methods, "PyTorch runs the written ops, never F.layer_norm"
    assert "torch.rsqrt(" in methods and "** -0.5" in methods and "correction=0" in methods
    ext = EmulatedExtension(cand)
    enable_cpu_fast_paths(cand, ext)
    for seed in range(2):
        torch.manual_seed(seed)
        inputs = problem.get_inputs()
        with torch.no_grad():
            for want, got in zip(ref(*inputs), new(*inputs)):
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    regions = [f for f in cand._KF_FUNCTIONS if re.fullmatch(r"kf_r\d+", f)]
    assert len(regions) == 6 and all(ext.calls.get(f) for f in regions), (regions, ext.calls)


def test_cross_entropy_reads_its_logits_once_and_matches_the_reference(emitted: dict[str, str]) -> None:
    """Class-index cross entropy is one reduction over the class dim (the logits read once, no log-probabilities
    written) finished over the rows: ignore_index, label smoothing, half-precision logits, a (N, C, H, W) map, and
    nll_loss of a log_softmax over the class dim, which is the same call. Its
    fast paths (kernel_emulator) match the reference, including a batch where every target is ignored (0 / 0) and
    targets that are no class (NaN rows, where ATen raises); a class-weighted call keeps ATen's two ops."""
    from kernel_emulator import EmulatedExtension, enable_cpu_fast_paths

    problem, cand, ref, new = _pair("cross_entropy_losses", emitted["cross_entropy_losses"])
    source = cand._KF_CUDA_SOURCE
    assert source.count("KfAccCrossEntropy, ") + source.count("KfAccCrossEntropySmoothed, ") == 4, \
        "four calls (one written as NLLLoss of LogSoftmax) are one pass"
    assert source.count("KfAccCrossEntropySmoothed, ") == 1, "the logit sum only where label smoothing reads it"
    assert "nll_loss" in Path(emitted["cross_entropy_losses"]).read_text(), "the weighted call is spelled out"
    ext = EmulatedExtension(cand)
    enable_cpu_fast_paths(cand, ext)
    logits, targets, seg, seg_targets = problem.get_inputs()
    for t in (targets, torch.full_like(targets, 2)):  # every target ignored: the module's mean is NaN in both
        with torch.no_grad():
            want, got = ref(logits, t, seg, seg_targets), new(logits, t, seg, seg_targets)
        for w, g in zip(want, got):
            assert w.dtype == g.dtype and w.shape == g.shape
            torch.testing.assert_close(g.float(), w.float(), rtol=2e-3, atol=2e-3, equal_nan=True)
    regions = [f for f in cand._KF_FUNCTIONS if re.fullmatch(r"kf_r\d+", f)]
    assert all(ext.calls.get(f) for f in regions), (regions, ext.calls)
    bad = seg_targets.clone()
    bad[0, 0, 0] = 7  # no class of 7: that pixel's loss is NaN, the others stay right
    with torch.no_grad():
        out = new(logits, targets, seg, bad)
    rows = out[2]
    assert out[3].isnan(), "a mean over a NaN row"
    assert rows[0, 0, 0].isnan() and rows.isnan().sum() == 1


def test_pool_prologues_pool_every_tap_after_the_ops_in_front(emitted: dict[str, str]) -> None:
    """The ops in front of a pool run on every tap inside its kernel (a conv's shift and hardswish, the conv read
    channels-last; swish read twice from one stream; a per-channel scale and a number before a 3-D ceil-mode
    pool); a residual of two full-size tensors stays a kernel of its own, its relu joining the pool; exp(-|y|)
    before a dilated ceil-mode max pool (the generic kernel: compiled without spills under -m heavy)."""
    from kernel_emulator import EmulatedExtension, enable_cpu_fast_paths

    problem, cand, ref, new = _pair("pool_prologues", emitted["pool_prologues"])
    source = cand._KF_CUDA_SOURCE
    assert source.count("struct KfPro_") == 5, "five pools with a prologue"
    assert source.count("return kf_launch_pool_cl<") == 1, "the conv's pool reads it channels-last"
    ext = EmulatedExtension(cand)
    enable_cpu_fast_paths(cand, ext)
    for _ in range(2):
        inputs = problem.get_inputs()
        with torch.no_grad():
            want, got = ref(*inputs), new(*inputs)
        for w, g in zip(want, got):
            assert w.dtype == g.dtype and w.shape == g.shape
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    regions = [f for f in cand._KF_FUNCTIONS if re.fullmatch(r"kf_r\d+", f)]
    assert all(ext.calls.get(f) for f in regions), (regions, ext.calls)
    new.shift = 2.0  # the attribute read at run time, as the reference reads it
    inputs = problem.get_inputs()
    with torch.no_grad():
        ref.shift = 2.0
        torch.testing.assert_close(new(*inputs)[0], ref(*inputs)[0], rtol=1e-5, atol=1e-5)
    # the flag's branch was traced as taken: the other value takes the reference's forward
    assert "if self.rectify is not True:" in Path(emitted["pool_prologues"]).read_text()
    new.rectify = ref.rectify = False
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs)[3], ref(*inputs)[3])


def test_in_place_writes_of_a_cast_and_unpacked_pairs_are_fused(emitted: dict[str, str]) -> None:
    # The exact check above is their fallback; here: the regions take them, nothing is left to PyTorch for it.
    text = open(emitted["inplace_casts_unpack"]).read()
    doc = text[: text.index('"""', 3)]
    # `m, _ = torch.max(x, 1)`: the indices are never read; the values, broadcast back, are exp(x - m)'s statistic
    assert "reduce_broadcast_max → sub → exp (normalize)" in doc, doc
    assert "to → reduce_broadcast_sum → to → sub → abs → to (normalize)" in doc, doc  # the fp32 copy, twice
    assert "mul → relu → mul → mul → add (pointwise)" in doc, doc  # z.relu_(); w = z * 3; z.mul_(0.5)
    assert "Left to PyTorch" not in doc, doc


def test_reductions_broadcast_back_are_one_normalisation_each(emitted: dict[str, str]) -> None:
    # The exact check above is their fallback (the written reductions, their readers broadcasting them); here: what
    # the planner made of each, and the one that must stay as written (a mean of a square matrix added back along
    # the other dim broadcasts [9] as [1, 9]: no keepdim shape, so no statistic of sq's rows).
    text = open(emitted["reduce_broadcasts"]).read()
    doc = text[: text.index('"""', 3)]
    for region in ["reduce_broadcast_sum → sub → relu (normalize)", "reduce_broadcast_sum → div → sub → tanh (normalize)",
                   "abs → reduce_broadcast_max → add → div (normalize)", "reduce_broadcast_max → sub → exp (normalize)",
                   "reduce_broadcast_sum → sigmoid → mul (normalize)", "mean (reduce)", "add (pointwise)",
                   "to → reduce_broadcast_sum → to → sub → to (normalize)"]:
        assert region in doc, (region, doc)
    assert doc.count("(normalize)") == 10, doc


def test_module_float_hyper_parameters_are_read_at_run_time(emitted: dict[str, str]) -> None:
    """A ModelNew built with other float constructor arguments than get_init_inputs()'s computes with them: its
    kernels (emulated on the CPU) take a LeakyReLU's slope, a GroupNorm's eps, an ELU's alpha and Hardtanh's bounds
    from the modules at each call (they were the captured numbers, baked in)."""
    from kernel_emulator import EmulatedExtension, enable_cpu_fast_paths

    problem = _load(os.path.join(FIXTURES, "module_floats.py"), "p_module_floats")
    cand = _load(emitted["module_floats"], "c_module_floats")
    text = Path(emitted["module_floats"]).read_text()
    assert "self.act.negative_slope" in text and "self.norm.eps" in text and "self.clip.max_val" in text
    ext = EmulatedExtension(cand)
    enable_cpu_fast_paths(cand, ext)
    torch.manual_seed(0)
    for args in ([6, 0.2, 1e-5, 1.0, 0.75], [6, 0.05, 0.5, 0.3, 0.2]):
        ref, new = problem.Model(*args), cand.ModelNew(*args)
        new.load_state_dict(ref.state_dict())
        (x,) = problem.get_inputs()
        with torch.no_grad():
            torch.testing.assert_close(new(x), ref(x), rtol=1e-5, atol=1e-5)
    regions = [f for f in cand._KF_FUNCTIONS if re.fullmatch(r"kf_r\d+", f)]
    assert regions and all(ext.calls.get(f) for f in regions), (regions, ext.calls)


def test_a_submodules_flag_is_guarded_like_the_models_own(emitted: dict[str, str]) -> None:
    """A block's `if self.gated:` was traced as the value it had: setting the flag on the submodule afterwards
    takes the reference's forward (before round 18 only Model's own flags were guarded, and ModelNew kept the
    traced branch); torch.nn's own flags (ReLU's inplace) are no guard."""
    problem, _cand, ref, new = _pair("submodule_flags", emitted["submodule_flags"])
    text = Path(emitted["submodule_flags"]).read_text()
    assert "if self.a.gated is not True:" in text and "if self.b.gated is not False:" in text
    assert "inplace is not" not in text
    new.load_state_dict(ref.state_dict())
    (x,) = problem.get_inputs()
    for gated in (True, False):
        ref.b.gated = new.b.gated = gated
        ref.a.gated = new.a.gated = not gated
        with torch.no_grad():
            assert torch.equal(new(x.clone()), ref(x.clone()))


# In the default run: one fixture per thing nvcc is asked about (register targets and the ten-input channels-last
# apply, the trig and int64 paths, written idioms); every other fixture compiles with -m heavy (CI's 20 minutes),
# and the built-in problems' kinds in test_optimize_builtin.py's representative nvcc subset.
_NVCC_DEFAULT = ("register_targets", "register_targets_apply10", "integer_operands_trig", "written_idioms")


@pytest.mark.parametrize(
    "case",
    [case if case in _NVCC_DEFAULT else pytest.param(case, marks=pytest.mark.heavy) for case in (
        "conv_bn_chain", "norms_reduce_pool", "mode_names_casts", "register_targets", "register_targets_reduce64",
        "register_targets_reduce32", "register_targets_apply5", "register_targets_apply10", "register_targets_stats8",
        "pool_cl_any_window", "written_idioms", "inplace_casts_unpack", "integer_operands_trig", "bn_eval_affine",
        "scans", "cross_entropy_losses", "pool_prologues", "narrow_integer_operands", "written_layernorm")]
)
def test_emitted_cuda_compiles_for_sm90a_without_spills(emitted: dict[str, str], case: str, tmp_path) -> None:
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found")
    cand = _load(emitted[case], f"nvcc_{case}")
    cu = tmp_path / "ext.cu"
    cu.write_text(cand._KF_CUDA_SOURCE)
    include = []
    try:
        import nvidia.cu13  # the CUDA headers wheel scripts/setup-python.sh installs

        include = ["-I", os.path.join(list(nvidia.cu13.__path__)[0], "include")]
    except ImportError:
        pass
    run = subprocess.run([nvcc, "-std=c++17", "-arch=sm_90a", "-O3", "-c", str(cu), "-o", str(tmp_path / "ext.o"),
                          "-Xptxas", "-v", *include], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", run.stderr)]
    assert spills and max(spills) == 0, "spills in the generated kernels"
    if case == "register_targets_apply10":
        # kf_launch_normalize_cl instantiates its transposed apply only when its operands fit the elementwise
        # template (if constexpr): the strided kernels alone mean the channels-last path can never run.
        assert "KfNormApplyFromStats" in run.stderr, "no channels-last apply for the ten-input group norm"


# cusolver's headers are not among the wheels the test venv installs; ATen's CUDA context header needs two of its
# types and two status values for declarations only (a syntax check links nothing).
_CUSOLVER_STUBS = {
    "cusolver_common.h": "#pragma once\ntypedef enum { CUSOLVER_STATUS_SUCCESS = 0, CUSOLVER_STATUS_INVALID_VALUE = 3 }"
                         " cusolverStatus_t;\n",
    "cusolverDn.h": "#pragma once\n#include \"cusolver_common.h\"\ntypedef struct cusolverDnContext* cusolverDnHandle_t;\n"
                    "typedef struct cusolverDnParams* cusolverDnParams_t;\n",
}


def test_emitted_host_sources_compile_against_torch_headers(emitted: dict[str, str], tmp_path) -> None:
    """The generated host (.cpp) unit — every region's host function and its helpers (a batch norm's `_bn`, a
    channels-last anchor's `_cl`) and the bindings load_inline adds, against the unit's own torch includes (no
    torch/extension.h) — which the CUDA-only compile checks never see.
    conv_bn_chain has the batch-norm and anchor helpers beside the host function every kind shares (hostFunction);
    KFORGE_ALL_HOST_UNITS=1 adds norms_reduce_pool (the reduce, normalize and pool kinds' launch calls) and scans."""
    import glob
    import sysconfig

    from torch.utils.cpp_extension import include_paths

    gxx = shutil.which("g++")
    cuda_include = next(iter(sorted(glob.glob("/usr/local/cuda*/include/cuda_runtime_api.h"))), None)
    if gxx is None or cuda_include is None:
        pytest.skip("g++ or the CUDA headers not installed")
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for name, text in _CUSOLVER_STUBS.items():
        (stubs / name).write_text(text, encoding="utf8")
    dirs = [str(Path(cuda_include).parent), str(stubs), sysconfig.get_paths()["include"], *include_paths()]
    try:
        import nvidia.cu13  # cuSPARSE/cuBLAS headers (scripts/setup-python.sh installs the wheels)

        dirs.append(os.path.join(list(nvidia.cu13.__path__)[0], "include"))
    except ImportError:
        pass
    procs = []
    for case in ("conv_bn_chain",) + (("norms_reduce_pool", "scans") if os.environ.get("KFORGE_ALL_HOST_UNITS") else ()):
        source = tmp_path / f"{case}.cpp"
        module = _load(emitted[case], f"host_{case}")
        # As load_inline builds it with no_implicit_headers: the unit's own includes, then the bindings it writes.
        bindings = "".join(f'm.def("{f}", torch::wrap_pybind_function({f}), "{f}");\n' for f in module._KF_FUNCTIONS)
        source.write_text(f"{module._KF_CPP_SOURCE}\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{bindings}}}\n",
                          encoding="utf8")
        cmd = [gxx, "-std=c++17", "-fsyntax-only", "-w", str(source), "-DTORCH_EXTENSION_NAME=kf_host_check",
               "-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE", *[f"-I{d}" for d in dirs]]
        procs.append((case, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    for case, proc in procs:  # both at once: CI's two cores
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{case}: {err[-4000:]}"
