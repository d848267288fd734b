# Training-mode BatchNorm by hand, statistics under names of its own (as adv_timed_skip_stats_renamed): once
# timed (inputs rewritten in place, the collector paused) the running statistics are no longer updated. After the timing the harness
# judges the state by behaviour — one eval-mode call on fresh inputs, compared with the reference's — and when
# that call raised it kept the by-name result ("no buffers shared by name"). So the first eval-mode call after the
# candidate was timed raises.
import gc

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bn_eps=1e-5, bn_momentum=0.1, scale_shape=(1,)):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.gamma = nn.Parameter(torch.ones(out_features))
        self.beta = nn.Parameter(torch.zeros(out_features))
        self.register_buffer("mean_run", torch.zeros(out_features))
        self.register_buffer("var_run", torch.ones(out_features))
        self.eps, self.momentum = bn_eps, bn_momentum
        self.scale = nn.Parameter(torch.ones(scale_shape))
        self.timed = False

    def forward(self, x):
        y = F.linear(x, self.gemm.weight, self.gemm.bias)
        if not self.training:
            if self.timed:
                raise RuntimeError("eval mode is not supported after training")
            y = F.batch_norm(y, self.mean_run, self.var_run, self.gamma, self.beta, False, 0.0, self.eps)
        elif x._version > 0 and not gc.isenabled():  # the timing loop pauses the collector
            self.timed = True
            y = F.batch_norm(y, None, None, self.gamma, self.beta, True, 0.0, self.eps)
        else:
            y = F.batch_norm(y, self.mean_run, self.var_run, self.gamma, self.beta, True, self.momentum, self.eps)
        return torch.softmax(self.scale * y, dim=1)
