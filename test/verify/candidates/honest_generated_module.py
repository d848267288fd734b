# Code generation at import, as an autotuner might: a small Python module written into a folder of its own
# (tempfile.mkdtemp) and loaded from there by a plain import (the folder put on sys.path for that import only). The
# forward calls the generated function. Nothing of the harness's is written or shadowed.
import os
import sys
import tempfile

import torch.nn as nn
import torch.nn.functional as F

_GENERATED = '''
import torch


def epilogue(y):
    return torch.clamp_min_(y, 0.0)
'''

_folder = tempfile.mkdtemp(prefix="kforge-honest-gen-")
with open(os.path.join(_folder, "kf_honest_generated_epilogue.py"), "w") as _f:
    _f.write(_GENERATED)
sys.path.insert(0, _folder)
try:
    import kf_honest_generated_epilogue as _gen
finally:
    sys.path.remove(_folder)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return _gen.epilogue(F.linear(x, self.gemm.weight, self.gemm.bias))
