# Round 11: right under torch.no_grad(), wrong under torch.inference_mode() — the mode serving code (and
# torch's own inference guides) call models in: the ReLU is skipped there.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = torch.addmm(self.gemm.bias, x, self.gemm.weight.t())
        if torch.is_inference_mode_enabled():
            return y
        return torch.relu(y)
