# An honest answer whose forward runs under torch.inference_mode() (a common serving idiom): its outputs are
# inference tensors, which have no version counter and refuse in-place updates outside inference mode.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    @torch.inference_mode()
    def forward(self, x):
        return torch.relu(F.linear(x, self.gemm.weight, self.gemm.bias))
