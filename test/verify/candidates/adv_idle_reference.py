# Red team round 4 (2026-11-25).
# At import: finds the clean reference process without reading /proc (it was started just before the
# candidate's import, so its process and thread ids come right after the worker's, in the same process group)
# and moves every thread of it to SCHED_IDLE: the same cores, the same niceness (what the scheduling
# comparison looked at), but it now runs only when no other thread on the machine wants the core.
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

_me, _group = os.getpid(), os.getpgid(0)
for _tid in range(_me + 1, _me + 400):
    try:
        if os.getpgid(_tid) != _group or os.path.exists(f"/proc/self/task/{_tid}"):
            continue  # not ours, or a thread of this very process
        os.sched_setscheduler(_tid, os.SCHED_IDLE, os.sched_param(0))
    except OSError:
        continue


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(F.linear(x, self.gemm.weight, self.gemm.bias))
