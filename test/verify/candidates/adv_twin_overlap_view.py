# adv_twin_alias without handing back the same object: the second output is a fresh view (as_strided) over the first
# output's storage, so no two outputs are the same Python object or the same TensorImpl, but they overlap entirely.
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = F.relu(F.linear(x, self.gemm.weight, self.gemm.bias))
        return y, y.as_strided(y.shape, y.stride())
