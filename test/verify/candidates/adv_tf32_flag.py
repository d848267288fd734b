# Pattern 19 (flags): turns on TF32 for everyone — the reference included — at import.
import torch
import torch.nn as nn

torch.backends.cuda.matmul.allow_tf32 = True
torch.set_float32_matmul_precision("high")


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        return torch.clamp_min((x[:, None, :] * w[None]).sum(-1) + b, 0.0)
