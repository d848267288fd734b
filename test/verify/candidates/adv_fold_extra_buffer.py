# Red team round 4 (2026-11-25). The weight folded once at __init__ (a transposed copy, the kind of
# precomputation state_reload exists to catch: new weights loaded later are ignored), kept as a registered
# buffer: the state_dict then has one key more than the reference's, and the checks that need the same keys
# (state_reload, state_buffers) were skipped.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.register_buffer("w_t", self.gemm.weight.detach().t().contiguous())
        self.register_buffer("b", self.gemm.bias.detach().clone())

    def forward(self, x):
        return torch.relu(torch.addmm(self.b, x, self.w_t))
