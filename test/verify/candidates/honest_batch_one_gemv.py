# Round 12 honest counterpart of adv_batch_one_gemv: a GEMV path for a batch of one row, bias included; and the
# per-thread scratch of a server (threading.local), right from any thread.
import threading

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self._local = threading.local()

    def forward(self, x):
        if x.shape[0] == 1:
            return torch.relu(torch.addmv(self.gemm.bias, self.gemm.weight, x[0])).unsqueeze(0)
        scratch = getattr(self._local, "scratch", None)
        if scratch is None or scratch.shape != (x.shape[0], self.gemm.out_features) or scratch.dtype != x.dtype:
            scratch = torch.empty(x.shape[0], self.gemm.out_features, dtype=x.dtype, device=x.device)
            self._local.scratch = scratch
        torch.addmm(self.gemm.bias, x, self.gemm.weight.t(), out=scratch)
        return torch.relu(scratch)
