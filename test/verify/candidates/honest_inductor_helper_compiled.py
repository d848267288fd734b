# Honest (red team round 16): the reference's helper compiled by the candidate itself with torch.compile's default
# backend (inductor), compiled at its first call — as an LLM answer that "fuses with torch.compile" does.
# Its compiled code goes to its own process's private cache directory (compiler_cache.py), never a path of another's.
import torch
import torch.nn as nn
import torch.nn.functional as F


def _fused(x, w, b):
    return F.gelu(torch.addmm(b, x, w.t()))


_compiled = torch.compile(_fused)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.proj = nn.Linear(features, features)

    def forward(self, x):
        return _compiled(x, self.proj.weight, self.proj.bias)
