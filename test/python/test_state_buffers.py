"""The state check's comparison of buffers after training-mode calls (checks/state_checks.py)."""

import torch

from kforge_worker.checks.state_checks import buffers_close


def test_a_16_bit_running_statistic_may_differ_by_its_own_rounding_and_no_more():
    mean = torch.tensor([0.0203, 0.5, -1.25, 3.0], dtype=torch.float16)
    one_step = torch.nextafter(mean, torch.full_like(mean, 10.0))  # one fp16 step up everywhere
    assert buffers_close(one_step, mean)
    assert not buffers_close(mean * 1.01, mean)  # a wrong momentum or a biased variance is percent-sized
    fp32 = mean.float()
    assert not buffers_close(fp32 + fp32.abs() * 1e-3, fp32)  # fp32 buffers keep the 1e-4 band
    assert buffers_close(fp32 * (1 + 5e-5), fp32)
