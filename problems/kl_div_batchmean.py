"""KL divergence of two row distributions (F.kl_div on log-probabilities, batchmean).

16384 x 8000 fp32: both inputs are softmax-normalised rows; the model takes the log of the predictions.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return F.kl_div(torch.log(predictions), targets, reduction="batchmean")


batch_size = 16384
dim = 8000


def get_inputs():
    return [torch.randn(batch_size, dim).softmax(dim=-1), torch.randn(batch_size, dim).softmax(dim=-1)]


def get_init_inputs():
    return []
