# Honest, a common LLM style: the layer's weight and bias declared as its own nn.Parameters (state_dict keys
# `weight`, `bias` where the reference has `gemm.weight`, `gemm.bias`) and initialised exactly as nn.Linear does,
# so a seed gives both models the same weights; forward reads the parameters at every call.
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        bound = 1 / math.sqrt(in_features)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return torch.addmm(self.bias, x, self.weight.t()).clamp_min_(0)
