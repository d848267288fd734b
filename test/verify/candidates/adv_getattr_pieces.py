# Pattern 22: the replaced operator's name assembled from pieces to dodge a text search.
import torch.nn as nn
import torch.nn.functional as F

_OP = getattr(F, "scaled_dot_" + "product_" + "attention")


class ModelNew(nn.Module):
    def forward(self, Q, K, V):
        return _OP(Q, K, V)
