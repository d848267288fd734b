# Pattern 13 (trivially derived): returns a copy of the input.
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clone()
