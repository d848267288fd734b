# Honest, with caches that look like replay caches: a module-level lru_cache keyed on (rows, features, dtype) that
# picks a row-chunk plan, and a per-instance dict of plans keyed on the input's shape. Only launch plans are kept,
# never values: every call computes every output.
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F


@functools.lru_cache(maxsize=64)
def _plan(rows, features, dtype):
    chunk = 16 if features <= 128 else 8
    return tuple((start, min(start + chunk, rows)) for start in range(0, rows, chunk))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.plans = {}

    def forward(self, x):
        key = (tuple(x.shape), x.dtype)
        plan = self.plans.get(key)
        if plan is None:
            plan = self.plans[key] = _plan(x.shape[0], x.shape[1], x.dtype)
        out = torch.empty(x.shape[0], self.gemm.out_features, dtype=x.dtype, device=x.device)
        for start, stop in plan:
            out[start:stop] = F.linear(x[start:stop], self.gemm.weight, self.gemm.bias)
        return out.relu_()
