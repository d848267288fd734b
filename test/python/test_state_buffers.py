"""The state check's comparison of buffers after training-mode calls (checks/state_checks.py)."""

import torch

from kforge_worker.checks.state_checks import buffers_close


def test_a_16_bit_running_statistic_may_differ_by_its_dtypes_resolution_and_no_more():
    mean = torch.tensor([0.0203, 0.5, -1.25, 3.0, 0.009], dtype=torch.float16)
    one_step = torch.nextafter(mean, torch.full_like(mean, 10.0))  # one fp16 step up everywhere
    assert buffers_close(one_step, mean)
    # a small entry off by a few of its own steps, well inside one step at the buffer's scale (3.0: 2e-3)
    assert buffers_close(mean + torch.tensor([0, 0, 0, 0, 3e-5], dtype=torch.float16), mean)
    assert not buffers_close(mean * 1.01, mean)  # a wrong momentum or a biased variance is percent-sized
    assert not buffers_close(mean + torch.tensor([0, 0, 0, 0, 0.02], dtype=torch.float16), mean)


def test_fp32_buffers_keep_the_narrow_band():
    fp32 = torch.tensor([0.0203, 0.5, -1.25, 3.0])
    assert not buffers_close(fp32 + fp32.abs() * 1e-3, fp32)
    assert buffers_close(fp32 * (1 + 5e-5), fp32)
    assert not buffers_close(fp32 + torch.tensor([0, 0, 0, 1e-3]), fp32)


def _chaotic_chain(momentum: float = 0.1) -> torch.nn.Module:
    """60 × (1x1 conv → BatchNorm in training mode → ReLU6) on 32 values per channel: PyTorch's own float32 running
    statistics end ~1e-3 from the same calls made in float64 (a deep network's late layers do so at full size)."""
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(60):
        layers += [torch.nn.Conv2d(16, 16, 1, bias=False), torch.nn.BatchNorm2d(16, momentum=momentum),
                   torch.nn.ReLU6()]
    return torch.nn.Sequential(*layers)


class _Ctx:
    def __init__(self, ref: torch.nn.Module) -> None:
        self.ref = ref

    def make_inputs(self, seed: int) -> list[torch.Tensor]:
        return [torch.randn(2, 16, 4, 4, generator=torch.Generator().manual_seed(seed))]


def _after_calls(model: torch.nn.Module, seeds: list[int]) -> dict[str, torch.Tensor]:
    model.train()
    with torch.no_grad():
        for seed in seeds:
            model(*_Ctx(model).make_inputs(seed))
    return {k: v.detach().clone() for k, v in model.named_buffers() if v.is_floating_point()}


def test_running_statistics_as_near_float64_as_the_references_pass_though_outside_the_band():
    from kforge_worker.checks.state_checks import _float64_buffers, buffer_as_accurate

    ref = _chaotic_chain()
    start = {k: v.clone() for k, v in ref.state_dict().items()}
    seeds = [11, 12, 13]
    wide = _float64_buffers(_Ctx(ref), start, seeds)
    assert wide is not None
    ref_after = _after_calls(ref, seeds)
    # the most accurate float32 answer: the float64 statistics rounded once
    exact = {k: wide[k].float() for k in ref_after}
    outside = [k for k in ref_after if not buffers_close(exact[k], ref_after[k])]
    assert outside, "the chain is not chaotic enough to test the float64 view"
    assert all(buffer_as_accurate(exact[k], ref_after[k], wide[k]) for k in outside)
    # a wrong update (momentum 0.2 where the module says 0.1) is percents off in the first layers: still far
    wrong = _chaotic_chain(momentum=0.2)
    wrong.load_state_dict(start)
    for m in wrong.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.momentum = 0.2
    wrong_after = _after_calls(wrong, seeds)
    assert not all(buffer_as_accurate(wrong_after[k], ref_after[k], wide[k]) for k in ref_after)
