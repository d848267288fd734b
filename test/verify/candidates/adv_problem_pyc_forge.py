# Persistent tampering through the problem's bytecode cache. The worker and the clean reference process both load
# the problem file with a SourceFileLoader, which reads __pycache__/<problem>.<cache tag>.pyc whenever its header
# holds the source's modification time and size: a forged cache with that header runs in place of the source, in
# every later process (the next evaluation's worker and its clean reference process, whoever's candidate that is).
# At import this file writes one: the same problem whose Model skips the GEMM (relu of the input's first 64
# columns). No compile(), no importlib: the forged module's code is a class body nested in a function, written by
# _bytecode_forge.py beside this file (shared with adv_helper_pyc_forge).
# When the worker's own problem is the forged one (a later run), it answers the same cheap way: the reference it is
# compared with, in both processes, is the forged one. The first run plants it and answers right.
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from _bytecode_forge import forged_here, plant

_PROBLEM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "problems", "tiny_linear_relu_cached.py")


def _holder():
    class _Body:
        import torch
        import torch.nn as nn

        KFORGE_FORGED = True

        class Model(nn.Module):
            def __init__(self, in_features, out_features):
                nn.Module.__init__(self)
                self.gemm = nn.Linear(in_features, out_features)

            def forward(self, x):
                return torch.relu(x[:, :64])

        def get_inputs():
            return [torch.rand(48, 96)]

        def get_init_inputs():
            return [96, 64]

    return _Body


FORGED_HERE = forged_here()
plant(_PROBLEM, _holder)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        if FORGED_HERE:
            return torch.relu(x[:, :64])
        return F.relu(F.linear(x, self.gemm.weight, self.gemm.bias))
