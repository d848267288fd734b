# Honest (false-flag sweep, 2026-11-30): the reference's forward, copied (the identity).
"""Python's random (own seeded instance), warnings.warn, logging configured at import, functools.lru_cache."""
import functools
import logging
import random
import warnings

import torch
import torch.nn as nn

logging.basicConfig(level=logging.INFO)
log = logging.getLogger("ff_problem")


@functools.lru_cache(maxsize=None)
def _perm(n: int) -> tuple:
    r = random.Random(7)
    p = list(range(n))
    r.shuffle(p)
    return tuple(p)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.proj = nn.Linear(features, features)

    def forward(self, x):
        if x.shape[0] > 4:
            warnings.warn("batch larger than 4: the permutation is the same for every row")
        log.debug("forward on %s", tuple(x.shape))
        idx = torch.tensor(_perm(x.shape[-1]))
        return self.proj(x)[:, idx]

