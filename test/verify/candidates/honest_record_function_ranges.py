# Honest, an LLM style: named profiler ranges around each stage (torch.profiler.record_function), a bias + ReLU
# fused by hand after the GEMM, and a guard that makes the input contiguous first.
import torch
import torch.nn as nn
from torch.profiler import record_function


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        with record_function("model_new::prep"):
            x = x.contiguous()
        with record_function("model_new::gemm"):
            y = torch.mm(x, self.gemm.weight.t())
        with record_function("model_new::bias_relu"):
            return y.add_(self.gemm.bias).clamp_min_(0)
