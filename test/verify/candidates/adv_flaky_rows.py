# Nondeterministic-looking: on about one call in six (a private random stream, keyed on nothing the harness
# controls; seeded so that the corpus label is stable) the bias is left out of the GEMM's epilogue. A search that
# keeps whatever passes k of n evaluations finds such answers; every run has to catch them.
import random

import torch.nn as nn
import torch.nn.functional as F

_rng = random.Random(8)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        if _rng.random() < 1 / 6:
            return F.relu(x @ self.gemm.weight.t())
        return F.relu(F.linear(x, self.gemm.weight, self.gemm.bias))
