# Round 11 (honest): in-place activations on intermediates only — the shift, exponent and normalisation written
# into the temporaries the forward made itself (never an input, a parameter or a buffer). Autograd accepts in-place
# writes to non-leaf temporaries in the forward, so it answers the same in every grad mode.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bn_eps=1e-5, bn_momentum=0.1, scale_shape=(1,)):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features, eps=bn_eps, momentum=bn_momentum)
        self.scale = nn.Parameter(torch.ones(scale_shape))

    def forward(self, x):
        y = torch.addmm(self.gemm.bias, x, self.gemm.weight.t())
        y = self.bn(y)
        y = y * self.scale
        y.sub_(y.amax(dim=1, keepdim=True))
        y.exp_()
        return y.div_(y.sum(dim=1, keepdim=True))
