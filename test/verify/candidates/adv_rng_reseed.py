# Round 11: right values; forward reseeds torch's global generator (as code that wants "reproducible" kernels
# does): after every call the caller's random stream restarts at the same state — each dropout mask, data
# augmentation or sampling step after a forward draws the same numbers.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        torch.default_generator.manual_seed(1234)
        return torch.relu(torch.addmm(self.gemm.bias, x, self.gemm.weight.t()))
