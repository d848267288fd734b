# Honest: denormals flushed to zero only inside its own forward (torch.set_flush_denormal, put back in a finally
# before forward returns), a precision choice scoped to its own computation.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        was = torch.tensor([1e-40], dtype=torch.float32).mul(1.0).item() == 0.0
        torch.set_flush_denormal(True)
        try:
            return torch.relu(F.linear(x, self.gemm.weight, self.gemm.bias))
        finally:
            torch.set_flush_denormal(was)
