# Honest (false-flag sweep, 2026-11-30): one Cholesky factor serves the solve and the log-determinant
# (cholesky_solve; twice the log of its diagonal); QR, eigvalsh and svdvals kept.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, a, b):
        spd = a @ a.transpose(-1, -2) + self.n * torch.eye(self.n, dtype=a.dtype, device=a.device)
        chol = torch.linalg.cholesky(spd)
        x = torch.cholesky_solve(b, chol)
        diag = chol.diagonal(dim1=-2, dim2=-1)
        rr = torch.linalg.qr(spd).R
        r = rr.diagonal(dim1=-2, dim2=-1).abs()
        w = torch.linalg.eigvalsh(spd)
        s = torch.linalg.svdvals(a)
        return x.sum(-1) + r + w + s + (2 * diag.log().sum(-1)).unsqueeze(-1)
