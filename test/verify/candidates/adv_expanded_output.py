# Red team 2026-11-25 (round 2): the right values as a stride-0 view — one column of row sums, expanded over
# the columns and never written out (the reference writes all 256×4096). Every comparison reads right values.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.sum(dim=1, keepdim=True).expand(-1, x.shape[1])
