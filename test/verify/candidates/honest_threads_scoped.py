# A small GEMM run on one intra-op thread (less fork/join overhead than the pool at this size), the process's
# thread count put back before forward returns; the ReLU in place on its own result.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            y = F.linear(x, self.gemm.weight, self.gemm.bias)
        finally:
            torch.set_num_threads(before)
        return y.relu_()
