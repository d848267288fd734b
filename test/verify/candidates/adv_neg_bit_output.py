# Round 10: the output handed back as a negative-bit view (torch._neg_view) of a buffer holding -relu(xWᵀ+b): every
# torch op reads it as the right values; its memory holds the negated ones, which a kernel reading data_ptr, numpy
# (refuses), or a serialiser of raw bytes sees.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        neg = torch.addmm(self.gemm.bias, x, self.gemm.weight.t()).relu_().neg_()
        return torch._neg_view(neg)
