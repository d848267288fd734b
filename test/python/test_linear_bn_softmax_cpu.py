"""CPU tests of the linear_bn_softmax ModelNew: import without CUDA, fallback output and state semantics.

The module under test is the committed generated file (generated/linear_bn_softmax/model_new.py) and,
always, a fresh rendering of kernels/linear_bn_softmax/ (bench/linear_bn/dev_loader.py mirrors
`kforge emit`), so the template is covered even before the generated file is regenerated. Every
comparison is against the reference Model of problems/gemm_bn_scale_softmax.py on the same inputs.
"""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "linear_bn"))

import dev_loader  # noqa: E402


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _candidates():
    mods = [pytest.param("rendered", id="rendered-from-kernels")]
    if Path(dev_loader.GENERATED).exists():
        mods.append(pytest.param("generated", id="generated-file"))
    return mods


@pytest.fixture(scope="module")
def reference():
    return _import(REPO / "problems" / "gemm_bn_scale_softmax.py", "lbs_test_reference").Model


@pytest.fixture(scope="module", params=_candidates())
def model_new(request, tmp_path_factory):
    if request.param == "generated":
        module = _import(Path(dev_loader.GENERATED), "lbs_test_generated")
    else:
        path = tmp_path_factory.mktemp("lbs") / "model_new.py"
        path.write_text(dev_loader.render(), encoding="utf8")
        module = _import(path, "lbs_test_rendered")
    return module


def _pair(reference, model_new, init, seed=0):
    torch.manual_seed(seed)
    ref = reference(*init)
    torch.manual_seed(seed)
    new = model_new.ModelNew(*init)
    return ref, new


def _assert_same_state(ref, new):
    for (k_ref, v_ref), (k_new, v_new) in zip(ref.state_dict().items(), new.state_dict().items()):
        assert k_ref == k_new
        assert torch.equal(v_ref, v_new), k_ref


def test_import_does_not_build_or_need_cuda(model_new):
    # Building happens on the first CUDA call only; importing on CPU torch must not try.
    assert model_new._kf_lbs_module is None
    assert "@@KFORGE_SOURCE" not in model_new._CUDA_SOURCE and "@@KFORGE_SOURCE" not in model_new._CPP_SOURCE
    assert "__global__" in model_new._CUDA_SOURCE and '#include "' not in model_new._CUDA_SOURCE


def test_same_interface_state_dict_and_seeded_init(reference, model_new):
    ref, new = _pair(reference, model_new, [24, 40, 1e-5, 0.1, (1,)], seed=3)
    for name in ("gemm", "bn", "scale", "softmax"):
        assert type(getattr(new, name)) is type(getattr(ref, name))
    assert list(ref.state_dict()) == list(new.state_dict())
    _assert_same_state(ref, new)  # same construction order -> same RNG draws


@pytest.mark.parametrize(
    "init,batch",
    [
        ([24, 40, 1e-5, 0.1, (1,)], 16),
        ([777, 1000, 1e-5, 0.1, (1,)], 3),  # the odd sizes
        ([13, 7, 1e-3, 0.5, (7,)], 5),  # scale per feature
    ],
)
def test_training_three_calls_then_eval_match_reference(reference, model_new, init, batch):
    ref, new = _pair(reference, model_new, init, seed=1)
    with torch.no_grad():
        for _ in range(3):
            x = torch.rand(batch, init[0]) * 2 - 0.5
            torch.testing.assert_close(new(x), ref(x), rtol=0, atol=0)
            _assert_same_state(ref, new)
        assert int(new.bn.num_batches_tracked) == 3
        ref.eval()
        new.eval()
        x = torch.rand(batch, init[0])
        torch.testing.assert_close(new(x), ref(x), rtol=0, atol=0)
        _assert_same_state(ref, new)  # eval leaves running stats alone


def test_momentum_none_cumulative_average(reference, model_new):
    ref, new = _pair(reference, model_new, [16, 12, 1e-5, None, (1,)], seed=2)
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(8, 16)
            torch.testing.assert_close(new(x), ref(x), rtol=0, atol=0)
    _assert_same_state(ref, new)
    assert int(new.bn.num_batches_tracked) == 3


