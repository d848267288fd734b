"""probe.cuda_arch_list must name exactly the arch flags torch derives from the visible GPUs: a suite's prebuild
(which sees no GPU) is given it as TORCH_CUDA_ARCH_LIST, and any difference in nvcc flags would make the GPU
worker's ninja rebuild everything the prebuild compiled."""

from __future__ import annotations

import pytest
import torch
import torch.utils.cpp_extension as cpp_extension

from kforge_worker.probe import cuda_arch_list


@pytest.mark.parametrize(
    ("capabilities", "built_for", "expected"),
    [
        ([(9, 0)], ["sm_80", "sm_90"], "9.0+PTX"),
        ([(9, 0), (9, 0)], ["sm_80", "sm_90"], "9.0+PTX"),
        ([(9, 0), (8, 0)], ["sm_80", "sm_90"], "8.0;9.0+PTX"),
        # A GPU newer than this torch was built for is clamped, as torch does.
        ([(12, 0)], ["sm_80", "sm_90"], "9.0+PTX"),
    ],
)
def test_the_arch_list_gives_the_flags_torch_derives_itself(monkeypatch, capabilities, built_for, expected) -> None:
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(capabilities))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: capabilities[i])
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: built_for)
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    derived = cpp_extension._get_cuda_arch_flags()
    listed = cuda_arch_list(torch)
    assert listed == expected
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", listed)
    assert cpp_extension._get_cuda_arch_flags() == derived
