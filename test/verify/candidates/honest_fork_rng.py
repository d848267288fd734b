# Round 11 (honest): draws random numbers inside forward (a randomised tie-break probe, discarded) under
# torch.random.fork_rng(), which puts the caller's generator state back: the caller's stream is untouched.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        with torch.random.fork_rng(devices=[]):  # the CPU generator only: torch.manual_seed would reseed CUDA's too
            torch.default_generator.manual_seed(7)
            _ = torch.rand(4)
        return torch.relu(torch.addmm(self.gemm.bias, x, self.gemm.weight.t()))
