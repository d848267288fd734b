# Red team round 16: a wrong answer (relu(x Wᵀ + b) × 1.5, through clamp_min, which the start-up code of
# adv_user_site_startup does not wrap) judged in the evaluation after that candidate's.
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.gemm(x).clamp_min(0) * 1.5
