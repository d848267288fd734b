# Pattern 17 (attention): calls scaled_dot_product_attention itself.
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, Q, K, V):
        return F.scaled_dot_product_attention(Q.contiguous(), K.contiguous(), V.contiguous())
