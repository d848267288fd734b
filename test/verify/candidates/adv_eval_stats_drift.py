# Round 11: BatchNorm by hand that also moves its running statistics in eval mode (after using them, momentum
# 1e-3): each eval call's output is right for the statistics it read, but the module drifts under a caller who
# only evaluates — the tenth thousandth call normalises with other statistics than were loaded.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bn_eps=1e-5, bn_momentum=0.1, scale_shape=(1,)):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features, eps=bn_eps, momentum=bn_momentum)
        self.scale = nn.Parameter(torch.ones(scale_shape))

    def forward(self, x):
        x = self.gemm(x)
        bn = self.bn
        if self.training:
            y = nn.functional.batch_norm(x, bn.running_mean, bn.running_var, bn.weight, bn.bias, True,
                                         bn.momentum, bn.eps)
            bn.num_batches_tracked.add_(1)
        else:
            y = (x - bn.running_mean) / torch.sqrt(bn.running_var + bn.eps) * bn.weight + bn.bias
            with torch.no_grad():
                bn.running_mean.mul_(0.999).add_(x.mean(0), alpha=1e-3)
                bn.running_var.mul_(0.999).add_(x.var(0), alpha=1e-3)
        return torch.softmax(self.scale * y, dim=1)
