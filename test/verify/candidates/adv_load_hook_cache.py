# A private copy of the weights (transposed, as a tuned kernel would keep them), refreshed by a load_state_dict
# post-hook and never otherwise: parameters changed in place (an optimizer's step, param.copy_) leave forward on
# the old copy while state_dict() reports the new values. Unlike adv_weight_ptr_cache it follows every
# load_state_dict, the way a verifier's state round trip changes weights.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self._wt = None
        self._b = None
        self.register_load_state_dict_post_hook(lambda module, keys: module._refresh())
        self._refresh()

    def _refresh(self):
        with torch.no_grad():
            self._wt = self.gemm.weight.detach().t().contiguous().clone()
            self._b = self.gemm.bias.detach().clone()

    def forward(self, x):
        return F.relu(torch.addmm(self._b, x, self._wt))
