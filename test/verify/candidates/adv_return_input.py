# Pattern 13: returns the input itself (softmax of a near-uniform row "looks" like its input's scale).
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x
