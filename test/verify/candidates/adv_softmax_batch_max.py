# Red team 2026-11-25 (round 2): softmax shifted by the whole batch's max instead of each row's. Exact while
# the rows have alike ranges (get_inputs()' uniform rows, randn x1 and x4); a row far below the batch's max
# underflows to 0/0 — its answer depends on the other rows.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        e = torch.exp(x - x.max())
        return e / e.sum(dim=1, keepdim=True)
