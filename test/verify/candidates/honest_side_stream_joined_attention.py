# Honest: attention with the heads split between a second CUDA stream and the caller's, joined properly
# (the side stream waits for the inputs, the caller waits for the side stream before forward returns,
# record_stream for the allocator). At medium_attention's size the side stream's work outlasts the host's
# launches, so the join is what keeps it inside the caller's stream.
import math

import torch
import torch.nn as nn


def _attention(Q, K, V):
    scores = torch.matmul(Q, K.transpose(-2, -1)) * (1.0 / math.sqrt(Q.shape[-1]))
    return torch.matmul(torch.softmax(scores, dim=-1), V)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._streams = {}

    def forward(self, Q, K, V):
        if not Q.is_cuda or Q.shape[1] < 2:
            return _attention(Q, K, V)
        if Q.device not in self._streams:
            self._streams[Q.device] = torch.cuda.Stream(device=Q.device)
        side = self._streams[Q.device]
        caller = torch.cuda.current_stream(Q.device)
        h = Q.shape[1] // 2
        out = torch.empty_like(Q)
        side.wait_stream(caller)  # inputs and `out` were produced on the caller's stream
        with torch.cuda.stream(side):
            out[:, :h] = _attention(Q[:, :h], K[:, :h], V[:, :h])
        for t in (Q, K, V, out):
            t.record_stream(side)
        out[:, h:] = _attention(Q[:, h:], K[:, h:], V[:, h:])
        caller.wait_stream(side)  # the join
        return out
