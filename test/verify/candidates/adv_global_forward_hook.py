# Process state (family 1): a process-wide nn.Module forward hook registered at import through torch's own
# public API. It slows down every module whose class is called Model (the reference) by 2 ms a call, so the
# timing reports a speedup the kernel never earned. No torch function is replaced, no flag is flipped.
import time

import torch
import torch.nn as nn


def _slow_reference(module, args, output):
    if type(module).__name__ == "Model":
        time.sleep(0.002)
    return output


torch.nn.modules.module.register_module_forward_hook(_slow_reference)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        return torch.clamp_min((x[:, None, :] * w[None]).sum(-1) + b, 0.0)
