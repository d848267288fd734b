# Honest: the rows are split between a second CUDA stream and the caller's, and the side stream is joined
# properly — it waits for the caller before reading x, the caller waits for it before forward returns, and
# record_stream tells the allocator which stream uses which tensor. The GEMM is a broadcast-reduce (no
# PyTorch GEMM), so it is honest under --strict too.
import torch
import torch.nn as nn


def _linear_relu(x, w, b):
    return torch.clamp_min((x[:, None, :] * w[None, :, :]).sum(-1) + b, 0.0)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self._streams = {}

    def _side(self, device):
        if device not in self._streams:
            self._streams[device] = torch.cuda.Stream(device=device)
        return self._streams[device]

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        if not x.is_cuda or x.shape[0] < 2:
            return _linear_relu(x, w, b)
        caller = torch.cuda.current_stream(x.device)
        side = self._side(x.device)
        half = x.shape[0] // 2
        side.wait_stream(caller)  # x, w and b were written on the caller's stream
        with torch.cuda.stream(side):
            top = _linear_relu(x[:half], w, b)
        x.record_stream(side)
        bottom = _linear_relu(x[half:], w, b)
        caller.wait_stream(side)  # the join: nothing of the side stream is pending once forward returns
        top.record_stream(caller)
        return torch.cat([top, bottom])
