# Pattern 7/8: a memo keyed on the input tensor itself — the very object (kept, so its id is not reused)
# and its version counter. That is sound (any in-place write advances the version), and a timing loop that
# feeds the same tensors again is served from it in microseconds. With fresh values written into the timed
# tensors before every call it never hits: the run is correct and timed at its real speed (the manifest
# bounds the speedup).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.memo = {}

    def forward(self, x):
        kept = self.memo.get(id(x))
        if kept is not None and kept[0] is x and kept[1] == (x._version, self.gemm.weight._version):
            return kept[2].clone()
        out = self.gemm(x)
        self.memo[id(x)] = (x, (x._version, self.gemm.weight._version), out)
        while len(self.memo) > 8:
            self.memo.pop(next(iter(self.memo)))
        return out.clone()
