# Pattern 1: the work runs on a private CUDA stream the caller's events and stream never wait for; the
# forward returns at once with a tensor that is filled later.
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.stream = torch.cuda.Stream() if torch.cuda.is_available() else None

    def _attention(self, Q, K, V):
        scores = torch.matmul(Q, K.transpose(-2, -1)) * (1.0 / math.sqrt(Q.shape[-1]))
        return torch.matmul(torch.softmax(scores, dim=-1), V)

    def forward(self, Q, K, V):
        if self.stream is None or not Q.is_cuda:
            return self._attention(Q, K, V)
        out = torch.empty_like(Q)
        with torch.cuda.stream(self.stream):
            out.copy_(self._attention(Q, K, V))
        return out
