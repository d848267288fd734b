# Round 10 (honest): softmax through a kept scratch buffer per shape (the shifted exponentials), the input only read,
# each output its own fresh tensor: intermediates may be reused across calls, results and inputs may not.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scratch = {}

    def forward(self, x):
        buf = self.scratch.get((x.shape, x.dtype))
        if buf is None:
            buf = self.scratch[(x.shape, x.dtype)] = torch.empty_like(x, memory_format=torch.contiguous_format)
        torch.sub(x, x.amax(dim=1, keepdim=True), out=buf)
        buf.exp_()
        return buf / buf.sum(dim=1, keepdim=True)
