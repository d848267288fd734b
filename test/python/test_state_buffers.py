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
