# The worker's torch left on one intra-op thread after every forward (its own call restores the pool first): with
# the reference in the worker's process (--reference-process off) the reference's calls would run on one thread.
# The static scan now only warns on torch.set_num_threads; the fingerprint must see the change left behind.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.threads = torch.get_num_threads()

    def forward(self, x):
        torch.set_num_threads(self.threads)
        y = F.linear(x, self.gemm.weight, self.gemm.bias).relu_()
        torch.set_num_threads(1)
        return y
