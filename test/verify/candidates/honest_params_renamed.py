# Round 12 honest counterpart of adv_params_as_buffers: the weights kept as parameters under names of its own
# (state_dict keys differ, synced by seed), with Wᵀ cached in a non-persistent buffer refreshed when the weight
# changes. state_parameters counts parameters, not names: this passes.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        lin = nn.Linear(in_features, out_features)
        self.w = lin.weight
        self.b = lin.bias
        self.register_buffer("wt", torch.empty(0), persistent=False)
        self._key = None

    def forward(self, x):
        key = (self.w._version, self.w.data_ptr())
        if self._key != key or self.wt.shape != (self.w.shape[1], self.w.shape[0]):
            self.wt = self.w.detach().t().contiguous()
            self._key = key
        return torch.relu(torch.addmm(self.b, x, self.wt))
