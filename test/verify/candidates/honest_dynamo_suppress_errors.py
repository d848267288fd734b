# Honest (issue 15): the common LLM line `torch._dynamo.config.suppress_errors = True` at import — torch.compile
# falls back to eager code where it cannot compile; robustness, not precision. Disclosed by static_tamper (warn).
import torch
import torch._dynamo
import torch.nn as nn

torch._dynamo.config.suppress_errors = True


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        return torch.clamp_min((x[:, None, :] * w[None, :, :]).sum(-1) + b, 0.0)
