# Two paths chosen by autograd's needs: with gradients wanted (grad mode on and an input or a parameter that
# requires them) the differentiable F.linear + relu; otherwise, under no_grad, the GEMM into a buffer of its own
# and the ReLU in place on it. Both give the same values.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        if torch.is_grad_enabled() and (x.requires_grad or self.gemm.weight.requires_grad):
            return torch.relu(nn.functional.linear(x, self.gemm.weight, self.gemm.bias))
        with torch.no_grad():
            out = torch.addmm(self.gemm.bias, x, self.gemm.weight.t())
            return out.relu_()