def test_load_state_dict_with_fresh_parameters(reference, model_new):
    ref, new = _pair(reference, model_new, [32, 20, 1e-5, 0.1, (20,)], seed=4)
    g = torch.Generator().manual_seed(9)
    state = {}
    for key, value in ref.state_dict().items():
        if key.endswith("num_batches_tracked"):
            state[key] = torch.tensor(17)
        elif key.endswith("running_var"):
            state[key] = torch.rand(value.shape, generator=g) + 0.1
        else:
            state[key] = torch.randn(value.shape, generator=g)
    ref.load_state_dict(state)
    new.load_state_dict(state)
    with torch.no_grad():
        for mode in ("train", "eval"):
            getattr(ref, mode)()
            getattr(new, mode)()
            x = torch.rand(6, 32)
            torch.testing.assert_close(new(x), ref(x), rtol=0, atol=0)
            _assert_same_state(ref, new)
    assert int(new.bn.num_batches_tracked) == 18


def test_batch_one_in_training_raises_pytorch_error(reference, model_new):
    ref, new = _pair(reference, model_new, [8, 4, 1e-5, 0.1, (1,)])
    x = torch.rand(1, 8)
    with pytest.raises(ValueError) as ref_err:
        ref(x)
    with pytest.raises(ValueError) as new_err:
        new(x)
    assert str(new_err.value) == str(ref_err.value)
    new.eval()
    ref.eval()
    torch.testing.assert_close(new(x), ref(x))  # eval with batch 1 is fine


def test_autograd_through_fallback(reference, model_new):
    ref, new = _pair(reference, model_new, [10, 6, 1e-5, 0.1, (1,)], seed=5)
    x = torch.rand(4, 10)
    ref(x).square().sum().backward()
    new(x).square().sum().backward()
    for p_ref, p_new in zip(ref.parameters(), new.parameters()):
        torch.testing.assert_close(p_new.grad, p_ref.grad, rtol=0, atol=0)


class _CountingSplitExtension:
    """Stands in for the CUDA extension's weight split to observe the weight-split cache on CPU."""

    def __init__(self):
        self.calls = 0

    def split_weight_tf32x3(self, w, chunk):
        self.calls += 1
        return torch.cat([w, torch.zeros_like(w), w], dim=1)


def test_weight_split_cache_is_off_by_default(model_new):
    """A write through `.data` bumps no version counter: only an uncached split is always right."""
    model = model_new.ModelNew(8, 6)
    assert model.cache_weight_split is False
    ext = _CountingSplitExtension()
    assert model._weight_split(ext, 0) is None and ext.calls == 0  # the extension splits on every call


def test_weight_split_cache_follows_every_weight_change(model_new):
    model = model_new.ModelNew(8, 6)
    model.cache_weight_split = True  # opt-in
    ext = _CountingSplitExtension()
    first = model._weight_split(ext, 0)
    assert model._weight_split(ext, 0) is first and ext.calls == 1  # unchanged weight: reused
    assert model._weight_split(ext, 4) is not first and ext.calls == 2  # another chunk length
    ext.calls = 1

    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.rand(4, 8)).sum().backward()
    opt.step()  # in-place update bumps the version counter
    assert torch.equal(model._weight_split(ext, 4)[:, :8], model.gemm.weight.detach()) and ext.calls == 2

    model.load_state_dict(copy.deepcopy(model_new.ModelNew(8, 6).state_dict()))
    assert torch.equal(model._weight_split(ext, 4)[:, :8], model.gemm.weight.detach()) and ext.calls == 3

    model.gemm.weight = nn.Parameter(torch.randn(6, 8))  # a new Parameter object
    assert torch.equal(model._weight_split(ext, 4)[:, :8], model.gemm.weight.detach()) and ext.calls == 4

    with torch.no_grad():
        model.gemm.weight.mul_(2)
    assert torch.equal(model._weight_split(ext, 4)[:, :8], model.gemm.weight.detach()) and ext.calls == 5

    model.cache_weight_split = False
    assert model._weight_split(ext, 4) is None and model._weight_split_cache.entry is None
