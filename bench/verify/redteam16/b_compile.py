# Honest: the forward compiled with torch.compile(fullgraph=True) and the default backend, as LLM answers often do.
# Under the ops check's dispatch-mode record dynamo refuses to compile, and fullgraph made that refusal an error
# (runtime_error for an honest answer); the recorder now runs compile directives eagerly.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self._fn = torch.compile(self._plain, fullgraph=True)

    def _plain(self, x, w, b):
        return torch.relu(torch.addmm(b, x, w.t()))

    def forward(self, x):
        return self._fn(x, self.gemm.weight, self.gemm.bias)
