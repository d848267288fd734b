# Problem module tampered with (family 1): finds the problem's module among the loaded modules and replaces
# the reference class's forward with a cheap wrong one before the reference is built. Every comparison then
# compares this candidate's answer with the same answer (the float64 reference is a copy of it too).
import sys

import torch
import torch.nn as nn


def _cheap(self, x):
    return torch.zeros(x.shape[0], self.gemm.out_features, device=x.device)


for _module in list(sys.modules.values()):
    _model = getattr(_module, "Model", None)
    if callable(getattr(_module, "get_inputs", None)) and isinstance(_model, type) and _model is not nn.Module:
        _model.forward = _cheap


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return _cheap(self, x)
