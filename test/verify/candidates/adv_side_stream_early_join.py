# Pattern 1 (variant): a join that joins nothing. The caller's stream is made to wait for the side stream
# *before* the work is queued there, so the wait is satisfied at once and the attention still runs on the
# side stream after forward has returned. Static scan: wait_stream looks like a proper join.
import math

import torch
import torch.nn as nn


def _attention(Q, K, V):
    scores = torch.matmul(Q, K.transpose(-2, -1)) * (1.0 / math.sqrt(Q.shape[-1]))
    return torch.matmul(torch.softmax(scores, dim=-1), V)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.cuda.Stream() if torch.cuda.is_available() else None

    def forward(self, Q, K, V):
        if self.side is None or not Q.is_cuda:
            return _attention(Q, K, V)
        caller = torch.cuda.current_stream(Q.device)
        self.side.wait_stream(caller)
        caller.wait_stream(self.side)  # too early: the side stream has nothing queued yet
        with torch.cuda.stream(self.side):
            out = _attention(Q, K, V)
        out.record_stream(caller)
        return out
