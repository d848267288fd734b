# Round 11: right values, but forward turns grad mode on and leaves it: a caller inside `with torch.no_grad():`
# builds autograd graphs from then on (memory held per call, tensors that require grad) until its block ends.
# Every harness call is inside such a block, whose exit restores the mode: the leak never reaches a flag probe.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        out = torch.relu(torch.addmm(self.gemm.bias, x, self.gemm.weight.t()))
        torch.set_grad_enabled(True)
        return out
