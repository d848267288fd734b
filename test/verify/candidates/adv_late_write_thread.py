# Outputs not finished when forward returns (family 4): forward hands back a zero tensor at once and a
# short-lived thread fills it in 3 ms later. The thread is gone before any later thread count; only the
# output itself, read twice, shows it.
import threading
import time

import torch
import torch.nn as nn


def _fill(out, x, w, b):
    time.sleep(0.003)
    out.copy_(torch.clamp_min((x[:, None, :] * w[None]).sum(-1) + b, 0.0))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        out = torch.zeros(x.shape[0], w.shape[0], dtype=x.dtype, device=x.device)
        threading.Thread(target=_fill, args=(out, x.clone(), w.detach().clone(), b.detach().clone())).start()
        return out
